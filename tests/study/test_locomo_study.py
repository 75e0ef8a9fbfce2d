"""params/locomo.yaml as shipped, on a small LoCoMo-shaped file generated here (the real locomo10.json is not
bundled: CC BY-NC 4.0): the study runs end to end, leaves category 5 out, names LoCoMo's categories, takes
multi-hop as its aggregate type, prints chat text (public data) and refuses a type that matches nothing."""

import json
import shutil
from pathlib import Path

import pytest

from pmrag.core.errors import PmragError
from pmrag.study import Study

pytestmark = pytest.mark.integration

REPO = Path(__file__).resolve().parents[2]
CATEGORIES = {1: "multi-hop", 2: "temporal", 3: "open-domain", 4: "single-hop", 5: "adversarial"}
TOPICS = ["the café on Elm street", "a résumé for the new job", "the marathon in spring", "painting classes",
          "adopting a puppy", "the camping trip", "a book club", "learning the guitar"]


def _session(sample: int, number: int, speakers: tuple[str, str]) -> list[dict]:
    topic = TOPICS[(sample + number - 1) % len(TOPICS)]
    return [{"speaker": speakers[i % 2], "dia_id": f"D{number}:{i + 1}",
             "text": f"Turn {i + 1} of session {number}: let me tell you more about {topic} and what happened."}
            for i in range(12)]


def locomo_file(path: Path, samples: int = 3, sessions: int = 3) -> Path:
    """A LoCoMo-shaped list of samples; every category has questions with evidence in the sessions."""
    data = []
    for s in range(samples):
        speakers = (f"Speaker{s}A", f"Speaker{s}B")
        conversation = {"speaker_a": speakers[0], "speaker_b": speakers[1]}
        for n in range(1, sessions + 1):
            conversation[f"session_{n}"] = _session(s, n, speakers)
            conversation[f"session_{n}_date_time"] = f"1:{10 + n:02d} pm on {n + 1} May, 2023"
        qa = [{"question": f"What did they say about {TOPICS[(s + n - 1) % len(TOPICS)]}?", "answer": "details",
               "evidence": [f"D{n}:{3 + c}"] + ([f"D{(n % sessions) + 1}:2"] if c == 1 else []), "category": c}
              for n in range(1, sessions + 1) for c in CATEGORIES]
        data.append({"sample_id": f"conv-{s}", "conversation": conversation, "qa": qa})
    path.write_text(json.dumps(data), encoding="utf-8")
    return path


@pytest.fixture
def locomo_project(tmp_path):
    """A project folder laid out like this repository: params/locomo.yaml (the shipped file), data/locomo10.json."""
    (tmp_path / "params").mkdir()
    (tmp_path / "data").mkdir()
    (tmp_path / "notebooks").mkdir()
    shutil.copy(REPO / "params" / "locomo.yaml", tmp_path / "params" / "locomo.yaml")
    locomo_file(tmp_path / "data" / "locomo10.json")
    return tmp_path


def _with(project: Path, old: str, new: str) -> Path:
    path = project / "params" / "locomo.yaml"
    text = path.read_text(encoding="utf-8")
    assert old in text
    path.write_text(text.replace(old, new, 1), encoding="utf-8")
    return path


@pytest.fixture(scope="module")
def built_locomo(tmp_path_factory):
    """The shipped params' whole study, built once for the tests that only read it."""
    project = tmp_path_factory.mktemp("locomo")
    for folder in ("params", "data", "notebooks"):
        (project / folder).mkdir()
    shutil.copy(REPO / "params" / "locomo.yaml", project / "params" / "locomo.yaml")
    locomo_file(project / "data" / "locomo10.json")
    study = Study.from_params(project / "params" / "locomo.yaml")
    study.build()
    return project, study


def test_the_shipped_locomo_params_run_a_whole_study(built_locomo):
    _, study = built_locomo
    evaluation = study.evaluation()
    assert evaluation.excluded_types == ("adversarial",)
    assert set(evaluation.questions["type"]) == {"multi-hop", "temporal", "open-domain", "single-hop"}
    assert study.question_types() == ["multi-hop", "open-domain", "single-hop", "temporal"]
    assert len(evaluation.questions) == 3 * 3 * 4 and evaluation.n_questions == 3 * 3 * 5
    assert study.shows_chat_text() and "public data" in study.chat_text_caption()
    labels = study.failures().labels
    assert set(labels["question_id"]) <= set(evaluation.questions["question_id"])
    # the English text path: the accented word is one BM25 token of chunk and question
    assert study.params.bm25.latin_letters
    chunks = study.chunks()
    assert chunks["raw_text"].str.contains("café").any()
    assert (chunks["n_messages"] <= 10).all()   # 10-turn windows (see the params' comment)
    # TOBUGraph on English data: interests from the English path, every set method scored on held-out questions
    graph = study.graph().graph
    assert graph.of_kind("interest") and study.graph().label.startswith("offline stand-in")
    assert all(" " not in n.label or n.subkind == "named" for n in graph.of_kind("interest"))
    graph_evaluation = study.graph_evaluation()
    assert set(graph_evaluation.set_tables["cis"]["retriever"]) == {"TOBUGraph", "RAGv1", "RAGv2", "RAGv3"}
    assert graph_evaluation.best_flat.method != "graph"


@pytest.mark.parametrize("notebook, table", [("07_memory_graph", "table2_graph_sets"),
                                             ("08_beyond_retrieval", "beyond_distributed"),
                                             ("09_selection_and_power", "selection_summary"),
                                             ("10_incomplete_gold", "leave_one_out_pool_bias")])
def test_the_later_notebooks_run_on_the_locomo_params(built_locomo, tmp_path, notebook, table):
    """The memory-graph, beyond-retrieval, selection and incomplete-gold notebooks on a second dataset (English,
    its own question types, gold that is itself a pool): no demo assumption."""
    from pmrag.study.notebooks import execute_notebook

    project, _ = built_locomo
    params = project / "params" / "locomo.yaml"
    result = execute_notebook(REPO / "notebooks" / f"{notebook}.ipynb", tmp_path / f"{notebook}.ipynb", params)
    assert "error" not in result, result.get("error")
    assert (project / "outputs" / "locomo" / "tables" / f"{table}.csv").is_file()


def test_the_beyond_retrievers_rank_on_english_data(built_locomo):
    _, study = built_locomo
    metrics = study.metrics()
    listed = [str(r) for r in study.retrievers()]
    assert set(metrics["retriever"]) == set(listed)
    # 10-turn chunks in 4-line sub-windows: several windows per chunk, each chunk owning at least one
    windows = study.get("subvectors:raw_text")
    assert len(windows.owner) > len(study.chunks()) and set(windows.owner) == set(range(len(study.chunks())))
    assert study.get("decomposition").label.startswith("offline stand-in")
    assert set(study.sweep()["fusion"]) == {"minmax", "rrf", "combmnz"}
    # the paper's selection is made among its own fusion only
    assert study.hybrids().selected.fusion == "minmax" and set(study.hybrids().best["fusion"]) == {"minmax"}


def test_a_type_that_matches_no_question_is_an_error_naming_the_key(locomo_project):
    path = _with(locomo_project, "exclude_types: [adversarial]", "exclude_types: [category_5]")
    with pytest.raises(PmragError, match=r"key 'dataset.exclude_types': question type 'category_5' matches no "
                                         r"question .*adversarial") as info:
        Study.from_params(path).get("qrels")
    assert "\n" not in str(info.value)


def test_an_aggregate_type_that_matches_no_question_is_an_error(locomo_project):
    path = _with(locomo_project, "aggregate_type: multi-hop", "aggregate_type: aggregate")
    with pytest.raises(PmragError, match=r"key 'analysis.aggregate_type': 'aggregate' matches no evaluated question "
                                         r"type \(types: multi-hop, open-domain, single-hop, temporal\)"):
        Study.from_params(path).get("qrels")


def test_include_types_keeps_only_the_named_types(locomo_project):
    path = _with(locomo_project, "exclude_types: [adversarial]", "include_types: [multi-hop, temporal]")
    evaluation = Study.from_params(path).get("qrels")
    assert set(evaluation.questions["type"]) == {"multi-hop", "temporal"}
    assert evaluation.excluded_types == ("adversarial", "open-domain", "single-hop")


def test_private_inputs_hide_chat_text_unless_the_params_say_otherwise(tmp_path):
    from conftest import make_tiny_study

    study = make_tiny_study(tmp_path)   # a LINE JSON export and a questions file: private
    assert not study.shows_chat_text()
    assert "hidden" in study.chat_text_caption() and "private" in study.chat_text_caption()
    study.params = study.params.model_copy(update={
        "dataset": study.params.dataset.model_copy(update={"show_chat_text": True})})
    assert study.shows_chat_text() and "show_chat_text: true" in study.chat_text_caption()


def test_a_kernel_started_by_a_jupyter_server_shows_progress(tmp_path, monkeypatch, capsys):
    from conftest import make_tiny_study

    monkeypatch.delenv("JPY_SESSION_NAME", raising=False)
    assert not make_tiny_study(tmp_path).progress          # papermill, nbval, scripts: no bars in outputs
    monkeypatch.setenv("JPY_SESSION_NAME", str(tmp_path / "nb.ipynb"))
    study = make_tiny_study(tmp_path)
    assert study.progress
    study.progress = False
    study.build(progress=True)
    assert "stages" in capsys.readouterr().err and not study.progress   # the bar counted the stages; restored


def test_selection_aware_statistics_on_english_data(built_locomo):
    from pmrag.present.statistics import group_table, selection_table

    _, study = built_locomo
    statistics = study.statistics()
    selected = study.hybrids().selected
    in_sample = study.hybrids().per_question
    in_sample = in_sample[in_sample["retriever"] == str(selected)]["recall@5"].mean()
    summary = selection_table(statistics)
    paper = summary[summary["procedure"].str.startswith("pairing and β (the paper") & (summary["metric"] == "recall@5")]
    assert paper["in_sample"].iloc[0] == pytest.approx(in_sample)
    assert paper["conditional_low"].iloc[0] <= in_sample <= paper["conditional_high"].iloc[0]
    # the other fusions of hybrid.fusions get their own held-out selection
    assert set(statistics.held_out_fusions) == {"rrf", "combmnz"}
    # every method but the selected hybrid is compared once, or named as the alias of one that is
    comparisons, aliases = statistics.comparisons, statistics.aliases
    aliased = set(aliases.loc[aliases["method"] != aliases["representative"], "method"])
    compared = [m for m, r in zip(comparisons["method"], comparisons["reference"]) if m != str(selected)] + \
               [r for m, r in zip(comparisons["method"], comparisons["reference"]) if m == str(selected)]
    assert len(compared) == len(set(compared)) and not set(compared) & aliased
    assert set(compared) | aliased | {str(selected)} == set(study.per_question()["retriever"])
    assert len(statistics.comparisons) == study.per_question()["retriever"].nunique() - 1 - len(aliased)
    # LoCoMo's 10-turn windows overlap by 2 turns: evidence there makes two gold chunks one group
    groups = group_table(study.per_question(), statistics.group_rows, statistics.groups, statistics.message_rows,
                         statistics.evidence_messages)
    assert (groups["groups"] <= groups["gold chunks"]).all()
    # message-level recall of every method the group level scores, each evaluated question once
    assert set(statistics.message_rows["retriever"]) == set(statistics.group_rows["retriever"])
    assert (statistics.message_rows.groupby("retriever").size() == study.evaluation().questions.shape[0]).all()
    evidence = study.question_evidence()
    evaluated = evidence["question_id"].isin(study.evaluation().questions["question_id"])
    assert groups["evidence messages"].iloc[0] == ((evidence["relevance"] == 2) & evaluated).sum()
    assert set(groups["retriever"]) == set(statistics.group_rows["retriever"]) & set(study.per_question()["retriever"])
