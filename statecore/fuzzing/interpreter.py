"""The fuzz interpreter: the model and an implementation advanced in lockstep.

`state_machine(system, adapter_factory)` builds a Hypothesis
``RuleBasedStateMachine``. Every step is taken by the model (the pure
`System.next_step`) and by the adapter on the real implementation
(`Adapter.apply`, given the step with the handles it spawned); after it the
interpreter checks

* conformance - `Adapter.observe()` equals `Adapter.expect(view)`;
* the ``always`` properties and the trace monitors;

and at the end of a run it drains the internal actions (the save thread
finishes its queue, the consumer reads what was put) and judges the
``eventually`` properties and hot monitor states at the quiescent state
reached. A failed check raises `Finding`. Hypothesis drives it through its
one rule (`act`); the guided phase and replays drive it step by step
(`run_steps`). `statecore.fuzzing.fuzz` runs it; `_Stats` is what one run saw, per
phase.

Violations of properties the adapter declares *known* are recorded but do
not raise; so is a violation later in an example that already violated a known
property: the model properties are judged on the model's path, and a path that
went through a known bug is that bug's (it is recorded as known, with the
known property it followed). The implementation is still compared after every
step, so no conformance check is dropped.
"""

from __future__ import annotations

import sys
import threading
import time
from collections import Counter
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, TypeVar

from hypothesis import strategies as st
from hypothesis import target
from hypothesis.control import currently_in_test_context
from hypothesis.errors import StopTest
from hypothesis.stateful import RuleBasedStateMachine, initialize, rule

from ..adapter import Adapter, AppliedStep
from ..check.stepcache import SuccessorCache
from ..check.values import NotInterchangeable
from ..properties import EMPTY_MONITOR, MonitorState, Property
from ..system import ActionLabel, StateView, System, SystemState, SystemStep
from ..traces.judge import (
    AFTER_DRAINING,
    INVARIANT_FALSE,
    advance_monitors,
    always_false,
    eventually_false,
    hot_monitor,
    internal_moves,
)
from ..traces.trace import Trace, TraceStep
from .collector import CollectorPause

CONFORMANCE = "conformance"
CRASH = "crash"
LIVELOCK = "livelock"
IMPLEMENTATION_KINDS = frozenset({CONFORMANCE, CRASH, LIVELOCK})
"""Finding kinds only an implementation shows: their traces replay through an adapter."""

DRAIN_LIMIT = 500

REPLAY = "replay"
GUIDED = "guided"
SEARCH = "search"
SHRINK = "shrink"

T = TypeVar("T")

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
    transitions: tuple[int, int]  # (taken, total) by the guided and search phases
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
        default_factory=lambda: {p: Counter() for p in (REPLAY, GUIDED, SEARCH, SHRINK)}
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
    interval: float | None = None  # None: PROGRESS_INTERVAL
    last: float = 0.0

    def found(self) -> None:
        """Note the first finding of the run (searching ends there; shrinking starts)."""
        if self.found_after is None and self.phase in (REPLAY, GUIDED, SEARCH):
            self.found_after = time.perf_counter() - self.started
            self.found_in = self.phase
            if self.phase == SEARCH:  # Hypothesis re-runs the failing example: shrinking
                self.phase = SHRINK

    def tick(self, force: bool = False) -> None:
        """Call the progress callback, at most every `interval` seconds unless forced."""
        if self.progress is None:
            return
        now = time.perf_counter()
        interval = PROGRESS_INTERVAL if self.interval is None else self.interval
        if not force and now - self.last < interval:
            return
        self.last = now
        covered = set(self.taken[GUIDED]) | set(self.taken[SEARCH])
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
    # Examples revisit the same model states over and over: one memo for all,
    # and for every machine of the same system (the model is pure).
    expand = successors if successors is not None else shared_successors(system)
    swarm_draw = st.sets(st.sampled_from(labels))

    class Fuzz(RuleBasedStateMachine):
        def __init__(self) -> None:
            super().__init__()
            self._collector = CollectorPause()
            try:
                self._build()
            except BaseException:  # no teardown follows a machine that was never built
                self._collector.end()
                raise

        def _build(self) -> None:
            self.adapter = adapter_factory()
            self.known = dict(self.adapter.known if known is None else known)
            record.examples[record.phase] += 1
            record.adapter = self.adapter.name or type(self.adapter).__name__
            record.reasons.update(self.known)
            self.adapter.setup(system)
            self.state: SystemState = system.init_states()[0]
            self.monitor_states: tuple[MonitorState, ...] = tuple(EMPTY_MONITOR for _ in monitors)
            self.steps: list[TraceStep] = [TraceStep(None, "", self.state)]
            self.disabled: frozenset[ActionLabel] = frozenset()
            self.covered: set[tuple[str, str]] = set()
            self.kinds_taken: Counter[str] = Counter()  # `act` offers the least taken first
            self.failed = False
            self.after_known: str | None = None  # the first known property this example violated
            self._cache: tuple[SystemState, list[SystemStep]] | None = None
            try:
                self._check_conformance()
            except Finding:
                self.adapter.teardown()
                raise

        def close(self) -> None:
            """End the example: tear the implementation down, let the collector run again."""
            try:
                self.adapter.teardown()
            finally:
                self._collector.end()

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
            self.steps.append(TraceStep.of(step_))
            self.kinds_taken[step_.action.name] += 1
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
            view = system.view(self.state)  # one view for both checks
            self._check_conformance(view)
            self._check_always(view)

        def _advance_monitors(self, step_: SystemStep) -> None:
            after, refusals = advance_monitors(monitors, self.monitor_states, step_.outputs)
            self.monitor_states = after
            for prop, detail in refusals:
                self._violation(prop, detail)

        def _check_conformance(self, view: StateView[Any] | None = None) -> None:
            observed = self.adapter.observe()
            expected = self.adapter.expect(system.view(self.state) if view is None else view)
            if observed != expected:
                self._finding(CONFORMANCE, CONFORMANCE, describe_mismatch(observed, expected))

        def _check_always(self, view: StateView[Any]) -> None:
            for prop in always_props:
                if always_false(prop, view):
                    self._violation(prop, INVARIANT_FALSE)

        def _violation(self, prop: Property, detail: str) -> None:
            if prop.id in self.known or self.after_known is not None:
                if prop.id not in self.known:
                    assert self.after_known is not None
                    reason = f"follows the known {self.after_known} on the same path"
                    record.reasons.setdefault(prop.id, reason)
                record.known.setdefault(prop.id, self._trace(prop.id, detail))
                self.after_known = self.after_known or prop.id
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

            Kinds are offered least taken in this example first (ties in the
            model's order), arguments in the model's order. Hypothesis starts a
            search with the example whose every choice is the first, and its
            early examples extend new prefixes the same way; so those examples
            take every kind in turn instead of the first declared over and
            over, while the first arguments keep coming back (the same id
            reused, where reuse bugs live).
            """
            steps = self.enabled()
            if not steps:
                return
            taken = self.kinds_taken
            kinds = sorted({s.action.name for s in steps}, key=lambda k: (taken[k], order[k]))
            kind = kinds[0] if len(kinds) == 1 else _choose(data, kinds)
            options = [s for s in steps if s.action.name == kind]
            chosen = options[0] if len(options) == 1 else _choose(data, options)
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
            off = set(_draw(data, swarm_draw))
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
                self.close()
                record.tick()

        def finish(self) -> None:
            """Drain the internal actions, then judge the properties of a quiescent state."""
            self._drain()
            self._check_quiescent()

        def _drain(self) -> None:
            self.disabled = frozenset()
            for _ in range(DRAIN_LIMIT):
                # As the explorer has it: an internal action that only stutters
                # (same state, no output) is no progress, and the run is at rest.
                internal = internal_moves(self.state, self.enabled())
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
                    self._violation(prop, eventually_false(AFTER_DRAINING))
            for prop, current in zip(monitors, self.monitor_states):
                detail = hot_monitor(prop, current)
                if detail:
                    self._violation(prop, detail)

    Fuzz.__name__ = Fuzz.__qualname__ = f"Fuzz_{system.name}"
    # Hypothesis keys each run by the class's source, and `inspect.getsource`
    # parses this whole module to look for a generated class it cannot find
    # (tens of milliseconds a run); a module it cannot open fails at once and
    # the key falls back to the class name, which names the system.
    Fuzz.__module__ = f"{__name__}.generated"
    return Fuzz


def _by_state(
    expand: Callable[[SystemState], list[SystemStep]], limit: int = 20_000
) -> Callable[[SystemState], list[SystemStep]]:
    """`expand`, remembered per state: examples keep coming back to the same few states.

    The returned list is shared; callers do not change it.
    """
    known: dict[SystemState, list[SystemStep]] = {}

    def steps(state: SystemState) -> list[SystemStep]:
        found = known.get(state)
        if found is None:
            if len(known) >= limit:
                known.clear()
            found = known[state] = expand(state)
        return found

    return steps


_SHARED_LIMIT = 4
_shared: dict[tuple[int, int], tuple[System, Callable[[SystemState], list[SystemStep]]]] = {}


def shared_successors(system: System) -> Callable[[SystemState], list[SystemStep]]:
    """`System.successors`, memoised once per system for every state machine built on it.

    A run of examples, a replay, a shrink and the next run on the same
    system meet the same model states; the memo (pure: a model step depends
    only on the state; `SuccessorCache` still runs each new action twice to
    check that) is kept for the last few systems, one per thread (the memo is
    not safe to grow from two threads at once).
    """
    key = (id(system), threading.get_ident())
    held = _shared.get(key)
    if held is not None and held[0] is system:
        return held[1]
    if len(_shared) >= _SHARED_LIMIT:
        del _shared[next(iter(_shared))]
    expand = _memoised(system)
    _shared[key] = (system, expand)
    return expand


def _memoised(system: System) -> Callable[[SystemState], list[SystemStep]]:
    """`SuccessorCache` behind `_by_state`, until the model makes two equal values that
    are not interchangeable (`statecore.check.values`): from then on `System.successors`,
    since both memos would answer one with what they learned on the other."""
    cache = SuccessorCache(system)
    memo = _by_state(cache)
    memo_off = False
    try:
        for state in system.init_states():  # values the runs make may equal theirs
            cache.values.add_state(state)
    except NotInterchangeable:
        memo_off = True
    except Exception:  # init raises: the run reports it where it calls init
        pass

    def steps(state: SystemState) -> list[SystemStep]:
        nonlocal memo_off
        if not memo_off:
            try:
                return memo(state)
            except NotInterchangeable:
                memo_off = True
        return system.successors(state)

    return steps


def _choose(data: st.DataObject, elements: Sequence[T]) -> T:
    """One of `elements`, by the one integer draw ``st.sampled_from(elements)`` makes.

    The same choice, so the same examples; but no strategy is built or
    validated at each step (a step's options are new lists of new model
    steps), and the draw skips `DataObject.draw`'s bookkeeping for a printed
    reproduction (statecore prints its own trace).
    """
    conjecture = getattr(data, "conjecture_data", None)
    if conjecture is None:  # not Hypothesis' DataObject: its public draw
        return data.draw(st.sampled_from(elements))
    index: int = conjecture.draw_integer(0, len(elements) - 1)
    return elements[index]


def _draw(data: st.DataObject, strategy: st.SearchStrategy[T]) -> T:
    """``data.draw(strategy)``, without the bookkeeping for a printed reproduction."""
    conjecture = getattr(data, "conjecture_data", None)
    if conjecture is None:
        return data.draw(strategy)
    drawn: T = conjecture.draw(strategy)
    return drawn


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


def run_steps(machine: type[RuleBasedStateMachine], path: Sequence[SystemStep]) -> Finding | None:
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
        run.close()
    return None
