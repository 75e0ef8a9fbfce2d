"""Parsing one file ahead in a worker process stores exactly what a sequential loop stores."""

from pathlib import Path

from pmrag import store
from pmrag.ingest import read_source
from pmrag.ingest.pipeline import read_all

FIXTURES = Path(__file__).parent / "fixtures"
JOBS = [
    (FIXTURES / "line_json" / "family.json", "line-json"),
    (FIXTURES / "line_txt" / "ja_tab.txt", "line-txt"),
    (FIXTURES / "line_txt" / "en_tab.txt", "line-txt"),
]


def dump(db):
    engine = store.open_store(db)
    return store.read_table(engine, "messages", ("message_id",)).to_dict("records")


def test_parallel_and_sequential_ingest_store_the_same_rows(tmp_path):
    for name, parallel in (("par.sqlite", True), ("seq.sqlite", False)):
        engine = store.open_store(tmp_path / name)
        reports = [store.store_batch(engine, batch, batch.path, rows) for batch, rows in read_all(JOBS, parallel=parallel)]
        assert [Path(r.path).name for r in reports] == [p.name for p, _ in JOBS]  # input order kept
    assert dump(tmp_path / "par.sqlite") == dump(tmp_path / "seq.sqlite")
    expected = sum(len(read_source(path, fmt).messages) for path, fmt in JOBS)
    assert len(dump(tmp_path / "par.sqlite")) == expected > 0


def test_worker_batches_carry_rows_not_records_and_still_reconcile(tmp_path):
    for batch, rows in read_all(JOBS, parallel=True):
        assert batch.messages == [] and len(rows) == batch.records_read - len(batch.rejected)
