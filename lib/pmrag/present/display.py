"""Tables for a notebook column: what a reader needs first, at the width of a laptop's notebook panel.

One helper for every notebook table (:func:`show`): interval triples become one compact ``0.653 [0.567, 0.743]``
cell that never wraps, column names become human headers, long method names are abbreviated with the full name on
hover, detail columns stay in the linked CSV, and a table over ``max_rows`` rows shows its first rows with the rest
folded below.  Everything here is pure (a DataFrame in, a :class:`Table` holding its display frame and HTML out),
so it is tested without a kernel; the HTML is what JupyterLab renders, the plain text (every row, every full name)
is what a console and nbval read.
"""

from __future__ import annotations

import html
import os
import re
from dataclasses import dataclass
from pathlib import Path

import pandas as pd

from pmrag.core.names import InvalidName, parse_method
from pmrag.evaluate.metric_names import is_metric, parse_metric
from pmrag.present.labels import short_label
from pmrag.present.paper import format_ci

PANEL_PX = 840          # a notebook output's width at 1,280 px with JupyterLab's file browser open (848 px measured)
CHAR_PX = 7.0           # one character of a cell in JupyterLab's table font (digits, Latin letters; Chromium)
HEADER_CHAR_PX = 7.8    # one character of a bold header; a header wraps between words, a cell's number never
CELL_PADDING_PX = 20    # a cell's left and right padding and border, and the slack of a header wrapped at its longest word
WRAP_CHARS = 28         # a text cell longer than this (with spaces) wraps at about this width; numbers never do
MAX_ROWS = 20           # longer tables show this many rows and fold the rest
NAME_CHARS = 24         # a method name longer than this is abbreviated (the full name on hover)

# the suffixes that mark an interval's bounds beside its estimate column
_BOUNDS = (("_low", "_high"), (" low", " high"), ("_lo", "_hi"))
# bounds whose estimate has another name: ci_low/ci_high bound a mean or a paired difference, the selection
# table's conditional interval its in-sample value
_ESTIMATES = {"ci": ("mean", "delta"), "conditional": ("in_sample",)}


@dataclass(frozen=True)
class Table:
    """A table ready for a notebook: ``frame`` (display strings, full names) and its ``html``."""

    frame: pd.DataFrame
    html: str
    full: pd.DataFrame | None = None    # every column (the plain text's), when ``frame`` shows fewer

    def _repr_html_(self) -> str:
        return self.html

    def __repr__(self) -> str:
        return (self.frame if self.full is None else self.full).to_string()


def interval_triples(frame: pd.DataFrame) -> dict[str, tuple[str, str, str]]:
    """The interval columns of a frame, as ``{estimate: (estimate, low, high)}``.

    Found by name: any column ``x`` with ``x_low``/``x_high`` (or ``x low``/``x high``, ``x_lo``/``x_hi``) whose
    estimate is ``x``, else ``x_estimate``, else for ``ci`` the ``mean`` or ``delta`` column (keyed by that name)
    and for ``conditional`` the ``in_sample`` column (notebook 09's selection table).
    """
    columns = [c for c in frame.columns if isinstance(c, str)]
    triples = {}
    for column in columns:
        for low, high in _BOUNDS:
            if column.endswith(low) and column.removesuffix(low) + high in columns:
                stem = column.removesuffix(low)
                named = [stem, f"{stem}_estimate", *_ESTIMATES.get(stem, ())]
                estimate = next((name for name in named if name in columns), None)
                if estimate is not None:
                    triples[estimate if stem == "ci" else stem] = (estimate, column, stem + high)
    return triples


def compact_intervals(frame: pd.DataFrame, digits: int = 3) -> pd.DataFrame:
    """Each interval triple (:func:`interval_triples`) as one ``0.653 [0.567, 0.743]`` string column in the
    estimate's place; the bound columns are dropped.  A missing bound leaves the estimate alone (``0.653``)."""
    out = frame.copy()
    for key, (estimate, low, high) in interval_triples(frame).items():
        cells = [_interval(m, lo, hi, digits) for m, lo, hi in zip(frame[estimate], frame[low], frame[high])]
        position = list(out.columns).index(estimate)
        out = out.drop(columns=[estimate, low, high])
        out.insert(position, key, cells)
    return out


def _interval(mean, low, high, digits: int) -> str:
    if pd.isna(mean):
        return ""
    if pd.isna(low) or pd.isna(high):
        return f"{mean:.{digits}f}"
    return format_ci(mean, low, high) if digits == 3 else f"{mean:.{digits}f} [{low:.{digits}f}, {high:.{digits}f}]"


def human_header(column) -> str:
    """A column name as a reader's header: a metric's label (``recall@5`` → ``Recall@5``, ``Δ recall@5`` →
    ``Δ Recall@5``), ``mean`` with an interval → ``mean [95% CI]``, underscores as spaces (``share_hidden`` →
    ``share hidden``).  A tuple (a column MultiIndex) is joined by a space."""
    if isinstance(column, tuple):
        return " ".join(human_header(part) for part in column if str(part))
    text = str(column)
    words = []
    for word in text.split(" "):
        words.append(parse_metric(word).label if is_metric(word) else word.replace("_", " "))
    return " ".join(words)


def method_cell(name, name_chars: int = NAME_CHARS) -> tuple[str, str | None]:
    """A method name for a narrow column: ``(shown, hover)``, the short label (:func:`~pmrag.present.labels.short_label`)
    with the full name on hover when the name is longer than ``name_chars``; anything else unchanged."""
    text = str(name)
    if len(text) <= name_chars:
        return text, None
    try:
        parse_method(text)
    except InvalidName:
        return text, None
    return short_label(text), text


def estimated_width(frame: pd.DataFrame, name_chars: int = NAME_CHARS) -> float:
    """The rendered width of a display frame in pixels, estimated per column from its longest cell (method names
    as shown, :func:`method_cell` with ``name_chars``; prose wrapped at :data:`WRAP_CHARS`) at :data:`CHAR_PX` a
    character, or its header wrapped between words (into three lines at most) at :data:`HEADER_CHAR_PX`,
    whichever is wider, plus :data:`CELL_PADDING_PX`."""
    index = frame.index.to_frame(index=False) if frame.index.name or frame.index.names[0] else pd.DataFrame()
    width = 0.0
    for part in (index, frame):
        for column in part.columns:
            cells = [method_cell(v, name_chars)[0] for v in part[column]]
            longest = max([0, *(min(len(c), WRAP_CHARS) if _wraps(c) else len(c) for c in cells)])
            header = _header(column, name_chars)[0]
            header_chars = max([len(word) for word in header.split(" ")] + [len(header) / 3])
            width += max(longest * CHAR_PX, header_chars * HEADER_CHAR_PX) + CELL_PADDING_PX
    return width


def table_html(frame: pd.DataFrame, csv: str | None = None, max_rows: int = MAX_ROWS, note: str = "",
               name_chars: int = NAME_CHARS, hidden: list[str] | None = None) -> str:
    """The HTML of a display frame: no cell wraps, method names over ``name_chars`` abbreviated (:func:`method_cell`), a named
    index as leading columns, the first ``max_rows`` rows shown and the rest in a ``<details>`` fold, then one line
    linking the CSV (``csv``, relative to the notebook), counting the ``hidden`` columns it holds besides (their names
    on hover, :func:`more_columns`), and ``note``."""
    shown = frame.reset_index() if (frame.index.name or frame.index.names[0]) else frame
    left = [not all(_numeric(_plain(v)) for v in shown[c] if not _missing(v)) for c in shown.columns]
    headers = "".join(_header_html(c, flush, name_chars) for c, flush in zip(shown.columns, left))
    rows = [_row_html(values, left, name_chars) for values in shown.itertuples(index=False)]
    # inline styles: JupyterLab strips <style> from the outputs of a notebook it does not trust
    head = f'<table class="pmrag-table" style="white-space:nowrap"><thead><tr>{headers}</tr></thead>'
    parts = [_STYLE, '<div class="pmrag-table-wrap">', head, "<tbody>", *rows[:max_rows], "</tbody></table>"]
    if len(rows) > max_rows:
        parts += [f"<details><summary>{len(rows) - max_rows} more rows (of {len(rows)})</summary>", head,
                  "<tbody>", *rows[max_rows:], "</tbody></table></details>"]
    footer = [f'full table: <a href="{html.escape(csv)}">{html.escape(Path(csv).name)}</a>'] if csv else []
    if hidden:
        where = "" if csv else " in the plain-text output"
        footer[-1:] = [" ".join([*footer[-1:], more_columns(hidden, where)])]
    footer += [html.escape(note)] if note else []
    if footer:
        parts.append(f'<p class="pmrag-table-note">{" · ".join(footer)}</p>')
    parts.append("</div>")
    return "".join(parts)


def more_columns(hidden: list[str], where: str = "") -> str:
    """``(+3 columns)``, with the columns' names on hover: the short line that says a table holds more than it
    shows, and where (``where``: after the count; the CSV linked before it when empty)."""
    count = f"+{len(hidden)} column{'s' if len(hidden) != 1 else ''}{where}"
    return f'<span title="{html.escape(", ".join(hidden))}">({count})</span>'


def _header(column, name_chars: int = NAME_CHARS) -> tuple[str, str | None]:
    """A header as shown, and its hover: a method name's short label (:func:`method_cell`), else a human header."""
    text, hover = method_cell(column, name_chars) if isinstance(column, str) else (None, None)
    return (text, hover) if hover else (human_header(column), None)


def _header_html(column, flush_left: bool = False, name_chars: int = NAME_CHARS) -> str:
    text, hover = _header(column, name_chars)
    title = f' title="{html.escape(hover)}"' if hover else ""
    style = f' style="white-space:normal{";text-align:left" if flush_left else ""}"'
    return f"<th{title}{style}>{html.escape(text)}</th>"


def _row_html(values, flush_left=None, name_chars: int = NAME_CHARS) -> str:
    cells = []
    for value, left in zip(values, flush_left or [False] * len(values)):
        text, hover = method_cell("" if _missing(value) else _plain(value), name_chars)
        title = f' title="{html.escape(hover)}"' if hover else ""
        styles = (["text-align:left"] if left else []) + (["white-space:normal", f"min-width:{WRAP_CHARS // 2}em"]
                                                          if _wraps(text) else [])
        style = f' style="{";".join(styles)}"' if styles else ""
        shown = text if _wraps(text) else text.replace(" ", "\u00a0")   # no-break spaces: JupyterLab's sanitizer
        cells.append(f"<td{title}{style}>{html.escape(shown)}</td>")           # drops white-space from untrusted HTML
    return "<tr>" + "".join(cells) + "</tr>"


_NUMBER = re.compile(r"^[+\-−]?\d[\d,]*(\.\d+)?%?( \[.*\])?( \*)?$")


def _numeric(text: str) -> bool:
    """A number, a percentage or an interval (``0.653 [0.567, 0.743]``): right-aligned, never wrapped."""
    return bool(_NUMBER.match(text)) or text in ("True", "False", "")


def _wraps(text: str) -> bool:
    """Whether a cell's text wraps: prose longer than :data:`WRAP_CHARS` (never a number or an interval)."""
    return len(text) > WRAP_CHARS and " " in text and not _numeric(text)


def _missing(value) -> bool:
    return not isinstance(value, (list, tuple)) and pd.isna(value)


def _plain(value) -> str:
    return f"{value:.3f}" if isinstance(value, float) else str(value)


_STYLE = ("<style>.pmrag-table-wrap{max-width:100%;overflow-x:auto}"
          ".pmrag-table td{white-space:nowrap}.pmrag-table td,.pmrag-table th{text-align:right;padding:2px 7px}"
          ".pmrag-table td:first-child,.pmrag-table th:first-child{text-align:left}"
          ".pmrag-table-note{font-size:90%;color:#555;margin:2px 0 8px}"
          ".pmrag-table-wrap details summary{cursor:pointer;color:#555}</style>")


def csv_link(path, start=None) -> str:
    """A CSV's path relative to the notebook's folder (``start``, default the working directory), ``/``-separated."""
    return Path(os.path.relpath(Path(path), Path.cwd() if start is None else start)).as_posix()


def fitting_columns(frame: pd.DataFrame, panel_px: float = PANEL_PX, name_chars: int = NAME_CHARS) -> list:
    """The leading columns of a display frame whose estimated width (:func:`estimated_width`, a named index
    included) stays within ``panel_px``; at least the first column."""
    kept = []
    for column in frame.columns:
        if kept and estimated_width(frame[[*kept, column]], name_chars) > panel_px:
            break
        kept.append(column)
    return kept


def show(frame: pd.DataFrame, csv=None, columns: list | None = None, max_rows: int = MAX_ROWS,
         digits: int = 3, note: str = "", fit: bool = True) -> Table:
    """A table for a notebook cell: intervals compacted (:func:`compact_intervals`), floats to ``digits``
    decimals, only ``columns`` when given, and of those (``fit``) the leading ones that fit the panel
    (:func:`fitting_columns`); the others stay in the CSV and the plain text, and the line under the table counts
    them (:func:`more_columns`: their names on hover).  The HTML is :func:`table_html`'s.

    Parameters
    ----------
    frame : the table; a named index is shown as its leading columns.
    csv : the saved CSV (a path; linked relative to the working directory, the notebook's folder), or None.
    columns : the display columns (after compacting), in the order of what a reader needs first; None: all.
    max_rows : rows shown before the rest folds.
    digits : decimals of floats and intervals.
    note : a line said under the table.
    fit : when the table would run past :data:`PANEL_PX`, abbreviate every method name (its full name on hover)
        and then drop the trailing columns that still would.

    Returns
    -------
    Table
    """
    full = compact_intervals(frame, digits)
    full = full.apply(lambda col: col.map(lambda v: f"{v:.{digits}f}" if isinstance(v, float) and not pd.isna(v)
                                           else ("" if _missing(v) else v)))
    if columns is not None:
        missing = [c for c in columns if c not in full.columns]
        if missing:
            raise KeyError(f"show: no column {missing[0]!r} in the table (has {list(map(str, full.columns))})")
    kept = list(full.columns) if columns is None else list(columns)
    name_chars = NAME_CHARS
    if fit and estimated_width(full[kept]) > PANEL_PX:   # every method name short first (hover: the full name),
        name_chars = 0                                   # then the trailing columns left out
        kept = fitting_columns(full[kept], name_chars=name_chars)
    hidden = [human_header(c) for c in full.columns if c not in kept]
    link = None if csv is None else csv_link(csv)
    shown = full[kept]
    return Table(shown, table_html(shown, link, max_rows, note, name_chars, hidden), None if not hidden else full)
