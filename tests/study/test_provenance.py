"""outputs/<run>/environment.json: what a run's numbers came from, and nothing private."""

import pytest
import json

from pmrag.study.provenance import ENVIRONMENT_FILE, environment, params_digest, summary_lines, write_environment

from conftest import make_tiny_study

pytestmark = pytest.mark.integration


def test_environment_records_machine_packages_commit_params_models_and_stage_keys(tmp_path, monkeypatch):
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test-provenance-secret")
    study = make_tiny_study(tmp_path)
    keys = study.engine.keys()
    path = write_environment(study.run_dir, study.params, keys)
    assert path == study.run_dir / ENVIRONMENT_FILE
    text = path.read_text(encoding="utf-8")
    env = json.loads(text)
    assert env["python"].count(".") == 2 and env["cpu_count"] >= 1 and env["os"] and env["cpu"]
    assert env["packages"]["pmrag"] == "0.1.0" and env["packages"]["pandas"] == "3.1.1"
    assert env["stage_keys"] == keys and set(keys) >= {"ingest", "chunks", "runs:raw_text_bm25", "failures"}
    assert env["params"] == {"file": "p.yaml", "digest": params_digest(study.params)}
    assert env["models"]["embedding"]["model"] == "multilingual-e5-small-q4"
    assert env["models"]["summarizer"]["label"].startswith("extractive")
    commit = env["project"]["commit"]
    assert commit is None or (len(commit) == 40 and isinstance(env["project"]["dirty"], bool))
    assert "sk-test-provenance-secret" not in text and "OPENAI_API_KEY" not in text


def test_params_digest_moves_with_any_key_and_only_then(tmp_path):
    for name in "abc":
        (tmp_path / name).mkdir()
    first = make_tiny_study(tmp_path / "a").params
    same = make_tiny_study(tmp_path / "b").params
    other = make_tiny_study(tmp_path / "c", "bm25: {k1: 1.5}\n").params
    assert params_digest(first) != params_digest(other)
    assert params_digest(first.model_copy(update={"outputs_dir": same.outputs_dir, "cache_dir": same.cache_dir,
                                                  "dataset": same.dataset})) == params_digest(same)


def test_run_readme_summary_names_commit_params_models_and_machine(tmp_path):
    study = make_tiny_study(tmp_path)
    write_environment(study.run_dir, study.params, {})
    lines = summary_lines(study.run_dir)
    env = environment(study.params, {})
    assert len(lines) == 4
    assert f"digest `{env['params']['digest'][:12]}`" in lines[0]
    assert "extractive" in lines[1] and "multilingual-e5-small-q4" in lines[1]
    assert env["cpu"] in lines[2]
    assert summary_lines(tmp_path / "no-run") == []
