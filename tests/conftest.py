import os
import tempfile

import pytest

# stage results are sealed with a per-user key (pmrag.study.sealed): the tests, and the processes and notebook
# kernels they start, use a key of their own instead of the developer's
os.environ.setdefault("PMRAG_STAGE_KEY_FILE", os.path.join(tempfile.mkdtemp(prefix="pmrag-test-key-"), "stage.key"))


CATEGORIES = ("unit", "agreement", "integration", "notebooks", "browser")
"""Every test is in at least one: ``unit`` (the default: fast, no study), ``agreement`` (a cross-check against an
independent implementation: ranx, bm25s, scikit-learn, scipy), ``integration`` (a real study, the command line or
processes, end to end), ``notebooks`` (nbval over notebooks/), ``browser`` (JupyterLab in Chromium).
``make test-fast`` runs unit and agreement tests that are not integration tests."""


def pytest_collectstart(collector):
    """nbval compares text/plain outputs; the HTML rendering of the same DataFrames adds nothing to check."""
    if collector.fspath and collector.fspath.ext == ".ipynb":
        collector.skip_compare += ("text/html",)


def pytest_collection_modifyitems(items):
    """A notebook cell is a ``notebooks`` test; a test marked with no category is a ``unit`` test."""
    for item in items:
        if item.path.suffix == ".ipynb":
            item.add_marker(pytest.mark.notebooks)
        elif not {mark.name for mark in item.iter_markers()} & set(CATEGORIES):
            item.add_marker(pytest.mark.unit)


def make_tiny_study(root, extra_yaml: str = ""):
    """A study over tests/fixtures' family chat and its two questions, run in ``root`` (cache included)."""
    import shutil
    from pathlib import Path

    from pmrag.study import Study

    fixtures = Path(__file__).parent / "fixtures"
    (root / "data").mkdir(exist_ok=True)
    shutil.copy(fixtures / "line_json" / "family.json", root / "data" / "family.json")
    shutil.copy(fixtures / "questions" / "family_questions.json", root / "data" / "questions.json")
    (root / "p.yaml").write_text(
        "run: tiny\noutputs_dir: out\ncache_dir: cache\n"
        "dataset: {inputs: [data/family.json], questions: data/questions.json}\n" + extra_yaml
        + ("" if "analysis:" in extra_yaml else "analysis: {aggregate_type: contextual}\n"),   # the fixture's types
        encoding="utf-8",
    )
    return Study.from_params(root / "p.yaml")


def write_file(folder, text: str, name: str = "p.yaml"):
    """``text`` written to ``folder/name`` (UTF-8); returns the path."""
    path = folder / name
    path.write_text(text, encoding="utf-8")
    return path


def params_error(path) -> str:
    """The one-line ParamsError that loading ``path`` raises."""
    import pytest

    from pmrag.core.errors import ParamsError
    from pmrag.study.params import load_params

    with pytest.raises(ParamsError) as info:
        load_params(path)
    message = str(info.value)
    assert "\n" not in message, message
    return message


def invalid_key(error) -> str:
    """The one key a section refused (a pydantic ValidationError): a field's error names it in its location, a
    check across fields (empty location) starts its message with it."""
    [found] = error.errors()
    if found["loc"]:
        return ".".join(map(str, found["loc"]))
    return found["msg"].removeprefix("Value error, ").split()[0]


# ------------------------------------------------------------------------- the OpenAI client path, for real

@pytest.fixture
def clean_env(monkeypatch):
    """No OpenAI or proxy setting of the machine reaches a test of the OpenAI client path (use it with
    ``pytestmark = pytest.mark.usefixtures("clean_env")``)."""
    for name in ("OPENAI_API_KEY", "OPENAI_BASE_URL", "OPENAI_ORG_ID", "OPENAI_PROJECT_ID",
                 "HTTP_PROXY", "HTTPS_PROXY", "ALL_PROXY", "http_proxy", "https_proxy", "all_proxy"):
        monkeypatch.delenv(name, raising=False)


@pytest.fixture
def server():
    """The local fake Responses server (tests/responses_server.py) on 127.0.0.1, stopped after the test."""
    from responses_server import ResponsesServer

    srv = ResponsesServer().start()
    try:
        yield srv
    finally:
        srv.stop()


@pytest.fixture
def engine(tmp_path):
    """A fresh study store."""
    from pmrag.core.store import open_store

    return open_store(tmp_path / "store.sqlite")


def extraction_rows(engine) -> dict[str, dict]:
    """The ``graph_extractions`` rows (every LLM step's provenance) by item id."""
    from sqlalchemy import select

    from pmrag.core.store import graph_extractions

    with engine.connect() as conn:
        return {r["item_id"]: dict(r) for r in conn.execute(select(graph_extractions)).mappings()}


def prompt_sha(path) -> str:
    """The sha256 a provenance row records for a prompt file (its text without trailing whitespace)."""
    import hashlib

    return hashlib.sha256(path.read_text(encoding="utf-8").rstrip().encode("utf-8")).hexdigest()
