"""Every executed notebook, as committed (the numbered ones and the cohort's), read in a real JupyterLab at 1,280 × 900 with the file browser open.

One JupyterLab serves copies of the executed notebooks (outputs kept; nothing is run).  For each notebook the
test fails on an output wider than the notebook panel (an output area that scrolls sideways, or anything in it
reaching past the panel's right edge), on a figure shown narrower than it was drawn (shrunk to fit: narrower than
the width its output declares, a PNG drawn at a higher dpi than it is shown at, else than its pixels), and on a
widget's repr saved as text (``VBox(children=…``) where a hint belongs.  Notebooks render every cell
(``windowingMode: none``), and each notebook's kernel is shut down once it is read.  A screenshot of each notebook
at its first table goes to ``outputs/browser/``.
"""

from __future__ import annotations

import re
import shutil
import time

import pytest

from tests.browser.conftest import REPO

pytestmark = pytest.mark.browser

# every executed notebook, by the name its copy is served under: the numbered ones, then the cohort's
SOURCES = {p.name: p for p in sorted((REPO / "notebooks").glob("[0-9][0-9]_*.ipynb"))} | {
    f"cohort_{p.name}": p for p in sorted((REPO / "notebooks" / "cohort").glob("[0-9][0-9]_*.ipynb"))}
NOTEBOOKS = list(SOURCES)
LOAD_MS = 60_000
WIDGET_REPR = re.compile(r"^\s*(VBox|HBox|Box|Tab|Accordion|GridBox)\(children=", re.MULTILINE)

# what overflows, measured in the page: every output area against the notebook panel's right edge
MEASURE = """() => {
  const panel = document.querySelector('.jp-NotebookPanel .jp-WindowedPanel-outer')
             || document.querySelector('.jp-NotebookPanel .jp-Notebook');
  const right = panel.getBoundingClientRect().right;
  const wide = [], shrunk = [], reprs = [];
  document.querySelectorAll('.jp-NotebookPanel .jp-OutputArea-output').forEach((out, i) => {
    const widest = Math.max(...[...out.querySelectorAll('table, img, pre')].map(e => e.getBoundingClientRect().right), 0);
    if (out.scrollWidth > out.clientWidth + 1 || widest > right + 1)
      wide.push(`${i}: ${out.scrollWidth}px in ${out.clientWidth}px ${out.innerText.slice(0, 60)}`);
    out.querySelectorAll('img').forEach(img => {
      const drawn = img.hasAttribute('width') ? Number(img.getAttribute('width')) : img.naturalWidth;
      if (drawn > img.clientWidth + 1) shrunk.push(`${i}: ${drawn}px shown at ${img.clientWidth}px`);
    });
    reprs.push(out.innerText);
  });
  return {panel: panel.clientWidth, wide, shrunk, texts: reprs};
}"""


@pytest.fixture(scope="module")
def executed_lab(demo_study, lab_server):
    """The lab serving copies of the executed notebooks in their own folder (every cell rendered: conftest)."""
    view = lab_server.within("executed")
    for name, source in SOURCES.items():
        shutil.copy(source, view.files / name)
    return view


def shut_kernels(lab) -> None:
    for session in lab.api("/api/sessions") or []:
        lab.api(f"/api/sessions/{session['id']}", method="DELETE")


def open_notebook(page, lab, name: str) -> None:
    """Open ``name`` in the lab already loaded in ``page`` (the app's own command, no page reload), as the only
    document, and wait until its outputs and images are in."""
    page.evaluate("async () => { await window.jupyterapp.commands.execute('application:close-all'); }")
    page.evaluate("async path => { await window.jupyterapp.commands.execute('docmanager:open', {path}); }",
                  lab.path(name))
    page.wait_for_selector(".jp-NotebookPanel .jp-OutputArea-output", timeout=LOAD_MS)
    page.wait_for_function("() => [...document.querySelectorAll('.jp-NotebookPanel img')].every(i => i.complete)",
                           timeout=LOAD_MS)
    time.sleep(0.3)    # layout after the last image


def test_every_executed_notebook_fits_the_panel_and_shows_no_widget_repr(executed_lab, browser, screenshots):
    page = browser.new_page()
    problems = {}
    try:
        page.goto(executed_lab.page_url(NOTEBOOKS[0]))
        page.wait_for_selector(".jp-NotebookPanel .jp-OutputArea-output", timeout=LOAD_MS)
        for name in NOTEBOOKS:
            open_notebook(page, executed_lab, name)
            seen = page.evaluate(MEASURE)
            tables = page.locator(".jp-NotebookPanel .jp-OutputArea-output table:visible")
            if tables.count():
                tables.first.evaluate("t => t.scrollIntoView({block: 'start'})")
            page.screenshot(path=screenshots / f"notebook_{name.removesuffix('.ipynb')}.png")
            reprs = [text[:80] for text in seen["texts"] if WIDGET_REPR.search(text)]
            found = seen["wide"] + seen["shrunk"] + [f"widget repr: {r}" for r in reprs]
            if found:
                problems[name] = (seen["panel"], found)
            shut_kernels(executed_lab)
    finally:
        page.close()
    assert problems == {}
