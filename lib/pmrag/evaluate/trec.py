"""TREC run and qrels files, so that trec_eval, ranx and others can check our numbers.

* run:   ``qid Q0 docid rank score tag``, one line per retrieved chunk, ranks 1..depth;
* qrels: ``qid 0 docid relevance``, one line per judged chunk (relevance-0 judgments included).

Fields are separated by one space, lines end with ``\\n``, text is UTF-8; ids and the tag must therefore
contain no whitespace (a ``ValueError`` names the offending id).

trec_eval and ranx ignore the rank column: they re-sort each question's lines by score, descending, and
break ties their own way (trec_eval by docid, ranx by sort order).  A run file reproduces our ranking only if
each question's scores strictly decrease with rank, i.e. if ties were already broken (as our retrievers do)
and if the scores are written exactly.  :func:`write_run` therefore checks the scores and writes them with
``repr(float)``, the shortest text that reads back to the identical float64; with ``scores="rank"`` it writes
``depth + 1 − rank`` instead, which encodes the order alone.
"""

from __future__ import annotations

import os
import re
from collections.abc import Iterable
from typing import Literal

import numpy as np
import pandas as pd

from pmrag.core.errors import InputError
from pmrag.core.frames import require_columns

RUN_COLUMNS = ("question_id", "chunk_id", "rank", "score", "tag")
QRELS_COLUMNS = ("question_id", "chunk_id", "relevance")


def write_run(
    path: str | os.PathLike,
    rankings: pd.DataFrame,
    tag: str,
    depth: int = 200,
    scores: Literal["given", "rank"] = "given",
) -> int:
    """Write ``rankings`` (columns ``question_id, chunk_id, rank`` and, for ``scores="given"``, ``score``)
    as a TREC run; return the number of lines.

    Questions keep their order of first appearance; within a question lines go by rank, and ranks must be
    1, 2, … with no gaps or repeats (the tie-broken order of the retriever).  Only ranks ≤ ``depth`` are
    written.  ``scores="given"`` writes each score exactly and requires scores to strictly decrease with
    rank (otherwise tools that sort by score would see another ranking); ``scores="rank"`` writes
    ``depth + 1 − rank``.
    """
    if isinstance(depth, bool) or not isinstance(depth, (int, np.integer)) or depth < 1:
        raise ValueError(f"depth must be a positive integer, got {depth!r}")
    if scores not in ("given", "rank"):
        raise ValueError(f"scores must be 'given' or 'rank', got {scores!r}")
    _check_ids([tag], "tag")
    needed = ["question_id", "chunk_id", "rank"] + (["score"] if scores == "given" else [])
    frame = _columns(rankings, needed, "rankings")
    if not pd.api.types.is_integer_dtype(frame["rank"]):
        raise ValueError(f"rankings rank must be integers, got dtype {frame['rank'].dtype}")
    qids = frame["question_id"].astype(str)
    _check_ids(qids, "question id")
    _check_ids(frame["chunk_id"].astype(str), "chunk id")

    group = pd.factorize(qids)[0]
    frame = frame.assign(question_id=qids, _group=group).sort_values(["_group", "rank"], kind="stable")
    expected = frame.groupby("_group").cumcount().to_numpy() + 1
    wrong = np.flatnonzero(frame["rank"].to_numpy() != expected)
    if wrong.size:
        row = frame.iloc[wrong[0]]
        raise ValueError(
            f"question {row['question_id']!r}: ranks must run 1, 2, … without gaps or repeats; "
            f"found rank {row['rank']} where {expected[wrong[0]]} was expected"
        )
    duplicated = frame.duplicated(["_group", "chunk_id"])
    if duplicated.any():
        row = frame.loc[duplicated.idxmax()]
        raise ValueError(f"question {row['question_id']!r}: chunk {row['chunk_id']!r} is ranked twice")
    frame = frame[frame["rank"] <= depth]

    if scores == "rank":
        score_text = (depth + 1 - frame["rank"]).astype(str).tolist()
    else:
        values = pd.to_numeric(frame["score"], errors="coerce").to_numpy(dtype=np.float64)
        if not np.isfinite(values).all():
            row = frame.iloc[int(np.flatnonzero(~np.isfinite(values))[0])]
            raise ValueError(f"question {row['question_id']!r}, rank {row['rank']}: score {row['score']!r} is not a finite number")
        same_question = frame["_group"].to_numpy()[1:] == frame["_group"].to_numpy()[:-1]
        not_below = np.flatnonzero(same_question & (values[1:] >= values[:-1]))
        if not_below.size:
            row = frame.iloc[not_below[0] + 1]
            raise ValueError(
                f"question {row['question_id']!r}: the score at rank {row['rank']} ({values[not_below[0] + 1]!r}) is not "
                f"below the score at rank {row['rank'] - 1} ({values[not_below[0]]!r}); trec_eval and ranx re-sort by "
                "score, so break ties in the scores first or write scores='rank'"
            )
        score_text = [repr(v) for v in values.tolist()]

    lines = [
        f"{q} Q0 {d} {r} {s} {tag}\n"
        for q, d, r, s in zip(frame["question_id"].tolist(), frame["chunk_id"].astype(str).tolist(), frame["rank"].tolist(),
                              score_text)
    ]
    with open(path, "w", encoding="utf-8", newline="\n") as f:
        f.writelines(lines)
    return len(lines)


def read_run(path: str | os.PathLike) -> pd.DataFrame:
    """A TREC run as a DataFrame ``question_id, chunk_id, rank, score, tag``, in file order.

    Blank lines are skipped; a line without six fields, or with a non-integer rank or non-numeric score, is an
    :class:`~pmrag.errors.InputError` naming the line.
    """
    rows = _fields(path, 6, "qid Q0 docid rank score tag")
    try:
        ranks = [int(r[3]) for r in rows]
    except ValueError:
        _bad_field(path, rows, 3, int, "rank must be an integer")
    try:
        values = [float(r[4]) for r in rows]
    except ValueError:
        _bad_field(path, rows, 4, float, "score must be a number")
    return pd.DataFrame({
        "question_id": [r[0] for r in rows],
        "chunk_id": [r[2] for r in rows],
        "rank": np.array(ranks, dtype=np.int64),
        "score": np.array(values, dtype=np.float64),
        "tag": [r[5] for r in rows],
    })


def write_qrels(path: str | os.PathLike, qrels: pd.DataFrame) -> int:
    """Write every judgment of ``qrels`` (columns ``question_id, chunk_id, relevance``) as
    ``qid 0 docid relevance`` in the given order; return the number of lines."""
    frame = _columns(qrels, list(QRELS_COLUMNS), "qrels")
    if not pd.api.types.is_integer_dtype(frame["relevance"]):
        raise ValueError(f"qrels relevance must be integers, got dtype {frame['relevance'].dtype}")
    qids, cids = frame["question_id"].astype(str), frame["chunk_id"].astype(str)
    _check_ids(qids, "question id")
    _check_ids(cids, "chunk id")
    duplicated = pd.DataFrame({"q": qids, "c": cids}).duplicated()
    if duplicated.any():
        i = int(np.flatnonzero(duplicated.to_numpy())[0])
        raise ValueError(f"qrels judge chunk {cids.iloc[i]!r} twice for question {qids.iloc[i]!r}")
    lines = [f"{q} 0 {c} {r}\n" for q, c, r in zip(qids, cids, frame["relevance"].tolist())]
    with open(path, "w", encoding="utf-8", newline="\n") as f:
        f.writelines(lines)
    return len(lines)


def read_qrels(path: str | os.PathLike) -> pd.DataFrame:
    """TREC qrels as a DataFrame ``question_id, chunk_id, relevance`` (the iteration column is dropped)."""
    rows = _fields(path, 4, "qid 0 docid relevance")
    try:
        relevance = [int(r[3]) for r in rows]
    except ValueError:
        _bad_field(path, rows, 3, int, "relevance must be an integer")
    return pd.DataFrame({
        "question_id": [r[0] for r in rows],
        "chunk_id": [r[2] for r in rows],
        "relevance": np.array(relevance, dtype=np.int64),
    })


def _columns(frame: pd.DataFrame, needed: list[str], what: str) -> pd.DataFrame:
    require_columns(frame, needed, what)
    if frame[needed].isna().any().any():
        raise ValueError(f"{what} has missing values in {', '.join(needed)}")
    return frame.loc[:, needed].reset_index(drop=True)


_WHITESPACE = re.compile(r"\s")


def _check_ids(ids: Iterable[str], what: str) -> None:
    """Ids are single TREC fields: non-empty and without whitespace (each distinct id checked once)."""
    for value in pd.unique(pd.Series(list(ids) if not isinstance(ids, pd.Series) else ids, dtype=object).astype(str)):
        if not value or _WHITESPACE.search(value):
            raise ValueError(f"{what} {value!r} cannot be written to a TREC file: it is empty or contains whitespace")


def _fields(path, n: int, layout: str) -> list[list]:
    """The whitespace-separated fields of each non-blank line, followed by the line number."""
    rows = []
    with open(path, encoding="utf-8") as f:
        for number, line in enumerate(f, start=1):
            parts = line.split()
            if not parts:
                continue
            if len(parts) != n:
                raise InputError(path, f"line {number}", f"expected {n} fields '{layout}', got {len(parts)}")
            rows.append(parts + [number])
    return rows


def _bad_field(path, rows, index: int, kind, reason: str):
    for row in rows:
        try:
            kind(row[index])
        except ValueError:
            raise InputError(path, f"line {row[-1]}", f"{reason}, got {row[index]!r}") from None
