"""Hint recovery: text, time and speaker matching, the excerpt search, chunks, the per-question report."""

from datetime import datetime, timedelta

import numpy as np
import pandas as pd
import pytest

from pmrag.annotate.recover import hint_chunks, match_hints, normalise, recovery_report, store_matches
from pmrag.core import store
from pmrag.retrieve.bm25 import BM25Index
from pmrag.retrieve.tokenizer import tokenize_many

T0 = datetime(2024, 4, 10, 18, 0)
MESSAGES = pd.DataFrame({
    "message_id": ["m1", "m2", "m3", "m4", "m5"],
    "occurred_at": [T0, T0 + timedelta(minutes=5), T0 + timedelta(minutes=30), T0 + timedelta(days=1), T0 + timedelta(days=2)],
    "sender": ["そうた", "私", "そうた", "ＡＮＮ", "私"],
    "text": ["画面がつかない！", "貸すよ　ノートパソコン", "ありがとう 画面 助かった", "Ramen  tonight?", "画面の修理は来週"],
})
MEMBERS = pd.DataFrame({"chunk_id": ["c1", "c1", "c1", "c2", "c2", "c3"],
                        "message_id": ["m1", "m2", "m3", "m3", "m4", "m5"]})


def hints(*rows):
    return pd.DataFrame([dict(candidate_id=c, hint=h, time_from=tf, time_to=tt, speaker=s, excerpt=e)
                         for c, h, tf, tt, s, e in rows])


def test_normalise_is_nfkc_casefold_and_one_space():
    assert normalise("  ＲＡＭＥＮ\u3000 Tonight ") == "ramen tonight"


def test_text_time_and_speaker_must_all_hold():
    found = match_hints(hints(("a", 0, None, None, None, "画面"),
                              ("a", 1, T0, None, "そうた", "画面"),                      # ±10 min: m1 only
                              ("b", 0, T0, None, None, None),                            # time alone: m1, m2
                              ("b", 1, T0, T0 + timedelta(hours=1), "そうた", None),      # range + speaker: m1, m3
                              ("c", 0, None, None, "ann", "ramen tonight")), MESSAGES)   # normalised
    got = {(c, h): list(g["message_id"]) for (c, h), g in found.groupby(["candidate_id", "hint"])}
    assert got == {("a", 0): ["m1", "m3", "m5"], ("a", 1): ["m1"], ("b", 0): ["m1", "m2"], ("b", 1): ["m1", "m3"],
                   ("c", 0): ["m4"]}
    assert dict(zip(zip(found["candidate_id"], found["hint"]), found["how"])) == {
        ("a", 0): "text", ("a", 1): "text", ("b", 0): "time_speaker", ("b", 1): "time_speaker", ("c", 0): "text"}
    assert found["score"].isna().all()


def test_the_tolerance_is_a_parameter():
    wide = match_hints(hints(("a", 0, T0, None, "そうた", None)), MESSAGES, tolerance=timedelta(minutes=30))
    assert wide["message_id"].tolist() == ["m1", "m3"]


def test_an_unmatched_phrase_goes_to_bm25_over_messages():
    found = match_hints(hints(("a", 0, None, None, None, "画面 修理 来月")), MESSAGES, search_top=2)
    assert set(found["how"]) == {"excerpt_search"}
    tokens = tokenize_many(MESSAGES["text"])
    scores = BM25Index.fit(tokens).scores(tokenize_many(["画面 修理 来月"])[0])
    best = np.argsort(-scores, kind="stable")[:2]
    assert found["message_id"].tolist() == MESSAGES["message_id"].to_numpy()[best].tolist()
    assert found["score"].to_numpy() == pytest.approx(scores[best], abs=1e-12)
    assert match_hints(hints(("a", 0, None, None, None, "画面 修理 来月")), MESSAGES, search_top=0).empty
    assert match_hints(hints(("a", 0, None, None, None, "zzz")), MESSAGES).empty   # no token in common: nothing


def test_chunks_and_report():
    h = hints(("a", 0, None, None, None, "画面"), ("a", 1, T0, None, None, None), ("b", 0, None, None, None, "zzz"))
    found = match_hints(h, MESSAGES)
    chunks = hint_chunks(found, MEMBERS)
    assert set(chunks.loc[chunks["hint"] == 0, "chunk_id"]) == {"c1", "c2", "c3"}   # m3 is in two windows
    report = recovery_report(h, found, MEMBERS)
    assert report.to_dict("records") == [
        {"candidate_id": "a", "hint": 0, "given": "phrase", "text": 3, "time_speaker": 0, "excerpt_search": 0, "chunks": 3},
        {"candidate_id": "a", "hint": 1, "given": "time", "text": 0, "time_speaker": 2, "excerpt_search": 0, "chunks": 1},
        {"candidate_id": "b", "hint": 0, "given": "phrase", "text": 0, "time_speaker": 0, "excerpt_search": 0, "chunks": 0}]
    empty = recovery_report(h, found.iloc[:0], MEMBERS)
    assert empty[["text", "chunks"]].sum().sum() == 0


def test_store_matches_replaces_a_candidates_rows(tmp_path):
    engine = store.open_store(tmp_path / "s.sqlite")
    found = match_hints(hints(("a", 0, None, None, None, "画面"), ("b", 0, None, None, None, "ramen")), MESSAGES)
    assert store_matches(engine, found) == 4
    store_matches(engine, found[found["candidate_id"] == "a"].iloc[:1], ["a"])
    kept = store.read_table(engine, "hint_matches", ["candidate_id", "message_id"])
    assert kept[["candidate_id", "message_id"]].values.tolist() == [["a", "m1"], ["b", "m4"]]


def test_bad_arguments():
    with pytest.raises(ValueError, match="tolerance"):
        match_hints(hints(("a", 0, None, None, None, "x")), MESSAGES, tolerance=-timedelta(1))
    with pytest.raises(ValueError, match="search_top"):
        match_hints(hints(("a", 0, None, None, None, "x")), MESSAGES, search_top=-1)
    with pytest.raises(ValueError, match="sender"):
        match_hints(hints(("a", 0, None, None, None, "x")), MESSAGES.drop(columns="sender"))
