"""Tables are read a block of rows at a time (``store.READ_ROWS``) into the frame a single read gives."""

from datetime import datetime, timedelta

import pandas as pd
from sqlalchemy import insert, text

from pmrag.core import store


def _messages(n: int) -> list[dict]:
    """Messages whose optional columns are NULL throughout the first rows and set in the later ones."""
    start = datetime(2024, 1, 1, 9, 0)
    return [{"message_id": f"m{i:04d}", "source": "room", "source_order": i, "date_order": i,
             "occurred_at": start + timedelta(minutes=i), "time_unknown": i % 5 == 0, "sender": "あき",
             "type": "text", "text": f"こんにちは {i}", "native_id": None if i < 4 else f"n{i}",
             "location": None if i < 8 else "東京", "merge_key": None} for i in range(n)]


def test_a_table_read_in_blocks_equals_it_read_at_once(tmp_path, monkeypatch):
    engine = store.open_store(tmp_path / "s.sqlite")
    with engine.begin() as conn:
        conn.execute(insert(store.messages), _messages(11))
    monkeypatch.setattr(store, "READ_ROWS", 10**9)
    whole = store.stored_messages(engine)
    monkeypatch.setattr(store, "READ_ROWS", 3)   # four blocks: native_id NULL throughout the first, location the first two
    blocks = store.stored_messages(engine)
    pd.testing.assert_frame_equal(blocks, whole)
    assert whole["native_id"].isna().sum() == 4 and whole["location"].isna().sum() == 8
    assert list(store.stored_messages(engine, ("message_id", "location"))["location"][-3:]) == ["東京"] * 3
    # the blocks alone, as pandas joins them, would not give the same frame: the test can tell
    naive = pd.concat(pd.read_sql(store.messages.select().order_by(*(store.messages.c[c] for c in store.MESSAGE_ORDER)),
                                  engine.connect(), chunksize=3), ignore_index=True)
    assert [str(naive[c].dtype) for c in ("native_id", "location")] != [str(whole[c].dtype) for c in ("native_id", "location")]


def test_an_empty_table_reads_as_an_empty_frame_with_its_columns(tmp_path):
    engine = store.open_store(tmp_path / "s.sqlite")
    empty = store.stored_messages(engine)
    assert empty.empty and list(empty.columns) == list(store.messages.c.keys())


def test_a_repeated_string_is_one_object_across_blocks_and_the_frame_is_unchanged(tmp_path, monkeypatch):
    """Sources, senders and types repeat across millions of rows: each value is one object (``SharedStrings``);
    unique columns, numbers and NULLs are read as before."""
    engine = store.open_store(tmp_path / "s.sqlite")
    rows = _messages(2_400)
    for i, row in enumerate(rows):
        row.update(source=f"room{i % 3}", sender=("あき", "Ken", "Mai")[i % 3])
    with engine.begin() as conn:
        conn.execute(insert(store.messages), rows)
    monkeypatch.setattr(store, "READ_ROWS", 1_000)
    shared = store.stored_messages(engine)
    plain = pd.concat(pd.read_sql(store.messages.select().order_by(*(store.messages.c[c] for c in store.MESSAGE_ORDER)),
                                  engine.connect(), chunksize=10**9), ignore_index=True)
    pd.testing.assert_frame_equal(shared, plain)
    assert {c: shared[c].map(id).nunique() for c in ("source", "sender", "type")} == {"source": 3, "sender": 3, "type": 1}
    assert {c: plain[c].map(id).nunique() for c in ("source", "type")} == {"source": 2_400, "type": 2_400}
    assert shared["location"].isna().sum() == 8 and shared["location"].dropna().map(id).nunique() == 1
    assert shared["message_id"].map(id).nunique() == 2_400
    assert shared["time_unknown"].dtype == bool and sorted(shared["source_order"]) == list(range(2_400))


def test_unordered_messages_are_the_ordered_ones(tmp_path):
    """``ordered=False`` skips the sort: the same rows and dtypes, in an order SQLite chooses (here the table's)."""
    engine = store.open_store(tmp_path / "s.sqlite")
    rows = _messages(12)
    rows.reverse()   # stored latest first: MESSAGE_ORDER puts them the other way round
    with engine.begin() as conn:
        conn.execute(insert(store.messages), rows)
    ordered = store.stored_messages(engine, ("message_id", "sender"))
    unordered = store.stored_messages(engine, ("message_id", "sender"), ordered=False)
    assert ordered["message_id"].tolist() == sorted(row["message_id"] for row in rows)
    pd.testing.assert_frame_equal(unordered.sort_values("message_id", ignore_index=True),
                                  ordered.sort_values("message_id", ignore_index=True))


def test_messages_in_order_are_the_rows_sqlite_orders_ties_and_both_time_formats_included(tmp_path):
    """stored_messages sorts a scan itself; the frame is SQLite's ORDER BY's, row for row: times stored with and
    without microseconds, two files naming one source with the same positions (ties on every order column, kept in
    the table's order), inserted out of order."""
    engine = store.open_store(tmp_path / "s.sqlite")
    rows = _messages(12)
    for i, row in enumerate(rows):
        row["source"] = ["room", "dm", "Room"][i % 3]
        row["source_order"] = i % 4
        row["occurred_at"] = datetime(2024, 1, 1, 9, 0) + timedelta(seconds=i % 5, microseconds=250_000 * (i % 2))
    twins = [dict(row, message_id=f"t{n}") for n, row in enumerate(rows[:4])]   # the same order keys again
    with engine.begin() as conn:
        conn.execute(insert(store.messages), rows[::-1] + twins)
    by_sqlite = store.read_table(engine, store.messages, store.MESSAGE_ORDER)
    pd.testing.assert_frame_equal(store.stored_messages(engine), by_sqlite)
    pd.testing.assert_frame_equal(store.stored_messages(engine, ["text", "source"]), by_sqlite[["text", "source"]])
    assert by_sqlite["message_id"].tolist() != sorted(by_sqlite["message_id"])   # the order is the keys', not the ids'
    unordered = store.stored_messages(engine, ordered=False)
    assert unordered["message_id"].tolist() == [r["message_id"] for r in rows[::-1] + twins]


def test_timestamps_parsed_by_pandas_are_the_datetimes_sqlalchemy_reads(tmp_path):
    """A NOT NULL DateTime column is read as text and parsed in one call: the same values and dtype as SQLAlchemy's
    datetimes, for the ingest's ``YYYY-MM-DD HH:MM:SS`` and SQLAlchemy's own text with microseconds."""
    engine = store.open_store(tmp_path / "s.sqlite")
    rows = _messages(6)
    rows[1]["occurred_at"] = datetime(2024, 2, 29, 23, 59, 59, 999_999)
    with engine.begin() as conn:
        conn.execute(insert(store.messages), rows[:3])
        conn.exec_driver_sql("INSERT INTO messages (message_id, source, source_order, date_order, occurred_at, "
                             "time_unknown, sender, type, text) VALUES ('raw', 'room', 9, 9, '2024-03-01 07:08:09', "
                             "0, 'a', 'text', 'x')")
        stored = conn.exec_driver_sql("SELECT occurred_at FROM messages ORDER BY rowid").scalars().all()
        expected = [row.occurred_at for row in conn.execute(store.messages.select().order_by(text("rowid")))]
    assert stored[1] == "2024-02-29 23:59:59.999999" and stored[3] == "2024-03-01 07:08:09"
    read = store.read_table(engine, store.messages)
    assert read["occurred_at"].tolist() == expected and read["occurred_at"].dtype == pd.Series(expected).dtype
    assert store._parsed_here(store.chunks.c.start_at) and not store._parsed_here(store.candidate_hints.c.time_from)


def test_distinct_values_are_each_columns_distinct_values_by_either_path(tmp_path):
    engine = store.open_store(tmp_path / "s.sqlite")
    rows = _messages(300)
    for i, row in enumerate(rows):
        row.update(source=f"room{i % 4}", sender=("あき", "Ken", "Mai")[i % 3], text=f"text {i % 70}")
    with engine.begin() as conn:
        conn.execute(insert(store.messages), rows)
    frame = store.stored_messages(engine)
    for name in ("source", "sender", "text", "native_id"):
        expected = set(frame[name].dropna()) | ({None} if frame[name].isna().any() else set())
        for many in (False, True):
            assert store.distinct_values(engine, store.messages.c[name], many=many) == expected
    assert len(store.distinct_values(engine, store.messages.c.text, many=True)) == 70
    assert store.distinct_values(engine, store.chunks.c.source) == set()
