"""The ``pmrag`` command: ``pmrag study PARAMS``, ``pmrag status PARAMS``, ``pmrag ingest PATH... --db FILE``,
``pmrag demo OUT_DIR``.

Bad input (a params file, a malformed export) exits with status 2 and one line naming the file and the
line or key; no traceback.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from pmrag.core.errors import PmragError


def _study(args) -> int:
    from pmrag.study.runner import run_study

    run = run_study(args.params, progress=not args.quiet, fresh=args.fresh, jobs=args.jobs)
    executed = len(run.notebook_seconds)
    print(f"study done: {executed} notebook(s) executed, {len(run.notebooks) - executed} already current, "
          f"in {run.notebooks[0].parent}")
    return 0


def _status(args) -> int:
    from pmrag.study.runner import status_lines

    print("\n".join(status_lines(args.params)))
    return 0


def _ingest(args) -> int:
    from pmrag.core import store
    from pmrag.ingest import store as ingest_store
    from pmrag.ingest import read_source

    engine = store.open_store(args.db)
    for path in args.paths:
        batch = read_source(Path(path), args.format, permissive=args.permissive)
        report = ingest_store.store_batch(engine, batch, store.file_sha256(path))
        print(report.line())
        for rejected in batch.rejected:
            print(f"  rejected {rejected.kind} at {rejected.location}: {rejected.reason}")
    return 0


def _demo(args) -> int:
    from pmrag.demo import generate_corpus

    manifest = generate_corpus(Path(args.out_dir), seed=args.seed, n_messages=args.n_messages, n_questions=args.n_questions)
    print(f"wrote {manifest['n_messages']} messages in {len(manifest['files'])} sources and "
          f"{manifest['n_questions']} questions to {args.out_dir}")
    return 0


def build_parser() -> argparse.ArgumentParser:
    from pmrag.core.params import SyntheticSection

    parser = argparse.ArgumentParser(prog="pmrag", description="Personal Memory RAG retrieval workbench")
    sub = parser.add_subparsers(dest="command", required=True)

    study = sub.add_parser("study", help="execute the numbered notebooks on a params file")
    study.add_argument("params", help="params YAML, e.g. params/demo.yaml")
    study.add_argument("--quiet", action="store_true", help="no progress display")
    study.add_argument("--fresh", action="store_true",
                       help="recompute every stage (the content-addressed embedding cache is kept)")
    study.add_argument("--jobs", type=int, default=None, help="notebooks executed at once (default: cores + 1, at most 4)")
    study.set_defaults(func=_study)

    status = sub.add_parser("status", help="each stage of a study: cached, stale (and why) or missing; computes nothing")
    status.add_argument("params", help="params YAML, e.g. params/demo.yaml")
    status.set_defaults(func=_status)

    ingest = sub.add_parser("ingest", help="store chat histories (and LoCoMo questions) in a SQLite database")
    ingest.add_argument("paths", nargs="+", metavar="PATH")
    ingest.add_argument("--db", required=True, help="SQLite database file (created if missing)")
    ingest.add_argument("--format", default="auto", choices=["auto", "line-json", "line-txt", "locomo", "questions-json"])
    ingest.add_argument("--permissive", action="store_true", help="record and skip malformed records instead of stopping")
    ingest.set_defaults(func=_ingest)

    demo = sub.add_parser("demo", help="write the embedded synthetic corpus (paper JSON format + questions)")
    demo.add_argument("out_dir")
    synthetic = SyntheticSection()
    demo.add_argument("--seed", type=int, default=synthetic.seed)
    demo.add_argument("--n-messages", type=int, default=synthetic.n_messages)
    demo.add_argument("--n-questions", type=int, default=synthetic.n_questions)
    demo.set_defaults(func=_demo)
    return parser


def main(argv=None) -> int:
    for stream in (sys.stdout, sys.stderr):
        if hasattr(stream, "reconfigure"):
            stream.reconfigure(errors="backslashreplace")  # a console that cannot print Japanese must not crash a report
    args = build_parser().parse_args(argv)
    try:
        return args.func(args)
    except PmragError as exc:
        print(f"pmrag {args.command}: error: {exc}", file=sys.stderr)
        return exc.exit_code


if __name__ == "__main__":
    sys.exit(main())
