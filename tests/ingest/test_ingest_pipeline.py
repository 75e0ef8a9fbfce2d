"""Parsing files ahead in worker processes stores exactly what a sequential loop stores."""

from pathlib import Path

import pandas as pd

from pmrag.core import store
from pmrag.ingest import store as ingest_store
from pmrag.ingest import read_source
from pmrag.ingest.pipeline import read_all

FIXTURES = Path(__file__).parents[1] / "fixtures"
JOBS = [
    (FIXTURES / "line_json" / "family.json", "line-json"),
    (FIXTURES / "line_txt" / "ja_tab.txt", "line-txt"),
    (FIXTURES / "line_txt" / "en_tab.txt", "line-txt"),
]


def dump(db):
    engine = store.open_store(db)
    return store.read_table(engine, "messages", ("message_id",)).to_dict("records")


def test_parallel_and_sequential_ingest_store_the_same_rows(tmp_path):
    for name, workers in (("par.sqlite", 2), ("one.sqlite", 1), ("seq.sqlite", 0)):
        engine = store.open_store(tmp_path / name)
        reports = [ingest_store.store_batch(engine, batch, batch.path, rows) for batch, rows in read_all(JOBS, workers=workers)]
        assert [Path(r.path).name for r in reports] == [p.name for p, _ in JOBS]  # input order kept
    assert dump(tmp_path / "par.sqlite") == dump(tmp_path / "seq.sqlite") == dump(tmp_path / "one.sqlite")
    expected = sum(len(read_source(path, fmt).messages) for path, fmt in JOBS)
    assert len(dump(tmp_path / "par.sqlite")) == expected > 0


def test_worker_batches_carry_rows_not_records_and_still_reconcile(tmp_path):
    for batch, rows in read_all(JOBS, workers=2):
        assert batch.messages == [] and len(rows) == batch.records_read - len(batch.rejected)


def _square_after(delay, x):
    import time

    time.sleep(delay)
    return x * x


def test_ordered_map_keeps_input_order_whatever_finishes_first():
    from pmrag.core.parallel import ordered_map

    calls = [(0.2, 1), (0.0, 2), (0.1, 3), (0.0, 4), (0.0, 5)]
    assert list(ordered_map(_square_after, calls, 2)) == [1, 4, 9, 16, 25]
    assert list(ordered_map(_square_after, calls, 0)) == [1, 4, 9, 16, 25]


def test_ordered_map_raises_the_workers_error():
    from pmrag.core.parallel import ordered_map

    import pytest

    with pytest.raises(TypeError):
        list(ordered_map(_square_after, [(0.0, 1), (0.0, "x")], 2))


def _pid(_):
    import os

    return os.getpid()


def test_in_this_process_maps_here_and_only_within_the_block():
    import os

    from pmrag.core.parallel import in_this_process, ordered_map, worker_processes

    calls = [(i,) for i in range(4)]
    assert os.getpid() not in set(ordered_map(_pid, calls, 2))
    with in_this_process():
        assert worker_processes(2) == 0
        assert set(ordered_map(_pid, calls, 2)) == {os.getpid()}
    assert worker_processes(2) == 2


def test_the_study_ingest_in_this_process_stores_what_the_worker_processes_store(tmp_path, monkeypatch):
    """The cohort's path (no helper process) against the process-pool path: the same report, the same rows in
    every ingested table, in the same order."""
    import pmrag.ingest.pipeline as pipeline
    from pmrag.core.params import DatasetSection
    from pmrag.core.parallel import in_this_process

    pooled = []
    spawn = pipeline._read_in_workers
    monkeypatch.setattr(pipeline, "_read_in_workers", lambda calls, n: pooled.append(n) or spawn(calls, n))
    from pmrag.demo import generate_corpus

    corpus = generate_corpus(tmp_path / "corpus", seed=101, n_messages=1050, n_questions=6)   # a demo participant
    files = [tmp_path / "corpus" / name for name in corpus["files"]]
    questions = tmp_path / "corpus" / corpus["questions_file"]
    found = {}
    for name, context in (("pool", None), ("here", in_this_process())):
        engine = store.open_store(tmp_path / f"{name}.sqlite")
        with context or _nothing():
            ingested = pipeline.ingest_study(engine, files, questions, DatasetSection())
        found[name] = (ingested, {table: store.read_table(engine, table).to_dict("records")
                                  for table in ("messages", "questions", "question_evidence", "files", "rejections")})
        engine.dispose()
    assert pooled == [2]   # the first ingest used two worker processes, the second none
    (pool, pool_rows), (here, here_rows) = found["pool"], found["here"]
    for field in ("report", "questions", "evidence", "rejections"):
        pd.testing.assert_frame_equal(getattr(here, field), getattr(pool, field), check_exact=True)
    assert here_rows == pool_rows
    assert len(here_rows["messages"]) == here.n_messages == pool.n_messages == here.report["stored"].sum() \
        == corpus["n_messages"]
    assert len(here_rows["question_evidence"]) > 0 and len(here_rows["questions"]) == 6


def _nothing():
    from contextlib import nullcontext

    return nullcontext()


def test_the_ingest_result_leaves_the_messages_in_the_store_and_they_read_back_a_few_columns_at_a_time(tmp_path):
    import pickle

    import pytest
    from pmrag.core.params import DatasetSection
    from pmrag.ingest.pipeline import ingest_study

    engine = store.open_store(tmp_path / "s.sqlite")
    ingested = ingest_study(engine, [path for path, _ in JOBS[1:]], None, DatasetSection(format="line-txt"))
    everything = store.read_table(engine, "messages")
    assert ingested.n_messages == len(everything) == ingested.report["stored"].sum() > 0
    assert not hasattr(ingested, "messages")   # a stage's cached result; at scale the messages are gigabytes
    cached = pickle.dumps(ingested)
    assert not [text for text in everything["text"] if len(text) >= 8 and text.encode() in cached]

    full = store.stored_messages(engine)
    order = list(store.MESSAGE_ORDER)
    pd.testing.assert_frame_equal(full, everything.sort_values(order, kind="stable").reset_index(drop=True))
    two = store.stored_messages(engine, ("sender", "message_id"))
    assert list(two.columns) == ["sender", "message_id"]
    pd.testing.assert_frame_equal(two, full[["sender", "message_id"]])
    with pytest.raises(KeyError, match="table 'messages' has no column 'speaker'; it has message_id, source"):
        store.stored_messages(engine, ("message_id", "speaker"))


def test_messages_read_back_by_id_in_the_study_order_across_id_batches(tmp_path, monkeypatch):
    from pmrag.core.params import DatasetSection
    from pmrag.ingest.pipeline import ingest_study

    engine = store.open_store(tmp_path / "s.sqlite")
    ingest_study(engine, [path for path, _ in JOBS[1:]], None, DatasetSection(format="line-txt"))
    full = store.stored_messages(engine)
    picked = list(full["message_id"].iloc[::-3])   # a third of them, in reverse
    expected = full[full["message_id"].isin(picked)].reset_index(drop=True)
    assert 3 < len(expected) < len(full)
    monkeypatch.setattr(store, "ID_BATCH", 2)       # several IN (...) queries, their rows joined and ordered again
    got = store.stored_messages(engine, ids=picked + ["no-such-id", picked[0]])
    pd.testing.assert_frame_equal(got, expected)
    pd.testing.assert_frame_equal(store.stored_messages(engine, iter(["text", "message_id"]), ids=picked),
                                  expected[["text", "message_id"]])
    assert store.stored_messages(engine, ids=[]).empty


def test_workers_are_forked_only_from_a_process_whose_one_thread_is_this_one():
    """A fresh interpreter (this one runs the session's Dask threads): fork while alone, the fork server beside a
    thread."""
    import subprocess
    import sys

    script = ("import threading; from pmrag.core.parallel import process_context as context; "
              "print(context().get_start_method()); release = threading.Event(); "
              "threading.Thread(target=release.wait, daemon=True).start(); print(context().get_start_method())")
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == ["fork", "forkserver"]


def test_beside_another_thread_workers_from_the_fork_server_store_the_same_rows(tmp_path):
    import multiprocessing
    import os
    import threading

    import pytest

    from pmrag.core.parallel import ordered_map, process_context

    if "forkserver" not in multiprocessing.get_all_start_methods():
        pytest.skip("this platform has no fork server")
    release = threading.Event()
    threading.Thread(target=release.wait, daemon=True).start()
    try:
        assert process_context().get_start_method() == "forkserver"
        engine = store.open_store(tmp_path / "server.sqlite")
        for batch, rows in read_all(JOBS, workers=2):
            ingest_store.store_batch(engine, batch, batch.path, rows)
        assert os.getpid() not in set(ordered_map(_pid, [(i,) for i in range(4)], 2))
    finally:
        release.set()
    engine = store.open_store(tmp_path / "here.sqlite")
    for batch, rows in read_all(JOBS, workers=0):
        ingest_store.store_batch(engine, batch, batch.path, rows)
    assert dump(tmp_path / "server.sqlite") == dump(tmp_path / "here.sqlite")
