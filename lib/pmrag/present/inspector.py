"""A failure inspector for JupyterLab: pick a question and see why retrieval missed its gold chunks.

Two layers, so the logic is testable without a browser:

* :class:`InspectorData` — validated plain DataFrames (questions, chunks, qrels, rankings, per-question
  metrics, failure labels) and small pure queries on them: :meth:`~InspectorData.filter_questions`,
  :meth:`~InspectorData.gold_ranks`, :meth:`~InspectorData.top_k`, :meth:`~InspectorData.fused_top_k`.
  :func:`highlight` and the ``render_*`` functions turn their results into HTML strings.
* :class:`FailureInspector` — ipywidgets controls and ``HTML`` views wired with ``observe``; every widget is
  an attribute, so a test sets ``inspector.question.value = "q2"`` and reads ``inspector.gold.value``.
  Display ``inspector.widget`` (or the inspector itself) in a notebook.

A question *failed at K* for a retriever when its ``recall@K`` is 0 (no primary gold chunk in the Top-K);
the "failed at 5, recovered at 20" filter keeps the questions where the *focus* retriever has
``recall@5 == 0`` and ``recall@20 > 0``.  The fused view re-ranks one question live with
:func:`pmrag.fusion.minmax_fuse` at the β of the slider.  Failure labels describe one retriever's failures
(``labelled_by``, the study's diagnostic hybrid): the header names it and shows its recall next to the label,
and the retriever list offers it.

Layout rule: the inspector reads at a 1,280 px screen without sideways scrolling.  No widget gets a fixed
width (percentages and max widths only), control rows wrap, and the gold view is a matrix with one row per
retriever (names shortened by :func:`pmrag.present.labels.short_label`, the full name in the ``title``) and
one narrow column per gold chunk (at most :data:`GOLD_COLUMNS_PER_TABLE` per table), each chunk's text shown
once below it.

Stable hooks for browser tests (CSS classes; keep them):

* ``pmrag-inspector`` — the root ``VBox`` (:attr:`FailureInspector.widget`);
* ``pmrag-inspector-header`` — the question header (ID, type, text, labels and who labelled them);
* ``pmrag-inspector-gold`` — the gold-chunk view; ``pmrag-inspector-topk`` — the Top-k view;
  ``pmrag-inspector-fused`` — the fused (β) view;
* ``pmrag-inspector-message`` — the status line (match count, or the one "No question matches" message);
* the controls' ``description`` strings: "type", "label", "failed at 5, recovered at 20", "question",
  "retriever", "k", "pairing", "β".

Opened without a live kernel, a saved output shows :data:`WIDGET_HINT` (the root box's ``text/plain``).
"""

from __future__ import annotations

import html
import re
from collections.abc import Mapping, Sequence
from functools import cache

import numpy as np
import pandas as pd

from pmrag.core.frames import require_columns
from pmrag.core.names import HybridId, RetrieverId, is_hybrid
from pmrag.present.labels import short_label
from pmrag.retrieve.fusion import minmax_fuse
from pmrag.retrieve.tokenizer import tokenize

QUESTION_COLUMNS = ("question_id", "text", "type")
CHUNK_COLUMNS = ("chunk_id", "source", "start_at", "raw_text", "speakers")
QRELS_COLUMNS = ("question_id", "chunk_id", "relevance")
RANKING_COLUMNS = ("question_id", "chunk_id", "rank", "score")
LABEL_COLUMNS = ("question_id", "label")
FAILED_AT = 5
RECOVERED_AT = 20
PER_QUESTION_COLUMNS = ("retriever", "question_id", f"recall@{FAILED_AT}", f"recall@{RECOVERED_AT}")
METRIC_KS = (5, 10, 20)
NO_LABEL = "none"
DEFAULT_BETA = 0.5
PREVIEW_CHARS = 200
TOP_K_COLUMNS = ("rank", "chunk_id", "score", "relevance", "start_at", "speakers", "preview")
ALL = "All"
MAX_K = 20
GOLD_COLUMNS_PER_TABLE = 12
WIDGET_HINT = "Failure inspector: run this cell (and the ones above) to use it; widgets need a live kernel."
CSS_ROOT = "pmrag-inspector"
CSS_HEADER = "pmrag-inspector-header"
CSS_GOLD = "pmrag-inspector-gold"
CSS_TOPK = "pmrag-inspector-topk"
CSS_FUSED = "pmrag-inspector-fused"
CSS_MESSAGE = "pmrag-inspector-message"


# -- pure helpers ------------------------------------------------------------------------------------
def highlight(text: str, query: str) -> str:
    """``text`` HTML-escaped, with every case-insensitive occurrence of a :func:`~pmrag.tokenizer.tokenize`
    token of ``query`` wrapped in ``<mark>…</mark>`` (longest tokens first, so ``テニス部`` wins over
    ``テニス``).  Matching runs on the raw text and each piece is escaped afterwards, so chat text can never
    inject HTML and a token never matches inside an entity such as ``&amp;``."""
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


def token_pattern(query: str) -> re.Pattern | None:
    """A case-insensitive alternation of the distinct query tokens, longest first; ``None`` without tokens."""
    tokens = sorted(set(tokenize(query or "")), key=lambda t: (-len(t), t))
    if not tokens:
        return None
    return re.compile("|".join(re.escape(t) for t in tokens), re.IGNORECASE)


def preview(text, n_chars: int = PREVIEW_CHARS) -> str:
    """The first ``n_chars`` characters of ``text``, with ``…`` when it was cut; ``""`` for a missing text."""
    if text is None or (isinstance(text, float) and np.isnan(text)) or text is pd.NA:
        return ""
    text = str(text)
    return text if len(text) <= n_chars else text[:n_chars] + "…"


def compute_per_question(rankings: Mapping[str, pd.DataFrame], qrels: pd.DataFrame,
                         question_types: Mapping[str, str] | pd.Series | None = None,
                         ks: Sequence[int] = METRIC_KS) -> pd.DataFrame:
    """``retriever, question_id, question_type, recall@k, mrr@k, ndcg@k …`` of every ranking, scored on the
    questions with at least one primary-gold chunk (the others cannot be scored, see :mod:`pmrag.metrics`)."""
    from pmrag.evaluate.metrics import PRIMARY, per_question_metrics

    scorable = set(qrels.loc[qrels["relevance"] == PRIMARY, "question_id"])
    qrels = qrels[qrels["question_id"].isin(scorable)]
    types = pd.Series(question_types) if question_types is not None else pd.Series(dtype=object)
    frames = []
    for name, ranking in ({} if qrels.empty else rankings).items():
        run = ranking[ranking["question_id"].isin(scorable)]
        metrics = per_question_metrics(run, qrels, ks=tuple(ks)).reset_index()
        metrics.insert(0, "retriever", name)
        metrics.insert(2, "question_type", metrics["question_id"].map(types))
        frames.append(metrics)
    if not frames:
        columns = [f"{m}@{k}" for k in ks for m in ("recall", "mrr", "ndcg")]
        return pd.DataFrame(columns=["retriever", "question_id", "question_type", *columns])
    return pd.concat(frames, ignore_index=True)


def default_focus(per_question: pd.DataFrame) -> str | None:
    """The first hybrid (a :class:`~pmrag.core.names.HybridId` name) of ``per_question``, else its first retriever."""
    names = list(dict.fromkeys(per_question["retriever"]))
    hybrids = [n for n in names if is_hybrid(n)]
    return hybrids[0] if hybrids else (names[0] if names else None)


# -- data layer --------------------------------------------------------------------------------------
class InspectorData:
    """Validated inputs of the failure inspector and the pure queries the views are built from.

    Parameters
    ----------
    questions : DataFrame ``question_id, text, type``.
    chunks : DataFrame ``chunk_id, source, start_at, raw_text, speakers`` (``start_at`` datetime or
        ``'YYYY-MM-DD HH:MM:SS'`` strings, ``speakers`` a string such as ``"さき, ゆうた"``).
    qrels : DataFrame ``question_id, chunk_id, relevance`` (2 = primary gold, 1 = supporting).
    rankings : ``{retriever: DataFrame[question_id, chunk_id, rank, score]}``, single retrievers and hybrids.
    per_question : DataFrame ``retriever, question_id, recall@5, recall@20, …``; computed from ``rankings``
        and ``qrels`` (k = 5, 10, 20) when ``None``.
    labels : DataFrame ``question_id, label`` of rule-based failure labels; questions without a row are
        labelled ``"none"``.  ``None`` means no labels.
    pairings : ``(bm25, vector)`` retriever pairs the fused view can re-rank, or a mapping
        ``{(bm25, vector): beta}`` that also gives each pairing's default β.
    betas : ``{(bm25, vector): beta}`` default β per pairing (0.5 where missing); overrides ``pairings``' β.
    focus : the retriever whose failures :meth:`filter_questions` ``failed_recovered`` uses; default
        :func:`default_focus`.
    labelled_by : the retriever (a ``rankings`` name) whose failures ``labels`` describe — the study's
        diagnostic hybrid; ``None`` when unknown.  The header names it and shows its recall.
    """

    def __init__(self, questions: pd.DataFrame, chunks: pd.DataFrame, qrels: pd.DataFrame,
                 rankings: Mapping[str, pd.DataFrame], per_question: pd.DataFrame | None = None,
                 labels: pd.DataFrame | None = None,
                 pairings: Sequence[tuple[str, str]] | Mapping[tuple[str, str], float] = (),
                 betas: Mapping[tuple[str, str], float] | None = None, focus: str | None = None,
                 preview_chars: int = PREVIEW_CHARS, labelled_by: str | None = None):
        require_columns(questions, QUESTION_COLUMNS, "questions")
        if questions["question_id"].duplicated().any():
            raise ValueError("questions has duplicate question_id values")
        self.questions = questions.loc[:, list(QUESTION_COLUMNS)].set_index("question_id", drop=False)

        require_columns(chunks, CHUNK_COLUMNS, "chunks")
        chunk_table = chunks.loc[:, list(CHUNK_COLUMNS)].drop_duplicates("chunk_id").set_index("chunk_id")
        chunk_table["start_at"] = pd.to_datetime(chunk_table["start_at"])
        self.chunks = chunk_table

        require_columns(qrels, QRELS_COLUMNS, "qrels")
        self.qrels = qrels.loc[:, list(QRELS_COLUMNS)].reset_index(drop=True)

        if not isinstance(rankings, Mapping) or not rankings:
            raise ValueError("rankings must be a non-empty mapping {retriever: ranking DataFrame}")
        self.rankings = {}
        for name, ranking in rankings.items():
            require_columns(ranking, RANKING_COLUMNS, f"ranking {name!r}")
            self.rankings[name] = (ranking.loc[:, list(RANKING_COLUMNS)]
                                   .sort_values(["question_id", "rank"], kind="stable").reset_index(drop=True))
        self._by_question = {name: {q: g for q, g in frame.groupby("question_id", sort=False)}
                             for name, frame in self.rankings.items()}

        if per_question is None:
            per_question = compute_per_question(self.rankings, self.qrels, self.questions["type"])
        require_columns(per_question, PER_QUESTION_COLUMNS, "per_question")
        self.per_question = per_question.reset_index(drop=True)

        labels = pd.DataFrame(columns=list(LABEL_COLUMNS)) if labels is None else labels
        require_columns(labels, LABEL_COLUMNS, "labels")
        self.labels = labels.loc[:, list(LABEL_COLUMNS)].reset_index(drop=True)
        self._labels_of = {q: tuple(dict.fromkeys(g["label"])) for q, g in self.labels.groupby("question_id")}

        given = dict(pairings) if isinstance(pairings, Mapping) else {tuple(p): None for p in pairings}
        given.update({tuple(p): b for p, b in dict(betas or {}).items() if tuple(p) in given})
        self.pairings = [tuple(p) for p in given]
        for pair in self.pairings:
            if len(pair) != 2:
                raise ValueError(f"a pairing must be a (bm25, vector) pair, got {pair!r}")
            for name in pair:
                self._check_retriever(name, f"pairing {pair[0]} + {pair[1]}")
        self.betas = {p: float(DEFAULT_BETA if b is None else b) for p, b in given.items()}

        focus = default_focus(self.per_question) if focus is None else focus
        known = set(self.per_question["retriever"])
        if focus is not None and known and focus not in known:
            raise ValueError(f"unknown focus retriever {focus!r}; per_question has {', '.join(map(str, known))}")
        self.focus = focus
        if labelled_by is not None:
            self._check_retriever(labelled_by, "labelled_by")
        self.labelled_by = labelled_by
        self.preview_chars = preview_chars

    # -- vocabularies --------------------------------------------------------------------------
    @property
    def retrievers(self) -> list[str]:
        """The ranking names, in the order given."""
        return list(self.rankings)

    @property
    def question_ids(self) -> list[str]:
        """Every question ID, sorted."""
        return sorted(self.questions["question_id"])

    @property
    def question_types(self) -> list[str]:
        """The distinct question types, sorted."""
        return sorted(self.questions["type"].dropna().unique())

    @property
    def label_values(self) -> list[str]:
        """The distinct failure labels present in ``labels``, sorted."""
        return sorted(self.labels["label"].dropna().unique())

    def labels_of(self, question_id: str) -> tuple[str, ...]:
        """The failure labels of a question; ``("none",)`` when it has none."""
        return self._labels_of.get(question_id, (NO_LABEL,))

    def question(self, question_id: str) -> pd.Series:
        """The row ``question_id, text, type`` of one question (``ValueError`` if unknown)."""
        self._check_question(question_id)
        return self.questions.loc[question_id]

    def metrics(self, retriever: str, question_id: str) -> pd.Series | None:
        """The ``per_question`` row of (retriever, question), or ``None`` when it has none."""
        rows = self.per_question[(self.per_question["retriever"] == retriever)
                                 & (self.per_question["question_id"] == question_id)]
        return None if rows.empty else rows.iloc[0]

    # -- queries --------------------------------------------------------------------------------
    def filter_questions(self, question_type: str | None = None, label: str | None = None,
                         failed_recovered: bool = False) -> list[str]:
        """Sorted IDs of the questions of ``question_type`` (any if ``None``), carrying ``label`` (``"none"``
        selects the unlabelled ones; any if ``None``), and — when ``failed_recovered`` — with the focus
        retriever's ``recall@5 == 0`` and ``recall@20 > 0``."""
        keep = self.questions
        if question_type is not None:
            keep = keep[keep["type"] == question_type]
        ids = list(keep["question_id"])
        if label is not None:
            ids = [q for q in ids if label in self.labels_of(q)]
        if failed_recovered:
            ids = [q for q in ids if q in self.failed_recovered_ids()]
        return sorted(ids)

    def failed_recovered_ids(self, retriever: str | None = None) -> set[str]:
        """Questions where ``retriever`` (default: the focus) has ``recall@5 == 0`` and ``recall@20 > 0``."""
        retriever = self.focus if retriever is None else retriever
        rows = self.per_question[self.per_question["retriever"] == retriever]
        hit = (rows[f"recall@{FAILED_AT}"] == 0) & (rows[f"recall@{RECOVERED_AT}"] > 0)
        return set(rows.loc[hit, "question_id"])

    def ranking(self, retriever: str, question_id: str) -> pd.DataFrame:
        """One question's rows ``question_id, chunk_id, rank, score`` of a ranking, in rank order."""
        self._check_retriever(retriever)
        self._check_question(question_id)
        rows = self._by_question[retriever].get(question_id)
        return rows if rows is not None else self.rankings[retriever].iloc[0:0]

    def gold(self, question_id: str) -> pd.DataFrame:
        """``chunk_id, relevance`` of the judged chunks with relevance ≥ 1, primary first, then by chunk ID."""
        self._check_question(question_id)
        rows = self.qrels[(self.qrels["question_id"] == question_id) & (self.qrels["relevance"] >= 1)]
        return (rows.loc[:, ["chunk_id", "relevance"]]
                .sort_values(["relevance", "chunk_id"], ascending=[False, True], kind="stable")
                .reset_index(drop=True))

    def gold_ranks(self, question_id: str) -> pd.DataFrame:
        """One row per gold chunk (relevance ≥ 1): ``chunk_id, relevance`` and, per retriever, the chunk's
        rank in that retriever's list (``Int64``, ``<NA>`` when not ranked)."""
        table = self.gold(question_id)
        for name in self.retrievers:
            ranks = self.ranking(name, question_id).set_index("chunk_id")["rank"]
            table[name] = pd.array(table["chunk_id"].map(ranks), dtype="Int64")
        return table

    def chunk_details(self, chunk_ids: Sequence[str]) -> pd.DataFrame:
        """``chunk_id, start_at, speakers, preview`` of each chunk (empty values for an unknown chunk)."""
        ids = list(chunk_ids)
        found = self.chunks.reindex(ids)
        return pd.DataFrame({
            "chunk_id": ids,
            "start_at": found["start_at"].to_numpy(),
            "speakers": [s if isinstance(s, str) else "" for s in found["speakers"]],
            "preview": [preview(t, self.preview_chars) for t in found["raw_text"]],
        })

    def describe_ranking(self, ranking: pd.DataFrame, question_id: str, k: int = 5) -> pd.DataFrame:
        """The first ``k`` rows of one question's ranking with ``relevance`` (0 if unjudged) and the chunk's
        details: columns ``rank, chunk_id, score, relevance, start_at, speakers, preview``."""
        k = _validated_k(k)
        top = ranking.sort_values("rank", kind="stable").head(k).reset_index(drop=True)
        relevance = self.qrels[self.qrels["question_id"] == question_id].set_index("chunk_id")["relevance"]
        details = self.chunk_details(top["chunk_id"])
        return pd.DataFrame({
            "rank": top["rank"].to_numpy(dtype=np.int64),
            "chunk_id": top["chunk_id"].to_numpy(dtype=object),
            "score": top["score"].to_numpy(dtype=np.float64),
            "relevance": top["chunk_id"].map(relevance).fillna(0).to_numpy(dtype=np.int64),
            "start_at": details["start_at"].to_numpy(),
            "speakers": details["speakers"].to_numpy(dtype=object),
            "preview": details["preview"].to_numpy(dtype=object),
        }, columns=list(TOP_K_COLUMNS))

    def top_k(self, retriever: str, question_id: str, k: int = 5) -> pd.DataFrame:
        """The Top-``k`` of ``retriever`` for a question (see :meth:`describe_ranking` for the columns)."""
        return self.describe_ranking(self.ranking(retriever, question_id), question_id, k)

    def fuse(self, bm25: str, vector: str, beta: float, question_id: str) -> pd.DataFrame:
        """One question's :func:`~pmrag.fusion.minmax_fuse` ranking of ``bm25`` and ``vector`` at ``beta``."""
        beta = round(float(beta), 10)
        return minmax_fuse(self.ranking(bm25, question_id), self.ranking(vector, question_id), beta)

    def fused_top_k(self, bm25: str, vector: str, beta: float, question_id: str, k: int = 5) -> pd.DataFrame:
        """The Top-``k`` of the live min–max fusion, shaped like :meth:`top_k`."""
        return self.describe_ranking(self.fuse(bm25, vector, beta, question_id), question_id, k)

    highlight = staticmethod(highlight)

    # -- validation -----------------------------------------------------------------------------
    def _check_retriever(self, name: str, where: str = "") -> None:
        if name not in self.rankings:
            context = f" in {where}" if where else ""
            raise ValueError(f"unknown retriever {name!r}{context}; known: {', '.join(map(str, self.rankings))}")

    def _check_question(self, question_id: str) -> None:
        if question_id not in self.questions.index:
            raise ValueError(f"unknown question {question_id!r}")


def _validated_k(k) -> int:
    if isinstance(k, bool) or not isinstance(k, (int, np.integer)) or k < 1:
        raise ValueError(f"k must be a positive integer, got {k!r}")
    return int(k)


# -- HTML rendering (pure) ---------------------------------------------------------------------------
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
GOLD_MARKERS = {2: "★ primary", 1: "☆ supporting"}


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


def retriever_label(name: str) -> str:
    """``<abbr title="full name">`` :func:`~pmrag.present.labels.short_label` ``(name)`` ``</abbr>``, both escaped."""
    return f'<abbr title="{html.escape(str(name))}">{html.escape(short_label(name))}</abbr>'


def _recalls(metrics: pd.Series | None) -> str:
    if metrics is None:
        return ""
    return ", ".join(f"{c}={metrics[c]:.2f}" for c in (f"recall@{FAILED_AT}", f"recall@{RECOVERED_AT}")
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
    gold chunk, numbered in :meth:`InspectorData.gold` order with its marker (★ primary, ☆ supporting) and its
    chunk ID in the ``title``; at most :data:`GOLD_COLUMNS_PER_TABLE` columns per table, further chunks in
    further tables.  Ranks ≤ ``k`` bold green, ≤ 20 amber, deeper grey, "–" (not ranked) red.  Below it, one
    block per gold chunk (``data-chunk-id``): number, relevance, chunk ID, start time, speakers and the
    preview highlighted with the query tokens."""
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
    """A :meth:`InspectorData.top_k`-shaped frame as an HTML table, gold rows marked and tinted, the
    preview highlighted with the query tokens.  Each body row carries ``data-chunk-id``."""
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


# -- widget layer ------------------------------------------------------------------------------------
class FailureInspector:
    """Interactive failure inspector over an :class:`InspectorData`.

    Controls (attributes): ``type_filter``, ``label_filter`` (Dropdowns with ``"All"``),
    ``recovered_filter`` (Checkbox "failed at 5, recovered at 20" of ``data.focus``), ``question``,
    ``retriever``, ``k`` (IntSlider 1..20), ``pairing`` (values ``(bm25, vector)``) and ``beta``
    (FloatSlider 0..1, step 0.05, reset to the pairing's default β when the pairing changes).
    Views (``ipywidgets.HTML``): ``status`` (match count or why nothing matches), ``header``, ``gold``,
    ``top``, ``fused``.  ``widget`` is the top-level ``VBox`` (its ``text/plain`` is :data:`WIDGET_HINT`).
    When no question matches, ``status`` alone says so and ``retriever``, ``k``, ``pairing`` and ``beta`` are
    disabled until one matches again.  The CSS hooks of the module docstring are on these widgets.
    """

    def __init__(self, data: InspectorData, k: int = 5):
        import ipywidgets as w

        self.data = data
        wide = w.Layout(width="auto", max_width="100%")
        row = w.Layout(flex_flow="row wrap", width="100%")
        style = {"description_width": "initial"}
        label_options = [ALL, *data.label_values]
        if any(data.labels_of(q) == (NO_LABEL,) for q in data.question_ids):
            label_options.append(NO_LABEL)
        self.type_filter = w.Dropdown(options=[ALL, *data.question_types], value=ALL, description="type",
                                      style=style)
        self.label_filter = w.Dropdown(options=label_options, value=ALL, description="label", style=style)
        self.recovered_filter = w.Checkbox(value=False, description="failed at 5, recovered at 20",
                                           tooltip=f"focus retriever: {data.focus}", indent=False)
        self.question = w.Dropdown(options=[], description="question", style=style,
                                   layout=w.Layout(width="100%", max_width="60em"))
        retrievers = data.retrievers
        notes = self.retriever_notes()
        self.retriever = w.Dropdown(options=[(f"{r} · {notes[r]}" if r in notes else r, r) for r in retrievers],
                                    value=data.focus if data.focus in retrievers else retrievers[0],
                                    description="retriever", style=style, layout=wide)
        self.k = w.IntSlider(value=min(max(int(k), 1), MAX_K), min=1, max=MAX_K, step=1, description="k",
                             continuous_update=False)
        pairing_options = [(f"{b} + {v}", (b, v)) for b, v in data.pairings]
        self.pairing = w.Dropdown(options=pairing_options, description="pairing", style=style, layout=wide,
                                  disabled=not pairing_options)
        first = data.pairings[0] if data.pairings else None
        self.beta = w.FloatSlider(value=data.betas.get(first, DEFAULT_BETA), min=0.0, max=1.0, step=0.05,
                                  description="β", readout_format=".2f", continuous_update=False,
                                  disabled=not pairing_options)
        self.status = w.HTML()
        self.header = w.HTML()
        self.gold = w.HTML()
        self.top = w.HTML()
        self.fused = w.HTML()
        self.widget = _inspector_box()([
            w.HBox([self.type_filter, self.label_filter, self.recovered_filter], layout=row),
            self.status, self.question, self.header,
            w.HTML("<b>Gold chunks: rank under every retriever</b>"), self.gold,
            w.HBox([self.retriever, self.k], layout=row), self.top,
            w.HBox([self.pairing, self.beta], layout=row), self.fused,
        ], layout=w.Layout(width="100%", max_width="100%"))
        for view, css in ((self.widget, CSS_ROOT), (self.header, CSS_HEADER), (self.gold, CSS_GOLD),
                          (self.top, CSS_TOPK), (self.fused, CSS_FUSED), (self.status, CSS_MESSAGE)):
            view.add_class(css)

        self._refreshing = False
        for control in (self.type_filter, self.label_filter, self.recovered_filter):
            control.observe(self._on_filter, names="value")
        self.question.observe(self._on_question, names="value")
        self.retriever.observe(self._on_top, names="value")
        self.k.observe(self._on_k, names="value")
        self.pairing.observe(self._on_pairing, names="value")
        self.beta.observe(self._on_fused, names="value")
        self.refresh_questions()

    @classmethod
    def from_results(cls, questions: pd.DataFrame, chunks: pd.DataFrame, qrels: pd.DataFrame,
                     rankings: Mapping[str, pd.DataFrame], best: pd.DataFrame,
                     pairings: Sequence[tuple[str, str]] = (), labels: pd.DataFrame | None = None,
                     focus: str | None = None, k: int = 5,
                     diagnostic: HybridId | str | None = None) -> "FailureInspector":
        """An inspector over a study's results.

        Parameters
        ----------
        questions, chunks, qrels : the evaluable questions, the chunks (with a ``speakers`` column), the qrels.
        rankings : the single retrievers' rankings by name.
        best : each pairing's selected β (``bm25, vector, beta``); their fused runs are added under their
            :class:`~pmrag.core.names.HybridId` names.
        pairings : the order of the β slider's pairing choices (default: ``best``'s order).
        labels : the rule-based failure labels (``question_id, label``).
        focus : the retriever of the "failed at 5, recovered at 20" filter (default :func:`default_focus`).
        diagnostic : the hybrid the labels were assigned on (the study's ``analysis.diagnostic()``); its fused
            run is added the same way as ``best``'s, the retriever list offers it, the header names it, and its
            pairing joins the β slider's choices (at its own β) when ``pairings`` lacks it.

        Per-question metrics are computed from the resulting rankings."""
        rankings = {name: frame.drop(columns="retriever", errors="ignore").reset_index(drop=True)
                    for name, frame in rankings.items()}
        betas = {(row.bm25, row.vector): float(row.beta) for row in best.itertuples(index=False)}
        hybrids = [HybridId(RetrieverId.parse(first), RetrieverId.parse(second), beta)
                   for (first, second), beta in betas.items()]
        pairings = [tuple(map(str, p)) for p in pairings] or list(betas)
        if diagnostic is not None:
            diagnostic = diagnostic if isinstance(diagnostic, HybridId) else HybridId.parse(str(diagnostic))
            hybrids.append(diagnostic)
            pair = (str(diagnostic.first), str(diagnostic.second))
            if pair not in pairings:
                pairings.append(pair)
            betas.setdefault(pair, diagnostic.beta)
        for hybrid in hybrids:
            if str(hybrid) not in rankings:
                first, second = str(hybrid.first), str(hybrid.second)
                for name in (first, second):
                    if name not in rankings:
                        raise ValueError(f"hybrid {hybrid}: no ranking of {name!r}; rankings has "
                                         f"{', '.join(map(str, rankings))}")
                rankings[str(hybrid)] = minmax_fuse(rankings[first], rankings[second], hybrid.beta)
        data = InspectorData(questions, chunks, qrels, rankings, labels=labels, pairings=pairings, betas=betas,
                             focus=focus, labelled_by=None if diagnostic is None else str(diagnostic))
        return cls(data, k=k)

    # -- state ----------------------------------------------------------------------------------
    @property
    def question_ids(self) -> list[str]:
        """The question IDs the question dropdown currently offers."""
        return [value for _, value in self.question.options]

    def retriever_notes(self) -> dict[str, str]:
        """``{retriever: "focus" | "labels" | "focus, labels"}`` for the focus and the labels' retriever."""
        notes: dict[str, list[str]] = {}
        for name, note in ((self.data.focus, "focus"), (self.data.labelled_by, "labels")):
            if name is not None:
                notes.setdefault(name, []).append(note)
        return {name: ", ".join(parts) for name, parts in notes.items()}

    def filters(self) -> dict:
        """The current filter values as :meth:`InspectorData.filter_questions` keyword arguments."""
        return {"question_type": None if self.type_filter.value == ALL else self.type_filter.value,
                "label": None if self.label_filter.value == ALL else self.label_filter.value,
                "failed_recovered": bool(self.recovered_filter.value)}

    # -- rendering -------------------------------------------------------------------------------
    def refresh_questions(self) -> None:
        """Re-filter the question dropdown (keeping the current question when it still matches) and
        re-render every view; an explanatory message replaces the views when nothing matches."""
        filters = self.filters()
        ids = self.data.filter_questions(**filters)
        current = self.question.value
        options = [(self._question_label(q), q) for q in ids]
        self._refreshing = True
        try:
            self.question.options = options
            self.question.value = current if current in ids else (ids[0] if ids else None)
        finally:
            self._refreshing = False
        self.question.disabled = not ids
        self.retriever.disabled = self.k.disabled = not ids
        self.pairing.disabled = self.beta.disabled = not ids or not self.data.pairings
        if ids:
            self.status.value = render_message(f"{len(ids)} of {len(self.data.question_ids)} questions match.")
        else:
            self.status.value = render_message(self._no_match_message(filters))
        self.render()

    def render(self) -> None:
        """Re-render the header, gold table, Top-k and fused views for the current question."""
        self.render_question()
        self.render_top()
        self.render_fused()

    def render_question(self) -> None:
        qid = self.question.value
        if qid is None:  # the status line alone says why
            self.header.value = self.gold.value = ""
            return
        data = self.data
        question = data.question(qid)
        self.header.value = render_header(
            question, data.labels_of(qid), data.focus, data.metrics(data.focus, qid) if data.focus else None,
            labelled_by=data.labelled_by,
            label_metrics=data.metrics(data.labelled_by, qid) if data.labelled_by else None)
        ranks = data.gold_ranks(qid)
        self.gold.value = render_gold_table(ranks, data.chunk_details(ranks["chunk_id"]), question["text"],
                                            k=self.k.value, notes=self.retriever_notes())

    def render_top(self) -> None:
        qid = self.question.value
        if qid is None:
            self.top.value = ""
            return
        top = self.data.top_k(self.retriever.value, qid, k=self.k.value)
        caption = f"Top-{self.k.value} of {self.retriever.value}"
        self.top.value = render_ranking_table(top, self.data.question(qid)["text"], caption)

    def render_fused(self) -> None:
        qid = self.question.value
        if qid is None:
            self.fused.value = ""
            return
        if self.pairing.value is None:
            self.fused.value = render_message("No (BM25, vector) pairing to fuse.")
            return
        bm25, vector = self.pairing.value
        beta = round(float(self.beta.value), 10)
        top = self.data.fused_top_k(bm25, vector, beta, qid, k=self.k.value)
        caption = f"Top-{self.k.value} of min–max fusion {bm25} + {vector} at β = {beta:.2f}"
        self.fused.value = render_ranking_table(top, self.data.question(qid)["text"], caption)

    # -- observers -------------------------------------------------------------------------------
    def _on_filter(self, change) -> None:
        self.refresh_questions()

    def _on_question(self, change) -> None:
        if not self._refreshing:
            self.render()

    def _on_top(self, change) -> None:
        self.render_top()

    def _on_k(self, change) -> None:
        self.render()

    def _on_pairing(self, change) -> None:
        default = self.data.betas.get(change["new"], DEFAULT_BETA)
        if abs(self.beta.value - default) > 1e-12:
            self.beta.value = default  # re-renders through _on_fused
        else:
            self.render_fused()

    def _on_fused(self, change) -> None:
        self.render_fused()

    # -- helpers ---------------------------------------------------------------------------------
    def _question_label(self, question_id: str) -> str:
        row = self.data.question(question_id)
        text = str(row["text"])
        return f"{question_id} · {row['type']} · {text[:50] + ('…' if len(text) > 50 else '')}"

    def _no_match_message(self, filters: dict) -> str:
        parts = [f"type = {filters['question_type']}" if filters["question_type"] is not None else None,
                 f"label = {filters['label']}" if filters["label"] is not None else None,
                 (f"failed at {FAILED_AT} but recovered at {RECOVERED_AT} under {self.data.focus}"
                  if filters["failed_recovered"] else None)]
        chosen = "; ".join(p for p in parts if p) or "no filter"
        return f"No question matches the filters ({chosen}). Relax a filter to see questions."

    def _repr_mimebundle_(self, **kwargs) -> dict:
        """The root box's bundle: the widget view for a live kernel, :data:`WIDGET_HINT` as ``text/plain``."""
        return self.widget._repr_mimebundle_(**kwargs)

    def __repr__(self) -> str:
        return (f"FailureInspector({len(self.data.question_ids)} questions, {len(self.data.retrievers)} retrievers, "
                f"question={self.question.value!r})")


@cache
def _inspector_box() -> type:
    """The root ``VBox`` class whose ``text/plain`` is :data:`WIDGET_HINT` (built on first use, so importing
    this module does not import ipywidgets)."""
    import ipywidgets as w

    class InspectorBox(w.VBox):
        """A ``VBox`` that a notebook saved without its widget state shows as a one-line hint, not as
        ``VBox(children=(HBox(...`` (ipywidgets puts ``repr(widget)`` in ``text/plain``)."""

        def _repr_mimebundle_(self, **kwargs):
            bundle = super()._repr_mimebundle_(**kwargs) or {}
            return {**bundle, "text/plain": WIDGET_HINT}

    return InspectorBox
