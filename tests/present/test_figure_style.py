"""The figure style and the text check every declared figure must pass."""

import matplotlib

matplotlib.use("Agg")

import matplotlib.pyplot as plt  # noqa: E402

from pmrag.present.display import PANEL_PX  # noqa: E402
from pmrag.present.figure_style import COLUMN_IN, DPI, column_figure, drawn_texts, text_problems  # noqa: E402


def test_a_column_figure_is_as_wide_as_a_notebook_column():
    fig, ax = column_figure(3)
    assert tuple(fig.get_size_inches()) == (COLUMN_IN, 3)
    plt.close(fig)
    # shown at its inches × the inline dpi (the saved PNG is shown at that size, untrimmed), it fits the output
    assert COLUMN_IN * DPI <= PANEL_PX


def test_a_clean_figure_has_no_text_problem_and_its_texts_include_ticks_and_legend():
    fig, ax = column_figure(3)
    ax.plot([0, 1], [0, 1], label="a line")
    ax.set(title="title", xlabel="x", ylabel="y")
    ax.legend(loc="upper left", bbox_to_anchor=(1.01, 1))
    fig.tight_layout()
    texts = [t.get_text() for t in drawn_texts(fig)]
    assert {"title", "x", "y", "a line"} <= set(texts) and any(t.replace(".", "").isdigit() for t in texts)
    assert text_problems(fig) == []
    plt.close(fig)


def test_overlapping_labels_and_text_off_the_canvas_are_reported():
    fig, ax = column_figure(3)
    ax.bar(range(20), range(20))
    ax.set_xticks(range(20), [f"a long retriever name {i}" for i in range(20)])
    ax.text(1.5, 0.5, "far right", transform=ax.transAxes)
    problems = text_problems(fig)
    assert any(p.startswith("overlap: 'a long retriever name 0' and 'a long retriever name 1'") for p in problems)
    assert "leaves the canvas: 'far right'" in problems
    plt.close(fig)
