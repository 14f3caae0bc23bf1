"""Property tests over random machines: the runtime means exactly what `step` means."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from strategies import (
    MachineSpec,
    Step,
    describe,
    event_sequences,
    machines,
    machines_and_sequences,
)

from statecore import (
    ACCEPTED,
    IGNORED,
    REJECTED,
    Event,
    Instance,
    Machine,
    Outcome,
    State,
    Transition,
    TransitionError,
    out,
    step,
)
from statecore.memo import memo_of
from statecore.properties import EMPTY_MONITOR, advance_monitor, monitor
from statecore.system_parts import Emitted

ALL_POLICIES = ("reject", "ignore", "error")


class UnhashableInt(int):
    """An int that compares like an int but cannot be a dict key."""

    __hash__ = None  # type: ignore[assignment]


def assert_same(got: Outcome, expected: Outcome) -> None:
    assert got.status == expected.status
    assert got.snapshot == expected.snapshot
    assert got.outputs == expected.outputs
    assert got.transition is expected.transition
    assert got.event == expected.event


def reference(machine: Machine, steps: list[Step]) -> list[Outcome | None]:
    """The outcome of each step by pure `step`; None where it raised TransitionError."""
    snapshot = machine.initial_snapshot()
    outcomes: list[Outcome | None] = []
    for event, payload in steps:
        try:
            outcome = step(machine, snapshot, event, payload)
        except TransitionError:
            outcomes.append(None)
            continue
        snapshot = outcome.snapshot
        outcomes.append(outcome)
    return outcomes


def run_instance(instance: Instance, steps: list[Step], expected: list[Outcome | None]) -> None:
    for (event, payload), want in zip(steps, expected):
        before = instance.snapshot
        if want is None:
            with pytest.raises(TransitionError):
                instance.fire(event, **payload)
            assert instance.snapshot == before
            continue
        assert_same(instance.fire(event, **payload), want)
        assert instance.snapshot == want.snapshot


def interpret(spec: MachineSpec, steps: list[Step]) -> list[tuple[str, str, dict[str, int], Any]]:
    """Run `steps` on the plain-data description: (status, state, values, outputs)."""
    policies = {e.name: e.policy for e in spec.events}
    state, values = spec.initial, spec.initial_values()
    trace = []
    for event, payload in steps:
        taken = [
            t
            for t in spec.transitions
            if t.source == state
            and t.event == event
            and (t.guard is None or t.guard.holds(values, payload))
        ]
        assert len(taken) <= 1, "the generator promised exclusive guards"
        if taken:
            (t,) = taken
            outputs = t.outputs(state, payload)
            if t.effect is not None:
                values = {**values, t.effect.var: t.effect.apply(values, payload)}
            state = t.target or state
            status = ACCEPTED
        else:
            status = {"reject": REJECTED, "ignore": IGNORED, "error": "error"}[policies[event]]
            outputs = ()
        trace.append((status, state, dict(values), outputs))
    return trace


@settings(max_examples=200, deadline=None)
@given(machines_and_sequences(ALL_POLICIES))
def test_step_agrees_with_the_description(case: tuple[Machine, list[Step]]) -> None:
    """Guards the generator itself as much as `step`: both read the same spec."""
    machine, steps = case
    for outcome, (status, state, values, outputs) in zip(
        reference(machine, steps), interpret(describe(machine), steps)
    ):
        if outcome is None:
            assert status == "error"
            continue
        assert outcome.status == status
        assert outcome.snapshot == machine.snapshot(state, **values)
        assert outcome.outputs == outputs


@settings(max_examples=200, deadline=None)
@given(machines_and_sequences(ALL_POLICIES))
def test_instance_fire_agrees_with_step(case: tuple[Machine, list[Step]]) -> None:
    machine, steps = case
    expected = reference(machine, steps)
    run_instance(Instance(machine), steps, expected)
    # Replayed on a new instance, now through the memo.
    run_instance(Instance(machine), steps, expected)
    # And continued on one instance: the same sequence twice in a row.
    instance = Instance(machine)
    doubled = reference(machine, steps + steps)
    run_instance(instance, steps + steps, doubled)
    if steps:
        assert memo_of(machine), "the runtime memo was never filled"


@settings(max_examples=150, deadline=None)
@given(st.data())
def test_interleaved_instances_sharing_a_machine(data: st.DataObject) -> None:
    machine = data.draw(machines(ALL_POLICIES))
    n = data.draw(st.integers(2, 4))
    schedule = data.draw(
        st.lists(st.tuples(st.integers(0, n - 1), event_sequences(machine, min_size=1, max_size=1)))
    )
    instances = [Instance(machine) for _ in range(n)]
    snapshots = [machine.initial_snapshot()] * n
    for index, ((event, payload),) in schedule:
        try:
            want = step(machine, snapshots[index], event, payload)
        except TransitionError:
            with pytest.raises(TransitionError):
                instances[index].fire(event, **payload)
        else:
            assert_same(instances[index].fire(event, **payload), want)
            snapshots[index] = want.snapshot
        assert [i.snapshot for i in instances] == snapshots


@settings(max_examples=100, deadline=None)
@given(machines_and_sequences())
def test_step_is_deterministic(case: tuple[Machine, list[Step]]) -> None:
    machine, steps = case
    snapshot = machine.initial_snapshot()
    for event, payload in steps:
        first = step(machine, snapshot, event, payload)
        # An equal but distinct snapshot, and a copy of the payload.
        twin = machine.snapshot(snapshot.state, **snapshot.values())
        assert step(machine, twin, event, dict(payload)) == first
        assert step(machine, snapshot, event, payload) == first
        snapshot = first.snapshot


def snapshot_rows(machine: Machine) -> st.SearchStrategy[tuple[str, dict[str, Any]]]:
    return st.tuples(
        st.sampled_from([s.name for s in machine.states]),
        st.fixed_dictionaries({v.name: st.sampled_from(v.domain) for v in machine.variables}),
    )


@settings(max_examples=100, deadline=None)
@given(st.data())
def test_snapshots_equal_exactly_when_same_state_and_values(data: st.DataObject) -> None:
    machine = data.draw(machines())
    (state_a, values_a), (state_b, values_b) = data.draw(
        st.tuples(snapshot_rows(machine), snapshot_rows(machine))
    )
    a = machine.snapshot(state_a, **values_a)
    b = machine.snapshot(state_b, **values_b)
    same = state_a == state_b and values_a == values_b
    assert (a == b) is same
    assert (a != b) is not same
    if same:
        assert hash(a) == hash(b)
        assert len({a, b}) == 1
    again = machine.snapshot(state_a, **values_a)
    assert again == a and hash(again) == hash(a)
    assert (a.state, a.values()) == (state_a, values_a)


@settings(max_examples=100, deadline=None)
@given(machines_and_sequences())
def test_reached_snapshots_equal_rebuilt_ones(case: tuple[Machine, list[Step]]) -> None:
    machine, steps = case
    instance = Instance(machine)
    for event, payload in steps:
        instance.fire(event, **payload)
        snap = instance.snapshot
        rebuilt = machine.snapshot(snap.state, **snap.values())
        assert snap == rebuilt and hash(snap) == hash(rebuilt)
        assert snap in machine.reachable_snapshots


@settings(max_examples=150, deadline=None)
@given(machines_and_sequences())
def test_unhashable_payload_values_work_without_the_memo(
    case: tuple[Machine, list[Step]],
) -> None:
    machine, steps = case
    expected = reference(machine, steps)
    instance = Instance(machine)
    for (event, payload), want in zip(steps, expected):
        assert want is not None
        odd = {k: UnhashableInt(v) for k, v in payload.items()}
        assert_same(instance.fire(event, **odd), want)
    payload_keys = [
        key for node in memo_of(machine).values() for key in node.edges if not isinstance(key, str)
    ]
    assert payload_keys == []
    # The same sequence with ordinary values still agrees, now memoised.
    run_instance(Instance(machine), steps, expected)


def test_a_monitor_state_no_output_moved_comes_back_as_the_same_object() -> None:
    """`advance_monitor` gives back the very state it was given when no output moved the
    monitor (none routed to it, or one it ignores), and a new one when an output did."""
    machine = Machine(
        "once",
        states=[State("idle", initial=True), State("done")],
        events=[Event("go", policy="ignore")],
        transitions=[Transition("idle", "go", "done")],
    )
    prop = monitor(
        "once", "goes once", machine, lambda e: ("k", "go", {}) if e.output.name == "go" else None
    )
    other, go = Emitted(None, out("other")), Emitted(None, out("go"))
    assert advance_monitor(prop, EMPTY_MONITOR, (other,)) is EMPTY_MONITOR
    done = advance_monitor(prop, EMPTY_MONITOR, (go,))
    assert done is not EMPTY_MONITOR and dict(done)["k"].state == "done"
    assert advance_monitor(prop, done, (go, other)) is done  # "done" ignores go
