"""`SerialInstance`: the lock-free memo hit gives exactly what `Instance` and `step` give.

A `SerialInstance` serves a prepared fire the memo has without taking its
lock. These tests compare it with `Instance.fire`, `Instance.fire_prepared`
and `step` on random machines, and on machines built to break the shortcut:
equal values of different types, unhashable payloads, a full or cleared
memo, impure callbacks under `verify_memo`, and a step that fires on its own
instance an event the memo already has (the hit a lock-free path could take
by mistake).
"""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from strategies import Step, event_sequences, machines
from test_runtime_keys import typed_pair
from test_runtime_prepared import impure, not_verifying, same  # noqa: F401 (a fixture)

import statecore as sc
from statecore import Event, Field, Machine, Prepared, State, Transition, Var, out, prepare
from statecore.errors import ImpureCallbackError, ReentrantFireError
from statecore.runtime import SerialInstance, verify_memo

pytestmark = pytest.mark.usefixtures("not_verifying")  # the fast paths under test


@settings(max_examples=300, deadline=None)
@given(data=st.data())
def test_a_serial_instance_agrees_with_instance_and_step_on_random_machines(
    data: st.DataObject,
) -> None:
    previous = verify_memo(0)
    try:
        machine: Machine = data.draw(machines())
        sequence: list[Step] = data.draw(event_sequences(machine, max_size=30))
        prepared: dict[tuple[str, tuple[tuple[str, Any], ...]], Prepared] = {}
        for _ in range(2):  # the first round fills the memo, the second is served from it
            locked, serial = sc.Instance(machine), SerialInstance(machine)
            snapshot = machine.initial_snap
            for event, payload in sequence:
                key = (event, tuple(payload.items()))
                if key not in prepared:
                    prepared[key] = prepare(machine, event, **payload)
                expected = sc.step(machine, snapshot, event, payload)
                assert same(locked.fire_prepared(prepared[key]), expected)
                assert same(serial.fire_prepared(prepared[key]), expected)
                snapshot = expected.snapshot
                assert serial.snapshot == locked.snapshot == snapshot
                assert serial.state == snapshot.state
    finally:
        verify_memo(previous)


def test_equal_values_of_different_types_stay_apart() -> None:
    machine = typed_pair()
    as_bool, as_int = prepare(machine, "one", x=True), prepare(machine, "one", x=1)
    instance = SerialInstance(machine)
    for _ in range(3):
        assert instance.fire_prepared(as_bool).outputs == (out("seen", x="bool"),)
        assert instance.fire_prepared(as_int).outputs == (out("seen", x="int"),)
        assert instance.fire("one", x=True).outputs == (out("seen", x="bool"),)


def test_an_unhashable_payload_is_computed_on_every_fire() -> None:
    machine = Machine(
        "serial_sizes",
        states=[State("idle", initial=True)],
        variables=[Var("n", range(4), 0)],
        events=[Event("size", [Field("items", sample=((1,),))])],
        transitions=[
            Transition("idle", "size", None, effect=lambda s, p: {"n": min(len(p["items"]), 3)})
        ],
    )
    items: list[int] = [1, 2, 3]
    sized = prepare(machine, "size", items=items)
    instance = SerialInstance(machine)
    assert instance.fire_prepared(sized).snapshot.n == 3
    items.clear()
    assert instance.fire_prepared(sized).snapshot.n == 0


def test_a_full_or_cleared_memo_still_steps(monkeypatch: pytest.MonkeyPatch) -> None:
    machine = typed_pair()
    go = prepare(machine, "one", x=1)
    instance = SerialInstance(machine)
    instance.fire_prepared(go)
    sc.clear_memo(machine)
    assert instance.fire_prepared(go).outputs == (out("seen", x="int"),)
    sc.clear_memo(machine)
    monkeypatch.setattr(sc.runtime, "CACHE_LIMIT", 1)
    for _ in range(3):
        assert SerialInstance(machine).fire_prepared(go).outputs == (out("seen", x="int"),)


def test_verify_memo_checks_serial_fires_too() -> None:
    machine, _ = impure()
    go = prepare(machine, "go")
    previous = verify_memo(1)
    try:
        SerialInstance(machine).fire_prepared(go)
        with pytest.raises(ImpureCallbackError, match="count_call"):
            SerialInstance(machine).fire_prepared(go)
    finally:
        verify_memo(previous)
    SerialInstance(machine).fire_prepared(go)  # off again: the memo hit is not re-checked


def reentrant() -> tuple[Machine, list[SerialInstance], list[str]]:
    """``go``'s guard fires ``ping`` on its own instance and records the state it reads."""
    holder: list[SerialInstance] = []
    seen: list[str] = []

    def reenter(s: Any, p: Any) -> bool:
        if holder:  # not while the machine is validated
            seen.append(holder[0].state)
            holder[0].fire_prepared(PING[0])
        return True

    machine = Machine(
        "serial_reentrant",
        states=[State("idle", initial=True)],
        events=[Event("go"), Event("ping")],
        transitions=[
            Transition("idle", "go", None, guard=reenter),
            Transition("idle", "ping", None),
        ],
    )
    PING[:] = [prepare(machine, "ping")]
    return machine, holder, seen


PING: list[Prepared] = []


def test_a_step_that_fires_on_its_own_instance_raises_even_when_the_memo_has_that_step() -> None:
    machine, holder, seen = reentrant()
    instance = SerialInstance(machine)
    instance.fire_prepared(PING[0])  # the memo now has 'ping' from 'idle'
    holder.append(instance)
    with pytest.raises(ReentrantFireError, match="a step must not fire"):
        instance.fire_prepared(prepare(machine, "go"))
    assert seen == ["idle"]  # a read during the step sees the snapshot
    assert instance.state == "idle"
    holder.clear()
    assert instance.fire_prepared(prepare(machine, "go")).accepted  # the instance still works


def test_a_serial_instance_takes_no_listeners() -> None:
    instance = SerialInstance(typed_pair())
    with pytest.raises(TypeError, match="takes no listeners"):
        instance.add_listener(lambda inst, outcome: None)


def test_an_error_on_a_memo_miss_is_raised_as_instance_raises_it() -> None:
    # A miss leaves the lookup's KeyError behind: the step's error does not chain it.
    machine = Machine(
        "serial_strict",
        states=[State("idle", initial=True), State("done")],
        events=[Event("stop", policy="error")],
        transitions=[Transition("idle", "stop", "done")],
    )
    stop = prepare(machine, "stop")
    serial, locked = SerialInstance(machine), sc.Instance(machine)
    assert serial.fire_prepared(stop).accepted and locked.fire_prepared(stop).accepted
    errors = []
    for instance in (serial, locked):
        with pytest.raises(sc.TransitionError) as raised:
            instance.fire_prepared(stop)
        errors.append(raised.value)
    assert str(errors[0]) == str(errors[1])
    assert errors[0].__context__ is None and errors[0].__cause__ is None
