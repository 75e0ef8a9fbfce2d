"""One figure style for every notebook figure, sized for a notebook column, and the check that its text reads.

Every figure function of :mod:`pmrag.present` starts from :func:`column_figure`: seaborn's ``notebook`` context at
one font scale, figures :data:`COLUMN_IN` wide (the notebook panel at 1,280 px with the file browser open shows
them unscaled), legends placed outside the data by the callers.  :func:`text_problems` is what the figure test
asks of each declared figure: no two drawn texts overlap and none leaves the canvas (matplotlib's renderer gives
every text's box, tick labels and legend entries included).
"""

from __future__ import annotations

from unittest import mock

import matplotlib.pyplot as plt
import seaborn as sns
from matplotlib.text import Text

COLUMN_IN = 8.4          # inches: 840 px at the inline backend's 100 dpi: display.PANEL_PX, an output's width
DPI = 100                # the inline backend's
FONT_SCALE = 0.9
RC = {"axes.titlesize": 11, "axes.titleweight": "normal", "legend.fontsize": 9, "legend.title_fontsize": 9,
      "figure.dpi": DPI}


def use_style() -> None:
    """Seaborn's ``notebook`` context and ``whitegrid`` style at :data:`FONT_SCALE`, with :data:`RC` (global
    matplotlib settings: every figure function calls it, so a figure looks the same whoever draws it first)."""
    sns.set_theme(context="notebook", style="whitegrid", font_scale=FONT_SCALE, rc=RC)


def column_figure(height: float, ncols: int = 1, nrows: int = 1, width: float = COLUMN_IN, **kwargs):
    """``plt.subplots`` in the style (:func:`use_style`), :data:`COLUMN_IN` wide and ``height`` inches tall."""
    use_style()
    return plt.subplots(nrows, ncols, figsize=(width, height), **kwargs)


def drawn_texts(fig) -> list[Text]:
    """Every text the figure's renderer draws (titles, labels, tick labels in view, legend entries, annotations),
    non-empty and visible, in drawing order."""
    drawn = []
    draw = Text.draw

    def record(self, renderer):
        draw(self, renderer)
        if self.get_visible() and self.get_text().strip():
            drawn.append(self)

    with mock.patch.object(Text, "draw", record):
        fig.canvas.draw()
    return drawn


def text_problems(fig, tolerance_px: float = 1.0) -> list[str]:
    """What keeps a figure's text from reading: each pair of drawn texts (:func:`drawn_texts`) whose boxes overlap
    by more than ``tolerance_px`` each way, and each text whose box leaves the canvas; ``[]`` when none."""
    renderer = fig.canvas.get_renderer()
    texts = drawn_texts(fig)
    boxes = [t.get_window_extent(renderer) for t in texts]
    canvas = fig.bbox
    problems = []
    for text, box in zip(texts, boxes):
        if (box.x0 < canvas.x0 - tolerance_px or box.y0 < canvas.y0 - tolerance_px
                or box.x1 > canvas.x1 + tolerance_px or box.y1 > canvas.y1 + tolerance_px):
            problems.append(f"leaves the canvas: {text.get_text()!r}")
    for i, (first, a) in enumerate(zip(texts, boxes)):
        for second, b in zip(texts[i + 1:], boxes[i + 1:]):
            width = min(a.x1, b.x1) - max(a.x0, b.x0)
            height = min(a.y1, b.y1) - max(a.y0, b.y0)
            if width > tolerance_px and height > tolerance_px:
                problems.append(f"overlap: {first.get_text()!r} and {second.get_text()!r}")
    return problems
