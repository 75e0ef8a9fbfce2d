"""The study's statistics and failure analysis end to end, the public export's privacy, the run README."""

import re

import pandas as pd
import pytest

from conftest import make_tiny_study
from pmrag.core.errors import ParamsError
from pmrag.evaluate.analysis import question_types
from pmrag.evaluate.sweep import select_overall
from pmrag.present import public, report
from pmrag.present.artifacts import T
from pmrag.study.params import load_params

RAW_TEXT_ONLY = "retrievers: [raw_text_bm25, summary_bm25, embedding_text_bm25, raw_text_vector]"
TINY = (
    f"retrieval: {{{RAW_TEXT_ONLY}}}\nbootstrap: {{n_resamples: 200}}\n"
    "hybrid: {pairings: [[raw_text_bm25, raw_text_vector], [summary_bm25, raw_text_vector]], beta_step: 0.25}\n"
    "analysis: {aggregate_type: contextual, reference_retriever: summary_bm25, diagnostic_hybrid: [raw_text_bm25, raw_text_vector, 0.5]}\n"
)


@pytest.fixture(scope="module")
def study(tmp_path_factory):
    return make_tiny_study(tmp_path_factory.mktemp("analysis"), TINY)


@pytest.fixture(scope="module")
def results(study):
    return study.per_question(), study.reliability(), study.failures()


@pytest.mark.integration
def test_reliability_compares_the_selected_best_hybrid(study, results):
    per_question, rel, _ = results
    chosen = study.selection()
    best, diagnostic = str(chosen.best), str(chosen.diagnostic)
    assert chosen.best == study.hybrids().selected
    assert best in set(per_question["retriever"]) and diagnostic == "hybrid:raw_text_bm25+raw_text_vector@0.50"
    assert str(chosen.reference) == "summary_bm25"
    diff = rel.differences
    assert diff["method_a"].tolist() == [best, best]
    assert diff["method_b"].tolist() == ["summary_bm25", diagnostic]
    recall = per_question.pivot(index="question_id", columns="retriever", values="recall@5")
    assert diff["delta"].iloc[0] == pytest.approx((recall[best] - recall["summary_bm25"]).mean(), abs=1e-12)
    assert set(rel.by_type["question_type"]) == {"overall", *question_types(study.evaluation().questions)}


@pytest.mark.integration
def test_analysis_cutoffs_are_scored_even_when_retrieval_ks_omit_them(tmp_path):
    study = make_tiny_study(tmp_path, f"retrieval: {{{RAW_TEXT_ONLY}, ks: [1, 5]}}\n"
                                      "hybrid: {pairings: [[raw_text_bm25, raw_text_vector]]}\n"
                                      "analysis: {aggregate_type: contextual, recovery_ks: [7], diagnostic_hybrid: [raw_text_bm25, raw_text_vector, 0.5]}\n")
    assert study.params.metric_ks() == (1, 5, 7)
    assert {"recall@1", "recall@5", "recall@7"} <= set(study.metrics().columns)
    assert {"recall@1", "recall@5", "recall@7"} <= set(study.per_question().columns)


@pytest.mark.integration
def test_failure_tables_agree_with_the_per_question_metrics(study, results):
    per_question, _, found = results
    chosen = study.selection()
    best = per_question[per_question["retriever"] == str(chosen.best)]
    overall = found.table7.set_index("Question type").loc["Overall"]
    assert overall["Top-5 failures"] == int((best["recall@5"] == 0).sum())
    diagnostic = per_question[per_question["retriever"] == str(chosen.diagnostic)]
    assert sorted(found.labels["question_id"]) == sorted(diagnostic.loc[diagnostic["recall@5"] == 0, "question_id"])
    assert found.table9["Questions"].sum() == len(best)


def test_selected_hybrid_breaks_recall_ties_by_ndcg_then_mrr():
    best = pd.DataFrame({"bm25": ["a_bm25", "b_bm25", "c_bm25"], "vector": ["v_vector"] * 3, "beta": [0.3, 0.4, 0.5],
                         "recall@5": [0.5, 0.5, 0.4], "ndcg@5": [0.30, 0.31, 0.9], "mrr@5": [0.9, 0.1, 0.9]})

    pairings = [("a_bm25", "v_vector"), ("b_bm25", "v_vector"), ("c_bm25", "v_vector")]
    assert select_overall(best, pairings)["bm25"] == "b_bm25"
    tied = best.assign(**{"ndcg@5": 0.3, "mrr@5": 0.5})
    assert select_overall(tied, pairings)["bm25"] == "a_bm25"   # full tie: configured pairing order
    assert select_overall(tied, pairings[::-1])["bm25"] == "b_bm25"


def _private_strings_found(folder, study):
    """An independent scan of every public file for the corpus's private strings."""
    messages, questions = study.messages(), study.questions()
    content = {p.relative_to(folder).as_posix(): p.read_text(encoding="utf-8")   # full/ (full precision) too
               for p in folder.rglob("*") if p.is_file()}
    found = []
    for name, text in content.items():
        for source in set(messages["source"]):
            if re.search(rf"(?<![0-9A-Za-z_]){re.escape(source)}(?![0-9A-Za-z_])", text):
                found.append((name, "source", source))
        for sender in set(messages["sender"]) - {"SYSTEM"}:
            if re.search(rf"(?<![0-9A-Za-z_]){re.escape(sender)}(?![0-9A-Za-z_])", text):
                found.append((name, "sender", sender))
        for message in set(messages["text"]):
            if len(message.strip()) >= 4 and message in text:
                found.append((name, "message", message))
        for question in questions["text"]:
            if question in text:
                found.append((name, "question", question))
        if re.search(r"\d{4}-\d{2}-\d{2}|\b\d{1,2}:\d{2}\b", text):
            found.append((name, "timestamp", ""))
    return found


def export(study, per_question, rel, found, run_dir=None, tables=None, vocabulary=None):
    """The public export as notebook 06 writes it (``tables``/``vocabulary`` replace the study's own)."""
    return public.export_tables(
        run_dir or study.run_dir, study.params.run, per_question,
        public.public_tables(rel, found, str(study.selection().best)) if tables is None else tables,
        public.vocabulary(rel, found) if vocabulary is None else vocabulary,
        public.private_strings(study.messages(), study.chunks(), study.questions()),
        study.params.analysis.public_question_ids)


@pytest.mark.integration
def test_public_export_holds_ids_types_and_metrics_only(study, results):
    per_question, rel, found = results
    written, mapping = export(study, per_question, rel, found)
    study.save_table(T.public_question_ids, mapping)
    folder = study.run_dir / "public"
    assert "public/per_question_metrics.csv" in written and (folder / "README.md").is_file()
    rows = pd.read_csv(folder / "per_question_metrics.csv")
    assert rows.columns[:3].tolist() == ["retriever", "question_id", "question_type"]
    assert all(re.fullmatch(r"(recall|mrr|ndcg)@\d+", c) for c in rows.columns[3:])
    assert set(rows["question_id"]) == {public.pseudonym(q) for q in per_question["question_id"]}
    assert _private_strings_found(folder, study) == []
    mapping = pd.read_csv(study.run_dir / "tables" / "public_question_ids.csv")
    assert set(mapping["question_id"]) == set(per_question["question_id"])


@pytest.mark.integration
def test_public_export_refuses_a_private_string_and_writes_nothing(study, results, tmp_path):
    per_question, rel, found = results
    text = next(t for t in study.messages()["text"] if len(t) >= 6)
    for leaked, vocabulary in ((pd.DataFrame({"note": [text]}), {text}),             # vocabulary cannot launder it
                               (pd.DataFrame({"when": ["2024-04-09"]}), {"2024-04-09"}),
                               (pd.DataFrame({"who": ["Aki"]}), set())):
        with pytest.raises(public.PublicExportError) as error:
            export(study, per_question, rel, found, run_dir=tmp_path, tables={"leak": leaked}, vocabulary=vocabulary)
        assert text not in str(error.value) and "leak" in str(error.value)
    assert not (tmp_path / "public").exists()


@pytest.mark.integration
def test_demo_public_export_leaks_no_corpus_text_names_or_sources():
    from pathlib import Path

    from pmrag.study import Study

    demo = Study.from_params(Path(__file__).parents[2] / "params" / "demo.yaml")
    export(demo, demo.per_question(), demo.reliability(), demo.failures())
    folder = demo.run_dir / "public"
    assert len(list(folder.glob("*.csv"))) >= 10
    assert _private_strings_found(folder, demo) == []


@pytest.mark.integration
def test_the_history_stages_hold_what_the_messages_and_chunks_give(study):
    from pmrag.chunking.stats import chunk_speakers

    private = study.private_strings()
    assert private == public.private_strings(study.messages(), study.chunks(), study.questions())
    assert private["sender"] and private["message text"] and private["question text"]
    speakers = study.chunk_speakers()
    pd.testing.assert_series_equal(speakers, chunk_speakers(study.chunk_messages(), study.messages()))
    assert set(speakers.index) == set(study.chunk_table()["chunk_id"])


@pytest.mark.integration
def test_inspector_from_results_shows_the_gold_of_the_chosen_question(study, results):
    from pmrag.chunking.stats import chunk_speakers
    from pmrag.present.inspector import FailureInspector

    _, _, found = results
    evaluation = study.evaluation()
    speakers = chunk_speakers(study.chunk_messages(), study.messages())
    best = str(study.selection().best)
    inspector = FailureInspector.from_results(
        evaluation.questions, study.chunks().assign(speakers=lambda c: c["chunk_id"].map(speakers).fillna("")),
        evaluation.qrels, study.rankings(), study.hybrids().best, pairings=study.params.hybrid.pairings,
        labels=found.labels, focus=best)
    assert inspector.data.focus == best and best in inspector.data.retrievers
    qid = inspector.question_ids[0]
    inspector.question.value = qid
    gold = study.qrels().query("question_id == @qid and relevance > 0")["chunk_id"]
    assert all(chunk in inspector.gold.value for chunk in gold)


@pytest.mark.integration
def test_the_studys_fused_rankings_are_the_ones_the_inspector_would_fuse(study, results):
    """Notebook 06 gives the inspector ``rankings(fused=True)`` so that it does not fuse the hybrids again."""
    from pmrag.present.inspector.data import InspectorData

    _, _, found = results
    evaluation, chosen = study.evaluation(), study.selection()
    singles, fused = study.rankings(), study.rankings(fused=True)
    assert list(fused)[:len(singles)] == list(singles) and str(chosen.best) in fused and str(chosen.diagnostic) in fused
    made = [InspectorData.from_results(evaluation.questions, study.chunks().assign(speakers=""), evaluation.qrels,
                                       given, study.hybrids().best, pairings=study.params.hybrid.pairings,
                                       labels=found.labels, focus=str(chosen.best), diagnostic=chosen.diagnostic)
            for given in (singles, fused)]
    assert list(made[0].rankings) == list(made[1].rankings)
    for name, ranking in made[0].rankings.items():
        pd.testing.assert_frame_equal(ranking, made[1].rankings[name], check_exact=False, rtol=1e-12)


@pytest.mark.integration
def test_run_readme_lists_outputs_with_headline_numbers(study, results):
    _, rel, found = results
    study.save_table(T.bootstrap_cis, rel.cis)
    study.save_table(T.table5_differences, rel.differences)
    study.save_table(T.table7_top5_failures, found.table7)
    readme = report.write_run_readme(study.run_dir, "Tiny").read_text(encoding="utf-8")
    best = study.selection().best
    assert f"Selected best hybrid: `{best}`" in readme
    assert "ΔRecall@5" in readme and "tables/bootstrap_cis.csv" in readme
    assert "Selection-aware" not in readme   # notebook 09's table is not there yet
    from pmrag.present.statistics import selection_table

    selection = selection_table(study.statistics())
    study.save_table(T.selection_summary, selection)
    readme = report.write_run_readme(study.run_dir, "Tiny").read_text(encoding="utf-8")
    paper = selection[(selection["metric"] == "recall@5")].iloc[0]
    corrected = f"{paper['bias_corrected']:.3f} [{paper['bias_corrected_low']:.3f}, {paper['bias_corrected_high']:.3f}]"
    bound = f"{paper['bootstrap_estimate']:.3f} [{paper['bootstrap_low']:.3f}, {paper['bootstrap_high']:.3f}]"
    assert f"Selection-aware: the in-sample best less the selection's optimism {corrected}" in readme
    assert f"the same selection scored out of fold {paper['out_of_fold']:.3f}" in readme
    assert f"out-of-bag bootstrap {bound} (a conservative bound)" in readme
    assert "selection uncertainty included" not in readme and "studies drawn from this one" not in readme
    coverage = study.statistics().coverage.table
    study.save_table(T.selection_coverage, coverage)
    readme = report.write_run_readme(study.run_dir, "Tiny").read_text(encoding="utf-8")
    covered = coverage[(coverage["metric"] == "recall@5") & (coverage["interval"] == "bias_corrected")].iloc[0]
    assert (f"covering the selected configuration's true value in {covered['coverage']:.0%} of "
            f"{int(covered['datasets'])} studies drawn from this one") in readme
    overall = found.table7.set_index("Question type").loc["Overall"]
    assert f"{overall['Top-5 failures']} of {overall['Questions']}" in readme


@pytest.mark.parametrize("analysis_yaml, message", [
    ("{diagnostic_hybrid: [summary_bm25, summary_vector]}", "analysis.diagnostic_hybrid"),
    ("{diagnostic_hybrid: [summary_bm25, summary_vector, 1.5]}", "analysis.diagnostic_hybrid"),
    ("{diagnostic_hybrid: [summary_bm25, raw_text_nope, 0.5]}", "analysis.diagnostic_hybrid"),
    ("{recovery_ks: [10, 0]}", "analysis.recovery_ks"),
    ("{public_question_ids: hashed}", "analysis.public_question_ids"),
])
def test_bad_analysis_params_name_the_key(tmp_path, analysis_yaml, message):
    path = tmp_path / "p.yaml"
    path.write_text(f"run: x\ndataset: {{synthetic: {{enabled: true}}}}\nanalysis: {analysis_yaml}\n", encoding="utf-8")
    with pytest.raises(ParamsError, match=re.escape(message)):
        load_params(path)


def test_diagnostic_hybrid_must_name_retrievers_the_study_runs(tmp_path):
    """The diagnostic hybrid fuses two of the retrievers the study runs (the pairings' rule)."""
    path = tmp_path / "p.yaml"
    path.write_text("run: x\ndataset: {synthetic: {enabled: true}}\nretrieval: {retrievers: [summary_bm25, embedding_text_bm25]}\n"
                    "hybrid: {pairings: [[summary_bm25, embedding_text_bm25]]}\n"
                    "analysis: {diagnostic_hybrid: [summary_bm25, summary_vector, 0.5]}\n", encoding="utf-8")
    with pytest.raises(ParamsError, match=r"key 'analysis\.diagnostic_hybrid': summary_vector is not in retrieval\.retrievers"):
        load_params(path)


def test_private_index_finds_texts_and_whole_word_names_only():
    index = public.PrivateIndex({"sender": {"A", "さき"}, "source name": {"dm_saki"},
                                 "message text": {"市営のコート取れました"}, "question text": {"Where did we go?"}})
    assert index.find("BM25 only") is None                      # the sender "A" is no word of it
    assert index.find("A") == "sender" and index.find("x さき y") == "sender"
    assert index.find("dm_saki") == "source name" and index.find("dm_saki2") is None
    assert index.find("note: 市営のコート取れましたw") == "message text"
    assert index.find("Where did we go? (q1)") == "question text"
    assert index.find("hybrid:raw_text_bm25+summary_vector@0.50") is None
