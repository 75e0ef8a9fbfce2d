"""The strings a public export must never contain, found from the store's distinct values or from its messages."""

from datetime import datetime, timedelta

import pandas as pd
from sqlalchemy import insert

from pmrag.core import store
from pmrag.present import public


def test_the_stores_private_strings_are_those_its_messages_give(tmp_path):
    engine = store.open_store(tmp_path / "s.sqlite")
    texts = ["京都に行ったよ", "ok", "  abc  ", "  abcd ", "see you at the station", "12345", "笑", "\u3000\u3000あいう\u3000"]
    start = datetime(2024, 1, 1, 9, 0)
    rows = [{"message_id": f"m{i:04d}", "source": f"room{i % 3}", "source_order": i, "date_order": i,
             "occurred_at": start + timedelta(minutes=i), "time_unknown": False,
             "sender": ("SYSTEM", "あき", "Ken")[i % 3], "type": "text", "text": texts[i % len(texts)]}
            for i in range(40)]
    with engine.begin() as conn:
        conn.execute(insert(store.messages), rows)
    chunks = pd.DataFrame({"source": ["room0", "archived"]})
    questions = pd.DataFrame({"text": ["When did Ken go to Kyoto?", "ok?"]})
    stored = public.stored_private_strings(engine, chunks, questions)
    assert stored == public.private_strings(store.stored_messages(engine), chunks, questions)
    assert stored["source name"] == {"room0", "room1", "room2", "archived"}
    assert stored["sender"] == {"あき", "Ken"}
    assert stored["message text"] == {"京都に行ったよ", "  abcd ", "see you at the station", "12345"}
