"""params/locomo.yaml as shipped, on a small LoCoMo-shaped file generated here (the real locomo10.json is not
bundled: CC BY-NC 4.0): the study runs end to end, leaves category 5 out, names LoCoMo's categories, takes
multi-hop as its aggregate type, prints chat text (public data) and refuses a type that matches nothing."""

import json
import shutil
import subprocess
import sys
from collections import Counter
from pathlib import Path

import nbformat
import pandas as pd
import pytest

from conftest import one_openmp_thread
from pmrag.core.errors import PmragError
from pmrag.study import Study
from pmrag.study.runner import numbered_notebooks, status_lines

pytestmark = pytest.mark.integration

REPO = Path(__file__).resolve().parents[2]
LOCOMO_CACHE = REPO / "tests" / "fixtures" / "locomo_cache" / "embeddings.sqlite"
CATEGORIES = {1: "multi-hop", 2: "temporal", 3: "open-domain", 4: "single-hop", 5: "adversarial"}
TOPICS = ["the café on Elm street", "a résumé for the new job", "the marathon in spring", "painting classes",
          "adopting a puppy", "the camping trip", "a book club", "learning the guitar"]


def pmrag(*args: str, cwd: Path) -> tuple[subprocess.CompletedProcess, int]:
    """``python -m pmrag ARGS`` run to its end; the result and the command's pid."""
    process = subprocess.Popen([sys.executable, "-m", "pmrag", *args], cwd=cwd, text=True,
                               stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    out, err = process.communicate(timeout=600)
    return subprocess.CompletedProcess(process.args, process.returncode, out, err), process.pid


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


def warm_cache(project: Path) -> None:
    """The embedding cache of the shipped params (``cache_dir: ../outputs/.cache``) primed with the committed vectors
    of :func:`locomo_file`'s texts (multilingual-e5-small, content-addressed: a text that changed is embedded
    again, so a stale file only costs time).  Rebuild it with ``make test-caches``."""
    cache = project / "outputs" / ".cache"
    cache.mkdir(parents=True, exist_ok=True)
    shutil.copy(LOCOMO_CACHE, cache / LOCOMO_CACHE.name)


@pytest.fixture(scope="module")
def built_locomo(tmp_path_factory):
    """The shipped params' whole study, built once for the tests that only read it."""
    project = tmp_path_factory.mktemp("locomo")
    for folder in ("params", "data", "notebooks"):
        (project / folder).mkdir()
    shutil.copy(REPO / "params" / "locomo.yaml", project / "params" / "locomo.yaml")
    locomo_file(project / "data" / "locomo10.json")
    warm_cache(project)
    study = Study.from_params(project / "params" / "locomo.yaml")
    with one_openmp_thread():    # the learned fusion's trees
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


def test_pmrag_study_executes_every_numbered_notebook_on_a_second_dataset(built_locomo):
    """``pmrag study`` on the built LoCoMo study: every committed notebook runs under papermill with the params
    injected (English, LoCoMo's own question types, gold that is itself a pool: no demo assumption), each reads
    the stages the build computed (loaded once per kernel, never computed), and a second run executes nothing."""
    from pmrag.study.engine import LOG_FILE

    project, study = built_locomo
    params = project / "params" / "locomo.yaml"
    _with(project, "notebooks_dir: ../notebooks", f"notebooks_dir: {REPO / 'notebooks'}")
    built = len((study.run_dir / LOG_FILE).read_text(encoding="utf-8").splitlines())
    result, pid = pmrag("study", "--jobs", "2", str(params), cwd=project)
    assert result.returncode == 0, result.stderr[-2000:]
    run_dir = study.run_dir
    committed = [p.name for p in numbered_notebooks(REPO / "notebooks")]
    assert committed[:6] == ["01_chunking.ipynb", "02_representations.ipynb", "03_retrievers.ipynb", "04_hybrid_sweep.ipynb",
                             "05_bootstrap.ipynb", "06_failure_analysis.ipynb"]
    assert sorted(p.name for p in (run_dir / "notebooks").iterdir()) == committed
    assert "[notebooks] executing each once the stages it reads are computed, 2 at a time" in result.stderr
    assert all(f"[start] {name}" in result.stderr for name in committed)
    assert all(f"[done] {name} (" in result.stderr for name in committed)
    executed = nbformat.read(run_dir / "notebooks" / "01_chunking.ipynb", as_version=4)
    injected = [c for c in executed.cells if "injected-parameters" in c.metadata.get("tags", [])]
    assert injected and str(params) in injected[0].source
    assert not [o for c in executed.cells if c.cell_type == "code" for o in c.outputs if o.output_type == "error"]

    # the tables and figures every notebook writes
    for table in ["table1_dataset", "chunking_sessions_windows", "raw_text_lengths", "message_inventory",
                  "representation_lengths", "per_question_metrics", "table3_single_retrievers", "hybrid_sweep",
                  "table4_hybrids", "hybrid_per_question_metrics", "bootstrap_cis", "table5_differences",
                  "table6_best_hybrid_by_type", "table7_top5_failures", "table8_failure_labels",
                  "table9_success_overlap", "aggregate_detail", "topk_sensitivity", "table2_graph_sets",
                  "beyond_distributed", "selection_summary", "leave_one_out_pool_bias"]:
        assert (run_dir / "tables" / f"{table}.csv").stat().st_size > 0, table
    for figure in ["chunk_lengths", "figure4_differences", "figure5_best_hybrid_by_type", "figure6_topk_sensitivity"]:
        assert (run_dir / "figures" / f"{figure}.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n", figure
    singles = pd.read_csv(run_dir / "tables" / "per_question_metrics.csv")       # notebook 03: single retrievers only
    hybrids = pd.read_csv(run_dir / "tables" / "hybrid_per_question_metrics.csv")  # notebook 04: the selected hybrids
    assert not any(name.startswith("hybrid:") for name in singles["retriever"])
    assert set(singles["retriever"]) == {str(r) for r in study.retrievers()}
    assert hybrids["retriever"].nunique() > 0 and all(name.startswith("hybrid:") for name in hybrids["retriever"])
    assert (run_dir / "runs" / "embedding_text_vector.trec").is_file() and (run_dir / "qrels.trec").is_file()
    assert (run_dir / "public" / "per_question_metrics.csv").is_file()
    readme = (run_dir / "README.md").read_text(encoding="utf-8")
    assert "Selected best hybrid" in readme and "(figures/figure6_topk_sensitivity.png)" in readme

    # the command executed each notebook once; each kernel loaded what it read, once, and computed nothing
    lines = [json.loads(line) for line in (run_dir / LOG_FILE).read_text(encoding="utf-8").splitlines()[built:]]
    notebooks = [line for line in lines if line["stage"].startswith("notebook:")]
    assert sorted(line["stage"] for line in notebooks) == [f"notebook:{Path(name).stem}" for name in committed]
    assert {(line["pid"], line["action"]) for line in notebooks} == {(pid, "computed")}
    stages = [line for line in lines if not line["stage"].startswith("notebook:")]
    in_kernels = [line for line in stages if line["pid"] != pid]
    assert {line["action"] for line in stages} == {"loaded"}
    twice = [k for k, n in Counter((line["pid"], line["stage"]) for line in stages).items() if n > 1]
    assert not twice, (twice, pid)
    assert len({line["pid"] for line in in_kernels}) == len(committed)
    assert {"sweep", "hybrids", "metrics", "reliability", "failures", "statistics", "graph_evaluation", "qrels",
            "chunks", "ingest"} <= {line["stage"] for line in in_kernels}

    # nothing changed: every stage and notebook is current, and a second run executes no notebook
    states = dict(line.split()[:2] for line in status_lines(params)[1:])
    assert {f"notebook:{Path(name).stem}" for name in committed} <= set(states)
    assert set(states.values()) == {"cached"}
    copies = {p.name: p.stat().st_mtime_ns for p in (run_dir / "notebooks").iterdir()}
    again, _ = pmrag("study", str(params), cwd=project)
    assert again.returncode == 0, again.stderr[-2000:]
    assert all(f"[cached] {name}" in again.stderr for name in committed), again.stderr[-2000:]
    assert "[done]" not in again.stderr and "[notebooks]" not in again.stderr and "[1/" not in again.stderr
    assert {p.name: p.stat().st_mtime_ns for p in (run_dir / "notebooks").iterdir()} == copies


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


def test_the_broader_sweep_and_fusions_of_more_retrievers_on_english_data(built_locomo):
    from pmrag.present.fusion_overview import BROADER_ROW, PAPER_ROW, fusion_overview

    _, study = built_locomo
    hybrid, hybrids, statistics = study.params.hybrid, study.hybrids(), study.statistics()
    assert hybrid.broader() and len(hybrid.selection_pairing_ids()) < len(hybrid.pairing_ids())
    paper = {(str(a), str(b)) for a, b in hybrid.selection_pairing_ids()}
    assert set(zip(hybrids.best["bm25"], hybrids.best["vector"])) == paper      # Table 4: the paper's pairings
    assert (str(hybrids.selected.first), str(hybrids.selected.second)) in paper
    assert len(hybrids.broader) == len(hybrid.pairing_ids()) and hybrids.broader_selected is not None
    assert statistics.held_out_broader is not None and statistics.broader_pairings == len(hybrid.pairing_ids())
    results = study.multifusion()
    assert [(len(r.retrievers), r.fusion, r.search) for r in results] == [
        (3, fusion, search) for fusion in ("minmax", "rrf") for search in ("grid", "equal")] + [
        (4, fusion, search) for fusion in ("minmax", "rrf") for search in ("coordinate ascent", "equal")]
    overview = fusion_overview(statistics, results, len(paper))
    assert list(overview["procedure"][:2]) == [PAPER_ROW, BROADER_ROW] and len(overview) == 2 + len(results)


def test_the_learned_fusion_ranks_every_question_out_of_fold_by_conversation(built_locomo):
    """params/locomo.yaml turns the learned fusion on: folds by conversation (three here), each question ranked by
    models trained on the other conversations only, both models reported."""
    _, study = built_locomo
    fused = study.get("learned_fusion")
    assert fused.scheme == "GroupKFold by source: 3 folds over 3 sources"
    assert (fused.folds.groupby("group")["fold"].nunique() == 1).all()
    assert set(fused.folds["question_id"]) == set(study.evaluation().questions["question_id"])
    assert set(fused.per_question["retriever"]) == {"learned_logistic", "learned_gradient_boosting"}
    assert fused.retrievers == tuple(map(str, study.retrievers()))
