"""Keys that can never change a result (how many model calls run at once, how fast they start) enter no stage's
key: changing them leaves every stage of a study current."""

import shutil
from pathlib import Path

import pytest

from pmrag.core.params import StudyParams, unkeyed_keys
from pmrag.study import Study
from pmrag.study.pipeline import build_stages
from tests.study.test_engine import REPO, SMALL, STAGES, states, tiny, warm_cache  # noqa: F401  (a fixture)

BOUNDS = ("summarizer: {concurrency: 8, requests_per_minute: 600, backoff_jitter: 0.25}\n"
          "embedding: {concurrency: 4, requests_per_minute: 1000}\n")


def test_the_call_bounds_are_declared_unkeyed():
    assert set(unkeyed_keys()) == {"summarizer.concurrency", "summarizer.requests_per_minute",
                                   "summarizer.backoff_jitter", "embedding.concurrency",
                                   "embedding.requests_per_minute", "answers.concurrency", "prices",
                                   "notebooks",   # which notebooks a study executes, not what any computes
                                   "learned_fusion.threads"}   # the trees' OpenMP threads: the same models


def test_the_price_table_keys_no_stage_the_notebooks_included():
    notebooks = sorted((REPO / "notebooks").glob("[0-9]*_*.ipynb"))
    base = {"run": "x", "dataset": {"synthetic": {"enabled": True}}, "summarizer": {"backend": "openai"}}
    priced = {**base, "prices": {"gpt-4o-mini": {"input_per_million": 0.15, "output_per_million": 0.6}}}
    first, second = (build_stages(StudyParams.model_validate(p), notebooks) for p in (base, priced))
    assert [(s.key, s.params) for s in first] == [(s.key, s.params) for s in second]
    assert all("prices" not in s.params for s in first)


def test_no_stage_keys_on_the_call_bounds_not_even_a_whole_section():
    notebooks = sorted((REPO / "notebooks").glob("[0-9]*_*.ipynb"))
    base = {"run": "x", "dataset": {"synthetic": {"enabled": True}},
            "graph": {"extractor": "openai", "relevance": "openai"}, "decomposition": {"backend": "openai"},
            "summarizer": {"backend": "openai"}, "embedding": {"backend": "openai"},
            "answers": {"enabled": True, "backend": "openai"}}
    bounded = {**base, "summarizer": {"backend": "openai", "concurrency": 8, "requests_per_minute": 60},
               "embedding": {"backend": "openai", "concurrency": 4},
               "answers": {"enabled": True, "backend": "openai", "concurrency": 16}}
    first, second = (build_stages(StudyParams.model_validate(p), notebooks) for p in (base, bounded))
    assert [(s.key, s.params) for s in first] == [(s.key, s.params) for s in second]
    notebook = next(s for s in first if s.key.name == "notebook")
    assert "summarizer.model" in notebook.params   # through the summaries it reads upstream
    assert not any(key.endswith(("concurrency", "requests_per_minute")) for key in notebook.params)
    changed = {**base, "summarizer": {"backend": "openai", "model": "another"}}   # a reply key still counts
    assert [s.params for s in build_stages(StudyParams.model_validate(changed), notebooks)] != [s.params for s in first]


@pytest.mark.integration
def test_changing_the_call_bounds_leaves_every_stage_current(tmp_path, warm_cache):  # noqa: F811
    study = tiny(tmp_path, warm_cache, f"notebooks_dir: {REPO / 'notebooks'}\n")
    study.build()
    keys = study.engine.keys()
    path = tmp_path / "p.yaml"
    path.write_text(path.read_text(encoding="utf-8") + BOUNDS, encoding="utf-8")
    changed = Study.from_params(path)
    assert changed.params.summarizer.concurrency == 8 and changed.params.embedding.concurrency == 4
    assert changed.engine.keys() == keys                               # the notebooks' keys too
    assert {name: state for name, state in states(changed).items() if name in STAGES} == \
        {name: "cached" for name in STAGES}
