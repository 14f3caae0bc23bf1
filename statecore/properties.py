"""Properties: what a system must keep, each with an id, a statement and a source.

Four kinds, all judged by the explorer and the fuzzer alike:

* `always(pred)` - a safety invariant, true in every reachable state. With
  ``when=A`` it reads "always (A implies pred)", and it is *vacuous* if A is
  never true in any reachable state: a check that cannot fail.
* `eventually(pred)` - judged at every *quiescent* state (no internal action
  enabled: the save thread has nothing left to do) and at every deadlock.
  Vacuous when the search meets no quiescent state.
* `sometimes(pred)` - some reachable state satisfies it; a reachability sanity
  check (a model that can never reach the interesting state proves nothing).
* `monitor(machine, route)` - a P-style spec machine per key, fed the outputs
  the system emits. An output the monitor has no transition for (under a
  ``reject`` or ``error`` policy) is a violation, and so is a monitor left in
  a hot state at quiescence ("a queued terminal was never delivered").

Predicates receive a `statecore.system.StateView`.
"""

from __future__ import annotations

from collections.abc import Callable, Hashable, Mapping
from dataclasses import dataclass, field
from typing import Any, Literal

from .definition import Machine, Snapshot, check_identifier
from .errors import DefinitionError
from .semantics import ACCEPTED, IGNORED, step
from .system import Emitted, StateView

Kind = Literal["always", "eventually", "sometimes", "monitor"]
Predicate = Callable[[StateView[Any]], bool]
# A router maps an emitted output to (monitor key, event, payload), or None to skip it.
Route = Callable[[Emitted], tuple[Hashable, str, Mapping[str, Any]] | None]


@dataclass(frozen=True)
class Property:
    """A named check. Build one with `always`, `eventually`, `sometimes` or `monitor`."""

    id: str
    statement: str
    kind: Kind
    source: str = ""
    predicate: Predicate | None = field(default=None, repr=False)
    when: Predicate | None = field(default=None, repr=False)
    machine: Machine | None = field(default=None, repr=False)
    route: Route | None = field(default=None, repr=False)

    def __post_init__(self) -> None:
        if not self.id or not all(ch.isalnum() or ch in "-_." for ch in self.id):
            raise DefinitionError(
                f"property id {self.id!r} must be non-empty letters, digits, '-', '_' or '.'"
            )
        if not self.statement:
            raise DefinitionError(f"property {self.id!r} needs a one-line statement")


def _checked(id: str, statement: str) -> None:
    if "\n" in statement:
        raise DefinitionError(f"property {id!r}: the statement must be one line")


def always(
    id: str,
    statement: str,
    pred: Predicate,
    *,
    when: Predicate | None = None,
    source: str = "",
) -> Property:
    """Safety: `pred` holds in every reachable state (where `when` holds)."""
    _checked(id, statement)
    return Property(id, statement, "always", source, pred, when)


def eventually(
    id: str,
    statement: str,
    pred: Predicate,
    *,
    source: str = "",
) -> Property:
    """Liveness at rest: `pred` holds in every quiescent or deadlocked state."""
    _checked(id, statement)
    return Property(id, statement, "eventually", source, pred)


def sometimes(
    id: str,
    statement: str,
    pred: Predicate,
    *,
    source: str = "",
) -> Property:
    """Reachability: some reachable state satisfies `pred`."""
    _checked(id, statement)
    return Property(id, statement, "sometimes", source, pred)


def monitor(
    id: str,
    statement: str,
    machine: Machine,
    route: Route,
    *,
    source: str = "",
) -> Property:
    """A spec machine per key over emitted outputs; see the module docstring."""
    _checked(id, statement)
    check_identifier("monitor machine", machine.name, f"property {id!r}")
    return Property(id, statement, "monitor", source, machine=machine, route=route)


# -- monitor semantics (shared by the explorer and the fuzzer) ------------------

MonitorState = frozenset[tuple[Hashable, Snapshot]]
EMPTY_MONITOR: MonitorState = frozenset()


class MonitorViolation(Exception):
    """A monitor refused an output; the message says which and why."""


def advance_monitor(
    prop: Property, state: MonitorState, outputs: tuple[Emitted, ...]
) -> MonitorState:
    """Feed `outputs` to the monitor `prop`; raise `MonitorViolation` on a refusal.

    A monitor state no output moved comes back as the very object given: a search
    keeps and fingerprints a node's parts by identity first.
    """
    assert prop.machine is not None and prop.route is not None
    machine = prop.machine
    current = dict(state)
    moved = False
    for emitted in outputs:
        routed = prop.route(emitted)
        if routed is None:
            continue
        key, event, payload = routed
        snap = current.get(key, machine.initial_snapshot())
        try:
            outcome = step(machine, snap, event, payload)
        except Exception as exc:  # an 'error' policy refusal is a violation too
            raise MonitorViolation(f"monitor {prop.id!r}, key {key!r}: {exc}") from None
        if outcome.status is ACCEPTED:
            current[key] = outcome.snapshot
            moved = True
        elif outcome.status is not IGNORED:
            raise MonitorViolation(
                f"monitor {prop.id!r}, key {key!r}: output {emitted.output} not "
                f"allowed in monitor state {snap.state!r}"
            )
    if not moved and type(state) is frozenset:
        return state
    return frozenset(current.items())


def pending_hot(prop: Property, state: MonitorState) -> list[tuple[Hashable, str]]:
    """Monitor keys resting in a hot state: a liveness violation at quiescence."""
    assert prop.machine is not None
    hot = prop.machine.hot_states
    return [(key, snap.state) for key, snap in state if snap.state in hot]
