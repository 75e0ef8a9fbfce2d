"""The grading view's HTML: pure functions of plain values, checked without a browser or a store."""

import re
from datetime import datetime

from pmrag.annotate.judgments import Progress
from pmrag.present.grading.data import CandidateView, Line, QuestionView
from pmrag.present.grading.render import (grade_text, mark_excerpts, render_candidate, render_message,
                                          render_progress, render_question, render_strip)

T = datetime(2024, 5, 1, 9, 0)


def line(i, sender="Aki", text="hello", matched=False):
    return Line(f"m{i}", T.replace(minute=i), sender, text, matched)


def question(grades=(2, None, 0, 1), dropped=None):
    return QuestionView("q7", "Where <b>did</b> we meet?", "named_entity", 2, 5, tuple(grades), dropped,
                        Progress(questions=5, finished=1, dropped=0, candidates=40, graded=10))


def candidate(**changes):
    values = dict(position=2, n_candidates=4, chunk_id="c3", start_at=T, end_at=T.replace(minute=30),
                  lines=(line(1, "Aki", "meet at the Tennis court <3"), line(2, "Ben", "ok", ), line(3, "Aki", "x")),
                  grade=None, note=None, excerpts=())
    values.update(changes)
    return CandidateView(**values)


def test_excerpts_are_marked_case_insensitively_longest_first_and_text_is_escaped():
    assert mark_excerpts("the tennis court & TENNIS <i>", ["tennis", "tennis court"]) == (
        "the <mark>tennis court</mark> &amp; <mark>TENNIS</mark> &lt;i&gt;")
    assert mark_excerpts("a <b>", []) == "a &lt;b&gt;"
    assert mark_excerpts("amp", ["&"]) == "amp"     # never inside an entity


def test_the_strip_has_one_cell_per_candidate_tinted_by_grade_with_the_current_outlined():
    html = render_strip([2, None, 0, 1], current=1)
    cells = re.findall(r'<span class="([^"]+)" title="([^"]+)">', html)
    assert cells == [("cell g2", "1: 2 · relevant (answers)"), ("cell current", "2: not graded"),
                     ("cell g0", "3: 0 · not relevant"), ("cell g1", "4: 1 · supporting")]


def test_a_long_strip_shows_the_page_of_cells_holding_the_current_candidate():
    grades = [2] * 450 + [None] * 450
    html = render_strip(grades, current=450, max_cells=160)
    titles = re.findall(r'title="(\d+):', html)
    assert titles == [str(n) for n in range(321, 481)]
    assert "candidates 321–480 of 900" in html
    assert re.findall(r'<span class="cell current" title="(\d+):', html) == ["451"]
    last = render_strip(grades, current=899, max_cells=160)
    assert "candidates 801–900 of 900" in last and len(re.findall("title=", last)) == 100
    assert "candidates" not in render_strip([None] * 160, current=3, max_cells=160)


def test_the_question_header_shows_number_type_text_progress_and_drop():
    html = render_question(question(), current=0)
    assert "question 2 of 5: q7 <small>[named_entity]</small>" in html
    assert "Where &lt;b&gt;did&lt;/b&gt; we meet?" in html and "<b>did</b>" not in html
    assert "this question: <b>3 of 4</b> graded" in html
    assert "overall: <b>1 of 5</b> questions finished, <b>10 of 40</b> candidates graded (25%)" in html
    assert 'class="dropped"' not in html
    dropped = render_question(question(dropped="no answer <here>"))
    assert '<p class="dropped">dropped by you: no answer &lt;here&gt;</p>' in dropped


def test_progress_names_dropped_questions_and_an_empty_pool_is_complete():
    view = QuestionView("q", "t", "x", 1, 1, (), None, Progress(2, 2, 1, 0, 0))
    assert "(1 dropped)" in render_progress(view) and "(100%)" in render_progress(view)


def test_a_candidate_shows_its_blind_position_times_speakers_and_grade_never_a_retriever():
    html = render_candidate(candidate(grade=1, note="close <call>"))
    assert '<h4 class="candidate-number">candidate 3 of 4 · <span class="grade g1">1 · supporting</span></h4>' in html
    assert "2024-05-01 09:00 – 2024-05-01 09:30 · 3 messages · speakers: Aki, Ben" in html
    assert "your note: close &lt;call&gt;" in html
    assert "rank" not in html and "retriever" not in html and "bm25" not in html.lower()
    assert 'class="grade none">not graded' in render_candidate(candidate())


def test_matched_lines_are_tinted_and_their_excerpt_marked():
    lines = (line(1, text="meet at the Tennis court", matched=True), line(2, text="tennis again"))
    html = render_candidate(candidate(lines=lines, excerpts=("tennis court",)))
    rows = re.findall(r'<tr class="([^"]*)" data-message-id="(m\d)">.*?<td class="text">(.*?)</td>', html)
    assert rows == [("matched", "m1", "meet at the <mark>Tennis court</mark>"), ("", "m2", "tennis again")]


def test_neighbours_are_shown_before_and_after_the_chunk_when_held():
    html = render_candidate(candidate(before=(line(0, text="earlier"),), after=()))
    order = re.findall(r'<tr class="(sep|neighbour before|neighbour after|[a-z ]*)"', html)
    assert order == ["sep", "neighbour before", "sep", "", "", "", "sep"]
    assert "1 message before the chunk" in html and "no message after the chunk" in html
    assert "earlier" in html
    assert "before the chunk" not in render_candidate(candidate())


def test_grade_text_and_message():
    assert [grade_text(g) for g in (0, 1, 2, None)] == ["0 · not relevant", "1 · supporting",
                                                        "2 · relevant (answers)", "not graded"]
    assert '<p class="message">a &amp; b</p>' in render_message("a & b")
