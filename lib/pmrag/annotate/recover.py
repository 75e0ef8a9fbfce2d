"""Candidate recovery (000 §4.2): evidence hints → messages → chunks.

The paper matched each candidate's evidence timestamps and excerpts to messages in the local database,
recovered the chunks holding them through ``line_chunk_messages``, and, where an excerpt did not match, added
candidates by an excerpt-based message-level search.  :func:`match_hints` does the same for every hint:

* a message **matches** a hint when it meets everything the hint gives: its phrase is a substring of the
  message text, both normalised (:func:`normalise`: NFKC, case-folded, every run of whitespace one space);
  its time lies within ``tolerance`` of the hint's time, or inside the hint's range; its sender is the hint's
  speaker (normalised the same way).  ``how`` is ``text`` when the hint has a phrase, ``time_speaker`` otherwise;
* a hint with a phrase that no message matches goes to the **excerpt search**: BM25 (§5.1, the study's
  tokenizer) over every message's text with the phrase as the query; the ``search_top`` best messages with a
  score above 0 are added (``how`` ``excerpt_search``, ``score`` the BM25 score).

:func:`hint_chunks` maps the matched messages to chunks through ``chunk_messages``;
:func:`recovery_report` says per question and hint what matched and how.
"""

from __future__ import annotations

import re
import unicodedata
from datetime import timedelta

import numpy as np
import pandas as pd
from sqlalchemy import Engine

from pmrag.core.frames import require_columns
from pmrag.core.params import BM25Section
from pmrag.core.store import bulk_insert, hint_matches

MATCH_COLUMNS = ("candidate_id", "hint", "message_id", "how", "score")
HOWS = ("text", "time_speaker", "excerpt_search")
_SPACES = re.compile(r"\s+")


def normalise(text) -> str:
    """NFKC, case-folded, every run of whitespace (the ideographic space included) one ASCII space, stripped."""
    return _SPACES.sub(" ", unicodedata.normalize("NFKC", str(text)).casefold()).strip()


def match_hints(hints: pd.DataFrame, messages: pd.DataFrame, *, tolerance: timedelta = timedelta(minutes=10),
                search_top: int = 3, tokenizer=None, bm25: BM25Section | None = None) -> pd.DataFrame:
    """The messages each hint matched, and how (see the module docstring).

    Parameters
    ----------
    hints : ``candidate_id, hint, time_from, time_to, speaker, excerpt`` (:func:`~pmrag.annotate.candidates.read_hints`).
    messages : ``message_id, occurred_at, sender, text`` (the store's ``messages``).
    tolerance : how far from a hint's single time a message may be (a range is taken as it is).
    search_top : messages the excerpt search adds for a phrase that matched nothing (0: no search).
    tokenizer : the excerpt search's tokenizer (``tokenize_many``; default: the paper's regex tokenizer).
    bm25 : ``k1`` and ``b`` of the excerpt search (default: the paper's).

    Returns
    -------
    Rows ``candidate_id, hint, message_id, how, score``, by hint then message time and id (score: BM25 for
    ``excerpt_search``, else NaN).
    """
    require_columns(hints, ("candidate_id", "hint", "time_from", "time_to", "speaker", "excerpt"), "hints")
    require_columns(messages, ("message_id", "occurred_at", "sender", "text"), "messages")
    if not isinstance(tolerance, timedelta) or tolerance < timedelta(0):
        raise ValueError(f"tolerance must be a non-negative timedelta, got {tolerance!r}")
    if isinstance(search_top, bool) or not isinstance(search_top, (int, np.integer)) or search_top < 0:
        raise ValueError(f"search_top must be an integer ≥ 0, got {search_top!r}")
    messages = messages.sort_values(["occurred_at", "message_id"], kind="stable").reset_index(drop=True)
    times = pd.to_datetime(messages["occurred_at"]).to_numpy()
    texts = messages["text"].map(normalise)
    senders = messages["sender"].map(normalise).to_numpy()
    rows, unmatched = [], []
    for hint in hints.itertuples(index=False):
        keep = np.ones(len(messages), dtype=bool)
        if _given(hint.time_from):
            start = pd.Timestamp(hint.time_from)
            end = pd.Timestamp(hint.time_to) if _given(hint.time_to) else start + tolerance
            start = start - tolerance if not _given(hint.time_to) else start
            keep &= (times >= start.to_datetime64()) & (times <= end.to_datetime64())
        if _given(hint.speaker):
            keep &= senders == normalise(hint.speaker)
        phrase = normalise(hint.excerpt) if _given(hint.excerpt) else ""
        if phrase:
            keep &= texts.str.contains(phrase, regex=False).to_numpy()
        found = messages.loc[keep, "message_id"].tolist()
        how = "text" if phrase else "time_speaker"
        rows += [(hint.candidate_id, int(hint.hint), mid, how, np.nan) for mid in found]
        if not found and phrase and search_top:
            unmatched.append(hint)
    rows += _excerpt_search(unmatched, messages, search_top, tokenizer, bm25)
    frame = pd.DataFrame(rows, columns=list(MATCH_COLUMNS))
    return frame.astype({"hint": "int64", "score": "float64"})


def _given(value) -> bool:
    return value is not None and not (isinstance(value, float) and np.isnan(value)) and value is not pd.NaT \
        and not (isinstance(value, str) and not value.strip())


def _excerpt_search(unmatched: list, messages: pd.DataFrame, top: int, tokenizer, bm25) -> list[tuple]:
    """BM25 over every message's text, each unmatched phrase a query: its ``top`` best messages scoring > 0
    (ties: earlier message first, then id)."""
    if not unmatched or messages.empty:
        return []
    from pmrag.retrieve.lexical import index_texts
    from pmrag.retrieve.tokenizer import RegexTokenizer

    section = bm25 or BM25Section()
    tokenizer = tokenizer or RegexTokenizer.from_params(section)
    index, query_counts = index_texts(tokenizer, messages["text"].tolist(), [h.excerpt for h in unmatched], section)
    scores = index.scores_matrix(query_counts)
    rows = []
    ids = messages["message_id"].to_numpy()
    for hint, row in zip(unmatched, scores):
        order = np.argsort(-row, kind="stable")[:top]   # messages are in time order: ties go to the earlier
        rows += [(hint.candidate_id, int(hint.hint), ids[i], "excerpt_search", float(row[i])) for i in order if row[i] > 0]
    return rows


def store_matches(engine: Engine, matches: pd.DataFrame, candidates=None) -> int:
    """Replace the stored matches of ``candidates`` (default: those in ``matches``) by ``matches``; returns rows."""
    require_columns(matches, MATCH_COLUMNS, "matches")
    names = sorted(set(matches["candidate_id"]) if candidates is None else set(candidates))
    rows = [(c, int(h), m, how, None if pd.isna(s) else float(s))
            for c, h, m, how, s in matches[list(MATCH_COLUMNS)].itertuples(index=False, name=None)]
    with engine.begin() as conn:
        for start in range(0, len(names), 500):
            batch = names[start:start + 500]
            conn.execute(hint_matches.delete().where(hint_matches.c.candidate_id.in_(batch)))
        bulk_insert(conn, hint_matches, rows)
    return len(rows)


def hint_chunks(matches: pd.DataFrame, chunk_messages: pd.DataFrame) -> pd.DataFrame:
    """The chunks holding each matched message: ``candidate_id, hint, chunk_id, message_id, how``, one row per
    (match, chunk) — a message in two overlapping windows gives two chunks (§4.3 counts both)."""
    require_columns(matches, MATCH_COLUMNS, "matches")
    require_columns(chunk_messages, ("chunk_id", "message_id"), "chunk_messages")
    joined = matches.merge(chunk_messages[["chunk_id", "message_id"]], on="message_id", how="inner")
    return (joined[["candidate_id", "hint", "chunk_id", "message_id", "how"]]
            .sort_values(["candidate_id", "hint", "chunk_id", "message_id"], kind="stable").reset_index(drop=True))


def recovery_report(hints: pd.DataFrame, matches: pd.DataFrame, chunk_messages: pd.DataFrame) -> pd.DataFrame:
    """Per question and hint: what the hint gave, how many messages matched by text, by time and speaker, by
    the excerpt search, and how many chunks hold them.  A hint that found nothing has zeros everywhere.

    Returns rows ``candidate_id, hint, given, text, time_speaker, excerpt_search, chunks``; ``given`` lists
    the hint's parts (``time``, ``range``, ``speaker``, ``phrase``).
    """
    require_columns(hints, ("candidate_id", "hint", "time_from", "time_to", "speaker", "excerpt"), "hints")
    counts = (matches.groupby(["candidate_id", "hint", "how"]).size().unstack("how", fill_value=0)
              .reindex(columns=list(HOWS), fill_value=0).reset_index())
    chunks = (hint_chunks(matches, chunk_messages).groupby(["candidate_id", "hint"])["chunk_id"].nunique()
              .rename("chunks").reset_index())
    report = hints[["candidate_id", "hint"]].astype({"hint": "int64"})
    report["given"] = [_given_parts(h) for h in hints.itertuples(index=False)]
    if len(matches):
        report = report.merge(counts, on=["candidate_id", "hint"], how="left")
        report = report.merge(chunks.astype({"hint": "int64"}), on=["candidate_id", "hint"], how="left")
    else:
        report = report.assign(**{name: 0 for name in (*HOWS, "chunks")})
    columns = [*HOWS, "chunks"]
    report[columns] = report[columns].fillna(0).astype("int64")
    return report[["candidate_id", "hint", "given", *columns]]


def _given_parts(hint) -> str:
    parts = []
    if _given(hint.time_from):
        parts.append("range" if _given(hint.time_to) else "time")
    parts += [name for name, value in (("speaker", hint.speaker), ("phrase", hint.excerpt)) if _given(value)]
    return "+".join(parts)
