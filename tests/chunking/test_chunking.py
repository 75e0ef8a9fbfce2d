"""The paper's chunking rules (§3.2), one test per clause, edges included."""

from datetime import datetime, timedelta

import pytest
from pydantic import ValidationError

from pmrag.chunking.windows import (
    ChunkMessage, chunk_source, render_line, sort_messages, split_sessions, window_bounds,
)
from pmrag.core.ids import chunk_id
from pmrag.core.params import ChunkingSection

T0 = datetime(2024, 4, 10, 20, 0, 0)


def make_messages(n, *, source="s", gap=timedelta(minutes=1), text="hi", start=T0):
    return [
        ChunkMessage(message_id=f"m{i:05d}", source=source, source_order=i, occurred_at=start + i * gap, sender="A", text=text)
        for i in range(n)
    ]


def windows(n, **params):
    return [(s, e) for s, e, _ in window_bounds([5] * n, ChunkingSection(**params))]


@pytest.mark.parametrize(
    "n, expected",
    [
        (1, [(0, 1)]),
        (42, [(0, 42)]),
        (43, [(0, 42), (36, 43)]),
        (78, [(0, 42), (36, 78)]),
        (79, [(0, 42), (36, 78), (72, 79)]),
    ],
)
def test_window_sizes_and_six_message_overlap(n, expected):
    assert windows(n) == expected


def test_adjacent_windows_overlap_by_six_messages():
    bounds = windows(200)
    for (s1, e1), (s2, _) in zip(bounds, bounds[1:]):
        assert e1 - s2 == 6
    assert bounds[-1][1] == 200


def test_gap_of_exactly_180_minutes_does_not_split():
    msgs = [make_messages(1)[0], ChunkMessage("m1", "s", 1, T0 + timedelta(minutes=180), "A", "x")]
    assert [len(s) for s in split_sessions(msgs, 180)] == [2]


def test_gap_of_180_minutes_plus_one_second_splits():
    msgs = [make_messages(1)[0], ChunkMessage("m1", "s", 1, T0 + timedelta(minutes=180, seconds=1), "A", "x")]
    assert [len(s) for s in split_sessions(msgs, 180)] == [1, 1]


def test_sort_is_by_time_then_source_order_and_stable():
    a = ChunkMessage("a", "s", 5, T0, "A", "")
    b = ChunkMessage("b", "s", 2, T0, "A", "")
    c = ChunkMessage("c", "s", 1, T0 + timedelta(seconds=1), "A", "")
    d = ChunkMessage("d", "s", 2, T0, "B", "")  # same key as b: keeps input order after b
    assert [m.message_id for m in sort_messages([c, a, b, d])] == ["b", "d", "a", "c"]


def test_no_window_crosses_a_session_boundary():
    first = make_messages(50)
    second = make_messages(10, start=first[-1].occurred_at + timedelta(hours=4))
    second = [ChunkMessage(f"n{i}", "s", 100 + i, m.occurred_at, "A", "hi") for i, m in enumerate(second)]
    chunks = chunk_source("s", first + second)
    assert [(c.session_index, c.n_messages) for c in chunks] == [(0, 42), (0, 14), (1, 10)]
    assert all(len({mid[0] for mid in c.message_ids}) == 1 for c in chunks)


def test_trimming_drops_messages_from_the_end_until_the_summary_input_fits():
    # Each rendered line is "2024-04-10 20:00 A: " (20 chars) + text; 10 lines of 500-char text = 5,209 chars.
    msgs = make_messages(10, text="x" * 500)
    line = len(render_line(msgs[0]))
    assert line == 520
    [chunk] = chunk_source("s", msgs)
    # 9 lines: 9*520 + 8 newlines = 4,688 <= 5,000; 10 lines would be 5,209.
    assert chunk.n_messages == 9 and chunk.n_trimmed == 1
    assert len(chunk.raw_text) == 9 * 520 + 8


def test_trimming_boundary_is_inclusive_at_the_limit():
    params = ChunkingSection(max_summary_input_chars=2 * 10 + 1)
    assert window_bounds([10, 10], params) == [(0, 2, 0)]
    params = ChunkingSection(max_summary_input_chars=2 * 10)
    assert window_bounds([10, 10], params) == [(0, 1, 1)]


def test_a_window_never_shrinks_below_one_message():
    msgs = make_messages(3, text="y" * 9000)
    chunks = chunk_source("s", msgs)
    assert [c.n_messages for c in chunks] == [1]
    assert chunks[0].n_trimmed == 2
    assert len(chunks[0].raw_text) == 9020  # over the limit: a single-message chunk, as the paper's 10,031 max


def test_fixed_stride_leaves_trimmed_messages_out_and_resume_keeps_them():
    lengths = [100] * 30 + [3000] + [100] * 49  # 80 messages; window 0 must drop the long one and all after it
    fixed = window_bounds(lengths, ChunkingSection())
    assert fixed == [(0, 30, 12), (36, 78, 0), (72, 80, 0)]
    covered = {i for s, e, _ in fixed for i in range(s, e)}
    assert covered == set(range(80)) - set(range(30, 36))
    resume = window_bounds(lengths, ChunkingSection(trim_policy="resume"))
    assert resume[1][0] == 30 - 6
    covered = {i for s, e, _ in resume for i in range(s, e)}
    assert covered == set(range(80))


def test_chunk_ids_follow_the_paper_and_are_stable():
    msgs = make_messages(43)
    chunks = chunk_source("family", msgs)
    assert chunks[1].chunk_id == chunk_id("family", 1, tuple(f"m{i:05d}" for i in range(36, 43)))
    assert [c.chunk_id for c in chunk_source("family", list(reversed(msgs)))] == [c.chunk_id for c in chunks]
    assert chunk_source("friends", msgs)[0].chunk_id != chunks[0].chunk_id


def test_raw_text_is_one_line_per_message_in_chunk_order():
    msgs = [ChunkMessage("a", "s", 0, datetime(2026, 4, 10, 20, 15, 59), "A", "明日何時?"),
            ChunkMessage("b", "s", 1, datetime(2026, 4, 10, 20, 16), "B", "18時くらい")]
    [chunk] = chunk_source("s", msgs)
    assert chunk.raw_text == "2026-04-10 20:15 A: 明日何時?\n2026-04-10 20:16 B: 18時くらい"


@pytest.mark.parametrize("bad, key", [(dict(stride=0), "stride"), (dict(stride=43), "stride"),
                                      (dict(window_size=0), "window_size"), (dict(trim_policy="x"), "trim_policy"),
                                      (dict(min_window_messages=0), "min_window_messages"),
                                      (dict(min_window_messages=43), "min_window_messages"),
                                      (dict(session_gap_minutes=-1), "session_gap_minutes"),
                                      (dict(window_size=True), "window_size")])
def test_invalid_params_are_rejected_up_front(bad, key):
    with pytest.raises(ValidationError) as info:   # a ValueError naming the key
        ChunkingSection(**bad)
    [error] = info.value.errors()
    named = ".".join(map(str, error["loc"])) or error["msg"].removeprefix("Value error, ").split()[0]
    assert named == key
