"""Input checks shared by the DataFrame-taking functions (one wording everywhere)."""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence

import numpy as np
import pandas as pd

RUN_COLUMNS = ("question_id", "chunk_id", "rank")
RunLike = Mapping[str, Sequence[str]] | pd.DataFrame


def require_columns(frame, columns: Iterable[str], what: str) -> pd.DataFrame:
    """``frame`` itself; a ``TypeError`` if it is no DataFrame, a ``ValueError`` naming the missing columns."""
    if not isinstance(frame, pd.DataFrame):
        raise TypeError(f"{what} must be a DataFrame, got {type(frame).__name__}")
    columns = list(columns)
    missing = [c for c in columns if c not in frame.columns]
    if missing:
        raise ValueError(f"{what} lacks column(s) {', '.join(map(str, missing))}; it needs {', '.join(map(str, columns))}")
    return frame


def run_frame(run: RunLike) -> pd.DataFrame:
    """``run`` as a validated DataFrame ``question_id, chunk_id, rank`` (ranks unique positive integers,
    no chunk twice in one question's list)."""
    if isinstance(run, pd.DataFrame):
        require_columns(run, RUN_COLUMNS, "run")
        frame = run.loc[:, list(RUN_COLUMNS)].reset_index(drop=True)
    elif isinstance(run, Mapping):
        lists = [list(chunks) for chunks in run.values()]
        lengths = np.fromiter(map(len, lists), dtype=np.int64, count=len(lists))
        starts = np.cumsum(lengths) - lengths
        frame = pd.DataFrame({
            "question_id": np.repeat(np.array(list(run.keys()), dtype=object), lengths),
            "chunk_id": np.array([c for chunks in lists for c in chunks], dtype=object),
            "rank": np.arange(lengths.sum()) - np.repeat(starts, lengths) + 1,
        })
    else:
        raise TypeError(f"run must be a mapping question_id -> ranked chunk ids or a DataFrame, got {type(run).__name__}")
    if frame[["question_id", "chunk_id"]].isna().any().any():
        raise ValueError("run has missing question or chunk ids")
    if not pd.api.types.is_integer_dtype(frame["rank"]) or (len(frame) and frame["rank"].min() < 1):
        raise ValueError("run ranks must be integers ≥ 1")
    no_duplicates(frame, ["question_id", "rank"], "run", "rank")
    no_duplicates(frame, ["question_id", "chunk_id"], "run", "chunk")
    return frame.astype({"rank": np.int64})


def no_duplicates(frame: pd.DataFrame, keys: list[str], what: str, entity: str) -> None:
    duplicated = frame.duplicated(keys)
    if duplicated.any():
        first = frame.loc[duplicated.idxmax(), keys].tolist()
        raise ValueError(f"{what} has a duplicate {entity}: {dict(zip(keys, first))}")
