"""A registry of components by name (retrievers, tokenizers): one lookup, one error message for a typo."""

from __future__ import annotations

from collections.abc import Callable
from typing import Generic, TypeVar

T = TypeVar("T")


class Registry(Generic[T]):
    """Components of one kind, by name, in registration order.

    ``register(name)`` is a decorator; registering a taken name is an error unless ``replace=True`` (a test
    that swaps a component in), so two plug-ins can never silently shadow each other.
    """

    def __init__(self, kind: str):
        self.kind = kind
        self._items: dict[str, T] = {}

    def register(self, name: str, *, replace: bool = False) -> Callable[[T], T]:
        def add(item: T) -> T:
            if name in self._items and not replace:
                raise ValueError(f"{self.kind} {name!r} is already registered ({self._items[name]!r})")
            self._items[name] = item
            return item
        return add

    def unregister(self, name: str) -> None:
        self._items.pop(name, None)

    def get(self, name: str) -> T:
        try:
            return self._items[name]
        except KeyError:
            raise KeyError(f"unknown {self.kind} {name!r} (registered: {', '.join(self._items) or 'none'})") from None

    def names(self) -> tuple[str, ...]:
        return tuple(self._items)

    def __contains__(self, name: object) -> bool:
        return name in self._items
