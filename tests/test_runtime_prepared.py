"""Prepared events: `Instance.fire_prepared` gives exactly what `fire` and `step` give.

The memo files each step a prepared event takes under the event itself (by
identity) as well as under its key; these tests compare it with the plain
computation on random machines and on machines built to break it: equal
values of different types, unhashable payloads, a full memo, a cleared memo,
impure callbacks under `verify_memo`, listeners and re-entrant fires.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from strategies import Step, event_sequences, machines
from test_runtime_keys import typed_pair

from statecore import (
    Event,
    Field,
    FireError,
    Instance,
    Machine,
    Outcome,
    Prepared,
    State,
    Transition,
    Var,
    clear_memo,
    memo_size,
    out,
    prepare,
    runtime,
    step,
)
from statecore.errors import ImpureCallbackError, ReentrantFireError
from statecore.runtime import verify_memo


@pytest.fixture
def not_verifying() -> Iterator[None]:
    """The fast paths under test (the suite may run with ``STATECORE_VERIFY_MEMO``)."""
    previous = verify_memo(0)
    yield
    verify_memo(previous)


def same(a: Outcome, b: Outcome) -> bool:
    """Equal outcomes with the same transition and exactly the same values (1 is not True)."""
    return (
        a.status == b.status
        and a.transition is b.transition
        and a.snapshot == b.snapshot
        and tuple(map(type, a.snapshot)) == tuple(map(type, b.snapshot))
        and a.outputs == b.outputs
        and a.reason == b.reason
    )


@settings(max_examples=300, deadline=None)
@given(data=st.data())
def test_fire_prepared_agrees_with_fire_and_step_on_random_machines(data: st.DataObject) -> None:
    previous = verify_memo(0)
    try:
        compare_on_random_machine(data)
    finally:
        verify_memo(previous)


def compare_on_random_machine(data: st.DataObject) -> None:
    machine: Machine = data.draw(machines())
    sequence: list[Step] = data.draw(event_sequences(machine, max_size=30))
    prepared: dict[tuple[str, tuple[tuple[str, Any], ...]], Prepared] = {}
    # Two rounds: the first fills the memo, the second is served from it.
    for _ in range(2):
        fired, by_prepared = Instance(machine), Instance(machine)
        snapshot = machine.initial_snap
        for event, payload in sequence:
            key = (event, tuple(payload.items()))
            if key not in prepared:
                prepared[key] = prepare(machine, event, **payload)
            expected = step(machine, snapshot, event, payload)
            assert same(fired.fire(event, **payload), expected)
            assert same(by_prepared.fire_prepared(prepared[key]), expected)
            snapshot = expected.snapshot
            assert by_prepared.snapshot == fired.snapshot == snapshot


def test_equal_values_of_different_types_stay_apart(not_verifying: None) -> None:
    machine = typed_pair()
    as_bool, as_int = prepare(machine, "one", x=True), prepare(machine, "one", x=1)
    both = prepare(machine, "two", x=1, y=True)
    instance = Instance(machine)
    for _ in range(3):  # the later rounds are served from the memo, under each prepared event
        assert instance.fire_prepared(as_bool).outputs == (out("seen", x="bool"),)
        assert instance.fire_prepared(as_int).outputs == (out("seen", x="int"),)
        assert instance.fire_prepared(both).outputs == (out("seen", x="int", y="bool"),)
        assert instance.fire("one", x=True).outputs == (out("seen", x="bool"),)


def test_a_prepared_step_is_filed_under_the_prepared_event_and_its_key(
    not_verifying: None, monkeypatch: pytest.MonkeyPatch
) -> None:
    machine = typed_pair()
    go = prepare(machine, "one", x=True)
    Instance(machine).fire_prepared(go)  # computed, then filed twice
    assert memo_size(machine) == 3  # the node, the key's edge and the alias
    computed: list[str] = []
    monkeypatch.setattr(runtime, "_edge", lambda *a: computed.append("step") or None)
    assert Instance(machine).fire_prepared(go).outputs == (out("seen", x="bool"),)
    assert Instance(machine).fire("one", x=True).outputs == (out("seen", x="bool"),)
    assert computed == []


def test_an_unhashable_payload_is_computed_on_every_fire(not_verifying: None) -> None:
    machine = Machine(
        "sizes",
        states=[State("idle", initial=True)],
        variables=[Var("n", range(4), 0)],
        events=[Event("size", [Field("items", sample=((1,),))])],
        transitions=[
            Transition("idle", "size", None, effect=lambda s, p: {"n": min(len(p["items"]), 3)})
        ],
    )
    items: list[int] = [1, 2]
    sized = prepare(machine, "size", items=items)
    assert sized.key is None
    items.append(3)  # the list is the caller's; the prepared payload holds the same list
    instance = Instance(machine)
    assert instance.fire_prepared(sized).snapshot.n == 3
    items.clear()
    assert instance.fire_prepared(sized).snapshot.n == 0  # not remembered: computed again
    assert memo_size(machine) <= 2  # snapshots only, no edge for an unhashable payload


def test_a_full_memo_keeps_no_alias_and_still_steps(
    not_verifying: None, monkeypatch: pytest.MonkeyPatch
) -> None:
    machine = typed_pair()
    monkeypatch.setattr(runtime, "CACHE_LIMIT", 1)
    go = prepare(machine, "one", x=1)
    instance = Instance(machine)
    for _ in range(3):
        assert instance.fire_prepared(go).outputs == (out("seen", x="int"),)
    assert memo_size(machine) == 1


def test_a_cleared_memo_is_refilled(not_verifying: None) -> None:
    machine = typed_pair()
    go = prepare(machine, "one", x=True)
    instance = Instance(machine)
    instance.fire_prepared(go)
    clear_memo(machine)
    assert memo_size(machine) == 0
    assert instance.fire_prepared(go).outputs == (out("seen", x="bool"),)
    assert Instance(machine).fire_prepared(go).outputs == (out("seen", x="bool"),)


def test_prepare_checks_the_declaration_once() -> None:
    machine = typed_pair()
    with pytest.raises(FireError, match="has no event 'once'"):
        prepare(machine, "once", x=1)
    with pytest.raises(FireError, match=r"missing \['y'\], unknown \[\]"):
        prepare(machine, "two", x=1)


def test_a_prepared_event_cannot_change() -> None:
    payload = {"x": True}
    go = prepare(typed_pair(), "one", **payload)
    payload["x"] = 1
    assert dict(go.payload) == {"x": True}
    with pytest.raises(AttributeError, match="immutable"):
        go.event = "two"  # type: ignore[misc]
    with pytest.raises(TypeError):
        go.payload["x"] = 1  # type: ignore[index]
    assert repr(go) == "Prepared('one', x=True)"


def impure() -> tuple[Machine, list[int]]:
    calls = [0]

    def count(s: Any, p: Any) -> dict[str, int]:
        calls[0] += 1
        return {"n": calls[0] % 4}

    machine = Machine(
        "counting",
        states=[State("idle", initial=True), State("done")],
        variables=[Var("n", range(4), 0)],
        events=[Event("go")],
        transitions=[Transition("idle", "go", "done", effect=count, effect_label="count_call")],
    )
    return machine, calls


def test_verify_memo_checks_prepared_fires_too() -> None:
    machine, _ = impure()
    go = prepare(machine, "go")
    previous = verify_memo(1)
    try:
        Instance(machine).fire_prepared(go)
        with pytest.raises(ImpureCallbackError, match="count_call"):
            Instance(machine).fire_prepared(go)
    finally:
        verify_memo(previous)


def test_listeners_hear_prepared_fires(not_verifying: None) -> None:
    machine, _ = impure()
    heard: list[str] = []
    instance = Instance(machine, listeners=(lambda inst, outcome: heard.append(outcome.event),))
    instance.fire_prepared(prepare(machine, "go"))
    assert heard == ["go"]


def test_a_step_that_fires_a_prepared_event_on_its_own_instance_raises(not_verifying: None) -> None:
    holder: list[Instance] = []
    go: list[Prepared] = []

    def reenter(s: Any, p: Any) -> bool:
        if holder:  # not while the machine is validated
            holder[0].fire_prepared(go[0])
        return True

    machine = Machine(
        "reentrant",
        states=[State("idle", initial=True)],
        events=[Event("go")],
        transitions=[Transition("idle", "go", None, guard=reenter)],
    )
    go.append(prepare(machine, "go"))
    holder.append(Instance(machine))
    with pytest.raises(ReentrantFireError, match="a step must not fire"):
        holder[0].fire_prepared(go[0])
