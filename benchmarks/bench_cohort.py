"""``pmrag cohort`` against the same studies run one after another: 3 and 12 synthetic participants.

The participants are the demo cohort's three (params/cohort_demo.yaml), repeated under new ids for 12, so every
text is in the committed embedding cache (copied: nothing is embedded and params/ is left as it was) and each
study computes every other stage from an empty run folder.  For each size:

* ``single``: each participant's task (:func:`pmrag.cohort.run.run_participant`: the same stages) run alone, one
  after another, as ``pmrag study`` runs a study (ingest parsing in forked helper processes), in this process
  (``warm``: imports and per-process caches paid once) and each in a process of its own (``cold``: as a user running one study after another would, interpreter start and imports included);
  the sums;
* ``cohort``: ``run_cohort`` on a fresh LocalCluster (one single-threaded worker process per core), wall time
  from the call to the tables, cluster start and stop included;
* speed-up = single / cohort (warm and cold); overhead per participant = (workers × cohort − warm single) /
  participants: the seconds each participant costs beyond its own study (cluster start, imports in the workers,
  scheduling, pooling).

Targets on the 2-core reference machine: speed-up ≥ 1.6 for 12 participants, overhead ≤ 2 s per participant.

    .venv/bin/python benchmarks/bench_cohort.py [--sizes 3 12]
"""

from __future__ import annotations

import argparse
import copy
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import yaml

REPO = Path(__file__).resolve().parents[1]


def cohort_file(folder: Path, n: int) -> Path:
    """The demo cohort with ``n`` participants (the three repeated), in ``folder`` with its base study and cache."""
    params = folder / "params"
    params.mkdir(parents=True)
    shutil.copy(REPO / "params" / "demo.yaml", params / "demo.yaml")
    shutil.copytree(REPO / "params" / "cohort_demo_cache", params / "cohort_demo_cache")
    cohort = yaml.safe_load((REPO / "params" / "cohort_demo.yaml").read_text(encoding="utf-8"))
    shipped = cohort["participants"]
    cohort["participants"] = [{**copy.deepcopy(shipped[i % len(shipped)]), "id": f"p{i + 1:02d}"} for i in range(n)]
    cohort["run"] = f"bench_{n}"
    path = params / f"cohort_{n}.yaml"
    path.write_text(yaml.safe_dump(cohort, sort_keys=False), encoding="utf-8")
    return path


def single_seconds(path: Path, cold: bool) -> float:
    """Each participant's task (the same stages as in the cohort) run alone, one after another, in this process or
    (``cold``) each in a new Python process; the sum of their seconds."""
    from pmrag.cohort.params import load_cohort, write_study
    from pmrag.cohort.run import run_participant

    cohort = load_cohort(path)
    section = cohort.params.cohort
    total = 0.0
    where = "cold" if cold else "warm"
    for participant in cohort.participants:
        study = {**participant.study, "outputs_dir": str(cohort.run_dir.parent / f"single_{where}")}
        file = write_study(type(participant)(participant.id, study), cohort.run_dir.parent / f"params_{where}" /
                           f"{participant.id}.yaml")
        started = time.perf_counter()
        if cold:
            subprocess.run([sys.executable, "-c", "import sys; from pmrag.cohort.run import run_participant; "
                            "run_participant(sys.argv[1], sys.argv[2] == 'True', sys.argv[3], in_process=False)", str(file),
                            str(section.notebooks), section.stages], check=True)
        else:
            run_participant(str(file), section.notebooks, section.stages, in_process=False)
        total += time.perf_counter() - started
    return total


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", type=int, nargs="+", default=[3, 12])
    args = parser.parse_args()
    from pmrag.cohort.run import run_cohort

    workers = os.cpu_count() or 1
    for n in args.sizes:
        with tempfile.TemporaryDirectory(prefix="pmrag-bench-cohort-") as folder:
            path = cohort_file(Path(folder), n)
            warm, cold = single_seconds(path, cold=False), single_seconds(path, cold=True)
            started = time.perf_counter()
            run = run_cohort(path, progress=False)
            cohort = time.perf_counter() - started
            assert not run.failed, run.failed
            overhead = (min(workers, n) * cohort - warm) / n
            print(f"{n:>3} participants: single warm {warm:5.1f} s, cold {cold:5.1f} s  cohort {cohort:5.1f} s on "
                  f"{min(workers, n)} workers  speed-up {warm / cohort:4.2f}x warm, {cold / cohort:4.2f}x cold  "
                  f"overhead {overhead:5.2f} s/participant", flush=True)


if __name__ == "__main__":
    main()
