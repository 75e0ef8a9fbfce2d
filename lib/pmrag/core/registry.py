"""A registry of components by name (retrievers, tokenizers): one lookup, one error message for a typo."""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Generic, TypeVar

T = TypeVar("T")


class RegistrationError(ValueError):
    """A name registered twice."""


class Registry(Generic[T]):
    """Components of one kind, by name, in registration order.

    ``register(name)`` is a decorator; registering a taken name is an error unless ``replace=True`` (a test
    that swaps a component in), so two plug-ins can never silently shadow each other.  ``discover``, when
    given, runs once before the first lookup (``get``, ``names``, ``in``): it imports the modules whose
    components register themselves, so no module list is kept beside them; registering runs no discovery.
    """

    def __init__(self, kind: str, discover: Callable[[], None] | None = None):
        self.kind = kind
        self._items: dict[str, T] = {}
        self._discover = discover
        self._discovering = threading.RLock()

    def discover(self) -> None:
        """Run ``discover`` if it has not run yet.  Another thread's lookup waits for it; a lookup made by the
        discovery itself sees what is registered so far."""
        with self._discovering:
            discover, self._discover = self._discover, None
            if discover is not None:
                try:
                    discover()
                except BaseException:
                    self._discover = discover   # a failed import is retried (and reported) by the next lookup
                    raise

    def register(self, name: str, *, replace: bool = False) -> Callable[[T], T]:
        def add(item: T) -> T:
            if name in self._items and not replace:
                raise RegistrationError(f"{self.kind} {name!r} is already registered ({self._items[name]!r})")
            self._items[name] = item
            return item
        return add

    def unregister(self, name: str) -> None:
        self._items.pop(name, None)

    def get(self, name: str) -> T:
        self.discover()
        try:
            return self._items[name]
        except KeyError:
            raise KeyError(f"unknown {self.kind} {name!r} (registered: {', '.join(self._items) or 'none'})") from None

    def names(self) -> tuple[str, ...]:
        self.discover()
        return tuple(self._items)

    def __contains__(self, name: object) -> bool:
        self.discover()
        return name in self._items
