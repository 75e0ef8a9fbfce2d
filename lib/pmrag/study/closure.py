"""The code a stage runs, read off its function: the sources it executes and the package modules they reach.

A stage's key must change when any code that can change its result changes.  Listing modules by hand beside
the stage drifts (a helper module is forgotten, and an edit there leaves a stale number), so the list is
computed:

* :func:`function_code` walks a function's body: the imports inside it, the package objects it names (a
  module, a class or a function of another module: that module), the functions, classes and constants of its
  own module that it names (their source, or the constant's ``repr``, enters the code digest, and the walk
  continues into them), and the classes in its annotations (the types of the values it receives);
* :func:`module_closure` follows every import of those modules, at module level or inside a function, to the
  transitive closure, with the packages whose ``__init__`` each import executes.

Only ``pmrag`` modules are followed; third-party code enters a key through a package version.  An import done
by name at run time (``importlib.import_module``: component discovery) is not followed: a component a stage
uses is added by the stage's declaration, through its class, and so is a study's own component file
(``pmrag_plugins.<stem>``, found by its module's spec like any module; the ``pmrag`` modules it imports are
followed, its namespace package holds no code).  The orchestration layer (``pmrag.study``: the
engine, the facade, the runner) is not followed either: a stage's own code there is walked function by
function, what the layer decides (which stages, items and params) enters a key as those, and a change in how
keys are made changes the engine's version.
"""

from __future__ import annotations

import ast
import importlib.util
import inspect
import textwrap
import types
import typing
from collections.abc import Callable, Iterable
from functools import cache
from pathlib import Path

PACKAGE = "pmrag"
ORCHESTRATION = "pmrag.study"
_CONSTANTS = (str, bytes, int, float, bool, type(None), tuple, frozenset)


def is_package_module(name: str) -> bool:
    return name == PACKAGE or name.startswith(PACKAGE + ".")


@cache
def _spec(name: str):
    try:
        return importlib.util.find_spec(name)
    except (ImportError, ValueError):
        return None


def _module_or_parent(module: str, attribute: str) -> str:
    """``from module import attribute``: the submodule when ``attribute`` is one, else ``module`` itself."""
    parent = _spec(module)
    if parent is None or not parent.submodule_search_locations:   # a module has no submodules (and finding one
        return module                                               # would import the module itself)
    candidate = f"{module}.{attribute}"
    return candidate if _spec(candidate) is not None else module


def _statements(tree: ast.AST):
    """Every statement of ``tree``, nested ones included (an import is a statement: expressions need no visit)."""
    todo = [tree]
    while todo:
        node = todo.pop()
        yield node
        for field in ("body", "orelse", "finalbody", "handlers", "cases"):
            todo += [child for child in getattr(node, field, ()) if isinstance(child, ast.AST)]


def imports_of(tree: ast.AST) -> list[tuple[int, str]]:
    """Every ``pmrag`` module ``tree`` imports, with the line: module-level imports and those inside functions
    (``from pmrag.x import y`` names ``pmrag.x.y`` when ``y`` is a module, else ``pmrag.x``)."""
    return _resolved(_import_statements(tree))


ImportStatement = tuple[int, str, tuple[str, ...] | None]
"""``(line, module, names)``: ``import module`` (names ``None``) or ``from module import names``."""


def _import_statements(tree: ast.AST) -> tuple[ImportStatement, ...]:
    """The ``pmrag`` imports of ``tree`` as written, nothing resolved (no module is looked up)."""
    found: list[ImportStatement] = []
    for node in _statements(tree):
        if isinstance(node, ast.Import):
            found += [(node.lineno, alias.name, None) for alias in node.names if is_package_module(alias.name)]
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0 and is_package_module(node.module):
            found.append((node.lineno, node.module, tuple(alias.name for alias in node.names)))
    return tuple(found)


def _resolved(statements: Iterable[ImportStatement]) -> list[tuple[int, str]]:
    found = []
    for line, module, names in statements:
        if names is None:
            found.append((line, module))
        else:
            found += [(line, _module_or_parent(module, name)) for name in names]
    return sorted(found)


@cache
def import_statements_of_source(source: str) -> tuple[ImportStatement, ...]:
    """:func:`_import_statements` of a module's source, remembered by the source text itself, so that a changed
    module is always parsed again.  Parsing is most of the time a process takes to key a study's stages; a process
    forked after :func:`parse_package_imports` (a notebook kernel of :mod:`pmrag.study.kernel_forks`) finds every
    module it reads already parsed, unless its text changed since."""
    return _import_statements(ast.parse(source))


def parse_package_imports() -> int:
    """Parse the imports of every module file of the ``pmrag`` package (:func:`import_statements_of_source`),
    importing nothing and looking nothing up; returns how many were parsed."""
    parsed = 0
    for path in sorted(module_path(PACKAGE).parent.rglob("*.py")):
        try:
            import_statements_of_source(path.read_text(encoding="utf-8"))
        except (OSError, UnicodeDecodeError, SyntaxError, ValueError):   # read again, and reported, where used
            continue
        parsed += 1
    return parsed


def module_path(name: str) -> Path:
    spec = _spec(name)
    if spec is None or spec.origin is None:
        raise ModuleNotFoundError(f"module {name!r} cannot be found")
    return Path(spec.origin)


@cache
def _direct_imports(name: str) -> frozenset[str]:
    source = module_path(name).read_text(encoding="utf-8")
    return frozenset(module for _, module in _resolved(import_statements_of_source(source)))


def _with_parents(name: str) -> list[str]:
    """``pmrag.retrieve.bm25`` → the packages importing it executes first, and itself."""
    parts = name.split(".")
    return [".".join(parts[:i]) for i in range(1, len(parts) + 1)]


def is_namespace(name: str) -> bool:
    """A package without an ``__init__`` (the plugins' ``pmrag_plugins``): importing it runs no code."""
    spec = _spec(name)
    return spec is not None and spec.origin is None and spec.submodule_search_locations is not None


def is_orchestration(name: str) -> bool:
    return name == ORCHESTRATION or name.startswith(ORCHESTRATION + ".")


def module_closure(names: Iterable[str]) -> tuple[str, ...]:
    """``names`` and every ``pmrag`` module they import, transitively, with their parent packages (sorted), the
    orchestration layer left out (module docstring)."""
    return _closure(frozenset(names))


@cache
def _closure(names: frozenset[str]) -> tuple[str, ...]:
    seen: set[str] = set()
    todo = [parent for name in names for parent in _with_parents(name)]
    while todo:
        name = todo.pop()
        if name in seen or is_orchestration(name) or is_namespace(name):
            continue
        seen.add(name)
        todo += [parent for imported in _direct_imports(name) for parent in _with_parents(imported)]
    return tuple(sorted(seen))


def _definition(obj) -> ast.AST:
    """The ``def`` or ``class`` statement of ``obj`` without its decorators (a stage's ``@stage(...)`` is its
    declaration, keyed through what it declares)."""
    node = ast.parse(textwrap.dedent(inspect.getsource(obj))).body[0]
    if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
        node.decorator_list = []
    return node


def _walked(node: ast.AST) -> list[ast.AST]:
    """What runs when the definition's code runs: a function's body and default values (its annotations are
    its declaration), a class's body."""
    if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
        return [*node.body, *node.args.defaults, *(d for d in node.args.kw_defaults if d is not None)]
    return [node]


def _local_names(node: ast.AST) -> set[str]:
    """Names the definition binds itself (parameters, assignments, loop and comprehension targets, imports,
    nested definitions): a reference to one of them is not to a global of the module."""
    found = set()
    for child in ast.walk(node):
        if isinstance(child, ast.arg):
            found.add(child.arg)
        elif isinstance(child, ast.Name) and not isinstance(child.ctx, ast.Load):
            found.add(child.id)
        elif isinstance(child, ast.alias):
            found.add((child.asname or child.name).split(".")[0])
        elif isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)) and child is not node:
            found.add(child.name)
    return found


def _referenced_names(node: ast.AST) -> list[str]:
    local = _local_names(node)
    return sorted({child.id for part in _walked(node) for child in ast.walk(part)
                   if isinstance(child, ast.Name) and isinstance(child.ctx, ast.Load) and child.id not in local})


def _annotation_modules(obj) -> set[str]:
    """Modules of the package classes in a function's annotations (``Annotated`` metadata and containers too)."""
    try:
        hints = typing.get_type_hints(obj, include_extras=True)
    except Exception:   # an annotation naming something not importable here: the names walk still sees it
        return set()
    found, todo = set(), list(hints.values())
    while todo:
        hint = todo.pop()
        todo += list(typing.get_args(hint)) + list(getattr(hint, "__metadata__", ()))
        module = getattr(hint, "__module__", None) if isinstance(hint, type) else None
        if module and is_package_module(module):
            found.add(module)
    return found


@cache
def function_code(function: Callable) -> tuple[tuple[str, ...], frozenset[str], frozenset[str]]:
    """What ``function`` runs: the code of it and of the functions and classes of its own module it reaches
    (each as normalised source, comments dropped, in walk order; constants as ``name = repr``), and the other
    ``pmrag`` modules they import or name (:func:`module_closure` completes them), and the modules of the
    classes its annotations name (the values it receives: their methods run, their imports are their
    producers')."""
    home = function.__module__
    sources, modules, value_modules = [], set(), set()
    seen: set[str] = set()
    todo: list[tuple[str, object]] = [(function.__qualname__, function)]
    while todo:
        name, obj = todo.pop(0)
        if name in seen:
            continue
        seen.add(name)
        node = _definition(obj)
        sources.append(ast.unparse(node))
        modules.update(module for part in _walked(node) for _, module in imports_of(part))
        if callable(obj):
            value_modules.update(_annotation_modules(obj))
        namespace = getattr(obj, "__globals__", None) or vars(inspect.getmodule(obj))
        for referenced in _referenced_names(node):
            if referenced not in namespace:
                continue   # a local, a parameter or a builtin
            value = namespace[referenced]
            if isinstance(value, types.ModuleType):
                if is_package_module(value.__name__):
                    modules.add(value.__name__)
            elif getattr(value, "__module__", None) == home and (inspect.isfunction(value) or inspect.isclass(value)):
                todo.append((referenced, value))
            elif isinstance(value, _CONSTANTS) and referenced not in seen:
                seen.add(referenced)
                sources.append(f"{referenced} = {value!r}")
            else:
                module = getattr(value, "__module__", None) or getattr(type(value), "__module__", None)
                if module and is_package_module(module) and module != home:
                    modules.add(module)
    # the function's own module enters through the sources walked, not whole: editing one stage there must not
    # recompute the others
    return tuple(sources), frozenset(modules - {home}), frozenset(value_modules - {home})
