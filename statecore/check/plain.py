"""The search without memos: where a model makes equal values that are not interchangeable.

Every memo of the explorer answers a value read with what it learned on an
equal one (`statecore.check.values`). When a search meets two equal values
that behave differently, `statecore.check.explore.explore` throws it away
and runs an explorer `without_memos`: each action run on each state (twice:
it must be deterministic), each predicate judged on the state itself, no
monitor step remembered, on one process, without symmetry or partial-order
reduction, all of which rest on the memos. Its report says why (`note`).
"""

from __future__ import annotations

from collections.abc import Callable, Hashable
from typing import Any, TypeVar

from ..system import StateView, SystemState
from .predicates import PredicateCache
from .stepcache import SuccessorCache
from .values import ValueRegistry

__all__ = ["note", "without_memos"]

E = TypeVar("E")


def note(reason: str) -> str:
    """The report's note on a search run `without_memos` because of `reason`."""
    return (
        f"memos off: {reason}; every state was explored without them (and without symmetry "
        "or partial-order reduction, which rest on them)"
    )


def without_memos(explorer: E) -> E:
    """`explorer` (a new `statecore.check.explore` explorer, without symmetry) with every
    memo replaced by the plain computation."""
    search: Any = explorer
    system = search.system
    search.walks = False  # no successor memo, so no walks to hint
    search.successors = SuccessorCache(system, max_nodes=0)  # runs, remembers nothing
    search.successors.values = search.values = _Unchecked()
    search.predicates = _PlainPredicates(system)
    search.monitor_steps.known = _Forgotten()
    return explorer


class _Unchecked(ValueRegistry):
    """No premise to check: nothing is looked up by value."""

    def add(self, place: Hashable, value: Hashable, typed: bool = True) -> None:
        return None


class _PlainPredicates(PredicateCache):
    """Each predicate judged on the state itself."""

    def judge(self, predicate: Callable[[StateView[Any]], object], state: SystemState) -> Any:
        return bool(predicate(StateView(self.system, state))), False, -1  # decided by all


class _Forgotten(dict[Any, Any]):
    """A cache that keeps nothing: each monitor step is computed."""

    def __setitem__(self, key: Any, value: Any) -> None:
        return None
