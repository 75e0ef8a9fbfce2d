"""The ``pmrag`` command: ``pmrag study PARAMS``, ``pmrag status PARAMS``, ``pmrag graph PARAMS``,
``pmrag cohort COHORT`` (one study per participant on Dask, pooled),
``pmrag ingest PATH... --db FILE``, ``pmrag demo OUT_DIR``, and the gold-annotation steps (000 §4.2–4.3):
``pmrag candidates FILE PARAMS|--db FILE``, ``pmrag candidates --propose PARAMS``, ``pmrag pool PARAMS``,
``pmrag judgments export PARAMS|--db FILE``, ``pmrag judgments agreement PARAMS|--db FILE``.

Bad input (a params file, a malformed export, a database that cannot be the store) exits with status 2 and one
line naming the file and the line or key; no traceback.  ``pmrag study --max-calls N`` stopped before a model stage
that would make more than ``N`` remote calls in the run exits with status 3 and one line (rerun to resume).  Ctrl-C (SIGINT) prints one line and exits with status
130: what was committed stays, and running the command again resumes.  Any other error is one line too, with
exit status 1 (its traceback when the environment sets ``PMRAG_TRACEBACK=1``); it never quotes a database
statement's parameters or an exception's text, which may hold message text.
"""

from __future__ import annotations

import argparse
import os
import sys
from contextlib import ExitStack, contextmanager
from pathlib import Path

from pmrag.core.errors import PmragError
from pmrag.core.memory import no_collection_at_exit
from pmrag.core.text import one_line


class StepProgressLines:
    """Prints a model step's progress (:class:`~pmrag.represent.llm.StepProgress`) to stderr as one line: when calls
    start or stop waiting on a rate limit, at most every ``every_s`` seconds otherwise, and when the step is done."""

    def __init__(self, every_s: float = 10.0, out=None, clock=None):
        import time

        self.every_s, self.out, self.clock = every_s, out or sys.stderr, clock or time.monotonic
        self._last: dict[str, tuple[float, str | None]] = {}

    def __call__(self, progress) -> None:
        now = self.clock()
        last_at, last_waiting = self._last.get(progress.title, (None, None))
        finished = progress.total is not None and progress.done >= progress.total
        if (last_at is None and not finished) or progress.waiting != last_waiting or finished or \
                now - last_at >= self.every_s:
            print(f"[calls] {progress.line()}", file=self.out, flush=True)
            self._last[progress.title] = (now, progress.waiting)
        if finished:
            self._last.pop(progress.title, None)


def _study(args) -> int:
    from pmrag.core.cache import one_warning_per_file
    from pmrag.represent.llm import reporting_progress
    from pmrag.study.runner import run_study

    with ExitStack() as stack:
        stack.enter_context(one_warning_per_file())   # each stage opens the embedding cache anew: one line per file
        if not args.quiet:
            stack.enter_context(reporting_progress(StepProgressLines()))
        if args.max_calls is not None and args.max_calls < 0:
            raise PmragError(f"--max-calls: an integer ≥ 0, got {args.max_calls}")
        run = run_study(args.params, progress=not args.quiet, fresh=args.fresh, jobs=args.jobs, force=args.force,
                        dry_run=args.dry_run, max_calls=args.max_calls, fork_kernels=not args.no_kernel_forks)
    if run.dry_run:
        print("\n".join(run.costs))
        print("dry run: no model was called; run without --dry-run to make these calls")
        return 0
    executed = len(run.notebook_seconds)
    print(f"study done: {executed} notebook(s) executed, {len(run.notebooks) - executed} already current, "
          f"in {run.notebooks[0].parent}")
    return 0


def _cohort(args) -> int:
    from pmrag.cohort.run import run_cohort
    from pmrag.core.cache import one_warning_per_file

    with one_warning_per_file():
        run = run_cohort(args.params, progress=not args.quiet)
    folder = next(iter(run.tables.values())).parent
    notebooks = f"; pooled-analysis notebook(s) in {next(iter(run.notebooks.values())).parent}" if run.notebooks else ""
    print(f"cohort done: {len(run.seconds)} participant(s) finished, {len(run.failed)} failed; tables in {folder}"
          f"{notebooks}")
    return 1 if run.failed else 0


def _status(args) -> int:
    from pmrag.study.runner import cost_status_lines, status_lines

    print("\n".join(status_lines(args.params) + [""] + cost_status_lines(args.params)))
    return 0


def _graph(args) -> int:
    from pmrag.study.runner import draw_graph

    for path in draw_graph(args.params, Path(args.out) if args.out else None):
        print(path)
    return 0


def _ingest(args) -> int:
    from pmrag.core import store
    from pmrag.core.params import DatasetSection

    with _study_store_lock(Path(args.db)):
        engine = store.open_store(args.db)
        options = DatasetSection(encoding=args.encoding, merge_exports=not args.keep_duplicates)
        _ingest_all(args, engine, options)
    return 0


@contextmanager
def _study_store_lock(db: Path):
    """A study's store (its run folder has the lock file ``pmrag study`` takes) is written only while no study
    runs on it: the lock is held for the ingest, and refused in one line when a study holds it."""
    from pmrag.study.runner import LOCK_FILE, RunInUse, run_folder_lock

    folder = db.resolve().parent
    with ExitStack() as held:
        if (folder / LOCK_FILE).is_file():
            try:
                held.enter_context(run_folder_lock(folder))
            except RunInUse as exc:
                raise RunInUse(f"{db}: the store of run folder {folder}, where a pmrag study is running (pid "
                               f"{exc.holder}); ingest into it once the study has finished") from None
        yield


def _ingest_all(args, engine, options) -> None:
    from sqlalchemy.exc import DBAPIError

    from pmrag.core import store
    from pmrag.ingest.pipeline import ingest_files

    jobs = [(Path(path), args.format) for path in args.paths]
    try:
        for batch, report in ingest_files(engine, jobs, permissive=args.permissive, options=options):
            print(report.line(), flush=True)
            for rejected in batch.rejected:
                if rejected.kind == "evidence":   # an evidence id read as its one reading, or dropped: not an error
                    print(f"  evidence at {rejected.location}: {rejected.reason}")
                else:
                    print(f"  rejected {rejected.kind} at {rejected.location}: {rejected.reason}")
            if batch.empty:
                print(f"pmrag ingest: warning: {batch.path}: no message or question found; is it a chat export?",
                      file=sys.stderr, flush=True)
    except DBAPIError as exc:
        raise store.store_error(args.db, exc) from None


def _demo(args) -> int:
    from pmrag.demo import generate_corpus, max_questions, min_messages

    if not 1 <= args.n_questions <= max_questions():
        raise PmragError(f"--n-questions: from 1 to {max_questions()}, the distinct questions the demo defines, "
                         f"got {args.n_questions}")
    if args.n_messages < min_messages(args.n_questions, args.seed):
        raise PmragError(f"--n-messages: too few for {args.n_questions} questions: the demo needs at least "
                         f"{min_messages(args.n_questions, args.seed)} messages, got {args.n_messages}")
    manifest = generate_corpus(Path(args.out_dir), seed=args.seed, n_messages=args.n_messages, n_questions=args.n_questions)
    print(f"wrote {manifest['n_messages']} messages in {len(manifest['files'])} sources and "
          f"{manifest['n_questions']} questions to {args.out_dir}")
    return 0


def _gold_store(args):
    """The store a gold-annotation command works on: ``--db`` or the study's (its run folder's) store."""
    from pmrag.core import store

    if bool(args.params) == bool(args.db):
        raise PmragError("give a params file or --db STORE (one of them)")
    if args.db:
        return store.open_store(args.db)
    from pmrag.study.params import load_params
    from pmrag.study.runfolder import STORE_FILE

    return store.open_store(load_params(args.params).run_dir / STORE_FILE)


def _candidates(args) -> int:
    from pmrag.annotate.candidates import accept_candidate, add_typed_questions, read_candidates

    if args.propose:
        return _propose(args)
    for flag, value in (("--limit", args.limit), ("--max-calls", args.max_calls), ("--dry-run", args.dry_run or None)):
        if value is not None:
            raise PmragError(f"{flag}: only with --propose PARAMS")
    if not args.file:
        raise PmragError("give a typed-questions file (.csv, .yaml), or --propose PARAMS for a model's proposals")
    engine = _gold_store(args)
    report = add_typed_questions(engine, args.file, permissive=args.permissive)
    print(report.line())
    for location, reason in report.problems:
        print(f"  rejected at {location}: {reason}")
    if args.accept:
        proposed = read_candidates(engine, ("proposed",))
        mine = proposed[proposed["batch"] == report.batch]["candidate_id"].tolist()
        for candidate in mine:
            accept_candidate(engine, candidate)
        print(f"accepted {len(mine)} proposed candidate(s) of {report.batch}")
    return 0


def _propose(args) -> int:
    """``pmrag candidates --propose PARAMS``: a model proposes question candidates from the study's messages."""
    from pmrag.annotate.propose import propose_candidates
    from pmrag.represent.llm import reporting_progress
    from pmrag.study import Study
    from pmrag.study.costs import cost_lines, proposal_cost
    from pmrag.study.runner import CallBudgetReached

    if args.file or args.params or args.db:
        raise PmragError("--propose PARAMS reads the study's messages and stores into its store: give no file, "
                         "second params file or --db with it")
    if args.accept or args.permissive:
        raise PmragError("--accept and --permissive are for typed files; a model's proposals are reviewed one by one "
                         "(accepted, edited or dropped with a reason)")
    if args.limit is not None and args.limit < 1:
        raise PmragError(f"--limit: an integer ≥ 1, got {args.limit}")
    if args.max_calls is not None and args.max_calls < 0:
        raise PmragError(f"--max-calls: an integer ≥ 0, got {args.max_calls}")
    study = Study.from_params(args.propose)
    study.get("ingest")              # computed if the store does not hold it yet
    params = study.params
    cost = proposal_cost(study.store, params, args.limit)
    if args.dry_run or not args.quiet:
        print("\n".join(cost_lines([cost], params.prices, "the batches of the store's messages")))
    if args.dry_run:
        print("dry run: no model was called; run without --dry-run to make these calls")
        return 0
    if args.max_calls is not None and cost.calls > args.max_calls:
        raise CallBudgetReached(f"--max-calls {args.max_calls}: the proposals would make {cost.calls} call(s); "
                                "nothing was called (--limit N sends the first N batches only)")
    with ExitStack() as stack:
        if not args.quiet:
            stack.enter_context(reporting_progress(StepProgressLines()))
        proposal = propose_candidates(study.store, params.candidates, summarizer=params.summarizer,
                                      prompts=params.representations.prompts, allow_remote=params.allow_remote,
                                      proxy=params.proxy, limit=args.limit, progress=not args.quiet)
    print("\n".join(proposal.lines()))
    for location, reason in proposal.candidates.problems:
        print(f"  rejected {location}: {reason}")
    return 0


def _pool(args) -> int:
    from datetime import timedelta

    from pmrag.annotate.candidates import read_candidates, read_hints
    from pmrag.annotate.pooling import build_pool, pool_sizes, write_pool
    from pmrag.annotate.recover import hint_chunks, match_hints, recovery_report, store_matches
    from pmrag.study import Study

    if args.depth is not None and args.depth < 1:
        raise PmragError(f"--depth: an integer ≥ 1, got {args.depth}")
    if args.seed is not None and args.seed < 0:
        raise PmragError(f"--seed: an integer ≥ 0, got {args.seed}")
    if not args.name or any(ch.isspace() for ch in args.name):
        raise PmragError(f"--name: a pool name is one word without whitespace, got {args.name!r}")
    retrievers = [_retriever_name(name) for name in args.retrievers]
    study = Study.from_params(args.params)
    depth = study.params.pool.depth if args.depth is None else args.depth
    seed = study.params.pool.seed if args.seed is None else args.seed
    rankings, recovered = {}, None
    if args.of in ("candidates", "both"):
        candidates = read_candidates(study.store, ("accepted", "edited"))
        if candidates.empty and args.of == "candidates":
            raise PmragError(f"{args.params}: no accepted or edited question candidate in the study's store "
                             "(add them with pmrag candidates FILE PARAMS --accept)")
        hints = read_hints(study.store, candidates["candidate_id"])
        matches = match_hints(hints, study.messages(), tolerance=timedelta(minutes=args.tolerance_minutes),
                              search_top=args.search_top, bm25=study.params.bm25)
        store_matches(study.store, matches, candidates["candidate_id"])
        members = study.chunk_messages()
        report = recovery_report(hints, matches, members)
        print(f"hints: {len(report)}; matched by text {int((report['text'] > 0).sum())}, by time and speaker "
              f"{int((report['time_speaker'] > 0).sum())}, by excerpt search {int((report['excerpt_search'] > 0).sum())}, "
              f"nothing {int((report[['text', 'time_speaker', 'excerpt_search']].sum(axis=1) == 0).sum())}")
        recovered = hint_chunks(matches, members)
        if not candidates.empty:
            rankings = _rank_texts(study, candidates["candidate_id"].tolist(), candidates["question"].tolist(),
                                   retrievers, depth)
    if args.of in ("study", "both"):
        studied = {str(rid) for rid in study.retrievers()}
        missing = [name for name in retrievers if name not in studied]
        if missing:
            raise PmragError(f"--retrievers: {', '.join(missing)} not in the study's retrieval.retrievers, which rank "
                             "its own questions")
        for name in retrievers:
            study_rankings = study.ranked(name).rankings
            rankings[name] = _appended(rankings.get(name), study_rankings)
    pooled = build_pool(rankings, depth, retrievers, recovered, seed=seed)
    write_pool(study.store, args.name, pooled)
    sizes = pool_sizes(pooled)
    print(f"pool {args.name!r}: depth {depth}, {len(retrievers)} retriever(s), seed {seed}")
    print("question_id chunks by_retriever by_hint")
    for row in sizes.itertuples(index=False):
        print(f"{row.question_id} {row.chunks} {row.by_retriever} {row.by_hint}")
    print(f"total {int(sizes['chunks'].sum())} chunk(s) for {len(sizes)} question(s)")
    return 0


def _retriever_name(name: str) -> str:
    """A registered retriever's name, or a one-line error naming the option."""
    from pmrag.core.names import RetrieverId
    from pmrag.study.items import retriever_component

    try:
        rid = RetrieverId.parse(name)
        retriever_component(rid)
    except (ValueError, KeyError) as exc:
        raise PmragError(f"--retrievers: {exc.args[0] if exc.args else exc}") from None
    return str(rid)


def _appended(first, second):
    import pandas as pd

    return second if first is None else pd.concat([first, second], ignore_index=True)


def _rank_texts(study, question_ids: list[str], texts: list[str], retrievers: list[str], depth: int) -> dict:
    """Rank question texts that are not the study's questions (candidates) with the study's retrievers: the same
    components, corpus and representations as its ``runs`` stage; vectors from its embedder and cache."""
    from pmrag.core.names import RetrieverId
    from pmrag.represent.embed import embed_with_cache, study_embedder
    from pmrag.retrieve.retrievers import QUERY_VECTORS, TEXTS, Corpus, Queries
    from pmrag.study.items import retriever_component

    params = study.params
    corpus = Corpus.of(study.chunk_table(), study.get, lambda found: found.load(study.store, study.run_dir))

    def vectors():
        with study_embedder(params.embedding, params.cache_dir, params.allow_remote, params.proxy) as (embedder, cache):
            return embed_with_cache(embedder, texts, "query", cache, progress=False)

    queries = Queries(question_ids, texts, _once(vectors))
    rankings = {}
    for name in retrievers:
        rid = RetrieverId.parse(name)
        component = retriever_component(rid)
        unsupported = [str(key) for key in component.needs(rid) if key not in (TEXTS, QUERY_VECTORS)
                       and key.name != "vectors"]
        if unsupported:
            raise PmragError(f"--retrievers: {name} reads {', '.join(unsupported)}, computed for the study's own "
                             "questions only; pool candidates with BM25 and vector retrievers")
        rankings[name] = component(rid, params).rank(corpus, queries, depth).rankings
    return rankings


def _once(compute):
    held = []

    def get():
        if not held:
            held.append(compute())
        return held[0]
    return get


def _judgments(args) -> int:
    from pmrag.annotate.export import gold_from_store, write_gold

    engine = _gold_store(args)
    gold = gold_from_store(engine, args.annotator)
    qrels_path, questions_path = write_gold(gold, args.out)
    print("\n".join(gold.lines()))
    print(f"wrote {qrels_path} and {questions_path}")
    return 0


def _agreement(args) -> int:
    from pmrag.annotate.agreement import agreement
    from pmrag.core.params import BootstrapSection

    engine = _gold_store(args)
    params = BootstrapSection()
    if args.params:
        from pmrag.study.params import load_params

        params = load_params(args.params).bootstrap
    print("\n".join(agreement(engine, pool=args.pool, params=params).lines(params.confidence)))
    return 0


def _pool_retrievers() -> tuple[str, ...]:
    from pmrag.core.params import DEFAULT_RETRIEVERS

    return DEFAULT_RETRIEVERS


def build_parser() -> argparse.ArgumentParser:
    from pmrag.core.params import SyntheticSection

    parser = argparse.ArgumentParser(prog="pmrag", description="Personal Memory RAG retrieval workbench")
    sub = parser.add_subparsers(dest="command", required=True)

    study = sub.add_parser("study", help="execute the numbered notebooks on a params file")
    study.add_argument("params", help="params YAML, e.g. params/demo.yaml")
    study.add_argument("-q", "--quiet", action="store_true", help="no progress display")
    study.add_argument("--fresh", action="store_true",
                       help="recompute every stage (the content-addressed embedding cache is kept)")
    study.add_argument("--jobs", type=int, default=None, help="notebooks executed at once (default: cores + 1, at most 4)")
    study.add_argument("--force", action="store_true",
                       help="write into a run folder that holds files pmrag did not write (refused otherwise: its "
                            "README.md, environment.json, qrels.trec... would be replaced)")
    study.add_argument("--dry-run", action="store_true",
                       help="count the calls each model stage still has to make (and their price, from the params' "
                            "prices) and stop before any model call; the stages that call no model are computed")
    study.add_argument("--max-calls", type=int, default=None, metavar="N",
                       help="stop (exit status 3, resumable) before a model stage that would bring this run's remote "
                            "model calls above N")
    study.add_argument("--no-kernel-forks", action="store_true",
                       help="start each notebook's kernel as a new Python process instead of forking it from one that "
                            "has imported what the notebooks import (Linux)")
    study.set_defaults(func=_study)

    cohort = sub.add_parser("cohort", help="one study per participant of a cohort file, run on Dask (a LocalCluster or "
                                           "cohort.scheduler), then pooled tables with participant-level statistics")
    cohort.add_argument("params", help="cohort YAML, e.g. params/cohort_demo.yaml")
    cohort.add_argument("-q", "--quiet", action="store_true", help="no progress lines (failures are still reported)")
    cohort.set_defaults(func=_cohort)

    status = sub.add_parser("status", help="each stage of a study: cached, stale (and why) or missing, and the model calls "
                                           "still to make (and their price); computes nothing")
    status.add_argument("params", help="params YAML, e.g. params/demo.yaml")
    status.set_defaults(func=_status)

    graph = sub.add_parser("graph", help="draw a study's stages and what each reads (SVG and PNG); computes nothing")
    graph.add_argument("params", help="params YAML, e.g. params/demo.yaml")
    graph.add_argument("--out", help="file to write, without suffix (default: <run folder>/stage_graph)")
    graph.set_defaults(func=_graph)

    ingest = sub.add_parser("ingest", help="store chat histories (and LoCoMo questions) in a SQLite database")
    ingest.add_argument("paths", nargs="+", metavar="PATH")
    ingest.add_argument("--db", required=True, help="SQLite database file (created if missing)")
    ingest.add_argument("--format", default="auto", choices=["auto", "line-json", "line-txt", "locomo", "questions-json"])
    ingest.add_argument("--permissive", action="store_true", help="record and skip malformed records instead of stopping")
    ingest.add_argument("--keep-duplicates", action="store_true",
                        help="the paper's rule (§3.1): store every record of every file, even a message or a whole "
                             "file ingested before (default: overlapping re-exports are merged)")
    ingest.add_argument("--encoding", default="auto", choices=["auto", "utf-8", "cp932"],
                        help="text encoding of LINE .txt exports (auto: UTF-8, else cp932 when the file is not UTF-8 at all)")
    ingest.set_defaults(func=_ingest)

    candidates = sub.add_parser("candidates", help="store question candidates in a study's store: typed ones (CSV or "
                                "YAML, with evidence hints), or a model's proposals from the messages (--propose)")
    candidates.add_argument("file", nargs="?", help="typed questions: .csv (text, type, time, time_from, time_to, "
                                                    "speaker, phrase) or .yaml")
    candidates.add_argument("params", nargs="?", help="params YAML of the study whose store holds the candidates")
    candidates.add_argument("--db", help="a store file instead of a study's")
    candidates.add_argument("--accept", action="store_true", help="accept the file's proposed candidates as they are")
    candidates.add_argument("--permissive", action="store_true", help="record and skip malformed entries")
    candidates.add_argument("--propose", metavar="PARAMS",
                            help="have the model of the params' candidates section propose questions with evidence "
                                 "hints from the study's messages, in batches; a rerun resumes (allow_remote for a "
                                 "server off this machine)")
    candidates.add_argument("--limit", type=int, help="with --propose: the first N message batches only")
    candidates.add_argument("-q", "--quiet", action="store_true", help="with --propose: no progress bar")
    candidates.add_argument("--dry-run", action="store_true",
                            help="with --propose: print the calls still to make and what they would cost "
                                 "(the params' prices), call nothing")
    candidates.add_argument("--max-calls", type=int, metavar="N",
                            help="with --propose: call nothing when more than N calls are still to make")
    candidates.set_defaults(func=_candidates)

    pool = sub.add_parser("pool", help="pool candidate chunks to grade (TREC-style: the retrievers' top-K and the "
                                       "chunks the evidence hints recover) into the study's store")
    pool.add_argument("params", help="params YAML, e.g. params/demo.yaml")
    pool.add_argument("--depth", type=int, help="top-K of each retriever pooled (default: the params' pool.depth, 10)")
    pool.add_argument("--retrievers", nargs="+", default=list(_pool_retrievers()),
                      help="retrievers pooled (default: the six single retrievers of §5)")
    pool.add_argument("--name", default="pool", help="the pool's name in the store (default: pool)")
    pool.add_argument("--seed", type=int, help="seed of the blind grading order (default: the params' pool.seed, 0)")
    pool.add_argument("--of", choices=["candidates", "study", "both"], default="candidates",
                      help="pool the accepted candidates (default), the study's own questions, or both")
    pool.add_argument("--tolerance-minutes", type=float, default=10.0,
                      help="how far from a hint's time a message may be (default: 10)")
    pool.add_argument("--search-top", type=int, default=3,
                      help="messages the excerpt search adds for a hint phrase that matched none (default: 3)")
    pool.set_defaults(func=_pool)

    judged = sub.add_parser("judgments", help="judgments in a store: export them as qrels and a questions file")
    judged_sub = judged.add_subparsers(dest="action", required=True)
    export = judged_sub.add_parser("export", help="write qrels.trec and questions.json of one annotator's grades "
                                                  "(or the adjudicated ones); report the questions dropped")
    export.add_argument("params", nargs="?", help="params YAML of the study whose store holds the judgments")
    export.add_argument("--db", help="a store file instead of a study's")
    export.add_argument("--out", required=True, help="folder to write qrels.trec and questions.json into")
    export.add_argument("--annotator", required=True, help="an annotator id, or 'adjudicated'")
    export.set_defaults(func=_judgments)
    agree = judged_sub.add_parser("agreement", help="agreement between annotators who graded the same chunks: "
                                                    "weighted κ per pair and ordinal α, overall and by question type, "
                                                    "with bootstrap intervals over questions")
    agree.add_argument("params", nargs="?", help="params YAML of the study whose store holds the judgments "
                                                 "(its bootstrap section sets B, seed and confidence)")
    agree.add_argument("--db", help="a store file instead of a study's (the paper's bootstrap: B 5,000, seed 12,345)")
    agree.add_argument("--pool", help="only the grades given from this pool")
    agree.set_defaults(func=_agreement)

    demo = sub.add_parser("demo", help="write the embedded synthetic corpus (paper JSON format + questions)")
    demo.add_argument("out_dir")
    synthetic = SyntheticSection()
    demo.add_argument("--seed", type=int, default=synthetic.seed)
    demo.add_argument("--n-messages", type=int, default=synthetic.n_messages)
    demo.add_argument("--n-questions", type=int, default=synthetic.n_questions)
    demo.set_defaults(func=_demo)
    return parser


def main(argv=None) -> int:
    no_collection_at_exit()
    for stream in (sys.stdout, sys.stderr):
        if hasattr(stream, "reconfigure"):
            stream.reconfigure(errors="backslashreplace")  # a console that cannot print Japanese must not crash a report
    args = build_parser().parse_args(argv)
    try:
        return args.func(args)
    except PmragError as exc:
        return _fail(args, str(exc), exc.exit_code)
    except KeyboardInterrupt:
        return _interrupted(args)
    except Exception as exc:  # noqa: BLE001 — the last resort: one line, never the exception's text
        if os.environ.get("PMRAG_TRACEBACK") == "1":
            raise
        if _raised_while_interrupted(exc):
            return _interrupted(args)
        message, code = _unexpected(args, exc)
        return _fail(args, message, code)


def _interrupted(args) -> int:
    return _fail(args, "interrupted; what was committed is kept, run the same command again to resume", 130, "")


def _raised_while_interrupted(exc: BaseException) -> bool:
    """True when ``exc`` was raised while a KeyboardInterrupt was being handled (clean-up code that failed
    because the interrupt left a connection unusable): the user's Ctrl-C is what happened."""
    seen = set()
    while exc is not None and id(exc) not in seen:
        if isinstance(exc, KeyboardInterrupt):
            return True
        seen.add(id(exc))
        exc = exc.__cause__ or exc.__context__
    return False


def _fail(args, message: str, code: int, label: str = "error: ") -> int:
    """Print ``pmrag <command>: <label><message>`` as one line on stderr; return ``code``."""
    print(f"pmrag {args.command}: {label}{one_line(message)}", file=sys.stderr, flush=True)
    return code


def _unexpected(args, exc: Exception) -> tuple[str, int]:
    """One line for an exception the commands did not map: a database error by SQLite's own message (status 2),
    a file-system error by its path and reason (status 2), anything else by its type only (status 1).

    A database error here is the store's: the caches under ``cache_dir`` name themselves
    (:class:`pmrag.core.cache.CacheError`, a one-line :class:`PmragError`) and never let SQLite's errors out."""
    import sqlite3

    from sqlalchemy.exc import DBAPIError

    if isinstance(exc, (DBAPIError, sqlite3.Error)):
        from pmrag.core.store import store_error

        return str(store_error(getattr(args, "db", None) or "the study's store", exc)), 2
    if isinstance(exc, OSError) and exc.strerror:
        where = f"{exc.filename}: " if exc.filename else ""
        return f"{where}{exc.strerror}", 2
    return (f"internal error ({type(exc).__name__}); nothing more is shown because it may quote your data; "
            "set PMRAG_TRACEBACK=1 to see the traceback"), 1


if __name__ == "__main__":
    sys.exit(main())
