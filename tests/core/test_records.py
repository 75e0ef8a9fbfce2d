"""The message record: its derived fields, equality and immutability (its constructor writes them at once)."""

import dataclasses
import pickle
from datetime import datetime

import pytest

from pmrag.core.ids import message_id, timestamp_text
from pmrag.core.records import MessageRecord


def test_derived_fields_are_the_ids_functions_and_the_record_is_frozen():
    at = datetime(2024, 4, 10, 20, 15, 7)
    record = MessageRecord("family", 12, at, "A", "text", "こんにちは", date_order=3, location="key '2024-04-10'[3]")
    assert record.message_id == message_id("family", 12, at, "A", "text", "こんにちは")
    assert record.occurred_text == timestamp_text(at) == "2024-04-10 20:15:07"
    assert (record.time_unknown, record.date_order, record.native_id) == (False, 3, None)
    with pytest.raises(dataclasses.FrozenInstanceError):
        record.text = "changed"
    with pytest.raises(dataclasses.FrozenInstanceError):
        record.message_id = "0" * 16


def test_equality_hash_replace_and_pickle_behave_as_a_frozen_dataclass():
    at = datetime(2024, 4, 10, 20, 15)
    a = MessageRecord(source="s", source_order=1, occurred_at=at, sender="A", type="text", text="t")
    b = MessageRecord("s", 1, at, "A", "text", "t")
    assert a == b and hash(a) == hash(b)
    assert a != MessageRecord("s", 2, at, "A", "text", "t")
    moved = dataclasses.replace(a, source_order=2)
    assert moved.source_order == 2 and moved.message_id == MessageRecord("s", 2, at, "A", "text", "t").message_id
    assert moved.message_id != a.message_id
    copy = pickle.loads(pickle.dumps(a))
    assert copy == a and copy.message_id == a.message_id and copy.occurred_text == a.occurred_text
    assert [f.name for f in dataclasses.fields(MessageRecord)][-2:] == ["message_id", "occurred_text"]


def test_a_timestamp_with_a_fraction_of_a_second_is_refused():
    with pytest.raises(ValueError, match="whole seconds"):
        MessageRecord("s", 1, datetime(2024, 4, 10, 20, 15, 0, 5), "A", "text", "t")
