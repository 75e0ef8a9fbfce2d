"""The public export's leak check on user-supplied question types and IDs, and on common words that happen to
be message texts."""

import pandas as pd
import pytest

from pmrag.evaluate.failures import LABELS, OVERLAP_PATTERNS
from pmrag.present import public

PRIVATE = {
    "source name": {"family", "dm_taro"},
    "sender": {"Taro", "ゆい"},
    "question text": {"When did Taro go to Kyoto?"},
    "message text": {"only", "text", "Both ways", "京都に行ったよ"},   # common words a chat may well contain
}


def per_question(types, ids=("q1", "q2")) -> pd.DataFrame:
    return pd.DataFrame({"retriever": ["raw_text_bm25", "raw_text_bm25"], "question_id": list(ids),
                         "question_type": list(types), "recall@5": [1.0, 0.5]})


def overlap_table() -> pd.DataFrame:
    return pd.DataFrame({"Success pattern": list(OVERLAP_PATTERNS), "Questions": [1, 0, 1, 0]})


def export(tmp_path, rows, mode="pseudonym"):
    return public.export_tables(tmp_path, "run", rows, {"table9_success_overlap": overlap_table()},
                                {*LABELS, *OVERLAP_PATTERNS}, PRIVATE, mode)


@pytest.mark.parametrize("question_type", ["2024年4月10日", "4月10日の件", "April 10 trip", "2024-04-10", "20:15 meeting",
                                           "May 2024"])
def test_a_question_type_that_is_a_date_is_refused(tmp_path, question_type):
    with pytest.raises(public.PublicExportError, match="date or time") as info:
        export(tmp_path, per_question([question_type, "contextual"]))
    assert question_type not in str(info.value)
    assert not (tmp_path / "public").exists()


@pytest.mark.parametrize("question_type", ["Taro_birthday", "taro-and-Taro", "ゆいの誕生日", "from_dm_taro"])
def test_a_question_type_naming_a_person_or_chat_is_refused(tmp_path, question_type):
    with pytest.raises(public.PublicExportError, match="(sender|source name) of the study"):
        export(tmp_path, per_question([question_type, "contextual"]))
    assert not (tmp_path / "public").exists()


def test_original_question_ids_are_checked_like_any_user_value(tmp_path):
    rows = per_question(["named_entity", "contextual"], ids=("Taro_q1", "q2"))
    with pytest.raises(public.PublicExportError, match="sender of the study"):
        export(tmp_path, rows, mode="original")
    written, mapping = export(tmp_path, rows, mode="pseudonym")       # pseudonyms hide it
    assert "Taro" not in (tmp_path / "public" / "per_question_metrics.csv").read_text(encoding="utf-8")
    assert set(mapping["question_id"]) == {"Taro_q1", "q2"}


def test_common_words_that_are_message_texts_do_not_refuse_our_own_wording(tmp_path):
    written, _ = export(tmp_path, per_question(["named_entity", "contextual"]))
    table = pd.read_csv(tmp_path / "public" / "table9_success_overlap.csv")
    assert list(table["Success pattern"]) == ["BM25 only", "Vector only", "Both", "Neither"]
    assert "public/table9_success_overlap.csv" in written


def test_a_user_value_holding_a_message_text_is_still_refused(tmp_path):
    with pytest.raises(public.PublicExportError, match="message text of the study"):
        export(tmp_path, per_question(["京都に行ったよ", "contextual"]))


def test_our_wording_and_numbers_never_look_like_dates():
    for value in ["0.427 [0.335, 0.520]", "+0.113", "17.6%", "[0.048, 0.184]", "Top-10", "1,183", "q_1a2b3c4d5e6f",
                  "hybrid:raw_text_bm25+summary_vector@0.50", "... of them recovered at Top-20", "march", "mayor"]:
        assert not public.looks_like_date(value), value


def test_message_texts_match_as_whole_words_only():
    index = public.PrivateIndex({"message text": {"text", "京都に行ったよ"}})
    assert index.find("contextual") is None and index.find("texts") is None
    assert index.find("a text here") == "message text" and index.find("my_text") == "message text"
    assert index.find("昨日京都に行ったよね") == "message text"              # no word boundaries in Japanese


def test_one_word_message_texts_are_common_only_when_our_wording_uses_them():
    index = public.PrivateIndex({"message text": {"only", "Kyoto"}}, common_words={"BM25", "only"})
    assert index.find("BM25 only") is None
    assert index.find("trip to Kyoto") == "message text"


def test_the_public_files_name_the_stand_in_vectors_and_keep_full_precision_beside_them(tmp_path):
    label = "hashed-stand-in (not a language model)"
    rows = per_question(["named_entity", "contextual"]).assign(**{"recall@5": [1 / 3, 0.5]})
    written, _ = public.export_tables(tmp_path, "run", rows, {"table9_success_overlap": overlap_table()},
                                      {*LABELS, *OVERLAP_PATTERNS}, PRIVATE, embedder=label)
    for path in written[:-1]:
        assert pd.read_csv(tmp_path / path)["embedder"].unique().tolist() == [label], path
    assert pd.read_csv(tmp_path / "public" / "per_question_metrics.csv")["recall@5"].tolist() == [0.3333, 0.5]
    assert pd.read_csv(tmp_path / "public" / "full" / "per_question_metrics.csv")["recall@5"].tolist() == [1 / 3, 0.5]
    readme = (tmp_path / "public" / "README.md").read_text(encoding="utf-8")
    assert f"Vectors: {label}" in readme and "`full/`" in readme
    written, _ = export(tmp_path / "plain", per_question(["named_entity", "contextual"]))
    assert "embedder" not in pd.read_csv(tmp_path / "plain" / "public" / "per_question_metrics.csv").columns
