"""The notebook table helper: DataFrame in, display frame and HTML out."""

import pandas as pd
import pytest

from pmrag.present.display import (MAX_ROWS, PANEL_PX, Table, compact_intervals, csv_link, estimated_width,
                                   human_header, interval_triples, method_cell, show, table_html)

HYBRID = "hybrid:raw_text_bm25+summary_vector@0.60"


def cis():
    return pd.DataFrame({"retriever": [HYBRID, "embedding_text_bm25"], "metric": ["recall@5", "recall@5"],
                         "mean": [0.6532, 0.662], "ci_low": [0.567, 0.57], "ci_high": [0.743, 0.75]})


def test_interval_triples_are_found_by_name():
    frame = pd.DataFrame(columns=["mean", "ci_low", "ci_high", "in_sample", "conditional_low", "conditional_high",
                                  "Δ best flat", "Δ best flat low", "Δ best flat high", "lonely_low"])
    assert interval_triples(frame) == {"mean": ("mean", "ci_low", "ci_high"),
                                       "conditional": ("in_sample", "conditional_low", "conditional_high"),
                                       "Δ best flat": ("Δ best flat", "Δ best flat low", "Δ best flat high")}


def test_compact_intervals_puts_one_string_in_the_estimates_place():
    out = compact_intervals(cis())
    assert list(out.columns) == ["retriever", "metric", "mean"]
    assert out["mean"].tolist() == ["0.653 [0.567, 0.743]", "0.662 [0.570, 0.750]"]
    missing = compact_intervals(cis().assign(ci_low=[float("nan"), 0.57]))
    assert missing["mean"].iloc[0] == "0.653"
    assert list(cis().columns) == ["retriever", "metric", "mean", "ci_low", "ci_high"]   # input not mutated


def test_human_headers():
    assert human_header("recall@5") == "Recall@5"
    assert human_header("Δ recall@5") == "Δ Recall@5"
    assert human_header("share_hidden") == "share hidden"
    assert human_header(("recall@5", "summary_bm25")) == "Recall@5 summary bm25"


def test_long_method_names_are_abbreviated_with_the_full_name_on_hover():
    assert method_cell(HYBRID) == ("raw·bm25 + sum·vec β=.60", HYBRID)
    assert method_cell("summary_bm25") == ("summary_bm25", None)
    assert method_cell("a sentence that is longer than the limit") == ("a sentence that is longer than the limit", None)
    page = show(cis()).html
    assert f'title="{HYBRID}"' in page and ">raw·bm25\u00a0+\u00a0sum·vec\u00a0β=.60<" in page


def test_cells_do_not_wrap_and_the_csv_is_linked(tmp_path):
    page = table_html(pd.DataFrame({"a": [1]}), csv="../outputs/demo/tables/x.csv", note="conditional")
    assert "white-space:nowrap" in page
    assert '<a href="../outputs/demo/tables/x.csv">x.csv</a>' in page and "conditional" in page
    assert csv_link(tmp_path / "tables" / "x.csv", start=tmp_path / "notebooks") == "../tables/x.csv"


def test_long_tables_fold_after_max_rows():
    frame = pd.DataFrame({"n": range(MAX_ROWS + 5)})
    page = show(frame).html
    shown, folded = page.split("<details>")
    assert shown.count("<tr>") == MAX_ROWS + 1 and folded.count("<tr>") == 5 + 1
    assert "5 more rows (of 25)" in folded
    assert "<details>" not in show(frame.head(MAX_ROWS)).html


def test_show_keeps_columns_and_says_how_many_stay_in_the_csv():
    table = show(cis(), csv=None, columns=["retriever", "mean"])
    assert isinstance(table, Table) and list(table.frame.columns) == ["retriever", "mean"]
    assert '<span title="metric">(+1 column in the plain-text output)</span>' in table.html
    assert HYBRID in repr(table) and "recall@5" in repr(table)   # the plain text keeps full names and every column
    with pytest.raises(KeyError, match="ci_low"):
        show(cis(), columns=["ci_low"])


def test_floats_are_rounded_and_missing_cells_blank():
    table = show(pd.DataFrame({"x": [0.12345, float("nan")], "n": [3, 4]}))
    assert table.frame["x"].tolist() == ["0.123", ""]
    assert table.frame["n"].tolist() == [3, 4]


def test_a_compact_interval_table_fits_the_panel_where_the_raw_one_would_not():
    wide = pd.concat([cis()] * 3, ignore_index=True).assign(
        **{f"{m}{b}": 0.5 for m in ("bias_corrected", "out_of_fold") for b in ("", "_low", "_high")})
    assert estimated_width(show(cis()).frame) < PANEL_PX
    shown = show(wide, fit=False).frame
    assert list(shown.columns) == ["retriever", "metric", "mean", "bias_corrected", "out_of_fold"]  # 3 → 1
    assert estimated_width(shown) < estimated_width(wide.astype(str))


def test_a_header_is_estimated_wrapped_between_words_and_a_cell_never():
    long_header = pd.DataFrame({"a header of many short words here": ["1"]})
    assert estimated_width(long_header) < 20 * 7.8 and estimated_width(pd.DataFrame({"h": ["0.653 [0.567, 0.743]"]})) > 130


def test_without_columns_only_what_fits_the_panel_is_shown_and_the_rest_is_named():
    wide = pd.DataFrame({f"column_{i}": ["a value of twenty chars"] for i in range(12)})
    table = show(wide, csv="x.csv")
    assert 1 <= len(table.frame.columns) < 12 and estimated_width(table.frame) <= PANEL_PX
    hidden = [f"column {i}" for i in range(len(table.frame.columns), 12)]
    assert f'x.csv</a> <span title="{", ".join(hidden)}">(+{len(hidden)} columns)</span>' in table.html
    assert "column_11" in repr(table)
    assert list(show(wide, fit=False).frame.columns) == list(wide.columns)


def test_a_saved_path_is_a_string_that_a_notebook_does_not_echo():
    from IPython.core.formatters import DisplayFormatter

    from pmrag.present.artifacts import Saved

    saved = Saved("tables/x.csv")
    assert saved == "tables/x.csv" and isinstance(saved, str)
    assert DisplayFormatter().format(saved) == ({}, {})    # IPython calls _ipython_display_ and shows nothing


def test_a_selection_table_compacts_its_conditional_and_bootstrap_intervals_and_columns_set_the_order():
    frame = pd.DataFrame({"in_sample": [0.65], "conditional_low": [0.56], "conditional_high": [0.74],
                          "bootstrap_estimate": [0.62], "bootstrap_low": [0.5], "bootstrap_high": [0.73]})
    table = show(frame, columns=["bootstrap", "conditional"])
    assert list(table.frame.columns) == ["bootstrap", "conditional"]
    assert table.frame.iloc[0].tolist() == ["0.620 [0.500, 0.730]", "0.650 [0.560, 0.740]"]


def test_a_method_name_as_a_header_is_abbreviated_with_its_full_name_on_hover():
    page = show(pd.DataFrame({HYBRID: [0.5], "questions": [3]})).html
    assert f'<th title="{HYBRID}" style="white-space:normal">raw·bm25 + sum·vec β=.60</th>' in page and '<th style="white-space:normal">questions</th>' in page


def test_a_paired_difference_with_ci_bounds_is_compacted_under_delta():
    frame = pd.DataFrame({"method": ["a"], "delta": [0.2333], "ci_low": [0.1467], "ci_high": [0.3233], "p": [0.0002]})
    assert interval_triples(frame) == {"delta": ("delta", "ci_low", "ci_high")}
    table = show(frame, digits=4)
    assert table.frame.to_dict("records") == [{"method": "a", "delta": "0.2333 [0.1467, 0.3233]", "p": "0.0002"}]


def test_long_prose_cells_wrap_numbers_never_and_text_columns_are_flush_left():
    frame = pd.DataFrame({"procedure": ["pairing and β (the paper's selection)", "β"], "mean": [0.65, 0.6],
                          "ci_low": [0.5, 0.4], "ci_high": [0.7, 0.8]})
    page = show(frame).html
    assert '<table class="pmrag-table" style="white-space:nowrap">' in page       # inline: kept in untrusted notebooks
    assert ('<td style="text-align:left;white-space:normal;min-width:14em">pairing and β (the paper&#x27;s selection)'
            "</td>") in page
    assert "<td>0.650\u00a0[0.500,\u00a00.700]</td>" in page and '<th style="white-space:normal;text-align:left">procedure</th>' in page
    assert estimated_width(show(frame).frame) < estimated_width(show(frame.assign(procedure="x" * 37)).frame)


def test_a_table_too_wide_for_its_method_names_abbreviates_them_all_before_leaving_a_column_out():
    names = ["embedding_text_bm25", "summary_bm25", "raw_text_bm25"]
    frame = pd.DataFrame({"BM25": names, "Vector": ["embedding_text_vector", "summary_vector", "summary_vector"],
                          "β": [0.6, 0.55, 0.5], **{f"{m}@5": [0.5, 0.6, 0.7] for m in ("recall", "mrr", "ndcg")},
                          **{f"{m}@5_low": [0.4] * 3 for m in ("recall", "mrr", "ndcg")},
                          **{f"{m}@5_high": [0.8] * 3 for m in ("recall", "mrr", "ndcg")}})
    full = compact_intervals(frame).astype(str)
    assert estimated_width(full) > PANEL_PX >= estimated_width(full, name_chars=0)
    table = show(frame)
    assert list(table.frame.columns) == ["BM25", "Vector", "β", "recall@5", "mrr@5", "ndcg@5"]
    assert '<td title="embedding_text_bm25" style="text-align:left">emb·bm25</td>' in table.html
    assert "columns)" not in table.html and "column)" not in table.html
    assert "embedding_text_vector" in repr(table)          # the plain text keeps every full name
