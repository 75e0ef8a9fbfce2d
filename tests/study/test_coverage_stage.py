"""The coverage stage as a study uses it: computed like any stage, keyed on what changes it, said loudly
(warnings, notebook tables, the run README's headline)."""

import pytest
import pandas as pd

from conftest import make_tiny_study
from pmrag.present.artifacts import T
from pmrag.present.report import headline

pytestmark = pytest.mark.integration

TRIMMED = "chunking: {window_size: 4, stride: 3, max_summary_input_chars: 60}\nanalysis: {aggregate_type: contextual}\n"


def test_the_fixed_trim_leaves_messages_in_no_chunk_and_the_study_says_so(tmp_path):
    study = make_tiny_study(tmp_path, TRIMMED)
    coverage = study.coverage()
    members = study.chunk_messages()
    unchunked = set(study.messages()["message_id"]) - set(members["message_id"])
    assert unchunked and int(coverage.chunk_coverage["in_no_chunk"].sum()) == len(unchunked)
    [warning] = [w for w in coverage.warnings if "in no chunk" in w]
    assert warning.startswith(f"{len(unchunked)} of {len(study.messages())} messages") and "'resume'" in warning


def test_resume_leaves_nothing_out_and_a_changed_cut_recomputes_only_coverage_downstream(tmp_path):
    study = make_tiny_study(tmp_path, TRIMMED.replace("60}", "60, trim_policy: resume}"))
    assert int(study.coverage().chunk_coverage["in_no_chunk"].sum()) == 0
    assert not [w for w in study.coverage().warnings if "in no chunk" in w]
    stale = {s.name: s.state for s in study.status()}
    assert stale["coverage"] == "cached"
    text = (tmp_path / "p.yaml").read_text(encoding="utf-8")
    (tmp_path / "p.yaml").write_text(text + "embedding: {max_chars: 40}\n", encoding="utf-8")
    from pmrag.study import Study

    again = Study.from_params(tmp_path / "p.yaml")
    status = {s.name: s for s in again.status()}
    assert status["coverage"].state == "stale" and "embedding.max_chars" in status["coverage"].reason
    hidden = again.coverage().summary.set_index("retriever")
    assert hidden.loc["raw_text_vector", "partly"] + hidden.loc["raw_text_vector", "hidden"] > 0   # a 40-char cut
    assert hidden.loc["raw_text_bm25", "shown"] == hidden.loc["raw_text_bm25", "evidence_messages"]


def test_the_run_readme_headline_states_the_losses(tmp_path):
    study = make_tiny_study(tmp_path, TRIMMED + "embedding: {max_chars: 40}\n")
    coverage = study.coverage()
    from pmrag.evaluate.coverage import recall_by_visibility

    study.save_table(T.messages_in_no_chunk, coverage.chunk_coverage)
    study.save_table(T.questions_dropped, coverage.losses_by_reason)
    study.save_table(T.evidence_visibility, coverage.summary)
    study.save_table(T.recall_by_evidence_visibility, recall_by_visibility(coverage.by_question, study.metrics()))
    lines = headline(study.run_dir)
    left = int(coverage.chunk_coverage["in_no_chunk"].sum())
    assert f"- Messages in no chunk: {left:,} of {len(study.messages()):,} (no retriever can find them)" in lines
    assert "- Questions not evaluated: 0 of 2" in lines
    [seen] = [line for line in lines if line.startswith("- Primary evidence a retriever never sees")]
    summary = coverage.summary.set_index("retriever")
    assert f"`raw_text_vector` {summary.loc['raw_text_vector', 'share_hidden']:.0%} hidden" in seen
    assert "`raw_text_bm25`" not in seen   # bm25 on raw_text sees every kept message whole
    saved = pd.read_csv(study.run_dir / T.questions_dropped.file)
    assert list(saved.columns) == ["stage", "reason", "questions", "summarizer"]
