"""The code a stage runs, found from its function: its own source and the same-module helpers it calls (a change
there re-keys it), the package modules it reaches (transitively, nested imports too), never a name that is only
a parameter, and never the orchestration layer."""

import hashlib
import importlib
import sys
import textwrap

import pytest

from pmrag.study import stages
from pmrag.study.closure import function_code, imports_of, module_closure
import ast

MODULE = '''
from pmrag.evaluate import metrics

LIMIT = {limit}


def helper(x):
    return x + LIMIT


def stage_function(runs, qrels):
    from pmrag.evaluate.sweep import select_best
    total = helper(len(runs))
    return [metrics, select_best, total, {{r for r in runs}}]


def runs():
    from pmrag.demo import generate_corpus
'''


def load(tmp_path, monkeypatch, limit: int, name: str):
    (tmp_path / f"{name}.py").write_text(textwrap.dedent(MODULE.format(limit=limit)), encoding="utf-8")
    monkeypatch.syspath_prepend(str(tmp_path))
    return importlib.import_module(name)


def test_a_stage_keys_on_its_helpers_and_constants_and_reaches_the_modules_it_uses(tmp_path, monkeypatch):
    first = load(tmp_path, monkeypatch, 1, "stage_mod_a")
    sources, modules, _ = function_code(first.stage_function)
    assert modules == {"pmrag.evaluate.metrics", "pmrag.evaluate.sweep"}
    assert len(sources) == 3 and "LIMIT = 1" in sources   # the function, its helper, the constant
    # `runs` is a parameter: the same-module function of that name (which imports pmrag.demo) is not followed
    assert "pmrag.demo" not in module_closure(modules)
    second = load(tmp_path, monkeypatch, 2, "stage_mod_b")
    assert function_code(second.stage_function)[0] != sources


def test_the_closure_follows_nested_imports_and_adds_parent_packages():
    closure = module_closure(["pmrag.evaluate.sweep"])
    assert {"pmrag", "pmrag.evaluate", "pmrag.evaluate.metrics", "pmrag.retrieve.fusion", "pmrag.core.frames"} <= set(closure)
    assert not any(name.startswith("pmrag.study") for name in module_closure(["pmrag.evaluate.sweep", "pmrag.study.facade"]))
    tree = ast.parse("def f():\n    from pmrag.retrieve import bm25, registry\n    import pmrag.core.store\n")
    assert imports_of(tree) == [(2, "pmrag.retrieve.bm25"), (2, "pmrag.retrieve.registry"), (3, "pmrag.core.store")]


def test_the_statistics_stage_reaches_every_module_its_functions_run():
    _, modules, _ = function_code(stages.statistics)
    closure = module_closure(modules)
    for name in ("pmrag.evaluate.statistics", "pmrag.evaluate.selection", "pmrag.evaluate.groups",
                 "pmrag.evaluate.multiplicity", "pmrag.evaluate.power", "pmrag.core.frames", "pmrag.retrieve.fusion"):
        assert name in closure, name
    assert "pmrag.demo" not in closure and "pmrag.ingest.line_txt" not in closure


def test_a_study_plugin_module_is_found_by_its_spec_and_its_namespace_holds_no_code(tmp_path):
    """A component file a study brings (``pmrag_plugins.<stem>``): its source is hashed like a package module's,
    the package modules it imports are followed, and the namespace it is imported into is not a module to hash."""
    from pmrag.retrieve.registry import PLUGIN_PACKAGE, import_plugin
    from pmrag.study.closure import is_namespace, module_path
    from pmrag.study.engine import module_digest

    path = tmp_path / "closure_probe.py"
    path.write_text("from pmrag.retrieve.dense import cosine_scores\n", encoding="utf-8")
    name = import_plugin(path).__name__
    assert name == f"{PLUGIN_PACKAGE}.closure_probe"
    assert module_path(name) == path.resolve()
    assert is_namespace(PLUGIN_PACKAGE) and not is_namespace("pmrag.retrieve") and not is_namespace(name)
    found = module_closure([name])
    assert name in found and "pmrag.retrieve.dense" in found and PLUGIN_PACKAGE not in found
    assert module_digest(name) == hashlib.sha256(path.read_bytes()).hexdigest()


def test_parsed_imports_are_remembered_by_the_module_text_so_an_edited_module_is_parsed_again(tmp_path, monkeypatch):
    """What a forked kernel inherits from the warm process (``parse_package_imports``): a module read later is
    parsed only when its text is not one already parsed, and the imports found are those of its text now."""
    from pmrag.study import closure

    package = tmp_path / "closure_probe_pkg"
    package.mkdir()
    (package / "__init__.py").write_text("", encoding="utf-8")
    module = package / "probe.py"
    module.write_text("from pmrag.retrieve import bm25\n", encoding="utf-8")
    monkeypatch.syspath_prepend(str(tmp_path))
    parsed = []
    real_parse = ast.parse
    monkeypatch.setattr(closure.ast, "parse", lambda source, *a, **k: parsed.append(source) or real_parse(source, *a, **k))

    closure.import_statements_of_source(module.read_text(encoding="utf-8"))   # as the warm process would
    assert len(parsed) == 1
    assert closure._direct_imports("closure_probe_pkg.probe") == {"pmrag.retrieve.bm25"}
    assert len(parsed) == 1   # the same text: not parsed again

    module.write_text("from pmrag.retrieve import bm25\nimport pmrag.core.store\n", encoding="utf-8")
    closure._direct_imports.cache_clear()   # a new process: it reads the file again
    assert closure._direct_imports("closure_probe_pkg.probe") == {"pmrag.retrieve.bm25", "pmrag.core.store"}
    assert len(parsed) == 2


def test_parse_package_imports_reads_every_module_of_the_package_and_imports_none():
    from pmrag.study import closure

    before = set(sys.modules)
    parsed = closure.parse_package_imports()
    files = list(closure.module_path("pmrag").parent.rglob("*.py"))
    assert parsed == len(files) > 100
    assert set(sys.modules) == before
    layout = closure.module_path("pmrag.retrieve.bm25")
    assert closure.imports_of(ast.parse(layout.read_text(encoding="utf-8"))) == \
        closure._resolved(closure.import_statements_of_source(layout.read_text(encoding="utf-8")))
