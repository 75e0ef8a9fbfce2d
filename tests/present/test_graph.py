"""Notebook 07's displays (pmrag.present.graph): Table 2's layout against the evaluation's frames, a question's
chosen interests against the retriever's own sets, the subgraph's cap and marks, and interest labels hidden
where chat text is not shown."""

import re
from pathlib import Path

import matplotlib
import pandas as pd
import pytest

matplotlib.use("Agg")

from pmrag.evaluate.graph_eval import type_differences  # noqa: E402
from pmrag.present import graph as pg  # noqa: E402
from pmrag.present import paper  # noqa: E402
from pmrag.present.paper import format_ci  # noqa: E402
from pmrag.represent.graph import Edge, MemoryGraph, Node  # noqa: E402

REPO = Path(__file__).resolve().parents[2]
CELL = re.compile(r"(-?\d\.\d{3}) \[(-?\d\.\d{3}), (-?\d\.\d{3})\]")


@pytest.fixture(scope="module")
def demo():
    from pmrag.study import Study

    study = Study.from_params(REPO / "params" / "demo.yaml")
    return study, study.graph(), study.graph_evaluation()


def tiny_graph() -> MemoryGraph:
    """Three memories a, b, c; interest "tea" links a and b, interest "walk" links b and c."""
    memories = [Node(f"m:{m}", "memory", "chunk", m) for m in "abc"]
    interests = [Node("i:tea", "interest", "thing", "tea"), Node("i:walk", "interest", "activity", "walk")]
    semantic = [Node("s:a:0", "semantic", "summary", "a summary")]
    edges = [Edge("m:a", "s:a:0", "memory-semantic"), Edge("m:a", "i:tea", "memory-interest"),
             Edge("m:b", "i:tea", "memory-interest"), Edge("m:b", "i:walk", "memory-interest"),
             Edge("m:c", "i:walk", "memory-interest")]
    return MemoryGraph(tuple(memories + interests + semantic), tuple(edges))


# ------------------------------------------------------------------------------------------- Table 2

@pytest.mark.integration
def test_table2_cells_are_the_evaluation_cis_and_pooled_figures(demo):
    _, _, evaluation = demo
    cis, pooled = evaluation.set_tables["cis"], evaluation.set_tables["pooled"]
    table = pg.table2(cis, pooled)
    assert list(table.columns) == ["Metric", "TOBUGraph", "RAGv1", "RAGv2", "RAGv3"]
    assert list(table["Metric"]) == ["Precision", "Recall", "F1", "Pooled (micro) P / R / F1", "Mean set size |R|"]
    for row, metric in zip(table.itertuples(index=False), ("set_precision", "set_recall", "set_f1")):
        for method in pg.SET_METHODS:
            source = cis[(cis["retriever"] == method) & (cis["metric"] == metric)].iloc[0]
            mean, low, high = map(float, CELL.fullmatch(getattr(row, method)).groups())
            assert (mean, low, high) == pytest.approx((source["mean"], source["ci_low"], source["ci_high"]), abs=5e-4)
    micro = table.iloc[3]
    for method in pg.SET_METHODS:
        source = pooled.set_index("retriever").loc[method]
        values = [float(v) for v in micro[method].split(" (")[0].split(" / ")]
        assert values == pytest.approx([source["micro_precision"], source["micro_recall"], source["micro_f1"]], abs=5e-4)
        assert ("empty sets" in micro[method]) == bool(source["empty_sets"])
        assert float(table.iloc[4][method]) == pytest.approx(source["mean_retrieved"], abs=0.05)


def test_table2_refuses_a_missing_method():
    cis = pd.DataFrame({"retriever": ["TOBUGraph"] * 3, "metric": ["set_precision", "set_recall", "set_f1"],
                        "mean": [0.5] * 3, "ci_low": [0.4] * 3, "ci_high": [0.6] * 3})
    pooled = pd.DataFrame({"retriever": ["TOBUGraph"], "questions": [2], "micro_precision": [0.5],
                           "micro_recall": [0.5], "micro_f1": [0.5], "mean_retrieved": [3.0], "empty_sets": [1]})
    table = pg.table2(cis, pooled, methods=["TOBUGraph"])
    assert table.iloc[0, 1] == "0.500 [0.400, 0.600]"
    assert table.iloc[3, 1] == "0.500 / 0.500 / 0.500 (1 empty sets left out of P)" and table.iloc[4, 1] == "3.0"
    with pytest.raises(ValueError, match="RAGv1 set_precision"):
        pg.table2(cis, pooled)


def test_paper_table2_is_as_published():
    table = paper.tobu_table2().set_index("Metric")
    assert table.loc["Precision", "TOBUGraph"] == "92.86%" and table.loc["F1", "TOBUGraph"] == "93.09%"
    assert table.loc["Recall", "RAGv2"] == "84.61%" and table.loc["Recall", "RAGv3"] == "80.00%"
    assert table.loc["F1", "RAGv1"] == "74.07%" and table.loc["F1", "RAGv3"] == "79.28%"
    assert "80%" in paper.tobu_table2.__doc__ and "84.61%" in paper.tobu_table2.__doc__


def test_differences_table_formats_each_row():
    differences = pd.DataFrame({"comparison": ["A − B"], "method_a": ["A"], "method_b": ["B"], "metric": ["set_f1"],
                                "delta": [-0.1534], "ci_low": [-0.2], "ci_high": [-0.1], "excludes_zero": [True],
                                "interpretation": ["Negative"]})
    table = pg.differences_table(differences)
    assert list(table.columns) == ["Comparison", "ΔF1", "95% CI", "Interpretation"]
    assert table.iloc[0].tolist() == ["A − B", "-0.153", "[-0.200, -0.100]", "Negative"]


# ------------------------------------------------------------------------------------------- rank and type tables

@pytest.mark.integration
def test_rank_table_keeps_the_rank_methods_order_and_roles(demo):
    _, _, evaluation = demo
    methods = evaluation.rank_methods()
    table = pg.rank_table(evaluation.rank_tables["cis"], methods, pg.method_roles(evaluation))
    assert list(table.index) == methods
    assert table.loc[str(evaluation.best_flat), "Role"].startswith("best flat")
    cis = evaluation.rank_tables["cis"]
    row = cis[(cis["retriever"] == str(evaluation.hybrid)) & (cis["metric"] == "recall@5")].iloc[0]
    assert table.loc[str(evaluation.hybrid), "Recall@5"] == format_ci(row["mean"], row["ci_low"], row["ci_high"])


@pytest.mark.integration
def test_by_type_table_puts_overall_first_with_its_counts(demo):
    _, _, evaluation = demo
    by_type = evaluation.rank_tables["by_type"]
    focus = [str(evaluation.tuned), str(evaluation.best_flat)]
    table = pg.by_type_table(by_type.iloc[::-1], focus)        # input order must not matter for "overall first"
    assert table.index[0] == "overall"
    assert list(table.columns) == ["Questions", *focus]
    held = evaluation.held_out(evaluation.rank_rows).drop_duplicates("question_id")
    assert table.loc["overall", "Questions"] == len(held)
    for question_type, n in held["question_type"].value_counts().items():
        assert table.loc[question_type, "Questions"] == n


@pytest.mark.integration
def test_type_reading_and_differences_use_only_the_held_out_questions_of_the_type(demo):
    study, _, evaluation = demo
    differences = type_differences(evaluation, "aggregate", study.params.bootstrap)
    assert list(differences["metric"]) == ["recall@5", "recall@5", "set_recall", "set_recall", "set_recall"]
    held = evaluation.held_out(evaluation.rank_rows)
    held = held[held["question_type"] == "aggregate"].set_index(["retriever", "question_id"])["recall@5"]
    tuned, best = str(evaluation.tuned), str(evaluation.best_flat)
    expected = (held[tuned] - held[best]).mean()
    assert differences.iloc[0]["delta"] == pytest.approx(expected)
    lines = pg.type_reading(evaluation, differences, "aggregate")
    n = evaluation.held_out(evaluation.set_rows).drop_duplicates("question_id")["question_type"].eq("aggregate").sum()
    assert lines[0].startswith(f"aggregate: {n} held-out question(s)")
    assert sum("cannot tell apart" in line for line in lines) == int((~differences["excludes_zero"]).sum())
    assert pg.type_reading(evaluation, differences, "no_such_type") == ["No held-out question of type 'no_such_type': nothing to read."]


@pytest.mark.integration
def test_tuning_grid_marks_the_chosen_cell_once(demo):
    _, _, evaluation = demo
    grid = pg.tuning_grid(evaluation.tuning)
    marked = [(t, c) for t in grid.index for c in grid.columns if grid.loc[t, c].endswith("*")]
    cap = "no cap" if evaluation.cap == evaluation.tuning["cap"].max() else evaluation.cap
    assert marked == [(evaluation.threshold, cap)]
    _, built, _ = demo
    assert grid.columns[-1] == "no cap" and evaluation.tuning["cap"].max() == len(built.graph.of_kind("interest"))
    assert pg.tuning_reading(evaluation).startswith(f"chosen: threshold {evaluation.threshold:g}, ")


@pytest.mark.integration
def test_baseline_tuning_table_has_every_k_of_the_grid_for_each_baseline(demo):
    study, _, evaluation = demo
    table = pg.baseline_tuning_table(evaluation)
    grid = study.params.graph.baseline_k_grid
    assert table["Method"].tolist() == [m for m in ("RAGv1", "RAGv2", "RAGv3") for _ in grid]
    assert [k for k in table["k"] if k.endswith("*")] == [f"{evaluation.baseline_k[m]}*" for m in ("RAGv1", "RAGv2", "RAGv3")]
    rows = pg.tuning_rows(evaluation)
    assert rows["method"].iloc[0] == "TOBUGraph" and rows["chosen"].sum() == 4


@pytest.mark.integration
def test_split_table_counts_every_question_once(demo):
    study, built, evaluation = demo
    questions = study.evaluation().questions
    table = pg.split_table(evaluation.split, questions, built.label, study.question_types())
    assert list(table.columns) == ["question_type", "tuning", "held_out", "extractor"]
    assert table.iloc[-1]["question_type"] == "all"
    assert table.iloc[-1]["tuning"] + table.iloc[-1]["held_out"] == len(questions)
    assert table.iloc[-1]["held_out"] == (evaluation.split == "held_out").sum()
    assert set(table["extractor"]) == {built.label}


# ------------------------------------------------------------------------------------------- graph statistics

def test_statistics_tables_count_the_graph_and_name_the_extractor():
    graph = tiny_graph()
    statistics = graph.statistics()
    table = pg.nodes_edges_table(statistics, "stand-in")
    nodes, edges = table[table["element"] == "node"], table[table["element"] == "edge"]
    assert nodes["count"].sum() == len(graph.nodes) and edges["count"].sum() == len(graph.edges)
    assert set(table["extractor"]) == {"stand-in"}
    degrees = pg.interest_degree_table(statistics, "stand-in")
    assert degrees[["memories", "interests"]].values.tolist() == [[2, 2]]
    original = statistics.interest_degrees.copy()
    pg.with_extractor(statistics.interest_degrees, "x")
    pd.testing.assert_frame_equal(statistics.interest_degrees, original)       # not mutated


def test_interest_labels_are_hidden_unless_chat_text_is_shown():
    graph = tiny_graph()
    assert pg.interest_names(graph, False) == {"i:tea": "i:1", "i:walk": "i:2"}
    assert pg.interest_names(graph, True) == {"i:tea": "tea", "i:walk": "walk"}
    hidden = pg.memories_per_interest_table(graph.statistics(), graph, "stand-in", show_labels=False)
    assert all(re.fullmatch(r"i:\d+", name) for name in hidden["interest"])
    assert not {"tea", "walk"} & set(hidden.astype(str).values.ravel())
    shown = pg.memories_per_interest_table(graph.statistics(), graph, "stand-in", show_labels=True, top=1)
    assert shown["interest"].tolist() == ["tea"]     # ties on memories: by label


def test_a_drawn_subgraph_holds_no_interest_label_when_hidden():
    graph = tiny_graph()
    chosen = pd.DataFrame({"interest_id": ["i:walk"], "position": [2], "label": ["walk"], "relevance": [0.9],
                           "memories": [2]})
    ranking = pd.DataFrame({"question_id": "q1", "chunk_id": ["c", "b", "a"], "rank": [1, 2, 3], "score": [1, 1, 0]})
    sub = pg.question_subgraph(graph, chosen, ["a"], ranking, "q1", k=1)
    fig = pg.draw_subgraph(sub, show_labels=False)
    texts = [t.get_text() for ax in fig.axes for t in ax.texts] + [fig.axes[0].get_title()]
    assert "i:2" in texts and not any("walk" in t for t in texts)
    assert pg.chosen_table(chosen, False)["interest"].tolist() == ["i:2"]
    assert pg.chosen_table(chosen, True)["interest"].tolist() == ["walk"]


# ------------------------------------------------------------------------------------------- one question

def test_question_subgraph_orders_marks_and_caps_the_memories():
    graph = tiny_graph()
    chosen = pd.DataFrame({"interest_id": ["i:tea", "i:walk"], "position": [1, 2], "label": ["tea", "walk"],
                           "relevance": [1.0, 0.5], "memories": [2, 2]})
    ranking = pd.DataFrame({"question_id": ["q1"] * 3 + ["q2"], "chunk_id": ["b", "c", "a", "a"],
                            "rank": [1, 2, 3, 1], "score": [1.5, 0.5, 1.0, 9.0]})
    sub = pg.question_subgraph(graph, chosen, ["c"], ranking, "q1", k=1, max_memories=10)
    assert sub.memories["chunk_id"].tolist() == ["c", "b", "a"]                 # gold, then top-1, then by rank
    assert sub.memories["gold"].tolist() == [True, False, False]
    assert sub.memories["top_k"].tolist() == [False, True, False]
    assert sub.reached == 3 and sub.left_out == 0
    assert set(sub.edges) == {("i:tea", "a"), ("i:tea", "b"), ("i:walk", "b"), ("i:walk", "c")}
    capped = pg.question_subgraph(graph, chosen, ["c"], ranking, "q1", k=1, max_memories=2)
    assert capped.memories["chunk_id"].tolist() == ["c", "b"] and capped.left_out == 1
    assert all(c in {"b", "c"} for _, c in capped.edges)
    with pytest.raises(ValueError, match="max_memories"):
        pg.question_subgraph(graph, chosen, [], ranking, "q1", max_memories=0)


def test_gold_that_no_chosen_interest_reaches_is_drawn_unlinked():
    graph = tiny_graph()
    chosen = pd.DataFrame({"interest_id": ["i:tea"], "position": [1], "label": ["tea"], "relevance": [1.0],
                           "memories": [2]})
    ranking = pd.DataFrame({"question_id": "q1", "chunk_id": ["a", "b", "c"], "rank": [1, 2, 3], "score": [1, 1, 0]})
    sub = pg.question_subgraph(graph, chosen, ["c"], ranking, "q1", k=1)
    row = sub.memories.set_index("chunk_id").loc["c"]
    assert row["gold"] and not row["reached"]
    assert not [e for e in sub.edges if e[1] == "c"]
    assert sub.reached == 2


@pytest.mark.integration
def test_chosen_interests_reach_exactly_the_evaluations_tobugraph_set(demo):
    study, built, evaluation = demo
    from pmrag.retrieve.graph_interest import InterestIndex

    index = InterestIndex.from_graph(built.graph, study.chunks()["chunk_id"].tolist())
    relevance = study.interest_relevance()
    questions = study.evaluation().questions.set_index("question_id")
    sets = evaluation.sets[evaluation.sets["retriever"] == "TOBUGraph"]
    checked = 0
    for question_id in questions.index[:12]:
        chosen = pg.chosen_interests(index, relevance.rows([question_id])[0], evaluation.threshold, evaluation.cap)
        assert len(chosen) <= evaluation.cap
        assert (chosen["relevance"] >= evaluation.threshold).all()
        assert chosen["relevance"].is_monotonic_decreasing
        reached = set().union(*(built.graph.memories_of(i) for i in chosen["interest_id"])) if len(chosen) else set()
        assert reached == set(sets.loc[sets["question_id"] == question_id, "chunk_id"]), question_id
        assert chosen["memories"].tolist() == [len(built.graph.memories_of(i)) for i in chosen["interest_id"]]
        checked += bool(reached)
    assert checked >= 5


@pytest.mark.integration
def test_default_question_is_the_first_held_out_of_the_type(demo):
    study, _, evaluation = demo
    questions = study.evaluation().questions
    picked = pg.default_question(evaluation, questions, "aggregate")
    held = questions[(questions["question_id"].map(evaluation.split) == "held_out") & (questions["type"] == "aggregate")]
    assert picked == sorted(held["question_id"])[0]
    fallback = pg.default_question(evaluation, questions, "no_such_type")
    assert fallback == sorted(questions.loc[questions["question_id"].map(evaluation.split) == "held_out", "question_id"])[0]
    held_ids = sorted(questions.loc[questions["question_id"].map(evaluation.split) == "held_out", "question_id"])
    hidden = pg.question_options(evaluation, questions, show_text=False)
    assert [q for _, q in hidden] == held_ids
    assert not any(text in caption for caption, _ in hidden for text in questions["text"])
    shown = pg.question_options(evaluation, questions, show_text=True)
    assert [q for _, q in shown] == held_ids and any(text in shown[0][0] for text in questions["text"])


def test_question_picker_redraws_on_change_only():
    drawn = []

    def draw(question_id):
        drawn.append(question_id)
        return None

    picker = pg.question_picker([("q1 · a", "q1"), ("q2 · b", "q2")], draw, value="q1")
    assert drawn == []                                   # building draws nothing (headless runs stay quiet)
    dropdown = picker.children[0]
    dropdown.value = "q2"
    assert drawn == ["q2"]
    bundle = picker._repr_mimebundle_()                  # saved without widget state: a hint, not VBox(children=…
    assert bundle["text/plain"] == pg.PICKER_HINT and "VBox" not in bundle["text/plain"]


@pytest.mark.integration
def test_figures_are_built_for_the_demo(demo):
    _, built, evaluation = demo
    focus = [str(evaluation.tuned), str(evaluation.hybrid), str(evaluation.best_flat)]
    fig = pg.by_type_figure(evaluation.rank_tables["by_type"], focus, evaluation.set_tables["recall_by_type"],
                            label=built.label)
    left, right = fig.axes[:2]
    n_types = evaluation.rank_tables["by_type"]["question_type"].nunique()
    assert len(left.patches) == len(focus) * n_types and len(right.patches) == len(pg.SET_METHODS) * n_types
    assert [t.get_text() for t in left.get_xticklabels()][0] == "overall"
    hist = pg.interest_degree_figure(built.graph.statistics(), built.label)
    assert built.label in hist.axes[0].get_title()
    empty = MemoryGraph((Node("m:a", "memory", "chunk", "a"),), ())
    assert "no interest nodes" in [t.get_text() for t in pg.interest_degree_figure(empty.statistics(), "x").axes[0].texts]
    import matplotlib.pyplot as plt

    plt.close("all")


def test_provenance_table_lists_every_key_and_the_relevance_method():
    table = pg.provenance_table({"backend": "offline", "min_memories": 3, "aliases": ["カフェ"]}, "offline")
    assert table.columns.tolist() == ["stage", "key", "value"]
    assert table.values.tolist() == [["graph", "backend", "offline"], ["graph", "min_memories", "3"],
                                     ["graph", "aliases", '["カフェ"]'], ["interest_relevance", "method", "offline"]]


def memory_frames():
    chunks = pd.DataFrame({"chunk_id": ["a", "b", "c"],
                           "start_at": ["2023-04-01 19:18:32", "2023-04-03 22:04:52", "2023-05-01 08:00:00"]})
    members = pd.DataFrame({"chunk_id": ["a", "a", "a", "a", "b", "b", "b", "b", "c"],
                            "position": [0, 1, 2, 3, 0, 1, 2, 3, 0],
                            "message_id": [1, 2, 3, 4, 5, 6, 7, 8, 9]})
    messages = pd.DataFrame({"message_id": [1, 2, 3, 4, 5, 6, 7, 8, 9],
                             "sender": ["SYSTEM", "はると", "たくみ", "はると", "ゆい", "Ken", "Aki", "ゆい", "SYSTEM"]})
    return chunks, members, messages


def test_a_memory_is_labelled_by_its_time_and_speakers_named_only_where_chat_text_is_shown():
    chunks, members, messages = memory_frames()
    assert pg.memory_labels(chunks, members, messages, show_names=True) == {
        "a": "2023-04-01 19:18 · はると, たくみ", "b": "2023-04-03 22:04 · ゆい, Ken +1", "c": "2023-05-01 08:00"}
    hidden = pg.memory_labels(chunks, members, messages, show_names=False)
    assert hidden == {"a": "2023-04-01 19:18 · 2 speakers", "b": "2023-04-03 22:04 · 3 speakers",
                      "c": "2023-05-01 08:00 · 0 speakers"}
    assert not any(name in label for label in hidden.values() for name in ("はると", "ゆい", "Ken", "Aki"))


def test_a_drawn_subgraph_labels_memories_by_time_not_by_hash():
    graph = tiny_graph()
    chosen = pd.DataFrame({"interest_id": ["i:walk"], "position": [2], "label": ["walk"], "relevance": [0.9],
                           "memories": [2]})
    ranking = pd.DataFrame({"question_id": "q1", "chunk_id": ["c", "b", "a"], "rank": [1, 2, 3], "score": [1, 1, 0]})
    sub = pg.question_subgraph(graph, chosen, ["a"], ranking, "q1", k=1)
    labels = {"a": "2023-04-01 19:18 · 2 speakers", "b": "2023-04-03 22:04 · 3 speakers", "c": "2023-05-01 08:00"}
    fig = pg.draw_subgraph(sub, show_labels=False, memory_labels=labels)
    texts = [t.get_text() for ax in fig.axes for t in ax.texts]
    assert "2023-04-01 19:18 · 2 speakers · rank 3 · not reached" in texts
    assert not any(t.startswith("m:") for t in texts)
