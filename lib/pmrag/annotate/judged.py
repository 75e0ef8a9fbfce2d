"""Scoring against incomplete judgments (000 §8: "unjudged chunks count as 0"), and measures robust to them.

A pool judges only some chunks of each question; the paper scores every other chunk as irrelevant.  Beside its
Recall@k and nDCG@k (eq. 3–6, :mod:`pmrag.evaluate.metrics`) this module computes, per question:

* ``judged@k``: the share of the top k that was judged (Buckley & Voorhees 2004; ir-measures ``Judged@k``,
  the share of the chunks retrieved up to k when a list is shorter);
* condensed lists (Sakai 2007): unjudged chunks are removed from the ranking before it is cut at k, so the
  chunks below move up; ``condensed_recall@k`` and ``condensed_ndcg@k`` are the paper's formulas on that list;
* ``bpref`` (Buckley & Voorhees 2004, trec_eval's form): with R the relevant (relevance 2) and N the judged
  non-relevant (relevance < 2) chunks of q, over the whole ranked list,

      bpref(q) = 1/R Σ_{relevant d retrieved} (1 − min(n_d, R) / min(R, N)),

  n_d the judged non-relevant chunks ranked above d (a term is 1 when n_d = 0).

Complete judgments (every chunk judged: :func:`complete_judgments_of`) are held as the gold and the set of chunks.
Everything is computed from matrices over questions × ranks (:func:`judgment_matrix`); :func:`condense` and
:func:`bpref` are vectorised kernels, :func:`judged_at` the share of judged ranks.  :func:`ir_measures_scores`
computes ``Judged@k`` and ``Bpref(rel=2)`` with ir-measures (pytrec_eval, i.e. trec_eval); the tests hold the
kernels to it.
"""

from __future__ import annotations

import weakref
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace

import numpy as np
import pandas as pd

from pmrag.core.frames import RunLike
from pmrag.evaluate.metrics import ndcg, recall
from pmrag.evaluate.runs import PRIMARY, Qrels, Run

MEASURES = ("recall", "ndcg", "judged", "condensed_recall", "condensed_ndcg", "bpref")


def measure_columns(k: int) -> list[str]:
    """The columns of :func:`judged_scores` at cut-off ``k``: ``recall@k``, ``ndcg@k``, ``judged@k``,
    ``condensed_recall@k``, ``condensed_ndcg@k``, ``bpref`` (no cut-off: the whole list)."""
    return [name if name == "bpref" else f"{name}@{k}" for name in MEASURES]


@dataclass(frozen=True)
class JudgmentMatrix:
    """One run against a set of judgments, truncated at ``depth`` ranks.

    ``question_ids``: the judged questions (sorted); ``grades[q, i]``: relevance of the chunk at rank i + 1
    (0 where unjudged or where the list ends); ``judged`` and ``retrieved``: masks of the same shape;
    ``ideal[q, i]``: the (i + 1)-th largest judged relevance of q; ``n_relevant`` (relevance 2) and
    ``n_nonrelevant`` (judged, relevance < 2) per question.
    """

    question_ids: pd.Index
    grades: np.ndarray
    judged: np.ndarray
    retrieved: np.ndarray
    ideal: np.ndarray
    n_relevant: np.ndarray
    n_nonrelevant: np.ndarray


@dataclass(frozen=True, eq=False)
class Judgments:
    """Judgments validated and indexed once, to score many runs against (:func:`judgments_of`)."""

    qrels: Qrels
    question_ids: pd.Index
    chunk_ids: pd.Index
    keys: np.ndarray        # question row × len(chunk_ids) + chunk code, sorted
    key_order: np.ndarray   # the judgment row of each sorted key
    row: np.ndarray
    grade: np.ndarray
    n_relevant: np.ndarray
    n_nonrelevant: np.ndarray
    ideal_row: np.ndarray     # the judgments by question, then grade descending: their question row ...
    ideal_slot: np.ndarray    # ... their place in their question's ideal list (0-based) ...
    ideal_grade: np.ndarray   # ... and their grade (:func:`judgment_matrix` cuts this at each run's depth)
    universe: pd.Index | None = None   # complete judgments: every chunk of it judged, 0 where not listed


def judgments_of(judgments: Judgments | Qrels | pd.DataFrame) -> Judgments:
    """``judgments`` (``question_id, chunk_id, relevance``; a chunk not listed is unjudged) validated and
    indexed; every judged question must hold a relevance-2 chunk (``ValueError``)."""
    if isinstance(judgments, Judgments):
        return judgments
    qrels = Qrels.of(judgments)
    frame = qrels.frame
    questions = pd.Index(pd.unique(frame["question_id"].to_numpy(dtype=object)), name="question_id").sort_values()
    row = questions.get_indexer(frame["question_id"])
    grade = frame["relevance"].to_numpy()
    n_relevant = np.bincount(row, weights=grade == PRIMARY, minlength=len(questions)).astype(np.int64)
    n_nonrelevant = np.bincount(row, weights=grade < PRIMARY, minlength=len(questions)).astype(np.int64)
    if (n_relevant == 0).any():
        missing = questions[n_relevant == 0]
        raise ValueError(f"{len(missing)} judged question(s) have no relevance-{PRIMARY} chunk, e.g. {missing[0]!r}: "
                         "drop them first (kept_questions)")
    chunks = pd.Index(pd.unique(frame["chunk_id"].to_numpy(dtype=object)))
    keys = row.astype(np.int64) * len(chunks) + chunks.get_indexer(frame["chunk_id"])
    order = np.argsort(keys, kind="stable")
    ideal = np.lexsort((-grade, row))
    ideal_row = row[ideal]
    ideal_slot = np.arange(len(row)) - np.searchsorted(ideal_row, ideal_row, side="left")
    return Judgments(qrels, questions, chunks, keys[order], order, row, grade, n_relevant, n_nonrelevant,
                     ideal_row, ideal_slot, grade[ideal])


def complete_judgments_of(gold: Qrels | pd.DataFrame, chunk_ids) -> Judgments:
    """Complete judgments: every chunk of ``chunk_ids`` judged for every question of ``gold`` holding a
    relevance-2 chunk among them, with its gold grade, else 0.  Held as the gold's rows and the set of chunks
    (``universe``), not a row per question and chunk (10 million at 10× the paper's scale): a ranked chunk of the
    universe is judged, and N, the judged non-relevant chunks of a question, is the universe's size less R.
    Scores equal those of the same judgments listed row by row (the tests compare them)."""
    universe = pd.Index(np.asarray(chunk_ids, dtype=object))
    if not universe.is_unique:
        raise ValueError(f"chunk_ids must be unique: {universe[universe.duplicated()][0]!r} is listed twice")
    frame = Qrels.of(gold).frame
    frame = frame[frame["chunk_id"].isin(universe)]
    primary = frame.loc[frame["relevance"] == PRIMARY, "question_id"]
    listed = judgments_of(frame[frame["question_id"].isin(primary)].reset_index(drop=True))
    return replace(listed, n_nonrelevant=len(universe) - listed.n_relevant, universe=universe)


def judgment_matrix(run: Run | RunLike, judgments: Judgments | Qrels | pd.DataFrame, depth: int) -> JudgmentMatrix:
    """:class:`JudgmentMatrix` of ``run`` against ``judgments`` (:func:`judgments_of`).  The scored questions are
    the judged ones (the run's others are ignored; a judged question the run does not rank has an empty list)."""
    if isinstance(depth, bool) or not isinstance(depth, (int, np.integer)) or depth < 1:
        raise ValueError(f"depth must be a positive integer, got {depth!r}")
    return judgment_matrices([Run.of(run)], judgments, [int(depth)])[0]


def judgment_matrices(runs: Sequence[Run], judgments: Judgments | Qrels | pd.DataFrame,
                      depths: Sequence[int]) -> list[JudgmentMatrix]:
    """:func:`judgment_matrix` of each run at its depth, the runs' entries looked up in the judgments together
    (one lookup of every run's question and chunk IDs instead of one per run)."""
    judged_rows = judgments_of(judgments)
    questions, grade = judged_rows.question_ids, judged_rows.grade
    frames = [run.frame for run in runs]
    sizes = np.array([len(frame) for frame in frames], dtype=np.int64)
    ranks = np.concatenate([frame["rank"].to_numpy(dtype=np.int64) for frame in frames] or [np.zeros(0, np.int64)])
    question = questions.get_indexer(_column(frames, "question_id"))
    kept = np.flatnonzero((ranks <= np.repeat(np.asarray(depths, dtype=np.int64), sizes)) & (question >= 0))
    chunk_ids = _column(frames, "chunk_id")[kept]
    question, ranks = question[kept], ranks[kept]
    chunk = judged_rows.chunk_ids.get_indexer(chunk_ids)
    position = _lookup(judged_rows, np.where(chunk >= 0, question.astype(np.int64) * len(judged_rows.chunk_ids) + chunk, -1))
    graded = np.where(position >= 0, grade[np.maximum(position, 0)], 0)
    judged = position >= 0 if judged_rows.universe is None else judged_rows.universe.get_indexer(chunk_ids) >= 0
    bounds = np.searchsorted(kept, np.concatenate([[0], np.cumsum(sizes)]))
    ideals: dict[int, np.ndarray] = {}
    matrices = []
    for index, depth in enumerate(depths):
        rows = slice(bounds[index], bounds[index + 1])
        at = (question[rows], ranks[rows] - 1)
        shape = (len(questions), depth)
        grades, judged_at_rank, retrieved = np.zeros(shape, np.int8), np.zeros(shape, bool), np.zeros(shape, bool)
        grades[at] = graded[rows]
        judged_at_rank[at] = judged[rows]
        retrieved[at] = True
        if depth not in ideals:
            ideals[depth] = _ideal(judged_rows, shape)
        matrices.append(JudgmentMatrix(questions, grades, judged_at_rank, retrieved, ideals[depth],
                                       judged_rows.n_relevant, judged_rows.n_nonrelevant))
    return matrices


def _column(frames: Sequence[pd.DataFrame], column: str) -> np.ndarray:
    return np.concatenate([frame[column].to_numpy(dtype=object) for frame in frames] or [np.zeros(0, object)])


def _ideal(judged_rows: Judgments, shape: tuple[int, int]) -> np.ndarray:
    """The ideal grades of each judged question, cut at ``shape[1]`` ranks."""
    keep = judged_rows.ideal_slot < shape[1]
    ideal = np.zeros(shape, np.int8)
    ideal[judged_rows.ideal_row[keep], judged_rows.ideal_slot[keep]] = judged_rows.ideal_grade[keep]
    return ideal


def _lookup(judgments: Judgments, keys: np.ndarray) -> np.ndarray:
    """The judgment row of each key (−1: not judged, or a key of −1)."""
    slot = np.minimum(np.searchsorted(judgments.keys, keys), max(len(judgments.keys) - 1, 0))
    found = (keys >= 0) & (judgments.keys[slot] == keys) if len(judgments.keys) else np.zeros(len(keys), bool)
    return np.where(found, judgments.key_order[slot], -1)


def judged_at(judged: np.ndarray, retrieved: np.ndarray, k: int) -> np.ndarray:
    """Share of the ranks ≤ k holding a judged chunk among those holding a chunk (0 for an empty list)."""
    shown = retrieved[:, :k].sum(axis=1)
    return np.divide(judged[:, :k].sum(axis=1), shown, out=np.zeros(len(shown)), where=shown > 0)


def condense(grades: np.ndarray, judged: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The condensed lists (Sakai 2007): per row, the judged ranks moved up in their order, unjudged ones removed
    (the row is padded with grade 0, not judged).  Returns ``(grades, judged)`` of the condensed lists."""
    order = np.argsort(~judged, axis=1, kind="stable")
    moved = np.take_along_axis(judged, order, axis=1)
    return np.where(moved, np.take_along_axis(grades, order, axis=1), 0).astype(grades.dtype), moved


def bpref(grades: np.ndarray, judged: np.ndarray, n_relevant: np.ndarray, n_nonrelevant: np.ndarray) -> np.ndarray:
    """bpref per row over every rank given (trec_eval's form, see the module docstring); relevant: grade 2."""
    relevant = judged & (grades == PRIMARY)
    nonrelevant = judged & (grades < PRIMARY)
    above = np.cumsum(nonrelevant, axis=1) - nonrelevant
    r, n = n_relevant[:, None], n_nonrelevant[:, None]
    penalty = np.divide(np.minimum(above, r), np.minimum(r, n), out=np.zeros(above.shape), where=above > 0)
    return np.where(relevant, 1.0 - penalty, 0.0).sum(axis=1) / n_relevant


def matrix_scores(matrix: JudgmentMatrix, k: int) -> pd.DataFrame:
    """Every measure of :func:`measure_columns` per question (index ``question_id``), from our kernels."""
    condensed, _ = condense(matrix.grades, matrix.judged)
    values = [recall(matrix.grades, matrix.n_relevant, k), ndcg(matrix.grades, matrix.ideal, k),
              judged_at(matrix.judged, matrix.retrieved, k), recall(condensed, matrix.n_relevant, k),
              ndcg(condensed, matrix.ideal, k), bpref(matrix.grades, matrix.judged, matrix.n_relevant,
                                                      matrix.n_nonrelevant)]
    return pd.DataFrame(dict(zip(measure_columns(k), values)), index=matrix.question_ids)


def judged_scores(run: Run | RunLike, judgments: Judgments | Qrels | pd.DataFrame, k: int = 5, *, depth: int | None = None,
                  evaluator=None) -> pd.DataFrame:
    """Per judged question: the paper's Recall@k and nDCG@k with unjudged = 0, judged@k, the condensed-list
    Recall@k and nDCG@k, and bpref (columns :func:`measure_columns`).

    Parameters
    ----------
    run : ranked lists (``question_id, chunk_id, rank``); judgments : ``question_id, chunk_id, relevance``,
    every judged question holding a relevance-2 chunk; k : the cut-off; depth : the ranks bpref reads (default
    the run's deepest rank); evaluator : an :func:`ir_measures_evaluator` of these judgments; when given,
    judged@k and bpref come from ir-measures instead of our kernels (the same numbers, see the tests).
    """
    run = Run.of(run)
    depth = _default_depth(run, k) if depth is None else depth
    scores = matrix_scores(judgment_matrix(run, judgments, depth), k)
    return scores if evaluator is None else _with_library_scores(scores, run, evaluator, k)


def judged_scores_of_runs(runs: Mapping[str, Run | RunLike], judgments: Judgments | Qrels | pd.DataFrame,
                          k: int = 5, *, evaluator=None) -> dict[str, pd.DataFrame]:
    """:func:`judged_scores` of each run (at its default depth) against the same judgments, by name: the same
    frames, the runs' entries looked up in the judgments together (:func:`judgment_matrices`)."""
    runs = {name: Run.of(run) for name, run in runs.items()}
    matrices = judgment_matrices(list(runs.values()), judgments, [_default_depth(run, k) for run in runs.values()])
    scores = {name: matrix_scores(matrix, k) for name, matrix in zip(runs, matrices)}
    if evaluator is None:
        return scores
    return {name: _with_library_scores(scores[name], run, evaluator, k) for name, run in runs.items()}


def _default_depth(run: Run, k: int) -> int:
    """The ranks bpref reads by default: the run's deepest rank, and at least ``k``."""
    return max(int(run.frame["rank"].max()) if len(run) else 1, k)


def _with_library_scores(scores: pd.DataFrame, run: Run, evaluator, k: int) -> pd.DataFrame:
    library = ir_measures_scores(run, evaluator, k).reindex(scores.index, fill_value=0.0)
    scores[f"judged@{k}"] = library[f"judged@{k}"]
    scores["bpref"] = library["bpref"]
    return scores


def ir_measures_evaluator(judgments: Judgments | Qrels | pd.DataFrame, k: int = 5):
    """An ir-measures evaluator of ``Judged@k`` and ``Bpref(rel=2)`` over ``judgments`` (built once, applied to
    many runs)."""
    import ir_measures

    judgments = judgments_of(judgments)
    frame = judgments.qrels.frame
    qrels: dict[str, dict[str, int]] = {}
    if judgments.universe is not None:   # complete judgments, listed: every chunk of the universe at 0 first
        every = dict.fromkeys(judgments.universe.astype(str), 0)
        qrels = {str(question): dict(every) for question in judgments.question_ids}
    for question, chunk, grade in zip(frame["question_id"].astype(str).tolist(),
                                      frame["chunk_id"].astype(str).tolist(), frame["relevance"].tolist()):
        qrels.setdefault(question, {})[chunk] = int(grade)
    return ir_measures.evaluator([ir_measures.Judged @ k, ir_measures.Bpref(rel=PRIMARY)], qrels)


def ir_measures_scores(run: Run | RunLike, evaluator, k: int = 5) -> pd.DataFrame:
    """``judged@k`` and ``bpref`` per question from an :func:`ir_measures_evaluator`; questions the run does not
    rank are absent (ir-measures skips them).  Scores are ``−rank``, so trec_eval's order is the run's."""
    import ir_measures

    scored = _trec_run(Run.of(run))
    names = {str(ir_measures.Judged @ k): f"judged@{k}", str(ir_measures.Bpref(rel=PRIMARY)): "bpref"}
    rows = [(m.query_id, names[str(m.measure)], m.value) for m in evaluator.iter_calc(scored)]
    table = pd.DataFrame(rows, columns=["question_id", "measure", "value"])
    return table.pivot(index="question_id", columns="measure", values="value").reindex(
        columns=list(names.values())).rename_axis(None, axis=1)


_TREC_RUNS: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()


def _trec_run(run: Run) -> dict[str, dict[str, float]]:
    """``{question: {chunk: −rank}}``, ir-measures' run form, made once per :class:`Run` (a run is scored against
    several sets of judgments)."""
    if run not in _TREC_RUNS:
        frame = run.frame
        scored: dict[str, dict[str, float]] = {}
        for question, chunk, rank in zip(frame["question_id"].astype(str).tolist(),
                                         frame["chunk_id"].astype(str).tolist(), frame["rank"].tolist()):
            scored.setdefault(question, {})[chunk] = -float(rank)
        _TREC_RUNS[run] = scored
    return _TREC_RUNS[run]
