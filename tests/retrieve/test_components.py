"""Retrievers as components: a method a study brings in one file of its own (``retrieval.plugins``) runs through
every stage and table (rankings, TREC run, metrics, sweep, hybrids, intervals, failures, statistics, the
inspector, notebook 08's family tables); editing that file recomputes its rankings; a missing or broken file is a
one-line error; the package's own components register by existing (no import line) and declare their family,
bases and label; an unregistered method is refused on load; BM25's zero_scores setting."""

import shutil
import subprocess
import sys
import threading
import time
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from pmrag.core.errors import ParamsError
from pmrag.core.names import HybridId, RetrieverId
from pmrag.core.registry import Registry
from pmrag.evaluate import beyond, failures, reliability, trec
from pmrag.present import tables
from pmrag.present.labels import short_label
from pmrag.retrieve.registry import PLUGIN_PACKAGE, RETRIEVERS
from pmrag.retrieve.retrievers import (FAMILIES, TEXTS, BM25Retriever, RetrieverComponent, VectorRetriever,
                                       WrappingRetriever)
from conftest import make_tiny_study, params_error, write_file

REPO = Path(__file__).resolve().parents[2]
TOY = "raw_text_toy"
PLUGIN = "toy_retriever.py"
RETRIEVERS_LISTED = ["raw_text_bm25", "summary_bm25", "raw_text_vector", "summary_vector", TOY]
TOY_YAML = (
    f"retrieval: {{retrievers: [{', '.join(RETRIEVERS_LISTED)}], plugins: [{PLUGIN}]}}\n"
    "analysis: {aggregate_type: contextual, reference_retriever: raw_text_bm25, "
    f"diagnostic_hybrid: [{TOY}, raw_text_vector, 0.5]}}\n"
    f"hybrid: {{pairings: [[raw_text_bm25, raw_text_vector], [{TOY}, raw_text_vector]], beta_step: 0.25}}\n"
    "bootstrap: {n_resamples: 200}\n"
)
# the whole method, as a study would write it beside its params file
TOY_SOURCE = '''"""Ranks a representation's texts by the characters they share with the question."""

import numpy as np

from pmrag.core.names import RetrieverId
from pmrag.retrieve.registry import RETRIEVERS
from pmrag.retrieve.retrievers import TEXTS, RetrieverComponent, ranked_from_scores


def shared_characters(question, text):
    return len({c for c in question.lower() if not c.isspace()} & set(text.lower()))


@RETRIEVERS.register("toy")
class ToyRetriever(RetrieverComponent):
    method = "toy"
    family = "lexical"
    label = "chars"

    @classmethod
    def bases(cls, rid):
        return (RetrieverId(rid.representation, "bm25"),)

    @classmethod
    def needs(cls, rid):
        return (TEXTS,)

    def rank(self, corpus, queries, depth):
        texts = corpus.texts(self.rid.representation)
        scores = np.array([[shared_characters(q, t) for t in texts] for q in queries.texts], dtype=np.float64)
        return ranked_from_scores(scores, corpus, queries, depth)
'''


def shared_characters(question: str, text: str) -> int:
    """The toy score: distinct characters (ignoring case and whitespace) the question and the chunk share."""
    return len({c for c in question.lower() if not c.isspace()} & set(text.lower()))


@pytest.fixture(scope="module")
def toy_study(tmp_path_factory):
    root = tmp_path_factory.mktemp("toy")
    write_file(root, TOY_SOURCE, PLUGIN)
    study = make_tiny_study(root, TOY_YAML)
    study.build()
    return study


@pytest.mark.integration
def test_the_plugin_file_is_imported_under_a_name_without_its_location(toy_study):
    component = RETRIEVERS.get("toy")
    assert component.__module__ == f"{PLUGIN_PACKAGE}.toy_retriever"
    assert Path(sys.modules[component.__module__].__file__) == toy_study.params.path.parent / PLUGIN
    assert toy_study.params.retrieval.plugins == (str(toy_study.params.path.parent / PLUGIN),)
    assert component.family == "lexical" and component.label == "chars"
    assert component.bases(RetrieverId.parse(TOY)) == (RetrieverId("raw_text", "bm25"),)


@pytest.mark.integration
def test_toy_rankings_are_its_scores_in_order(toy_study):
    rankings = toy_study.rankings()
    assert list(rankings) == RETRIEVERS_LISTED
    toy = rankings[TOY]
    questions = toy_study.evaluation().questions.set_index("question_id")["text"]
    texts = toy_study.representations().set_index("chunk_id")["raw_text"]
    n_chunks = len(texts)
    assert sorted(toy["question_id"].unique()) == sorted(questions.index)
    for qid, rows in toy.groupby("question_id"):
        assert rows["rank"].tolist() == list(range(1, n_chunks + 1))
        assert sorted(rows["chunk_id"]) == sorted(texts.index)
        expected = [shared_characters(questions[qid], texts[c]) for c in rows["chunk_id"]]
        assert rows["score"].tolist() == pytest.approx(expected, abs=0)
        assert np.all(np.diff(rows["score"].to_numpy()) <= 0)
        assert max(expected) > 0
    ranked = toy_study.ranked(TOY)
    assert ranked.matches.to_dict() == {q: int((toy[toy["question_id"] == q]["score"] > 0).sum())
                                        for q in questions.index}


@pytest.mark.integration
def test_toy_run_file_holds_its_rankings(toy_study):
    run = trec.read_run(toy_study.run_dir / "runs" / f"{TOY}.trec")
    rankings = toy_study.rankings()[TOY]
    assert run[["question_id", "chunk_id"]].values.tolist() == rankings[["question_id", "chunk_id"]].values.tolist()
    assert run["rank"].tolist() == rankings["rank"].tolist()
    assert set(run["tag"]) == {TOY}


@pytest.mark.integration
def test_toy_metrics_rows_score_its_rankings(toy_study):
    metrics = toy_study.metrics()
    assert list(dict.fromkeys(metrics["retriever"])) == RETRIEVERS_LISTED
    rows = metrics[metrics["retriever"] == TOY].set_index("question_id")
    evaluation = toy_study.evaluation()
    assert sorted(rows.index) == sorted(evaluation.questions["question_id"])
    rankings = toy_study.rankings()[TOY]
    for qid, gold in evaluation.qrels[evaluation.qrels["relevance"] == 2].groupby("question_id"):
        ranked = rankings[rankings["question_id"] == qid]
        first = ranked[ranked["chunk_id"].isin(gold["chunk_id"])]["rank"].min()
        assert rows.loc[qid, "mrr@5"] == pytest.approx(1 / first if first <= 5 else 0.0, abs=1e-12)


@pytest.mark.integration
def test_toy_pairing_is_swept_selected_and_bootstrapped(toy_study):
    betas = toy_study.params.hybrid.betas()
    assert betas == (0.0, 0.25, 0.5, 0.75, 1.0)
    sweep = toy_study.sweep()
    swept = sweep[(sweep["bm25"] == TOY) & (sweep["vector"] == "raw_text_vector")]
    n_questions = len(toy_study.evaluation().questions)
    assert len(swept) == len(betas) * n_questions
    assert sorted(set(swept["beta"])) == list(betas)
    assert set(zip(sweep["bm25"], sweep["vector"])) == {("raw_text_bm25", "raw_text_vector"), (TOY, "raw_text_vector")}

    hybrids = toy_study.hybrids()
    best = hybrids.best[hybrids.best["bm25"] == TOY]
    assert len(best) == 1 and best["vector"].item() == "raw_text_vector"
    chosen = HybridId(RetrieverId.parse(TOY), RetrieverId.parse("raw_text_vector"), best["beta"].item())
    assert chosen in hybrids.ids()
    assert (toy_study.run_dir / "runs" / f"{chosen.file_stem()}.trec").is_file()

    cis = toy_study.reliability().cis
    for name in (TOY, str(chosen)):
        assert sorted(cis[cis["retriever"] == name]["metric"]) == ["mrr@5", "ndcg@5", "recall@5"], name
    mean = toy_study.per_question().groupby("retriever")["recall@5"].mean()
    toy_cis = cis[(cis["retriever"] == TOY) & (cis["metric"] == "recall@5")]
    assert toy_cis["mean"].item() == pytest.approx(mean[TOY], abs=1e-12)
    assert toy_cis["ci_low"].item() <= toy_cis["mean"].item() <= toy_cis["ci_high"].item()


@pytest.mark.integration
def test_tables_show_the_toy_retriever(toy_study):
    table = tables.table3(toy_study.reliability().cis)  # notebook 05: singles and hybrids
    assert TOY in table.index and list(table.columns) == ["Recall@5", "MRR@5", "nDCG@5"]
    assert table.loc[TOY].notna().all()
    cis = reliability.metric_cis(toy_study.metrics(), k=5, params=toy_study.params.bootstrap)  # notebook 03
    assert list(tables.table3(cis).index) == RETRIEVERS_LISTED
    grid = tables.representation_grid(cis)
    assert list(grid.columns) == ["bm25", "toy", "vector"]
    assert list(grid.index) == ["raw_text", "summary"]
    toy_mean = cis[(cis["retriever"] == TOY) & (cis["metric"] == "recall@5")]["mean"].item()
    assert grid.loc["raw_text", "toy"] == pytest.approx(toy_mean, abs=1e-12)
    assert np.isnan(grid.loc["summary", "toy"])


@pytest.mark.integration
def test_failures_label_the_toy_hybrid(toy_study):
    """The diagnostic hybrid is the toy's: Table 8's labels are the rules applied to its rows (notebook 06)."""
    settings = toy_study.params.analysis
    diagnostic = str(settings.diagnostic())
    rows = toy_study.per_question()
    rows = rows[rows["retriever"] == diagnostic]
    assert len(rows) == len(toy_study.evaluation().questions)
    expected = failures.rule_labels(rows, toy_study.evaluation().qrels, settings.failure_k, settings.aggregate_type,
                                    settings.min_primary_gold)
    pd.testing.assert_frame_equal(toy_study.failures().labels.reset_index(drop=True), expected.reset_index(drop=True))


@pytest.mark.integration
def test_statistics_compare_the_toy_with_the_selected_hybrid(toy_study):
    statistics = toy_study.statistics()
    selected = str(toy_study.hybrids().selected)
    toy = statistics.comparisons[statistics.comparisons["method"] == TOY]
    assert len(toy) == 1 and toy["reference"].item() == selected
    mean = toy_study.per_question().groupby("retriever")["recall@5"].mean()
    assert toy["delta"].item() == pytest.approx(mean[TOY] - mean[selected], abs=1e-12)
    assert TOY in set(statistics.group_rows["retriever"])


@pytest.mark.integration
def test_the_inspector_lists_the_toy_by_its_label(toy_study):
    pytest.importorskip("ipywidgets")
    from pmrag.present.inspector import FailureInspector

    evaluation = toy_study.evaluation()
    inspector = FailureInspector.from_results(
        evaluation.questions, toy_study.chunks().assign(speakers=""), evaluation.qrels, toy_study.rankings(),
        toy_study.hybrids().best, pairings=toy_study.params.hybrid.pairings, labels=toy_study.failures().labels,
        diagnostic=toy_study.params.analysis.diagnostic())
    assert TOY in inspector.data.retrievers
    assert TOY in [value for _, value in inspector.retriever.options]
    assert short_label(TOY) == "raw·chars"                     # the component's label
    assert (TOY, "raw_text_vector") in inspector.data.pairings


@pytest.mark.integration
def test_notebook_08_compares_the_toy_in_the_family_it_declares(toy_study, tmp_path):
    from pmrag.study.notebooks import execute_notebook

    result = execute_notebook(REPO / "notebooks" / "08_beyond_retrieval.ipynb", tmp_path / "08.ipynb",
                              toy_study.params.path)
    assert "error" not in result, result.get("error")
    saved = toy_study.run_dir / "tables"
    lexical = pd.read_csv(saved / "beyond_lexical.csv")
    assert set(lexical["method"]) == {TOY}
    assert set(lexical["question_type"]) >= {"contextual", "overall"}
    own = pd.read_csv(saved / "beyond_lexical_own.csv")
    assert set(own["comparison"]) == {f"{TOY} − raw_text_bm25"}            # what its bases() names
    assert TOY in set(pd.read_csv(saved / "beyond_lexical_matches.csv")["retriever"])
    for family in ("dense", "distributed", "ablation"):
        table = saved / f"beyond_{family}.csv"
        assert not table.is_file() or TOY not in table.read_text(encoding="utf-8")


def _status(params: Path) -> dict[str, list[str]]:
    """``pmrag status`` in a new process (it imports the plugin file as it is now): stage → [state, reason]."""
    result = subprocess.run([sys.executable, "-m", "pmrag", "status", str(params)], cwd=params.parent,
                            capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, result.stderr[-2000:]
    _, *lines = result.stdout.split("\n\n")[0].strip().splitlines()   # the stages, then the model calls to make
    return {line.split()[0]: line.split(maxsplit=2)[1:] for line in lines}


@pytest.mark.integration
def test_editing_the_plugin_file_recomputes_its_rankings_and_a_moved_study_stays_current(toy_study, tmp_path):
    moved = tmp_path / "moved"
    shutil.copytree(toy_study.params.path.parent, moved)
    before = _status(moved / "p.yaml")
    assert {row[0] for name, row in before.items() if not name.startswith("notebook:")} == {"cached"}, before
    plugin = moved / PLUGIN
    plugin.write_text(plugin.read_text(encoding="utf-8").replace('label = "chars"', 'label = "characters"'),
                      encoding="utf-8")
    after = _status(moved / "p.yaml")
    assert after[f"runs:{TOY}"] == ["stale", f"module {PLUGIN_PACKAGE}.toy_retriever changed"]
    for name in RETRIEVERS_LISTED[:-1]:
        assert after[f"runs:{name}"] == ["cached"]
    assert after["metrics"][0] == "stale" and after["chunks"] == ["cached"]


# ------------------------------------------------------------------------------------------- plugin errors

def _plugin_study(tmp_path, source: str | None, name: str) -> Path:
    """A params file listing one plugin file (written from ``source`` unless None) and the default retrievers."""
    if source is not None:
        write_file(tmp_path, source, name)
    return write_file(tmp_path, f"run: t\ndataset: {{synthetic: {{enabled: true}}}}\nretrieval: {{plugins: [{name}]}}\n")


def test_a_missing_plugin_file_names_the_key(tmp_path):
    message = params_error(_plugin_study(tmp_path, None, "nowhere.py"))
    assert message.startswith(f"{tmp_path / 'p.yaml'}: key 'retrieval.plugins[0]': file not found: ")


@pytest.mark.parametrize("stem, source, failure", [
    ("bad_syntax", "SECRET = 'private words'\ndef private(:\n", "SyntaxError at line 2"),
    ("raises", "import numpy\n\nraise RuntimeError('private words')\n", "RuntimeError at line 3"),
    ("bad_import", "from pmrag.retrieve.nosuch import Thing  # private words\n", "ModuleNotFoundError at line 1"),
])
def test_a_plugin_that_fails_to_import_is_one_line_without_its_content(tmp_path, stem, source, failure):
    message = params_error(_plugin_study(tmp_path, source, f"{stem}.py"))
    assert message == f"{tmp_path / 'p.yaml'}: key 'retrieval.plugins[0]': {stem}.py: cannot be imported ({failure})"
    assert "private" not in message and f"{PLUGIN_PACKAGE}.{stem}" not in sys.modules


def test_a_plugin_may_not_take_a_built_in_name(tmp_path):
    source = ("from pmrag.retrieve.registry import RETRIEVERS\nfrom pmrag.retrieve.retrievers import VectorRetriever\n"
              "RETRIEVERS.register('vector')(VectorRetriever)\n")
    message = params_error(_plugin_study(tmp_path, source, "takes_vector.py"))
    assert message.startswith(f"{tmp_path / 'p.yaml'}: key 'retrieval.plugins[0]': takes_vector.py: cannot be imported "
                              "(retriever method 'vector' is already registered")
    assert RETRIEVERS.get("vector") is VectorRetriever


def test_a_plugin_name_must_be_a_python_module_name_and_unique(tmp_path):
    message = params_error(_plugin_study(tmp_path, "X = 1\n", "my-retriever.py"))
    assert message.endswith("my-retriever.py: a plugin is a .py file whose name is a Python identifier "
                            "(my_retriever.py)")
    first, second = tmp_path / "a", tmp_path / "b"
    for folder in (first, second):
        folder.mkdir()
        _plugin_study(folder, "X = 1\n", "same_stem.py")
    from pmrag.study.params import load_params

    assert load_params(first / "p.yaml").retrieval.plugins == (str(first / "same_stem.py"),)
    assert load_params(first / "p.yaml").retrieval.plugins == (str(first / "same_stem.py"),)   # again: the same
    assert params_error(second / "p.yaml").endswith(
        f"same_stem.py: another file is already imported as {PLUGIN_PACKAGE}.same_stem; rename one of them")


def test_plugins_must_be_a_list_of_paths(tmp_path):
    path = write_file(tmp_path, "run: t\ndataset: {synthetic: {enabled: true}}\nretrieval: {plugins: [3]}\n")
    assert params_error(path).startswith(f"{path}: key 'retrieval.plugins[0]': ")


# ------------------------------------------------------------------------------------------- the package's own

@pytest.mark.integration
def test_the_package_components_register_without_an_import_line():
    """A new process that imports the base classes first finds every component (no module list, no cycle)."""
    code = ("import pmrag.retrieve.retrievers\nfrom pmrag.retrieve.registry import RETRIEVERS, TOKENIZERS\n"
            "print((sorted(RETRIEVERS.names()), sorted(TOKENIZERS.names())))")
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stderr[-2000:]
    assert result.stdout.strip() == str((["bm25", "decomp", "graph", "mmr", "multivec", "rm3", "session", "vector"],
                                         ["char2", "char3", "regex", "sudachi", "word"]))


def test_a_registry_discovers_once_before_its_first_lookup():
    calls = []
    registry = Registry("thing", discover=lambda: calls.append(1) or registry.register("found")("F"))
    registry.register("early")("E")
    assert calls == []                                           # registering runs no discovery
    assert registry.names() == ("early", "found") and "found" in registry and registry.get("early") == "E"
    assert calls == [1]
    failing = Registry("thing", discover=lambda: calls.append(2) or 1 / 0)
    for _ in range(2):                                           # a failed discovery is retried, not forgotten
        with pytest.raises(ZeroDivisionError):
            failing.names()
    assert calls == [1, 2, 2]


def test_a_lookup_from_another_thread_waits_for_the_discovery():
    started = threading.Event()

    def slow():
        started.set()
        time.sleep(0.2)
        registry.register("late")("L")

    registry = Registry("thing", discover=slow)
    seen = []
    first = threading.Thread(target=lambda: seen.append(registry.names()))
    first.start()
    started.wait(5)
    seen.append(registry.names())                                # while the first thread's discovery runs
    first.join(5)
    assert seen == [("late",), ("late",)]


# each built-in's declared family (of its default variant), label and what one of its retrievers builds on
METADATA = {
    "bm25": ("paper", "bm25", "raw_text_bm25_sudachi", ("raw_text_bm25",)),
    "vector": ("paper", "vec", "raw_text_vector", ()),
    "graph": (None, "graph", "summary_graph_interest", ()),
    "rm3": ("lexical", "rm3", "summary_rm3_sudachi", ("summary_bm25",)),
    "multivec": ("dense", "multivec", "raw_text_multivec_max", ("raw_text_vector",)),
    "session": ("distributed", "session", "summary_session_cluster", ("summary_vector",)),
    "mmr": ("distributed", "mmr", "embedding_text_mmr_session", ("embedding_text_session",)),
    "decomp": ("distributed", "decomp", "raw_text_decomp_bm25", ("raw_text_bm25",)),
}


@pytest.mark.parametrize("method", sorted(METADATA))
def test_each_built_in_declares_its_family_label_and_bases(method):
    family, label, example, bases = METADATA[method]
    component = RETRIEVERS.get(method)
    assert (component.family, component.label) == (family, label)
    assert family is None or family in FAMILIES
    assert tuple(map(str, component.bases(RetrieverId.parse(example)))) == bases
    assert short_label(RetrieverId("summary", method)) == f"sum·{label}"


def test_a_tokenizer_variant_of_bm25_is_lexical_and_the_regex_one_the_papers():
    assert BM25Retriever.family_of(RetrieverId("raw_text", "bm25")) == "paper"
    assert BM25Retriever.family_of(RetrieverId("raw_text", "bm25", "char2")) == "lexical"
    assert BM25Retriever.bases(RetrieverId("raw_text", "bm25")) == ()
    assert RETRIEVERS.get("rm3").family_of(RetrieverId("raw_text", "rm3")) == "lexical"


def test_mmr_and_decomposition_share_the_wrapping_base():
    for method in ("mmr", "decomp"):
        component = RETRIEVERS.get(method)
        assert issubclass(component, WrappingRetriever) and "base_id" not in vars(component)
        assert "files" not in vars(component) and "uses" not in vars(component)
    with pytest.raises(ValueError, match=r"summary_mmr_graph: the mmr variant must be one of bm25, vector, session"):
        RETRIEVERS.get("mmr").needs(RetrieverId("summary", "mmr", "graph"))


def test_a_component_must_declare_a_known_family():
    with pytest.raises(TypeError, match="sets method 'nofamily' but no family"):
        type("NoFamily", (RetrieverComponent,), {"method": "nofamily"})
    with pytest.raises(TypeError, match="family must be one of paper, lexical, dense, distributed or None"):
        type("Odd", (RetrieverComponent,), {"method": "odd", "family": "odd"})
    assert type("Quiet", (RetrieverComponent,), {"method": "quiet", "family": None}).label == "quiet"


def test_a_registered_method_joins_the_family_it_declares(monkeypatch):
    class Spread(RetrieverComponent):
        method = "spread"
        family = "distributed"

        @classmethod
        def bases(cls, rid):
            return (RetrieverId(rid.representation, "vector"),)

        @classmethod
        def needs(cls, rid):
            return (TEXTS,)

    RETRIEVERS.register("spread")(Spread)
    try:
        listed = ["raw_text_bm25", "raw_text_spread", "summary_mmr_vector"]
        assert beyond.family_members(listed, "distributed") == ["raw_text_spread", "summary_mmr_vector"]
        assert str(beyond.base_retriever(RetrieverId.parse("raw_text_spread"))) == "raw_text_vector"
        assert not beyond.is_paper_retriever(RetrieverId.parse("raw_text_spread"))
    finally:
        RETRIEVERS.unregister("spread")
    assert beyond.family_members(listed, "distributed") == ["summary_mmr_vector"]   # unregistered: in no family


# ------------------------------------------------------------------------------------------- refusals, BM25

@pytest.mark.integration
def test_an_unregistered_method_is_refused_on_load(tmp_path):
    with pytest.raises(ParamsError) as caught:
        make_tiny_study(tmp_path, "retrieval: {retrievers: [raw_text_bm25, raw_text_nosuch]}\n")
    message = str(caught.value)
    assert "\n" not in message
    assert message.startswith(f"{tmp_path / 'p.yaml'}: key 'retrieval.retrievers': ")
    assert "'nosuch'" in message and "raw_text_nosuch" in message


@pytest.mark.integration
def test_a_pairing_must_name_listed_retrievers(toy_study, tmp_path):
    with pytest.raises(ParamsError) as caught:  # toy is registered (the fixture's plugin) but not listed
        make_tiny_study(tmp_path, f"hybrid: {{pairings: [[raw_text_bm25, raw_text_vector], [{TOY}, raw_text_vector]]}}"
                                  "\n")
    message = str(caught.value)
    assert "\n" not in message
    assert message == f"{tmp_path / 'p.yaml'}: key 'hybrid.pairings[1]': {TOY} is not in retrieval.retrievers"


def _bm25_rankings(tmp_path, extra: str):
    study = make_tiny_study(tmp_path, extra)
    ranked = study.ranked("raw_text_bm25")
    return ranked, len(study.chunks())


@pytest.mark.integration
def test_zero_scores_drop_keeps_only_matching_chunks(tmp_path):
    ranked, n_chunks = _bm25_rankings(tmp_path, "bm25: {zero_scores: drop}\n")
    rows = ranked.rankings
    assert (rows["score"] > 0).all()
    counts = rows.groupby("question_id").size()
    assert ranked.matches.min() < n_chunks  # some question has chunks without a query token
    for qid, matches in ranked.matches.items():
        assert counts.get(qid, 0) == min(matches, 200)
        assert rows[rows["question_id"] == qid]["rank"].tolist() == list(range(1, counts.get(qid, 0) + 1))


@pytest.mark.integration
@pytest.mark.parametrize("depth", [3, 200])
def test_zero_scores_pad_fills_the_list_with_zeros_at_the_end(tmp_path, depth):
    ranked, n_chunks = _bm25_rankings(tmp_path, f"bm25: {{zero_scores: pad}}\nretrieval: {{depth: {depth}}}\n")
    rows = ranked.rankings
    length = min(depth, n_chunks)
    for qid, matches in ranked.matches.items():
        scores = rows[rows["question_id"] == qid]["score"].to_numpy()
        assert len(scores) == length
        assert np.all(scores[:min(matches, length)] > 0) and np.all(scores[min(matches, length):] == 0)
    if depth >= n_chunks:
        assert (rows["score"] == 0).sum() == sum(n_chunks - m for m in ranked.matches)
