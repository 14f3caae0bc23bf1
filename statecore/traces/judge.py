"""Judging properties: the verdicts, the checks and what each check says.

Every tool that judges a property - the explorer over the whole state space,
`statecore.traces.replay` along one path, the fuzzer's interpreter along a run -
takes its verdicts, its notion of rest and its wording from here, so a
replayed explorer trace shows the explorer's verdict and detail word for word:

* ``always`` - false (under its ``when``) in a state: `INVARIANT_FALSE`;
* ``sometimes`` - true in a state: a witness, `REACHED`;
* ``eventually`` - false where the system rests (`at_rest`: no internal
  action that changes anything is enabled; a deadlock or a quiescent state):
  `eventually_false`;
* ``monitor`` - a step's outputs refused (`advance_monitors`), or a key left
  in a hot state where the system rests (`hot_monitor`).

`judge_path` applies all of it along one path, in the explorer's order.
"""

from __future__ import annotations

import builtins
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from ..properties import (
    EMPTY_MONITOR,
    MonitorState,
    MonitorViolation,
    Property,
    advance_monitor,
    pending_hot,
)
from ..system import Emitted, StateView, System, SystemState, SystemStep
from .trace import Trace, TraceStep

__all__ = [
    "AFTER_DRAINING",
    "HOLDS",
    "INVARIANT_FALSE",
    "REACHED",
    "UNKNOWN",
    "VACUOUS",
    "VIOLATED",
    "PropertyResult",
    "advance_monitors",
    "always_false",
    "at_rest",
    "eventually_false",
    "hot_monitor",
    "internal_moves",
    "judge_path",
    "rest_place",
    "trace_verdict",
    "vacuity",
]

HOLDS = "holds"
VIOLATED = "violated"
VACUOUS = "vacuous"
UNKNOWN = "unknown"  # the search stopped before it could decide

INVARIANT_FALSE = "the invariant is false in the last state"
REACHED = "reached"
NOT_REACHED_ON_PATH = "not reached on this path"
NO_VIOLATION_ON_PATH = "no violation on this path"
AFTER_DRAINING = "the quiescent state after draining"

# Why a property that could not have failed is vacuous (a complete search only).
NEVER_WHEN = "its condition is never true"
NEVER_REACHED = "no reachable state satisfies it"
NEVER_AT_REST = "no quiescent state was reached"


@dataclass(frozen=True)
class PropertyResult:
    """The verdict on one property, with a trace for violations and witnesses."""

    property: Property
    verdict: str
    trace: Trace | None = None
    detail: str = ""

    @builtins.property
    def ok(self) -> bool:
        """Whether this verdict lets a check pass."""
        return self.verdict == HOLDS


# -- the checks and their words ----------------------------------------------------


def always_false(prop: Property, view: StateView[Any]) -> bool:
    """Whether the ``always`` property `prop` fails in `view` (its ``when`` holding)."""
    assert prop.predicate is not None
    return (prop.when is None or bool(prop.when(view))) and not prop.predicate(view)


def internal_moves(state: SystemState, steps: Sequence[SystemStep]) -> list[SystemStep]:
    """The internal steps among `steps` (from `state`) that change something.

    An internal action that only stutters (same state, no output) is a
    livelock, not progress.
    """
    return [s for s in steps if s.internal and (s.outputs or s.state != state)]


def at_rest(state: SystemState, steps: Sequence[SystemStep]) -> bool:
    """Whether `state`, with the successors `steps`, is where the system rests:
    no internal action can change anything there (see `internal_moves`)."""
    # `internal_moves` without its list (nor a generator): the explorer asks on every state.
    for s in steps:  # noqa: SIM110
        if s.internal and (s.outputs or s.state != state):
            return False
    return True


def rest_place(deadlock: bool) -> str:
    """``a deadlock`` or ``a quiescent state``, for a detail."""
    return "a deadlock" if deadlock else "a quiescent state"


def eventually_false(where: str) -> str:
    """The detail of an ``eventually`` false at `where` (``a deadlock``, ...)."""
    return f"false at {where}"


def hot_monitor(prop: Property, monitor: MonitorState, where: str = "") -> str:
    """The detail of a monitor resting in a hot state at `where` ("" if none is hot)."""
    pending = pending_hot(prop, monitor)
    if not pending:
        return ""
    key, state = sorted(pending, key=repr)[0]
    at = f" at {where}" if where else ""
    return f"monitor for {key!r} left in hot state {state!r}{at}"


def advance_monitors(
    monitors: Sequence[Property],
    states: Sequence[MonitorState],
    outputs: tuple[Emitted, ...],
    raised: Callable[[Property, Exception], Exception] | None = None,
) -> tuple[tuple[MonitorState, ...], list[tuple[Property, str]]]:
    """Feed a step's outputs to every monitor: the new monitor states and refusals.

    A refused output leaves its monitor where it was (so a run goes on past a
    monitor violation); a refusal's detail is the monitor's own message. A
    router that raises raises ``raised(prop, exception)`` if given, else as is.
    """
    after: list[MonitorState] = []
    refusals: list[tuple[Property, str]] = []
    for prop, state in zip(monitors, states):
        try:
            after.append(advance_monitor(prop, state, outputs))
        except MonitorViolation as exc:
            refusals.append((prop, str(exc)))
            after.append(state)
        except Exception as exc:
            if raised is None:
                raise
            raise raised(prop, exc) from exc
    return tuple(after), refusals


def trace_verdict(verdict: str) -> str:
    """A trace's verdict (``witness`` or ``violated``) for a property's verdict."""
    return "witness" if verdict == HOLDS else "violated"


def vacuity(prop: Property, when_seen: bool, rest_seen: bool) -> str:
    """Why `prop`, never decided by a complete search, is vacuous ("" if it holds)."""
    if prop.kind == "always" and prop.when is not None and not when_seen:
        return NEVER_WHEN
    if prop.kind == "sometimes":
        return NEVER_REACHED
    if prop.kind in ("eventually", "monitor") and not rest_seen:
        return NEVER_AT_REST
    return ""


# -- along one path ------------------------------------------------------------------


def judge_path(
    system: System, prop: Property, steps: Sequence[TraceStep]
) -> tuple[str, str, int | None]:
    """``(verdict, detail, step)`` of `prop` along `steps`, as the explorer judges it.

    The checks run in the explorer's order - a state's own checks, then its
    rest, then the monitor on the next step's outputs - so the first
    violation found is the one the explorer would report on this path.
    """
    monitor = EMPTY_MONITOR
    last = len(steps) - 1
    for index, item in enumerate(steps):
        if index > 0 and prop.kind == "monitor":
            (monitor,), refused = advance_monitors((prop,), (monitor,), item.outputs)
            if refused:
                return VIOLATED, refused[0][1], index
        view = system.view(item.state)
        if prop.kind == "always":
            if always_false(prop, view):
                where = "in the last state" if index == last else f"at step {index}"
                return VIOLATED, f"the invariant is false {where}", index
        elif prop.kind == "sometimes":
            assert prop.predicate is not None
            if prop.predicate(view):
                return HOLDS, REACHED, index
        else:
            successors = system.successors(item.state)
            if not at_rest(item.state, successors):
                continue
            where = rest_place(not successors)
            if prop.kind == "eventually":
                assert prop.predicate is not None
                if not prop.predicate(view):
                    return VIOLATED, eventually_false(where), index
            else:
                detail = hot_monitor(prop, monitor, where)
                if detail:
                    return VIOLATED, detail, index
    if prop.kind == "sometimes":
        return UNKNOWN, NOT_REACHED_ON_PATH, None
    return HOLDS, NO_VIOLATION_ON_PATH, None
