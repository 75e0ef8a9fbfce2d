"""The failure inspector of notebook 06 in a real JupyterLab, driven in headless Chromium at 1,280 × 900.

The notebook is run with the menu (Run → Run All Cells), as a person would; then each control is used through
the page (a dropdown's option, a slider's handle with the arrow keys, a slider's readout typed into) and the
views are read back from the page, never from Python.  What each step checks:

* type → every offered question has that type, the status line counts them, the header shows the type;
* question → the header shows the chosen ID, the gold view has one rank row per retriever and a gold chunk;
* retriever → the Top-k caption names it; k → the Top-k and fused views have k rows ranked 1..k;
* pairing → the fused caption names it at the β the slider now shows; β → the fused caption shows the typed
  β, and at β = 1 the fused list's best score is 1 (the top BM25 chunk's normalised score, eq. 14–15).

At 1,280 px, in JupyterLab's default layout (file browser open, so the notebook is about 950 px wide), no
inspector view may scroll sideways (``scrollWidth ≤ clientWidth`` of the root and of every view) for the
question with the most gold chunks at k = 20, the widest state.  Screenshots go to ``outputs/browser/``.
"""

from __future__ import annotations

import json
import re

import pytest

pytestmark = pytest.mark.browser

NOTEBOOK = "06_failure_analysis.ipynb"
KERNEL_IDLE = re.compile(r"\| Idle$")
# A cell's exception as JupyterLab shows it (a stderr output): IPython's rule of dashes, then the exception name.
TRACEBACK = re.compile(r"-{40,}\s+\w*(Error|Exception|Interrupt)\b")
LOAD_MS = 90_000        # the lab page and its kernel
RUN_ALL_MS = 180_000    # every cell of notebook 06 on cached stages (about 20 s on two cores)
VIEW_MS = 30_000        # one control's round trip through the kernel
MAX_K = 20              # the k slider's maximum (pmrag.present.inspector.MAX_K)
VIEWS = {"root": "pmrag-inspector", "header": "pmrag-inspector-header", "gold": "pmrag-inspector-gold",
         "topk": "pmrag-inspector-topk", "fused": "pmrag-inspector-fused", "message": "pmrag-inspector-message"}


# -- reading and driving the widget on the page --------------------------------------------------------------
class InspectorPage:
    """The inspector's controls (by their ``description``) and views (by their CSS class) on a lab page."""

    def __init__(self, page):
        self.page = page
        self.root = page.locator(f".{VIEWS['root']}")

    def view(self, name: str):
        return self.root.locator(f".{VIEWS[name]}")

    def _control(self, kind: str, description: str):
        label = f"label.widget-label:text-is({json.dumps(description, ensure_ascii=False)})"
        return self.root.locator(f".widget-{kind}:has(> {label})")

    def dropdown(self, description: str):
        return self._control("dropdown", description).locator("select")

    def options(self, description: str) -> list[str]:
        """The option values of a dropdown (ipywidgets uses each option's label as its value)."""
        return self.dropdown(description).evaluate("s => [...s.options].map(o => o.value)")

    def selected(self, description: str) -> str:
        return self.dropdown(description).input_value()

    def choose(self, description: str, value: str) -> None:
        self.dropdown(description).select_option(value=value)

    def readout(self, description: str):
        return self._control("slider", description).locator(".widget-readout")

    def press_slider(self, description: str, key: str, times: int = 1) -> None:
        """Focus a slider's handle and press ``key`` (ArrowRight, ArrowLeft, …) ``times`` times."""
        handle = self._control("slider", description).locator(".noUi-handle")
        handle.focus()
        for _ in range(times):
            handle.press(key)

    def type_slider(self, description: str, text: str) -> None:
        """Type ``text`` into a slider's readout and press Enter, as a person would to set an exact value."""
        readout = self.readout(description)
        readout.click()
        readout.press("Control+A")
        readout.press_sequentially(text)
        readout.press("Enter")

    def rows(self, view: str):
        return self.view(view).locator("table.ranking tbody tr")

    def caption(self, view: str):
        return self.view(view).locator("table.ranking caption")

    def screenshot(self, view: str, path) -> None:
        """The 1,280 × 900 page with ``view``'s top scrolled into sight (the notebook scrolls inside the page,
        so an element screenshot of the tall inspector would come out clipped)."""
        self.view(view).evaluate("e => e.scrollIntoView({block: 'start'})")
        self.page.screenshot(path=path)

    def overflow(self) -> dict[str, tuple[int, int]]:
        """``{view: (scrollWidth, clientWidth)}`` of the root and every view."""
        return {name: self.root.evaluate("(e, c) => { const v = c === 'pmrag-inspector' ? e : "
                                          "e.querySelector('.' + c); return [v.scrollWidth, v.clientWidth]; }", css)
                for name, css in VIEWS.items()}


def question_id(option: str) -> str:
    """The question ID of a question option (``"q003 · contextual · …"``)."""
    return option.split(" · ")[0]


def retriever_name(option: str) -> str:
    """The retriever of a retriever option (``"hybrid:… · focus"`` or a bare name)."""
    return option.split(" · ")[0]


# -- fixtures --------------------------------------------------------------------------------------------
@pytest.fixture(scope="module")
def inspector(lab, browser, screenshots):
    """Notebook 06 opened in the lab, every cell run from the Run menu, the inspector rendered."""
    from playwright.sync_api import expect

    page = browser.pages[0] if browser.pages else browser.new_page()
    page.goto(lab.page_url(NOTEBOOK))
    kernel = page.get_by_title(f"Change kernel for {NOTEBOOK}")
    expect(kernel).to_have_text(KERNEL_IDLE, timeout=LOAD_MS)
    page.locator("#jp-MainMenu .lm-MenuBar-itemLabel", has_text=re.compile(r"^Run$")).click()
    page.locator(".lm-Menu-itemLabel", has_text=re.compile(r"^Run All Cells$")).click()
    view = InspectorPage(page)
    errors = page.locator(".jp-OutputArea-output[data-mime-type='application/vnd.jupyter.stderr']",
                          has_text=TRACEBACK)
    expect(view.root.or_(errors.first)).to_be_visible(timeout=RUN_ALL_MS)
    expect(kernel).to_have_text(KERNEL_IDLE, timeout=RUN_ALL_MS)
    assert errors.count() == 0, f"a cell of {NOTEBOOK} raised:\n{errors.first.inner_text()[-2000:]}"
    expect(view.view("header")).to_contain_text("[", timeout=VIEW_MS)
    page.screenshot(path=screenshots / "notebook06_inspector.png")
    return view


# -- tests -----------------------------------------------------------------------------------------------
def test_inspector_controls_drive_the_views(inspector, demo_study, screenshots):
    from playwright.sync_api import expect

    shot = iter(range(1, 100))

    def screenshot(step: str, view: str) -> None:
        inspector.screenshot(view, screenshots / f"inspector_{next(shot):02d}_{step}.png")

    # type: every offered question is of that type; the status line counts them; the header shows it
    inspector.choose("type", "All")
    total = len(demo_study.evaluation().questions)
    expect(inspector.dropdown("question").locator("option")).to_have_count(total, timeout=VIEW_MS)
    expect(inspector.view("message")).to_contain_text(f"{total} of {total} questions match.", timeout=VIEW_MS)
    types = [t for t in inspector.options("type") if t != "All"]
    assert len(types) >= 2, f"the demo should have several question types, the type filter offers {types}"
    chosen_type = types[1]
    inspector.choose("type", chosen_type)
    expect(inspector.view("header")).to_contain_text(f"[{chosen_type}]", timeout=VIEW_MS)
    # the header and the question list are separate widgets, synchronised with the page in no fixed order:
    # wait until the list offers no question of another type before reading it
    options = inspector.dropdown("question").locator("option")
    expect(options.filter(has_not_text=f" · {chosen_type} · ")).to_have_count(0, timeout=VIEW_MS)
    questions = inspector.options("question")
    assert questions and all(f" · {chosen_type} · " in q for q in questions), questions
    expect(inspector.view("message")).to_contain_text(f"{len(questions)} of {total} questions match.")
    screenshot("type", "header")

    # question: another one; the header names it, the gold view ranks its gold chunks under every retriever
    assert len(questions) >= 2, f"type {chosen_type} offers a single question"
    previous = question_id(inspector.selected("question"))
    other = next(q for q in questions if question_id(q) != previous)
    inspector.choose("question", other)
    header_id = inspector.view("header").locator(".question-id")
    expect(header_id).to_contain_text(question_id(other), timeout=VIEW_MS)
    expect(header_id).to_contain_text(f"[{chosen_type}]")
    retrievers = inspector.options("retriever")
    expect(inspector.view("gold").locator("table.gold-ranks").first.locator("tbody tr")).to_have_count(
        len(retrievers))
    assert inspector.view("gold").locator(".gold-chunk").count() >= 1
    screenshot("question", "gold")

    # retriever: the Top-k caption names the new one
    current = inspector.selected("retriever")
    new_retriever = next(r for r in retrievers if r != current)
    inspector.choose("retriever", new_retriever)
    k = int(inspector.readout("k").inner_text())
    expect(inspector.caption("topk")).to_have_text(f"Top-{k} of {retriever_name(new_retriever)}", timeout=VIEW_MS)
    expect(inspector.rows("topk")).to_have_count(k)
    screenshot("retriever", "topk")

    # k: three steps on the handle (right, or left near the maximum); both ranked views follow with ranks 1..k
    step = 3 if k + 3 <= MAX_K else -3
    inspector.press_slider("k", "ArrowRight" if step > 0 else "ArrowLeft", abs(step))
    k += step
    expect(inspector.readout("k")).to_have_text(str(k), timeout=VIEW_MS)
    for view in ("topk", "fused"):
        expect(inspector.rows(view)).to_have_count(k, timeout=VIEW_MS)
        ranks = inspector.rows(view).locator("td:first-child").all_inner_texts()
        assert ranks == [str(r) for r in range(1, k + 1)], (view, ranks)
    expect(inspector.caption("topk")).to_have_text(f"Top-{k} of {retriever_name(new_retriever)}")
    screenshot("k", "topk")

    # pairing: the fused caption names it, at the β the slider was reset to (the pairing's selected β)
    pairings = inspector.options("pairing")
    assert len(pairings) >= 2, f"the demo should fuse several pairings, the pairing list offers {pairings}"
    new_pairing = next(p for p in pairings if p != inspector.selected("pairing"))
    inspector.choose("pairing", new_pairing)
    caption = re.compile(rf"^Top-{k} of min–max fusion {re.escape(new_pairing)} at β = (\d\.\d\d)$")
    expect(inspector.caption("fused")).to_have_text(caption, timeout=VIEW_MS)
    beta = caption.match(inspector.caption("fused").inner_text().strip()).group(1)
    # the caption and the slider are separate widgets, synchronised in no fixed order: wait for the readout
    expect(inspector.readout("β")).to_have_text(beta, timeout=VIEW_MS)
    screenshot("pairing", "fused")

    # β: typed into the readout; at β = 1 the fused score is the normalised BM25 score, whose best is 1
    target = "1.00" if beta != "1.00" else "0.30"
    inspector.type_slider("β", target)
    expect(inspector.readout("β")).to_have_text(target, timeout=VIEW_MS)
    expect(inspector.caption("fused")).to_have_text(f"Top-{k} of min–max fusion {new_pairing} at β = {target}",
                                                    timeout=VIEW_MS)
    expect(inspector.rows("fused")).to_have_count(k)
    scores = [float(s) for s in inspector.rows("fused").locator("td:nth-child(2)").all_inner_texts()]
    assert scores == sorted(scores, reverse=True) and all(0 <= s <= 1 for s in scores), scores
    if target == "1.00":
        assert scores[0] == 1.0, scores
    screenshot("beta", "fused")


def test_inspector_has_no_horizontal_scrolling_at_1280_px(inspector, demo_study, screenshots):
    from playwright.sync_api import expect

    gold = demo_study.evaluation().qrels.query("relevance >= 1").groupby("question_id").size()
    widest = gold.sort_values(ascending=False, kind="stable").index[0]
    inspector.choose("type", "All")
    # the kernel refills the question list asynchronously: wait until it offers every question again
    expect(inspector.dropdown("question").locator("option")).to_have_count(len(demo_study.evaluation().questions),
                                                                          timeout=VIEW_MS)
    [option] = [o for o in inspector.options("question") if question_id(o) == widest]
    inspector.choose("question", option)
    expect(inspector.view("header").locator(".question-id")).to_contain_text(widest, timeout=VIEW_MS)
    inspector.type_slider("k", str(MAX_K))
    expect(inspector.rows("topk")).to_have_count(MAX_K, timeout=VIEW_MS)
    expect(inspector.rows("fused")).to_have_count(MAX_K, timeout=VIEW_MS)
    for view in ("gold", "topk", "fused"):
        inspector.screenshot(view, screenshots / f"inspector_widest_{view}.png")

    widths = inspector.overflow()
    scrolling = {name: w for name, w in widths.items() if w[0] > w[1]}
    assert not scrolling, (f"at 1,280 px these views scroll sideways (scrollWidth, clientWidth): {scrolling}; "
                           f"question {widest} ({gold[widest]} gold chunks), k = {MAX_K}")
