"""Exhaustive breadth-first exploration of a bounded `System`.

Every reachable state is visited once (deduplicated by hash, optionally up to
renaming of interchangeable ids); each property is judged along the way:

* ``always`` in every state, ``sometimes`` until one state satisfies it;
* ``eventually`` and hot monitor states at every quiescent state (no internal
  action enabled, or only ones that stutter: same state, no output) and every
  deadlock;
* monitors on every step's outputs.

Because the search is breadth-first (one depth level at a time), the first
violation found of a property has a shortest trace. A property that could
not have failed is reported *vacuous*: an ``always(..., when=A)`` whose A
never held, a ``sometimes`` never hit, an ``eventually`` with no quiescent
state to judge it in.

Successors come from a `statecore.stepcache.SuccessorCache`, which runs an
action only on a combination of read values it has not met before.

Symmetry reduction is used only where it is sound: `statecore.symmetry_guard`
checks, as the search goes, that nothing in the system tells its symmetric ids
apart. If something does, the search starts again without symmetry and the
report's `notes` say why. A model that misbehaves - an action or a property
that raises, an action that is not deterministic - stops the search with a
`statecore.errors.ModelError` carrying the trace that reached the state.
"""

from __future__ import annotations

import builtins
import gc
import os
import sys
import time
from collections import Counter
from collections.abc import Callable, Hashable
from dataclasses import dataclass, field, replace
from typing import Any

from .errors import (
    ActionError,
    ActionRaisedError,
    ModelError,
    NondeterministicActionError,
    PropertyRaisedError,
)
from .properties import (
    EMPTY_MONITOR,
    MonitorState,
    MonitorViolation,
    Property,
    advance_monitor,
    pending_hot,
)
from .stepcache import ActionFault, SuccessorCache
from .symmetry import Canonicalizer, Renaming, rename, rename_state, renamings
from .symmetry_guard import Asymmetry, SymmetryGuard
from .system import (
    ActionLabel,
    Emitted,
    StateView,
    System,
    SystemState,
    SystemStep,
    TakenTransition,
)
from .trace import Trace, TraceStep

HOLDS = "holds"
VIOLATED = "violated"
VACUOUS = "vacuous"
UNKNOWN = "unknown"  # the search stopped before it could decide

Node = tuple[Any, ...]  # (SystemState, monitor state per monitor property...)

_MONITOR_CACHE = 1 << 16  # monitor steps remembered at most
_MEMORY_EVERY = 1024  # nodes expanded between two looks at the resident memory

# Why a search stopped before it finished (`Report.stop`), in words.
STOPS = {
    "violation": "the search stopped at the first violation",
    "max_states": "the search hit its state bound",
    "max_memory": "the search hit its memory bound",
    "interrupted": "the search was interrupted",
}


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


@dataclass(frozen=True)
class Coverage:
    """Which transitions of one component's machine exploration took."""

    component: str
    machine: str
    taken: dict[str, int]
    never: tuple[str, ...]

    @property
    def total(self) -> int:
        """The number of transitions the machine declares."""
        return len(self.taken) + len(self.never)


@dataclass(frozen=True)
class Progress:
    """A progress sample, for a progress line on a terminal."""

    states: int
    transitions: int
    depth: int
    queue: int
    seconds: float

    @property
    def rate(self) -> float:
        """Distinct states per second so far."""
        return self.states / self.seconds if self.seconds > 0 else 0.0


@dataclass(frozen=True)
class Report:
    """The result of one exploration."""

    system: System
    results: tuple[PropertyResult, ...]
    states: int
    transitions: int
    depth: int
    seconds: float
    complete: bool
    symmetry: bool
    coverage: tuple[Coverage, ...] = field(default=())
    stop: str = ""  # why the search stopped early (a key of `STOPS`), "" if it finished
    notes: tuple[str, ...] = ()  # what the user must know to read the verdicts

    @property
    def ok(self) -> bool:
        """True when the search finished and every property holds."""
        return self.complete and all(r.ok for r in self.results)

    @property
    def rate(self) -> float:
        """Distinct states per second."""
        return self.states / self.seconds if self.seconds > 0 else float(self.states)

    def result(self, property_id: str) -> PropertyResult:
        """The result for `property_id`."""
        for r in self.results:
            if r.property.id == property_id:
                return r
        raise KeyError(f"no property {property_id!r} in report of {self.system.name!r}")

    def violations(self) -> tuple[PropertyResult, ...]:
        """Results that are not `holds`."""
        return tuple(r for r in self.results if not r.ok)


class ExplorationInterrupted(KeyboardInterrupt):
    """Ctrl-C stopped `explore`; `report` is what was decided so far (stop ``interrupted``)."""

    def __init__(self, report: Report) -> None:
        super().__init__("the search was interrupted")
        self.report = report


def explore(
    system: System,
    *,
    max_states: int | None = None,
    max_memory: int | None = None,
    symmetry: bool = True,
    stop_on_violation: bool = True,
    properties: tuple[Property, ...] | None = None,
    progress: Callable[[Progress], None] | None = None,
) -> Report:
    """Explore `system` breadth-first and judge its properties.

    `max_states` bounds the number of distinct states and `max_memory` the
    process's resident memory in bytes (the report is then incomplete unless
    the space was smaller). With `stop_on_violation` the search stops at the
    first violation; otherwise it runs on and reports the first (shortest)
    violation of every property. Ctrl-C raises `ExplorationInterrupted` with
    the partial report; a misbehaving model raises `ModelError`.
    """
    for name, bound in (("max_states", max_states), ("max_memory", max_memory)):
        if bound is not None and bound <= 0:
            raise ValueError(f"{name} must be positive (or None for no bound), got {bound}")
    limits = (max_states, max_memory, stop_on_violation, progress)
    # The visited set only grows and holds no cycles: the cyclic collector
    # would rescan it again and again for nothing.
    enabled = gc.isenabled()
    gc.disable()
    try:
        try:
            return _Explorer(system, properties, symmetry, *limits).run()
        except Asymmetry as exc:
            note = f"symmetry reduction off: {exc.reason}; every state was explored without it"
        try:
            report = _Explorer(system, properties, False, *limits).run()
        except ExplorationInterrupted as stopped:
            stopped.report = replace(stopped.report, notes=(note, *stopped.report.notes))
            raise
        return replace(report, notes=(note, *report.notes))
    finally:
        if enabled:
            gc.enable()


class _Explorer:
    def __init__(
        self,
        system: System,
        properties: tuple[Property, ...] | None,
        symmetry: bool,
        max_states: int | None,
        max_memory: int | None,
        stop_on_violation: bool,
        progress: Callable[[Progress], None] | None,
    ) -> None:
        self.system = system
        self.props = tuple(system.properties if properties is None else properties)
        self.monitors = tuple(p for p in self.props if p.kind == "monitor")
        self.monitor_ids = tuple(p.id for p in self.monitors)
        self.group: tuple[Renaming, ...] = renamings(system) if symmetry else ({},)
        self.canonicalizer = Canonicalizer(system)
        self.symmetry = symmetry and self.canonicalizer.active
        self.guard = SymmetryGuard(system, self.canonicalizer) if self.symmetry else None
        verify = self.guard.check_run if self.guard is not None else None
        self.successors = SuccessorCache(system, verify=verify)
        self.max_states = max_states
        self.max_memory = max_memory
        self.stop = ""  # why the search stopped early, a key of STOPS
        self.stop_on_violation = stop_on_violation
        self.progress = progress
        self.parents: dict[Node, tuple[Node, ActionLabel] | None] = {}
        self.results: dict[str, PropertyResult] = {}
        self.when_seen: set[str] = set()
        self.quiescent_seen = False
        # Monitor refusals met while expanding the current depth, committed when
        # the search moves one level deeper (see `_commit_refusals`).
        self.refusals: dict[str, tuple[Property, Node, ActionLabel, str]] = {}
        # Transitions taken, counted per step's tuple of them (see `_coverage`).
        self.taken: Counter[tuple[TakenTransition, ...]] = Counter()
        self.monitor_steps: dict[
            tuple[tuple[MonitorState, ...], tuple[Emitted, ...]],
            tuple[tuple[MonitorState, ...], list[tuple[Property, str]]],
        ] = {}
        self.transitions = 0
        self.depth = 0
        self.complete = True  # False once max_states turned a new state away
        self.violated = False
        self.last_report = 0.0
        # The always and sometimes properties still to judge in each new state.
        self.state_props = self._undecided_state_props()

    # -- the search ------------------------------------------------------------

    def run(self) -> Report:
        start = time.perf_counter()
        try:
            self._search(start)
        except KeyboardInterrupt:
            self.stop = "interrupted"
            raise ExplorationInterrupted(self._report(False, time.perf_counter() - start)) from None
        return self._report(self.complete and not self.stop, time.perf_counter() - start)

    def _search(self, start: float) -> None:
        level = self._initial_nodes()
        self.last_report = start
        depth = 0
        while level:
            deeper: list[Node] = []
            if not self._expand_level(level, depth, deeper, start) or not deeper:
                break
            # One level deeper: the refusals held back so far have shortest traces.
            if not self._done():
                self._commit_refusals()
            if self._done():
                self.stop = "violation"
                break
            level, depth = deeper, depth + 1
        if not self.stop:  # a held-back refusal of an early stop might not be a shortest one
            self._commit_refusals()
            if not self.complete:
                self.stop = "max_states"

    def _initial_nodes(self) -> list[Node]:
        try:
            states = self.system.init_states()
        except ModelError:
            raise
        except Exception as exc:
            raise ActionRaisedError(f"system {self.system.name!r}: init raised {exc!r}") from exc
        if self.guard is not None:
            self.guard.check_initial(states)
        level: list[Node] = []
        for state in states:
            node = self._canon((state, *(EMPTY_MONITOR for _ in self.monitors)))
            if node not in self.parents:
                self.parents[node] = None
                level.append(node)
                self._check_state(node)
        return level

    def _expand_level(
        self, level: list[Node], depth: int, deeper: list[Node], start: float
    ) -> bool:
        """Expand every node of `level` into `deeper`; False if the search must stop."""
        for index, node in enumerate(level):
            if self._done():
                self.stop = "violation"
                return False
            self.depth = depth
            self._expand(node, deeper)
            if index % _MEMORY_EVERY == 0 and self._out_of_memory():
                self.stop = "max_memory"
                return False
            if self.progress is not None and time.perf_counter() - self.last_report > 0.5:
                self._report_progress(start, depth, len(level) - index - 1 + len(deeper))
        return True

    def _out_of_memory(self) -> bool:
        return self.max_memory is not None and resident_memory() > self.max_memory

    def _expand(self, node: Node, deeper: list[Node]) -> None:
        """Judge `node` where it rests, and queue its new successors in `deeper`."""
        try:
            steps = self.successors(node[0])
        except ActionFault as fault:
            raise self._fault(node, fault) from fault.cause
        state = node[0]
        # At rest: no internal action can change anything. An internal action
        # that only stutters (same state, no output) is a livelock, not progress.
        if not any([s.internal and (s.outputs or s.state != state) for s in steps]):
            self._check_quiescent(node, deadlock=not steps)
        self.transitions += len(steps)
        parents = self.parents
        taken = self.taken
        monitors = node[1:]
        canon = self.canonicalizer if self.symmetry else None
        limit = self.max_states
        unbounded = limit is None
        for step_ in steps:
            if step_.taken:
                taken[step_.taken] += 1
            if monitors:
                nxt = (step_.state, *self._advance_monitors(node, step_))
            else:
                nxt = (step_.state,)
            if canon is not None:
                nxt = canon(nxt)
            entry = (node, step_.action)
            if unbounded:
                if parents.setdefault(nxt, entry) is not entry:
                    continue  # seen before (one hash of the node, not two)
            elif nxt in parents:
                continue
            elif limit is not None and len(parents) >= limit:
                self.complete = False
                continue
            else:
                parents[nxt] = entry
            deeper.append(nxt)
            if self.state_props:
                self._check_state(nxt)

    def _done(self) -> bool:
        return self.stop_on_violation and self.violated

    def _report_progress(self, start: float, depth: int, queued: int) -> None:
        assert self.progress is not None
        self.last_report = time.perf_counter()
        self.progress(
            Progress(len(self.parents), self.transitions, depth, queued, self.last_report - start)
        )

    def _canon(self, node: Node) -> Node:
        return self.canonicalizer(node) if self.symmetry else node

    def _advance_monitors(self, node: Node, step_: SystemStep) -> tuple[MonitorState, ...]:
        """The monitor states after `step_`, holding back any refusal (see `_commit_refusals`).

        Stepping the monitors is pure, so it is cached on the monitor states
        and the step's outputs.
        """
        monitors: tuple[MonitorState, ...] = node[1:]
        if not step_.outputs:
            return monitors
        key = (monitors, step_.outputs)
        found = self.monitor_steps.get(key)
        if found is None:
            if len(self.monitor_steps) >= _MONITOR_CACHE:
                self.monitor_steps.clear()
            found = self.monitor_steps[key] = self._monitor_step(node, monitors, step_)
        after, refusals = found
        for prop, detail in refusals:
            if prop.id not in self.results:
                self.refusals.setdefault(prop.id, (prop, node, step_.action, detail))
        return after

    def _commit_refusals(self) -> None:
        """Report the monitor refusals met while expanding the last depth.

        A refusal found while expanding a node of depth d has a trace of d + 1
        steps, but a hot monitor at a quiescent node of depth d (checked when
        that node is popped, possibly later) has one of d. Holding refusals
        back until every node of depth d is popped keeps each reported trace
        a shortest one.
        """
        for prop, node, action, detail in self.refusals.values():
            self._violate(prop, node, action, detail)
        self.refusals.clear()

    def _monitor_step(
        self, node: Node, monitors: tuple[MonitorState, ...], step_: SystemStep
    ) -> tuple[tuple[MonitorState, ...], list[tuple[Property, str]]]:
        """`_step_monitors`, checked for symmetry, with a raising router reported on `node`."""
        try:
            after, refusals = self._step_monitors(monitors, step_.outputs)
            if self.guard is not None:
                self.guard.check_monitor_step(
                    self.monitor_ids,
                    monitors,
                    step_.outputs,
                    after,
                    tuple(p.id for p, _ in refusals),
                    self._refused_ids,
                )
        except _PropertyFault as fault:
            raise self._property_error(fault, node, step_.action) from fault.cause
        return after, refusals

    def _refused_ids(
        self, monitors: tuple[Hashable, ...], outputs: tuple[Hashable, ...]
    ) -> tuple[tuple[Hashable, ...], tuple[str, ...]]:
        after, refusals = self._step_monitors(monitors, outputs)  # type: ignore[arg-type]
        return after, tuple(p.id for p, _ in refusals)

    def _step_monitors(
        self, monitors: tuple[MonitorState, ...], outputs: tuple[Emitted, ...]
    ) -> tuple[tuple[MonitorState, ...], list[tuple[Property, str]]]:
        """Feed a step's outputs to every monitor: the new monitor states and refusals.

        A refused output leaves its monitor where it was, so the search goes on
        past a monitor violation: the system state is reachable all the same,
        and the other properties must still be judged there.
        """
        states: list[MonitorState] = []
        refusals: list[tuple[Property, str]] = []
        for prop, state in zip(self.monitors, monitors):
            try:
                states.append(advance_monitor(prop, state, outputs))
            except MonitorViolation as exc:
                refusals.append((prop, str(exc)))
                states.append(state)
            except Exception as exc:
                raise _PropertyFault(prop, "its router", exc) from exc
        return tuple(states), refusals

    # -- judging ---------------------------------------------------------------

    def _undecided_state_props(self) -> list[Property]:
        return [
            p for p in self.props if p.kind in ("always", "sometimes") and p.id not in self.results
        ]

    def _settle(self, result: PropertyResult) -> None:
        self.results[result.property.id] = result
        self.violated = self.violated or result.verdict == VIOLATED
        self.state_props = self._undecided_state_props()

    def _check_state(self, node: Node) -> None:
        view = self.system.view(node[0])
        images = self.guard.images(node) if self.guard is not None else ()
        for prop in self.state_props:
            assert prop.predicate is not None
            if prop.id in self.results:  # settled earlier in this loop
                continue
            if prop.kind == "always":
                if prop.when is not None:
                    if not self._holds(prop, "its condition", prop.when, node, view, images):
                        continue
                    self.when_seen.add(prop.id)
                if not self._holds(prop, "its predicate", prop.predicate, node, view, images):
                    self._violate(prop, node, None, "the invariant is false in the last state")
            elif self._holds(prop, "its predicate", prop.predicate, node, view, images):
                trace = self._trace(node, None, prop, "witness", "reached")
                self._settle(PropertyResult(prop, HOLDS, trace, "reached"))

    def _holds(
        self,
        prop: Property,
        part: str,
        predicate: Callable[[StateView[Any]], bool],
        node: Node,
        view: StateView[Any],
        images: list[tuple[Renaming, Node]] | tuple[()],
    ) -> bool:
        """`predicate` at `node`, the same on every renaming of it when symmetry is on."""
        system = self.system
        try:
            value = bool(predicate(view))
            if images:
                assert self.guard is not None
                self.guard.check_value(
                    f"{part} of property {prop.id!r}",
                    lambda image: predicate(system.view(image[0])),
                    value,
                    images,
                )
        except Asymmetry:
            raise
        except Exception as exc:
            raise self._property_error(_PropertyFault(prop, part, exc), node, None) from exc
        return value

    def _check_quiescent(self, node: Node, deadlock: bool) -> None:
        self.quiescent_seen = True
        view = self.system.view(node[0])
        images = self.guard.images(node) if self.guard is not None else ()
        where = "deadlock" if deadlock else "quiescent state"
        for prop in self.props:
            if prop.id in self.results:
                continue
            if prop.kind == "eventually":
                assert prop.predicate is not None
                if not self._holds(prop, "its predicate", prop.predicate, node, view, images):
                    self._violate(prop, node, None, f"false at a {where}")
            elif prop.kind == "monitor":
                index = 1 + self.monitors.index(prop)
                pending = pending_hot(prop, node[index])
                if self.guard is not None:
                    self.guard.check_value(
                        f"monitor {prop.id!r}",
                        lambda image, p=prop, i=index: pending_hot(p, image[i]),  # type: ignore[misc]
                        pending,
                        images,
                    )
                if pending:
                    key, state = sorted(pending, key=repr)[0]
                    self._violate(
                        prop,
                        node,
                        None,
                        f"monitor for {key!r} left in hot state {state!r} at a {where}",
                    )

    def _violate(self, prop: Property, node: Node, action: ActionLabel | None, detail: str) -> None:
        if prop.id in self.results:
            return
        trace = self._trace(node, action, prop, VIOLATED, detail)
        self._settle(PropertyResult(prop, VIOLATED, trace, detail))

    # -- a model that misbehaves ------------------------------------------------

    def _fault(self, node: Node, fault: ActionFault) -> ModelError:
        """The `ModelError` for an action that raised or is not deterministic at `node`."""
        kind = ActionRaisedError if fault.cause is not None else NondeterministicActionError
        trace = self._path(node)
        return kind(
            f"system {self.system.name!r}: action {fault.label} {fault.problem}; "
            f"the state is the last of this trace:\n{_indented(trace.table(self.system))}",
            trace,
        )

    def _property_error(
        self, fault: _PropertyFault, node: Node, last: ActionLabel | None
    ) -> ModelError:
        trace = self._path(node)
        where = "in the last state of this trace"
        if last is not None:
            where = f"on the outputs of {last}, taken from the last state of this trace"
        return PropertyRaisedError(
            f"system {self.system.name!r}: {fault.part} of property {fault.prop.id!r} raised "
            f"{fault.cause!r} {where}:\n{_indented(trace.table(self.system))}",
            trace,
        )

    def _path(self, node: Node) -> Trace:
        """The trace to `node`, for an error message: no property is judged."""
        return self._trace(node, None, None, "", "")

    # -- traces ----------------------------------------------------------------

    def _trace(
        self,
        node: Node,
        last: ActionLabel | None,
        prop: Property | None,
        verdict: str,
        detail: str,
    ) -> Trace:
        """The concrete path to `node` (then `last`), replayed from the initial state.

        Stored parents link canonical representatives; replaying the actions,
        renamed to fit the concrete state reached so far, rebuilds a real path.
        """
        labels: list[ActionLabel] = []
        cursor: Node | None = node
        chain: list[Node] = []
        while cursor is not None:
            chain.append(cursor)
            parent = self.parents[cursor]
            if parent is None:
                break
            labels.append(parent[1])
            cursor = parent[0]
        chain.reverse()
        labels.reverse()
        if last is not None:
            labels.append(last)
            chain.append(chain[-1])
        state: SystemState = next(
            init
            for init in self.system.init_states()
            if self._canon((init, *chain[0][1:])) == chain[0]
        )
        steps = [TraceStep(None, "", state)]
        # The concrete node, monitor states included: a renaming that maps only
        # the system state may disagree with the monitors (when the state has
        # symmetries of its own) and replay a path that does not violate.
        concrete: Node = (state, *(EMPTY_MONITOR for _ in self.monitors))
        for rep, label in zip(chain[:-1], labels):
            renaming = self._renaming_to(rep, concrete, steps)
            try:
                step_ = self.system.next_step(state, rename(label, renaming))
            except ActionError:
                raise self._unreplayable(steps, label) from None
            state = step_.state
            concrete = (state, *self._step_monitors(concrete[1:], step_.outputs)[0])
            steps.append(TraceStep(step_.action, step_.actor, state, step_.outputs))
        if prop is None:
            return Trace(self.system.name, tuple(steps), "", verdict, detail)
        if prop.kind == "monitor" and verdict == VIOLATED and self.symmetry:
            # The detail was worded on a renamed state; word it on the real path.
            from .replay import judge

            detail = judge(self.system, prop, steps)[1] or detail
        return Trace(self.system.name, tuple(steps), prop.id, verdict, detail)

    def _renaming_to(self, rep: Node, concrete: Node, steps: list[TraceStep]) -> Renaming:
        for renaming in self.group:
            if rename_state(self.system, rep, renaming) == concrete:
                return renaming
        raise self._unreplayable(steps[:-1], steps[-1].action)

    def _unreplayable(self, steps: list[TraceStep], label: ActionLabel | None) -> ModelError:
        """Replaying the search's own path went elsewhere: some action is not deterministic."""
        trace = Trace(self.system.name, tuple(steps))
        return NondeterministicActionError(
            f"system {self.system.name!r}: replaying the search's path, action {label} did "
            "not do what it did during the search; an action must be a function of what it "
            "reads through its Tx (no clock, random or state kept outside the model). "
            f"The path up to it:\n{_indented(trace.table(self.system))}",
            trace,
        )

    # -- the report ------------------------------------------------------------

    def _report(self, complete: bool, seconds: float) -> Report:
        results = tuple(self._verdict(prop, complete) for prop in self.props)
        return Report(
            self.system,
            results,
            len(self.parents),
            self.transitions,
            self.depth,
            seconds,
            complete,
            self.symmetry,
            self._coverage(),
            "" if complete else self.stop,
        )

    def _verdict(self, prop: Property, complete: bool) -> PropertyResult:
        """The verdict on `prop` once the search is over (or stopped)."""
        found = self.results.get(prop.id)
        if found is not None:
            return found
        if not complete:
            # Holding, and vacuity alike, are claims about every reachable
            # state: only a complete search can make them.
            return PropertyResult(prop, UNKNOWN, None, f"undecided: {STOPS[self.stop]}")
        if prop.kind == "always" and prop.when is not None and prop.id not in self.when_seen:
            return PropertyResult(prop, VACUOUS, None, "its condition is never true")
        if prop.kind == "sometimes":
            return PropertyResult(prop, VACUOUS, None, "no reachable state satisfies it")
        if prop.kind in ("eventually", "monitor") and not self.quiescent_seen:
            return PropertyResult(prop, VACUOUS, None, "no quiescent state was reached")
        return PropertyResult(prop, HOLDS, None, "")

    def _coverage(self) -> tuple[Coverage, ...]:
        counts: Counter[tuple[str, str]] = Counter()
        for transitions, times in self.taken.items():
            for t in transitions:
                counts[(t.component, t.transition)] += times
        result: list[Coverage] = []
        for comp in self.system.components:
            names = [t.name for t in comp.machine.transitions]
            taken = {n: counts[(comp.name, n)] for n in names if counts[(comp.name, n)]}
            never = tuple(n for n in names if n not in taken)
            result.append(Coverage(comp.name, comp.machine.name, taken, never))
        return tuple(result)


def reachable(system: System, symmetry: bool = False) -> set[Hashable]:
    """Every reachable system state (a convenience for tests and tools)."""
    report_states: set[Hashable] = set()
    explorer = _Explorer(system, (), symmetry, None, None, False, None)
    try:
        explorer.run()
    except Asymmetry:
        explorer = _Explorer(system, (), False, None, None, False, None)
        explorer.run()
    for node in explorer.parents:
        report_states.add(node[0])
    return report_states


class _PropertyFault(Exception):
    """A property's predicate, condition or router raised; `part` says which."""

    def __init__(self, prop: Property, part: str, cause: Exception) -> None:
        super().__init__(f"{part} of property {prop.id!r} raised {cause!r}")
        self.prop = prop
        self.part = part
        self.cause = cause


def _indented(text: str) -> str:
    return "\n".join("    " + line for line in text.splitlines())


def resident_memory() -> int:
    """The process's resident memory in bytes (its peak where the current is not known)."""
    try:
        with open("/proc/self/statm", "rb") as statm:
            return int(statm.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")
    except (OSError, ValueError, IndexError):
        import resource

        peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
        return peak if sys.platform == "darwin" else peak * 1024
