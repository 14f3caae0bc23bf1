"""Fuzzing an implementation against a `System`: model-chosen paths, then Hypothesis.

`fuzz` drives the interpreter (`statecore.fuzzing.interpreter.state_machine`: the
model and an adapter in lockstep, conformance and properties checked after
every step) through three phases, each reported apart (`FuzzReport`):

1. *guided* - the model chooses the paths (`statecore.fuzzing.guided`): the shortest
   path to every transition of every component, to every state of each
   machine (and of a reused key) and to every property's interesting
   states, each run as is and one action longer, shortest first. It does not
   depend on the seed: a conformance bug one step away from any of those is
   found on every run.
2. *search* - Hypothesis' stateful search: each step draws one of the
   action kinds the model enables, then one of its enabled argument
   combinations. *Swarm testing* (each example disables a random subset of
   the action labels) and *steering* (``hypothesis.target`` rewards examples
   that take transitions no earlier example took) help it along.
3. *shrink* - the first finding is replayed with steps deleted
   (`statecore.fuzzing.shrink.minimise`: ddmin, then every contiguous block) until
   no deletion still shows a finding of the same kind and property.

Every entry point - `fuzz`, ``statecore fuzz``, the pytest plugin's
`fuzz_test` - runs the same default: the guided phase, then the profile's
``max_examples``.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from hypothesis import HealthCheck, Phase, settings
from hypothesis import seed as hypothesis_seed
from hypothesis.errors import Flaky
from hypothesis.stateful import RuleBasedStateMachine, run_state_machine_as_test

from ..adapter import Adapter, AdapterError
from ..errors import StatecoreError
from ..system import ActionLabel, System, SystemState, SystemStep
from ..traces.path import follow
from ..traces.trace import Trace
from .collector import spaced_full_collections
from .finding_store import FindingStore
from .guided import DEFAULT_MAX_STATES, GOAL_KINDS, Goal, Planner
from .interpreter import (
    CONFORMANCE,
    CRASH,
    DRAIN_LIMIT,
    GUIDED,
    IMPLEMENTATION_KINDS,
    LIVELOCK,
    PROGRESS_INTERVAL,
    REPLAY,
    SEARCH,
    SHRINK,
    Finding,
    FuzzProgress,
    Progress,
    _Stats,
    describe_mismatch,
    run_steps,
    shared_successors,
    state_machine,
)
from .shrink import MINIMISE_REPLAYS, minimise, replay_with_adapter

__all__ = [
    "CONFORMANCE",
    "CRASH",
    "DEFAULT_MAX_EXAMPLES",
    "DEFAULT_PROFILE",
    "DRAIN_LIMIT",
    "IMPLEMENTATION_KINDS",
    "LIVELOCK",
    "MINIMISE_REPLAYS",
    "PROFILES",
    "PROGRESS_INTERVAL",
    "Finding",
    "FuzzInterrupted",
    "FuzzProgress",
    "FuzzReport",
    "GuidedReport",
    "Progress",
    "describe_mismatch",
    "fuzz",
    "minimise",
    "replay_with_adapter",
    "state_machine",
]

PROFILES: dict[str, dict[str, Any]] = {
    "ci": {"max_examples": 100, "stateful_step_count": 30},
    "dev": {"max_examples": 200, "stateful_step_count": 40},
}
"""Search examples and steps per example. Every entry point (`fuzz`, the CLI, the
pytest plugin) runs the profile's ``max_examples`` unless given a number or a budget."""

DEFAULT_PROFILE = "ci"
DEFAULT_MAX_EXAMPLES: int = PROFILES[DEFAULT_PROFILE]["max_examples"]


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
    `statecore.fuzzing.guided.DEFAULT_PATIENCE`), ``"interrupted"``, or ``""`` (every
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
    `found_in` the phase that ran it (``"replay"``, ``"guided"`` or ``"search"``);
    `replayed` counts the stored findings replayed from the example database.
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
    replayed: int = 0

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


@spaced_full_collections()  # the memo outlives every example (see `collector`)
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
    database: Any = None,
    share: tuple[int, int] = (0, 1),
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

    With a Hypothesis example `database` (`statecore.fuzzing.finding_store`),
    the findings stored there for this system and adapter replay first, the
    ones other processes store meanwhile replay between search batches, and a
    finding of this run is stored (as found, then shrunk). `share` ``(i, n)``
    runs only every n-th guided path, from the i-th: worker i of n.
    """
    if profile not in PROFILES:
        raise StatecoreError(f"unknown profile {profile!r}; profiles are {sorted(PROFILES)}")
    _check_limits(budget, max_examples)
    if budget is None and max_examples is None:
        max_examples = PROFILES[profile]["max_examples"]
    successors = shared_successors(system)
    stats = _Stats(
        progress=progress, transitions=sum(len(c.machine.transitions) for c in system.components)
    )
    machine = state_machine(
        system, adapter_factory, known=known, swarm=swarm, stats=stats, successors=successors
    )
    adapter_name = _warm_up(system, adapter_factory)  # first-use costs stay outside the budget
    store = FindingStore(database, system, adapter_name) if database is not None else None
    replayed: set[bytes] = set()

    def replay() -> Finding | None:
        return None if store is None else _replay_stored(store, machine, stats, replayed)

    stats.started = started = time.perf_counter()
    deadline = started + budget if budget is not None else None
    finding: Finding | None = None
    guided_report: GuidedReport | None = None
    interrupted = False
    try:
        finding = replay()
        if guided and finding is None:
            finding, guided_report = _guided(
                system, machine, successors, stats, deadline, max_states, share
            )
        if finding is None and not (deadline is not None and time.perf_counter() >= deadline):
            between = replay if store is not None else None
            finding = _search(
                system, machine, stats, profile, seed or 0, max_examples, deadline, batch, between
            )
        if finding is not None:
            if store is not None:  # at once: the other workers replay it at their next batch
                store.save(finding.kind, finding.trace)
            stats.phase = SHRINK
            stats.tick(force=True)
            finding = minimise(system, finding, adapter_factory, known=known, _stats=stats)
            if store is not None:
                store.save(finding.kind, finding.trace)
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
        stats.examples[REPLAY],
    )
    if interrupted:
        raise FuzzInterrupted(report)
    return report


def _warm_up(system: System, adapter_factory: Callable[[], Adapter]) -> str:
    """Build and set up one adapter before the clock starts; refuse what is not one.

    Returns the adapter's name.

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
    return str(getattr(warm, "name", "") or type(warm).__name__)


def _replay_stored(
    store: FindingStore,
    machine: type[RuleBasedStateMachine],
    stats: _Stats,
    done: set[bytes],
) -> Finding | None:
    """Replay the stored findings not replayed yet, shortest first: the first that shows."""
    phase, stats.phase = stats.phase, REPLAY
    for stored in store.fetch():
        if stored.raw in done:
            continue
        done.add(stored.raw)
        try:
            steps = follow(store.system, stored.trace.actions).steps
        except StatecoreError:  # the model changed since: the trace no longer applies
            continue
        finding = run_steps(machine, steps)
        if finding is not None:
            return finding
    stats.phase = phase
    return None


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
    share: tuple[int, int] = (0, 1),
) -> tuple[Finding | None, GuidedReport]:
    """Run each model-chosen path, as is and one action longer, until a finding.

    With `share` ``(i, n)``, only the paths whose number is i modulo n.
    """
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
                if len(done) % share[1] != share[0]:
                    continue
                finding = run_steps(machine, path)
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


def _search(
    system: System,
    machine: type[RuleBasedStateMachine],
    stats: _Stats,
    profile: str,
    seed: int,
    max_examples: int | None,
    deadline: float | None,
    batch: int,
    between: Callable[[], Finding | None] | None = None,
) -> Finding | None:
    """Hypothesis' stateful search, generate phase only: the first finding, or None.

    `between`, if given, runs after every batch (batches then also without
    a deadline) and ends the search with the finding it returns.
    """
    stats.phase = SEARCH
    round_ = 0
    remaining = max_examples
    while True:
        if deadline is None and between is None:
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
        shared = between() if between is not None else None
        if shared is not None:
            return shared
        if remaining is not None:
            remaining -= size
            if remaining <= 0:
                return None
        if deadline is None or time.perf_counter() >= deadline:
            return None
