"""Replaying a counterexample: does the model still do what the trace says?

A counterexample is only worth keeping if it can be checked again later -
after the model changed, after the bug was fixed, on another machine. Two
ways in:

* `replay(system, trace_or_path)` - strict: the trace (or ITF file) must be
  a path of the model, state for state (see `statecore.traces.verify.verify_trace`);
  anything else raises `TraceFileError` at the step where they part.
* `replay_actions(system, actions, property_id)` - lenient: only the actions
  are applied, from the initial state, until one is not enabled. This is what
  a generated regression test uses, because a fix usually changes the states
  (and often disables the faulty step), and "the path is gone" is then a
  pass, not an error.

Both re-judge the property on the path with the explorer's semantics and
wording, so a replayed explorer trace gives the explorer's verdict and
detail:

* ``always`` - violated at the first state where the invariant (under its
  ``when``) is false;
* ``eventually`` - violated at the first quiescent state (no internal action
  enabled) or deadlock where the predicate is false;
* ``monitor`` - violated when the monitor refuses a step's outputs, or rests
  in a hot state at a quiescent state or deadlock;
* ``sometimes`` - holds (a witness) at the first state satisfying it.

The actions are replayed by `statecore.traces.path` and the property judged by
`statecore.traces.judge.judge_path`, as everywhere else. Replaying is deterministic:
the same system and actions give the same result.
"""

from __future__ import annotations

import builtins
import os
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from ..properties import Property
from ..system import ActionLabel, System, SystemState
from .itf import PathLike, TraceFileError, read_header, read_itf
from .judge import HOLDS, VIOLATED, PropertyResult, judge_path, trace_verdict
from .path import follow
from .trace import Trace, TraceStep
from .verify import verify_trace

__all__ = ["ReplayResult", "find_property", "judge", "replay", "replay_actions"]


@dataclass(frozen=True)
class ReplayResult:
    """What replaying a path showed about one property.

    `verdict` is the explorer's word for what the path shows: ``"violated"``,
    ``"holds"`` (no violation on this path - not a proof - or, for
    ``sometimes``, the state was reached) or ``"unknown"`` (a ``sometimes``
    not reached on this path). `step` is the index of the state that decided
    it (None if nothing did). `trace` is the path the model took, with the
    model's states and outputs, cut where an action was not enabled;
    `blocked` is then that action's step index and `blocked_reason` why.
    `expected` is the verdict the trace recorded, if it came from a trace.
    """

    system: str
    property: Property
    verdict: str
    detail: str
    step: int | None
    trace: Trace
    expected: str | None = None
    blocked: int | None = None
    blocked_reason: str = ""

    @builtins.property
    def reproduced(self) -> bool:
        """Whether the replay shows the verdict the trace recorded."""
        return self.expected is not None and self.verdict == self.expected

    @builtins.property
    def violated(self) -> bool:
        """Whether the path violates the property."""
        return self.verdict == VIOLATED

    def result(self) -> PropertyResult:
        """The replay as an explorer `PropertyResult` (to compare with a `Report`)."""
        trace = self.trace if self.step is not None else None
        return PropertyResult(self.property, self.verdict, trace, self.detail)

    def explain(self, system: System | None = None) -> str:
        """A readable account (with the trace table if `system` is given)."""
        lines = [
            f"property {self.property.id!r} ({self.property.kind}: {self.property.statement})",
            f"replayed {len(self.trace)} action(s) on system {self.system!r}: {self.verdict}"
            + (f" at step {self.step}" if self.step is not None else "")
            + (f" - {self.detail}" if self.detail else ""),
        ]
        if self.blocked is not None:
            lines.append(f"stopped at step {self.blocked}: {self.blocked_reason}")
        if self.expected is not None and not self.reproduced:
            lines.append(f"the trace recorded {self.expected!r}")
        if system is not None:
            lines.append(self.trace.table(system))
        return "\n".join(lines)


def find_property(
    system: System,
    property_id: str,
    properties: Iterable[Property] | None = None,
    *,
    path: str | None = None,
) -> Property:
    """The property `property_id` among `properties` (default: the system's).

    Raises `TraceFileError` naming `path`, the trace that asked for it.
    """
    pool = tuple(system.properties if properties is None else properties)
    for prop in pool:
        if isinstance(prop, Property) and prop.id == property_id:
            return prop
    if not property_id:
        raise TraceFileError(path, None, "the trace names no property (no '#meta.property')")
    raise TraceFileError(
        path,
        None,
        f"system {system.name!r} has no property {property_id!r} (renamed or removed?); "
        f"properties are {[p.id for p in pool]}",
    )


def _where(path: PathLike) -> str:
    return os.fspath(path)


def _file_property(
    system: System,
    path: PathLike,
    property_id: str | None,
    properties: Iterable[Property] | None,
) -> Property | None:
    """The property to judge, found before the file's states are read (None: read them first).

    A trace of another system is left to `read_itf`, which says so.
    """
    header = read_header(path)
    if header.get("source") != system.name:
        return None
    wanted = property_id or str(header.get("property") or "")
    return find_property(system, wanted, properties, path=_where(path))


def _recorded_verdict(trace: Trace) -> str:
    return HOLDS if trace.verdict == "witness" else VIOLATED


def replay(
    system: System,
    trace_or_path: Trace | PathLike,
    *,
    property_id: str | None = None,
    properties: Iterable[Property] | None = None,
) -> ReplayResult:
    """Replay a trace (or an ITF file) strictly and re-judge its property.

    Every recorded state must be the one the model reaches (raises
    `TraceFileError` otherwise). The property is the trace's own unless
    `property_id` names another; it is looked up in `properties` (default:
    the system's).
    """
    if isinstance(trace_or_path, Trace):
        trace = verify_trace(system, trace_or_path)
        prop = find_property(system, property_id or trace.property_id, properties)
    else:
        early = _file_property(system, trace_or_path, property_id, properties)
        trace = read_itf(trace_or_path, system)
        wanted = property_id or trace.property_id
        where = _where(trace_or_path)
        prop = find_property(system, wanted, properties, path=where) if early is None else early
    verdict, detail, step = judge_path(system, prop, trace.steps)
    return ReplayResult(system.name, prop, verdict, detail, step, trace, _recorded_verdict(trace))


def replay_actions(
    system: System,
    actions: Sequence[ActionLabel],
    property_id: str,
    *,
    properties: Iterable[Property] | None = None,
    initial: SystemState | None = None,
) -> ReplayResult:
    """Apply `actions` from the initial state until one is not enabled; judge the path.

    Only the actions are replayed, not recorded states, so this still runs
    after a fix changed them. A violation on the prefix that could be
    replayed still counts; `blocked` says where the path ended early.
    """
    prop = find_property(system, property_id, properties)
    path = follow(system, actions, initial=initial, stop=True)
    verdict, detail, step = judge_path(system, prop, path.trace_steps)
    trace = path.trace(prop.id, trace_verdict(verdict), detail)
    stopped = path.blocked
    blocked, reason = (None, "") if stopped is None else (stopped.index, stopped.reason)
    return ReplayResult(system.name, prop, verdict, detail, step, trace, None, blocked, reason)


def judge(
    system: System, prop: Property, steps: Sequence[TraceStep]
) -> tuple[str, str, int | None]:
    """``(verdict, detail, step)`` of `prop` along `steps`: `statecore.traces.judge.judge_path`."""
    return judge_path(system, prop, steps)
