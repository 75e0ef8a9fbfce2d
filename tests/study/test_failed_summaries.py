"""A study whose summarizer refuses some chunks (``failure_policy: retry``) finishes (``pmrag study``), counts the
chunks it could not summarize among its losses, and the next run calls the model for exactly those chunks."""

import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from conftest import warm_cache
from responses_server import Reply
from tests.study.test_study_runner import write_notebook

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures"
REFUSED = ("no time key here", "null time")   # a line of each of two of the family chat's five chunks

pytestmark = pytest.mark.usefixtures("clean_env")


def write_study(root: Path, base_url: str) -> Path:
    """The family chat and its questions, the openai summarizer on ``base_url``, one trivial notebook."""
    (root / "data").mkdir()
    shutil.copy(FIXTURES / "line_json" / "family.json", root / "data" / "family.json")
    shutil.copy(FIXTURES / "questions" / "family_questions.json", root / "data" / "questions.json")
    (root / "notebooks").mkdir()
    write_notebook(root / "notebooks" / "01_done.ipynb", "done = True")
    warm_cache(root / "cache")
    path = root / "p.yaml"
    path.write_text(
        "run: tiny\noutputs_dir: out\ncache_dir: cache\nnotebooks_dir: notebooks\n"
        "dataset: {inputs: [data/family.json], questions: data/questions.json}\n"
        # BM25 retrievers only: the summaries reach the rankings through summary_bm25 and embedding_text_bm25,
        # and no new text waits for the embedding model
        "retrieval: {retrievers: [raw_text_bm25, summary_bm25, embedding_text_bm25]}\n"
        "hybrid: {pairings: [[raw_text_bm25, embedding_text_bm25]]}\n"
        "analysis: {aggregate_type: contextual, reference_retriever: summary_bm25, "
        "diagnostic_hybrid: [raw_text_bm25, embedding_text_bm25, 0.5]}\n"
        "statistics: {coverage_datasets: 50, coverage_resamples: 100}\n"
        "bootstrap: {n_resamples: 100}\n"
        f"summarizer: {{backend: openai, base_url: '{base_url}', interval_s: 0, timeout_s: 10, "
        "failure_policy: retry, max_retries: 1, backoff_initial_s: 0, backoff_max_s: 0}\n", encoding="utf-8")
    return path


def refused(body: dict) -> bool:
    return any(line in (body or {}).get("input", "") for line in REFUSED)


def pmrag_study(params: Path) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "pmrag", "study", str(params)], cwd=params.parent,
                          capture_output=True, text=True, timeout=300)


@pytest.mark.integration
def test_a_study_with_failed_summaries_finishes_counts_them_and_the_next_run_fills_exactly_them(server, tmp_path):
    from pmrag.study import Study

    healthy = {"now": False}
    server.route = lambda body: None if healthy["now"] or not refused(body) else Reply.error(503)
    params = write_study(tmp_path, server.base_url)

    result = pmrag_study(params)
    assert result.returncode == 0, result.stderr[-2000:]              # finishes: no internal error
    assert "warning: 2 of 5 chunks have no summary" in result.stderr
    assert "[calls] summaries: 5/5 (ok 3, error 2)" in result.stderr
    study = Study.from_params(params)
    summaries = study.summaries().set_index("chunk_id")
    failed = sorted(summaries.index[summaries["status"] == "error"])
    assert len(failed) == 2 and len(summaries) == 5
    assert summaries.loc[failed, "summary"].isna().all()
    assert (summaries.loc[failed, "attempts"] == 2).all()             # the call and its one retry, then recorded
    assert len(server.response_requests()) == 3 + 2 * 2               # each chunk once per run, retries included
    representations = study.representations().set_index("chunk_id")
    assert (representations.loc[failed, "summary"] == "").all()
    assert (representations.loc[failed, "summary_status"] == "error").all()
    coverage = study.coverage()
    assert coverage.chunks_without_summary == 2
    assert any(line.startswith("2 of 5 chunks have no summary") for line in coverage.warnings)
    assert (tmp_path / "out" / "tiny" / "notebooks" / "01_done.ipynb").is_file()   # the notebooks ran too
    assert {row.name: row.state for row in study.engine.status()}["summaries"] == "partial"

    healthy["now"] = True
    before = len(server.response_requests())
    result = pmrag_study(params)
    assert result.returncode == 0 and "no summary" not in result.stderr, result.stderr[-2000:]
    again = server.response_requests()[before:]
    assert len(again) == 2 and all(refused(request.body) for request in again)   # exactly the failed chunks
    study = Study.from_params(params)
    assert set(study.summaries()["status"]) == {"ok"}
    assert study.coverage().chunks_without_summary == 0
    assert {row.name: row.state for row in study.engine.status()}["summaries"] == "cached"
