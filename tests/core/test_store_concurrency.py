"""Processes sharing a store or a run folder.

Several processes creating one new store at once all succeed; a write waits for another process's write
instead of failing with ``database is locked``; a second ``pmrag study`` on a run folder in use is refused with
one line naming the first one's pid."""

import json
import multiprocessing
import os
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

import nbformat
import pytest

from conftest import warm_cache
from pmrag.core import store
from pmrag.study.runner import LOCK_FILE, RunInUse, run_folder_lock, run_study

pytestmark = pytest.mark.integration

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures"


def pmrag(cwd: Path, *args: str) -> subprocess.Popen:
    env = dict(os.environ, PYTHONIOENCODING="utf-8")
    return subprocess.Popen([sys.executable, "-m", "pmrag", *args], cwd=cwd, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, encoding="utf-8", env=env)


def chat(folder: Path, name: str, n_messages: int) -> str:
    """A paper-format JSON chat of ``n_messages`` messages over one day, its texts unique to ``name``."""
    messages = [{"time": f"{i // 60:02d}:{i % 60:02d}", "sender": "Aki", "type": "text", "text": f"{name} {i}"}
                for i in range(n_messages)]
    (folder / name).write_text(json.dumps({"2024-04-10": messages}, ensure_ascii=False), encoding="utf-8")
    return name


def tables(db: Path) -> set[str]:
    with sqlite3.connect(db) as conn:
        return {row[0] for row in conn.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}


# ------------------------------------------------------------------------------ creating one store at once

CREATE_AT_ONCE = """
import json, multiprocessing, sys
from pmrag.core import store

def open_after(barrier, path, results):
    barrier.wait()
    try:
        store.open_store(path).dispose()
        results.put("ok")
    except Exception as exc:
        results.put(f"{type(exc).__name__}: {exc}"[:300])

context = multiprocessing.get_context("fork")
barrier, results = context.Barrier(4), context.Queue()
workers = [context.Process(target=open_after, args=(barrier, sys.argv[1], results), daemon=True) for _ in range(4)]
for worker in workers:
    worker.start()
print(json.dumps([results.get(timeout=60) for _ in workers]))
for worker in workers:
    worker.join(timeout=10)
"""


@pytest.mark.skipif("fork" not in multiprocessing.get_all_start_methods(), reason="needs fork")
def test_processes_creating_one_new_store_at_once_all_succeed(tmp_path):
    """Four processes released together by a barrier, three times (``table ... already exists`` before).

    They are forked by a fresh interpreter, not by this one: the session's Dask cluster keeps threads running here
    (an event loop, the nanny's watchers), a fork copies the locks they hold at that moment, and a child that met
    one hung; the hung children then held pytest at exit."""
    for attempt in range(3):
        path = tmp_path / f"new{attempt}.sqlite"
        done = subprocess.run([sys.executable, "-c", CREATE_AT_ONCE, str(path)], capture_output=True, text=True,
                              timeout=120)
        assert done.returncode == 0, done.stderr
        assert json.loads(done.stdout) == ["ok"] * 4
        assert tables(path) == set(store.metadata.tables)
        with sqlite3.connect(path) as conn:
            assert conn.execute("PRAGMA application_id").fetchone() == (store.APPLICATION_ID,)
            assert conn.execute("PRAGMA journal_mode").fetchone() == ("wal",)


def test_ingests_creating_one_new_database_at_once_all_store_their_chat(tmp_path):
    names = [chat(tmp_path, f"c{i}.json", 30) for i in range(2)]
    processes = [pmrag(tmp_path, "ingest", name, "--db", "new.sqlite") for name in names]
    results = [(p.communicate(timeout=120), p.returncode) for p in processes]
    for (out, err), code in results:
        assert code == 0, err
        assert err == "" and "read 30, stored 30, already present 0, rejected 0" in out
    with sqlite3.connect(tmp_path / "new.sqlite") as conn:
        assert conn.execute("SELECT source, COUNT(*) FROM messages GROUP BY source ORDER BY source").fetchall() == [
            ("c0", 30), ("c1", 30)]


# ------------------------------------------------------------------------------ a write waits for another

def _has_open(pid: int, path: Path) -> bool:
    psutil = pytest.importorskip("psutil")
    try:
        return any(Path(f.path) == path for f in psutil.Process(pid).open_files())
    except psutil.Error:
        return False


def test_a_small_ingest_waits_for_a_long_write_instead_of_failing(tmp_path):
    """Another process holds the write lock 6 s after the ingest opened the store (the driver's default wait is
    5 s, so before the fix the ingest died with ``database is locked``); the ingest waits, then stores its
    chat, and counts it within its own transaction."""
    db = tmp_path / "s.sqlite"
    store.open_store(db).dispose()
    name = chat(tmp_path, "small.json", 6)
    writer = sqlite3.connect(db, isolation_level=None)
    writer.execute("BEGIN IMMEDIATE")           # the large ingest, still writing
    writer.execute("INSERT INTO messages VALUES ('m-large', 'large', 0, 0, '2024-04-09 10:00:00', 0, 'Ben', 'text', "
                   "'x', NULL, NULL, NULL)")
    process = pmrag(tmp_path, "ingest", name, "--db", db.name)
    try:
        deadline = time.monotonic() + 60
        while not _has_open(process.pid, db):
            assert process.poll() is None, process.communicate()
            assert time.monotonic() < deadline
            time.sleep(0.05)
        time.sleep(6)
        assert process.poll() is None, process.communicate()   # still waiting for the lock, not dead
        writer.execute("COMMIT")
    finally:
        writer.close()
    out, err = process.communicate(timeout=60)
    assert process.returncode == 0, err
    assert err == ""
    assert out.splitlines() == [f"{name}: line-json (paper JSON (date → messages); utf-8): read 6, stored 6, "
                                "already present 0, rejected 0"]
    with sqlite3.connect(db) as conn:
        assert conn.execute("SELECT source, COUNT(*) FROM messages GROUP BY source ORDER BY source").fetchall() == [
            ("large", 1), ("small", 6)]


# ------------------------------------------------------------------------------ one run per run folder

def tiny_params(root: Path) -> Path:
    import shutil

    (root / "data").mkdir()
    shutil.copy(FIXTURES / "line_json" / "family.json", root / "data" / "family.json")
    (root / "nbs").mkdir()
    nb = nbformat.v4.new_notebook()
    nb.cells = [nbformat.v4.new_code_cell("x = 1")]
    nbformat.write(nb, root / "nbs" / "01_a.ipynb")
    warm_cache(root / "cache")
    path = root / "p.yaml"
    path.write_text("run: tiny\noutputs_dir: out\ncache_dir: cache\nnotebooks_dir: nbs\n"
                    "dataset: {inputs: [data/family.json]}\n", encoding="utf-8")
    return path


def test_a_second_study_on_a_run_folder_in_use_is_refused_with_one_line(tmp_path):
    params = tiny_params(tmp_path)
    run_dir = tmp_path / "out" / "tiny"
    with run_folder_lock(run_dir):               # the first run, holding the folder
        assert (run_dir / LOCK_FILE).read_text(encoding="utf-8").strip() == str(os.getpid())
        second = pmrag(tmp_path, "study", "--quiet", params.name)
        out, err = second.communicate(timeout=120)
        assert second.returncode == 2, err
        assert err.splitlines() == [f"pmrag study: error: {run_dir}: another pmrag study is running on this run folder "
                                    f"(pid {os.getpid()}); wait for it to finish, or give this run another name"]
        with pytest.raises(RunInUse):
            run_study(params, progress=False)
        assert not (run_dir / "study.sqlite").exists()        # refused before touching anything
        assert (run_dir / LOCK_FILE).read_text(encoding="utf-8").strip() == str(os.getpid())
    with run_folder_lock(run_dir):               # released at the end: the next run gets it
        pass


def test_building_a_study_whose_run_folder_another_process_holds_is_refused(tmp_path):
    from pmrag.study import Study
    from pmrag.study.runner import held_run_folder

    params = tiny_params(tmp_path)
    run_dir = tmp_path / "out" / "tiny"
    holder = subprocess.Popen([sys.executable, "-c", "import sys, time\nfrom pmrag.study.runner import run_folder_lock\n"
                               f"with run_folder_lock({str(run_dir)!r}):\n    print('held', flush=True)\n"
                               "    sys.stdin.readline()"], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout.readline().strip() == "held"
        with pytest.raises(RunInUse, match=f"pid {holder.pid}"):
            Study.from_params(params).build(progress=False)
        assert not (run_dir / "stage_log.jsonl").exists()    # refused before computing a stage
    finally:
        holder.communicate("\n", timeout=60)
    with run_folder_lock(run_dir), held_run_folder(run_dir):   # this thread's own hold: the build goes on under it
        with pytest.raises(RunInUse):                          # ... while a second hold is still refused
            with run_folder_lock(run_dir):
                pass
