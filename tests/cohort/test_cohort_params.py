"""A cohort file is validated up front, every participant's study params in full: one-line errors naming the file,
the participant and the key; the participants' studies are the base study with the overrides merged."""

import json
import shutil
from pathlib import Path

import pytest
import yaml

from pmrag.cli import main
from pmrag.cohort.params import load_cohort, participant_study, write_locomo_inputs
from conftest import params_error, write_file
from pmrag.study.params import load_params
from tests.study.test_locomo_study import locomo_file

REPO = Path(__file__).resolve().parents[2]
BASE = "run: base\noutputs_dir: out\ncache_dir: cache\ndataset: {synthetic: {enabled: true, seed: 1, n_messages: 1100, n_questions: 6}}\n"


@pytest.fixture
def project(tmp_path):
    (tmp_path / "base.yaml").write_text(BASE, encoding="utf-8")
    return tmp_path


def cohort_file(folder: Path, text: str) -> Path:
    return write_file(folder, text, "cohort.yaml")


def cohort_error(path) -> str:
    return params_error(path, load_cohort)


def test_the_shipped_demo_cohort_loads_with_three_distinct_participants():
    cohort = load_cohort(REPO / "params" / "cohort_demo.yaml")
    assert [p.id for p in cohort.participants] == ["p01", "p02", "p03"]
    seeds = {p.study["dataset"]["synthetic"]["seed"] for p in cohort.participants}
    assert len(seeds) == 3
    assert {p.study["cache_dir"] for p in cohort.participants} == {str(REPO / "params" / "cohort_demo_cache")}
    assert cohort.run_dir == REPO / "outputs" / "cohort_demo"
    assert not cohort.params.cohort.notebooks


def test_participants_merge_overrides_key_by_key_and_lists_replace(project):
    (project / "chat.json").write_text("{}", encoding="utf-8")
    path = cohort_file(project, "run: c\nstudy: base.yaml\noverrides: {chunking: {stride: 30}, bootstrap: {seed: 9}}\n"
                                "participants:\n"
                                "  - {id: a, overrides: {chunking: {window_size: 40}}}\n"
                                "  - {id: b, inputs: [chat.json], overrides: {retrieval: {retrievers: [raw_text_bm25, "
                                "embedding_text_bm25, summary_bm25, summary_vector]}, hybrid: {pairings: "
                                "[[summary_bm25, summary_vector]]}}}\n")
    cohort = load_cohort(path)
    a, b = cohort.participants
    assert a.study["chunking"] == {"stride": 30, "window_size": 40}
    assert b.study["chunking"] == {"stride": 30} and b.study["bootstrap"] == {"seed": 9}
    assert b.study["retrieval"]["retrievers"] == ["raw_text_bm25", "embedding_text_bm25", "summary_bm25", "summary_vector"]
    assert b.study["dataset"]["inputs"] == [str(project / "chat.json")]
    assert b.study["dataset"]["synthetic"]["enabled"] is False and a.study["dataset"]["synthetic"]["enabled"] is True
    assert (a.study["run"], a.study["outputs_dir"]) == ("a", str(project / "out" / "c" / "participants"))
    assert a.study["cache_dir"] == b.study["cache_dir"] == str(project / "cache")   # shared
    assert cohort.study_file("a") == project / "out" / "c" / "participants" / "a" / "study.yaml"


def test_a_participants_study_file_is_an_ordinary_study(project, tmp_path_factory):
    from pmrag.cohort.params import write_study

    cohort = load_cohort(cohort_file(project, "run: c\nstudy: base.yaml\nparticipants: [{id: a}]\n"))
    elsewhere = tmp_path_factory.mktemp("elsewhere") / "study.yaml"
    params = load_params(write_study(cohort.participants[0], elsewhere))
    assert params.run_dir == project / "out" / "c" / "participants" / "a"
    assert params.cache_dir == str(project / "cache")


def test_participant_study_leaves_its_input_unchanged():
    common = {"dataset": {"synthetic": {"enabled": True, "seed": 1}}, "chunking": {"stride": 3}}
    study = participant_study(common, "x", Path("/o"), ("/in.json",), None, {"chunking": {"stride": 4}})
    assert common == {"dataset": {"synthetic": {"enabled": True, "seed": 1}}, "chunking": {"stride": 3}}
    assert study["chunking"]["stride"] == 4 and study["dataset"]["synthetic"] == {"enabled": False, "seed": 1}


@pytest.mark.parametrize("text, expected", [
    ("run: c\nstudy: base.yaml\nparticipants: [{id: a}]\nsurprise: 1\n", "unknown key 'surprise'"),
    ("run: c\nparticipants: [{id: a}]\n", "missing key 'study'"),
    ("run: c\nstudy: nowhere.yaml\nparticipants: [{id: a}]\n", "key 'study': file not found"),
    ("run: c\nstudy: base.yaml\n", "key 'participants': give either a list of participants or 'locomo: FILE'"),
    ("run: c\nstudy: base.yaml\nparticipants: [{id: a}, {id: a}]\n", "key 'participants': the id a is given twice (participants[1])"),
    ("run: c\nstudy: base.yaml\nparticipants: [{id: a/b}]\n", "key 'participants[0].id'"),
    ("run: c\nstudy: base.yaml\nparticipants: [{id: a, inputs: [gone.json]}]\n",
     "key 'participants[0].inputs[0]': file not found"),
    ("run: c\nstudy: base.yaml\nparticipants: [{id: a}]\ncohort: {retries: -1}\n", "key 'cohort.retries'"),
    ("run: c\nstudy: base.yaml\nparticipants: [{id: a}]\ncohort: {n_workers: 1.5}\n", "key 'cohort.n_workers'"),
    ("run: c\nstudy: base.yaml\nparticipants: [{id: a, overrides: {chunking: {stride: x}}}]\n",
     "participant 'a': key 'chunking.stride'"),
    ("run: c\nstudy: base.yaml\noverrides: {chunking: {strde: 3}}\nparticipants: [{id: a}]\n",
     "participant 'a': unknown key 'chunking.strde'"),
    ("run: c\nstudy: base.yaml\nparticipants: [{id: a, overrides: {dataset: {synthetic: {n_messages: 10}}}}]\n",
     "participant 'a': key 'dataset.synthetic.n_messages'"),
])
def test_a_bad_cohort_file_is_one_line_naming_the_key(project, text, expected):
    path = cohort_file(project, text)
    message = cohort_error(path)
    assert message.startswith(str(path)) and expected in message, message


def test_the_base_studys_own_errors_name_the_base_file(project):
    (project / "base.yaml").write_text(BASE + "chunking: {stride: 0}\n", encoding="utf-8")
    message = cohort_error(cohort_file(project, "run: c\nstudy: base.yaml\nparticipants: [{id: a}]\n"))
    assert message.startswith(str(project / "base.yaml")) and "chunking.stride" in message


def test_locomo_conversations_become_participants_each_with_its_own_input(project):
    locomo_file(project / "locomo.json", samples=3, sessions=2)
    cohort = load_cohort(cohort_file(project, "run: c\nstudy: base.yaml\nlocomo: locomo.json\n"
                                              "overrides: {dataset: {format: locomo}}\n"))
    assert [p.id for p in cohort.participants] == ["conv-0", "conv-1", "conv-2"]
    written = write_locomo_inputs(cohort)
    for participant in written.participants:
        [path] = participant.study["dataset"]["inputs"]
        [sample] = json.loads(Path(path).read_text(encoding="utf-8"))
        assert sample["sample_id"] == participant.id and Path(path).parent == cohort.run_dir / "inputs"
    assert json.loads((project / "locomo.json").read_text(encoding="utf-8"))[0]["sample_id"] == "conv-0"   # unchanged


def test_a_locomo_sample_id_that_cannot_name_a_folder_is_refused(project):
    path = locomo_file(project / "locomo.json", samples=2, sessions=1)
    data = json.loads(path.read_text(encoding="utf-8"))
    data[1]["sample_id"] = "../up"
    path.write_text(json.dumps(data), encoding="utf-8")
    message = cohort_error(cohort_file(project, "run: c\nstudy: base.yaml\nlocomo: locomo.json\n"))
    assert "key 'locomo'" in message and "sample [1]" in message


def test_pmrag_cohort_reports_a_bad_file_in_one_line_with_status_2(project, capsys):
    path = cohort_file(project, "run: c\nstudy: base.yaml\nparticipants: [{id: a}]\nsurprise: 1\n")
    assert main(["cohort", str(path)]) == 2
    err = capsys.readouterr().err.strip()
    assert err == f"pmrag cohort: error: {path}: unknown key 'surprise'"


def test_the_shipped_locomo_cohort_names_the_pooled_study_as_its_base():
    text = (REPO / "params" / "locomo_cohort.yaml").read_text(encoding="utf-8")
    raw = yaml.safe_load(text)
    assert raw["study"] == "locomo.yaml" and raw["locomo"] == "../data/locomo10.json"


def test_the_shipped_locomo_cohort_loads_on_a_locomo_shaped_file(tmp_path):
    (tmp_path / "params").mkdir()
    (tmp_path / "data").mkdir()
    for name in ("locomo.yaml", "locomo_cohort.yaml"):
        shutil.copy(REPO / "params" / name, tmp_path / "params" / name)
    locomo_file(tmp_path / "data" / "locomo10.json", samples=2, sessions=2)
    cohort = load_cohort(tmp_path / "params" / "locomo_cohort.yaml")
    assert [p.id for p in cohort.participants] == ["conv-0", "conv-1"]
    assert cohort.run_dir == tmp_path / "outputs" / "locomo_cohort"
