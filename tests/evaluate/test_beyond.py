"""Notebook 08's comparison tables (pmrag.evaluate.beyond): families read off names, the paper's best flat
retriever, paired differences within each type against references, fusion selection."""

import numpy as np
import pandas as pd
import pytest

from pmrag.core.names import RetrieverId
from pmrag.core.params import BootstrapSection
from pmrag.evaluate import beyond
from pmrag.evaluate.reliability import paired_differences
from pmrag.evaluate.sweep import select_best

BOOT = BootstrapSection(n_resamples=400, seed=7)
LISTED = ["raw_text_bm25", "summary_bm25", "embedding_text_bm25", "raw_text_vector", "summary_vector",
          "embedding_text_vector", "raw_text_bm25_sudachi", "summary_rm3", "raw_text_multivec_max",
          "raw_text_mmr_vector", "summary_session_cluster", "embedding_text_decomp_bm25", "prefix_bm25",
          "excerpt_vector", "summary_excerpt_bm25", "excerpt_bm25", "summary_graph_interest"]


def rows(values: dict[str, list[float]], types: list[str]) -> pd.DataFrame:
    """Per-question rows: every metric of a method equals its given values (one per question)."""
    frames = []
    for name, recall in values.items():
        frames.append(pd.DataFrame({"retriever": name, "question_id": [f"q{i:02d}" for i in range(len(recall))],
                                    "question_type": types, "recall@5": recall, "mrr@5": np.asarray(recall) / 2,
                                    "ndcg@5": np.asarray(recall) / 3}))
    return pd.concat(frames, ignore_index=True)


def test_families_are_read_off_the_names():
    assert beyond.family_members(LISTED, "lexical") == ["raw_text_bm25_sudachi", "summary_rm3"]
    assert beyond.family_members(LISTED, "dense") == ["raw_text_multivec_max"]
    assert beyond.family_members(LISTED, "distributed") == ["raw_text_mmr_vector", "summary_session_cluster",
                                                            "embedding_text_decomp_bm25"]
    # the ablation runs prefix, summary, excerpt, summary_excerpt, embedding_text under each listed method
    assert beyond.family_members(LISTED, "ablation") == [
        "prefix_bm25", "summary_bm25", "excerpt_bm25", "summary_excerpt_bm25", "embedding_text_bm25",
        "summary_vector", "excerpt_vector", "embedding_text_vector"]
    with pytest.raises(ValueError, match="unknown family 'graph'"):
        beyond.family_members(LISTED, "graph")


def test_the_paper_best_flat_is_chosen_among_the_paper_six_only():
    types = ["aggregate", "contextual"] * 2
    table = rows({"raw_text_bm25": [1, 0, 0, 0], "summary_vector": [1, 1, 0, 0], "raw_text_bm25_sudachi": [1, 1, 1, 1],
                  "embedding_text_bm25": [0, 1, 1, 0]}, types)
    # sudachi is better but not the paper's; summary_vector and embedding_text_bm25 tie on every metric: list order
    assert beyond.paper_best_flat(table, LISTED) == "embedding_text_bm25"
    assert beyond.paper_best_flat(table, ["summary_vector", "embedding_text_bm25"]) == "summary_vector"
    with pytest.raises(ValueError, match="no paper retriever"):
        beyond.paper_best_flat(table, ["raw_text_bm25_sudachi"])


def test_comparison_rows_run_aggregate_first_and_agree_with_direct_paired_differences():
    rng = np.random.default_rng(3)
    types = ["contextual", "aggregate", "named_entity"] * 8
    values = {name: rng.integers(0, 2, len(types)).astype(float).tolist()
              for name in ("a", "b", "best_flat", "best_hybrid")}
    table = rows(values, types)
    out = beyond.comparison_table(table, ["a", "b", "best_flat"], {"flat": "best_flat", "hybrid": "best_hybrid"},
                                  BOOT, "aggregate")
    assert list(dict.fromkeys(out["question_type"])) == ["aggregate", "contextual", "named_entity", "overall"]
    aggregate = table[table["question_type"] == "aggregate"]
    direct = paired_differences(aggregate, [("a − best_hybrid", "a", "best_hybrid")], "recall@5", BOOT).iloc[0]
    row = out[(out["question_type"] == "aggregate") & (out["method"] == "a")].iloc[0]
    assert row["questions"] == 8
    assert row["recall@5"] == pytest.approx(np.mean(aggregate[aggregate["retriever"] == "a"]["recall@5"]))
    assert row["mrr@5"] == pytest.approx(row["recall@5"] / 2)
    assert (row["Δ hybrid"], row["Δ hybrid low"], row["Δ hybrid high"]) == pytest.approx(
        (direct["delta"], direct["ci_low"], direct["ci_high"]))
    assert row["Δ hybrid excludes 0"] == bool(direct["excludes_zero"])
    itself = out[(out["method"] == "best_flat")]
    assert (itself["Δ flat"] == 0).all() and itself["Δ flat low"].isna().all()
    with pytest.raises(ValueError, match="no per-question rows for c"):
        beyond.comparison_table(table, ["c"], {"flat": "best_flat"}, BOOT, "aggregate")


def test_each_method_is_compared_with_what_it_builds_on():
    base = {name: beyond.base_retriever(RetrieverId.parse(name)) for name in LISTED}
    assert str(base["raw_text_bm25_sudachi"]) == "raw_text_bm25" and str(base["summary_rm3"]) == "summary_bm25"
    assert str(base["raw_text_multivec_max"]) == "raw_text_vector"
    assert str(base["raw_text_mmr_vector"]) == "raw_text_vector"
    assert str(base["embedding_text_decomp_bm25"]) == "embedding_text_bm25"
    assert str(base["summary_session_cluster"]) == "summary_vector"
    assert base["raw_text_bm25"] is None and base["summary_graph_interest"] is None
    comparisons = beyond.same_method_references(["raw_text_multivec_max", "raw_text_bm25"], beyond.base_retriever)
    assert comparisons == [("raw_text_multivec_max − raw_text_vector", "raw_text_multivec_max", "raw_text_vector")]


def test_own_reference_differences_skip_missing_references_and_keep_type_order():
    types = ["aggregate", "contextual"] * 5
    table = rows({"x": [1, 0] * 5, "y": [0, 0] * 5}, types)
    out = beyond.own_reference_differences(table, [("x − y", "x", "y"), ("x − z", "x", "z")], BOOT, "aggregate")
    assert list(out["question_type"]) == ["aggregate", "contextual", "overall"]
    assert list(out["delta"]) == pytest.approx([1.0, 0.0, 0.5])
    assert beyond.own_reference_differences(table, [("x − z", "x", "z")], BOOT, "aggregate").empty


def test_fusion_best_applies_the_paper_rule_within_each_fusion_and_pairing():
    rng = np.random.default_rng(5)
    parts = []
    for fusion in ("minmax", "rrf"):
        for beta in (0.0, 0.5, 1.0):
            parts.append(pd.DataFrame({"fusion": fusion, "bm25": "a", "vector": "b", "beta": beta,
                                       "question_id": [f"q{i}" for i in range(6)],
                                       "recall@5": rng.integers(0, 2, 6).astype(float),
                                       "mrr@5": rng.random(6), "ndcg@5": rng.random(6)}))
    sweep_table = pd.concat(parts, ignore_index=True)
    best = beyond.fusion_best(sweep_table)
    assert list(best["fusion"]) == ["minmax", "rrf"]
    for fusion, row in zip(best["fusion"], best.itertuples(index=False)):
        macro = sweep_table[sweep_table["fusion"] == fusion].drop(columns=["fusion", "question_id"]).groupby(
            ["bm25", "vector", "beta"], sort=False).mean().reset_index()
        assert row.beta == select_best(macro)["beta"]
    # two pairings tied on every metric: each fusion's overall choice keeps the configured pairing order
    named = best.assign(bm25="raw_text_bm25", vector="raw_text_vector")
    tied = pd.concat([named, named.assign(bm25="summary_bm25")], ignore_index=True)
    overall = beyond.fusion_overall(tied, [("summary_bm25", "raw_text_vector"), ("raw_text_bm25", "raw_text_vector")])
    assert list(overall["fusion"]) == ["minmax", "rrf"] and list(overall["bm25"]) == ["summary_bm25"] * 2
    assert overall["method"].iloc[1] == f"hybrid-rrf:summary_bm25+raw_text_vector@{best['beta'].iloc[1]:.2f}"
    per_question = beyond.fusion_per_question(sweep_table, best, ["m", "r"],
                                              pd.Series(["t"] * 6, index=[f"q{i}" for i in range(6)]))
    assert per_question.groupby("retriever")["recall@5"].mean().to_dict() == pytest.approx(
        dict(zip(["m", "r"], best["recall@5"])))


def test_matches_table_counts_questions_with_no_matching_chunk():
    out = beyond.matches_table({"raw_text_bm25": pd.Series([0, 2, 4, 6])})
    assert out.iloc[0]["median"] == 3 and out.iloc[0]["questions with none"] == 1
