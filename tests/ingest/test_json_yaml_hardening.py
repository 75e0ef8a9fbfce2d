"""Hostile or careless JSON inputs and params files end in one
short line naming the file (and the line where known), exit 2, never a traceback, never a whole value.

JSON: nesting deep enough to exhaust the parser's stack, a 5,000-digit integer, NaN/Infinity literals, a
number that overflows to infinity, a number where a string is expected, files with nothing in them.
YAML: an alias bomb ("billion laughs"), an oversized document, a 1 MB value where an integer is expected,
deep nesting, a duplicate ``allow_remote``, a params file outside ``params/`` with a missing
``notebooks_dir``.  Every big input is generated in ``tmp_path``."""

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from pmrag.cli import main
from pmrag.core.errors import InputError
from pmrag.ingest import read_source
from pmrag.study.params import MAX_PARAMS_BYTES, load_params

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from conftest import params_error, write_file  # noqa: E402

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures"
PMRAG = Path(sys.executable).with_name("pmrag")
FORMATS = ("line-json", "locomo", "questions-json")
SHORT = 300   # characters: what "one short line" means here


def pmrag(cwd: Path, *args: str) -> subprocess.CompletedProcess:
    """The installed ``pmrag`` command in a subprocess (what a user runs)."""
    env = dict(os.environ, PYTHONIOENCODING="utf-8")
    return subprocess.run([str(PMRAG), *args], cwd=cwd, capture_output=True, text=True, encoding="utf-8",
                          env=env, timeout=120)


def input_error(path: Path, fmt: str, permissive: bool = False) -> str:
    """The one-line InputError that reading ``path`` as ``fmt`` raises; checked short and naming the file."""
    with pytest.raises(InputError) as info:
        read_source(path, fmt, permissive=permissive)
    message = str(info.value)
    assert "\n" not in message and len(message) < SHORT, message[:SHORT]
    assert message.startswith(str(path)), message
    return message


def write(folder: Path, name: str, text: str) -> Path:
    path = folder / name
    path.write_text(text, encoding="utf-8")
    return path


def message_json(**fields) -> str:
    """A line-json file with one message of ``fields`` (over time/sender/text defaults) on line 3."""
    message = {"time": "20:15", "sender": "A", "type": "text", "text": "x", **fields}
    return '{\n  "2024-04-10": [\n    ' + json.dumps(message) + "\n  ]\n}\n"


# ------------------------------------------------------------------------------------------ JSON §2

@pytest.mark.parametrize("fmt", FORMATS)
@pytest.mark.parametrize("closed", [False, True], ids=["truncated", "balanced"])
def test_deeply_nested_json_is_one_line_naming_the_place(tmp_path, fmt, closed):
    """``[`` × 100,000 raised RecursionError (exit 1, a traceback); now one line with line and column."""
    nesting = "[" * 100_000 + ("]" * 100_000 if closed else "")
    path = write(tmp_path, "deep.json", '{\n  "2024-04-10":\n    ' + nesting + "\n}\n")
    message = input_error(path, fmt)
    # the object is level 1: the 100th "[" (column 5 + 99) is the first past 100 levels
    assert "line 3, column 104" in message and "nested 100001 levels deep" in message, message


def test_deep_nesting_inside_strings_is_not_nesting(tmp_path):
    """Brackets inside message texts are text: a file with 100,000 of them reads normally."""
    path = write(tmp_path, "brackets.json", message_json(text="[" * 100_000))
    [record] = read_source(path, "line-json").messages
    assert record.text == "[" * 100_000


@pytest.mark.parametrize("fmt", FORMATS)
def test_5000_digit_integer_is_one_line(tmp_path, fmt):
    """Python refuses to convert integers of more than 4,300 digits: a ValueError traceback before."""
    path = write(tmp_path, "bigint.json", message_json(extra=0).replace('"extra": 0', '"extra": ' + "9" * 5000))
    message = input_error(path, fmt)
    assert "line 3, column" in message and "4300 digits" in message, message


@pytest.mark.parametrize("literal", ["NaN", "Infinity", "-Infinity"])
@pytest.mark.parametrize("fmt", FORMATS)
def test_nan_and_infinity_literals_are_refused(tmp_path, fmt, literal):
    """Not JSON (RFC 8259), accepted by Python's ``json`` by default: refused, naming line and column."""
    text = message_json(extra=0).replace('"extra": 0', f'"extra": {literal}')
    path = write(tmp_path, "nan.json", text)
    message = input_error(path, fmt)
    column = text.splitlines()[2].index(literal) + 1
    assert f"line 3, column {column}" in message and literal in message, message


def test_a_number_that_overflows_to_infinity_is_refused(tmp_path):
    path = write(tmp_path, "huge.json", message_json(extra=0).replace('"extra": 0', '"extra": 1e999'))
    message = input_error(path, "line-json")
    assert "line 3, column" in message and "infinity" in message, message


def test_the_words_nan_and_infinity_in_texts_and_ordinary_numbers_still_read(tmp_path):
    """Only the bare literals are refused: texts that say NaN or 1e999, and finite floats, are fine."""
    path = write(tmp_path, "words.json", message_json(text='NaN, Infinity and 1e999 [{"x": NaN}]', score=0.25))
    [record] = read_source(path, "line-json").messages
    assert record.text == 'NaN, Infinity and 1e999 [{"x": NaN}]'


def test_a_lone_surrogate_escape_is_refused_naming_the_field(tmp_path):
    """``json`` decodes ``"\\ud800"`` into a str UTF-8 cannot encode: it crashed later (UnicodeEncodeError in
    the message id).  A proper pair (an emoji) and an escaped backslash before ``u`` are fine."""
    path = write(tmp_path, "lone.json", message_json().replace('"text": "x"', '"text": "a\\ud800b"'))
    message = input_error(path, "line-json")
    assert "key ['2024-04-10'][0]['text']" in message and "without its other half" in message, message
    fine = message_json().replace('"text": "x"', '"text": "\\ud83d\\ude00 \\\\ud800"')
    [record] = read_source(write(tmp_path, "fine.json", fine), "line-json").messages
    assert record.text == "\U0001F600 \\ud800"


@pytest.mark.parametrize("field", ["time", "sender", "type", "text"])
def test_line_json_number_where_a_string_is_expected(tmp_path, field):
    path = write(tmp_path, "n.json", message_json(**{field: 2015}))
    message = input_error(path, "line-json")
    assert f"'{field}' must be a string, got int" in message and "'2024-04-10'[0]" in message, message
    batch = read_source(path, "line-json", permissive=True)
    assert batch.messages == [] and len(batch.rejected) == 1


def locomo_sample(**turn_fields) -> list:
    turn = {"speaker": "Mina", "dia_id": "D1:1", "text": "hi", **turn_fields}
    return [{"sample_id": "conv-a", "conversation": {"session_1_date_time": "1:47 pm on 18 May, 2023",
                                                     "session_1": [turn]},
             "qa": [{"question": "q?", "answer": 7, "evidence": ["D1:1"], "category": 1}]}]


@pytest.mark.parametrize("field", ["speaker", "dia_id", "blip_caption"])
def test_locomo_number_where_a_string_is_expected(tmp_path, field):
    """A numeric speaker used to be stored as a sender that is not a string; a numeric dia_id as a native id."""
    path = write(tmp_path, "l.json", json.dumps(locomo_sample(**{field: 5})))
    message = input_error(path, "locomo")
    assert f"'{field}' must be a string, got int" in message and "session_1[0]" in message, message


def test_locomo_sample_id_qa_and_evidence_of_the_wrong_type(tmp_path):
    sample = locomo_sample()
    sample[0]["sample_id"] = 26   # was silently turned into the source name "26"
    message = input_error(write(tmp_path, "a.json", json.dumps(sample)), "locomo")
    assert "[0].sample_id" in message and "got int" in message, message
    sample = locomo_sample()
    sample[0]["qa"] = 5           # was a TypeError traceback
    message = input_error(write(tmp_path, "b.json", json.dumps(sample)), "locomo")
    assert "[0].qa" in message and "got int" in message, message
    sample = locomo_sample()
    sample[0]["qa"][0]["evidence"] = 3   # was a TypeError traceback
    message = input_error(write(tmp_path, "c.json", json.dumps(sample)), "locomo")
    assert "[0].qa[0]" in message and "'evidence' must be a list" in message, message


def test_locomo_numeric_answer_is_still_kept_as_text(tmp_path):
    """LoCoMo has numeric answers: they stay accepted (as text), unlike numbers in string fields."""
    batch = read_source(write(tmp_path, "l.json", json.dumps(locomo_sample())), "locomo")
    [question] = batch.questions
    assert question.answer == "7" and question.type == "multi-hop"


@pytest.mark.parametrize("evidence, refused", [
    ({"source": "family", "source_order": 0, "relevance": 2.0}, "relevance: expected 1 or 2, got 2.0"),
    ({"source": "family", "source_order": 0, "relevance": True}, "relevance: expected 1 or 2, got True"),
    ({"source": "family", "source_order": 2**63, "relevance": 2}, "below 2**63"),
    ({"source": "family", "source_order": "12", "relevance": 2}, "source_order"),
    ({"message_id": 12, "relevance": 2}, "'message_id' or 'source'"),
])
def test_questions_json_numbers_and_strings_are_not_interchangeable(tmp_path, evidence, refused):
    """A float relevance (2.0) used to pass as 2; a source_order beyond SQLite's integers reached the store."""
    item = {"question_id": "q1", "question": "q?", "type": "factual", "evidence": [evidence]}
    path = write(tmp_path, "q.json", json.dumps({"questions": [item]}))
    message = input_error(path, "questions-json")
    assert "questions[0].evidence[0]" in message and refused in message, message


def test_questions_json_number_as_question_id_is_refused(tmp_path):
    item = {"question_id": 1, "question": "q?", "type": "factual", "evidence": [{"message_id": "m", "relevance": 2}]}
    message = input_error(write(tmp_path, "q.json", json.dumps({"questions": [item]})), "questions-json")
    assert "questions[0].question_id" in message and "non-empty string" in message, message


@pytest.mark.parametrize("fmt, text", [("line-json", "{}"), ("line-json", '{"2024-04-10": []}'),
                                       ("locomo", "[]"), ("questions-json", "{}"),
                                       ("questions-json", '{"questions": []}')])
def test_a_valid_file_with_nothing_in_it_is_an_empty_batch(tmp_path, fmt, text):
    """Not an error: the batch is empty (the CLI warns about it); ``{}`` as a question file used to be refused."""
    batch = read_source(write(tmp_path, "empty.json", text), fmt)
    assert (batch.messages, batch.questions, batch.rejected, batch.records_read) == ([], [], [], 0)


@pytest.mark.parametrize("fmt, text, expected", [
    ("line-json", "[]", "expected a JSON object keyed by date, got a list"),
    ("locomo", "{}", "expected a JSON list of samples, got a dict"),
    ("questions-json", '{"question": []}', "expected an object with a 'questions' list"),
])
def test_the_wrong_kind_of_empty_is_still_refused(tmp_path, fmt, text, expected):
    """The top level each format requires is kept: ``[]`` is no LINE JSON, a misspelt key is no empty file."""
    assert expected in input_error(write(tmp_path, "wrong.json", text), fmt)


def test_empty_json_files_exit_0_from_the_command(tmp_path, capsys):
    for name, text in (("a.json", "{}"), ("b.json", "[]")):
        write(tmp_path, name, text)
    assert main(["ingest", str(tmp_path / "a.json"), str(tmp_path / "b.json"), "--db", str(tmp_path / "s.db")]) == 0
    out = capsys.readouterr().out
    assert "a.json: line-json" in out and "b.json: locomo" in out and "stored 0" in out, out


def test_megabyte_keys_and_values_give_short_messages(tmp_path):
    """A date key, a time or a LoCoMo date-time of 1 MB was quoted whole in the message (and, permissive, in
    every rejected record's location)."""
    huge = "x" * 1_000_000
    path = write(tmp_path, "key.json", json.dumps({huge: [{"text": "a"}, {"text": "b"}]}))
    assert "is not a date" in input_error(path, "line-json")
    batch = read_source(path, "line-json", permissive=True)
    assert len(batch.rejected) == 2 and all(len(r.location) + len(r.reason) < SHORT for r in batch.rejected)
    assert "is not HH:MM" in input_error(write(tmp_path, "time.json", message_json(time=huge)), "line-json")
    sample = locomo_sample()
    sample[0]["conversation"]["session_1_date_time"] = huge
    assert "does not parse" in input_error(write(tmp_path, "l.json", json.dumps(sample)), "locomo")


@pytest.mark.integration
def test_command_exits_2_with_one_line_for_deep_json_and_a_huge_integer(tmp_path):
    """End to end: the installed command, no traceback on stderr, exit 2 (it was 1 with a traceback)."""
    write(tmp_path, "deep.json", "[" * 100_000)
    write(tmp_path, "big.json", '{"2024-04-10": [{"n": ' + "9" * 5000 + "}]}")
    for name in ("deep.json", "big.json"):
        result = pmrag(tmp_path, "ingest", name, "--db", "s.db")
        assert result.returncode == 2, result.stderr[-2000:]
        assert "Traceback" not in result.stderr and result.stderr.count("\n") == 1, result.stderr[-2000:]
        assert result.stderr.startswith(f"pmrag ingest: error: {name}, line 1, column "), result.stderr[:SHORT]
        assert len(result.stderr) < SHORT


# ------------------------------------------------------------------------------------------ YAML §5

TINY = "run: tiny\ndataset: {inputs: [data/family.json], questions: data/questions.json}\n"


def tiny_folder(root: Path) -> Path:
    """``root`` with the family chat and its questions under ``data/`` (for params with relative paths)."""
    (root / "data").mkdir(parents=True, exist_ok=True)
    (root / "data" / "family.json").write_bytes((FIXTURES / "line_json" / "family.json").read_bytes())
    (root / "data" / "questions.json").write_bytes((FIXTURES / "questions" / "family_questions.json").read_bytes())
    return root


def alias_bomb(levels: int) -> str:
    """The billion laughs under ``retrieval.ks``: each level nine aliases of the one before (9**levels ints)."""
    lines = ["a0: &a0 [1, 1, 1, 1, 1, 1, 1, 1, 1]"]
    lines += [f"a{n}: &a{n} [" + ", ".join([f"*a{n - 1}"] * 9) + "]" for n in range(1, levels)]
    return "x-bomb:\n" + "".join(f"  {line}\n" for line in lines) + f"retrieval:\n  ks: *a{levels - 1}\n"


def test_yaml_alias_bomb_is_refused_at_once(tmp_path):
    """Took seconds to minutes and gigabytes (the error message expanded the value: 31 s and 2.5 GB in the
    issue); now refused before any expansion."""
    path = write_file(tiny_folder(tmp_path), TINY + alias_bomb(6))   # 9**6 ints; about 6 s before
    started = time.perf_counter()
    message = params_error(path)
    assert time.perf_counter() - started < 2.0
    assert message.startswith(f"{path}, line 4: ") and "aliases" in message and len(message) < SHORT, message


@pytest.mark.parametrize("text, line", [
    ("analysis: {bootstrap_seed: &seed 7}\nbootstrap: {seed: *seed}\n", 3),
    ("base: &base {k1: 1.2}\nbm25:\n  <<: *base\n", 3),
    ("retrieval:\n  ks: &ks [1, 5]\n", 4),
])
def test_every_anchor_or_alias_is_refused_with_its_line(tmp_path, text, line):
    """Even a harmless one: a params file has no need for them, and refusing all is simpler to trust."""
    message = params_error(write_file(tiny_folder(tmp_path), TINY + text))
    assert f", line {line}: " in message and "anchors and aliases" in message, message


def test_oversized_params_file_is_refused_before_parsing(tmp_path):
    path = write_file(tiny_folder(tmp_path), TINY + "# " + "x" * MAX_PARAMS_BYTES + "\n")
    started = time.perf_counter()
    message = params_error(path)
    assert time.perf_counter() - started < 1.0
    assert message.startswith(str(path)) and "larger than 1,048,576 bytes" in message, message


def test_megabyte_string_for_an_integer_key_gives_a_short_message(tmp_path):
    """The message quoted the whole value: now it is shortened (reprlib) and the line stays short."""
    path = write_file(tiny_folder(tmp_path), TINY + "retrieval: {depth: " + "7x" * 500_000 + "}\n")
    message = params_error(path)
    assert message.startswith(f"{path}: key 'retrieval.depth': ") and "valid integer" in message, message
    assert len(message) < SHORT and "7x7x" in message and "..." in message, message


@pytest.mark.parametrize("extra, key", [
    ("retrieval: {ks: [[" + ", ".join(["12345"] * 5_000) + "]]}\n", "retrieval.ks[0]"),
    ('"' + "k" * 900 + '": 1\n', "unknown key 'kkkk"),
    ('"a\\nb": 1\n', "unknown key 'a\\nb'"),
])
def test_long_lists_and_long_or_multiline_keys_stay_one_short_line(tmp_path, extra, key):
    message = params_error(write_file(tiny_folder(tmp_path), TINY + extra))
    assert key in message and len(message) < SHORT, message


@pytest.mark.parametrize("extra, expected", [
    ("retrieval: {ks: " + "[" * 5_000 + "]" * 5_000 + "}\n", "line 3: nested deeper than"),
    ("retrieval: {depth: " + "9" * 5_000 + "}\n", "line 3: an integer too long"),
])
def test_deep_yaml_and_a_5000_digit_integer_are_one_line(tmp_path, extra, expected):
    """A RecursionError and a ValueError traceback before."""
    message = params_error(write_file(tiny_folder(tmp_path), TINY + extra))
    assert expected in message and len(message) < SHORT, message


@pytest.mark.parametrize("data, expected", [
    (TINY.encode() + b"description: caf\xe9\n", "line 3: not valid UTF-8 (byte"),
    (TINY.encode() + b"description: a\x01b\n", "line 3: not valid YAML (character #x0001"),
])
def test_undecodable_params_are_one_line(tmp_path, data, expected):
    """A UnicodeDecodeError traceback and a two-line ReaderError before."""
    path = tiny_folder(tmp_path) / "p.yaml"
    path.write_bytes(data)
    assert expected in params_error(path)


def test_duplicate_allow_remote_is_refused(tmp_path):
    """The issue's example: last-one-wins would let a second ``allow_remote: true`` slip past a reader."""
    path = write_file(tiny_folder(tmp_path), TINY + "allow_remote: false\ndescription: d\nallow_remote: true\n")
    assert params_error(path) == f"{path}: duplicate key 'allow_remote' on lines 3 and 5"


# ------------------------------------------------------------------ a params file outside params/

def test_params_outside_params_folder_resolve_against_their_own_folder(tmp_path, monkeypatch):
    """Relative paths are the file's, not the working directory's (loaded from another folder)."""
    folder = tiny_folder(tmp_path / "mine")
    path = write_file(folder, TINY + "outputs_dir: out\ncache_dir: cache\nnotebooks_dir: nowhere\n")
    monkeypatch.chdir(tmp_path)
    params = load_params(Path("mine") / "p.yaml")
    assert params.dataset.inputs == (str(folder / "data" / "family.json"),)
    assert params.notebooks_dir == str(folder / "nowhere") and params.run_dir == folder / "out" / "tiny"
    assert params.path == path


@pytest.mark.parametrize("text, key, expected", [
    (TINY + "outputs_dir: p.yaml/out\n", "outputs_dir", "exists and is not a folder"),
    (TINY + "cache_dir: data/family.json\n", "cache_dir", "exists and is not a folder"),
    ("run: tiny\ndataset: {inputs: [~no_such_user_here/x.json]}\n", "dataset.inputs[0]", "not a usable path"),
])
def test_unusable_folders_and_paths_are_one_line(tmp_path, text, key, expected):
    """An outputs_dir under a file was a NotADirectoryError traceback from ``pmrag status``, an unknown
    ``~user`` a RuntimeError traceback."""
    message = params_error(write_file(tiny_folder(tmp_path), text))
    assert f"key '{key}': " in message and expected in message, message


@pytest.mark.integration
def test_study_and_status_on_params_with_a_missing_notebooks_dir(tmp_path):
    """``pmrag study``: one line naming the file and ``notebooks_dir``, exit 2; ``pmrag status``: every stage,
    no notebook stage, exit 0 — run from another folder, the params file's relative paths still resolve."""
    folder = tiny_folder(tmp_path / "elsewhere")
    write_file(folder, TINY + "outputs_dir: out\ncache_dir: cache\n")   # notebooks_dir: ../notebooks (absent)
    study = pmrag(tmp_path, "study", "elsewhere/p.yaml", "--quiet")
    assert study.returncode == 2 and "Traceback" not in study.stderr, study.stderr[-2000:]
    assert study.stderr.startswith(f"pmrag study: error: {folder / 'p.yaml'}: key 'notebooks_dir': "), study.stderr
    assert study.stderr.count("\n") == 1 and str(tmp_path / "notebooks") in study.stderr, study.stderr
    status = pmrag(tmp_path, "status", "elsewhere/p.yaml")
    assert status.returncode == 0 and status.stderr == "", status.stderr[-2000:]
    names = [line.split()[0] for line in status.stdout.split("\n\n")[0].splitlines()[1:]]   # the stages, then the calls
    assert names[:4] == ["ingest", "chunks", "chunk_table", "qrels"] and "failures" in names, status.stdout
    assert not any(name.startswith("notebook:") for name in names), status.stdout
