"""A hostile probe of the public export: names and dates in disguise (case, width, kana script, camelCase,
digits, compact dates) are refused before anything is written; realistic near-misses are written and read back
unchanged."""

import json

import pandas as pd
import pytest

from conftest import make_tiny_study
from pmrag.evaluate.failures import LABELS, OVERLAP_PATTERNS
from pmrag.present import public
from pmrag.present.private_text import PrivateIndex

PRIVATE = {
    "source name": {"family", "dm_taro", "dm_saki", "group1"},
    "sender": {"Taro", "ゆい", "A", "Ed", "Con", "Mai", "Abe", "José"},
    "question text": {"When did Taro go to Kyoto?"},
    "message text": {"only", "text", "京都に行ったよ", "see you at the station"},
}
WORDING = {*LABELS, *OVERLAP_PATTERNS, "method_a", "ci_low", "Top-10", "recall@5"}


def rows(types, ids=None) -> pd.DataFrame:
    ids = list(ids or [f"q{i}" for i in range(len(types))])
    return pd.DataFrame({"retriever": ["raw_text_bm25"] * len(types), "question_id": ids,
                         "question_type": list(types), "recall@5": [0.2024] * len(types)})


def export(tmp_path, per_question, mode="pseudonym", run_name="run", tables=None):
    wording = pd.DataFrame({"Success pattern": list(OVERLAP_PATTERNS),
                            "method_a": ["Top-10", "recall@5", "ci_low", "Both"]})
    return public.export_tables(tmp_path, run_name, per_question,
                                {"table9_success_overlap": wording} if tables is None else tables,
                                WORDING, PRIVATE, mode)


def refused(tmp_path, per_question, **kwargs) -> str:
    """The one-line error of a refused export, after checking that nothing was written."""
    with pytest.raises(public.PublicExportError) as info:
        export(tmp_path, per_question, **kwargs)
    assert not (tmp_path / "public").exists()
    message = str(info.value)
    assert "\n" not in message and "nothing written" in message
    return message


@pytest.mark.parametrize("question_type", [
    "taro_trip", "ＴＡＲＯ", "TARO", "Taro_trip", "TaroTrip", "tripTaro", "TAROtrip", "trip-taro2", "taro.trip",
    "trip taro", "ﾀﾛｳ_taro", "Tàro_trip", "jose_birthday", "ＪＯＳＥ",
    "ゆいの誕生日", "ユイの誕生日", "ﾕｲの誕生日", "誕生日ゆい",
    "A_trip", "trip-A2", "ＡTrip", "Ed_visit", "con_text", "ConText", "mai", "MAI-2",
])
def test_a_sender_in_any_form_is_refused_by_the_name_check(tmp_path, question_type):
    message = refused(tmp_path, rows([question_type, "contextual"]))
    assert "public/per_question_metrics.csv, column 'question_type', row 0: the name check refused" in message
    assert "a sender of the study" in message
    assert question_type not in message


@pytest.mark.parametrize("question_type", ["FamilyTrip", "family-2", "FAMILY", "from_dm_taro", "DmTaro", "dm-taro",
                                           "ｄｍ＿ｔａｒｏ", "group1_chat", "Group-1"])
def test_a_source_name_in_any_form_is_refused_by_the_name_check(tmp_path, question_type):
    message = refused(tmp_path, rows([question_type, "contextual"]))
    assert "the name check refused" in message and "of the study" in message
    assert question_type not in message


@pytest.mark.parametrize("question_type", [
    "20240410", "2024_04_10", "2024-4-10", "2024/04/10", "24/4/10", "4/10/2024", "April 10", "10 Apr 2024",
    "4月10日", "2024年4月10日", "21:05", "trip_2024_04_10", "since20240410", "tripApril10", "10th_of_april",
    "２０２４０４１０", "４月１０日", "10.04.2024", "2024-04", "May 2024", "202404102105", "令和6年", "20時",
])
def test_a_date_or_time_in_any_form_is_refused_by_the_date_check(tmp_path, question_type):
    message = refused(tmp_path, rows([question_type, "contextual"]))
    assert "column 'question_type', row 0: the date check refused a value that looks like a date" in message
    assert question_type not in message


@pytest.mark.parametrize("question_type", [20240410, 202404102105])
def test_a_question_type_read_as_a_number_is_still_checked_as_text(tmp_path, question_type):
    assert "the date check refused" in refused(tmp_path, rows([question_type, "contextual"]))


@pytest.mark.parametrize("question_id", ["q_taro_2024_04_10", "TaroQ1", "q-ＴＡＲＯ-1", "q_20240410", "ゆい_q1"])
def test_an_original_question_id_carrying_a_name_or_a_date_is_refused(tmp_path, question_id):
    per_question = rows(["named_entity", "contextual"], ids=[question_id, "q2"])
    message = refused(tmp_path, per_question, mode="original")
    assert "column 'question_id', row 0: the" in message and question_id not in message
    written, mapping = export(tmp_path, per_question)                   # the default hides it
    text = "".join((tmp_path / path).read_text(encoding="utf-8") for path in written)
    assert question_id not in text and public.pseudonym(question_id) in text
    assert list(mapping["question_id"]) == [question_id, "q2"]


def test_no_original_id_reaches_public_in_any_question_id_column(tmp_path):
    per_question = rows(["named_entity", "contextual"], ids=["mine-1", "mine-2"])
    spelled = pd.DataFrame({"Question ID": ["mine-1", "mine-2"], "Questions": [1, 2]})
    written, _ = export(tmp_path, per_question, tables={"labels": spelled})
    assert pd.read_csv(tmp_path / "public" / "labels.csv")["Question ID"].tolist() == [public.pseudonym("mine-1"),
                                                                                        public.pseudonym("mine-2")]
    assert not any("mine-" in (tmp_path / path).read_text(encoding="utf-8") for path in written)
    elsewhere = pd.DataFrame({"note": ["mine-1"]})                      # an original ID in another column
    assert "column 'note', row 0: the vocabulary check refused" in refused(tmp_path / "x", per_question,
                                                                           tables={"labels": elsewhere})


def test_a_run_name_carrying_a_name_or_a_date_is_refused_before_the_readme_quotes_it(tmp_path):
    for run_name, check in (("taro_family", "name"), ("run_2024-04-10", "date")):
        message = refused(tmp_path, rows(["contextual"]), run_name=run_name)
        assert f"public/README.md, the run name: the {check} check refused" in message and run_name not in message


def test_a_private_column_name_is_refused_without_quoting_it(tmp_path):
    message = refused(tmp_path, rows(["contextual"]), tables={"leak": pd.DataFrame({"TARO": [1]})})
    assert message.startswith("public/leak.csv, a column name: the name check refused") and "TARO" not in message


def test_near_misses_are_written_and_read_back_unchanged(tmp_path):
    """Words that hold a sender's letters but not the sender as a word, numbers that resemble dates, digests
    that hold a date or a name by chance."""
    near = ["contextual", "context", "named_entity", "benchmark", "email", "domain", "edited", "taros",
            "Tarot", "tarotrip", "dm_saki2", "group12", "familyish", "mayor_march", "top_2024", "v1.2.10", "13/45",
            "昨日の天気", "texts"]
    ids = ["q87", "q899", "q964"] + [f"q{i}" for i in range(len(near) - 3)]   # pseudonyms q_abe39b0ca5a0,
    written, mapping = export(tmp_path, rows(near, ids))                      # q_19791104b578, q_20feb91b8d76
    back = pd.read_csv(tmp_path / "public" / "per_question_metrics.csv")
    assert back["question_type"].tolist() == near
    assert back["question_id"].tolist()[:3] == ["q_abe39b0ca5a0", "q_19791104b578", "q_20feb91b8d76"]
    assert back["recall@5"].tolist() == [0.2024] * len(near)             # a float is never read as a date
    table = pd.read_csv(tmp_path / "public" / "table9_success_overlap.csv")
    assert table["method_a"].tolist() == ["Top-10", "recall@5", "ci_low", "Both"]   # the sender "A" is no word here
    assert "public/README.md" in written and list(mapping["question_id"]) == ids


def test_names_are_folded_in_case_width_accents_and_kana_but_not_romanised():
    index = PrivateIndex({"sender": {"ゆい", "José"}})
    assert {index.find(v) for v in ("ゆい", "ユイ", "ﾕｲ", "jose", "JOSÉ", "Ｊｏｓｅ")} == {"sender"}
    assert index.find("yui") is None and index.find("ゆう") is None and index.find("jos") is None


def test_short_latin_names_keep_their_case_and_need_a_whole_word():
    index = PrivateIndex({"sender": {"A", "Ed"}})
    assert [index.find(v) for v in ("A", "A_trip", "tripA", "ed_Ed", "ED", "method_a", "BM25 only", "Edward")] == [
        "sender", "sender", "sender", "sender", None, None, None, None]


def test_texts_are_folded_but_match_as_whole_words():
    index = PrivateIndex({"message text": {"see you at the station", "またあしたね"}})
    assert index.find("SEE YOU AT THE STATION!") == "message text"
    assert index.find("ﾏﾀｱｼﾀﾈ") == "message text"
    assert index.find("じゃあ、マタアシタネ。") == "message text"
    assert index.find("またあした") is None
    assert index.find("see you at the stations") is None


def _disguised_study(root, mode: str):
    """The tiny study with a question type and a question ID that carry its senders (Aki, Ben) in disguise."""
    study = make_tiny_study(root, "analysis: {aggregate_type: contextual, public_question_ids: %s}\n" % mode)
    path = root / "data" / "questions.json"
    questions = json.loads(path.read_text(encoding="utf-8"))
    questions["questions"][0].update(type="AKI_morning", question_id="q_ｂｅｎ_2024_04_09")
    path.write_text(json.dumps(questions, ensure_ascii=False), encoding="utf-8")
    return type(study).from_params(root / "p.yaml")


@pytest.mark.integration
def test_a_study_whose_questions_carry_a_sender_in_disguise_gets_its_export_refused(tmp_path):
    study = _disguised_study(tmp_path, "original")
    assert set(study.questions()["type"]) == {"AKI_morning", "contextual"}

    def export_study(mode):
        per_question, reliability, failures = study.per_question(), study.reliability(), study.failures()
        return public.export_tables(
            study.run_dir, study.params.run, per_question,
            public.public_tables(reliability, failures, str(study.selection().best)),
            public.vocabulary(reliability, failures),
            public.private_strings(study.messages(), study.chunks(), study.questions()), mode)

    with pytest.raises(public.PublicExportError, match=r"column 'question_id', row \d+: the (name|date) check"):
        export_study(study.params.analysis.public_question_ids)          # the user opted out of pseudonyms
    with pytest.raises(public.PublicExportError,
                       match=r"column 'question_type', row \d+: the name check refused a value containing a sender"):
        export_study("pseudonym")
    assert not (study.run_dir / "public").exists()
