"""Where a study names the hashed-stand-in vectors: the vector stages' key and description, the run README's Models
line and every saved table (an ``embedder`` column); nothing changes for a study whose vectors come from a model."""

from __future__ import annotations

import json

import pandas as pd
import pytest

from pmrag.core.params import StudyParams
from pmrag.present.artifacts import T
from pmrag.study.declare import Keys
from pmrag.study.keyed import MODEL_KEYS, model_package, vectors_note
from pmrag.study.provenance import ENVIRONMENT_FILE, models, summary_lines

from conftest import make_tiny_study


def _params(**sections) -> StudyParams:
    return StudyParams(run="x", dataset={"synthetic": {"enabled": True}}, **sections)


def test_the_stage_keys_description_and_run_readme_name_the_stand_in(tmp_path):
    params = _params(embedding={"backend": "hashed-stand-in", "stand_in_dim": 64})
    assert "stand_in_dim" in Keys(*MODEL_KEYS).names(params, None)
    assert "stand_in_dim" not in Keys(*MODEL_KEYS).names(_params(), None)
    assert model_package(params, None) == () and vectors_note(_params()) == ""
    assert vectors_note(params) == f" ({params.embedding.label()})"
    env = {"project": {"commit": None, "dirty": None}, "params": {"file": "p.yaml", "digest": "0" * 64},
           "models": models(params), "python": "3.11.0", "os": "Linux", "cpu": "cpu", "cpu_count": 2, "packages": {}}
    (tmp_path / ENVIRONMENT_FILE).write_text(json.dumps(env), encoding="utf-8")
    assert summary_lines(tmp_path)[1].endswith(f"embeddings {params.embedding.label()}")
    env["models"] = models(_params())
    (tmp_path / ENVIRONMENT_FILE).write_text(json.dumps(env), encoding="utf-8")
    assert summary_lines(tmp_path)[1].endswith("embeddings e5-local `multilingual-e5-small-q4`")


@pytest.mark.integration
def test_every_saved_table_names_the_stand_in_vectors(tmp_path):
    study = make_tiny_study(tmp_path)
    frame = pd.DataFrame({"Item": ["messages"], "Value": [3]})
    assert study.embedder_note() is None
    assert "embedder" not in pd.read_csv(study.run_dir / study.save_table(T.table1_dataset, frame)).columns
    study.params = study.params.model_copy(update={
        "embedding": study.params.embedding.model_copy(update={"backend": "hashed-stand-in", "model": None})})
    label = study.params.embedding.label()
    assert study.embedder_note() == label and "not a language model" in label
    written = pd.read_csv(study.run_dir / study.save_table(T.table1_dataset, frame))
    assert written["embedder"].tolist() == [label] and written["summarizer"].tolist() == [study.summarizer_note()]
