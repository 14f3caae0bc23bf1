"""Stateful fuzzing: Hypothesis tests generated from a `System`, run against an adapter.

`state_machine(system, adapter_factory)` builds a Hypothesis
``RuleBasedStateMachine`` with one rule per action kind. A rule runs only
where the model enables its action (its precondition), and draws one of the
enabled argument combinations. Every step is taken by the model (the pure
`System.next_step`) and by the adapter on the real implementation, in
lockstep; after it the interpreter checks:

* conformance - `Adapter.observe()` equals `Adapter.expect(view)`;
* the ``always`` properties and the trace monitors.

At teardown the internal actions are drained (the save thread finishes its
queue, the consumer reads what was put), then the ``eventually`` properties
and hot monitor states are judged at the quiescent state reached.

Two search aids on top of Hypothesis' own: *swarm testing* (each example
disables a random subset of the environment's action kinds, so rare
combinations get room) and *steering* (``hypothesis.target`` rewards examples
that take model transitions no earlier example took).

A finding is raised as `Finding` (an ``AssertionError``), so Hypothesis
shrinks it to a shortest example; `fuzz()` then returns the shrunk trace.
Violations of properties the adapter declares *known* are recorded but do
not fail an example.
"""

from __future__ import annotations

import math
import time
from collections import Counter
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from hypothesis import HealthCheck, Phase, settings, target
from hypothesis import seed as hypothesis_seed
from hypothesis import strategies as st
from hypothesis.control import currently_in_test_context
from hypothesis.errors import Flaky
from hypothesis.stateful import (
    RuleBasedStateMachine,
    initialize,
    precondition,
    rule,
    run_state_machine_as_test,
)

from .adapter import Adapter
from .errors import StatecoreError
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
DRAIN_LIMIT = 500

PROFILES: dict[str, dict[str, Any]] = {
    "dev": {"max_examples": 200, "stateful_step_count": 40},
    "ci": {"max_examples": 100, "stateful_step_count": 30, "derandomize": False},
}


class Finding(AssertionError):
    """A property violation, a conformance mismatch or a crash, with its trace."""

    def __init__(self, kind: str, property_id: str, detail: str, trace: Trace) -> None:
        self.kind = kind
        self.property_id = property_id
        self.detail = detail
        self.trace = trace
        super().__init__(f"{property_id}: {detail}")


@dataclass
class _Stats:
    """What all examples of one run saw: coverage, known findings, counts."""

    taken: Counter[tuple[str, str]] = field(default_factory=Counter)
    known: dict[str, Trace] = field(default_factory=dict)
    examples: int = 0
    steps: int = 0
    adapter: str = ""
    reasons: dict[str, str] = field(default_factory=dict)


def state_machine(
    system: System,
    adapter_factory: Callable[[], Adapter],
    *,
    known: Mapping[str, str] | None = None,
    swarm: bool = True,
    stats: _Stats | None = None,
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
    initially = {s.action for s in system.successors(system.init_states()[0])}
    # Examples revisit the same model states over and over: one memo for all.
    successors = SuccessorCache(system)

    class Fuzz(RuleBasedStateMachine):
        def __init__(self) -> None:
            super().__init__()
            self.adapter = adapter_factory()
            self.known = dict(self.adapter.known if known is None else known)
            self.adapter.setup(system)
            self.state: SystemState = system.init_states()[0]
            self.monitor_states: tuple[MonitorState, ...] = tuple(EMPTY_MONITOR for _ in monitors)
            self.steps: list[TraceStep] = [TraceStep(None, "", self.state)]
            self.disabled: frozenset[ActionLabel] = frozenset()
            self.covered: set[tuple[str, str]] = set()
            self.failed = False
            self._cache: tuple[SystemState, list[SystemStep]] | None = None
            record.examples += 1
            record.adapter = self.adapter.name
            record.reasons = dict(self.known)
            self._check_conformance()

        # -- model queries ---------------------------------------------------

        def enabled(self, action: str | None = None) -> list[SystemStep]:
            if self._cache is None or self._cache[0] is not self.state:
                self._cache = (self.state, successors(self.state))
            steps = [s for s in self._cache[1] if s.action not in self.disabled]
            if action is None:
                return steps
            return [s for s in steps if s.action.name == action]

        # -- one step ----------------------------------------------------------

        def take(self, step_: SystemStep) -> None:
            before = self.state
            self.state = step_.state
            self.steps.append(TraceStep(step_.action, step_.actor, step_.state, step_.outputs))
            record.steps += 1
            for taken in step_.taken:
                self.covered.add((taken.component, taken.transition))
                record.taken[(taken.component, taken.transition)] += 1
            try:
                self.adapter.apply(step_, before)
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
            raise Finding(kind, property_id, detail, self._trace(property_id, detail))

        def _trace(self, property_id: str, detail: str) -> Trace:
            return Trace(system.name, tuple(self.steps), property_id, "violated", detail)

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
            try:
                if not self.failed:
                    self._drain()
                    self._check_quiescent()
            finally:
                if currently_in_test_context():  # not when replayed by hand
                    novelty = sum(1 for t in self.covered if record.taken[t] <= 1)
                    target(float(len(self.covered) + 10 * novelty), label="model transitions")
                self.adapter.teardown()

        def _drain(self) -> None:
            self.disabled = frozenset()
            for _ in range(DRAIN_LIMIT):
                internal = [s for s in self.enabled() if s.internal]
                if not internal:
                    return
                self.take(internal[0])
            self._finding(
                "livelock",
                "livelock",
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

    for action in system.actions:
        _add_rule(Fuzz, action.name)
    _add_stutter(Fuzz)
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


def _add_rule(cls: type[RuleBasedStateMachine], name: str) -> None:
    def enabled(self: Any) -> bool:
        return bool(self.enabled(name))

    def run(self: Any, data: st.DataObject) -> None:
        options = {step_.action: step_ for step_ in self.enabled(name)}
        self.take(options[data.draw(st.sampled_from(list(options)), label=name)])

    run.__name__ = name
    setattr(cls, name, precondition(enabled)(rule(data=st.data())(run)))


def _add_stutter(cls: type[RuleBasedStateMachine]) -> None:
    """A no-op for when a bounded model has nothing left to do (a deadlock)."""

    def stuck(self: Any) -> bool:
        return not self.enabled()

    def stutter(self: Any) -> None:
        pass

    cls.stutter = precondition(stuck)(rule()(stutter))


# -- running under a budget ------------------------------------------------------


@dataclass(frozen=True)
class FuzzReport:
    """The outcome of `fuzz`: a finding (shrunk) or none, with coverage and counts."""

    system: System
    adapter: str
    finding: Finding | None
    known: dict[str, Trace]
    known_reasons: Mapping[str, str]
    examples: int
    steps: int
    seconds: float
    taken: dict[tuple[str, str], int]

    @property
    def ok(self) -> bool:
        """True when nothing but known findings turned up."""
        return self.finding is None

    @property
    def steps_per_second(self) -> float:
        """Model-and-implementation steps per second."""
        return self.steps / self.seconds if self.seconds > 0 else 0.0

    def coverage(self) -> list[tuple[str, str, int, int, list[str]]]:
        """Per component: (component, machine, taken, total, never-taken names)."""
        rows = []
        for comp in self.system.components:
            names = [t.name for t in comp.machine.transitions]
            taken = [n for n in names if self.taken.get((comp.name, n))]
            never = [n for n in names if n not in taken]
            rows.append((comp.name, comp.machine.name, len(taken), len(names), never))
        return rows


def fuzz(
    system: System,
    adapter_factory: Callable[[], Adapter],
    *,
    budget: float | None = None,
    max_examples: int | None = None,
    seed: int | None = None,
    profile: str = "ci",
    known: Mapping[str, str] | None = None,
    swarm: bool = True,
    batch: int = 50,
) -> FuzzReport:
    """Fuzz until a finding, `max_examples` examples, or `budget` seconds.

    With a budget the search runs in batches of `batch` examples, each with
    its own seed (derived from `seed`), until time runs out; each batch
    shrinks its own finding. The report carries the shrunk finding.
    """
    if profile not in PROFILES:
        raise StatecoreError(f"unknown profile {profile!r}; profiles are {sorted(PROFILES)}")
    _check_limits(budget, max_examples)
    stats = _Stats()
    machine = state_machine(system, adapter_factory, known=known, swarm=swarm, stats=stats)
    base = dict(PROFILES[profile])
    warm = adapter_factory()  # imports and first-use costs stay outside the budget
    warm.setup(system)
    warm.teardown()
    started = time.perf_counter()
    finding: Finding | None = None
    round_ = 0
    remaining = max_examples if max_examples is not None else None
    while True:
        examples = batch if remaining is None else min(batch, remaining)
        config = settings(
            max_examples=examples,
            stateful_step_count=base["stateful_step_count"],
            deadline=None,
            database=None,
            derandomize=False,
            suppress_health_check=list(HealthCheck),
            # No Phase.explain: it traces every line run, the implementation's too,
            # and costs seconds per finding on a real stack.
            phases=[Phase.generate, Phase.shrink],
            report_multiple_bugs=False,
        )
        seeded = hypothesis_seed((seed or 0) * 1_000_003 + round_)(machine)
        try:
            run_state_machine_as_test(seeded, settings=config)  # type: ignore[no-untyped-call,unused-ignore]
        except Finding as exc:
            finding = minimise(system, exc, adapter_factory, known=known)
            break
        except Flaky as exc:
            raise StatecoreError(
                f"fuzzing {system.name!r}: the implementation is not deterministic under "
                f"replay ({exc}); an adapter must reset everything in setup()"
            ) from exc
        round_ += 1
        if remaining is not None:
            remaining -= examples
            if remaining <= 0:
                break
        if budget is not None and time.perf_counter() - started >= budget:
            break
        if budget is None and remaining is None:
            break
    return FuzzReport(
        system,
        stats.adapter,
        finding,
        dict(stats.known),
        dict(stats.reasons),
        stats.examples,
        stats.steps,
        time.perf_counter() - started,
        dict(stats.taken),
    )


def _check_limits(budget: float | None, max_examples: int | None) -> None:
    """Refuse a budget that never runs out (NaN, infinity) or never starts, and no examples."""
    if budget is not None and not (math.isfinite(budget) and budget > 0):
        raise StatecoreError(f"budget must be a positive, finite number of seconds, not {budget}")
    if max_examples is not None and max_examples < 1:
        raise StatecoreError(f"max_examples must be at least 1, not {max_examples}")


MINIMISE_REPLAYS = 300
"""At most this many replays when `minimise` deletes steps from a finding."""


def minimise(
    system: System,
    finding: Finding,
    adapter_factory: Callable[[], Adapter],
    *,
    known: Mapping[str, str] | None = None,
) -> Finding:
    """Delete the steps of `finding` that it does not need, replaying after each deletion.

    Hypothesis shrinks the choices that generated an example, and a step
    whose deletion would shift the choices of the steps after it can
    survive. This pass works on the actions themselves: it drops one step at
    a time, from the last, and keeps the deletion when a deterministic
    replay still shows a finding of the same kind and property. The result is
    1-minimal: no single step can be dropped.
    """
    best = finding
    actions = [item.action for item in finding.trace.steps[1:] if item.action is not None]
    replays = 0
    progress = True
    while progress and replays < MINIMISE_REPLAYS:
        progress = False
        for index, size in _deletions(len(actions)):
            if replays >= MINIMISE_REPLAYS:
                break
            replays += 1
            candidate = actions[:index] + actions[index + size :]
            again = _replay_actions(system, candidate, adapter_factory, known)
            if again is not None and (again.kind, again.property_id) == (
                best.kind,
                best.property_id,
            ):
                best, progress = again, True
                actions = [item.action for item in again.trace.steps[1:] if item.action]
                break
    return best


def _deletions(length: int) -> list[tuple[int, int]]:
    """(start, size) of the blocks to try deleting: single steps from the last, then pairs.

    Pairs matter where steps only make sense together: a request that is
    started and aborted before it does anything.
    """
    singles = [(index, 1) for index in reversed(range(length))]
    pairs = [(index, 2) for index in reversed(range(length - 1))]
    return singles + pairs


def _replay_actions(
    system: System,
    actions: list[ActionLabel],
    adapter_factory: Callable[[], Adapter],
    known: Mapping[str, str] | None,
) -> Finding | None:
    """The finding `actions` show when replayed, or None (also when one is not enabled)."""
    state = system.init_states()[0]
    steps = [TraceStep(None, "", state)]
    for action in actions:
        enabled = {s.action: s for s in system.successors(state)}
        step_ = enabled.get(action)
        if step_ is None:
            return None
        state = step_.state
        steps.append(TraceStep(step_.action, step_.actor, state, step_.outputs))
    trace = Trace(system.name, tuple(steps), "", "violated", "")
    return replay_with_adapter(system, trace, adapter_factory, known=known)


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
    machine_cls = state_machine(system, adapter_factory, known=known, swarm=False)
    try:
        machine: Any = machine_cls()
    except Finding as finding:
        return finding
    try:
        for item in trace.steps[1:]:
            assert item.action is not None
            machine.take(system.next_step(machine.state, item.action))
        machine._drain()
        machine._check_quiescent()
    except Finding as finding:
        return finding
    finally:
        machine.adapter.teardown()
    return None
