"""The one registry style for every named choice: name -> entry, one instance per kind of part.

A registry holds entries of one kind (functions of one fixed signature for algorithm parts,
classes for engines, environments, tools and criteria, catalogue records for settings), documented
where the registry is created, so the run picks an entry by the name stored in the `RunSpec` and
uses it without knowing which one it got. Imports without torch.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Generic, TypeVar

F = TypeVar("F")


class UnknownNameError(KeyError, ValueError):
    """A lookup of a name nobody registered. Both a `KeyError` (it is a failed lookup)
    and a `ValueError` (it is usually a bad config value); the message lists valid names."""

    def __str__(self) -> str:
        # KeyError.__str__ would wrap the message in quotes.
        return str(self.args[0]) if self.args else ""


class Registry(Generic[F]):
    """Maps names to functions of one kind (`kind` names it in error messages)."""

    def __init__(self, kind: str) -> None:
        self.kind = kind
        self._entries: dict[str, F] = {}

    def register(self, name: str) -> Callable[[F], F]:
        """Decorator adding `fn` under `name`; a taken name raises `ValueError`
        so two modules can never silently shadow each other."""

        def add(fn: F) -> F:
            if name in self._entries:
                taken_by = self._entries[name]
                owner = getattr(taken_by, "__qualname__", repr(taken_by))
                raise ValueError(f"{self.kind} {name!r} is already registered (by {owner})")
            self._entries[name] = fn
            return fn

        return add

    def get(self, name: str) -> F:
        """The function registered under `name`; `UnknownNameError` listing the valid names otherwise."""
        try:
            return self._entries[name]
        except KeyError:
            raise UnknownNameError(f"unknown {self.kind} {name!r}; valid: {', '.join(self.names())}") from None

    def names(self) -> list[str]:
        """Registered names in registration order."""
        return list(self._entries)

    def items(self) -> list[tuple[str, F]]:
        """(name, entry) pairs in registration order."""
        return list(self._entries.items())

    def __iter__(self) -> Iterator[str]:
        return iter(self._entries)

    def __contains__(self, name: object) -> bool:
        return name in self._entries

    def __repr__(self) -> str:
        return f"Registry({self.kind!r}, {self.names()})"
