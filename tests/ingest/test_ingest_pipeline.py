"""Parsing files ahead in worker processes stores exactly what a sequential loop stores."""

from pathlib import Path

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
