"""Streaming ingest of large LINE ``.txt`` exports: peak memory and seconds (memory stays bounded whatever the file's size).

Writes LINE ``.txt`` exports of the given sizes (default 200 MB and 1 GB; Japanese, tab-separated, with
quoted multi-line messages, stickers, calls and notices) into a temporary folder, a block at a time, then
ingests each into a fresh SQLite database in a child process, through the path behind ``pmrag ingest``:
``--via cli`` runs ``python -m pmrag ingest FILE --db DB``; ``--via pipeline`` calls
:func:`pmrag.ingest.pipeline.ingest_files` (what the CLI and the study's ingest stage run) with its default
workers.  While the child runs, the sums of RSS and of PSS (pages shared after fork split between the
processes, as in ``bench_ingest_chunk.py``) over its process tree are sampled every 20 ms; the peaks and
the seconds are printed, one line per file.  Target: a peak of at most 300 MB whatever the file size.

    .venv/bin/python benchmarks/bench_ingest_stream.py [--sizes-mb 200 1024] [--via cli|pipeline] [--dialect tab|space]
"""

from __future__ import annotations

import argparse
import random
import shutil
import subprocess
import sys
import tempfile
import time
from datetime import date, timedelta
from pathlib import Path

from proctree import TreeMemory

REPO = Path(__file__).resolve().parents[1]

_WORDS = ("今日", "明日", "ご飯", "行く", "楽しみ", "了解", "ありがとう", "駅", "集合", "映画", "仕事", "終わった",
          "雨", "写真", "送る", "また", "ね", "です", "ok", "see you", "meeting", "at", "7pm", "👍", "笑")
_SENDERS = ("山田", "ゆい", "Ken Sato", "たろう")
_WEEKDAYS = "月火水木金土日"


def _message_texts(rng: random.Random, count: int) -> list[str]:
    """A pool of message texts of varied lengths (about 8 to 300 characters, mostly short)."""
    return ["".join(rng.choice(_WORDS) for _ in range(int(rng.paretovariate(1.2)) % 60 + 4)) for _ in range(count)]


def write_export(path: Path, target_bytes: int, *, dialect: str = "tab", seed: int = 11) -> int:
    """Write a LINE ``.txt`` export of about ``target_bytes`` to ``path`` a day at a time; returns its messages.

    Each day draws its messages from a pool of day bodies generated once (writing stays I/O-bound)."""
    rng = random.Random(seed)
    texts = _message_texts(rng, 5000)
    separator = "\t" if dialect == "tab" else " "
    bodies = [_day_body(rng, texts, separator) for _ in range(400)]
    day, written, n_messages = date(2015, 1, 1), 0, 0
    with open(path, "w", encoding="utf-8", newline="\n") as out:
        out.write("[LINE] 山田とのトーク履歴\n保存日時：2024/04/10 20:15\n\n")
        while written < target_bytes:
            body, count = rng.choice(bodies)
            block = f"{day:%Y/%m/%d}({_WEEKDAYS[day.weekday()]})\n{body}\n\n"
            out.write(block)
            written += len(block.encode("utf-8"))
            n_messages += count
            day += timedelta(days=1)
    return n_messages


def _day_body(rng: random.Random, texts: list[str], separator: str) -> tuple[str, int]:
    """One day's message lines (20 to 400 messages, times rising) and its message count."""
    lines, minute = [], rng.randrange(0, 120)
    for _ in range(rng.randrange(20, 400)):
        minute = min(minute + rng.randrange(0, 4), 23 * 60 + 59)
        lines.append(_message_line(rng, texts, f"{minute // 60:02d}:{minute % 60:02d}", separator))
    return "\n".join(lines), len(lines)


def _message_line(rng: random.Random, texts: list[str], clock: str, separator: str) -> str:
    sender = rng.choice(_SENDERS) if separator == "\t" else rng.choice(_SENDERS).replace(" ", "")
    roll = rng.random()
    if roll < 0.04:
        return f"{clock}{separator}{sender}{separator}[スタンプ]"
    if roll < 0.05:
        return f"{clock}{separator}{sender}{separator}☎ 通話時間 {rng.randrange(1, 60)}:{rng.randrange(10, 60)}"
    if roll < 0.055:
        return f"{clock}{separator}{sender}がメッセージの送信を取り消しました"
    if roll < 0.09:
        body = "\n".join(rng.choice(texts) for _ in range(rng.randrange(2, 5)))
        return f'{clock}{separator}{sender}{separator}"{body}"' if separator == "\t" else f"{clock} {sender} {body}"
    return f"{clock}{separator}{sender}{separator}{rng.choice(texts)}"


_PIPELINE = """
import sys
from pathlib import Path
from pmrag.core import store
from pmrag.ingest.pipeline import ingest_files
engine = store.open_store(sys.argv[2])
for batch, report in ingest_files(engine, [(Path(sys.argv[1]), "auto")]):
    print(report.line())
"""


def ingest(path: Path, db: Path, via: str) -> tuple[float, float, float, str]:
    """Ingest ``path`` into a fresh ``db`` in a child process: (seconds, peak RSS MB, peak PSS MB, its report)."""
    command = ([sys.executable, "-m", "pmrag", "ingest", str(path), "--db", str(db)] if via == "cli"
               else [sys.executable, "-c", _PIPELINE, str(path), str(db)])
    started = time.perf_counter()
    child = subprocess.Popen(command, cwd=REPO, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    with TreeMemory(child.pid) as memory:
        output, _ = child.communicate()
    seconds = time.perf_counter() - started
    if child.returncode:
        raise SystemExit(f"ingest of {path.name} failed ({child.returncode}):\n{output}")
    return seconds, memory.peak_rss_kb / 1024, memory.peak_pss_kb / 1024, output.strip().splitlines()[-1]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes-mb", type=int, nargs="+", default=[200, 1024])
    parser.add_argument("--via", choices=["cli", "pipeline"], default="cli")
    parser.add_argument("--dialect", choices=["tab", "space"], default="tab")
    parser.add_argument("--tmp", default=None, help="folder for the generated files (default: the system's)")
    args = parser.parse_args()
    folder = Path(tempfile.mkdtemp(prefix="pmrag-bench-stream-", dir=args.tmp))
    try:
        for size_mb in args.sizes_mb:
            path = folder / f"line_{size_mb}mb.txt"
            n_messages = write_export(path, size_mb << 20, dialect=args.dialect)
            seconds, rss_mb, pss_mb, report = ingest(path, folder / f"line_{size_mb}mb.sqlite", args.via)
            print(f"{path.stat().st_size / 2**20:7.0f} MB {args.dialect}, {n_messages:,} messages, via {args.via}: "
                  f"peak RSS {rss_mb:6.0f} MB, peak PSS {pss_mb:6.0f} MB (process tree), {seconds:6.1f} s")
            print(f"    {report.split(': ', 1)[1]}")
            for leftover in folder.iterdir():
                leftover.unlink()
    finally:
        shutil.rmtree(folder, ignore_errors=True)


if __name__ == "__main__":
    main()
