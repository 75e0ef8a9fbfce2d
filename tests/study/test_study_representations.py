"""The Study's summary and vector stages on a tiny real dataset: cached, resumable, private by default."""

import shutil
import time
from pathlib import Path

import numpy as np
import pytest

from pmrag.represent import privacy
from pmrag.core import store
from pmrag.core.errors import PmragError
from pmrag.represent.embed import shorten_for_embedding
from pmrag.represent.representations import EmbeddingTextTemplate
from pmrag.study import Study
from pmrag.study.runner import stage_log

pytestmark = pytest.mark.integration

FIXTURES = Path(__file__).parents[1] / "fixtures"


def make_study(tmp_path, extra: str = "") -> Study:
    data = tmp_path / "data"
    data.mkdir(exist_ok=True)
    shutil.copy(FIXTURES / "line_json" / "family.json", data / "family.json")
    params = tmp_path / "p.yaml"
    params.write_text(
        "run: tiny\noutputs_dir: out\ncache_dir: cache\ndataset: {inputs: [data/family.json]}\n" + extra, encoding="utf-8"
    )
    return Study.from_params(params)


def build_vectors(study: Study) -> dict[str, str]:
    """Every embedded representation's vector stage (computed or loaded): representation → matrix path."""
    from pmrag.study.items import embedded_representations

    return {rep: study.get(f"vectors:{rep}").path for rep in embedded_representations(study.params)}


def test_representations_follow_the_chunks_and_the_extractive_stand_in(tmp_path):
    study = make_study(tmp_path)
    reps = study.representations()
    chunks = study.chunks()
    assert reps["chunk_id"].tolist() == chunks["chunk_id"].tolist()
    assert (reps["summary_status"] == "ok").all()
    section = study.params.representations
    template = EmbeddingTextTemplate.from_prompts(section.prompts, section.excerpt_chars)
    assert reps["embedding_text"].tolist() == [template.build(s, r) for s, r in zip(reps["summary"], reps["raw_text"])]
    assert study.params.summarizer.label().startswith("extractive")
    # every chunk already summarized: a second study of the same params loads the summaries, redoing nothing
    again = make_study(tmp_path)
    assert {s.name: s.state for s in again.status()}["summaries"] == "cached"
    since = time.time()
    assert again.summaries()["run_id"].tolist() == study.summaries()["run_id"].tolist()
    assert [line["action"] for line in stage_log(study.run_dir, since) if line["stage"] == "summaries"] == ["loaded"]


def test_changing_the_summarizer_output_settings_recomputes_summaries(tmp_path):
    study = make_study(tmp_path)
    first_runs = set(study.summaries()["run_id"])
    again = make_study(tmp_path, "summarizer: {max_input_chars: 50}\n")
    assert "param summarizer.max_input_chars: 7000 → 50" in {s.name: s.reason for s in again.status()}["summaries"]
    summaries = again.summaries()
    assert set(summaries["run_id"]).isdisjoint(first_runs)
    assert (summaries["input_chars"] <= 50).all()


def test_openai_summarizer_to_a_remote_host_is_refused_before_anything_is_sent(tmp_path):
    study = make_study(tmp_path, "summarizer: {backend: openai, base_url: 'https://api.openai.com/v1'}\n")
    with pytest.raises(privacy.RemoteNotAllowed, match="set 'allow_remote: true' in the params"):
        study.summaries()
    with study.store.connect() as conn:
        assert conn.execute(store.select(store.func.count()).select_from(store.summaries)).scalar_one() == 0


def test_vectors_are_stored_per_representation_with_the_text_sent(tmp_path):
    study = make_study(tmp_path, "embedding: {max_chars: 120}\n")
    paths = build_vectors(study)
    assert sorted(paths) == ["embedding_text", "raw_text", "summary"]
    assert all((study.run_dir / p).is_file() for p in paths.values())
    reps = study.representations().set_index("chunk_id")
    inputs = store.read_table(study.store, "embedding_inputs")
    for name in paths:
        matrix, chunk_ids = study.vectors(name)
        assert matrix.dtype == np.float32 and matrix.shape == (len(reps), 384)
        assert np.allclose(np.linalg.norm(matrix, axis=1), 1, atol=1e-3)
        sent = inputs[inputs["representation"] == name].set_index("chunk_id")["text_sent"]
        assert [sent[c] for c in chunk_ids] == [shorten_for_embedding(reps.loc[c, name], 120) for c in chunk_ids]
    summary = study.vector_summary().set_index("representation")
    assert summary["rows"].tolist() == [len(reps)] * 3 and (summary["sent_chars_max"] <= 121).all()
    assert (summary["dim"] == 384).all() and set(summary["dtype"]) == {"float32"}
    for name in paths:   # the lengths are those of the texts sent, counted again here
        sent = inputs.loc[inputs["representation"] == name]
        assert summary.loc[name, "sent_chars_max"] == sent["text_sent"].str.len().max()
        assert summary.loc[name, "shortened"] == (sent["source_chars"] > sent["text_sent"].str.len()).sum()
    matrix, _ = study.vectors("summary")   # a matrix rewritten with a row less: its header says so
    np.save(study.run_dir / paths["summary"], matrix[:-1])
    with pytest.raises(PmragError, match=r"shape \(\d+, 384\) float32, expected \(\d+, 384\) float32"):
        study.vector_summary()


def test_a_second_study_on_the_same_cache_embeds_nothing(tmp_path, monkeypatch):
    import pmrag.represent.embed

    build_vectors(make_study(tmp_path))
    shutil.rmtree(tmp_path / "out")  # a fresh run directory; only the shared cache is left
    calls = []
    original = pmrag.represent.embed.E5LocalEmbedder.embed
    monkeypatch.setattr(pmrag.represent.embed.E5LocalEmbedder, "embed",
                        lambda self, texts, kind: calls.append(len(texts)) or original(self, texts, kind))
    study = make_study(tmp_path)
    build_vectors(study)
    assert calls == []
    assert study.vectors("raw_text")[0].shape[0] == len(study.chunks())
