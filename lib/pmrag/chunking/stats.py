"""Dataset and chunking statistics (paper Table 1 and §3.2–3.3), as plain DataFrame functions."""

from __future__ import annotations

import numpy as np
import pandas as pd
from sqlalchemy import Engine

from pmrag.core.arrays import run_bounds
from pmrag.core.params import ChunkingSection

LENGTH_THRESHOLDS = (4000, 5000, 7000)


def primary_gold_questions(qrels: pd.DataFrame) -> set[str]:
    """Questions with at least one relevance-2 chunk: the ones the paper evaluates (§4.2)."""
    return set(qrels.loc[qrels["relevance"] == 2, "question_id"])


def table1(sessions: pd.DataFrame, chunks: pd.DataFrame, questions: pd.DataFrame, qrels: pd.DataFrame) -> pd.DataFrame:
    """Paper Table 1 for this dataset, plus the counts it implies (questions by type, gold chunks).

    ``sessions``: the messages of each session (``source``, ``messages``: every message is in one session;
    :attr:`pmrag.chunking.store.Chunked.sessions`).  Questions without any primary-gold chunk cannot be scored;
    like the paper (108 → 100) they are counted separately and excluded from evaluation.
    """
    evaluable = primary_gold_questions(qrels)
    kept = questions[questions["question_id"].isin(evaluable)]
    kept_qrels = qrels[qrels["question_id"].isin(evaluable)]
    rows = [
        ("Messages", int(sessions["messages"].sum())),
        ("Sources", sessions["source"].nunique()),
        ("Chunks", len(chunks)),
        ("Evaluation questions", len(kept)),
    ]
    rows += [(f"  {qtype}", int(n)) for qtype, n in kept["type"].value_counts().sort_index().items()]
    rows += [
        ("Questions without primary gold (excluded)", len(questions) - len(kept)),
        ("Primary-gold chunks (relevance 2)", int((kept_qrels["relevance"] == 2).sum())),
        ("Secondary-gold chunks (relevance 1)", int((kept_qrels["relevance"] == 1).sum())),
        ("Main evaluation unit", "chunk"),
    ]
    return pd.DataFrame(rows, columns=["Item", "Value"], dtype=object)


def length_stats(lengths: pd.Series, thresholds=LENGTH_THRESHOLDS) -> pd.Series:
    """Mean, 95th percentile (NumPy's default linear interpolation), max, and counts above thresholds."""
    values = np.asarray(lengths, dtype=float)
    stats = {
        "mean": float(values.mean()) if len(values) else float("nan"),
        "p95": float(np.percentile(values, 95)) if len(values) else float("nan"),
        "max": int(values.max()) if len(values) else 0,
    }
    for t in thresholds:
        stats[f"> {t:,}"] = int((values > t).sum())
    return pd.Series(stats)


def session_window_stats(sessions: pd.DataFrame, chunks: pd.DataFrame, chunk_messages: pd.DataFrame,
                         params: ChunkingSection) -> pd.DataFrame:
    """Sessions, windows per session, messages per chunk, trimming, and messages left in no chunk (``sessions``:
    as :func:`table1` takes them)."""
    n_messages = int(sessions["messages"].sum())
    windows = chunks.groupby(["source", "session_index"]).size()   # per session
    covered = chunk_messages["message_id"].nunique()
    max_chars = params.max_summary_input_chars
    over = chunks[chunks["raw_text"].str.len() > max_chars]
    rows = [
        ("Sources", chunks["source"].nunique()),
        ("Sessions", len(windows)),
        ("Sessions needing more than one window", int((windows > 1).sum())),
        ("Windows per session (max)", int(windows.max()) if len(windows) else 0),
        ("Messages per chunk (mean)", round(float(chunks["n_messages"].mean()), 2)),
        ("Messages per chunk (median)", float(chunks["n_messages"].median())),
        (f"Chunks of a full {params.window_size}-message window", int((chunks["n_messages"] == params.window_size).sum())),
        ("Chunks trimmed to fit the summary-input limit", int((chunks["n_trimmed"] > 0).sum())),
        ("Messages trimmed off window ends", int(chunks["n_trimmed"].sum())),
        ("Messages in no chunk", n_messages - covered),
        (f"Chunks over {max_chars:,} characters", len(over)),
        ("  of which single-message chunks", int((over["n_messages"] == 1).sum())),
    ]
    return pd.DataFrame(rows, columns=["Item", "Value"], dtype=object)


def session_size_distribution(session_sizes, bins=(1, 2, 6, 11, 43, 79, 10**9)) -> pd.DataFrame:
    """How many sessions fall in each size range (messages per session; ranges are half-open)."""
    labels = [_bin_label(lo, hi) for lo, hi in zip(bins, bins[1:])]
    binned = pd.cut(pd.Series(session_sizes, dtype=float), bins=list(bins), right=False, labels=labels)
    counts = binned.value_counts().reindex(labels, fill_value=0)
    return counts.rename_axis("messages per session").reset_index(name="sessions")


def _bin_label(lo: int, hi: int) -> str:
    if hi - lo == 1:
        return str(lo)
    return f"{lo}+" if hi >= 10**9 else f"{lo}–{hi - 1}"


def message_inventory(engine: Engine) -> pd.DataFrame:
    """Message types (by name), and how many records had a missing time/sender or an empty text: counted in the
    store, so no message text is read (millions at scale)."""
    from sqlalchemy import Integer, func, select

    from pmrag.core.store import messages

    def count(condition):   # typed: a sum of booleans would be read back as one boolean
        return func.coalesce(func.sum(condition, type_=Integer), 0)

    with engine.connect() as conn:
        types = conn.execute(select(messages.c.type, func.count()).group_by(messages.c.type)
                             .order_by(messages.c.type)).all()
        unknown, system, empty = conn.execute(select(
            count(messages.c.time_unknown), count(messages.c.sender == "SYSTEM"), count(messages.c.text == ""))).one()
    rows = [(f"type: {t}", int(n)) for t, n in types]
    rows += [
        ("time unknown (placed at date 00:00:00 + offset)", int(unknown)),
        ("sender SYSTEM (missing sender or notice)", int(system)),
        ("empty text", int(empty)),
    ]
    return pd.DataFrame(rows, columns=["Item", "Messages"])


def session_sizes(messages: pd.DataFrame, gap_minutes: float) -> list[int]:
    """Messages per session (§3.2's rule: a gap strictly longer than ``gap_minutes``), sources in name order,
    sessions in time order, counted from the messages' times (a study has them from chunking:
    :attr:`pmrag.chunking.store.Chunked.sessions`)."""
    gap = pd.Timedelta(minutes=gap_minutes).to_timedelta64()
    sizes: list[int] = []
    for _, frame in messages.groupby("source", sort=True):
        times = np.sort(pd.to_datetime(frame["occurred_at"]).to_numpy())
        cuts = np.flatnonzero(np.diff(times) > gap) + 1
        sizes += np.diff(np.concatenate([[0], cuts, [len(times)]])).tolist()
    return sizes


def chunk_speakers(chunk_messages: pd.DataFrame, messages: pd.DataFrame) -> pd.Series:
    """``chunk_id → "A, B"``: the distinct senders of each chunk in order of first appearance, chunks in ID order.

    The rows are sorted by chunk and position once, so each chunk's senders are one run of the sorted list, joined
    in a plain loop (a group-by calling ``", ".join`` per chunk spent a second at the paper's scale on its groups)."""
    rows = chunk_messages.sort_values(["chunk_id", "position"]).merge(
        messages[["message_id", "sender"]], on="message_id", how="left", sort=False)
    first = rows.drop_duplicates(["chunk_id", "sender"])
    chunk_ids = first["chunk_id"].to_numpy()
    bounds = run_bounds(chunk_ids)
    senders = first["sender"].tolist()
    joined = [", ".join(senders[a:b]) for a, b in zip(bounds[:-1].tolist(), bounds[1:].tolist())]
    return pd.Series(joined, index=pd.Index(chunk_ids[bounds[:-1]], name="chunk_id"), name="speakers")
