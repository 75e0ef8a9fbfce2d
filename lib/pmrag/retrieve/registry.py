"""The retriever and tokenizer registries, filled by the modules that define components.

A module of :mod:`pmrag.retrieve` that registers a component (``@RETRIEVERS.register("mmr")``) is registered by
existing: the first lookup in either registry imports every module of the package (:func:`discover`), so no
list of modules is kept anywhere.  A study may bring its own component files (``retrieval.plugins``):
:func:`import_plugin` imports each as ``pmrag_plugins.<file stem>``, a name that holds no location, so the
stage engine finds and hashes its source like a module of the package.  The study's stages, tables, statistics
and the inspector then find a method through ``retrieval.retrievers``.
"""

from __future__ import annotations

import importlib
import importlib.machinery
import importlib.util
import pkgutil
import sys
import traceback
import types
from pathlib import Path

from pmrag.core.errors import PmragError
from pmrag.core.registry import RegistrationError, Registry

PACKAGE = "pmrag.retrieve"
PLUGIN_PACKAGE = "pmrag_plugins"


def discover() -> None:
    """Import every module of :mod:`pmrag.retrieve` (in name order), so each registers its components."""
    package = importlib.import_module(PACKAGE)
    for found in pkgutil.iter_modules(package.__path__, PACKAGE + "."):
        importlib.import_module(found.name)


RETRIEVERS: Registry = Registry("retriever method", discover=discover)
TOKENIZERS: Registry = Registry("tokenizer", discover=discover)


class PluginError(PmragError):
    """A component file that cannot be imported; the message names neither its content nor a traceback."""


def plugin_module_name(path: Path) -> str:
    """``…/my_retriever.py`` → ``pmrag_plugins.my_retriever``; the file must be a ``.py`` file whose stem is a
    Python identifier."""
    path = Path(path)
    if path.suffix != ".py" or not path.stem.isidentifier():
        raise PluginError("a plugin is a .py file whose name is a Python identifier (my_retriever.py)")
    return f"{PLUGIN_PACKAGE}.{path.stem}"


def _plugin_package() -> types.ModuleType:
    """The namespace the plugins are imported into (made once per process; it holds no code)."""
    if PLUGIN_PACKAGE not in sys.modules:
        spec = importlib.machinery.ModuleSpec(PLUGIN_PACKAGE, None, is_package=True)
        sys.modules[PLUGIN_PACKAGE] = importlib.util.module_from_spec(spec)
    return sys.modules[PLUGIN_PACKAGE]


def _failure(exc: BaseException, path: Path) -> str:
    """What went wrong, without the file's content: the exception's type and the plugin's line it came from (a
    registration clash, the registry's own message)."""
    if isinstance(exc, RegistrationError):
        return str(exc)
    line = exc.lineno if isinstance(exc, SyntaxError) and exc.filename == str(path) else None
    for frame in traceback.extract_tb(exc.__traceback__):
        if frame.filename == str(path):
            line = frame.lineno
    return f"{type(exc).__name__}{f' at line {line}' if line else ''}"


def import_plugin(path: Path) -> types.ModuleType:
    """Import a component file as ``pmrag_plugins.<stem>`` (once per process: the same file again returns the
    module already imported; another file of the same stem is refused).  The package's own components are
    registered first, so a plugin that takes a built-in name is refused, not the built-in."""
    path = Path(path).resolve()
    name = plugin_module_name(path)
    loaded = sys.modules.get(name)
    if loaded is not None:
        if Path(loaded.__file__).resolve() != path:
            raise PluginError(f"another file is already imported as {name}; rename one of them")
        return loaded
    RETRIEVERS.discover()
    TOKENIZERS.discover()
    package = _plugin_package()
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    try:   # compiled from the file itself, never from a __pycache__ beside it: the code run is the code hashed
        exec(compile(path.read_bytes(), str(path), "exec"), module.__dict__)
    except Exception as exc:
        del sys.modules[name]
        raise PluginError(f"cannot be imported ({_failure(exc, path)})") from None
    setattr(package, path.stem, module)
    return module
