"""Exhaustive breadth-first exploration of a bounded `System`.

Every reachable state is visited once (deduplicated by hash, optionally up to
renaming of interchangeable ids); each property is judged along the way:

* ``always`` in every state, ``sometimes`` until one state satisfies it;
* ``eventually`` and hot monitor states at every quiescent state (no enabled
  internal action) and every deadlock;
* monitors on every step's outputs.

Because the search is breadth-first, the first violation found of a property
has a shortest trace. A property that could not have failed is reported
*vacuous*: an ``always(..., when=A)`` whose A never held, a ``sometimes`` never
hit, an ``eventually`` with no quiescent state to judge it in.
"""

from __future__ import annotations

import builtins
import gc
import time
from collections import Counter, deque
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
from .system import ActionLabel, System, SystemState, SystemStep
from .trace import Trace, TraceStep

HOLDS = "holds"
VIOLATED = "violated"
VACUOUS = "vacuous"
UNKNOWN = "unknown"  # the search stopped before it could decide

Node = tuple[Any, ...]  # (SystemState, monitor state per monitor property...)


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
        self.taken: Counter[tuple[str, str]] = Counter()
        self.transitions = 0
        self.depth = 0

    # -- the search ------------------------------------------------------------

    def run(self) -> Report:
        start = time.perf_counter()
        queue: deque[tuple[Node, int]] = deque()
        for state in self.system.init_states():
            node = self._canon((state, *(EMPTY_MONITOR for _ in self.monitors)))
            if node not in self.parents:
                self.parents[node] = None
                queue.append((node, 0))
                self._check_state(node)
        last_report = start
        complete = True
        while queue and not self._done():
            node, depth = queue.popleft()
            if depth > self.depth:
                self._commit_refusals()
                if self._done():
                    queue.appendleft((node, depth))
                    break
            self.depth = max(self.depth, depth)
            steps = self.successors(node[0])
            if not any(s.internal for s in steps):
                self._check_quiescent(node, deadlock=not steps)
            for step_ in steps:
                self.transitions += 1
                for taken in step_.taken:
                    self.taken[(taken.component, taken.transition)] += 1
                nxt = self._advance(node, step_)
                if nxt not in self.parents:
                    if self.max_states is not None and len(self.parents) >= self.max_states:
                        complete = False
                        continue
                    self.parents[nxt] = (node, step_.action)
                    queue.append((nxt, depth + 1))
                    self._check_state(nxt)
            if self.progress is not None and time.perf_counter() - last_report > 0.5:
                last_report = time.perf_counter()
                self.progress(
                    Progress(
                        len(self.parents),
                        self.transitions,
                        depth,
                        len(queue),
                        last_report - start,
                    )
                )
        if queue:  # stopped early: a held-back refusal might not be a shortest one
            complete = False
        else:
            self._commit_refusals()
        return self._report(complete, time.perf_counter() - start)

    def _done(self) -> bool:
        return self.stop_on_violation and any(r.verdict == VIOLATED for r in self.results.values())

    def _canon(self, node: Node) -> Node:
        return self.canonicalizer(node) if self.symmetry else node

    def _advance(self, node: Node, step_: SystemStep) -> Node:
        monitors, refusals = self._step_monitors(node[1:], step_)
        for prop, detail in refusals:
            if prop.id not in self.results:
                self.refusals.setdefault(prop.id, (prop, node, step_.action, detail))
        return self._canon((step_.state, *monitors))

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

    def _check_state(self, node: Node) -> None:
        view = self.system.view(node[0])
        for prop in self.props:
            if prop.id in self.results and prop.kind != "always":
                continue
            if prop.kind == "always" and prop.id not in self.results:
                assert prop.predicate is not None
                if prop.when is not None:
                    if not prop.when(view):
                        continue
                    self.when_seen.add(prop.id)
                if not prop.predicate(view):
                    self._violate(prop, node, None, "the invariant is false in the last state")
            elif prop.kind == "sometimes" and prop.id not in self.results:
                assert prop.predicate is not None
                if prop.predicate(view):
                    trace = self._trace(node, None, prop, "witness", "reached")
                    self.results[prop.id] = PropertyResult(prop, HOLDS, trace, "reached")

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
        self.results[prop.id] = PropertyResult(prop, VIOLATED, trace, detail)

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
        result: list[Coverage] = []
        for comp in self.system.components:
            names = [t.name for t in comp.machine.transitions]
            taken = {n: self.taken[(comp.name, n)] for n in names if self.taken[(comp.name, n)]}
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
