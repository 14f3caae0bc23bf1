"""Model-chosen paths: the shortest way to every coverage goal of a system.

The fuzzer has the model, so before it searches at random it drives the
implementation along paths the model chooses. `plan` walks the model
breadth-first and reports, as soon as it meets them, the *goals* no path
reached before, each with the shortest path (a tuple of `SystemStep`) that
reaches it:

* ``transition`` - each transition of each component's machine (except those
  the component declares untaken by design);
* ``state`` - each state but the initial one of each component's machine,
  held by some instance or entered by a transition (a final state whose
  instance is retired in the same step counts);
* ``property`` - each property's interesting states: an ``always ... when``
  condition that holds, a ``sometimes`` predicate that holds, an
  ``eventually`` predicate that is false (an obligation still open), and each
  state but the initial one of a monitor's spec machine some key is in.

The fuzzer then runs each such path, and each path one action longer, on the
implementation (`statecore.fuzz`), so a conformance bug one step away from
any model transition, machine state or interesting property state is found
whatever the seed. Breadth-first order makes the first finding a short one.

The walk stops when every goal is met, or after `max_states` distinct
states; goals not met by then are reported as such (`Planner.missed`).
Pure: nothing here runs an implementation.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import NamedTuple

from .properties import EMPTY_MONITOR, MonitorState, MonitorViolation, Property, advance_monitor
from .system import System, SystemState, SystemStep, TakenTransition

TRANSITION = "transition"
STATE = "state"
PROPERTY = "property"
GOAL_KINDS = (TRANSITION, STATE, PROPERTY)

DEFAULT_MAX_STATES = 20_000
"""States the walk visits at most, by default, before it gives up on the goals left."""


class Goal(NamedTuple):
    """One thing a model-chosen path must reach: ``(kind, where, what)``.

    ``("transition", "job", "open--finish->closing")``,
    ``("state", "job", "closing")``, ``("property", "terminal_delivered",
    "open obligation")``.
    """

    kind: str
    where: str
    what: str

    def __str__(self) -> str:
        return f"{self.kind} {self.where}: {self.what}"


def goals(system: System) -> tuple[Goal, ...]:
    """Every goal of `system`, in a fixed order: transitions, states, properties."""
    found: list[Goal] = []
    for comp in system.components:
        for t in comp.machine.transitions:
            if t.name not in comp.untaken:
                found.append(Goal(TRANSITION, comp.name, t.name))
    for comp in system.components:
        for s in comp.machine.states:
            if not s.initial:  # every instance starts there: the first spawn reaches it
                found.append(Goal(STATE, comp.name, s.name))
    for prop in system.properties:
        found.extend(_property_goals(prop))
    return tuple(dict.fromkeys(found))


def _property_goals(prop: Property) -> list[Goal]:
    if prop.kind == "always":
        return [Goal(PROPERTY, prop.id, "condition holds")] if prop.when is not None else []
    if prop.kind == "sometimes":
        return [Goal(PROPERTY, prop.id, "reached")]
    if prop.kind == "eventually":
        return [Goal(PROPERTY, prop.id, "open obligation")]
    if prop.kind == "monitor" and prop.machine is not None:
        return [
            Goal(PROPERTY, prop.id, f"monitor in {s.name}")
            for s in prop.machine.states
            if not s.initial
        ]
    return []


class Target(NamedTuple):
    """Goals first met together, and the shortest path that meets them."""

    goals: tuple[Goal, ...]
    path: tuple[SystemStep, ...]


@dataclass
class Planner:
    """A breadth-first walk of `system` yielding a `Target` per batch of new goals.

    Iterate it (`targets`); afterwards `met` and `missed` say which goals a
    path reached and which the walk did not meet within `max_states`.
    """

    system: System
    successors: Callable[[SystemState], list[SystemStep]]
    max_states: int = DEFAULT_MAX_STATES
    all_goals: tuple[Goal, ...] = ()
    met: dict[Goal, int] = field(default_factory=dict)  # goal -> length of its path
    states: int = 0
    complete: bool = False  # the walk saw every reachable state

    def __post_init__(self) -> None:
        if not self.all_goals:
            self.all_goals = goals(self.system)

    @property
    def missed(self) -> tuple[Goal, ...]:
        """The goals no path reached (yet)."""
        return tuple(g for g in self.all_goals if g not in self.met)

    def targets(self) -> Iterator[Target]:
        """The targets in breadth-first order: shortest paths first."""
        system = self.system
        wanted = set(self.all_goals)
        props = [p for p in system.properties if p.kind in ("always", "sometimes", "eventually")]
        monitors = [p for p in system.properties if p.kind == "monitor"]
        components = [key[0] for key in system.slot_keys()]
        entered = _Entered(system)
        init = system.init_states()[0]
        # Per node: its state, the node it was reached from and the step, its monitor states.
        parents: list[tuple[int, SystemStep | None]] = [(-1, None)]
        watched: list[tuple[MonitorState, ...]] = [tuple(EMPTY_MONITOR for _ in monitors)]
        seen: dict[SystemState, int] = {init: 0}
        queue: deque[tuple[int, SystemState]] = deque([(0, init)])
        self.states = 1

        def path_to(node: int, last: SystemStep | None = None) -> tuple[SystemStep, ...]:
            steps: list[SystemStep] = [] if last is None else [last]
            while node > 0:
                node, step_ = parents[node]
                assert step_ is not None
                steps.append(step_)
            return tuple(reversed(steps))

        def new(found: list[Goal], length: int) -> tuple[Goal, ...]:
            fresh = tuple(g for g in dict.fromkeys(found) if g in wanted and g not in self.met)
            for g in fresh:
                self.met[g] = length
            return fresh

        fresh = new(self._state_goals(init, components, props), 0)
        if fresh:
            yield Target(fresh, ())
        depth = {0: 0}
        while queue and len(self.met) < len(wanted):
            node, state = queue.popleft()
            for step_ in self.successors(state):
                length = depth[node] + 1
                found = [Goal(TRANSITION, t.component, t.transition) for t in step_.taken]
                found.extend(Goal(STATE, t.component, entered[t]) for t in step_.taken)
                marks = watched[node]
                if monitors:
                    marks = _advance(monitors, marks, step_)
                    found.extend(_monitor_goals(monitors, marks))
                known = seen.get(step_.state)
                if known is None and self.states < self.max_states:
                    known = len(parents)
                    seen[step_.state] = known
                    parents.append((node, step_))
                    watched.append(marks)
                    depth[known] = length
                    queue.append((known, step_.state))
                    self.states += 1
                    found.extend(self._state_goals(step_.state, components, props))
                fresh = new(found, length)
                if fresh:
                    yield Target(fresh, path_to(node, step_))
        self.complete = not queue and self.states < self.max_states

    def _state_goals(
        self, state: SystemState, components: list[str], props: list[Property]
    ) -> list[Goal]:
        found = [
            Goal(STATE, comp, slot.snapshot.state)
            for comp, slot in zip(components, state.slots)
            if slot.snapshot is not None
        ]
        if props:
            view = self.system.view(state)
            for prop in props:
                assert prop.predicate is not None
                if prop.kind == "always":
                    if prop.when is not None and _holds(prop.when, view):
                        found.append(Goal(PROPERTY, prop.id, "condition holds"))
                elif prop.kind == "sometimes":
                    if _holds(prop.predicate, view):
                        found.append(Goal(PROPERTY, prop.id, "reached"))
                elif not _holds(prop.predicate, view):
                    found.append(Goal(PROPERTY, prop.id, "open obligation"))
        return found


class _Entered(dict[TakenTransition, str]):
    """The state a taken transition enters, looked up once per transition."""

    def __init__(self, system: System) -> None:
        super().__init__()
        self.system = system

    def __missing__(self, taken: TakenTransition) -> str:
        machine = self.system.component(taken.component).machine
        transition = next(t for t in machine.transitions if t.name == taken.transition)
        # A self-loop ("(same)") enters its source; with several sources, the first.
        entered = transition.target or transition.source[0]
        self[taken] = entered
        return entered


def _holds(predicate: Callable[..., bool], view: object) -> bool:
    """A predicate's value; one that raises counts as not holding (the checks report it)."""
    try:
        return bool(predicate(view))
    except Exception:
        return False


def _advance(
    monitors: list[Property], marks: tuple[MonitorState, ...], step_: SystemStep
) -> tuple[MonitorState, ...]:
    if not step_.outputs:
        return marks
    advanced = []
    for prop, current in zip(monitors, marks):
        try:
            advanced.append(advance_monitor(prop, current, step_.outputs))
        except MonitorViolation:  # a violation of the model itself: `check` reports it
            advanced.append(current)
    return tuple(advanced)


def _monitor_goals(monitors: list[Property], marks: tuple[MonitorState, ...]) -> list[Goal]:
    return [
        Goal(PROPERTY, prop.id, f"monitor in {snap.state}")
        for prop, current in zip(monitors, marks)
        for _, snap in current
    ]
