"""The stage graph's drawing (pmrag.present.stage_graph): columns by depth, and no redraw of an unchanged graph."""

from pmrag.core.names import StageKey
from pmrag.present.stage_graph import depths, draw_stage_graph, drawing_key

NODES = [StageKey("ingest"), StageKey("chunks"), StageKey("vectors", "summary")]
EDGES = [(NODES[0], NODES[1]), (NODES[1], NODES[2])]
TITLE = "run t: 3 stages, 2 reads"


def test_a_stage_stands_one_column_right_of_the_deepest_stage_it_reads():
    assert depths(NODES, EDGES + [(NODES[0], NODES[2])]) == {NODES[0]: 0, NODES[1]: 1, NODES[2]: 2}


def test_an_unchanged_graph_is_not_drawn_again_and_a_changed_or_missing_one_is(tmp_path):
    svg, png = draw_stage_graph(NODES, EDGES, tmp_path / "g", TITLE)
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert drawing_key(NODES, EDGES, TITLE) in svg.read_text(encoding="utf-8")
    png.write_bytes(b"left alone")
    assert draw_stage_graph(NODES, EDGES, tmp_path / "g", TITLE) == [svg, png]
    assert png.read_bytes() == b"left alone"                                   # same stages, reads and title
    draw_stage_graph(NODES, EDGES[:1], tmp_path / "g", TITLE)
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"                          # a read less: drawn again
    png.write_bytes(b"left alone")
    draw_stage_graph(NODES, EDGES[:1], tmp_path / "g", "run t: 3 stages, 1 read")
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"                          # another title
    png.unlink()
    draw_stage_graph(NODES, EDGES[:1], tmp_path / "g", "run t: 3 stages, 1 read")
    assert png.is_file()                                                      # a missing file
    assert drawing_key(NODES, EDGES, TITLE) != drawing_key(NODES, EDGES[:1], TITLE)


def test_a_drawing_stopped_part_way_leaves_no_file_a_later_run_takes_as_drawn(tmp_path, monkeypatch):
    """The study draws its graph in a thread beside its last notebooks, which a stopped study does not wait for:
    each file is renamed into place once whole, the SVG (which holds the key) last."""
    from matplotlib.figure import Figure

    real_savefig = Figure.savefig

    def stopped_at_the_svg(self, fname, *args, **kwargs):
        if kwargs.get("format") == "svg":
            with open(fname, "w", encoding="utf-8") as partial:
                partial.write(f"<svg><desc>{drawing_key(NODES, EDGES, TITLE)}</desc>")   # the key, no figure yet
            raise KeyboardInterrupt
        return real_savefig(self, fname, *args, **kwargs)

    monkeypatch.setattr(Figure, "savefig", stopped_at_the_svg)
    try:
        draw_stage_graph(NODES, EDGES, tmp_path / "g", TITLE)
    except KeyboardInterrupt:
        pass
    assert not (tmp_path / "g.svg").exists() and (tmp_path / "g.png").is_file()
    monkeypatch.setattr(Figure, "savefig", real_savefig)
    svg, png = draw_stage_graph(NODES, EDGES, tmp_path / "g", TITLE)   # drawn, not taken as already drawn
    assert svg.read_text(encoding="utf-8").rstrip().endswith("</svg>")
