"""A drawing of a study's stage graph: stages in columns by depth (a stage stands right of everything it reads),
one colour per stage name, an arrow per declared read.  Written as SVG and PNG by ``pmrag graph`` and linked from
the run README."""

from __future__ import annotations

import hashlib
import os
from collections.abc import Sequence
from importlib.metadata import version
from pathlib import Path

from pmrag.core.names import StageKey

GRAPH_FILE = "stage_graph"   # <run>/stage_graph.svg and .png


def depths(nodes: Sequence[StageKey], edges: Sequence[tuple[StageKey, StageKey]]) -> dict[StageKey, int]:
    """Each stage's column: 0 for a stage that reads no other, else one more than the deepest stage it reads
    (``nodes`` in dependency order: every stage after what it reads)."""
    reads: dict[StageKey, list[StageKey]] = {node: [] for node in nodes}
    for upstream, stage in edges:
        reads[stage].append(upstream)
    column: dict[StageKey, int] = {}
    for node in nodes:
        column[node] = 1 + max((column[u] for u in reads[node]), default=-1)
    return column


def drawing_key(nodes: Sequence[StageKey], edges: Sequence[tuple[StageKey, StageKey]], title: str) -> str:
    """What a drawing depends on, hashed: the stages, the reads, the title, this module's code and matplotlib's
    version (written into the SVG's description, so that an unchanged graph is not drawn again)."""
    payload = repr(([str(n) for n in nodes], [(str(a), str(b)) for a, b in edges], title, version("matplotlib")))
    return "pmrag stage graph " + hashlib.sha256(Path(__file__).read_bytes() + payload.encode()).hexdigest()[:20]


def draw_stage_graph(nodes: Sequence[StageKey], edges: Sequence[tuple[StageKey, StageKey]], out: Path,
                     title: str) -> list[Path]:
    """Draw the graph into ``out`` with the suffixes ``.svg`` and ``.png``; returns both paths.  Both files are left
    as they are when they exist and the SVG was drawn from the same :func:`drawing_key` (a rerun of a finished study
    redraws nothing)."""
    key = drawing_key(nodes, edges, title)
    written = [Path(out).with_suffix(suffix) for suffix in (".svg", ".png")]
    if all(path.is_file() for path in written) and key in written[0].read_text(encoding="utf-8", errors="replace"):
        return written
    # a Figure of its own, not pyplot's: no backend is chosen and no global figure kept, so that the study can draw
    # it in a thread beside its notebooks
    from matplotlib import colormaps
    from matplotlib.figure import Figure

    column = depths(nodes, edges)
    rows: dict[int, list[StageKey]] = {}
    for node in nodes:
        rows.setdefault(column[node], []).append(node)
    tallest = max(len(members) for members in rows.values())
    position = {node: (c, (len(members) - 1) / 2 - i) for c, members in rows.items() for i, node in enumerate(members)}
    names = list(dict.fromkeys(node.name for node in nodes))
    palette = colormaps["tab20"]
    colour = {name: palette(i % 20) for i, name in enumerate(names)}
    width, height = 2.6 * len(rows) + 1, 0.32 * tallest + 1.2
    fig = Figure(figsize=(width, height))
    ax = fig.subplots()
    for upstream, stage in edges:
        (x0, y0), (x1, y1) = position[upstream], position[stage]
        ax.annotate("", xy=(x1 - 0.42, y1), xytext=(x0 + 0.42, y0),
                    arrowprops=dict(arrowstyle="-|>", lw=0.5, alpha=0.35, color=colour[upstream.name],
                                    shrinkA=0, shrinkB=0))
    for node, (x, y) in position.items():
        ax.text(x, y, str(node), ha="center", va="center", fontsize=7,
                bbox=dict(boxstyle="round,pad=0.25", fc=colour[node.name], ec="none", alpha=0.55))
    ax.set_xlim(-0.6, len(rows) - 0.4)
    ax.set_ylim(-tallest / 2 - 0.2, tallest / 2 + 0.2)
    ax.axis("off")
    ax.set_title(title, fontsize=9, loc="left")
    fig.tight_layout()
    # the SVG, which holds the key, is written last, and each file is renamed into place once whole: a drawing
    # stopped part way leaves no file that a later run would take as drawn
    for path in reversed(written):
        path.parent.mkdir(parents=True, exist_ok=True)
        partial = path.with_name(path.name + ".partial")
        fig.savefig(partial, format=path.suffix[1:], dpi=110,
                    metadata={"Date": None, "Description": key} if path.suffix == ".svg" else {"Software": None})
        os.replace(partial, path)
    return written
