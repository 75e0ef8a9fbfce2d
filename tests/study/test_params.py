"""Params are validated on load: unknown keys, wrong types and missing files are one-line errors."""

from pathlib import Path

from pmrag.study.params import load_params

from conftest import params_error as error_of, write_file as write

REPO = Path(__file__).resolve().parents[2]




def test_demo_params_load_with_the_papers_defaults():
    params = load_params(REPO / "params" / "demo.yaml")
    assert params.run == "demo"
    assert params.run_dir == REPO / "outputs" / "demo"
    assert Path(params.notebooks_dir) == REPO / "notebooks"
    assert params.path == REPO / "params" / "demo.yaml"
    assert params.chunking.model_dump() == {
        "session_gap_minutes": 180, "window_size": 42, "stride": 36, "max_summary_input_chars": 5000,
        "min_window_messages": 1, "trim_policy": "fixed",
    }


def test_unknown_key_is_named_with_its_dotted_path(tmp_path):
    path = write(tmp_path, "run: x\ndataset: {synthetic: {enabled: true}}\nchunking: {windw_size: 40}\n")
    message = error_of(path)
    assert "unknown key 'chunking.windw_size'" in message and str(path) in message


def test_wrong_type_is_named(tmp_path):
    message = error_of(write(tmp_path, "run: x\ndataset: {synthetic: {enabled: true}}\nchunking: {stride: 'abc'}\n"))
    assert "key 'chunking.stride': Input should be a valid integer, got 'abc'" in message


def test_bool_is_not_an_integer(tmp_path):
    message = error_of(write(tmp_path, "run: x\ndataset: {synthetic: {enabled: true, seed: true}}\n"))
    assert "key 'dataset.synthetic.seed': Input should be a valid integer, got True" in message


def test_choice_is_checked(tmp_path):
    message = error_of(write(tmp_path, "run: x\ndataset: {synthetic: {enabled: true}}\nchunking: {trim_policy: maybe}\n"))
    assert "key 'chunking.trim_policy': Input should be 'fixed' or 'resume', got 'maybe'" in message


def test_missing_input_file_names_key_and_path(tmp_path):
    message = error_of(write(tmp_path, "run: x\ndataset: {inputs: [nowhere/chat.json]}\n"))
    assert "key 'dataset.inputs[0]': file not found:" in message
    assert str(tmp_path / "nowhere" / "chat.json") in message


def test_relative_paths_resolve_against_the_params_file(tmp_path):
    (tmp_path / "data").mkdir()
    (tmp_path / "data" / "chat.json").write_text("{}", encoding="utf-8")
    params = load_params(write(tmp_path, "run: mine\ndataset: {inputs: [data/chat.json]}\noutputs_dir: out\n"))
    assert params.dataset.inputs == (str(tmp_path / "data" / "chat.json"),)
    assert params.run_dir == tmp_path / "out" / "mine"


def test_missing_run_and_missing_dataset(tmp_path):
    assert "missing key 'run'" in error_of(write(tmp_path, "dataset: {synthetic: {enabled: true}}\n"))
    assert "give 'inputs'" in error_of(write(tmp_path, "run: x\n"))


def test_stride_larger_than_window_is_refused(tmp_path):
    message = error_of(write(tmp_path, "run: x\ndataset: {synthetic: {enabled: true}}\nchunking: {stride: 50}\n"))
    assert "key 'chunking.stride': must be ≤ window_size (42), got 50" in message


def test_invalid_yaml_names_the_line(tmp_path):
    message = error_of(write(tmp_path, "run: x\ndataset: [unclosed\n"))
    assert str(tmp_path / "p.yaml") in message and "line" in message


def test_missing_params_file():
    assert "params file not found" in error_of(Path("/nonexistent/params.yaml"))


def test_rule_pairing_count_counts_what_a_rule_would_sweep_and_zero_when_it_finds_nothing(tmp_path):
    from pmrag.study.params import rule_pairing_count

    demo = load_params(REPO / "params" / "demo.yaml")
    assert rule_pairing_count(demo, "auto") == 247 and rule_pairing_count(demo, "all") > 247
    path = tmp_path / "p.yaml"
    path.write_text("run: r\ndataset: {synthetic: {enabled: true}}\nretrieval: {retrievers: [raw_text_bm25, summary_bm25]}\n"
                    "hybrid: {pairings: [[raw_text_bm25, summary_bm25]]}\nanalysis: {reference_retriever: raw_text_bm25, "
                    "diagnostic_hybrid: [raw_text_bm25, summary_bm25, 0.5]}\n", encoding="utf-8")
    assert rule_pairing_count(load_params(path), "auto") == 0 and rule_pairing_count(load_params(path), "all") == 1
