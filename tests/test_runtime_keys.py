"""The runtime memo's keys: inline in `Instance.fire`, the same as `_key`, types kept apart."""

from __future__ import annotations

from typing import Any

import pytest

from statecore import Event, Field, Instance, Machine, State, Transition, out, runtime
from statecore.runtime import _key, _node


def typed_pair() -> Machine:
    """Emits the types of both payload values, so 1 and True must not share a memo entry."""
    return Machine(
        "typed_pair",
        states=[State("idle", initial=True)],
        events=[
            Event("one", [Field("x", (1, True))]),
            Event("two", [Field("x", (1, True)), Field("y", (1, True))]),
            Event("none"),
        ],
        transitions=[
            Transition(
                "idle",
                "one",
                None,
                emit=lambda s, p: [out("seen", x=type(p["x"]).__name__)],
            ),
            Transition(
                "idle",
                "two",
                None,
                emit=lambda s, p: [out("seen", x=type(p["x"]).__name__, y=type(p["y"]).__name__)],
            ),
            Transition("idle", "none", None, emit=[out("seen")]),
        ],
    )


def test_fire_keeps_equal_values_of_different_types_apart_for_any_payload_size() -> None:
    inst = Instance(typed_pair())
    for _ in range(2):  # the second round is served from the memo
        assert inst.fire("one", x=True).outputs == (out("seen", x="bool"),)
        assert inst.fire("one", x=1).outputs == (out("seen", x="int"),)
        assert inst.fire("two", x=True, y=1).outputs == (out("seen", x="bool", y="int"),)
        assert inst.fire("two", x=1, y=True).outputs == (out("seen", x="int", y="bool"),)
        assert inst.fire("none").outputs == (out("seen"),)


def test_a_repeated_fire_is_served_from_the_memo(monkeypatch: pytest.MonkeyPatch) -> None:
    """The keys `fire` builds inline are the keys `_key` stores under."""
    machine = typed_pair()
    inst = Instance(machine)
    fires: list[tuple[str, dict[str, object]]] = [
        ("one", {"x": True}),
        ("one", {"x": 1}),
        ("two", {"x": 1, "y": True}),
        ("none", {}),
    ]
    for event, payload in fires:
        inst.fire(event, **payload)
    edges = _node(machine, inst.snapshot).edges
    assert {_key(event, payload) for event, payload in fires} == set(edges)
    computed: list[str] = []
    real_edge = runtime._edge

    def counting_edge(*args: Any) -> Any:
        computed.append(args[2])
        return real_edge(*args)

    monkeypatch.setattr(runtime, "_edge", counting_edge)
    for event, payload in fires:
        inst.fire(event, **payload)
    assert computed == []


def test_flat_two_field_keys_never_meet_the_general_form() -> None:
    """A 2-field key is a flat 7-tuple; a 3-field key is 7 items too, but pairs first."""
    two: Any = _key("e", {"a": 1, "b": 2})
    three: Any = _key("e", {"a": 1, "b": 2, "c": 3})
    assert len(two) == len(three) == 7
    assert two != three
    assert isinstance(three[1], tuple) and isinstance(two[1], str)
