"""The package's layout follows the pipeline: a module imports only from its own stage or the stages before it.

    core → ingest → chunking → represent → retrieve → evaluate → annotate → present → study → cohort (→ cli)

``demo`` stands apart (it writes a corpus that ingest then reads like any export).  Every import counts, the
ones inside functions too, so a stage can never reach downstream, not even lazily.
"""

import ast
from pathlib import Path

import pytest

from pmrag.study.closure import imports_of

PACKAGE = Path(__file__).resolve().parents[1] / "lib" / "pmrag"
ORDER = ["core", "ingest", "chunking", "represent", "retrieve", "evaluate", "annotate", "present", "study", "cohort", "cli"]
APART = {"demo": {"demo"}}


def layer_of(module: str) -> str:
    """``pmrag.retrieve.bm25`` → ``retrieve``; top-level modules (``pmrag.cli``) are their own layer."""
    parts = module.split(".")
    return parts[1] if len(parts) > 1 else ""


def pmrag_imports(path: Path) -> list[tuple[int, str]]:
    """Every ``pmrag`` import of a file, nested ones too (the walk the stage engine's keys use)."""
    return imports_of(ast.parse(path.read_text(encoding="utf-8")))


def modules():
    for path in sorted(PACKAGE.rglob("*.py")):
        relative = path.relative_to(PACKAGE.parent).with_suffix("")
        name = ".".join(relative.parts).removesuffix(".__init__")
        if layer_of(name) in ("", "__main__"):
            continue
        yield name, path


def allowed(source_layer: str, target_layer: str) -> bool:
    if source_layer in APART or target_layer in APART:
        return target_layer in APART.get(source_layer, set()) or source_layer in ("study", "cli")
    return ORDER.index(target_layer) <= ORDER.index(source_layer)


@pytest.mark.parametrize("name, path", list(modules()), ids=lambda value: value if isinstance(value, str) else "")
def test_imports_only_go_downstream(name, path):
    source = layer_of(name)
    assert source in ORDER or source in APART, f"{name}: not in a known stage folder ({ORDER}, {list(APART)})"
    for line, target_module in pmrag_imports(path):
        target = layer_of(target_module)
        assert allowed(source, target), f"{path.relative_to(PACKAGE.parent)}:{line} imports {target_module} ({source} → {target})"


def test_the_checker_catches_an_upstream_import(tmp_path):
    bad = tmp_path / "bad.py"
    bad.write_text("def f():\n    from pmrag.study.facade import Study\n", encoding="utf-8")
    [(line, module)] = pmrag_imports(bad)
    assert (line, module) == (2, "pmrag.study.facade")
    assert not allowed("retrieve", layer_of(module))
    assert allowed("study", "retrieve") and not allowed("core", "ingest") and not allowed("demo", "core")
