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
  instance is retired in the same step counts); and for a component whose
  keys can be reused (``max_generations`` above 1), each state held by a
  later generation of a key (``"open (key reused)"``), where a stale handle
  of the earlier generation can still act;
* ``property`` - each property's interesting states: an ``always ... when``
  condition that holds, a ``sometimes`` predicate that holds, an
  ``eventually`` predicate that is false (an obligation still open), and each
  state but the initial one of a monitor's spec machine some key is in.

The fuzzer then runs each such path, and each path one action longer, on the
implementation (`statecore.fuzzing.fuzz`), so a conformance bug one step away from
any model transition, machine state or interesting property state is found
whatever the seed. Breadth-first order makes the first finding a short one.

The walk stops when every goal is met, after `max_states` distinct states,
or once it has met no new goal for long (`DEFAULT_PATIENCE`): goals a model
cannot reach (an error state of a monitor, say) must not cost a walk of the
whole state space. Goals not met are reported as such (`Planner.missed`,
`Planner.stopped`).
Pure: nothing here runs an implementation.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import NamedTuple

from ..properties import EMPTY_MONITOR, MonitorState, MonitorViolation, Property, advance_monitor
from ..system import System, SystemState, SystemStep, TakenTransition

TRANSITION = "transition"
STATE = "state"
PROPERTY = "property"
GOAL_KINDS = (TRANSITION, STATE, PROPERTY)

REUSED = " (key reused)"
"""The suffix of a state goal held by a later generation of its key."""

DEFAULT_MAX_STATES = 20_000
"""States the walk visits at most, by default, before it gives up on the goals left."""

DEFAULT_PATIENCE = 5_000
"""The walk gives up on the goals left once it has met no new goal in this many states,
or in twice as many as it took to meet the last one, whichever is more."""

MAX_STATES = "max_states"
STALLED = "stalled"


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
    for comp in system.components:
        if comp.max_generations > 1:  # a reused key: where stale handles meet new instances
            found.extend(Goal(STATE, comp.name, f"{s.name}{REUSED}") for s in comp.machine.states)
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
    path reached and which the walk did not meet, and `stopped` why it ended
    before it met them all: `MAX_STATES` or `STALLED` (see `DEFAULT_PATIENCE`).
    """

    system: System
    successors: Callable[[SystemState], list[SystemStep]]
    max_states: int = DEFAULT_MAX_STATES
    all_goals: tuple[Goal, ...] = ()
    met: dict[Goal, int] = field(default_factory=dict)  # goal -> length of its path
    patience: int = DEFAULT_PATIENCE
    states: int = 0
    complete: bool = False  # the walk saw every reachable state
    stopped: str = ""  # MAX_STATES or STALLED: the walk ended with goals left unmet

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
        reusable = any(c.max_generations > 1 for c in system.components)
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
        last_new = 1  # states walked when a goal was last met
        while queue and len(self.met) < len(wanted):
            if self.states - last_new > max(self.patience, 2 * last_new):
                self.stopped = STALLED
                return
            node, state = queue.popleft()
            for step_ in self.successors(state):
                length = depth[node] + 1
                found = [Goal(TRANSITION, t.component, t.transition) for t in step_.taken]
                found.extend(Goal(STATE, t.component, entered[t]) for t in step_.taken)
                if step_.taken and reusable:
                    gone = _retired_reused(components, state, step_.state)
                    found.extend(
                        Goal(STATE, t.component, f"{entered[t]}{REUSED}")
                        for t in step_.taken
                        if t.component in gone
                    )
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
                    last_new = self.states
                    yield Target(fresh, path_to(node, step_))
        self.complete = not queue and self.states < self.max_states
        if self.missed and not self.complete:
            self.stopped = MAX_STATES

    def _state_goals(
        self, state: SystemState, components: list[str], props: list[Property]
    ) -> list[Goal]:
        found = []
        for comp, slot in zip(components, state.slots):
            if slot.snapshot is not None:
                found.append(Goal(STATE, comp, slot.snapshot.state))
                if slot.generation > 1:
                    found.append(Goal(STATE, comp, f"{slot.snapshot.state}{REUSED}"))
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


def _retired_reused(components: list[str], before: SystemState, after: SystemState) -> set[str]:
    """Components with an instance of a reused key that the step retired."""
    return {
        comp
        for comp, old, slot in zip(components, before.slots, after.slots)
        if slot.snapshot is None and old.snapshot is not None and slot.generation > 1
    }


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
