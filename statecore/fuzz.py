"""Fuzzing an implementation against a `System`: model-chosen paths, then Hypothesis.

The *interpreter* (`state_machine`) advances the model and an adapter in
lockstep. Every step is taken by the model (the pure `System.next_step`) and
by the adapter on the real implementation; after it the interpreter checks

* conformance - `Adapter.observe()` equals `Adapter.expect(view)`;
* the ``always`` properties and the trace monitors;

and at the end of an example it drains the internal actions (the save thread
finishes its queue, the consumer reads what was put) and judges the
``eventually`` properties and hot monitor states at the quiescent state
reached.

`fuzz` runs three phases, each reported apart (`FuzzReport`):

1. *guided* - the model chooses the paths (`statecore.guided`): the shortest
   path to every transition of every component, to every state of each
   machine and to every property's interesting states, each run as is and
   one action longer, shortest first. It does not depend on the seed: a
   conformance bug one step away from any of those is found on every run.
2. *search* - Hypothesis' stateful search: each step draws one of the
   action kinds the model enables, then one of its enabled argument
   combinations. *Swarm testing* (each example disables a random subset of
   the action labels) and *steering* (``hypothesis.target`` rewards examples
   that take transitions no earlier example took) help it along.
3. *shrink* - a finding is replayed with steps deleted (`minimise`, ddmin
   and then every contiguous block) until no deletion still shows a finding
   of the same kind and property.

Violations of properties the adapter declares *known* are recorded but do
not fail a run.
"""

from __future__ import annotations

import math
import sys
import time
from collections import Counter
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, TypeVar

from hypothesis import HealthCheck, Phase, settings, target
from hypothesis import seed as hypothesis_seed
from hypothesis import strategies as st
from hypothesis.control import currently_in_test_context
from hypothesis.errors import Flaky, StopTest
from hypothesis.stateful import (
    RuleBasedStateMachine,
    initialize,
    rule,
    run_state_machine_as_test,
)

from .adapter import Adapter, AdapterError, AppliedStep
from .errors import ActionError, StatecoreError
from .guided import DEFAULT_MAX_STATES, GOAL_KINDS, Goal, Planner
from .properties import (
    EMPTY_MONITOR,
    MonitorState,
    MonitorViolation,
    Property,
    advance_monitor,
    pending_hot,
)
from .stepcache import SuccessorCache
from .system import ActionLabel, System, SystemState, SystemStep
from .trace import Trace, TraceStep

CONFORMANCE = "conformance"
CRASH = "crash"
LIVELOCK = "livelock"
IMPLEMENTATION_KINDS = frozenset({CONFORMANCE, CRASH, LIVELOCK})
"""Finding kinds only an implementation shows: their traces replay through an adapter."""

DRAIN_LIMIT = 500

GUIDED = "guided"
SEARCH = "search"
SHRINK = "shrink"

PROFILES: dict[str, dict[str, Any]] = {
    "ci": {"max_examples": 100, "stateful_step_count": 30},
    "dev": {"max_examples": 200, "stateful_step_count": 40},
}
"""Search examples and steps per example. Every entry point (`fuzz`, the CLI, the
pytest plugin) runs the profile's ``max_examples`` unless given a number or a budget."""

DEFAULT_PROFILE = "ci"
DEFAULT_MAX_EXAMPLES: int = PROFILES[DEFAULT_PROFILE]["max_examples"]

MINIMISE_REPLAYS = 2000
"""At most this many replays when `minimise` deletes steps from a finding."""

PROGRESS_INTERVAL = 0.5
"""Seconds between two calls of `fuzz`'s progress callback, at most."""


class Finding(AssertionError):
    """A property violation, a conformance mismatch or a crash, with its trace.

    `minimal` is True once `minimise` proved no step or block of steps can
    go, False when it ran out of replays first, None before it ran.
    """

    def __init__(self, kind: str, property_id: str, detail: str, trace: Trace) -> None:
        self.kind = kind
        self.property_id = property_id
        self.detail = detail
        self.trace = trace
        self.minimal: bool | None = None
        super().__init__(f"{property_id}: {detail}")


@dataclass(frozen=True)
class FuzzProgress:
    """How a run is going, handed to `fuzz`'s `progress` callback.

    `examples` counts search examples only; `paths` the guided paths run,
    `replays` the shrinking replays, `steps` every step of all three.
    """

    phase: str
    seconds: float
    paths: int
    examples: int
    replays: int
    steps: int
    transitions: tuple[int, int]  # (taken, total) over all phases
    goals: tuple[int, int]  # (met, total) by the guided phase
    findings: int  # 1 once a finding turned up (it is being shrunk)
    known: int  # known findings seen

    @property
    def steps_per_second(self) -> float:
        """Steps per second since the run started."""
        return self.steps / self.seconds if self.seconds > 0 else 0.0


Progress = Callable[[FuzzProgress], None]


@dataclass
class _Stats:
    """What all examples of one run saw, per phase: counts, coverage, known findings."""

    phase: str = SEARCH
    examples: Counter[str] = field(default_factory=Counter)
    steps: Counter[str] = field(default_factory=Counter)
    taken: dict[str, Counter[tuple[str, str]]] = field(
        default_factory=lambda: {GUIDED: Counter(), SEARCH: Counter(), SHRINK: Counter()}
    )
    known: dict[str, Trace] = field(default_factory=dict)
    discarded: int = 0  # search examples Hypothesis cut short and did not count
    adapter: str = ""
    reasons: dict[str, str] = field(default_factory=dict)
    started: float = field(default_factory=time.perf_counter)
    found_after: float | None = None
    found_in: str = ""
    transitions: int = 0
    goals: tuple[int, int] = (0, 0)
    progress: Progress | None = None
    interval: float = PROGRESS_INTERVAL
    last: float = 0.0

    def found(self) -> None:
        """Note the first finding of the run (searching ends there; shrinking starts)."""
        if self.found_after is None and self.phase in (GUIDED, SEARCH):
            self.found_after = time.perf_counter() - self.started
            self.found_in = self.phase
            if self.phase == SEARCH:  # Hypothesis re-runs the failing example: shrinking
                self.phase = SHRINK

    def tick(self, force: bool = False) -> None:
        """Call the progress callback, at most every `interval` seconds unless forced."""
        if self.progress is None:
            return
        now = time.perf_counter()
        if not force and now - self.last < self.interval:
            return
        self.last = now
        covered = {t for counts in self.taken.values() for t in counts}
        self.progress(
            FuzzProgress(
                self.phase,
                now - self.started,
                self.examples[GUIDED],
                self.examples[SEARCH],
                self.examples[SHRINK],
                sum(self.steps.values()),
                (len(covered), self.transitions),
                self.goals,
                int(self.found_after is not None),
                len(self.known),
            )
        )


def state_machine(
    system: System,
    adapter_factory: Callable[[], Adapter],
    *,
    known: Mapping[str, str] | None = None,
    swarm: bool = True,
    stats: _Stats | None = None,
    successors: Callable[[SystemState], list[SystemStep]] | None = None,
) -> type[RuleBasedStateMachine]:
    """A Hypothesis state machine that fuzzes `adapter_factory()` against `system`.

    `known` maps property ids to reasons (default: the adapter's own
    `Adapter.known`); their violations are recorded, not raised.
    """
    record = stats if stats is not None else _Stats()
    monitors = tuple(p for p in system.properties if p.kind == "monitor")
    always_props = tuple(p for p in system.properties if p.kind == "always")
    eventually_props = tuple(p for p in system.properties if p.kind == "eventually")
    labels = system.labels()
    order = {a.name: i for i, a in enumerate(system.actions)}
    initially = {s.action for s in system.successors(system.init_states()[0])}
    # Examples revisit the same model states over and over: one memo for all.
    expand = successors if successors is not None else SuccessorCache(system)

    class Fuzz(RuleBasedStateMachine):
        def __init__(self) -> None:
            super().__init__()
            self.adapter = adapter_factory()
            self.known = dict(self.adapter.known if known is None else known)
            record.examples[record.phase] += 1
            record.adapter = self.adapter.name or type(self.adapter).__name__
            record.reasons = dict(self.known)
            self.adapter.setup(system)
            self.state: SystemState = system.init_states()[0]
            self.monitor_states: tuple[MonitorState, ...] = tuple(EMPTY_MONITOR for _ in monitors)
            self.steps: list[TraceStep] = [TraceStep(None, "", self.state)]
            self.disabled: frozenset[ActionLabel] = frozenset()
            self.covered: set[tuple[str, str]] = set()
            self.failed = False
            self._cache: tuple[SystemState, list[SystemStep]] | None = None
            try:
                self._check_conformance()
            except Finding:  # no teardown follows a machine that was never built
                self.adapter.teardown()
                raise

        # -- model queries ---------------------------------------------------

        def enabled(self, action: str | None = None) -> list[SystemStep]:
            if self._cache is None or self._cache[0] is not self.state:
                self._cache = (self.state, expand(self.state))
            steps = [s for s in self._cache[1] if s.action not in self.disabled]
            if action is None:
                return steps
            return [s for s in steps if s.action.name == action]

        # -- one step ----------------------------------------------------------

        def take(self, step_: SystemStep) -> None:
            before = self.state
            self.state = step_.state
            self.steps.append(TraceStep(step_.action, step_.actor, step_.state, step_.outputs))
            record.steps[record.phase] += 1
            counts = record.taken[record.phase]
            for taken in step_.taken:
                key = (taken.component, taken.transition)
                self.covered.add(key)
                counts[key] += 1
            applied = AppliedStep.of(step_, system.spawned(before, step_.state))
            try:
                self.adapter.apply(applied, before)
            except Finding:
                raise
            except Exception as exc:  # the implementation (or its binding) crashed
                self._finding(CRASH, CRASH, f"{type(exc).__name__}: {exc}")
            self._advance_monitors(step_)
            self._check_conformance()
            self._check_always()

        def _advance_monitors(self, step_: SystemStep) -> None:
            states: list[MonitorState] = []
            for prop, current in zip(monitors, self.monitor_states):
                try:
                    states.append(advance_monitor(prop, current, step_.outputs))
                except MonitorViolation as exc:
                    self._violation(prop, str(exc))
                    states.append(current)
            self.monitor_states = tuple(states)

        def _check_conformance(self) -> None:
            observed = self.adapter.observe()
            expected = self.adapter.expect(system.view(self.state))
            if observed != expected:
                self._finding(CONFORMANCE, CONFORMANCE, describe_mismatch(observed, expected))

        def _check_always(self) -> None:
            view = system.view(self.state)
            for prop in always_props:
                assert prop.predicate is not None
                if prop.when is not None and not prop.when(view):
                    continue
                if not prop.predicate(view):
                    self._violation(prop, "the invariant is false in the last state")

        def _violation(self, prop: Property, detail: str) -> None:
            if prop.id in self.known:
                record.known.setdefault(prop.id, self._trace(prop.id, detail))
                return
            self._finding("property", prop.id, detail)

        def _finding(self, kind: str, property_id: str, detail: str) -> None:
            self.failed = True
            record.found()
            raise Finding(kind, property_id, detail, self._trace(property_id, detail))

        def _trace(self, property_id: str, detail: str) -> Trace:
            return Trace(system.name, tuple(self.steps), property_id, "violated", detail)

        # -- the one rule: a step the model enables ------------------------------

        @rule(data=st.data())
        def act(self, data: st.DataObject) -> None:
            """Take one enabled step: an action kind first, then its arguments.

            One rule for every action, so that Hypothesis' own per-rule
            feature flags never leave an example with nothing it may do (an
            invalid example); drawing the kind first keeps an action with many
            argument combinations from crowding out the others. With nothing
            enabled (a deadlock of a bounded model), the step is skipped.
            """
            steps = self.enabled()
            if not steps:
                return
            kinds = sorted({s.action.name for s in steps}, key=order.__getitem__)
            kind = kinds[0] if len(kinds) == 1 else data.draw(st.sampled_from(kinds))
            options = [s for s in steps if s.action.name == kind]
            chosen = options[0] if len(options) == 1 else data.draw(st.sampled_from(options))
            self.take(chosen)

        # -- swarm and teardown ------------------------------------------------

        @initialize(data=st.data())
        def choose_swarm(self, data: st.DataObject) -> None:
            """Swarm testing: switch off some actions (or some of their arguments).

            Never every argument of an action kind, and never what the initial
            state needs, so each example can still make progress and drain.
            """
            if not swarm:
                return
            off = set(data.draw(st.sets(st.sampled_from(labels)), label="swarm: disabled"))
            off -= initially
            for action in system.actions:
                own = [label for label in labels if label.name == action.name]
                if own and all(label in off for label in own):
                    off.discard(own[0])
            self.disabled = frozenset(off)

        def teardown(self) -> None:
            if isinstance(sys.exc_info()[1], StopTest):
                # Hypothesis ran out of choices for this example and discards it:
                # it is not one of the `max_examples` (its steps did run).
                record.examples[record.phase] -= 1
                record.discarded += 1
            try:
                if not self.failed:
                    self.finish()
            finally:
                if currently_in_test_context():  # not when replayed by hand
                    seen = record.taken[SEARCH]
                    novelty = sum(1 for t in self.covered if seen[t] <= 1)
                    target(float(len(self.covered) + 10 * novelty), label="model transitions")
                self.adapter.teardown()
                record.tick()

        def finish(self) -> None:
            """Drain the internal actions, then judge the properties of a quiescent state."""
            self._drain()
            self._check_quiescent()

        def _drain(self) -> None:
            self.disabled = frozenset()
            for _ in range(DRAIN_LIMIT):
                internal = [s for s in self.enabled() if s.internal]
                if not internal:
                    return
                self.take(internal[0])
            self._finding(
                LIVELOCK,
                LIVELOCK,
                f"internal actions still enabled after {DRAIN_LIMIT} drain steps",
            )

        def _check_quiescent(self) -> None:
            view = system.view(self.state)
            for prop in eventually_props:
                assert prop.predicate is not None
                if not prop.predicate(view):
                    self._violation(prop, "false at the quiescent state after draining")
            for prop, current in zip(monitors, self.monitor_states):
                pending = pending_hot(prop, current)
                if pending:
                    key, hot = sorted(pending, key=repr)[0]
                    self._violation(prop, f"monitor for {key!r} left in hot state {hot!r}")

    Fuzz.__name__ = Fuzz.__qualname__ = f"Fuzz_{system.name}"
    return Fuzz


def describe_mismatch(observed: object, expected: object) -> str:
    """Say where an observation differs from the prediction, naming only what differs.

    Observations made of ``(name, value)`` pairs (or dicts) are compared by
    name; anything else is shown whole.
    """
    obs, exp = _as_pairs(observed), _as_pairs(expected)
    if obs is None or exp is None:
        return f"the implementation shows {observed!r} where the model predicts {expected!r}"
    parts = [
        f"{name}: implementation {obs.get(name)!r}, model {exp.get(name)!r}"
        for name in sorted(set(obs) | set(exp), key=str)
        if obs.get(name) != exp.get(name)
    ]
    return "implementation and model differ - " + "; ".join(parts)


def _as_pairs(value: object) -> dict[object, object] | None:
    if isinstance(value, Mapping):
        return dict(value)
    if isinstance(value, tuple) and all(
        isinstance(item, tuple) and len(item) == 2 for item in value
    ):
        return dict(value)
    return None


# -- reports ---------------------------------------------------------------------


Coverage = list[tuple[str, str, int, int, list[str]]]


def _coverage(system: System, taken: Mapping[tuple[str, str], int]) -> Coverage:
    rows = []
    for comp in system.components:
        names = [t.name for t in comp.machine.transitions]
        hit = [n for n in names if taken.get((comp.name, n))]
        never = [n for n in names if n not in hit]
        rows.append((comp.name, comp.machine.name, len(hit), len(names), never))
    return rows


@dataclass(frozen=True)
class GuidedReport:
    """What the guided phase did: the model-chosen paths it ran and the goals they met.

    `stopped` says why it ended early: ``"finding"``, ``"budget"`` (the time
    budget ran out), ``"max_states"`` (the model walk reached its bound with
    goals left), ``"stalled"`` (the walk met no new goal for long, see
    `statecore.guided.DEFAULT_PATIENCE`), ``"interrupted"``, or ``""`` (every
    goal was met, or the walk saw every state).
    """

    system: System
    paths: int
    steps: int
    seconds: float
    states: int
    goals: tuple[Goal, ...]
    met: Mapping[Goal, int]  # goal -> the length of the shortest path to it
    stopped: str
    taken: Mapping[tuple[str, str], int]

    @property
    def missed(self) -> tuple[Goal, ...]:
        """The goals no guided path reached."""
        return tuple(g for g in self.goals if g not in self.met)

    def by_kind(self) -> list[tuple[str, int, int]]:
        """``(kind, met, total)`` for transitions, states and property states."""
        rows = []
        for kind in GOAL_KINDS:
            total = [g for g in self.goals if g.kind == kind]
            rows.append((kind, sum(1 for g in total if g in self.met), len(total)))
        return rows

    def summary(self) -> str:
        """``16/47 goals (transitions 9/25, states 5/12, property states 2/10)``."""
        names = {"transition": "transitions", "state": "states", "property": "property states"}
        parts = ", ".join(f"{names[k]} {m}/{n}" for k, m, n in self.by_kind())
        return f"{len(self.met)}/{len(self.goals)} goals ({parts})"

    def coverage(self) -> Coverage:
        """Per component, the transitions the guided paths took (as `FuzzReport.coverage`)."""
        return _coverage(self.system, self.taken)


@dataclass(frozen=True)
class FuzzReport:
    """The outcome of `fuzz`: a finding (shrunk) or none, with each phase's counts.

    `examples` and `steps` count the *search* phase only (`examples` as
    Hypothesis counts them against `max_examples`; `discarded` are the extra
    ones it cut short when their choices ran out, whose steps `steps`
    includes); the guided phase is `guided` and shrinking is
    `shrink_replays` / `shrink_steps`. `taken`
    (coverage) counts the transitions the guided and search phases took.
    `found_after` is the time from the start to the first failing run, and
    `found_in` the phase that ran it (``"guided"`` or ``"search"``).
    """

    system: System
    adapter: str
    finding: Finding | None
    known: dict[str, Trace]
    known_reasons: Mapping[str, str]
    examples: int
    steps: int
    seconds: float
    taken: dict[tuple[str, str], int]
    guided: GuidedReport | None = None
    search_taken: Mapping[tuple[str, str], int] = field(default_factory=dict)
    shrink_replays: int = 0
    shrink_steps: int = 0
    found_after: float | None = None
    found_in: str = ""
    interrupted: bool = False
    discarded: int = 0

    @property
    def ok(self) -> bool:
        """True when nothing but known findings turned up."""
        return self.finding is None

    @property
    def all_steps(self) -> int:
        """Steps of every phase: guided, search and shrinking."""
        guided = self.guided.steps if self.guided is not None else 0
        return guided + self.steps + self.shrink_steps

    @property
    def steps_per_second(self) -> float:
        """Model-and-implementation steps per second, over all phases."""
        return self.all_steps / self.seconds if self.seconds > 0 else 0.0

    def coverage(self) -> Coverage:
        """Per component: (component, machine, taken, total, never-taken names), guided + search."""
        return _coverage(self.system, self.taken)

    def search_coverage(self) -> Coverage:
        """The same, for the search phase alone."""
        return _coverage(self.system, self.search_taken)


class FuzzInterrupted(StatecoreError):
    """Ctrl-C stopped `fuzz`; `report` holds what the run saw until then."""

    def __init__(self, report: FuzzReport) -> None:
        super().__init__("fuzzing interrupted")
        self.report = report


# -- running ---------------------------------------------------------------------


def fuzz(
    system: System,
    adapter_factory: Callable[[], Adapter],
    *,
    budget: float | None = None,
    max_examples: int | None = None,
    seed: int | None = None,
    profile: str = DEFAULT_PROFILE,
    known: Mapping[str, str] | None = None,
    swarm: bool = True,
    guided: bool = True,
    max_states: int = DEFAULT_MAX_STATES,
    batch: int = 50,
    progress: Progress | None = None,
) -> FuzzReport:
    """Fuzz `adapter_factory()` against `system`: guided paths, search, then shrinking.

    The search runs `max_examples` examples, or until `budget` seconds have
    passed since the start (in batches of `batch` examples, each with its
    own seed derived from `seed`), or both, whichever ends first; with
    neither, the profile's ``max_examples`` (100 for ``ci``). The guided
    phase (`guided`, default on) comes first and walks at most `max_states`
    model states; a budget bounds it too. The first finding ends the run and
    is shrunk (`minimise`). `progress`, if given, is called with a
    `FuzzProgress` at most every `PROGRESS_INTERVAL` seconds and at the end.
    Ctrl-C raises `FuzzInterrupted` with the report so far.
    """
    if profile not in PROFILES:
        raise StatecoreError(f"unknown profile {profile!r}; profiles are {sorted(PROFILES)}")
    _check_limits(budget, max_examples)
    if budget is None and max_examples is None:
        max_examples = PROFILES[profile]["max_examples"]
    successors = SuccessorCache(system)
    stats = _Stats(
        progress=progress, transitions=sum(len(c.machine.transitions) for c in system.components)
    )
    machine = state_machine(
        system, adapter_factory, known=known, swarm=swarm, stats=stats, successors=successors
    )
    _warm_up(system, adapter_factory)  # imports and first-use costs stay outside the budget
    stats.started = started = time.perf_counter()
    deadline = started + budget if budget is not None else None
    finding: Finding | None = None
    guided_report: GuidedReport | None = None
    interrupted = False
    try:
        if guided:
            finding, guided_report = _guided(
                system, machine, successors, stats, deadline, max_states
            )
        if finding is None and not (deadline is not None and time.perf_counter() >= deadline):
            finding = _search(
                system, machine, stats, profile, seed or 0, max_examples, deadline, batch
            )
        if finding is not None:
            stats.phase = SHRINK
            stats.tick(force=True)
            finding = minimise(system, finding, adapter_factory, known=known, _stats=stats)
    except KeyboardInterrupt as stop:
        interrupted = True
        if isinstance(stop, _GuidedInterrupted):
            guided_report = stop.report
    stats.tick(force=True)
    report = FuzzReport(
        system,
        stats.adapter,
        finding,
        dict(stats.known),
        dict(stats.reasons),
        stats.examples[SEARCH],
        stats.steps[SEARCH],
        time.perf_counter() - started,
        dict(stats.taken[GUIDED] + stats.taken[SEARCH]),
        guided_report,
        dict(stats.taken[SEARCH]),
        stats.examples[SHRINK],
        stats.steps[SHRINK],
        stats.found_after,
        stats.found_in,
        interrupted,
        stats.discarded,
    )
    if interrupted:
        raise FuzzInterrupted(report)
    return report


def _warm_up(system: System, adapter_factory: Callable[[], Adapter]) -> None:
    """Build and set up one adapter before the clock starts; refuse what is not one.

    An adapter that cannot even be built and set up is an `AdapterError` (a
    usage error), not a finding: no step was taken.
    """
    try:
        warm = adapter_factory()
    except StatecoreError:
        raise
    except Exception as exc:
        raise AdapterError(
            f"building the adapter raised {type(exc).__name__}: {exc}; fix the adapter or "
            "its factory"
        ) from exc
    missing = [
        m for m in ("setup", "apply", "observe", "expect", "teardown") if not hasattr(warm, m)
    ]
    if missing:
        raise AdapterError(
            f"the adapter factory returned {type(warm).__name__}, which has no "
            f"{', '.join(missing)}: return a statecore.adapter.Adapter"
        )
    try:
        warm.setup(system)
        warm.teardown()
    except StatecoreError:
        raise
    except Exception as exc:
        name = getattr(warm, "name", "") or type(warm).__name__
        raise AdapterError(
            f"adapter {name}: setting it up for system {system.name!r} raised "
            f"{type(exc).__name__}: {exc}"
        ) from exc


def _check_limits(budget: float | None, max_examples: int | None) -> None:
    """Refuse a budget that never runs out (NaN, infinity) or never starts, and no examples."""
    if budget is not None and not (math.isfinite(budget) and budget > 0):
        raise StatecoreError(f"budget must be a positive, finite number of seconds, not {budget}")
    if max_examples is not None and max_examples < 1:
        raise StatecoreError(f"max_examples must be at least 1, not {max_examples}")


def _guided(
    system: System,
    machine: type[RuleBasedStateMachine],
    successors: Callable[[SystemState], list[SystemStep]],
    stats: _Stats,
    deadline: float | None,
    max_states: int,
) -> tuple[Finding | None, GuidedReport]:
    """Run each model-chosen path, as is and one action longer, until a finding."""
    stats.phase = GUIDED
    began = time.perf_counter()
    planner = Planner(system, successors, max_states)
    stats.goals = (0, len(planner.all_goals))
    init = system.init_states()[0]
    done: set[tuple[ActionLabel, ...]] = set()
    finding: Finding | None = None
    stopped = ""

    def report() -> GuidedReport:
        stats.goals = (len(planner.met), len(planner.all_goals))
        return GuidedReport(
            system,
            stats.examples[GUIDED],
            stats.steps[GUIDED],
            time.perf_counter() - began,
            planner.states,
            planner.all_goals,
            dict(planner.met),
            stopped,
            dict(stats.taken[GUIDED]),
        )

    try:
        for chosen in planner.targets():
            stats.goals = (len(planner.met), len(planner.all_goals))
            end = chosen.path[-1].state if chosen.path else init
            for last in (None, *successors(end)):
                path = chosen.path if last is None else (*chosen.path, last)
                labels = tuple(s.action for s in path)
                if labels in done:
                    continue
                done.add(labels)
                finding = _run_steps(machine, path)
                if finding is not None:
                    stopped = "finding"
                    break
                if deadline is not None and time.perf_counter() >= deadline:
                    stopped = "budget"
                    break
            if stopped:
                break
    except KeyboardInterrupt:
        stopped = "interrupted"
        raise _GuidedInterrupted(report()) from None
    if not stopped:
        stopped = planner.stopped
    return finding, report()


class _GuidedInterrupted(KeyboardInterrupt):
    """Ctrl-C in the guided phase, with what the phase did until then."""

    def __init__(self, report: GuidedReport) -> None:
        super().__init__()
        self.report = report


def _run_steps(machine: type[RuleBasedStateMachine], path: Sequence[SystemStep]) -> Finding | None:
    """Drive a fresh adapter along `path`, then drain and judge: the finding, or None."""
    try:
        run: Any = machine()
    except Finding as finding:
        return finding
    try:
        for step_ in path:
            run.take(step_)
        run.finish()
    except Finding as finding:
        return finding
    finally:
        run.adapter.teardown()
    return None


def _search(
    system: System,
    machine: type[RuleBasedStateMachine],
    stats: _Stats,
    profile: str,
    seed: int,
    max_examples: int | None,
    deadline: float | None,
    batch: int,
) -> Finding | None:
    """Hypothesis' stateful search, generate phase only: the first finding, or None."""
    stats.phase = SEARCH
    round_ = 0
    remaining = max_examples
    while True:
        if deadline is None:
            assert remaining is not None
            size = remaining  # one run: Hypothesis spreads its examples over one seed
        else:
            size = batch if remaining is None else min(batch, remaining)
        config = settings(
            max_examples=size,
            stateful_step_count=PROFILES[profile]["stateful_step_count"],
            deadline=None,
            database=None,
            derandomize=False,
            suppress_health_check=list(HealthCheck),
            # Shrinking is `minimise`'s, on the actions themselves; no
            # Phase.explain: it traces every line run, the implementation's too.
            phases=[Phase.generate],
            report_multiple_bugs=False,
        )
        seeded = hypothesis_seed(seed * 1_000_003 + round_)(machine)
        try:
            run_state_machine_as_test(seeded, settings=config)  # type: ignore[no-untyped-call,unused-ignore]
        except Finding as exc:
            return exc
        except Flaky as exc:
            raise StatecoreError(
                f"fuzzing {system.name!r}: the implementation is not deterministic under "
                f"replay ({exc}); an adapter must reset everything in setup()"
            ) from exc
        round_ += 1
        if remaining is not None:
            remaining -= size
            if remaining <= 0:
                return None
        if deadline is None or time.perf_counter() >= deadline:
            return None


# -- shrinking -------------------------------------------------------------------------


T = TypeVar("T")


class _OutOfReplays(Exception):
    """`minimise` used up its replays."""


def minimise(
    system: System,
    finding: Finding,
    adapter_factory: Callable[[], Adapter],
    *,
    known: Mapping[str, str] | None = None,
    max_replays: int = MINIMISE_REPLAYS,
    _stats: _Stats | None = None,
) -> Finding:
    """Delete every step of `finding` it does not need, replaying after each deletion.

    A deletion is kept when a deterministic replay of the actions left (then
    draining and judging, as at the end of a fuzz example) shows a finding of
    the same kind and property in a shorter trace. First ddmin (Zeller's
    delta debugging: halves, quarters, ... of the trace, and their
    complements), then every contiguous block from the largest to single
    steps, again after each success. The result is 1-minimal and more: no
    single step and no contiguous block can be removed. (Internal steps the
    replay drains at the end come back by themselves, so they stay.)
    `Finding.minimal` says whether that was proven within `max_replays`.
    """
    replayer = _Replayer(system, adapter_factory, known, _stats)
    best = finding
    wanted = (finding.kind, finding.property_id)
    replays = 0

    def reproduces(actions: list[ActionLabel]) -> list[ActionLabel] | None:
        nonlocal best, replays
        if replays >= max_replays:
            raise _OutOfReplays
        replays += 1
        again = replayer.actions(actions)
        if again is None or (again.kind, again.property_id) != wanted:
            return None
        if len(again.trace) >= len(best.trace):
            return None
        best = again
        return list(again.trace.actions)

    actions = list(finding.trace.actions)
    try:
        actions = _ddmin(actions, reproduces)
        _blocks(actions, reproduces)
        best.minimal = True
    except _OutOfReplays:
        best.minimal = False
    return best


def _ddmin(items: list[T], reproduces: Callable[[list[T]], list[T] | None]) -> list[T]:
    """Delta debugging (ddmin) over `items`; `reproduces` returns the smaller list kept."""
    n = 2
    while len(items) >= 2:
        chunks = _split(items, n)
        kept = next((got for c in chunks if (got := reproduces(c)) is not None), None)
        if kept is not None:
            items, n = kept, 2
            continue
        if n > 2:
            complements = ([x for j, c in enumerate(chunks) if j != i for x in c] for i in range(n))
            kept = next((got for c in complements if (got := reproduces(c)) is not None), None)
            if kept is not None:
                items, n = kept, max(n - 1, 2)
                continue
        if n >= len(items):
            break
        n = min(2 * n, len(items))
    return items


def _split(items: list[T], n: int) -> list[list[T]]:
    size, extra = divmod(len(items), n)
    chunks, start = [], 0
    for index in range(n):
        end = start + size + (1 if index < extra else 0)
        chunks.append(items[start:end])
        start = end
    return [c for c in chunks if c]


def _blocks(items: list[T], reproduces: Callable[[list[T]], list[T] | None]) -> list[T]:
    """Delete contiguous blocks, largest first, until none can go."""
    size = len(items)
    while size >= 1:
        kept = next(
            (
                got
                for start in range(len(items) - size + 1)
                if (got := reproduces(items[:start] + items[start + size :])) is not None
            ),
            None,
        )
        if kept is not None:
            items, size = kept, len(kept)
        else:
            size -= 1
    return items


class _Replayer:
    """Replays of action lists through fresh adapters, with one interpreter for all."""

    def __init__(
        self,
        system: System,
        adapter_factory: Callable[[], Adapter],
        known: Mapping[str, str] | None,
        stats: _Stats | None,
    ) -> None:
        self.system = system
        if stats is not None:
            stats.phase = SHRINK
        self.machine = state_machine(
            system, adapter_factory, known=known, swarm=False, stats=stats or _Stats(SHRINK)
        )
        self.stats = stats

    def actions(self, actions: Sequence[ActionLabel]) -> Finding | None:
        """The finding `actions` show, or None (also when one of them is not enabled)."""
        state = self.system.init_states()[0]
        path = []
        for action in actions:
            try:
                step_ = self.system.next_step(state, action)
            except ActionError:
                return None
            path.append(step_)
            state = step_.state
        found = _run_steps(self.machine, path)
        if self.stats is not None:
            self.stats.tick()
        return found


def replay_with_adapter(
    system: System,
    trace: Trace,
    adapter_factory: Callable[[], Adapter],
    *,
    known: Mapping[str, str] | None = None,
) -> Finding | None:
    """Drive a fresh adapter through `trace`'s actions; return the finding it shows, if any.

    The same checks as a fuzz step run after every action (conformance,
    invariants, monitors), then the internal actions are drained and the
    eventually-properties judged, exactly as at the end of a fuzz example.
    Deterministic: this is what ``statecore replay TRACE --adapter NAME`` runs.
    """
    machine = state_machine(system, adapter_factory, known=known, swarm=False)
    state = system.init_states()[0]
    path = []
    for action in trace.actions:
        step_ = system.next_step(state, action)
        path.append(step_)
        state = step_.state
    return _run_steps(machine, path)
