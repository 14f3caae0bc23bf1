"""What a predicate reads: a `StateView` over a state whose every slot and global read is logged.

An action tells what it reads through its `Tx`; a property's predicate gets a
`StateView`, which hands out whole tuples (``view.state.slots``) as readily as
single fields. So the log is kept one level down: the view's state holds
`_Logged` tuples that note each item on its first read, however it is reached
(a field of ``view.g``, ``view.slot``, ``view.live``, iterating
``view.state.values``). Comparing, hashing or iterating a whole tuple reads
all of it.

Partial-order reduction (`statecore.check.reduction`) learns which locations
each property may read from it; the predicate memo (`statecore.check.predicates`)
decides predicates by the values read.
"""

from __future__ import annotations

from collections.abc import Callable, Hashable, Iterator
from typing import Any, cast

from ..system import StateView, System, SystemState

__all__ = ["Reads", "logged_view", "reads_of"]

# Each location read, with the value it held, in the order first read
# (slot i is location i, global j is location ~j, as in `statecore.transaction`).
Reads = tuple[tuple[int, Any], ...]


class _Logged:
    """A tuple of a state's slots or globals that logs each item read (first read only)."""

    __slots__ = ("_items", "_log", "_offset")

    def __init__(self, items: tuple[Any, ...], log: dict[int, Any], globals_: bool) -> None:
        self._items = items
        self._log = log
        self._offset = globals_

    def _read(self, i: int) -> Any:
        value = self._items[i]
        self._log.setdefault(~i if self._offset else i, value)
        return value

    def _all(self) -> tuple[Any, ...]:
        for i in range(len(self._items)):
            self._read(i)
        return self._items

    def __getitem__(self, key: int | slice) -> Any:
        if isinstance(key, slice):
            return tuple(self._read(i) for i in range(len(self._items))[key])
        return self._read(range(len(self._items))[key])

    def __len__(self) -> int:
        return len(self._items)

    def __iter__(self) -> Iterator[Any]:
        return iter(self._all())

    def __contains__(self, item: object) -> bool:
        return item in self._all()

    def __eq__(self, other: object) -> bool:
        return self._all() == other

    def __hash__(self) -> int:
        return hash(self._all())

    def __repr__(self) -> str:
        return repr(self._all())


class _LoggedView(StateView[Any]):
    """A `StateView` over `_Logged` tuples (``view.g`` read field by field)."""

    __slots__ = ()

    @property
    def g(self) -> Any:
        return self.system.globals_reader()(self)

    def value_at(self, index: int) -> Any:
        return self.state.values[index]


def logged_view(system: System, state: SystemState, log: dict[int, Any]) -> StateView[Any]:
    """A view of `state` that adds each location it reads to `log`, with its value."""
    logged = SystemState(
        cast(tuple[Any, ...], _Logged(state.slots, log, False)),
        cast(tuple[Hashable, ...], _Logged(state.values, log, True)),
    )
    return _LoggedView(system, logged)


def reads_of(
    system: System, judge: Callable[[StateView[Any]], object], state: SystemState
) -> tuple[Reads, bool]:
    """`judge` on `state`, as a truth value, with what it read (in order); raises what it raises."""
    log: dict[int, Any] = {}
    value = bool(judge(logged_view(system, state, log)))
    return tuple(log.items()), value
