"""The grading widget in a real JupyterLab, graded with real key presses in headless Chromium at 1,366 × 768.

A small store with a pool is built here (tests/conftest.py ``make_grading_store``: three questions, 4 + 3 + 2
pooled chunks, the pool table written directly) and a notebook of one cell opens the widget on it.  Through the
page, as a person would: the annotator id is typed and "start grading" pressed; the key pad is clicked and
``2 1 0 u 1`` pressed (grade, grade, grade, undo, grade); a note is typed in the note box — its letters (``p``,
``u``, ``n``, ``2``) must not reach the pad; ``2`` grades the last candidate with the note and moves to the next
question, where ``0`` grades one more.  The notebook's cell must still be a code cell (JupyterLab's own
shortcut ``1`` would have made it a heading).  Then the page is reloaded and the kernel restarted, so nothing
of the session survives but the store: the grades are read back from the store file and the widget, started
again as the same annotator, resumes at the first ungraded candidate of the first unfinished question.
Screenshots go to ``outputs/browser/grading_*.png``.
"""

from __future__ import annotations

import json
import re

import pytest

from conftest import GRADING_POOL, make_grading_store

pytestmark = pytest.mark.browser

NOTEBOOK = "grading.ipynb"
LAPTOP = {"width": 1366, "height": 768}
KERNEL_IDLE = re.compile(r"\| Idle$")
TRACEBACK = re.compile(r"-{40,}\s+\w*(Error|Exception|Interrupt)\b")
LOAD_MS = 90_000
RUN_MS = 120_000
VIEW_MS = 30_000
ANNOTATOR = "ann1"
NOTE = "punt 2 on court"          # p, u, n and 2 are grading keys: typed in the note box they must not grade


def grading_notebook(folder, store_path) -> None:
    """A notebook of one code cell that displays a :class:`GradingWidget` on ``store_path``'s pool."""
    source = (f"from pmrag.present.grading import GradingWidget\n"
              f"grader = GradingWidget({json.dumps(str(store_path))}, {json.dumps(GRADING_POOL)})\ngrader")
    notebook = {"cells": [{"cell_type": "code", "execution_count": None, "id": "grader", "metadata": {},
                           "outputs": [], "source": source}],
                "metadata": {"kernelspec": {"display_name": "Python 3", "language": "python", "name": "python3"}},
                "nbformat": 4, "nbformat_minor": 5}
    (folder / NOTEBOOK).write_text(json.dumps(notebook, indent=1), encoding="utf-8")


@pytest.fixture(scope="module")
def grading_lab(lab_server, tmp_path_factory):
    """The lab serving the grading notebook over a fresh store, in its own folder; ``(lab, store path)``."""
    view = lab_server.within("grading")
    store_path = tmp_path_factory.mktemp("grading-store") / "store.sqlite"
    engine, _ = make_grading_store(store_path)
    engine.dispose()
    grading_notebook(view.files, store_path)
    return view, store_path


class GradingPage:
    """The grading widget's controls and views on a lab page."""

    def __init__(self, page):
        self.page = page
        self.root = page.locator(".pmrag-grading")

    @property
    def header(self):
        return self.root.locator(".pmrag-grading-question")

    @property
    def candidate(self):
        return self.root.locator(".pmrag-grading-candidate")

    @property
    def status(self):
        return self.root.locator(".pmrag-grading-status")

    @property
    def pad(self):
        return self.root.locator(".pmrag-grading-keys-pad")

    @property
    def note(self):
        return self.root.locator("textarea")

    def start(self, annotator: str) -> None:
        box = self.root.get_by_placeholder("your annotator id")
        box.click()
        box.fill(annotator)
        self.root.get_by_role("button", name="start grading").click()

    def keys(self, keys: str) -> None:
        """Click the key pad, then press each key on the keyboard."""
        self.pad.click()
        for key in keys:
            self.page.keyboard.press(key)


def run_notebook(page, restart: bool = False) -> GradingPage:
    """Run the notebook's cell from the menu (after restarting the kernel when ``restart``); the widget shown."""
    from playwright.sync_api import expect

    kernel = page.get_by_title(f"Change kernel for {NOTEBOOK}")
    expect(kernel).to_have_text(KERNEL_IDLE, timeout=LOAD_MS)
    if restart:
        page.locator("#jp-MainMenu .lm-MenuBar-itemLabel", has_text=re.compile(r"^Kernel$")).click()
        page.locator(".lm-Menu-itemLabel", has_text=re.compile(r"^Restart Kernel and Run All Cells")).click()
        page.locator(".jp-Dialog-button.jp-mod-accept").click()
    else:
        page.locator("#jp-MainMenu .lm-MenuBar-itemLabel", has_text=re.compile(r"^Run$")).click()
        page.locator(".lm-Menu-itemLabel", has_text=re.compile(r"^Run All Cells$")).click()
    view = GradingPage(page)
    errors = page.locator(".jp-OutputArea-output[data-mime-type='application/vnd.jupyter.stderr']",
                          has_text=TRACEBACK)
    expect(view.root.or_(errors.first)).to_be_visible(timeout=RUN_MS)
    assert errors.count() == 0, f"the grading cell raised:\n{errors.first.inner_text()[-2000:]}"
    expect(kernel).to_have_text(KERNEL_IDLE, timeout=RUN_MS)
    return view


def stored_grades(store_path) -> dict[tuple[str, int], tuple[int, str | None]]:
    """``{(question, pool position): (relevance, note)}`` of the annotator's grades in the store file."""
    from pmrag.annotate.judgments import annotator_grades
    from pmrag.core.store import open_store, read_table

    engine = open_store(store_path)
    try:
        grades = annotator_grades(engine, ANNOTATOR)
        position = {(r.question_id, r.chunk_id): int(r.position) for r in read_table(engine, "pool").itertuples()}
    finally:
        engine.dispose()
    return {(g.question_id, position[g.question_id, g.chunk_id]): (int(g.relevance),
                                                                  None if isinstance(g.note, float) else g.note)
            for g in grades.itertuples()}   # a missing note reads back as NaN (pandas' missing string)


def test_grade_with_the_keyboard_reload_and_resume(grading_lab, browser, screenshots):
    from playwright.sync_api import expect

    lab, store_path = grading_lab
    page = browser.new_page()
    page.set_viewport_size(LAPTOP)
    page.goto(lab.page_url(NOTEBOOK))
    view = run_notebook(page)
    expect(view.status).to_contain_text("Choose your annotator id", timeout=VIEW_MS)
    view.start(ANNOTATOR)
    expect(view.status).to_contain_text(f"Grading as {ANNOTATOR}: resumed at question q1, candidate 1.",
                                        timeout=VIEW_MS)
    expect(view.header).to_contain_text("question 1 of 3: q1")
    expect(view.candidate.locator("h4.candidate-number")).to_contain_text("candidate 1 of 4")
    expect(view.pad).to_be_focused(timeout=VIEW_MS)        # started: the pad takes the keys at once
    page.screenshot(path=screenshots / "grading_01_started.png")

    # 2, 1, 0 grade the first three candidates; u takes the 0 back; 1 grades it again and moves to the last
    view.keys("210")
    expect(view.candidate.locator("h4.candidate-number")).to_contain_text("candidate 4 of 4", timeout=VIEW_MS)
    view.keys("u")
    expect(view.status).to_contain_text("Undone: candidate 3 is ungraded again.", timeout=VIEW_MS)
    expect(view.candidate.locator("h4.candidate-number")).to_contain_text("candidate 3 of 4 · not graded")
    view.keys("1")
    expect(view.candidate.locator("h4.candidate-number")).to_contain_text("candidate 4 of 4", timeout=VIEW_MS)
    expect(view.header).to_contain_text("this question: 3 of 4 graded")
    page.screenshot(path=screenshots / "grading_02_graded_three.png")

    # the neighbouring messages on demand, and the hint-matched line highlighted (candidate 3 holds it)
    view.keys("p")
    expect(view.candidate.locator("tr.matched mark")).to_have_text("tennis court", timeout=VIEW_MS)
    view.root.get_by_role("button", name="neighbouring messages").click()
    expect(view.candidate.locator("tr.neighbour").first).to_be_visible(timeout=VIEW_MS)
    view.candidate.evaluate("e => e.scrollIntoView({block: 'start'})")
    page.screenshot(path=screenshots / "grading_03_neighbours.png")
    view.root.get_by_role("button", name="neighbouring messages").click()
    expect(view.candidate.locator("tr.neighbour")).to_have_count(0, timeout=VIEW_MS)
    view.keys("n")
    expect(view.candidate.locator("h4.candidate-number")).to_contain_text("candidate 4 of 4", timeout=VIEW_MS)

    # a note typed in its box: none of its letters grade or move; 2 on the pad grades with it, then q2
    view.note.click()
    view.page.keyboard.type(NOTE)
    expect(view.candidate.locator("h4.candidate-number")).to_contain_text("candidate 4 of 4 · not graded")
    view.keys("2")
    expect(view.header).to_contain_text("question 2 of 3: q2", timeout=VIEW_MS)
    view.keys("0")
    expect(view.candidate.locator("h4.candidate-number")).to_contain_text("candidate 2 of 3", timeout=VIEW_MS)
    expect(view.header).to_contain_text("overall: 1 of 3 questions finished, 5 of 9 candidates graded")
    assert page.locator(".jp-Notebook .jp-MarkdownCell").count() == 0, "a key reached JupyterLab's shortcuts"
    assert page.locator(".jp-Notebook .jp-CodeCell").count() == 1
    widths = view.root.evaluate("e => [e.scrollWidth, e.clientWidth]")
    assert widths[0] <= widths[1], f"the grading widget scrolls sideways at 1,366 px: {widths}"
    view.header.evaluate("e => e.scrollIntoView({block: 'start'})")
    page.screenshot(path=screenshots / "grading_04_next_question.png")

    expected = {("q1", 0): (2, None), ("q1", 1): (1, None), ("q1", 2): (1, None), ("q1", 3): (2, NOTE),
                ("q2", 0): (0, None)}
    assert stored_grades(store_path) == expected

    # reload the page and restart the kernel: only the store remembers; the widget resumes at q2, candidate 2
    page.reload()
    view = run_notebook(page, restart=True)
    view.start(ANNOTATOR)
    expect(view.status).to_contain_text(f"Grading as {ANNOTATOR}: resumed at question q2, candidate 2.",
                                        timeout=VIEW_MS)
    expect(view.header).to_contain_text("question 2 of 3: q2")
    expect(view.header).to_contain_text("this question: 1 of 3 graded")
    expect(view.candidate.locator("h4.candidate-number")).to_contain_text("candidate 2 of 3 · not graded")
    assert stored_grades(store_path) == expected
    view.header.evaluate("e => e.scrollIntoView({block: 'start'})")
    page.screenshot(path=screenshots / "grading_05_resumed.png")
    page.close()
