"""The failure inspector's small hand-made case, shared by tests/test_inspector_{data,render,widget}.py: four
questions, eight chunks (one holding ``<script>``, one 300 characters long), three rankings whose orders and
scores the tests work out by hand, per-question recalls and failure labels; and helpers that read the views."""

from __future__ import annotations

import html
import re

import pandas as pd

from pmrag.present.inspector import InspectorData

BM25, VEC = "raw_text_bm25", "raw_text_vector"
HYBRID = "hybrid:raw_text_bm25+raw_text_vector@0.45"

QUESTIONS = pd.DataFrame([
    ("q1", "テニス部の合宿はどこでしたか？", "single"),
    ("q2", "Tokyoで食べたラーメンは？", "aggregate"),
    ("q3", "誕生日プレゼントは何？", "single"),
    ("q4", "いつ引っ越した？", "temporal"),
], columns=["question_id", "text", "type"])

CHUNKS = pd.DataFrame([
    ("c1", "line", "2024-05-01 10:00:00", "ゆうた: テニス部の合宿は軽井沢だったよ", "さき, ゆうた"),
    ("c2", "line", "2024-05-02 11:30:00", "さき: 合宿の写真ある？", "さき"),
    ("c3", "line", "2024-06-01 09:00:00", "ゆうた: TOKYOのラーメン最高", "ゆうた"),
    ("c4", "line", "2024-06-02 20:00:00", "さき: tokyo駅のラーメン", "さき"),
    ("c5", "line", "2024-07-01 08:00:00", "誕生日プレゼントありがとう", "さき, ゆうた"),
    ("c6", "line", "2024-07-02 08:00:00", "<script>alert('x')</script> テニス", "ゆうた"),
    ("c7", "line", "2024-08-01 08:00:00", "x" * 300, "さき"),
    ("c8", "line", "2024-08-02 08:00:00", "引っ越しは8月", "さき"),
], columns=["chunk_id", "source", "start_at", "raw_text", "speakers"])

QRELS = pd.DataFrame([
    ("q1", "c1", 2), ("q1", "c2", 1), ("q1", "c7", 0),
    ("q2", "c3", 2), ("q2", "c4", 2),
    ("q3", "c5", 2),
    ("q4", "c8", 2),
], columns=["question_id", "chunk_id", "relevance"])


def ranking(lists: dict[str, dict[str, float]]) -> pd.DataFrame:
    """``{question: {chunk: score}}`` in rank order → ranking table."""
    rows = [(q, c, i + 1, s) for q, chunks in lists.items() for i, (c, s) in enumerate(chunks.items())]
    return pd.DataFrame(rows, columns=["question_id", "chunk_id", "rank", "score"])


# q1: BM25 order c3 c1 c4 c5 c2, vector order c2 c5 c1 c4 c3 (same five chunks, so β = 0 / 1 reproduce them).
RANKINGS = {
    BM25: ranking({"q1": {"c3": 9.0, "c1": 7.0, "c4": 4.0, "c5": 2.0, "c2": 1.0},
                   "q2": {"c3": 5.0, "c4": 4.0}, "q3": {"c5": 3.0, "c6": 1.0}, "q4": {"c1": 2.0, "c8": 1.0}}),
    VEC: ranking({"q1": {"c2": 0.9, "c5": 0.7, "c1": 0.6, "c4": 0.5, "c3": 0.1},
                  "q2": {"c4": 0.8, "c3": 0.7}, "q3": {"c6": 0.5, "c5": 0.4}}),
    HYBRID: ranking({"q1": {"c3": 0.9, "c4": 0.8, "c5": 0.7, "c6": 0.6, "c7": 0.5, "c8": 0.4, "c1": 0.3},
                     "q2": {"c4": 1.0, "c3": 0.9}, "q3": {"c5": 1.0}, "q4": {"c2": 0.8, "c8": 0.5}}),
}

# Focus (the hybrid): q1 and q4 fail at 5 but recover at 20, q2 never recovers, q3 succeeds.
PER_QUESTION = pd.DataFrame([
    (HYBRID, "q1", "single", 0.0, 1.0), (HYBRID, "q2", "aggregate", 0.0, 0.0),
    (HYBRID, "q3", "single", 1.0, 1.0), (HYBRID, "q4", "temporal", 0.0, 0.5),
    (BM25, "q1", "single", 1.0, 1.0), (BM25, "q2", "aggregate", 0.0, 1.0),
    (BM25, "q3", "single", 1.0, 1.0), (BM25, "q4", "temporal", 1.0, 1.0),
], columns=["retriever", "question_id", "question_type", "recall@5", "recall@20"])

LABELS = pd.DataFrame([("q1", "other_rule_based_failure"), ("q2", "aggregate_failure"),
                       ("q4", "multiple_primary_gold_nonaggregate")], columns=["question_id", "label"])

# The study's shape (notebook 06): single rankings, each pairing's selected β, the diagnostic hybrid
# (summary_bm25 + summary_vector, whose rankings copy the raw ones).
SUMMARY_BM25, SUMMARY_VEC = "summary_bm25", "summary_vector"
DIAGNOSTIC = "hybrid:summary_bm25+summary_vector@0.50"
BEST = pd.DataFrame([(BM25, VEC, 0.45)], columns=["bm25", "vector", "beta"])
STUDY_RANKINGS = {BM25: RANKINGS[BM25], VEC: RANKINGS[VEC], SUMMARY_BM25: RANKINGS[BM25].copy(),
                  SUMMARY_VEC: RANKINGS[VEC].copy()}


def make_data(**overrides) -> InspectorData:
    kwargs = dict(questions=QUESTIONS, chunks=CHUNKS, qrels=QRELS, rankings=RANKINGS, per_question=PER_QUESTION,
                  labels=LABELS, pairings=[(BM25, VEC)], betas={(BM25, VEC): 0.45})
    kwargs.update(overrides)
    return InspectorData.from_frames(**kwargs)


def study_kwargs(**overrides) -> dict:
    """``from_results`` keyword arguments the way notebook 06 calls it."""
    kwargs = dict(pairings=[(BM25, VEC)], labels=LABELS, diagnostic=DIAGNOSTIC)
    kwargs.update(overrides)
    return kwargs


def chunk_order(html_text: str) -> list[str]:
    return re.findall(r'data-chunk-id="([^"]+)"', html_text)


def gold_matrix(html_text: str) -> dict[str, list[str]]:
    """``{retriever (full name): [rank cell text per gold column]}`` of the gold view's rank tables."""
    matrix: dict[str, list[str]] = {}
    for name, cells in re.findall(r'<tr class="retriever[^"]*" data-retriever="([^"]+)">(.*?)</tr>', html_text):
        ranks = re.findall(r'<td class="rank [^"]+"[^>]*>([^<]*)</td>', cells)
        matrix.setdefault(html.unescape(name), []).extend(ranks)
    return matrix


def visible_text(html_text: str) -> str:
    """What a reader sees: the markup without tags (attributes such as ``title`` included) and styles."""
    return html.unescape(re.sub(r"<[^>]*>", "", re.sub(r"<style>.*?</style>", "", html_text)))
