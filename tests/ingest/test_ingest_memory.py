"""Ingest with bounded memory and honest counts: a large LINE ``.txt`` export is
streamed (a 200 MB file used to peak at 2 GB), the streamed store is the one a whole-file read gives, a
strict error deep in a stream still names its line and stores nothing, and two ingests into one database
at the same time both report counts that reconcile (one used to report "already present -156900")."""

from __future__ import annotations

import re
import sqlite3
import subprocess
import sys
import textwrap
from datetime import date, timedelta
from pathlib import Path

import pytest

from pmrag.core import store
from pmrag.core.errors import InputError
from pmrag.ingest import pipeline, read_source
from pmrag.ingest.store import message_rows

FIXTURES = Path(__file__).parents[1] / "fixtures"


def write_export(path: Path, megabytes: float, *, chat: str = "山田", bad_line_after_mb: float | None = None) -> int:
    """A LINE ``.txt`` export of about ``megabytes``, written a day at a time: each day 60 short messages and
    12 long ones (about 2 KB each); returns the number of messages.  ``bad_line_after_mb`` puts one
    unrecognisable line after that many megabytes."""
    short = [f"{h:02d}:{m:02d}\t{'山田' if m % 3 else 'ゆい'}\t{'了解、駅で' * (1 + m % 4)}{m}"
             for h in (8, 9, 10, 11, 12) for m in range(0, 60, 5)]
    long = [f"{h:02d}:{m:02d}\tゆい\t" + "今日は駅で集合ね、" * 75 + str(m) for h in (20, 21) for m in range(0, 60, 10)]
    body = "\n".join(short + long)
    day, written, messages = date(2000, 1, 1), 0, 0
    with open(path, "w", encoding="utf-8", newline="\n") as out:
        out.write(f"[LINE] {chat}とのトーク履歴\n\n")
        while written < megabytes * 2**20:
            if bad_line_after_mb is not None and written >= bad_line_after_mb * 2**20:
                out.write("これは何の行？\n")
                bad_line_after_mb = None
            block = f"{day:%Y/%m/%d}(月)\n{body}\n\n"
            out.write(block)
            written += len(block.encode("utf-8"))
            messages += len(short) + len(long)
            day += timedelta(days=1)
    return messages


_MEASURE = textwrap.dedent("""
    import sys
    from pathlib import Path
    from pmrag.core import store
    from pmrag.ingest.pipeline import ingest_files

    def rss_mb():
        with open("/proc/self/status") as status:
            return next(int(line.split()[1]) for line in status if line.startswith("VmRSS:")) / 1024

    def status_mb(field):
        with open("/proc/self/status") as status:
            return next(int(line.split()[1]) for line in status if line.startswith(field + ":")) / 1024

    engine = store.open_store(sys.argv[2])
    baseline = rss_mb()
    # ru_maxrss survives exec, so a child of a big pytest process would report the parent's size: reset the
    # kernel's high-water mark instead and read it back (VmHWM)
    with open("/proc/self/clear_refs", "w") as refs:
        refs.write("5")
    [(batch, report)] = ingest_files(engine, [(Path(sys.argv[1]), "auto")])
    peak = status_mb("VmHWM")
    print(baseline, peak, report.read, report.stored)
""")


@pytest.mark.integration
def test_a_large_export_is_ingested_in_bounded_memory(tmp_path):
    """30 MB of messages: the whole-file read grew by about 180 MB over the baseline, the stream by about 50
    (a 32 MiB SQLite page cache and a few chunks of rows, whatever the file size)."""
    path = tmp_path / "big.txt"
    n_messages = write_export(path, 30)
    done = subprocess.run([sys.executable, "-c", _MEASURE, str(path), str(tmp_path / "big.sqlite")],
                          capture_output=True, text=True, timeout=300, check=True)
    baseline, peak, read, stored = (float(x) for x in done.stdout.split())
    assert read == stored == n_messages
    assert peak - baseline < 120, f"peak {peak:.0f} MB over a baseline of {baseline:.0f} MB"


REPORT = re.compile(r"read (\d+), stored (\d+), already present (-?\d+), rejected (\d+)")


@pytest.mark.integration
def test_two_ingests_into_one_database_at_once_both_report_counts_that_reconcile(tmp_path):
    """Each ingest used to count its stored messages as COUNT(*) after minus before, which took in the other
    ingest's messages when they committed in between: "stored 43632, already present -21816"."""
    files = [tmp_path / "a.txt", tmp_path / "b.txt"]
    sizes = [write_export(files[0], 6, chat="山田"), write_export(files[1], 6, chat="ゆい")]
    db = tmp_path / "shared.sqlite"
    store.open_store(db).dispose()   # the schema exists: creating it concurrently is another test's subject
    ingests = [subprocess.Popen([sys.executable, "-m", "pmrag", "ingest", str(path), "--db", str(db)],
                                stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True) for path in files]
    outputs = [ingest.communicate(timeout=300)[0] for ingest in ingests]
    assert [ingest.returncode for ingest in ingests] == [0, 0], outputs
    counts = [tuple(int(n) for n in REPORT.search(output).groups()) for output in outputs]
    for (read, stored, already, rejected), size in zip(counts, sizes):
        assert min(read, stored, already, rejected) >= 0
        assert read == stored + already + rejected == size
        assert (stored, already) == (size, 0)   # different chats: nothing of one is in the other
    with store.open_store(db).connect() as conn:
        assert store.count_rows(conn, store.messages) == sum(sizes)


# --- the streamed store is the whole-file store ---------------------------------------------------


def stored_messages(db: Path) -> list[tuple]:
    """Every stored message row as SQLite holds it, in message-ID order."""
    with sqlite3.connect(db) as conn:
        return conn.execute("SELECT * FROM messages ORDER BY message_id").fetchall()


@pytest.mark.parametrize("workers", [0, 2])
def test_streamed_chunks_store_what_a_whole_file_read_stores(tmp_path, monkeypatch, workers):
    monkeypatch.setattr(pipeline, "ROWS_PER_CHUNK", 4)   # every file crosses over in many chunks
    permissive = tmp_path / "bad_lines.txt"
    permissive.write_bytes((FIXTURES / "line_txt" / "bad_lines.txt").read_bytes())
    jobs = [(FIXTURES / "line_txt" / "ja_tab.txt", "line-txt"), (FIXTURES / "line_txt" / "ja_space.txt", "auto"),
            (FIXTURES / "line_json" / "family.json", "line-json"), (permissive, "line-txt"),
            (FIXTURES / "line_txt" / "header_only.txt", "auto")]
    engine = store.open_store(tmp_path / "streamed.sqlite")
    results = list(pipeline.ingest_files(engine, jobs, permissive=True, workers=workers))

    whole = [read_source(path, fmt, permissive=True) for path, fmt in jobs]
    expected = sorted(row for batch in whole for row in message_rows(batch))
    assert stored_messages(tmp_path / "streamed.sqlite") == expected and len(expected) > 30
    for (batch, report), reference in zip(results, whole):
        assert (batch.records_read, batch.dialect, batch.encoding, batch.rejected) == (
            reference.records_read, reference.dialect, reference.encoding, reference.rejected)
        assert report.read == report.stored + report.already_present + report.rejected
        assert report.stored == len(reference.messages) and batch.empty == (not reference.messages)
    assert [batch.empty for batch, _ in results] == [False, False, False, False, True]


@pytest.mark.parametrize("workers", [0, 2])
def test_a_strict_error_deep_in_a_streamed_file_names_its_line_and_stores_nothing_of_it(tmp_path, monkeypatch,
                                                                                       workers):
    monkeypatch.setattr(pipeline, "ROWS_PER_CHUNK", 100)
    good, bad = tmp_path / "good.txt", tmp_path / "bad.txt"
    good_messages = write_export(good, 0.2, chat="ゆい")
    write_export(bad, 0.5, bad_line_after_mb=0.4)
    bad_line = bad.read_text(encoding="utf-8").split("\n").index("これは何の行？") + 1
    engine = store.open_store(tmp_path / "s.sqlite")
    stored = []
    with pytest.raises(InputError) as caught:
        for batch, report in pipeline.ingest_files(engine, [(good, "auto"), (bad, "auto")], workers=workers):
            stored.append(report.stored)
    assert caught.value.location == f"line {bad_line}"
    assert bad_line > 10 * pipeline.ROWS_PER_CHUNK   # many chunks of the bad file were inserted before it
    assert caught.value.path == str(bad)
    assert stored == [good_messages]
    with engine.connect() as conn:
        assert store.count_rows(conn, store.messages) == good_messages   # the bad file's transaction rolled back
        assert [row.path for row in conn.execute(store.files.select())] == [str(good)]
