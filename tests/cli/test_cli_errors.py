"""The command line on a database that cannot be the store, on Ctrl-C, and on other bad
input says one line (exit status 2, or 130 for an interrupt), never a traceback and never a message's text.

Every case runs the real command in a subprocess; databases are checked through ``sqlite3`` afterwards (a
database that is not ours must come out exactly as it went in)."""

import json
import os
import signal
import sqlite3
import subprocess
import sys
import time
from datetime import date, timedelta
from pathlib import Path

import nbformat
import pytest

from conftest import warm_cache
from pmrag import cli
from pmrag.core import store

TESTS = Path(__file__).resolve().parents[1]
FIXTURES = TESTS / "fixtures"
SECRET_TEXT = "秘密のメッセージ-UNIQUE-7Q2"
SECRET_SENDER = "Taro Privatename"


def pmrag(cwd: Path, *args: str, timeout: float = 120) -> subprocess.CompletedProcess:
    env = dict(os.environ, PYTHONIOENCODING="utf-8")
    env.pop("PMRAG_TRACEBACK", None)
    return subprocess.run([sys.executable, "-m", "pmrag", *args], cwd=cwd, capture_output=True, text=True,
                          encoding="utf-8", env=env, timeout=timeout)


def private_chat(folder: Path, n_days: int = 2, per_day: int = 3, name: str = "chat.json") -> Path:
    """A paper-format JSON chat whose every message holds :data:`SECRET_TEXT` and is sent by :data:`SECRET_SENDER`."""
    days = {(date(2020, 1, 1) + timedelta(days=day)).isoformat(): [
        {"time": f"{(i // 60) % 24:02d}:{i % 60:02d}", "sender": SECRET_SENDER, "type": "text",
         "text": f"{SECRET_TEXT} {day}-{i}"} for i in range(per_day)] for day in range(n_days)}
    path = folder / name
    path.write_text(json.dumps(days, ensure_ascii=False), encoding="utf-8")
    return path


def schema(db: Path) -> list[tuple]:
    """Every entry of ``sqlite_master`` and the header pragmas a store would set."""
    with sqlite3.connect(db) as conn:
        entries = conn.execute("SELECT type, name, sql FROM sqlite_master ORDER BY name").fetchall()
        pragmas = [conn.execute(f"PRAGMA {name}").fetchone()[0] for name in ("application_id", "user_version", "journal_mode")]
    return entries + [tuple(pragmas)]


def assert_one_line_error(result: subprocess.CompletedProcess, *expected: str) -> str:
    assert result.returncode == 2, result.stderr
    lines = result.stderr.splitlines()
    assert len(lines) == 1, result.stderr
    assert lines[0].startswith("pmrag ingest: error: ") or lines[0].startswith("pmrag st"), lines[0]
    assert "Traceback" not in result.stderr
    assert SECRET_TEXT not in result.stderr + result.stdout and SECRET_SENDER not in result.stderr + result.stdout
    for text in expected:
        assert text in lines[0], lines[0]
    return lines[0]


# ------------------------------------------------------------------------------- databases that are not a store

@pytest.mark.integration
def test_random_bytes_are_refused_and_left_unchanged(tmp_path):
    chat = private_chat(tmp_path)
    db = tmp_path / "random.sqlite"
    db.write_bytes(os.urandom(8192))
    before = db.read_bytes()
    line = assert_one_line_error(pmrag(tmp_path, "ingest", chat.name, "--db", db.name), "random.sqlite", "not a SQLite database")
    assert "sqlalche" not in line
    assert db.read_bytes() == before


@pytest.mark.integration
@pytest.mark.parametrize("foreign_sql", [
    "CREATE TABLE moz_places (id INTEGER PRIMARY KEY, url TEXT)",            # another program's file
    "CREATE TABLE messages (id INTEGER PRIMARY KEY, body TEXT, sent INTEGER)",  # our table's name, not our table
])
def test_another_programs_database_gets_no_table_and_no_pragma(tmp_path, foreign_sql):
    chat = private_chat(tmp_path)
    db = tmp_path / "other.sqlite"
    with sqlite3.connect(db) as conn:
        conn.execute(foreign_sql)
        conn.execute("CREATE INDEX ix_other ON " + foreign_sql.split()[2] + " (id)")
    before = schema(db)
    assert_one_line_error(pmrag(tmp_path, "ingest", chat.name, "--db", db.name), "other.sqlite", "not a pmrag store",
                          "left unchanged")
    assert schema(db) == before


@pytest.mark.integration
def test_a_database_stamped_by_another_application_is_refused(tmp_path):
    chat = private_chat(tmp_path)
    db = tmp_path / "stamped.sqlite"
    with sqlite3.connect(db) as conn:
        conn.execute("PRAGMA application_id = 1234")
    before = schema(db)
    assert_one_line_error(pmrag(tmp_path, "ingest", chat.name, "--db", db.name), "not a pmrag store", "0x4d2")
    assert schema(db) == before


@pytest.mark.integration
def test_a_read_only_store_file_is_refused_untouched(tmp_path):
    chat = private_chat(tmp_path)
    db = tmp_path / "ro.sqlite"
    store.open_store(db).dispose()
    db.chmod(0o444)
    before = (schema(db), db.stat().st_mtime_ns)
    try:
        assert_one_line_error(pmrag(tmp_path, "ingest", chat.name, "--db", db.name), "ro.sqlite", "read-only")
        assert (schema(db), db.stat().st_mtime_ns) == before
    finally:
        db.chmod(0o644)


@pytest.mark.integration
@pytest.mark.parametrize("where", ["ro/new.sqlite", "ro/deeper/new.sqlite"])
def test_a_store_in_a_read_only_folder_is_refused(tmp_path, where):
    chat = private_chat(tmp_path)
    folder = tmp_path / "ro"
    folder.mkdir()
    folder.chmod(0o555)
    try:
        assert_one_line_error(pmrag(tmp_path, "ingest", chat.name, "--db", where), where, "read-only")
        assert list(folder.iterdir()) == []
    finally:
        folder.chmod(0o755)


@pytest.mark.integration
def test_a_directory_is_refused(tmp_path):
    chat = private_chat(tmp_path)
    (tmp_path / "dir.sqlite").mkdir()
    assert_one_line_error(pmrag(tmp_path, "ingest", chat.name, "--db", "dir.sqlite"), "dir.sqlite", "directory")
    assert list((tmp_path / "dir.sqlite").iterdir()) == []


@pytest.mark.integration
def test_memory_is_refused_instead_of_storing_nothing(tmp_path):
    chat = private_chat(tmp_path)
    assert_one_line_error(pmrag(tmp_path, "ingest", chat.name, "--db", ":memory:"), ":memory:", "must be a file")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["chat.json"]


@pytest.mark.integration
def test_a_failed_insert_names_sqlites_reason_not_the_statements_parameters(tmp_path):
    """A store whose INSERT fails (here a trigger refuses it): SQLAlchemy's text would quote the parameters, the
    messages' text; the line gives SQLite's reason only."""
    chat = private_chat(tmp_path)
    db = tmp_path / "store.sqlite"
    store.open_store(db).dispose()
    with sqlite3.connect(db) as conn:
        conn.execute("CREATE TRIGGER refuse BEFORE INSERT ON messages BEGIN SELECT RAISE(ABORT, 'no more rows'); END")
    assert_one_line_error(pmrag(tmp_path, "ingest", chat.name, "--db", db.name), "store.sqlite", "no more rows")
    with sqlite3.connect(db) as conn:
        assert conn.execute("SELECT COUNT(*) FROM messages").fetchone() == (0,)


def test_store_error_never_quotes_parameters(tmp_path):
    """The message of a real IntegrityError, whose SQLAlchemy text holds the row's values."""
    from sqlalchemy import insert
    from sqlalchemy.exc import IntegrityError

    engine = store.open_store(tmp_path / "s.sqlite")
    row = {"question_id": "q1", "text": SECRET_TEXT, "type": "t", "answer": SECRET_SENDER, "source": "s"}
    with engine.begin() as conn:
        conn.execute(insert(store.questions), [row])
    with pytest.raises(IntegrityError) as info, engine.begin() as conn:
        conn.execute(insert(store.questions), [row])
    assert SECRET_TEXT in str(info.value)                      # what a traceback would have shown
    message = str(store.store_error(tmp_path / "s.sqlite", info.value))
    assert "UNIQUE constraint failed: questions.question_id" in message
    assert SECRET_TEXT not in message and SECRET_SENDER not in message and "\n" not in message


@pytest.mark.integration
def test_a_studys_store_that_is_not_a_database_is_one_line(tmp_path):
    """A run folder of pmrag's (marked) whose store was overwritten; an unmarked folder holding such a file is
    not pmrag's at all (tests/reliability/test_run_folder.py)."""
    from pmrag.study.runfolder import claim_run_folder

    params = tmp_path / "p.yaml"
    chat = private_chat(tmp_path)
    params.write_text(f"run: r\noutputs_dir: out\ncache_dir: cache\ndataset: {{inputs: [{chat.name}]}}\n", encoding="utf-8")
    claim_run_folder(tmp_path / "out" / "r")
    (tmp_path / "out" / "r" / "study.sqlite").write_bytes(os.urandom(4096))
    result = pmrag(tmp_path, "status", "p.yaml")
    assert result.returncode == 2, result.stderr
    assert result.stderr.splitlines() == [f"pmrag status: error: {tmp_path / 'out' / 'r' / 'study.sqlite'}: "
                                          "not a SQLite database (or an encrypted one)"]


# ------------------------------------------------------------------------------------- other bad input

@pytest.mark.integration
def test_a_file_with_no_message_warns_naming_it(tmp_path):
    files = {"empty.txt": "", "empty.json": "{}", "locomo.json": "[]"}
    for name, content in files.items():
        (tmp_path / name).write_text(content, encoding="utf-8")
    result = pmrag(tmp_path, "ingest", *files, "--db", "s.sqlite")
    assert result.returncode == 0, result.stderr
    assert result.stderr.splitlines() == [f"pmrag ingest: warning: {name}: no message or question found; is it a chat export?"
                                          for name in files]
    assert [line.split(":")[0] for line in result.stdout.splitlines()] == list(files)
    assert all("read 0, stored 0" in line for line in result.stdout.splitlines())


@pytest.mark.integration
def test_encoding_option_reaches_the_adapter(tmp_path):
    source = FIXTURES / "line_txt" / "cp932_crlf.txt"
    (tmp_path / source.name).write_bytes(source.read_bytes())
    forced = pmrag(tmp_path, "ingest", source.name, "--db", "s.sqlite", "--encoding", "cp932")
    assert forced.returncode == 0, forced.stderr
    assert "cp932): read 2, stored 2" in forced.stdout
    wrong = pmrag(tmp_path, "ingest", source.name, "--db", "t.sqlite", "--encoding", "utf-8")
    assert wrong.returncode == 2 and len(wrong.stderr.splitlines()) == 1, wrong.stderr
    assert "utf-8" in wrong.stderr and "Traceback" not in wrong.stderr
    bad = pmrag(tmp_path, "ingest", source.name, "--db", "t.sqlite", "--encoding", "latin-1")
    assert bad.returncode == 2 and "invalid choice" in bad.stderr


def test_an_unexpected_error_is_one_line_without_its_text(tmp_path, monkeypatch, capsys):
    def broken(_args):
        raise ValueError(f"could not handle {SECRET_TEXT}")

    monkeypatch.delenv("PMRAG_TRACEBACK", raising=False)
    monkeypatch.setattr(cli, "_status", broken)
    assert cli.main(["status", "p.yaml"]) == 1
    err = capsys.readouterr().err
    assert err.splitlines() == ["pmrag status: error: internal error (ValueError); nothing more is shown because it may "
                                "quote your data; set PMRAG_TRACEBACK=1 to see the traceback"]
    monkeypatch.setenv("PMRAG_TRACEBACK", "1")
    with pytest.raises(ValueError):
        cli.main(["status", "p.yaml"])


def test_an_error_raised_while_cleaning_up_after_ctrl_c_is_reported_as_the_interrupt(monkeypatch, capsys):
    """Clean-up code that fails because the interrupt left a connection unusable (SQLAlchemy's
    PendingRollbackError in a ``finally``) must not turn Ctrl-C into an "internal error"."""
    def interrupted_then_broken(_args):
        try:
            raise KeyboardInterrupt
        finally:
            raise RuntimeError(f"cannot restore after {SECRET_TEXT}")

    monkeypatch.delenv("PMRAG_TRACEBACK", raising=False)
    monkeypatch.setattr(cli, "_status", interrupted_then_broken)
    assert cli.main(["status", "p.yaml"]) == 130
    assert capsys.readouterr().err.splitlines() == [f"pmrag status: {INTERRUPTED}"]


@pytest.mark.integration
def test_a_missing_notebooks_dir_is_one_line_for_study_and_no_notebook_stage_for_status(tmp_path):
    chat = private_chat(tmp_path)
    (tmp_path / "p.yaml").write_text(f"run: r\noutputs_dir: out\ncache_dir: cache\nnotebooks_dir: nowhere\n"
                                     f"dataset: {{inputs: [{chat.name}]}}\n", encoding="utf-8")
    study = pmrag(tmp_path, "study", "p.yaml")
    assert study.returncode == 2
    assert study.stderr.splitlines() == [f"pmrag study: error: {tmp_path / 'p.yaml'}: key 'notebooks_dir': no numbered "
                                         f"notebooks (NN_name.ipynb) in {tmp_path / 'nowhere'}"]
    status = pmrag(tmp_path, "status", "p.yaml")
    assert status.returncode == 0, status.stderr
    stages = [line.split()[0] for line in status.stdout.split("\n\n")[0].splitlines()[1:]]
    assert "ingest" in stages and "failures" in stages and not any(s.startswith("notebook:") for s in stages)


@pytest.mark.integration
def test_impossible_demo_sizes_are_one_line_naming_the_key_and_the_minimum(tmp_path):
    (tmp_path / "p.yaml").write_text("run: r\ndataset: {synthetic: {enabled: true, n_messages: 600, n_questions: 30}}\n",
                                     encoding="utf-8")
    for command in ("status", "study"):
        result = pmrag(tmp_path, command, "p.yaml")
        assert result.returncode == 2, result.stderr
        assert result.stderr.splitlines() == [
            f"pmrag {command}: error: p.yaml: key 'dataset.synthetic.n_messages': too few for 30 questions: the demo "
            "needs at least 1293 messages (the ones its questions plant, plus 100 per source), got 600"]
    assert sorted(p.name for p in tmp_path.iterdir()) == ["p.yaml"]


@pytest.mark.integration
@pytest.mark.parametrize(("sizes", "expected"), [
    (("--n-messages", "600", "--n-questions", "30"), "--n-messages: too few for 30 questions: the demo needs at least "
                                                     "1293 messages, got 600"),
    (("--n-questions", "115"), "--n-questions: from 1 to 114, the distinct questions the demo defines, got 115"),
    (("--n-questions", "0"), "--n-questions: from 1 to 114, the distinct questions the demo defines, got 0"),
])
def test_impossible_demo_sizes_on_the_command_line_are_one_line(tmp_path, sizes, expected):
    result = pmrag(tmp_path, "demo", "corpus", *sizes)
    assert result.returncode == 2 and result.stderr.splitlines() == [f"pmrag demo: error: {expected}"]
    assert not (tmp_path / "corpus").exists()


@pytest.mark.integration
def test_a_study_without_questions_says_so_in_one_line(tmp_path):
    chat = private_chat(tmp_path)
    (tmp_path / "nbs").mkdir()
    sleeping_notebook(tmp_path / "nbs" / "01_never.ipynb", tmp_path / "never-started")
    (tmp_path / "p.yaml").write_text(f"run: r\noutputs_dir: out\ncache_dir: cache\nnotebooks_dir: nbs\n"
                                     f"dataset: {{inputs: [{chat.name}]}}\n", encoding="utf-8")
    result = pmrag(tmp_path, "study", "--quiet", "p.yaml")
    assert result.returncode == 2, result.stderr
    assert result.stderr.splitlines() == [
        f"pmrag study: error: {tmp_path / 'p.yaml'}: the study has no questions to evaluate; give them in a questions "
        "file (key 'dataset.questions'), with a LoCoMo file among 'dataset.inputs', or use the demo's "
        "('dataset.synthetic.enabled: true')"]
    assert SECRET_TEXT not in result.stderr + result.stdout and not (tmp_path / "never-started").exists()


# ------------------------------------------------------------------------------------------------ Ctrl-C

def interrupt_when(process: subprocess.Popen, ready, timeout: float = 180) -> tuple[str, str, float]:
    """Wait for ``ready()``, then send SIGINT to the command's process group (what Ctrl-C in a terminal does);
    its stdout, its stderr and the seconds it took to exit after the signal."""
    deadline = time.monotonic() + timeout
    while not ready():
        assert process.poll() is None, process.communicate()
        assert time.monotonic() < deadline, "the command never got ready"
        time.sleep(0.05)
    os.killpg(process.pid, signal.SIGINT)
    signalled = time.monotonic()
    out, err = process.communicate(timeout=60)
    return out, err, time.monotonic() - signalled


def start(cwd: Path, *args: str, env: dict | None = None) -> subprocess.Popen:
    env = dict(os.environ if env is None else env, PYTHONIOENCODING="utf-8")
    env.pop("PMRAG_TRACEBACK", None)
    return subprocess.Popen([sys.executable, "-m", "pmrag", *args], cwd=cwd, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, encoding="utf-8", env=env, start_new_session=True)


INTERRUPTED = "interrupted; what was committed is kept, run the same command again to resume"


@pytest.mark.integration
@pytest.mark.skipif(not hasattr(os, "killpg"), reason="process groups are POSIX")
def test_ctrl_c_during_ingest_is_one_line_and_exit_130(tmp_path):
    chat = private_chat(tmp_path, n_days=400, per_day=250)      # 100,000 messages: seconds to read and store
    process = start(tmp_path, "ingest", chat.name, "--db", "s.sqlite")
    ready = []                    # the store is open (its tables made), and the file has been read for 0.3 s

    def reading() -> bool:
        if not ready and has_messages_table(tmp_path / "s.sqlite"):
            ready.append(time.monotonic())
        return bool(ready) and time.monotonic() - ready[0] > 0.3

    out, err, _ = interrupt_when(process, reading)
    assert process.returncode == 130, err
    assert err.splitlines() == [f"pmrag ingest: {INTERRUPTED}"]
    assert out == ""
    with sqlite3.connect(tmp_path / "s.sqlite") as conn:                  # nothing half-written
        assert conn.execute("PRAGMA integrity_check").fetchone() == ("ok",)
        assert conn.execute("SELECT COUNT(*) FROM messages").fetchone()[0] in (0, 100_000)


def has_messages_table(db: Path) -> bool:
    """The store at ``db`` exists and has its ``messages`` table (read without taking any lock)."""
    if not db.exists():
        return False
    try:
        conn = sqlite3.connect(f"{db.as_uri()}?mode=ro", uri=True, timeout=0.1)
        try:
            return conn.execute("SELECT COUNT(*) FROM sqlite_master WHERE name = 'messages'").fetchone() == (1,)
        finally:
            conn.close()
    except sqlite3.Error:
        return False


def sleeping_notebook(path: Path, marker: Path) -> None:
    """A notebook that touches ``marker`` once its kernel runs, then sleeps a minute (unless interrupted)."""
    nb = nbformat.v4.new_notebook()
    parameters = nbformat.v4.new_code_cell('params_path = ""')
    parameters.metadata["tags"] = ["parameters"]
    nb.cells = [parameters, nbformat.v4.new_code_cell(
        f"import pathlib, time\npathlib.Path({str(marker)!r}).touch()\ntime.sleep(60)"),
                nbformat.v4.new_code_cell("after = 1")]
    nb.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3", "language": "python"}
    nbformat.write(nb, path)


@pytest.fixture(scope="module")
def tiny_built(tmp_path_factory):
    """The tiny study (fixture family chat, BM25 only) with every stage computed: a run goes straight to its
    notebooks."""
    import shutil

    root = tmp_path_factory.mktemp("tiny")
    (root / "data").mkdir()
    shutil.copy(FIXTURES / "line_json" / "family.json", root / "data" / "family.json")
    shutil.copy(FIXTURES / "questions" / "family_questions.json", root / "data" / "questions.json")
    (root / "nbs").mkdir()
    warm_cache(root / "cache")
    (root / "p.yaml").write_text(
        "run: tiny\noutputs_dir: out\ncache_dir: cache\nnotebooks_dir: nbs\n"
        "dataset: {inputs: [data/family.json], questions: data/questions.json}\n"
        "retrieval: {retrievers: [raw_text_bm25, summary_bm25]}\n"
        "hybrid: {pairings: [[raw_text_bm25, summary_bm25]], beta_step: 0.5}\n"
        "analysis: {aggregate_type: contextual, reference_retriever: raw_text_bm25, diagnostic_hybrid: [raw_text_bm25, summary_bm25, 0.5]}\n"
        "bootstrap: {n_resamples: 50}\nstatistics: {coverage_datasets: 50, coverage_resamples: 100}\n",
        encoding="utf-8")
    from pmrag.study import Study

    Study.from_params(root / "p.yaml").build()
    return root


@pytest.mark.integration
@pytest.mark.skipif(not hasattr(os, "killpg"), reason="process groups are POSIX")
@pytest.mark.parametrize("n_notebooks, jobs", [(1, 1), (2, 2)])
def test_ctrl_c_during_study_stops_the_notebooks_with_one_line(tiny_built, n_notebooks, jobs):
    for old in (tiny_built / "nbs").glob("*"):
        old.unlink()
    markers = [tiny_built / f"started-{jobs}-{i}" for i in range(n_notebooks)]
    for i, marker in enumerate(markers):
        sleeping_notebook(tiny_built / "nbs" / f"0{i + 1}_sleep.ipynb", marker)
    process = start(tiny_built, "study", "--quiet", "--jobs", str(jobs), "p.yaml")
    out, err, seconds = interrupt_when(process, lambda: all(m.exists() for m in markers))
    assert process.returncode == 130, err
    assert err.splitlines() == [f"pmrag study: {INTERRUPTED}"]
    assert seconds < 30      # the notebooks were stopped: the command did not wait out their minute of sleep
    executed = nbformat.read(tiny_built / "out" / "tiny" / "notebooks" / "01_sleep.ipynb", as_version=4)
    errors = [o for c in executed.cells if c.cell_type == "code" for o in c.outputs if o.output_type == "error"]
    assert [e.ename for e in errors] == ["KeyboardInterrupt"]   # the cell was interrupted, the copy kept


def env_with_sitecustomize(tmp_path: Path, source: str, **variables: str) -> dict:
    """This environment with ``source`` as the ``sitecustomize`` every Python started with it runs at start-up,
    and ``variables``."""
    (tmp_path / "site").mkdir()
    (tmp_path / "site" / "sitecustomize.py").write_text(source, encoding="utf-8")
    path = os.pathsep.join(filter(None, [str(tmp_path / "site"), os.environ.get("PYTHONPATH")]))
    return dict(os.environ, PYTHONPATH=path, **variables)


SLOW_KERNEL_START = """\
import os, pathlib, sys, time
if "ipykernel_launcher" in " ".join(sys.orig_argv):   # a notebook's kernel, still importing site
    pathlib.Path(os.environ["PMRAG_TEST_KERNEL_STARTING"] + f".{os.getpid()}").write_text(str(os.getsid(0)))
    time.sleep(20)
"""


@pytest.mark.integration
@pytest.mark.skipif(not hasattr(os, "killpg"), reason="process groups are POSIX")
@pytest.mark.parametrize("n_notebooks, jobs", [(1, 1), (2, 2)])
def test_ctrl_c_while_kernels_start_is_one_line(tiny_built, tmp_path, n_notebooks, jobs):
    """Kernels still starting (a ``sitecustomize`` holds them in Python's site import) when Ctrl-C arrives: they
    are stopped there ("Fatal Python error: init_import_site" on their stderr, "Kernel died before replying to
    kernel_info" from papermill), and the user sees only the one line.  (``pmrag study`` runs in a session of its
    own here, as a terminal's foreground job: its session ID is its pid.)  Kernels started as processes
    (``--no-kernel-forks``): a forked kernel imports nothing as it starts (the next test)."""
    for old in (tiny_built / "nbs").glob("*"):
        old.unlink()
    for i in range(n_notebooks):
        sleeping_notebook(tiny_built / "nbs" / f"0{i + 1}_sleep.ipynb", tmp_path / f"started-{i}")
    starting = tmp_path / "kernel-starting"
    env = env_with_sitecustomize(tmp_path, SLOW_KERNEL_START, PMRAG_TEST_KERNEL_STARTING=str(starting))
    process = start(tiny_built, "study", "--quiet", "--jobs", str(jobs), "--no-kernel-forks", "p.yaml", env=env)
    out, err, seconds = interrupt_when(process, lambda: len(list(tmp_path.glob("kernel-starting.*"))) == n_notebooks)
    assert process.returncode == 130, err
    assert err.splitlines() == [f"pmrag study: {INTERRUPTED}"]
    assert seconds < 15 and not any(tmp_path.glob("started-*"))   # stopped in start-up, no cell ran
    sessions = {path.read_text() for path in tmp_path.glob("kernel-starting.*")}
    assert str(process.pid) not in sessions   # each kernel in a session of its own: the terminal's Ctrl-C misses it


SLOW_WARM_IMPORTS = """\
import os, pathlib, sys, time
if "kernel_forks import serve" in " ".join(sys.orig_argv):   # the process kernels are forked from, importing
    pathlib.Path(os.environ["PMRAG_TEST_WARM_STARTING"]).write_text(str(os.getpid()))
    time.sleep(30)
"""


@pytest.mark.integration
@pytest.mark.skipif(not hasattr(os, "killpg"), reason="process groups are POSIX")
def test_ctrl_c_while_the_process_kernels_are_forked_from_imports_is_one_line(tiny_built, tmp_path):
    """The notebooks wait for the warm process's imports (pmrag.study.kernel_forks) when Ctrl-C arrives: no
    kernel starts, the warm process is ended, and the user sees only the one line."""
    from pmrag.study import kernel_forks

    if not kernel_forks.supported():
        pytest.skip("kernels are forked on Linux only")
    for old in (tiny_built / "nbs").glob("*"):
        old.unlink()
    for i in range(2):
        sleeping_notebook(tiny_built / "nbs" / f"0{i + 1}_sleep.ipynb", tmp_path / f"started-{i}")
    starting = tmp_path / "warm-starting"
    env = env_with_sitecustomize(tmp_path, SLOW_WARM_IMPORTS, PMRAG_TEST_WARM_STARTING=str(starting))
    process = start(tiny_built, "study", "--quiet", "--jobs", "2", "p.yaml", env=env)
    waited = []

    def waiting() -> bool:            # the warm process is importing, and the notebooks have had time to ask
        if not waited and starting.exists():
            waited.append(time.monotonic())
        return bool(waited) and time.monotonic() - waited[0] > 1.0

    out, err, seconds = interrupt_when(process, waiting)
    assert process.returncode == 130, err
    assert err.splitlines() == [f"pmrag study: {INTERRUPTED}"]
    assert seconds < 15 and not any(tmp_path.glob("started-*"))     # no kernel ran a cell
    warm = int(starting.read_text())
    assert not Path(f"/proc/{warm}").exists() or "zombie" in Path(f"/proc/{warm}/status").read_text()
