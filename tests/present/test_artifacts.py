"""Declared tables and figures (pmrag.present.artifacts): each is saved by exactly its notebook, through its spec."""

import json
import re
from collections import defaultdict
from pathlib import Path

import pandas as pd
import pytest

from conftest import make_tiny_study
from pmrag.present.artifacts import FIGURES, TABLES, F, FigureSpec, T, TableSpec, check_columns

REPO = Path(__file__).resolve().parents[2]
NOTEBOOKS = sorted((REPO / "notebooks").glob("[0-9][0-9]_*.ipynb"))
SAVE_CALL = re.compile(r"\bsave_(table|figure)\(\s*([^,)]*)")
SPEC_ARGUMENT = {"table": re.compile(r"T\.(\w+)"), "figure": re.compile(r"F\.(\w+)")}


def code_of(notebook: Path) -> str:
    cells = json.loads(notebook.read_text(encoding="utf-8"))["cells"]
    return "\n".join("".join(cell["source"]) for cell in cells if cell["cell_type"] == "code")


def save_calls() -> list[tuple[str, str, str]]:
    """(notebook stem, table|figure, first argument) of every save call in the notebooks' code cells."""
    return [(notebook.stem, kind, argument.strip())
            for notebook in NOTEBOOKS for kind, argument in SAVE_CALL.findall(code_of(notebook))]


def saved_by() -> dict[tuple[str, str], list[str]]:
    writers = defaultdict(list)
    for stem, kind, argument in save_calls():
        match = SPEC_ARGUMENT[kind].fullmatch(argument)
        if match:
            writers[(kind, match.group(1))].append(stem)
    return writers


def test_the_notebooks_save_something():
    assert len(NOTEBOOKS) == 12
    calls = save_calls()
    assert {stem for stem, _, _ in calls} == {notebook.stem for notebook in NOTEBOOKS}
    assert len(calls) >= len(TABLES) + len(FIGURES)


def test_every_save_call_passes_a_declared_spec_never_a_string():
    for stem, kind, argument in save_calls():
        assert not argument.startswith(("'", '"', "f'", 'f"')), f"{stem}: save_{kind}({argument}, ...) with a string"
        match = SPEC_ARGUMENT[kind].fullmatch(argument)
        assert match, f"{stem}: save_{kind}({argument}, ...) does not name a declared {kind} (T.<name> / F.<name>)"
        declared = TABLES if kind == "table" else FIGURES
        assert match.group(1) in declared, f"{stem}: save_{kind} of undeclared {match.group(1)!r}"


def test_every_table_is_saved_once_by_its_notebook():
    writers = saved_by()
    for name, spec in TABLES.items():
        assert writers.get(("table", name)) == [spec.notebook], (name, writers.get(("table", name)))


def test_every_figure_is_saved_once_by_its_notebook():
    writers = saved_by()
    for name, spec in FIGURES.items():
        assert writers.get(("figure", name)) == [spec.notebook], (name, writers.get(("figure", name)))


def test_committed_notebooks_carry_the_kernel_name_jupyterlab_writes():
    """Opening and saving a notebook in JupyterLab must not change it: its kernelspec is JupyterLab's own."""
    for notebook in NOTEBOOKS:
        spec = json.loads(notebook.read_text(encoding="utf-8"))["metadata"]["kernelspec"]
        assert spec == {"display_name": "Python 3 (ipykernel)", "language": "python", "name": "python3"}, notebook.name


def test_committed_notebooks_record_nothing_on_stderr():
    """nbval compares every output: a warning a notebook wrote while it was recorded (e.g. "… was not sealed by this
    user's pmrag" after a run with another stage key) is missing from a clean run, which then fails."""
    for notebook in NOTEBOOKS:
        cells = json.loads(notebook.read_text(encoding="utf-8"))["cells"]
        stderr = [i for i, cell in enumerate(cells) for output in cell.get("outputs", []) if output.get("name") == "stderr"]
        assert stderr == [], (notebook.name, stderr)


def test_declared_notebooks_exist():
    stems = {notebook.stem for notebook in NOTEBOOKS}
    for spec in [*TABLES.values(), *FIGURES.values()]:
        assert spec.notebook in stems, spec


def test_attribute_names_are_the_spec_names():
    tables = {attr: value for attr, value in vars(T).items() if isinstance(value, TableSpec)}
    figures = {attr: value for attr, value in vars(F).items() if isinstance(value, FigureSpec)}
    assert tables and figures
    for attr, spec in [*tables.items(), *figures.items()]:
        assert attr == spec.name, (attr, spec.name)
    assert set(tables) == set(TABLES) and set(figures) == set(FIGURES)
    assert len({spec.file for spec in [*TABLES.values(), *FIGURES.values()]}) == len(TABLES) + len(FIGURES)


def test_check_columns_names_the_table():
    check_columns(T.table1_dataset, ["Item", "Value"])
    check_columns(T.summary_provenance, ["anything", "at", "all"])   # no fixed layout
    with pytest.raises(ValueError, match="table1_dataset") as info:
        check_columns(T.table1_dataset, ["Item", "Count"])
    assert "Count" in str(info.value) and "Value" in str(info.value)
    with pytest.raises(ValueError, match="table8_failure_labels"):
        check_columns(T.table8_failure_labels, ["Count", "Failure type", "Percentage"])   # order matters


@pytest.mark.integration
def test_study_save_table_takes_only_declared_specs_with_their_columns(tmp_path):
    study = make_tiny_study(tmp_path)
    frame = pd.DataFrame({"Item": ["messages"], "Value": [3]})
    with pytest.raises(TypeError, match="declared table"):
        study.save_table("table1_dataset", frame)
    with pytest.raises(ValueError, match="table1_dataset"):
        study.save_table(T.table1_dataset, frame.rename(columns={"Value": "Count"}))
    assert not (study.run_dir / T.table1_dataset.file).exists()
    with pytest.raises(TypeError, match="declared figure"):
        study.save_figure("chunk_lengths", None)
    written = study.save_table(T.table1_dataset, frame)
    assert written == "tables/table1_dataset.csv"
    stand_in = study.params.summarizer.label()
    assert study.params.summarizer.backend == "extractive"
    assert pd.read_csv(study.run_dir / written).to_dict("records") == [
        {"Item": "messages", "Value": 3, "summarizer": stand_in}]   # made with the stand-in: every row says so


@pytest.mark.integration
def test_a_table_made_with_an_llm_has_no_stand_in_column(tmp_path):
    study = make_tiny_study(tmp_path)
    study.params = study.params.model_copy(update={
        "summarizer": study.params.summarizer.model_copy(update={"backend": "openai"})})
    assert study.summarizer_note() is None
    written = study.save_table(T.table1_dataset, pd.DataFrame({"Item": ["messages"], "Value": [3]}))
    assert list(pd.read_csv(study.run_dir / written).columns) == ["Item", "Value"]


def test_a_csv_holds_floats_at_its_stated_precision_and_p_values_at_significant_digits():
    from pmrag.present.artifacts import csv_rounded, is_p_value

    frame = pd.DataFrame({"retriever": ["a", "b"], "questions": [100, 34], "mean": [0.6532719, -0.00001],
                          "p_holm": [0.000123456, 0.04999999], "excludes_zero": [True, False],
                          "Value": ["1,183", 0.123456789], "ci_low": [float("nan"), 1234.56789]})
    rounded = csv_rounded(frame)
    assert rounded["mean"].tolist() == [0.6533, 0.0] and str(rounded["mean"].iloc[1]) == "0.0"   # never "-0.0"
    assert rounded["p_holm"].tolist() == [0.0001235, 0.05]
    assert rounded["Value"].tolist() == ["1,183", 0.1235] and rounded["ci_low"].iloc[1] == 1234.5679
    assert pd.isna(rounded["ci_low"].iloc[0])
    assert rounded[["retriever", "questions", "excludes_zero"]].equals(frame[["retriever", "questions", "excludes_zero"]])
    assert frame["mean"].iloc[0] == 0.6532719                                    # the frame itself is left alone
    nullable = csv_rounded(pd.DataFrame({"x": pd.array([0.123456, None], dtype="Float64")}))["x"]
    assert nullable.iloc[0] == 0.1235 and pd.isna(nullable.iloc[1])
    assert [is_p_value(c) for c in ("p", "p_bh", "p-value", "power", "pooled", "share")] == [True] * 3 + [False] * 3


def test_write_csv_writes_the_rounded_table_and_its_full_precision_twin(tmp_path):
    from pmrag.present.artifacts import full_precision_path, write_csv

    frame = pd.DataFrame({"retriever": ["a"], "mean": [1 / 3]})
    path = write_csv(tmp_path / "tables" / "x.csv", frame)
    assert path.read_text(encoding="utf-8") == "retriever,mean\na,0.3333\n"
    assert full_precision_path(path) == tmp_path / "tables" / "full" / "x.csv"
    assert pd.read_csv(full_precision_path(path))["mean"].iloc[0] == 1 / 3          # round-trips exactly
    assert T.bootstrap_cis.full_file == "tables/full/bootstrap_cis.csv"


FIGURE_CELL = """
import matplotlib.pyplot as plt
from matplotlib.figure import Figure
from pmrag.present.artifacts import FigureSpec, write_figure

draws = []
drawn = Figure.draw
def counted(self, renderer):
    draws.append(self)
    return drawn(self, renderer)
Figure.draw = counted
fig, ax = plt.subplots(figsize=(4, 3))
ax.plot([0, 1], [1, 0])
ax.set_title("one line")
write_figure(RUN_DIR, FigureSpec("probe", "00_probe", "a probe"), fig)
"""


@pytest.mark.integration
def test_a_figure_written_in_a_notebook_is_the_cells_output_and_is_drawn_once(tmp_path):
    """In a kernel (inline backend) the written PNG is what the cell shows, at the inline size (inches × the
    figure's dpi), and the backend does not draw the figure again when the cell ends."""
    import base64

    import nbformat

    from pmrag.study.notebooks import execute_notebook

    nb = nbformat.v4.new_notebook()
    parameters = nbformat.v4.new_code_cell('params_path = ""')
    parameters.metadata["tags"] = ["parameters"]
    nb.cells = [parameters, nbformat.v4.new_code_cell(f"RUN_DIR = {str(tmp_path)!r}\n" + FIGURE_CELL),
                nbformat.v4.new_code_cell("print(len(draws), plt.get_fignums())")]
    nb.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3", "language": "python"}
    nbformat.write(nb, tmp_path / "00_probe.ipynb")
    result = execute_notebook(tmp_path / "00_probe.ipynb", tmp_path / "executed.ipynb", tmp_path / "p.yaml")
    assert "error" not in result, result
    cells = [c for c in nbformat.read(tmp_path / "executed.ipynb", as_version=4).cells
             if c.cell_type == "code" and not c.metadata.get("tags")]   # not the parameters, nor papermill's
    (shown,) = cells[0].outputs
    assert shown.output_type == "display_data"
    assert base64.b64decode(shown.data["image/png"]) == (tmp_path / "figures" / "probe.png").read_bytes()
    assert shown.data["text/plain"] == "<Figure size 400x300 with 1 Axes>"
    assert shown.metadata == {"image/png": {"width": 400, "height": 300}}
    assert [o.text for o in cells[1].outputs] == ["1 []\n"]     # drawn once (the file), and closed


def test_a_figure_written_outside_a_kernel_is_left_open_and_not_shown(tmp_path, capsys):
    import matplotlib.pyplot as plt

    from pmrag.present.artifacts import SAVE_DPI, write_figure

    fig, ax = plt.subplots(figsize=(4, 3))
    try:
        ax.plot([0, 1], [1, 0])
        assert write_figure(tmp_path, FigureSpec("probe", "00_probe", "a probe"), fig) == "figures/probe.png"
        assert plt.fignum_exists(fig.number)
        assert capsys.readouterr().out == ""
        assert (tmp_path / "figures" / "probe.png").read_bytes()[16:24] == (
            (4 * SAVE_DPI).to_bytes(4, "big") + (3 * SAVE_DPI).to_bytes(4, "big"))   # the PNG's IHDR: 480 × 360
    finally:
        plt.close(fig)
