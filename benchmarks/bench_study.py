"""The whole study, timed: the demo twice (default), or ``params/scale.yaml`` at the paper's size (``--scale``).

Demo (default): ``pmrag study`` on a clean run folder, then again with nothing changed.

The clean run starts from an empty run folder and a copy of the committed vector cache (``params/demo_cache``,
so nothing is embedded and the committed cache is left as it was); the rerun uses the same folder.  Each run
is the ``pmrag study`` command in its own process (interpreter start, imports and kernel starts included).
Per stage and per notebook, the seconds come from the run's ``stage_log.jsonl``.  Targets on the 2-core
machine: clean ≤ 45 s, unchanged rerun ≤ 20 s.

Scale (``--scale 1``: the paper's 358,896 messages; ``--scale 10``: 3,588,960, the same 100 questions):
the synthetic corpus is generated once (``outputs/bench/corpus_<n>/``, not timed: the study starts from its raw
JSON files, ingested as a user's export), then ``pmrag study`` runs ``params/scale.yaml`` (offline stand-ins:
extractive summaries, hashed-stand-in vectors) on a clean run folder, then again after changing only the β grid
(``hybrid.beta_step``), then only B (``bootstrap.n_resamples``, the β grid kept).  Per stage and per notebook: its seconds
(``stage_log.jsonl``) and the peak memory of the ``pmrag study`` process tree during it: the proportional set
size (PSS, /proc/<pid>/smaps_rollup) summed over that process, its worker processes and its notebook kernels,
sampled as often as a tenth of one CPU allows (about every 0.6 s at 1×; a stage shorter than that may show no peak).  Notebooks run several at a time, so a notebook's peak includes the others' running
beside it.  Each run also prints its CPU seconds (user + system of the process tree): divided by the CPUs, the
least wall time any scheduling of that work could take.  The study's stages are the rows: tokenising, indexing and scoring a BM25 retriever are its
``runs:<retriever>`` stage, dense scoring a ``runs:<…>_vector`` stage (its vectors: ``vectors:<representation>``),
the hybrid sweep ``sweep`` + ``hybrids``, the bootstrap ``reliability``, the selection-aware statistics
``statistics``.  Targets on the 2-core machine: 1× ≤ 60 s and ≤ 2 GB from raw JSON to every table and figure; 10×
≤ 10× the 1× time and ≤ 5× its memory (``outputs/bench/study_scale1.json`` holds the last 1× run); a change to
only β or B recomputes ≤ 10 s.  ``--timeout S`` stops a run that takes longer and reports how far it got.

    .venv/bin/python benchmarks/bench_study.py [--jobs N] [--keep DIR] [--no-kernel-forks]
    .venv/bin/python benchmarks/bench_study.py --scale 1|10 [--jobs N] [--keep DIR] [--timeout S] [--no-reruns]
                                                [--no-kernel-forks]
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import yaml

from bench_ingest_chunk import ensure_corpus
from proctree import cpu_seconds, pause_after_sample, process_tree, pss_kb
from pmrag.study.runner import default_jobs

REPO = Path(__file__).resolve().parents[1]
TARGETS = {"clean": 45.0, "unchanged": 20.0}
PAPER_MESSAGES = 358_896
SCALE_TARGETS = {"seconds": 60.0, "peak_mb": 2048.0, "recompute": 10.0}   # 1×; 10×: 10× the time, 5× the memory
SCALE_RESULT = REPO / "outputs" / "bench" / "study_scale1.json"


def study_params(folder: Path) -> Path:
    """params/demo.yaml with the run folder and the vector cache moved under ``folder``."""
    params = yaml.safe_load((REPO / "params" / "demo.yaml").read_text(encoding="utf-8"))
    shutil.copytree(REPO / "params" / "demo_cache", folder / "cache")
    params.update(outputs_dir=str(folder / "outputs"), cache_dir=str(folder / "cache"),
                  notebooks_dir=str(REPO / "notebooks"))
    path = folder / "demo.yaml"
    path.write_text(yaml.safe_dump(params, allow_unicode=True, sort_keys=False), encoding="utf-8")
    return path


def study_options(args) -> list[str]:
    """``pmrag study``'s options from this script's: ``--jobs N``, ``--no-kernel-forks``."""
    return (["--jobs", str(args.jobs)] if args.jobs else []) + (["--no-kernel-forks"] if args.no_kernel_forks else [])


def study_command(params: Path, options: list[str]) -> list[str]:
    return [str(Path(sys.executable).with_name("pmrag")), "study", str(params), "--quiet", *options]


def run(params: Path, options: list[str]) -> float:
    started = time.perf_counter()
    subprocess.run(study_command(params, options), check=True, cwd=REPO, stdout=subprocess.DEVNULL)
    return time.perf_counter() - started


def log_lines(run_dir: Path, since: float) -> list[dict]:
    lines = [json.loads(line) for line in (run_dir / "stage_log.jsonl").read_text(encoding="utf-8").splitlines()]
    return [line for line in lines if line["at"] >= since]


# ------------------------------------------------------------------------------------------- scale


def scale_params(folder: Path, scale: int) -> Path:
    """params/scale.yaml reading the generated corpus's raw files (``scale`` × the paper's messages) as inputs,
    with the run folder and the cache under ``folder``."""
    files, questions = ensure_corpus(PAPER_MESSAGES * scale)
    params = yaml.safe_load((REPO / "params" / "scale.yaml").read_text(encoding="utf-8"))
    params["dataset"] = {"inputs": [str(f) for f in files], "questions": str(questions)}
    params.update(run=f"scale{scale}", outputs_dir=str(folder / "outputs"), cache_dir=str(folder / "cache"),
                  notebooks_dir=str(REPO / "notebooks"))
    path = folder / f"scale{scale}.yaml"
    path.write_text(yaml.safe_dump(params, allow_unicode=True, sort_keys=False), encoding="utf-8")
    return path


def changed(params: Path, section: str, key: str, value) -> Path:
    """A copy of ``params`` with one key changed (the run folder stays the same)."""
    data = yaml.safe_load(params.read_text(encoding="utf-8"))
    data[section][key] = value
    path = params.with_name(f"{params.stem}_{section}_{key}.yaml")
    path.write_text(yaml.safe_dump(data, allow_unicode=True, sort_keys=False), encoding="utf-8")
    return path


CPU_SAMPLE_S = 0.05


def measured_run(params: Path, options: list[str], timeout: float | None
                 ) -> tuple[float, list[tuple[float, int]], int, float]:
    """``pmrag study`` in its own process: (wall seconds, [(time, tree PSS in kB)], exit status (-9 when
    ``timeout`` stopped it), CPU seconds).

    The PSS of the tree is sampled as often as a tenth of one CPU allows (:func:`proctree.pause_after_sample`): after a
    sample that took ``c`` seconds of this process's CPU, the next comes ``9c`` later (about every 0.6 s at the paper's
    scale), so a peak shorter than that can be missed.  The CPU seconds are user + system time of the process and of
    every process under it (stage workers, the stage helper, notebook kernels), each as last read from /proc every
    50 ms (cheap reads), not from the waited-for children's usage: a process started by the fork server is the fork
    server's child, never waited for by the study, so its time was not counted there.  A process loses at most its
    last 50 ms, and one that lives less than 50 ms is not seen.  On ``n`` CPUs the run can take no less than that
    divided by ``n``, however its work is scheduled."""
    samples: list[tuple[float, int]] = []
    cpu: dict[int, float] = {}
    started = time.perf_counter()
    next_pss = started
    process = subprocess.Popen(study_command(params, options), cwd=REPO, stdout=subprocess.DEVNULL,
                               stderr=subprocess.PIPE, text=True, start_new_session=True)
    while process.poll() is None:
        tree = process_tree(process.pid)
        cpu.update((p, seconds) for p in tree if (seconds := cpu_seconds(p)) is not None)
        if time.perf_counter() >= next_pss:
            used = time.process_time()
            samples.append((time.time(), sum(pss_kb(p) for p in tree)))
            next_pss = time.perf_counter() + pause_after_sample(time.process_time() - used)
        if timeout is not None and time.perf_counter() - started > timeout:
            os.killpg(process.pid, signal.SIGKILL)
            process.wait()
            return time.perf_counter() - started, samples, -9, sum(cpu.values())
        time.sleep(CPU_SAMPLE_S)
    if process.returncode:
        print(process.stderr.read()[-3000:], file=sys.stderr)
    return time.perf_counter() - started, samples, process.returncode, sum(cpu.values())


def peak_mb(samples: list[tuple[float, int]], start: float, end: float) -> float | None:
    """The largest sample inside [start, end] (50 ms either side); None when no sample fell inside (a stage
    shorter than the sampling interval)."""
    inside = [kb for at, kb in samples if start - CPU_SAMPLE_S <= at <= end + CPU_SAMPLE_S]
    return max(inside) / 1024 if inside else None


def stage_table(lines: list[dict], samples: list[tuple[float, int]]) -> list[tuple[str, float, float]]:
    """(stage, seconds, peak MB of the process tree while it ran) of every computed stage, in order."""
    return [(line["stage"], line["seconds"], peak_mb(samples, line["at"] - line["seconds"], line["at"]))
            for line in lines if line["action"] == "computed"]


def print_scale_run(label: str, wall: float, samples, lines: list[dict], status: int, cpu: float) -> dict:
    rows = stage_table(lines, samples)
    cpus = os.cpu_count() or 1
    print(f"\n{label}: {wall:.1f} s wall, peak {max((kb for _, kb in samples), default=0) / 1024:,.0f} MB "
          f"(PSS of the pmrag study process tree)" + ("" if status == 0 else f"   STOPPED (exit status {status})"))
    print(f"  CPU {cpu:.1f} s (user + system of the process tree): on {cpus} CPUs no run of this work takes less "
          f"than {cpu / cpus:.1f} s")
    print(f"  {'stage':<40} {'seconds':>8} {'peak MB':>9}")
    for stage, seconds, peak in rows:
        print(f"  {stage:<40} {seconds:>8.2f} {'–' if peak is None else format(peak, ',.0f'):>9}")
    stages = sum(s for name, s, _ in rows if not name.startswith("notebook:"))
    notebooks = sum(s for name, s, _ in rows if name.startswith("notebook:"))
    print(f"  {'stages, summed':<40} {stages:>8.2f}")
    print(f"  {'notebooks, summed (several at a time)':<40} {notebooks:>8.2f}")
    return {"wall": wall, "peak_mb": max((kb for _, kb in samples), default=0) / 1024, "stages_s": stages,
            "rows": rows, "status": status, "cpu_s": cpu}


def verdict(value: float, target: float, unit: str, finished: bool = True) -> str:
    if not finished:
        return f"target ≤ {target:,.0f} {unit}: not known, the run was stopped before its end"
    return f"target ≤ {target:,.0f} {unit}: {'met' if value <= target else 'MISSED'}"


def scale_main(args) -> None:
    folder = args.keep or Path(tempfile.mkdtemp(prefix=f"bench_scale{args.scale}_"))
    folder.mkdir(parents=True, exist_ok=True)
    print(f"params/scale.yaml at {args.scale}× the paper's messages ({PAPER_MESSAGES * args.scale:,}); "
          f"notebooks {args.jobs or default_jobs()} at a time; {os.cpu_count()} CPUs, shared with other work "
          f"(load average {os.getloadavg()[0]:.1f} at the start)")
    try:
        params = scale_params(folder, args.scale)
        run_dir = folder / "outputs" / f"scale{args.scale}"
        results = {}
        runs = [("clean", params)]
        if not args.no_reruns:
            # each rerun changes one key against the run before it: the B run keeps the β run's grid (from the clean
            # params it would change β back as well, and recompute the sweep's dependents a second time)
            beta = changed(params, "hybrid", "beta_step", 0.1)
            runs += [("β grid changed (hybrid.beta_step 0.05 → 0.1)", beta),
                     ("B changed (bootstrap.n_resamples 5000 → 2000)", changed(beta, "bootstrap", "n_resamples", 2000))]
        for label, path in runs:
            since = time.time()
            wall, samples, status, cpu = measured_run(path, study_options(args), args.timeout)
            log = run_dir / "stage_log.jsonl"
            lines = [json.loads(x) for x in log.read_text(encoding="utf-8").splitlines()] if log.is_file() else []
            results[label] = print_scale_run(label, wall, samples, [x for x in lines if x["at"] >= since], status, cpu)
            if status:
                break
        clean = results["clean"]
        targets = dict(SCALE_TARGETS)
        if args.scale != 1:
            base = json.loads(SCALE_RESULT.read_text()) if SCALE_RESULT.is_file() else None
            reference = base or {"wall": SCALE_TARGETS["seconds"], "peak_mb": SCALE_TARGETS["peak_mb"]}
            targets.update(seconds=reference["wall"] * args.scale, peak_mb=reference["peak_mb"] * 5)
            print(f"\n10× targets from the {'measured 1× run' if base else '1× targets'}: "
                  f"{targets['seconds']:,.0f} s, {targets['peak_mb']:,.0f} MB")
        elif clean["status"] == 0:
            SCALE_RESULT.parent.mkdir(parents=True, exist_ok=True)
            SCALE_RESULT.write_text(json.dumps({k: clean[k] for k in ("wall", "peak_mb", "stages_s")}))
        print(f"\n{'clean run, wall':<48} {clean['wall']:>9.1f} s   ({verdict(clean['wall'], targets['seconds'], 's', not clean['status'])})")
        print(f"{'clean run, CPU':<48} {clean['cpu_s']:>9.1f} s   (at least {clean['cpu_s'] / (os.cpu_count() or 1):.1f} s "
              f"of wall on {os.cpu_count() or 1} CPUs)")
        print(f"{'clean run, peak memory':<48} {clean['peak_mb']:>9,.0f} MB  "
              f"({verdict(clean['peak_mb'], targets['peak_mb'], 'MB', not clean['status'])})")
        for label, result in list(results.items())[1:]:
            print(f"{label:<48} {result['stages_s']:>9.1f} s recomputed in stages, {result['wall']:.1f} s wall with "
                  f"the notebooks   ({verdict(result['stages_s'], targets['recompute'], 's')})")
    finally:
        if args.keep is None:
            shutil.rmtree(folder, ignore_errors=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--jobs", type=int, default=None, help="notebooks at once (default: pmrag's)")
    parser.add_argument("--keep", type=Path, default=None, help="run in this folder and keep it")
    parser.add_argument("--scale", type=int, choices=(1, 10), default=None,
                        help="params/scale.yaml at 1× or 10× the paper's messages (default: the demo)")
    parser.add_argument("--timeout", type=float, default=None, help="--scale: stop a run after this many seconds")
    parser.add_argument("--no-reruns", action="store_true", help="--scale: the clean run only")
    parser.add_argument("--no-kernel-forks", action="store_true",
                        help="pmrag study --no-kernel-forks: each kernel a new Python process")
    args = parser.parse_args()
    if args.scale:
        return scale_main(args)
    folder = args.keep or Path(tempfile.mkdtemp(prefix="bench_study_"))
    folder.mkdir(parents=True, exist_ok=True)
    try:
        params = study_params(folder)
        run_dir = folder / "outputs" / "demo"
        figures = {}
        lines = {}
        for label in ("clean", "unchanged"):
            since = time.time()
            figures[label] = run(params, study_options(args))
            lines[label] = log_lines(run_dir, since)
        clean = [line for line in lines["clean"] if line["action"] == "computed"]
        print(f"{'stage':<32} {'seconds':>8}   (clean run; notebooks run {args.jobs or default_jobs()} at a time)")
        for line in clean:
            print(f"{line['stage']:<32} {line['seconds']:>8.2f}")
        stages = sum(line["seconds"] for line in clean if not line["stage"].startswith("notebook:"))
        notebooks = sum(line["seconds"] for line in clean if line["stage"].startswith("notebook:"))
        print(f"{'stages, summed':<32} {stages:>8.2f}")
        print(f"{'notebooks, summed':<32} {notebooks:>8.2f}")
        recomputed = [line["stage"] for line in lines["unchanged"] if line["action"] == "computed"]
        print(f"unchanged rerun recomputed: {', '.join(recomputed) or 'nothing'}")
        for label, seconds in figures.items():
            verdict = "met" if seconds <= TARGETS[label] else "MISSED"
            print(f"{label + ' run':<32} {seconds:>8.2f} s   (target ≤ {TARGETS[label]:.0f} s: {verdict})")
    finally:
        if args.keep is None:
            shutil.rmtree(folder, ignore_errors=True)


if __name__ == "__main__":
    main()
