"""The whole demo study, twice: ``pmrag study`` on a clean run folder, then again with nothing changed.

The clean run starts from an empty run folder and a copy of the committed vector cache (``params/demo_cache``,
so nothing is embedded and the committed cache is left as it was); the rerun uses the same folder.  Each run
is the ``pmrag study`` command in its own process (interpreter start, imports and kernel starts included).
Per stage and per notebook, the seconds come from the run's ``stage_log.jsonl``.  Targets on the 2-core
machine: clean ≤ 45 s, unchanged rerun ≤ 20 s.

    .venv/bin/python benchmarks/bench_study.py [--jobs N] [--keep DIR]
"""

from __future__ import annotations

import argparse
import json
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import yaml

from pmrag.study.runner import default_jobs

REPO = Path(__file__).resolve().parents[1]
TARGETS = {"clean": 45.0, "unchanged": 20.0}


def study_params(folder: Path) -> Path:
    """params/demo.yaml with the run folder and the vector cache moved under ``folder``."""
    params = yaml.safe_load((REPO / "params" / "demo.yaml").read_text(encoding="utf-8"))
    shutil.copytree(REPO / "params" / "demo_cache", folder / "cache")
    params.update(outputs_dir=str(folder / "outputs"), cache_dir=str(folder / "cache"),
                  notebooks_dir=str(REPO / "notebooks"))
    path = folder / "demo.yaml"
    path.write_text(yaml.safe_dump(params, allow_unicode=True, sort_keys=False), encoding="utf-8")
    return path


def run(params: Path, jobs: int | None) -> float:
    command = [str(Path(sys.executable).with_name("pmrag")), "study", str(params), "--quiet"]
    if jobs:
        command += ["--jobs", str(jobs)]
    started = time.perf_counter()
    subprocess.run(command, check=True, cwd=REPO, stdout=subprocess.DEVNULL)
    return time.perf_counter() - started


def log_lines(run_dir: Path, since: float) -> list[dict]:
    lines = [json.loads(line) for line in (run_dir / "stage_log.jsonl").read_text(encoding="utf-8").splitlines()]
    return [line for line in lines if line["at"] >= since]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--jobs", type=int, default=None, help="notebooks at once (default: pmrag's)")
    parser.add_argument("--keep", type=Path, default=None, help="run in this folder and keep it")
    args = parser.parse_args()
    folder = args.keep or Path(tempfile.mkdtemp(prefix="bench_study_"))
    folder.mkdir(parents=True, exist_ok=True)
    try:
        params = study_params(folder)
        run_dir = folder / "outputs" / "demo"
        figures = {}
        lines = {}
        for label in ("clean", "unchanged"):
            since = time.time()
            figures[label] = run(params, args.jobs)
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
