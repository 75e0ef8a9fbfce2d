"""The grading view as HTML strings: pure functions of :mod:`~pmrag.present.grading.data`'s values.

Every piece of chat text, name or id is escaped (:func:`html.escape`).  A candidate is shown by its blind
position only (never a retriever or a rank); the messages an evidence hint matched are tinted and the hint's
excerpt is marked in them (:func:`mark_excerpts`).  No style sets a fixed width, so the view reads on a
1,366 × 768 laptop screen without sideways scrolling.
"""

from __future__ import annotations

import html
import re
from collections.abc import Sequence

from pmrag.annotate.judgments import Progress
from pmrag.present.grading.data import CandidateView, Line, QuestionView

GRADE_LABELS = {0: "0 · not relevant", 1: "1 · supporting", 2: "2 · relevant (answers)"}
STRIP_CELLS = 160
KEYS_HELP = "keys: 0 / 1 / 2 grade · n / p next / previous · u undo"
_STYLE = ("<style>.pmrag-grade{font-size:13px;max-width:100%}"
          ".pmrag-grade h4{margin:2px 0}.pmrag-grade p{margin:3px 0}"
          ".pmrag-grade .qtext{font-size:15px;font-weight:bold}"
          ".pmrag-grade .dropped{color:#a50e0e;font-weight:bold}"
          ".pmrag-grade .strip{display:flex;flex-wrap:wrap;gap:1px;margin:4px 0}"
          ".pmrag-grade .cell{display:inline-block;width:9px;height:9px;border:1px solid #bbb;background:#fff}"
          ".pmrag-grade .cell.g0{background:#9aa0a6}.pmrag-grade .cell.g1{background:#fbbc04}"
          ".pmrag-grade .cell.g2{background:#34a853}.pmrag-grade .cell.current{outline:2px solid #1a73e8}"
          ".pmrag-grade .strip .page{font-size:11px;color:#555;margin-right:6px}"
          ".pmrag-grade .meta{color:#333}.pmrag-grade .grade{font-weight:bold}"
          ".pmrag-grade .grade.g2{color:#137333}.pmrag-grade .grade.g1{color:#b06000}"
          ".pmrag-grade .grade.g0{color:#5f6368}.pmrag-grade .grade.none{color:#a50e0e}"
          ".pmrag-grade table.lines{border-collapse:collapse;width:100%}"
          ".pmrag-grade table.lines td{padding:1px 6px;vertical-align:top;border-bottom:1px solid #eee}"
          ".pmrag-grade table.lines td.time,.pmrag-grade table.lines td.sender{white-space:nowrap;color:#555}"
          ".pmrag-grade table.lines td.text{white-space:pre-wrap;overflow-wrap:anywhere;width:100%}"
          ".pmrag-grade tr.matched td{background:#fff3c4}.pmrag-grade tr.matched td.text{font-weight:bold}"
          ".pmrag-grade tr.neighbour td{color:#777;font-size:12px}"
          ".pmrag-grade tr.sep td{color:#1a73e8;font-size:11px;border-bottom:1px dashed #1a73e8}"
          ".pmrag-grade mark{background:#ffd54f}.pmrag-grade .message{color:#444}</style>")


def _wrap(body: str) -> str:
    return f'{_STYLE}<div class="pmrag-grade">{body}</div>'


def _time(value) -> str:
    return value.strftime("%Y-%m-%d %H:%M") if value is not None else ""


def grade_text(grade: int | None) -> str:
    """``"2 · relevant (answers)"`` …, or ``"not graded"``."""
    return GRADE_LABELS.get(grade, "not graded") if grade is not None else "not graded"


def mark_excerpts(text: str, excerpts: Sequence[str]) -> str:
    """``text`` escaped, each case-insensitive occurrence of an excerpt (longest first) in ``<mark>``.
    Matching runs on the raw text, so chat text never injects HTML."""
    terms = sorted({e.strip() for e in excerpts if e and e.strip()}, key=lambda t: (-len(t), t))
    if not terms:
        return html.escape(text)
    pattern = re.compile("|".join(re.escape(t) for t in terms), re.IGNORECASE)
    pieces, at = [], 0
    for match in pattern.finditer(text):
        pieces += [html.escape(text[at:match.start()]), f"<mark>{html.escape(match.group())}</mark>"]
        at = match.end()
    return "".join(pieces) + html.escape(text[at:])


def render_message(message: str) -> str:
    """A short escaped notice (the status line)."""
    return _wrap(f'<p class="message">{html.escape(message)}</p>')


def render_progress(question: QuestionView) -> str:
    """This question's graded count and the annotator's overall progress."""
    overall: Progress = question.overall
    return (f'<p class="progress">this question: <b>{question.n_graded} of {len(question.grades)}</b> graded'
            f' · overall: <b>{overall.finished} of {overall.questions}</b> questions finished'
            f'{f" ({overall.dropped} dropped)" if overall.dropped else ""}, '
            f'<b>{overall.graded} of {overall.candidates}</b> candidates graded '
            f'({100 * overall.share_graded:.0f}%)</p>')


def render_strip(grades: Sequence[int | None], current: int | None, max_cells: int = STRIP_CELLS) -> str:
    """One small cell per candidate, in position order, tinted by grade (grey 0, amber 1, green 2, white
    ungraded), the current one outlined; each cell's ``title`` says its number and grade.  A question of more
    than ``max_cells`` candidates shows the page of ``max_cells`` that holds the current one, captioned
    ``candidates 401–560 of 900``, so the strip stays two rows high on a laptop screen."""
    start = 0 if current is None or len(grades) <= max_cells else (current // max_cells) * max_cells
    shown = grades[start:start + max_cells]
    cells = []
    for index, grade in enumerate(shown, start=start):
        css = "cell" + (f" g{grade}" if grade is not None else "") + (" current" if index == current else "")
        cells.append(f'<span class="{css}" title="{index + 1}: {html.escape(grade_text(grade))}"></span>')
    caption = (f'<span class="page">candidates {start + 1}–{start + len(shown)} of {len(grades)}</span>'
               if len(shown) < len(grades) else "")
    return f'<div class="strip" aria-label="grades by candidate">{caption}{"".join(cells)}</div>'


def render_question(question: QuestionView, current: int | None = None) -> str:
    """The question header (number of all, id, type, text, drop reason), the progress line and the strip."""
    dropped = (f'<p class="dropped">dropped by you: {html.escape(question.dropped_reason)}</p>'
               if question.dropped_reason is not None else "")
    return _wrap(f'<h4 class="question-id">question {question.number} of {question.n_questions}: '
                 f'{html.escape(question.question_id)} <small>[{html.escape(question.type)}]</small></h4>'
                 f'<p class="qtext">{html.escape(question.text)}</p>{dropped}{render_progress(question)}'
                 f'{render_strip(question.grades, current)}')


def _line_rows(lines: Sequence[Line], excerpts: Sequence[str], css: str = "") -> str:
    rows = []
    for line in lines:
        classes = " ".join(c for c in (css, "matched" if line.matched else "") if c)
        text = mark_excerpts(line.text, excerpts) if line.matched else html.escape(line.text)
        rows.append(f'<tr class="{classes}" data-message-id="{html.escape(line.message_id)}">'
                    f'<td class="time">{_time(line.occurred_at)}</td><td class="sender">{html.escape(line.sender)}</td>'
                    f'<td class="text">{text}</td></tr>')
    return "".join(rows)


def _messages(n: int) -> str:
    return f"{n} message" if n == 1 else f"{n} messages"


def _separator(text: str) -> str:
    return f'<tr class="sep"><td colspan="3">{html.escape(text)}</td></tr>'


def render_annotator_grades(grades: Sequence[tuple[str, int | None]]) -> str:
    """The annotators' grades of a candidate being adjudicated, each annotator named (adjudication is not blind
    between annotators; it stays blind to retrievers and ranks); ``""`` when there are none."""
    if not grades:
        return ""
    cells = " · ".join(f'{html.escape(name)}: <span class="grade {"none" if g is None else f"g{g}"}">'
                       f'{html.escape(grade_text(g))}</span>' for name, g in grades)
    return f'<p class="annotator-grades">annotators\' grades: {cells}</p>'


def render_candidate(candidate: CandidateView) -> str:
    """One candidate chunk: ``candidate k of n`` (its blind position), its grade, start–end time, speakers and
    messages (hint-matched ones tinted, excerpts marked); with its neighbours when the view holds them."""
    grade = candidate.grade
    meta = (f'<h4 class="candidate-number">candidate {candidate.position + 1} of {candidate.n_candidates}'
            f' · <span class="grade {"none" if grade is None else f"g{grade}"}">{html.escape(grade_text(grade))}'
            f'</span></h4><p class="meta">{_time(candidate.start_at)} – {_time(candidate.end_at)} · '
            f'{_messages(len(candidate.lines))} · speakers: {html.escape(", ".join(candidate.speakers))}</p>')
    body = []
    if candidate.before is not None:
        body.append(_separator(f"{_messages(len(candidate.before))} before the chunk" if candidate.before
                               else "no message before the chunk"))
        body.append(_line_rows(candidate.before, candidate.excerpts, "neighbour before"))
        body.append(_separator("the chunk"))
    body.append(_line_rows(candidate.lines, candidate.excerpts))
    if candidate.after is not None:
        body.append(_separator(f"{_messages(len(candidate.after))} after the chunk" if candidate.after
                               else "no message after the chunk"))
        body.append(_line_rows(candidate.after, candidate.excerpts, "neighbour after"))
    note = (f'<p class="note">your note: {html.escape(candidate.note)}</p>' if candidate.note else "")
    note = render_annotator_grades(candidate.annotator_grades) + note
    return _wrap(f'<div class="candidate" data-position="{candidate.position}">{meta}{note}'
                 f'<table class="lines"><tbody>{"".join(body)}</tbody></table></div>')
