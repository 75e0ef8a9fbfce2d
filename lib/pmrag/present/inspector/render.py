"""The failure inspector's views as HTML strings, and its controls' texts: pure functions of what
:mod:`~pmrag.present.inspector.data` computes, testable without ipywidgets.

Every piece of chat text, name or ID is escaped (:func:`html.escape`); query terms are marked with
``<mark>`` (:func:`highlight`) and retriever names shortened with their full name on hover
(:func:`retriever_label`, an ``<abbr title=…>`` of :func:`~pmrag.present.labels.short_label`).  No style sets
a fixed width (only min- and max-widths), so the views read at 1,280 px without sideways scrolling.
"""

from __future__ import annotations

import html
import re
from collections.abc import Mapping, Sequence

import numpy as np
import pandas as pd

from pmrag.present.inspector.data import FAILED_AT, RECOVERED_AT, SHOWN_METRICS, QuestionFilter, query_terms
from pmrag.present.labels import short_label

GOLD_COLUMNS_PER_TABLE = 12
GOLD_MARKERS = {2: "★ primary", 1: "☆ supporting"}
QUESTION_OPTION_CHARS = 50
_STYLE = ("<style>.pmrag-insp{max-width:100%;font-size:12px}"
          ".pmrag-insp table{border-collapse:collapse;font-size:12px;max-width:100%;margin-bottom:4px}"
          ".pmrag-insp th,.pmrag-insp td{border:1px solid #ddd;padding:2px 6px;vertical-align:top;text-align:left}"
          ".pmrag-insp td.preview{white-space:pre-wrap;overflow-wrap:anywhere;min-width:20em}"
          ".pmrag-insp .rel2{background:#e6f4ea}.pmrag-insp .rel1{background:#fff8e1}"
          ".pmrag-insp .top5{color:#137333;font-weight:bold}.pmrag-insp .top20{color:#b06000}"
          ".pmrag-insp .deep{color:#777}.pmrag-insp .unranked{color:#c5221f}"
          ".pmrag-insp td.rank{text-align:right;min-width:2.5em}"
          ".pmrag-insp th.retriever{font-weight:normal;overflow-wrap:anywhere;max-width:24em}"
          ".pmrag-insp tr.noted th.retriever{font-weight:bold}"
          ".pmrag-insp abbr{text-decoration:underline dotted;cursor:help}"
          ".pmrag-insp .legend{color:#555;font-size:11px;margin:2px 0}"
          ".pmrag-insp div.gold-chunk{border:1px solid #ddd;margin:4px 0;padding:2px 6px}"
          ".pmrag-insp div.gold-chunk p{margin:2px 0}"
          ".pmrag-insp div.gold-chunk .preview{white-space:pre-wrap;overflow-wrap:anywhere}</style>")


# -- text pieces -------------------------------------------------------------------------------------
def token_pattern(query: str | None) -> re.Pattern | None:
    """A case-insensitive alternation of :func:`~pmrag.present.inspector.data.query_terms` (longest first);
    ``None`` without terms."""
    terms = query_terms(query)
    if not terms:
        return None
    return re.compile("|".join(re.escape(t) for t in terms), re.IGNORECASE)


def highlight(text, query: str | None) -> str:
    """``text`` HTML-escaped, with every case-insensitive occurrence of a query term wrapped in
    ``<mark>…</mark>`` (longest terms first, so ``テニス部`` wins over ``テニス``).  Matching runs on the raw
    text and each piece is escaped afterwards, so chat text can never inject HTML and a term never matches
    inside an entity such as ``&amp;``."""
    text = "" if text is None or (isinstance(text, float) and np.isnan(text)) else str(text)
    pattern = token_pattern(query)
    if pattern is None:
        return html.escape(text)
    pieces, position = [], 0
    for match in pattern.finditer(text):
        pieces.append(html.escape(text[position:match.start()]))
        pieces.append(f"<mark>{html.escape(match.group())}</mark>")
        position = match.end()
    pieces.append(html.escape(text[position:]))
    return "".join(pieces)


def retriever_label(name: str) -> str:
    """``<abbr title="full name">`` :func:`~pmrag.present.labels.short_label` ``(name)`` ``</abbr>``, both escaped."""
    return f'<abbr title="{html.escape(str(name))}">{html.escape(short_label(name))}</abbr>'


def question_option(question: pd.Series) -> str:
    """The question dropdown's text of a question row: ``q1 · single · `` and the text's first 50 characters."""
    text = str(question["text"])
    cut = text[:QUESTION_OPTION_CHARS] + ("…" if len(text) > QUESTION_OPTION_CHARS else "")
    return f"{question['question_id']} · {question['type']} · {cut}"


def retriever_option(name: str, note: str | None = None) -> str:
    """The retriever dropdown's text: the full name, and ``· focus`` / ``· labels`` when it has a note."""
    return f"{name} · {note}" if note else name


def pairing_option(bm25: str, vector: str) -> str:
    """The pairing dropdown's text: ``bm25 + vector``."""
    return f"{bm25} + {vector}"


def match_message(n_matching: int, n_questions: int) -> str:
    """The status line when questions match: ``3 of 4 questions match.``"""
    return f"{n_matching} of {n_questions} questions match."


def no_match_message(question_filter: QuestionFilter, focus: str | None) -> str:
    """The status line when no question matches: the filters that are set, and how to get questions back."""
    parts = [f"type = {question_filter.question_type}" if question_filter.question_type is not None else None,
             f"label = {question_filter.label}" if question_filter.label is not None else None,
             (f"failed at {FAILED_AT} but recovered at {RECOVERED_AT} under {focus}"
              if question_filter.failed_recovered else None)]
    chosen = "; ".join(p for p in parts if p) or "no filter"
    return f"No question matches the filters ({chosen}). Relax a filter to see questions."


def top_caption(retriever: str, k: int) -> str:
    """The Top-k view's caption: ``Top-5 of raw_text_bm25``."""
    return f"Top-{k} of {retriever}"


def fused_caption(bm25: str, vector: str, beta: float, k: int) -> str:
    """The fused view's caption, β to two decimals: ``Top-5 of min–max fusion a + b at β = 0.35``."""
    return f"Top-{k} of min–max fusion {bm25} + {vector} at β = {round(float(beta), 10):.2f}"


# -- views -------------------------------------------------------------------------------------------
def _wrap(body: str) -> str:
    return f'{_STYLE}<div class="pmrag-insp">{body}</div>'


def _format_time(value) -> str:
    if value is None or pd.isna(value):
        return ""
    return pd.Timestamp(value).strftime("%Y-%m-%d %H:%M")


def _rank_cell(rank, k: int) -> str:
    if rank is None or pd.isna(rank):
        return '<td class="rank unranked" title="not ranked">–</td>'
    rank = int(rank)
    css = "top5" if rank <= k else ("top20" if rank <= RECOVERED_AT else "deep")
    return f'<td class="rank {css}">{rank}</td>'


def _recalls(metrics: pd.Series | None) -> str:
    if metrics is None:
        return ""
    return ", ".join(f"{c}={metrics[c]:.2f}" for c in SHOWN_METRICS
                     if c in metrics.index)


def render_message(message: str) -> str:
    """A short escaped notice, e.g. that no question matches the filters."""
    return _wrap(f'<p class="message"><i>{html.escape(message)}</i></p>')


def render_header(question: pd.Series, labels: Sequence[str], focus: str | None = None,
                  metrics: pd.Series | None = None, labelled_by: str | None = None,
                  label_metrics: pd.Series | None = None) -> str:
    """The question's ID, type, text and labels, plus the focus retriever's recall@5 / recall@20.

    With ``labelled_by`` the label line names the retriever the labels were assigned on and its recalls
    (``label_metrics``): ``label (by hybrid:summary_bm25+summary_vector@0.50; recall@5=0.00, recall@20=1.00):
    aggregate_failure``, so a label never sits unexplained next to another retriever's recall."""
    source = ""
    if labelled_by is not None:
        recalls = _recalls(label_metrics)
        source = (f' (by <span class="labelled-by">{html.escape(str(labelled_by))}</span>'
                  f'{"; " + html.escape(recalls) if recalls else ""})')
    parts = [f'<h4 class="question-id">{html.escape(str(question["question_id"]))} '
             f'<small>[{html.escape(str(question["type"]))}]</small></h4>',
             f'<p class="question-text">{html.escape(str(question["text"]))}</p>',
             f'<p class="labels">label{source}: {html.escape(", ".join(labels))}</p>']
    if focus is not None and metrics is not None:
        parts.append(f'<p class="focus">focus {html.escape(str(focus))}: {html.escape(_recalls(metrics))}</p>')
    return _wrap("".join(parts))


def render_gold_table(gold_ranks: pd.DataFrame, details: pd.DataFrame, query: str, k: int = 5,
                      notes: Mapping[str, str] | None = None) -> str:
    """The gold chunks' ranks as a matrix and each gold chunk's text once.

    The matrix has one row per retriever (``data-retriever`` = its full name; the row header is
    :func:`retriever_label`, followed by ``notes[name]`` such as "focus" or "labels") and one narrow column per
    gold chunk of :func:`~pmrag.present.inspector.data.gold_ranks`, numbered in its order with its marker
    (★ primary, ☆ supporting) and its chunk ID in the ``title``; at most :data:`GOLD_COLUMNS_PER_TABLE` columns
    per table, further chunks in further tables.  Ranks ≤ ``k`` bold green, ≤ 20 amber, deeper grey, "–" (not
    ranked) red.  Below it, one block per gold chunk (``data-chunk-id``): number, relevance, chunk ID, start
    time, speakers (from ``details``, :func:`~pmrag.present.inspector.data.chunk_details`) and the preview
    highlighted with the query terms."""
    if gold_ranks.empty:
        return render_message("This question has no gold chunk (relevance ≥ 1).")
    notes = dict(notes or {})
    retrievers = [c for c in gold_ranks.columns if c not in ("chunk_id", "relevance")]
    gold = [(number, row) for number, (_, row) in enumerate(gold_ranks.iterrows(), start=1)]
    tables = []
    for start in range(0, len(gold), GOLD_COLUMNS_PER_TABLE):
        group = gold[start:start + GOLD_COLUMNS_PER_TABLE]
        head = "<tr><th>retriever</th>" + "".join(
            f'<th class="chunk rel{int(row["relevance"])}" '
            f'title="{html.escape(str(row["chunk_id"]))} · {GOLD_MARKERS.get(int(row["relevance"]), "")}">'
            f'{number} {GOLD_MARKERS.get(int(row["relevance"]), " ")[0]}</th>' for number, row in group) + "</tr>"
        body = []
        for name in retrievers:
            note = notes.get(name)
            label = retriever_label(name) + (f" <small>{html.escape(note)}</small>" if note else "")
            cells = "".join(_rank_cell(row[name], k) for _, row in group)
            body.append(f'<tr class="retriever{" noted" if note else ""}" data-retriever="{html.escape(str(name))}">'
                        f'<th scope="row" class="retriever">{label}</th>{cells}</tr>')
        tables.append(f'<table class="gold-ranks"><thead>{head}</thead><tbody>{"".join(body)}</tbody></table>')
    amber = f"≤ {RECOVERED_AT} amber, " if k < RECOVERED_AT else ""   # at k ≥ 20 nothing is amber
    legend = (f'<p class="legend">Rank of each gold chunk (columns) under each retriever (rows): ≤ {k} green, '
              f"{amber}deeper grey, – not ranked. Hover a name for the full retriever name, "
              "a column number for the chunk ID.</p>")
    info = details.set_index("chunk_id")
    blocks = []
    for number, row in gold:
        rel = int(row["relevance"])
        chunk = html.escape(str(row["chunk_id"]))
        d = info.loc[row["chunk_id"]] if row["chunk_id"] in info.index else None
        meta = [f"<b>{number}</b> {GOLD_MARKERS.get(rel, '')}", f"<code>{chunk}</code>"]
        if d is not None:
            meta += [p for p in (_format_time(d["start_at"]), html.escape(d["speakers"])) if p]
        text = highlight(d["preview"], query) if d is not None else ""
        blocks.append(f'<div class="gold-chunk rel{rel}" data-chunk-id="{chunk}">'
                      f'<p class="meta">{" · ".join(meta)}</p><p class="preview">{text}</p></div>')
    return _wrap("".join(tables) + legend + "".join(blocks))


def render_ranking_table(top: pd.DataFrame, query: str, caption: str = "") -> str:
    """A :func:`~pmrag.present.inspector.data.describe_ranking` frame as an HTML table, gold rows marked and
    tinted, the preview highlighted with the query terms.  Each body row carries ``data-chunk-id``."""
    title = f"<caption>{html.escape(caption)}</caption>" if caption else ""
    if top.empty:
        return _wrap(f'<table class="ranking">{title}</table>') + render_message("This list ranks no chunk.")
    head = ("<tr><th>rank</th><th>score</th><th>chunk</th><th>gold</th><th>start</th><th>speakers</th>"
            "<th>preview</th></tr>")
    rows = []
    for row in top.itertuples(index=False):
        rel = int(row.relevance)
        chunk = html.escape(str(row.chunk_id))
        rows.append(f'<tr class="hit rel{rel}" data-chunk-id="{chunk}"><td>{int(row.rank)}</td>'
                    f"<td>{row.score:.4f}</td><td>{chunk}</td><td>{GOLD_MARKERS.get(rel, '')}</td>"
                    f"<td>{_format_time(row.start_at)}</td><td>{html.escape(str(row.speakers))}</td>"
                    f'<td class="preview">{highlight(row.preview, query)}</td></tr>')
    return _wrap(f'<table class="ranking">{title}<thead>{head}</thead><tbody>{"".join(rows)}</tbody></table>')
