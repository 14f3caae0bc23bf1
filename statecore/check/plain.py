"""The search without memos: where a model makes equal values that are not interchangeable.

Every memo of the explorer answers a value read with what it learned on an
equal one (`statecore.check.values`). When a search meets two equal values
that behave differently, `statecore.check.explore.explore` throws it away
and runs this one: each action run on each state (twice: it must be
deterministic), each predicate judged on the state itself, no monitor step
remembered, on one process, without symmetry or partial-order reduction,
all of which rest on the memos. Its report says why in its notes.
"""

from __future__ import annotations

from collections.abc import Callable, Hashable
from typing import Any

from ..properties import Property
from ..system import StateView, System, SystemState
from .explore import _Explorer
from .predicates import PredicateCache
from .results import Progress, Report, noted
from .stepcache import SuccessorCache
from .values import ValueRegistry

__all__ = ["plain_search"]


def plain_search(
    system: System,
    properties: tuple[Property, ...] | None,
    limits: tuple[int | None, int | None, bool, Callable[[Progress], None] | None, int],
    reason: str,
) -> Report:
    """`system` searched without memos; the report's notes start with `reason`."""
    note = (
        f"memos off: {reason}; every state was explored without them (and without symmetry "
        "or partial-order reduction, which rest on them)"
    )
    return noted(_PlainExplorer(system, properties, False, *limits).run, note)


class _PlainExplorer(_Explorer):
    walks = False  # no successor memo, so no walks to hint

    def __init__(self, *args: Any) -> None:
        super().__init__(*args)
        self.successors = SuccessorCache(self.system, max_nodes=0)  # runs, remembers nothing
        self.successors.values = self.values = _Unchecked()
        self.predicates = _PlainPredicates(self.system)
        self.monitor_steps = _Forgotten()


class _Unchecked(ValueRegistry):
    """No premise to check: nothing is looked up by value."""

    def add(self, place: Hashable, value: Hashable, typed: bool = True) -> None:
        return None


class _PlainPredicates(PredicateCache):
    """Each predicate judged on the state itself."""

    def judge(self, predicate: Callable[[StateView[Any]], object], state: SystemState) -> Any:
        return bool(predicate(StateView(self.system, state))), False


class _Forgotten(dict[Any, Any]):
    """A cache that keeps nothing: each monitor step is computed."""

    def __setitem__(self, key: Any, value: Any) -> None:
        return None
