"""`pmrag study` prints a model step's progress as a few lines: the first, a change of waiting, every so often,
the last."""

import io

from pmrag.cli import StepProgressLines
from pmrag.represent.llm import StepProgress


def progress(done, waiting=None, total=10):
    return StepProgress("summaries", done, total, done, done, 0, 2.0, (total - done) / 2.0, 4, waiting)


def test_progress_lines_are_printed_at_the_start_on_a_change_of_waiting_every_so_often_and_at_the_end():
    out, now = io.StringIO(), [0.0]
    lines = StepProgressLines(every_s=10, out=out, clock=lambda: now[0])
    for done, waiting, at in [(1, None, 0), (2, None, 1), (3, "retry-after", 2), (4, "retry-after", 3),
                              (5, None, 4), (6, None, 5), (7, None, 15), (8, None, 16), (10, None, 17)]:
        now[0] = at
        lines(progress(done, waiting))
    printed = out.getvalue().splitlines()
    assert [line.split(": ")[1].split(" ")[0] for line in printed] == ["1/10", "3/10", "5/10", "7/10", "10/10"]
    assert printed[1] == "[calls] summaries: 3/10 (ok 3, error 0), 2.0/s, ETA 4 s, 4 in flight, waiting: retry-after"
    assert printed[-1].startswith("[calls] summaries: 10/10 (ok 10, error 0), 2.0/s, ETA 0 s")
