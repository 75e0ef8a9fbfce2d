"""What the failure inspector's views show, computed from plain frames: no HTML, no widgets.

The pure functions take the frames they read and return small frames or plain values: a question's gold chunks
with their rank under every retriever (:func:`gold_ranks`), a ranking's Top-k with scores, start times,
speakers and previews (:func:`describe_ranking`), the query's terms to highlight (:func:`query_terms`), the
questions a retriever fails at 5 and recovers at 20 (:func:`recovered_questions`, by
:func:`pmrag.evaluate.failures.recovered`).  Per-question metrics are the study's own
(:func:`pmrag.evaluate.metrics.per_question_table`).

:class:`InspectorData` holds the validated inputs (built by :meth:`InspectorData.from_frames` or, from a
study's results, :meth:`InspectorData.from_results`) and answers the views' questions by question ID; the
live re-ranking of a pairing at a β is :func:`pmrag.retrieve.fusion.minmax_fuse` on one question's lists.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from functools import cached_property

import numpy as np
import pandas as pd

from pmrag.chunking.stats import primary_gold_questions
from pmrag.core.arrays import run_bounds
from pmrag.core.frames import require_columns
from pmrag.core.names import HybridId, is_hybrid
from pmrag.evaluate.failures import recovered
from pmrag.evaluate.metric_names import RECALL5
from pmrag.evaluate.metrics import per_question_table
from pmrag.retrieve.fusion import minmax_fuse
from pmrag.retrieve.tokenizer import tokenize

QUESTION_COLUMNS = ("question_id", "text", "type")
CHUNK_COLUMNS = ("chunk_id", "source", "start_at", "raw_text", "speakers")
QRELS_COLUMNS = ("question_id", "chunk_id", "relevance")
RANKING_COLUMNS = ("question_id", "chunk_id", "rank", "score")
LABEL_COLUMNS = ("question_id", "label")
FAILED_AT = 5
RECOVERED_AT = 20
SHOWN_METRICS = (str(RECALL5.at(FAILED_AT)), str(RECALL5.at(RECOVERED_AT)))   # a question's recall@5, recall@20
PER_QUESTION_COLUMNS = ("retriever", "question_id", *SHOWN_METRICS)
METRIC_KS = (5, 10, 20)
NO_LABEL = "none"
DEFAULT_BETA = 0.5
PREVIEW_CHARS = 200
TOP_K_COLUMNS = ("rank", "chunk_id", "score", "relevance", "start_at", "speakers", "preview")


# -- pure functions on plain frames ------------------------------------------------------------------
def preview(text, n_chars: int = PREVIEW_CHARS) -> str:
    """The first ``n_chars`` characters of ``text``, with ``…`` when it was cut; ``""`` for a missing text."""
    if text is None or (isinstance(text, float) and np.isnan(text)) or text is pd.NA:
        return ""
    text = str(text)
    return text if len(text) <= n_chars else text[:n_chars] + "…"


def query_terms(query: str | None) -> tuple[str, ...]:
    """The distinct :func:`~pmrag.retrieve.tokenizer.tokenize` tokens of ``query``, longest first (then in
    code-point order), so a highlighter tries ``テニス部`` before ``テニス``."""
    return tuple(sorted(set(tokenize(query or "")), key=lambda t: (-len(t), t)))


def default_focus(per_question: pd.DataFrame) -> str | None:
    """The first hybrid (a :class:`~pmrag.core.names.HybridId` name) of ``per_question``, else its first retriever."""
    names = list(dict.fromkeys(per_question["retriever"]))
    hybrids = [n for n in names if is_hybrid(n)]
    return hybrids[0] if hybrids else (names[0] if names else None)


def evaluable_per_question(rankings: Mapping[str, pd.DataFrame], qrels: pd.DataFrame,
                           question_types: Mapping[str, str] | pd.Series,
                           ks: Sequence[int] = METRIC_KS) -> pd.DataFrame:
    """``retriever, question_id, question_type, recall@k, mrr@k, ndcg@k …`` of every ranking
    (:func:`~pmrag.evaluate.metrics.per_question_table`), on the questions with a primary-gold chunk: the
    others cannot be scored (§4.2) and have no row."""
    evaluable = primary_gold_questions(qrels)
    runs = {name: ranking[ranking["question_id"].isin(evaluable)] for name, ranking in rankings.items()}
    return per_question_table(runs, qrels[qrels["question_id"].isin(evaluable)], pd.Series(question_types), ks)


def recovered_questions(per_question: pd.DataFrame, retriever: str | None) -> set[str]:
    """The questions that ``retriever`` fails at :data:`FAILED_AT` and recovers at :data:`RECOVERED_AT`
    (``recall@5 == 0`` and ``recall@20 > 0`` in its ``per_question`` rows)."""
    rows = per_question[per_question["retriever"] == retriever]
    hit = recovered(rows, FAILED_AT, RECOVERED_AT)
    return set(hit.index[hit.to_numpy()])


def gold_of(qrels: pd.DataFrame, question_id: str) -> pd.DataFrame:
    """``chunk_id, relevance`` of a question's judged chunks with relevance ≥ 1, primary first, then by chunk ID."""
    rows = qrels[(qrels["question_id"] == question_id) & (qrels["relevance"] >= 1)]
    return (rows.loc[:, ["chunk_id", "relevance"]]
            .sort_values(["relevance", "chunk_id"], ascending=[False, True], kind="stable")
            .reset_index(drop=True))


def gold_ranks(gold: pd.DataFrame, rankings: Mapping[str, pd.DataFrame]) -> pd.DataFrame:
    """``gold`` (``chunk_id, relevance``) with one column per retriever of ``rankings`` (one question's rows
    ``chunk_id, rank`` each, in the mapping's order): the chunk's rank there, ``Int64`` with ``<NA>`` where the
    retriever did not rank it."""
    table = gold.copy()
    for name, ranking in rankings.items():
        ranks = ranking.set_index("chunk_id")["rank"]
        table[name] = pd.array(table["chunk_id"].map(ranks), dtype="Int64")
    return table


def chunk_details(chunks: pd.DataFrame, chunk_ids: Sequence[str], preview_chars: int = PREVIEW_CHARS) -> pd.DataFrame:
    """``chunk_id, start_at, speakers, preview`` of each of ``chunk_ids`` from ``chunks`` (indexed by
    ``chunk_id``), in the given order; empty values for a chunk ``chunks`` lacks."""
    ids = list(chunk_ids)
    found = chunks.reindex(ids)
    return pd.DataFrame({
        "chunk_id": ids,
        "start_at": found["start_at"].to_numpy(),
        "speakers": [s if isinstance(s, str) else "" for s in found["speakers"]],
        "preview": [preview(t, preview_chars) for t in found["raw_text"]],
    })


def describe_ranking(ranking: pd.DataFrame, relevance: pd.Series, chunks: pd.DataFrame, k: int = 5,
                     preview_chars: int = PREVIEW_CHARS) -> pd.DataFrame:
    """The first ``k`` rows of one question's ranking with each chunk's ``relevance`` (``chunk_id →
    relevance``, 0 if unjudged) and :func:`chunk_details`: columns :data:`TOP_K_COLUMNS`."""
    k = _validated_k(k)
    top = ranking.sort_values("rank", kind="stable").head(k).reset_index(drop=True)
    details = chunk_details(chunks, top["chunk_id"], preview_chars)
    return pd.DataFrame({
        "rank": top["rank"].to_numpy(dtype=np.int64),
        "chunk_id": top["chunk_id"].to_numpy(dtype=object),
        "score": top["score"].to_numpy(dtype=np.float64),
        "relevance": top["chunk_id"].map(relevance).fillna(0).to_numpy(dtype=np.int64),
        "start_at": details["start_at"].to_numpy(),
        "speakers": details["speakers"].to_numpy(dtype=object),
        "preview": details["preview"].to_numpy(dtype=object),
    }, columns=list(TOP_K_COLUMNS))


def retriever_notes(focus: str | None, labelled_by: str | None) -> dict[str, str]:
    """``{retriever: "focus" | "labels" | "focus, labels"}`` for the focus retriever and the labels' retriever."""
    notes: dict[str, list[str]] = {}
    for name, note in ((focus, "focus"), (labelled_by, "labels")):
        if name is not None:
            notes.setdefault(name, []).append(note)
    return {name: ", ".join(parts) for name, parts in notes.items()}


def _validated_k(k) -> int:
    if isinstance(k, bool) or not isinstance(k, (int, np.integer)) or k < 1:
        raise ValueError(f"k must be a positive integer, got {k!r}")
    return int(k)


# -- the inputs, validated once ----------------------------------------------------------------------
@dataclass(frozen=True)
class QuestionFilter:
    """Which questions the inspector offers: of ``question_type`` (any if ``None``), carrying ``label``
    (``"none"`` selects the unlabelled ones; any if ``None``), and — when ``failed_recovered`` — failed at 5
    but recovered at 20 under the focus retriever."""

    question_type: str | None = None
    label: str | None = None
    failed_recovered: bool = False


@dataclass(frozen=True, eq=False, repr=False)
class InspectorData:
    """Validated inputs of the failure inspector and the queries its views are built from, by question ID.

    Build it with :meth:`from_frames` (or :meth:`from_results`); the fields are the normalised inputs:
    ``questions`` and ``chunks`` indexed by their IDs (``start_at`` as datetimes), ``rankings`` sorted by
    question and rank, ``per_question`` (``retriever, question_id, recall@5, recall@20, …``), ``labels``
    (``question_id, label``), ``pairings`` (``(bm25, vector)`` pairs the fused view can re-rank) with their
    default β in ``betas``, the ``focus`` retriever of the "failed at 5, recovered at 20" filter, and
    ``labelled_by``, the retriever whose failures the labels describe (the study's diagnostic hybrid).
    """

    questions: pd.DataFrame
    chunks: pd.DataFrame
    qrels: pd.DataFrame
    rankings: Mapping[str, pd.DataFrame]
    per_question: pd.DataFrame
    labels: pd.DataFrame
    pairings: tuple[tuple[str, str], ...]
    betas: Mapping[tuple[str, str], float]
    focus: str | None
    labelled_by: str | None
    preview_chars: int = PREVIEW_CHARS

    @classmethod
    def from_frames(cls, questions: pd.DataFrame, chunks: pd.DataFrame, qrels: pd.DataFrame,
                    rankings: Mapping[str, pd.DataFrame], per_question: pd.DataFrame | None = None,
                    labels: pd.DataFrame | None = None,
                    pairings: Sequence[tuple[str, str]] | Mapping[tuple[str, str], float] = (),
                    betas: Mapping[tuple[str, str], float] | None = None, focus: str | None = None,
                    preview_chars: int = PREVIEW_CHARS, labelled_by: str | None = None) -> InspectorData:
        """The inspector's inputs, checked and normalised.

        Parameters
        ----------
        questions : DataFrame ``question_id, text, type``.
        chunks : DataFrame ``chunk_id, source, start_at, raw_text, speakers`` (``start_at`` datetime or
            ``'YYYY-MM-DD HH:MM:SS'`` strings, ``speakers`` a string such as ``"さき, ゆうた"``).
        qrels : DataFrame ``question_id, chunk_id, relevance`` (2 = primary gold, 1 = supporting).
        rankings : ``{retriever: DataFrame[question_id, chunk_id, rank, score]}``, single retrievers and hybrids.
        per_question : DataFrame ``retriever, question_id, recall@5, recall@20, …``; when ``None``,
            :func:`evaluable_per_question` of ``rankings`` (k = 5, 10, 20).
        labels : DataFrame ``question_id, label`` of rule-based failure labels; questions without a row are
            labelled ``"none"``.  ``None`` means no labels.
        pairings : ``(bm25, vector)`` retriever pairs the fused view can re-rank, or a mapping
            ``{(bm25, vector): beta}`` that also gives each pairing's default β.
        betas : ``{(bm25, vector): beta}`` default β per pairing (0.5 where missing); overrides ``pairings``' β.
        focus : the retriever whose failures :meth:`filter_questions` ``failed_recovered`` uses; default
            :func:`default_focus`.
        preview_chars : how much of a chunk's text the views show.
        labelled_by : the retriever (a ``rankings`` name) whose failures ``labels`` describe — the study's
            diagnostic hybrid; ``None`` when unknown.  The header names it and shows its recall.

        Returns
        -------
        InspectorData

        A missing column, an unknown retriever (in a pairing, ``focus`` or ``labelled_by``) or a duplicate
        question ID is a ``ValueError`` naming it.
        """
        require_columns(questions, QUESTION_COLUMNS, "questions")
        if questions["question_id"].duplicated().any():
            raise ValueError("questions has duplicate question_id values")
        questions = questions.loc[:, list(QUESTION_COLUMNS)].set_index("question_id", drop=False)

        require_columns(chunks, CHUNK_COLUMNS, "chunks")
        chunks = chunks.loc[:, list(CHUNK_COLUMNS)].drop_duplicates("chunk_id").set_index("chunk_id")
        chunks["start_at"] = pd.to_datetime(chunks["start_at"])

        require_columns(qrels, QRELS_COLUMNS, "qrels")
        qrels = qrels.loc[:, list(QRELS_COLUMNS)].reset_index(drop=True)

        if not isinstance(rankings, Mapping) or not rankings:
            raise ValueError("rankings must be a non-empty mapping {retriever: ranking DataFrame}")
        sorted_rankings = {}
        for name, ranking in rankings.items():
            require_columns(ranking, RANKING_COLUMNS, f"ranking {name!r}")
            sorted_rankings[name] = (ranking.loc[:, list(RANKING_COLUMNS)]
                                     .sort_values(["question_id", "rank"], kind="stable").reset_index(drop=True))

        if per_question is None:
            per_question = evaluable_per_question(sorted_rankings, qrels, questions["type"])
        require_columns(per_question, PER_QUESTION_COLUMNS, "per_question")
        per_question = per_question.reset_index(drop=True)

        labels = pd.DataFrame(columns=list(LABEL_COLUMNS)) if labels is None else labels
        require_columns(labels, LABEL_COLUMNS, "labels")
        labels = labels.loc[:, list(LABEL_COLUMNS)].reset_index(drop=True)

        given = dict(pairings) if isinstance(pairings, Mapping) else {tuple(p): None for p in pairings}
        given.update({tuple(p): b for p, b in dict(betas or {}).items() if tuple(p) in given})
        for pair in given:
            if len(pair) != 2:
                raise ValueError(f"a pairing must be a (bm25, vector) pair, got {pair!r}")
            for name in pair:
                _check_retriever(sorted_rankings, name, f"pairing {pair[0]} + {pair[1]}")

        focus = default_focus(per_question) if focus is None else focus
        known = set(per_question["retriever"])
        if focus is not None and known and focus not in known:
            raise ValueError(f"unknown focus retriever {focus!r}; per_question has {', '.join(map(str, known))}")
        if labelled_by is not None:
            _check_retriever(sorted_rankings, labelled_by, "labelled_by")
        return cls(questions=questions, chunks=chunks, qrels=qrels, rankings=sorted_rankings,
                   per_question=per_question, labels=labels, pairings=tuple(tuple(p) for p in given),
                   betas={tuple(p): float(DEFAULT_BETA if b is None else b) for p, b in given.items()},
                   focus=focus, labelled_by=labelled_by, preview_chars=preview_chars)

    @classmethod
    def from_results(cls, questions: pd.DataFrame, chunks: pd.DataFrame, qrels: pd.DataFrame,
                     rankings: Mapping[str, pd.DataFrame], best: pd.DataFrame,
                     pairings: Sequence[tuple[str, str]] = (), labels: pd.DataFrame | None = None,
                     focus: str | None = None, diagnostic: HybridId | str | None = None) -> InspectorData:
        """The inspector's inputs from a study's results; per-question metrics are computed from the rankings.

        Parameters
        ----------
        questions, chunks, qrels : the evaluable questions, the chunks (with a ``speakers`` column), the qrels.
        rankings : the single retrievers' rankings by name.
        best : each pairing's selected β (``bm25, vector, beta``); their fused runs are added under their
            :class:`~pmrag.core.names.HybridId` names.
        pairings : the order of the fused view's pairings (default: ``best``'s order).
        labels : the rule-based failure labels (``question_id, label``).
        focus : the retriever of the "failed at 5, recovered at 20" filter (default :func:`default_focus`).
        diagnostic : the hybrid the labels were assigned on (the study's ``analysis.diagnostic()``); its fused
            run is added the same way as ``best``'s, it becomes ``labelled_by``, and its pairing joins the
            pairings (at its own β) when ``pairings`` lacks it.

        Returns
        -------
        InspectorData
        """
        rankings = {name: frame.drop(columns="retriever", errors="ignore").reset_index(drop=True)
                    for name, frame in rankings.items()}
        betas = {(row.bm25, row.vector): float(row.beta) for row in best.itertuples(index=False)}
        hybrids = [HybridId.of(first, second, beta) for (first, second), beta in betas.items()]
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
        return cls.from_frames(questions, chunks, qrels, rankings, labels=labels, pairings=pairings, betas=betas,
                               focus=focus, labelled_by=None if diagnostic is None else str(diagnostic))

    @cached_property
    def _question_rows(self) -> dict[str, dict[str, slice]]:
        """``{retriever: {question_id: the slice of that question's rows}}`` (each ranking is sorted by question),
        so a view never scans a whole ranking and nothing is split before a view asks for it."""
        rows = {}
        for name, frame in self.rankings.items():
            ids = frame["question_id"].to_numpy(dtype=object)
            bounds = run_bounds(ids).tolist()
            rows[name] = {ids[start]: slice(start, stop) for start, stop in zip(bounds[:-1], bounds[1:])}
        return rows

    @cached_property
    def _labels_of(self) -> dict[str, tuple[str, ...]]:
        return {q: tuple(dict.fromkeys(g["label"])) for q, g in self.labels.groupby("question_id")}

    def __repr__(self) -> str:
        return (f"InspectorData({len(self.questions)} questions, {len(self.rankings)} retrievers, "
                f"{len(self.pairings)} pairings, focus={self.focus!r})")

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

    @property
    def notes(self) -> dict[str, str]:
        """:func:`retriever_notes` of the focus and the labels' retriever."""
        return retriever_notes(self.focus, self.labelled_by)

    def labels_of(self, question_id: str) -> tuple[str, ...]:
        """The failure labels of a question; ``("none",)`` when it has none."""
        return self._labels_of.get(question_id, (NO_LABEL,))

    def question(self, question_id: str) -> pd.Series:
        """The row ``question_id, text, type`` of one question (``ValueError`` if unknown)."""
        self._check_question(question_id)
        return self.questions.loc[question_id]

    def metrics(self, retriever: str | None, question_id: str) -> pd.Series | None:
        """The ``per_question`` row of (retriever, question), or ``None`` when it has none."""
        rows = self.per_question[(self.per_question["retriever"] == retriever)
                                 & (self.per_question["question_id"] == question_id)]
        return None if rows.empty else rows.iloc[0]

    # -- queries --------------------------------------------------------------------------------
    def filter_questions(self, question_type: str | None = None, label: str | None = None,
                         failed_recovered: bool = False) -> list[str]:
        """Sorted IDs of the questions a :class:`QuestionFilter` of these fields keeps."""
        keep = self.questions
        if question_type is not None:
            keep = keep[keep["type"] == question_type]
        ids = list(keep["question_id"])
        if label is not None:
            ids = [q for q in ids if label in self.labels_of(q)]
        if failed_recovered:
            recovered_ids = self.failed_recovered_ids()
            ids = [q for q in ids if q in recovered_ids]
        return sorted(ids)

    def failed_recovered_ids(self, retriever: str | None = None) -> set[str]:
        """:func:`recovered_questions` of ``retriever`` (default: the focus)."""
        return recovered_questions(self.per_question, self.focus if retriever is None else retriever)

    def ranking(self, retriever: str, question_id: str) -> pd.DataFrame:
        """One question's rows ``question_id, chunk_id, rank, score`` of a ranking, in rank order."""
        self._check_retriever(retriever)
        self._check_question(question_id)
        return self.rankings[retriever].iloc[self._question_rows[retriever].get(question_id, slice(0, 0))]

    def gold(self, question_id: str) -> pd.DataFrame:
        """:func:`gold_of` a question."""
        self._check_question(question_id)
        return gold_of(self.qrels, question_id)

    def gold_ranks(self, question_id: str) -> pd.DataFrame:
        """:func:`gold_ranks` of a question under every retriever, in :attr:`retrievers` order."""
        return gold_ranks(self.gold(question_id), {name: self.ranking(name, question_id) for name in self.retrievers})

    def chunk_details(self, chunk_ids: Sequence[str]) -> pd.DataFrame:
        """:func:`chunk_details` of ``chunk_ids``."""
        return chunk_details(self.chunks, chunk_ids, self.preview_chars)

    def describe_ranking(self, ranking: pd.DataFrame, question_id: str, k: int = 5) -> pd.DataFrame:
        """:func:`describe_ranking` of one question's ranking, judged by this question's qrels."""
        relevance = self.qrels[self.qrels["question_id"] == question_id].set_index("chunk_id")["relevance"]
        return describe_ranking(ranking, relevance, self.chunks, k, self.preview_chars)

    def top_k(self, retriever: str, question_id: str, k: int = 5) -> pd.DataFrame:
        """The Top-``k`` of ``retriever`` for a question (see :func:`describe_ranking` for the columns)."""
        return self.describe_ranking(self.ranking(retriever, question_id), question_id, k)

    def fuse(self, bm25: str, vector: str, beta: float, question_id: str) -> pd.DataFrame:
        """One question's :func:`~pmrag.retrieve.fusion.minmax_fuse` ranking of ``bm25`` and ``vector`` at
        ``beta`` (rounded to 10 decimals, so a slider's 0.35000000000000003 is 0.35)."""
        beta = round(float(beta), 10)
        return minmax_fuse(self.ranking(bm25, question_id), self.ranking(vector, question_id), beta)

    def fused_top_k(self, bm25: str, vector: str, beta: float, question_id: str, k: int = 5) -> pd.DataFrame:
        """The Top-``k`` of the live min–max fusion, shaped like :meth:`top_k`."""
        return self.describe_ranking(self.fuse(bm25, vector, beta, question_id), question_id, k)

    # -- validation -----------------------------------------------------------------------------
    def _check_retriever(self, name: str, where: str = "") -> None:
        _check_retriever(self.rankings, name, where)

    def _check_question(self, question_id: str) -> None:
        if question_id not in self.questions.index:
            raise ValueError(f"unknown question {question_id!r}")


def _check_retriever(rankings: Mapping[str, pd.DataFrame], name: str, where: str = "") -> None:
    if name not in rankings:
        context = f" in {where}" if where else ""
        raise ValueError(f"unknown retriever {name!r}{context}; known: {', '.join(map(str, rankings))}")
