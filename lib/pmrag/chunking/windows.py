"""Session-bounded sliding-window chunking, exactly as the paper's §3.2.

1. Each source is chunked on its own.
2. Its messages are stably sorted by ``(occurred_at, source_order)``.
3. A new session starts wherever the gap to the previous message is *strictly greater* than
   ``session_gap_minutes`` (180).
4. Each session is cut from its beginning into windows of at most ``window_size`` (42) messages with a
   stride of ``stride`` (36): a six-message overlap.  The final short window is kept; no window crosses a
   source or session boundary.
5. If the rendered summary input of a window exceeds ``max_summary_input_chars`` (5,000), messages are
   dropped one at a time from the end of the window until it fits.

Two readings the paper leaves open, and the ones we take (both are parameters):

* **What is "the rendered summary input", and why is raw_text's maximum 10,031 characters (15 chunks over
  7,000) when every window is trimmed to 5,000?**  The summary input is raw_text itself (Appendix A: the
  prompt is followed by raw_text), so the trim is measured on raw_text.  The only way a trimmed chunk can
  still exceed 5,000 characters is that trimming stops at one message: a window never shrinks below
  ``min_window_messages`` (1), so a single pasted note of 10,000 characters becomes a one-message chunk of
  10,031 characters.  Every chunk over the limit is therefore a single message; notebook 01 checks this.
* **Where does the next window start after a trimmed one?**  The paper's loop advances by the stride
  regardless (``trim_policy="fixed"``, the default): the messages trimmed off the end are then in no chunk
  unless the next window's overlap reaches them, and notebook 01 counts them.  ``trim_policy="resume"``
  starts the next window ``window_size - stride`` messages before the trimmed end instead, so every
  message lands in some chunk.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import NamedTuple

from pmrag.core.ids import chunk_id
from pmrag.core.params import ChunkingSection


class ChunkMessage(NamedTuple):
    """The fields of a message that chunking and rendering need (a tuple: 358k of them are built per run)."""

    message_id: str
    source: str
    source_order: int
    occurred_at: datetime
    sender: str
    text: str


@dataclass(frozen=True)
class Chunk:
    chunk_id: str
    source: str
    chunk_index: int
    session_index: int
    window_index: int
    message_ids: tuple[str, ...]
    start_at: datetime
    end_at: datetime
    n_trimmed: int
    raw_text: str = field(repr=False)

    @property
    def n_messages(self) -> int:
        return len(self.message_ids)


def render_line(message: ChunkMessage) -> str:
    """One transcript line, the paper's raw_text format: ``YYYY-MM-DD HH:MM sender: text``."""
    return f"{message.occurred_at.isoformat(sep=' ', timespec='minutes')} {message.sender}: {message.text}"


def sort_messages(messages: Iterable[ChunkMessage]) -> list[ChunkMessage]:
    """Stable ascending sort by ``(occurred_at, source_order)``."""
    return sorted(messages, key=lambda m: (m.occurred_at, m.source_order))


def split_sessions(messages: Sequence[ChunkMessage], gap_minutes: float) -> list[list[ChunkMessage]]:
    """Split sorted messages wherever consecutive messages are *more than* ``gap_minutes`` apart."""
    gap = timedelta(minutes=gap_minutes)
    sessions: list[list[ChunkMessage]] = []
    for message in messages:
        if not sessions or message.occurred_at - sessions[-1][-1].occurred_at > gap:
            sessions.append([])
        sessions[-1].append(message)
    return sessions


def window_bounds(line_lengths: Sequence[int], params: ChunkingSection) -> list[tuple[int, int, int]]:
    """Windows over one session as ``(start, end, n_trimmed)``, end exclusive.

    ``line_lengths[i]`` is the length of message i's rendered line; a window's rendered length is the
    sum of its lines plus one newline between consecutive lines.
    """
    n = len(line_lengths)
    overlap = params.window_size - params.stride
    bounds = []
    start = 0
    while start < n:
        full_end = min(start + params.window_size, n)
        end = full_end
        rendered = sum(line_lengths[start:end]) + (end - start - 1)
        while rendered > params.max_summary_input_chars and end - start > params.min_window_messages:
            end -= 1
            rendered -= line_lengths[end] + 1
        bounds.append((start, end, full_end - end))
        if params.trim_policy == "fixed":
            if start + params.window_size >= n:
                break
            start += params.stride
        else:
            if end >= n:
                break
            start = max(start + 1, min(start + params.stride, end - overlap))
    return bounds


def chunk_source(source: str, messages: Iterable[ChunkMessage], params: ChunkingSection | None = None) -> list[Chunk]:
    """Chunk one source's messages (any order in; sorted here); ``params`` default to the paper's."""
    params = ChunkingSection() if params is None else params
    return chunk_sessions(source, source_sessions(messages, params), params)


def source_sessions(messages: Iterable[ChunkMessage], params: ChunkingSection) -> list[list[ChunkMessage]]:
    """One source's messages (any order in) sorted and split into sessions (§3.2)."""
    return split_sessions(sort_messages(messages), params.session_gap_minutes)


def chunk_sessions(source: str, sessions: Sequence[Sequence[ChunkMessage]], params: ChunkingSection) -> list[Chunk]:
    """The windows of one source's sessions (:func:`source_sessions`), as :func:`chunk_source` makes them."""
    chunks: list[Chunk] = []
    for session_index, session in enumerate(sessions):
        lines = [render_line(m) for m in session]
        for window_index, (start, end, n_trimmed) in enumerate(window_bounds([len(s) for s in lines], params)):
            window = session[start:end]
            ids = tuple(m.message_id for m in window)
            chunks.append(
                Chunk(
                    chunk_id=chunk_id(source, len(chunks), ids),
                    source=source,
                    chunk_index=len(chunks),
                    session_index=session_index,
                    window_index=window_index,
                    message_ids=ids,
                    start_at=window[0].occurred_at,
                    end_at=window[-1].occurred_at,
                    n_trimmed=n_trimmed,
                    raw_text="\n".join(lines[start:end]),
                )
            )
    return chunks
