"""Failure inspector, rendering (pmrag.present.inspector.render): escaping, highlighting, the gold matrix, the
ranking tables and the controls' texts, as pure functions of data frames (no ipywidgets)."""

import html
import re

import pandas as pd
import pytest
from inspector_case import BM25, HYBRID, RANKINGS, chunk_order, gold_matrix, make_data, visible_text

from pmrag.present.inspector import (GOLD_COLUMNS_PER_TABLE, QuestionFilter, highlight, render_gold_table,
                                     render_header, render_message, render_ranking_table, retriever_label)
from pmrag.present.inspector.render import (fused_caption, match_message, no_match_message, pairing_option,
                                            question_option, retriever_option, top_caption)


# -- highlighting ------------------------------------------------------------------------------------
def test_highlight_escapes_html_and_marks_tokens():
    out = highlight("<script>alert('x')</script> テニスと合宿", "テニス部の合宿はどこでしたか？")
    assert "<script>" not in out
    assert "&lt;script&gt;" in out
    assert "<mark>テニス</mark>と<mark>合宿</mark>" in out


def test_highlight_case_insensitive_keeps_original_case():
    assert highlight("TOKYO and tokyo", "Tokyo") == "<mark>TOKYO</mark> and <mark>tokyo</mark>"


def test_highlight_longest_token_first_and_never_inside_entities():
    assert highlight("tokyotower", "tokyo tokyotower") == "<mark>tokyotower</mark>"
    assert highlight("a & amp", "amp") == "a &amp; <mark>amp</mark>"
    assert highlight("<b>", "script") == "&lt;b&gt;"  # no tokens matched: just escaped


def test_highlight_of_a_missing_text_is_empty():
    assert highlight(None, "tokyo") == highlight(float("nan"), "tokyo") == ""
    assert highlight("a<b", None) == "a&lt;b"


# -- names -------------------------------------------------------------------------------------------
def test_retriever_label_is_an_escaped_abbr_of_the_short_label():
    assert retriever_label("x<y>") == '<abbr title="x&lt;y&gt;">x&lt;y&gt;</abbr>'
    assert (retriever_label("hybrid:raw_text_bm25+embedding_text_vector@0.35")
            == '<abbr title="hybrid:raw_text_bm25+embedding_text_vector@0.35">raw·bm25 + emb·vec β=.35</abbr>')


# -- texts of the controls and the status line -------------------------------------------------------
def test_control_texts():
    long = pd.Series({"question_id": "q9", "type": "single", "text": "あ" * 51})
    assert question_option(long) == f"q9 · single · {'あ' * 50}…"
    assert question_option(long.replace("あ" * 51, "短い")) == "q9 · single · 短い"
    assert retriever_option(BM25) == BM25 and retriever_option(HYBRID, "focus, labels") == f"{HYBRID} · focus, labels"
    assert pairing_option(BM25, "raw_text_vector") == "raw_text_bm25 + raw_text_vector"
    assert match_message(3, 4) == "3 of 4 questions match."
    assert top_caption(BM25, 7) == "Top-7 of raw_text_bm25"
    assert fused_caption("a", "b", 0.35000000000000003, 5) == "Top-5 of min–max fusion a + b at β = 0.35"


def test_no_match_message_names_the_filters_that_are_set():
    message = no_match_message(QuestionFilter("temporal", "aggregate_failure", True), HYBRID)
    assert message == ("No question matches the filters (type = temporal; label = aggregate_failure; failed at 5 but "
                       f"recovered at 20 under {HYBRID}). Relax a filter to see questions.")
    assert "(no filter)" in no_match_message(QuestionFilter(), None)


def test_render_message_escapes():
    out = render_message("<b>none</b> & more")
    assert "&lt;b&gt;none&lt;/b&gt; &amp; more" in out and "<b>" not in out


# -- header ------------------------------------------------------------------------------------------
def test_header_escapes_and_names_who_labelled():
    question = pd.Series({"question_id": "q<1>", "type": "a&b", "text": "<img src=x onerror=alert(1)>"})
    metrics = pd.Series({"recall@5": 0.0, "recall@20": 0.5})
    out = render_header(question, ["aggregate_failure"], "f<x>", metrics, labelled_by="hybrid:<l>",
                        label_metrics=pd.Series({"recall@5": 1.0, "recall@20": 1.0}))
    assert "<img" not in out and "&lt;img src=x onerror=alert(1)&gt;" in out
    assert "q&lt;1&gt;" in out and "[a&amp;b]" in out
    shown = visible_text(out)
    assert "label (by hybrid:<l>; recall@5=1.00, recall@20=1.00): aggregate_failure" in shown
    assert "focus f<x>: recall@5=0.00, recall@20=0.50" in shown
    plain = visible_text(render_header(question, ["none"]))
    assert "label: none" in plain and "focus" not in plain


# -- gold matrix -------------------------------------------------------------------------------------
def twelve_retrievers() -> list[str]:
    singles = [f"{rep}_{method}" for rep in ("raw_text", "summary", "embedding_text") for method in ("bm25", "vector")]
    hybrids = [f"hybrid:{a}_bm25+{b}_vector@{beta}" for a, b, beta in (
        ("raw_text", "raw_text", "0.45"), ("raw_text", "embedding_text", "0.35"), ("summary", "summary", "0.50"),
        ("summary", "embedding_text", "0.60"), ("embedding_text", "embedding_text", "0.40"),
        ("embedding_text", "raw_text", "0.55"))]
    return singles + hybrids


def test_gold_view_with_twelve_retrievers_is_narrow():
    names = twelve_retrievers()
    data = make_data(rankings={name: RANKINGS[BM25] for name in names}, per_question=None, pairings=[], betas=None)
    ranks = data.gold_ranks("q1")
    gold = render_gold_table(ranks, data.chunk_details(ranks["chunk_id"]), "テニス部", k=5)
    assert list(gold_matrix(gold)) == names
    assert all(cells == ["2", "5"] for cells in gold_matrix(gold).values())
    assert len(re.findall(r"<th", re.search(r"<thead>(.*?)</thead>", gold).group(1))) == 3  # not 2 + 12 + 3
    for name in names:  # every full name on hover, the abbreviation shown
        assert f'title="{html.escape(name)}"' in gold
    shown = visible_text(gold)
    assert "hybrid:" not in shown and "raw·bm25 + emb·vec β=.35" in shown
    labels = re.findall(r'<th scope="row" class="retriever">(.*?)</th>', gold)
    assert max(len(visible_text(label)) for label in labels) <= 24
    assert visible_text(gold).count("軽井沢") == 1
    assert not re.findall(r"(?<![-\w])width\s*:", gold)  # only min-/max-widths, nothing fixed


def test_gold_view_splits_many_gold_chunks_into_narrow_tables():
    n = GOLD_COLUMNS_PER_TABLE + 1
    ranks = pd.DataFrame({"chunk_id": [f"g{i:02d}" for i in range(n)], "relevance": [2] * n,
                          BM25: pd.array(list(range(1, n + 1)), dtype="Int64")})
    details = pd.DataFrame({"chunk_id": [], "start_at": [], "speakers": [], "preview": []})
    gold = render_gold_table(ranks, details, "")
    heads = re.findall(r"<thead>(.*?)</thead>", gold)
    assert [len(re.findall(r"<th", h)) for h in heads] == [1 + GOLD_COLUMNS_PER_TABLE, 1 + 1]
    assert gold_matrix(gold) == {BM25: [str(i) for i in range(1, n + 1)]}
    assert len(chunk_order(gold)) == n


def test_gold_legend_names_amber_only_below_the_recovery_cut_off():
    data = make_data(rankings={BM25: RANKINGS[BM25]}, per_question=None, pairings=[], betas=None)
    ranks = data.gold_ranks("q1")
    details = data.chunk_details(ranks["chunk_id"])
    assert "≤ 5 green, ≤ 20 amber" in render_gold_table(ranks, details, "", k=5)
    wide = render_gold_table(ranks, details, "", k=20)
    assert "≤ 20 green, deeper grey" in wide and "amber" not in visible_text(wide)


def test_gold_cells_colour_by_k_and_the_recovery_cut_off():
    ranks = pd.DataFrame({"chunk_id": ["a", "b", "c", "d"], "relevance": [2, 2, 1, 1],
                          "r<x>": pd.array([3, 6, 21, pd.NA], dtype="Int64")})
    gold = render_gold_table(ranks, pd.DataFrame(columns=["chunk_id", "start_at", "speakers", "preview"]), "", k=5,
                             notes={"r<x>": "focus"})
    assert re.findall(r'<td class="rank (\w+)', gold) == ["top5", "top20", "deep", "unranked"]
    assert 'data-retriever="r&lt;x&gt;"' in gold and '<tr class="retriever noted"' in gold
    assert 'title="c · ☆ supporting">3 ☆</th>' in gold


def test_gold_view_without_gold_says_so():
    empty = pd.DataFrame(columns=["chunk_id", "relevance", BM25])
    assert "has no gold chunk" in render_gold_table(empty, empty, "")


# -- ranking tables ----------------------------------------------------------------------------------
def test_ranking_table_escapes_marks_gold_and_highlights():
    top = pd.DataFrame({"rank": [1, 2], "chunk_id": ["c<1>", "c2"], "score": [0.98765, 0.5], "relevance": [2, 0],
                        "start_at": [pd.Timestamp("2024-05-01 10:00:59"), pd.NaT], "speakers": ["<b>さき</b>", ""],
                        "preview": ["<script>テニス</script>", "合宿"]})
    out = render_ranking_table(top, "テニス", caption="Top-2 of <x>")
    assert "<script>" not in out and "<b>さき" not in out
    assert "&lt;script&gt;<mark>テニス</mark>&lt;/script&gt;" in out
    assert "<caption>Top-2 of &lt;x&gt;</caption>" in out
    assert chunk_order(out) == ["c&lt;1&gt;", "c2"]
    assert '<tr class="hit rel2"' in out and "★ primary" in out
    assert "<td>0.9877</td>" in out and "2024-05-01 10:00" in out


def test_ranking_table_of_an_empty_list_says_so():
    empty = pd.DataFrame(columns=["rank", "chunk_id", "score", "relevance", "start_at", "speakers", "preview"])
    out = render_ranking_table(empty, "", caption="Top-5 of x")
    assert "This list ranks no chunk." in out and "<caption>Top-5 of x</caption>" in out
    assert chunk_order(out) == []


@pytest.mark.parametrize("view", ["gold", "ranking", "header"])
def test_no_view_sets_a_fixed_width(view):
    data = make_data()
    ranks = data.gold_ranks("q1")
    out = {"gold": lambda: render_gold_table(ranks, data.chunk_details(ranks["chunk_id"]), "テニス"),
           "ranking": lambda: render_ranking_table(data.top_k(BM25, "q1", 20), "テニス", "c"),
           "header": lambda: render_header(data.question("q1"), ["none"])}[view]()
    assert not re.findall(r"(?<![-\w])width\s*:", out)
