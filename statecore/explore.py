"""Exhaustive breadth-first exploration of a bounded `System`.

Every reachable state is visited once (deduplicated by hash, optionally up to
renaming of interchangeable ids); each property is judged along the way:

* ``always`` in every state, ``sometimes`` until one state satisfies it;
* ``eventually`` and hot monitor states at every quiescent state (no enabled
  internal action) and every deadlock;
* monitors on every step's outputs.

Because the search is breadth-first (one depth level at a time), the first
violation found of a property has a shortest trace. A property that could
not have failed is reported *vacuous*: an ``always(..., when=A)`` whose A
never held, a ``sometimes`` never hit, an ``eventually`` with no quiescent
state to judge it in.

Successors come from a `statecore.stepcache.SuccessorCache`, which runs an
action only on a combination of read values it has not met before.
"""

from __future__ import annotations

import builtins
import gc
import time
from collections import Counter
from collections.abc import Callable, Hashable
from dataclasses import dataclass, field
from typing import Any

from .properties import (
    EMPTY_MONITOR,
    MonitorState,
    MonitorViolation,
    Property,
    advance_monitor,
    pending_hot,
)
from .stepcache import SuccessorCache
from .symmetry import Canonicalizer, Renaming, rename, rename_state, renamings
from .system import ActionLabel, Emitted, System, SystemState, SystemStep, TakenTransition
from .trace import Trace, TraceStep

HOLDS = "holds"
VIOLATED = "violated"
VACUOUS = "vacuous"
UNKNOWN = "unknown"  # the search stopped before it could decide

Node = tuple[Any, ...]  # (SystemState, monitor state per monitor property...)

_MONITOR_CACHE = 1 << 16  # monitor steps remembered at most


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


def explore(
    system: System,
    *,
    max_states: int | None = None,
    symmetry: bool = True,
    stop_on_violation: bool = True,
    properties: tuple[Property, ...] | None = None,
    progress: Callable[[Progress], None] | None = None,
) -> Report:
    """Explore `system` breadth-first and judge its properties.

    `max_states` bounds the number of distinct states (the report is then
    incomplete unless the space was smaller). With `stop_on_violation` the
    search stops at the first violation; otherwise it runs on and reports
    the first (shortest) violation of every property.
    """
    explorer = _Explorer(system, properties, symmetry, max_states, stop_on_violation, progress)
    # The visited set only grows and holds no cycles: the cyclic collector
    # would rescan it again and again for nothing.
    enabled = gc.isenabled()
    gc.disable()
    try:
        return explorer.run()
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
        stop_on_violation: bool,
        progress: Callable[[Progress], None] | None,
    ) -> None:
        self.system = system
        self.props = tuple(system.properties if properties is None else properties)
        self.monitors = tuple(p for p in self.props if p.kind == "monitor")
        self.group: tuple[Renaming, ...] = renamings(system) if symmetry else ({},)
        self.canonicalizer = Canonicalizer(system)
        self.successors = SuccessorCache(system)
        self.symmetry = symmetry
        self.max_states = max_states
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
        level: list[Node] = []
        for state in self.system.init_states():
            node = self._canon((state, *(EMPTY_MONITOR for _ in self.monitors)))
            if node not in self.parents:
                self.parents[node] = None
                level.append(node)
                self._check_state(node)
        self.last_report = start
        depth = 0
        stopped = False
        while level:
            deeper: list[Node] = []
            stopped = not self._expand_level(level, depth, deeper, start)
            if stopped or not deeper:
                break
            # One level deeper: the refusals held back so far have shortest traces.
            if not self._done():
                self._commit_refusals()
            if self._done():
                stopped = True
                break
            level, depth = deeper, depth + 1
        if not stopped:  # a held-back refusal of an early stop might not be a shortest one
            self._commit_refusals()
        return self._report(self.complete and not stopped, time.perf_counter() - start)

    def _expand_level(
        self, level: list[Node], depth: int, deeper: list[Node], start: float
    ) -> bool:
        """Expand every node of `level` into `deeper`; False if a violation stopped it."""
        for index, node in enumerate(level):
            if self._done():
                return False
            self.depth = depth
            self._expand(node, deeper)
            if self.progress is not None and time.perf_counter() - self.last_report > 0.5:
                self._report_progress(start, depth, len(level) - index - 1 + len(deeper))
        return True

    def _expand(self, node: Node, deeper: list[Node]) -> None:
        """Judge `node` where it rests, and queue its new successors in `deeper`."""
        steps = self.successors(node[0])
        if not any([s.internal for s in steps]):
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
            found = self.monitor_steps[key] = self._step_monitors(monitors, step_)
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

    def _step_monitors(
        self, monitors: tuple[MonitorState, ...], step_: SystemStep
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
                states.append(advance_monitor(prop, state, step_.outputs))
            except MonitorViolation as exc:
                refusals.append((prop, str(exc)))
                states.append(state)
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
        for prop in self.state_props:
            assert prop.predicate is not None
            if prop.id in self.results:  # settled earlier in this loop
                continue
            if prop.kind == "always":
                if prop.when is not None:
                    if not prop.when(view):
                        continue
                    self.when_seen.add(prop.id)
                if not prop.predicate(view):
                    self._violate(prop, node, None, "the invariant is false in the last state")
            elif prop.predicate(view):
                trace = self._trace(node, None, prop, "witness", "reached")
                self._settle(PropertyResult(prop, HOLDS, trace, "reached"))

    def _check_quiescent(self, node: Node, deadlock: bool) -> None:
        self.quiescent_seen = True
        view = self.system.view(node[0])
        where = "deadlock" if deadlock else "quiescent state"
        for prop in self.props:
            if prop.id in self.results:
                continue
            if prop.kind == "eventually":
                assert prop.predicate is not None
                if not prop.predicate(view):
                    self._violate(prop, node, None, f"false at a {where}")
            elif prop.kind == "monitor":
                index = self.monitors.index(prop)
                pending = pending_hot(prop, node[1 + index])
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

    # -- traces ----------------------------------------------------------------

    def _trace(
        self, node: Node, last: ActionLabel | None, prop: Property, verdict: str, detail: str
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
            renaming = self._renaming_to(rep, concrete)
            step_ = self.system.next_step(state, rename(label, renaming))
            state = step_.state
            concrete = (state, *self._step_monitors(concrete[1:], step_)[0])
            steps.append(TraceStep(step_.action, step_.actor, state, step_.outputs))
        if prop.kind == "monitor" and verdict == VIOLATED and self.symmetry:
            # The detail was worded on a renamed state; word it on the real path.
            from .replay import judge

            detail = judge(self.system, prop, steps)[1] or detail
        return Trace(self.system.name, tuple(steps), prop.id, verdict, detail)

    def _renaming_to(self, rep: Node, concrete: Node) -> Renaming:
        for renaming in self.group:
            if rename_state(self.system, rep, renaming) == concrete:
                return renaming
        raise AssertionError(
            f"system {self.system.name!r} is not symmetric in its ids: rerun with "
            f"symmetry off (--no-symmetry) or mark its Keys symmetric=False"
        )

    # -- the report ------------------------------------------------------------

    def _report(self, complete: bool, seconds: float) -> Report:
        results: list[PropertyResult] = []
        for prop in self.props:
            found = self.results.get(prop.id)
            if found is not None:
                results.append(found)
            elif not complete and self._done():
                results.append(PropertyResult(prop, UNKNOWN, None, "search stopped early"))
            elif prop.kind == "always" and prop.when is not None and prop.id not in self.when_seen:
                # Vacuity is a claim about every reachable state: only a
                # complete search can make it.
                verdict = VACUOUS if complete else UNKNOWN
                results.append(PropertyResult(prop, verdict, None, "its condition is never true"))
            elif prop.kind == "sometimes":
                verdict = VACUOUS if complete else UNKNOWN
                results.append(
                    PropertyResult(prop, verdict, None, "no reachable state satisfies it")
                )
            elif prop.kind in ("eventually", "monitor") and not self.quiescent_seen:
                verdict = VACUOUS if complete else UNKNOWN
                results.append(
                    PropertyResult(prop, verdict, None, "no quiescent state was reached")
                )
            else:
                detail = "" if complete else "no violation within the explored states"
                verdict = HOLDS if complete else UNKNOWN
                results.append(PropertyResult(prop, verdict, None, detail))
        return Report(
            self.system,
            tuple(results),
            len(self.parents),
            self.transitions,
            self.depth,
            seconds,
            complete,
            self.symmetry,
            self._coverage(),
        )

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
    explorer = _Explorer(system, (), symmetry, None, False, None)
    explorer.run()
    for node in explorer.parents:
        report_states.add(node[0])
    return report_states
