"""A state seen under a renaming of its ids, renaming only what a predicate reads.

With symmetry reduction on, the guard judges each predicate the predicate
memo cannot vouch for on every renaming of each new state: a predicate that
tells symmetric ids apart must stop the search, not pass it
(`statecore.check.symmetry_guard`). Building every renamed state renames each
slot and global, while a predicate reads a few (a queue's length, the states
of one component). A `RenamedView` is the `StateView` of the renamed state
that renames on read: slot i of the renamed state is the plan's source slot,
renamed; a global is the source's, renamed. Both go through the plan's own
cached renames, so a predicate sees on the view exactly the values the
canonicalizer's renamed state holds (`_Plan.apply`), and those of
`rename_state` (``tests/test_renamed_view.py`` compares every read on random
symmetric systems). The cache keys a plain tuple by its value, so equal
tuples of unlike items ``(1, w)`` and ``(True, w)`` share a rename; a search
that makes such values holding an id turns symmetry off before any view is
judged (`statecore.check.values`), and a value without ids comes back as it
is. ``view.state`` builds the whole renamed state, for a predicate that reads
it directly.
"""

from __future__ import annotations

from collections.abc import Hashable
from typing import Any

from ..system import Slot, StateView, System, SystemState
from .symmetry import _Plan

__all__ = ["RenamedView"]

_new = tuple.__new__


class RenamedView(StateView[Any]):
    """`StateView` of `source` renamed by `plan`, each read renamed as it is made."""

    __slots__ = ("_plan", "_source")

    def __init__(self, system: System, source: SystemState, plan: _Plan) -> None:
        self.system = system
        self._source = source
        self._plan = plan
        self._g = None

    @property
    def state(self) -> SystemState:  # type: ignore[override]
        """The renamed state, built whole."""
        state: SystemState = _new(
            SystemState, (self._plan.slots(self._source.slots), self._values())
        )
        return state

    def _values(self) -> tuple[Any, ...]:
        """The renamed globals, without the slots (what ``view.g`` reads)."""
        plan = self._plan
        return tuple([plan.renamed_at(i, v) for i, v in enumerate(self._source.values)])

    def get(self, name: str) -> Any:
        """The value of global `name`, renamed."""
        index = self.system.global_index(name)
        return self._plan.renamed_at(index, self._source.values[index])

    def slot(self, component: str, key: Hashable) -> Slot:
        """The slot of (`component`, `key`) in the renamed state."""
        plan = self._plan
        position = self.system.slot_index(component, key)
        old = self._source.slots[plan.sources[position]]
        return old if plan.plain[position] else plan.renamed(old)
