"""Input checks shared by the DataFrame-taking functions (one wording everywhere)."""

from __future__ import annotations

from collections.abc import Iterable

import pandas as pd


def require_columns(frame, columns: Iterable[str], what: str) -> pd.DataFrame:
    """``frame`` itself; a ``TypeError`` if it is no DataFrame, a ``ValueError`` naming the missing columns."""
    if not isinstance(frame, pd.DataFrame):
        raise TypeError(f"{what} must be a DataFrame, got {type(frame).__name__}")
    columns = list(columns)
    missing = [c for c in columns if c not in frame.columns]
    if missing:
        raise ValueError(f"{what} lacks column(s) {', '.join(map(str, missing))}; it needs {', '.join(map(str, columns))}")
    return frame
