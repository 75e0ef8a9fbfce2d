"""Notebook 01's message inventory, counted in the store, against a recount of the messages read back."""

from pathlib import Path

import pandas as pd
from sqlalchemy import bindparam, text

from pmrag.chunking.stats import message_inventory
from pmrag.core import store
from pmrag.ingest import store as ingest_store
from pmrag.ingest.pipeline import read_all

FIXTURES = Path(__file__).parents[1] / "fixtures"
JOBS = [(FIXTURES / "line_txt" / "ja_tab.txt", "line-txt"), (FIXTURES / "line_txt" / "en_tab.txt", "line-txt")]


def recount(messages: pd.DataFrame) -> pd.DataFrame:
    rows = [(f"type: {t}", int(n)) for t, n in sorted(messages["type"].value_counts().items())]
    rows += [("time unknown (placed at date 00:00:00 + offset)", int(messages["time_unknown"].sum())),
             ("sender SYSTEM (missing sender or notice)", int((messages["sender"] == "SYSTEM").sum())),
             ("empty text", int((messages["text"] == "").sum()))]
    return pd.DataFrame(rows, columns=["Item", "Messages"])


def test_the_inventory_counted_in_the_store_is_the_recount_of_every_message(tmp_path):
    engine = store.open_store(tmp_path / "s.sqlite")
    assert message_inventory(engine)["Messages"].tolist() == [0, 0, 0]   # an empty store: the three counts, zero
    for batch, rows in read_all(JOBS, workers=0):
        ingest_store.store_batch(engine, batch, batch.path, rows)
    with engine.begin() as conn:   # a few of every kind the inventory counts, on rows picked by position
        ids = [row[0] for row in conn.execute(text("SELECT message_id FROM messages ORDER BY message_id"))]
        for what, picked in (("text = ''", ids[0:3]), ("sender = 'SYSTEM'", ids[2:4]), ("time_unknown = 1", ids[5:6]),
                             ("type = 'zz-test'", ids[1:6:2])):
            conn.execute(text(f"UPDATE messages SET {what} WHERE message_id IN :ids").bindparams(
                bindparam("ids", expanding=True)), {"ids": picked})
    counted = message_inventory(engine)
    pd.testing.assert_frame_equal(counted, recount(store.stored_messages(engine)))
    values = counted.set_index("Item")["Messages"]
    assert values["empty text"] == 3 and values["time unknown (placed at date 00:00:00 + offset)"] == 1
    assert values["type: zz-test"] == 3 and values.filter(like="type: ").sum() == len(ids) > 6
