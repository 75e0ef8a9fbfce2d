"""Every declared figure, drawn from the demo study as its notebook draws it, reads: no two texts overlap and none
leaves the canvas (tick labels and legend entries included; :func:`pmrag.present.figure_style.text_problems`)."""

from pathlib import Path
from types import SimpleNamespace

import matplotlib

matplotlib.use("Agg")

import matplotlib.pyplot as plt  # noqa: E402
import pandas as pd  # noqa: E402
import pytest  # noqa: E402

from pmrag.present import beyond as pb  # noqa: E402
from pmrag.present import graph as pg  # noqa: E402
from pmrag.present import plots  # noqa: E402
from pmrag.present import statistics as ps  # noqa: E402
from pmrag.present.artifacts import FIGURES, F, T  # noqa: E402
from pmrag.present.figure_style import COLUMN_IN, text_problems  # noqa: E402

REPO = Path(__file__).resolve().parents[2]
pytestmark = pytest.mark.integration


@pytest.fixture(scope="module")
def study():
    from pmrag.study import Study

    study = Study.from_params(REPO / "params" / "demo.yaml")
    if not (study.run_dir / T.hybrid_sweep.file).is_file():
        pytest.skip("the demo study has not run here (make study)")
    return study


def table(study, spec) -> pd.DataFrame:
    return pd.read_csv(study.run_dir / spec.file)


def beyond_figure(spec, reference, title):
    return lambda s: pb.difference_figure(table(s, spec), reference, title)


def graph_by_type(study):
    ranks, sets = table(study, T.graph_rank_differences), table(study, T.graph_set_by_type)
    focus = [ranks["method_a"].iloc[0], ranks["method_a"].iloc[1], ranks["method_b"].iloc[0]]   # tuned, hybrid, flat
    return pg.by_type_figure(table(study, T.graph_recall_by_type), focus, sets[sets["metric"] == "set_recall"],
                             label=ranks["extractor"].iloc[0])


def subgraph(study):
    """The subgraph figure as notebook 07 draws it, with the tuning's chosen threshold and cap read from its table
    and the fixed-parameter graph ranking standing in for the tuned one (the layout and labels are the same kind;
    the graph evaluation stage is not recomputed for a drawing)."""
    from pmrag.retrieve.graph_interest import InterestIndex

    chosen = table(study, T.graph_tuning).query("chosen").iloc[0]
    built, evaluable = study.graph(), study.evaluation()
    graph_names = [str(r) for r in study.retrievers() if r.method == "graph"]
    evaluation = SimpleNamespace(tuned=graph_names[0], rankings={graph_names[0]: study.ranked(graph_names[0]).rankings})
    question_id = evaluable.questions.sort_values("question_id").query(
        f"type == '{study.params.analysis.aggregate_type}'")["question_id"].iloc[0]
    index = InterestIndex.from_graph(built.graph, study.chunks()["chunk_id"].tolist())
    interests = pg.chosen_interests(index, study.interest_relevance().rows([question_id])[0], chosen["threshold"],
                                    int(chosen["cap"]))
    fig, _ = pg.subgraph_figure(built.graph, evaluation, question_id, interests, evaluable.qrels,
                                show_labels=study.shows_chat_text(), max_memories=24,
                                title=f"{question_id} (aggregate) · {built.label}",
                                memory_labels=pg.memory_labels(study.chunks(), study.chunk_messages(), study.messages(),
                                                               study.shows_chat_text()))
    return fig


def power(study):
    pilot, params = table(study, T.table5_differences).iloc[0], study.params.statistics
    return ps.power_figure(table(study, T.power_curve), (pilot["method_a"], pilot["method_b"]), params.power,
                           params.alpha, pilot["delta"])


def best_hybrid(study) -> str:
    return str(table(study, T.table5_differences)["method_a"].iloc[0])


# each declared figure as its notebook draws it (inputs read from the tables the notebooks saved, or the study)
DRAW = {
    F.chunk_lengths.name: lambda s: plots.chunk_length_figure(s.chunks(), s.params.chunking.max_summary_input_chars),
    F.representation_lengths.name: lambda s: plots.representation_length_figure(s.representation_profile().lengths),
    F.figure1_single_retriever_recall.name: lambda s: plots.recall_ci_figure(table(s, T.single_retriever_cis)),
    F.figure2_hybrid_recall.name: lambda s: plots.hybrid_sweep_figure(table(s, T.hybrid_sweep), "recall@5"),
    F.figure3_hybrid_ndcg.name: lambda s: plots.hybrid_sweep_figure(table(s, T.hybrid_sweep), "ndcg@5"),
    F.figure4_differences.name: lambda s: plots.difference_figure(table(s, T.table5_differences)),
    F.figure5_best_hybrid_by_type.name: lambda s: plots.by_type_figure(table(s, T.recall_by_type_cis), best_hybrid(s)),
    F.figure6_topk_sensitivity.name: lambda s: plots.topk_sensitivity_figure(
        table(s, T.topk_sensitivity), "Top-K sensitivity by question type: hybrid:summary_bm25+summary_vector@0.50"),
    F.figure_interest_degrees.name: lambda s: pg.interest_degree_figure(s.graph().graph.statistics(), s.graph().label),
    F.figure_graph_by_type.name: graph_by_type,
    F.figure_graph_subgraph.name: subgraph,
    F.figure_beyond_lexical.name: beyond_figure(T.beyond_lexical, "best flat",
                                                "Lexical methods − the paper's best flat retriever, Recall@5"),
    F.figure_beyond_dense.name: beyond_figure(T.beyond_dense, "best flat",
                                              "Dense methods − the paper's best flat retriever, Recall@5"),
    F.figure_beyond_distributed.name: beyond_figure(
        T.beyond_distributed, "best flat", "Distributed-evidence methods − the paper's best flat retriever, Recall@5"),
    F.figure_beyond_fusion.name: beyond_figure(T.beyond_fusion, "best hybrid",
                                               "Each fusion's best − the paper's best hybrid, Recall@5"),
    F.figure_beyond_ablation.name: beyond_figure(T.beyond_ablation, "best flat",
                                                 "embedding_text's parts − the paper's best flat retriever, Recall@5"),
    F.figure_selection.name: lambda s: ps.selection_figure(table(s, T.selection_summary)),
    F.figure_power.name: power,
}


def test_every_declared_figure_is_drawn_here():
    assert set(DRAW) == set(FIGURES)


@pytest.mark.parametrize("name", sorted(FIGURES))
def test_a_declared_figure_reads_in_a_notebook_column(study, name):
    fig = DRAW[name](study)
    try:
        assert fig.get_size_inches()[0] <= COLUMN_IN + 1e-9, f"{name} is wider than a notebook column"
        assert text_problems(fig) == [], name
    finally:
        plt.close(fig)
