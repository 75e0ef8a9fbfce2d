"""The statistics stage's comparisons (pmrag.evaluate.statistics): roles resolved, the diagnostic hybrid fused again
for the alias check, the selected hybrid representing its own group, and which rows are selection-conditioned."""

import numpy as np
import pandas as pd

from pmrag.core.names import HybridId, RetrieverId
from pmrag.core.params import BootstrapSection, StatisticsSection
from pmrag.evaluate.metrics import per_question_rows
from pmrag.evaluate.statistics import _comparisons
from pmrag.retrieve.fusion import minmax_fuse

QUESTIONS = [f"q{i:02d}" for i in range(30)]
CHUNKS = [f"c{i:03d}" for i in range(80)]


def ranking(rng, depth=20):
    rows = [(q, c, r, 1.0 / r) for q in QUESTIONS
            for r, c in enumerate(rng.choice(CHUNKS, size=depth, replace=False), 1)]
    return pd.DataFrame(rows, columns=["question_id", "chunk_id", "rank", "score"])


def inputs(diagnostic_beta=0.5):
    rng = np.random.default_rng(4)
    rankings = {RetrieverId.parse(name): ranking(rng) for name in ("raw_text_bm25", "summary_bm25", "summary_vector",
                                                                   "prefix_bm25")}
    rankings[RetrieverId.parse("prefix_vector")] = rankings[RetrieverId.parse("prefix_bm25")].copy()
    selected = HybridId.of("raw_text_bm25", "summary_vector", 0.6)
    other = HybridId.of("summary_bm25", "summary_vector", 0.4)            # that pairing's selected β
    diagnostic = HybridId.of("summary_bm25", "summary_vector", diagnostic_beta)
    fused = {str(rid): frame for rid, frame in rankings.items()}
    for hybrid in (selected, other):
        fused[str(hybrid)] = minmax_fuse(rankings[hybrid.first], rankings[hybrid.second], hybrid.beta)
    qrels = pd.DataFrame({"question_id": QUESTIONS, "chunk_id": rng.choice(CHUNKS[:20], size=len(QUESTIONS)),
                          "relevance": 2})
    types = pd.Series("contextual", index=QUESTIONS)
    runs = {**fused, str(diagnostic): minmax_fuse(rankings[diagnostic.first], rankings[diagnostic.second],
                                                  diagnostic.beta)}
    per_question = pd.concat([per_question_rows(run, name, qrels, types, ks=[5, 20]) for name, run in runs.items()],
                             ignore_index=True).drop_duplicates(["retriever", "question_id"])
    return per_question, fused, rankings, selected, other, diagnostic


def comparisons(section, diagnostic_beta=0.5):
    per_question, fused, rankings, selected, other, diagnostic = inputs(diagnostic_beta)
    def fuse(hybrid):
        return minmax_fuse(rankings[hybrid.first], rankings[hybrid.second], hybrid.beta)

    return _comparisons(per_question, fused, fuse, selected, "summary_bm25", diagnostic, [selected, other],
                        section=section, bootstrap=BootstrapSection(n_resamples=300, seed=1), ks=(5, 20)), selected


def test_roles_aliases_and_the_rows_chosen_in_sample():
    section = StatisticsSection(declared_comparisons=(("selected", "reference"), ("summary_vector", "diagnostic")))
    (table, aliases), selected = comparisons(section)
    groups = dict(zip(aliases["method"], aliases["representative"]))
    assert aliases["method"].iloc[0] == str(selected)                   # the selected hybrid represents its group
    assert groups["prefix_vector"] == "prefix_bm25"
    assert "hybrid:summary_bm25+summary_vector@0.50" in groups          # the diagnostic hybrid was fused again
    declared = table[table["family"] == "declared"]
    assert list(zip(declared["method"], declared["reference"])) == [
        (str(selected), "summary_bm25"), ("summary_vector", "hybrid:summary_bm25+summary_vector@0.50")]
    # the diagnostic hybrid's β comes from the params: comparing it with a fixed retriever is not selection-conditioned
    assert list(declared["selected_in_sample"]) == [True, False]
    exploratory = table[table["family"] == "exploratory"].set_index("method")
    assert "prefix_vector" not in exploratory.index and exploratory.at["prefix_bm25", "aliases"] == "prefix_vector"
    assert exploratory["selected_in_sample"].all()                      # every one is against the selected hybrid
    assert "summary_bm25" not in exploratory.index                      # declared as selected − reference


def test_a_pairings_selected_beta_is_chosen_in_sample_even_against_a_fixed_method():
    section = StatisticsSection(declared_comparisons=(("hybrid:summary_bm25+summary_vector@0.4", "summary_vector"),
                                                      ("summary_vector", "raw_text_bm25")))
    (table, _), _ = comparisons(section)
    declared = table[table["family"] == "declared"]
    assert list(declared["selected_in_sample"]) == [True, False]
