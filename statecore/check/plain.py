"""The search without memos: where a model makes equal values that are not interchangeable.

Every memo of the explorer answers a value read with what it learned on an
equal one, and its visited set keeps one of two equal states
(`statecore.check.values`). When a search meets two equal values that behave
differently, `statecore.check.explore.explore` throws it away and runs an
explorer `without_memos`: each action run on each state (twice: it must be
deterministic), each predicate judged on the state itself, no monitor step
remembered, on one process, without symmetry or partial-order reduction, all
of which rest on the memos. Its visited set tells such states apart: two
states are one only if they are alike in every part (`values.alike`), and a
fingerprint encodes each part's type and a number's spelling. Its report says
why (`note`).
"""

from __future__ import annotations

from collections.abc import Callable, Hashable
from decimal import Decimal
from typing import Any, TypeVar

from ..system import StateView, SystemState
from .fingerprints import Fingerprinter, FingerprintStore
from .predicates import PredicateCache
from .stepcache import SuccessorCache
from .values import StrictParents, ValueRegistry

__all__ = ["StrictFingerprinter", "note", "without_memos"]

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
    search.successors.values = search.values = search.monitor_steps.values = _Unchecked()
    search.predicates = _PlainPredicates(system)
    search.monitor_steps.known = _Forgotten()
    if isinstance(search.parents, FingerprintStore):
        store = search.parents
        store.fingerprinter = store.fingerprint = StrictFingerprinter(store.bits)
    else:
        search.parents = StrictParents()
    return explorer


class StrictFingerprinter(Fingerprinter):
    """Fingerprints whose encoding names each part's type and spells each number, so that
    equal values that are not alike (``1`` and ``True``, ``0.0`` and ``-0.0``) differ."""

    def _worked_out(self, position: int, part: Hashable) -> int:
        return self.digest(self.encode(part), position)

    def encode(self, value: Any) -> bytes:
        kind = type(value)
        name = f"{kind.__module__}.{kind.__qualname__}".encode()
        if isinstance(value, tuple):  # records, slots, snapshots, ids
            body = b"t%d:%b" % (len(value), b"".join([self.encode(item) for item in value]))
        elif isinstance(value, frozenset):
            items = sorted([self.encode(item) for item in value])
            body = b"f%d:%b" % (len(items), b"".join(items))
        elif isinstance(value, (float, complex, Decimal)):
            body = b"r%r;" % value
        else:  # (a dataclass's fields come back here)
            body = super().encode(value)
        return b"T%d:%b%b" % (len(name), name, body)


class _Unchecked(ValueRegistry):
    """No premise to check: nothing is looked up by value."""

    def add(self, place: Hashable, value: Hashable) -> None:
        return None


class _PlainPredicates(PredicateCache):
    """Each predicate judged on the state itself."""

    def judge(self, predicate: Callable[[StateView[Any]], object], state: SystemState) -> Any:
        return bool(predicate(StateView(self.system, state))), False, -1  # decided by all


class _Forgotten(dict[Any, Any]):
    """A cache that keeps nothing: each monitor step is computed."""

    def __setitem__(self, key: Any, value: Any) -> None:
        return None
