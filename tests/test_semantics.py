"""Unit tests of the pure `step` function and of snapshots."""

from __future__ import annotations

import copy
from typing import Any

import pytest

from statecore import (
    ACCEPTED,
    IGNORED,
    REJECTED,
    Event,
    Field,
    FireError,
    Machine,
    Output,
    Snapshot,
    State,
    Transition,
    TransitionError,
    Var,
    out,
    step,
)
from statecore.errors import UnknownStateError, UnknownVariableError
from statecore.memo import memo_of


def door() -> Machine:
    return Machine(
        "door",
        states=[
            State("closed", initial=True),
            State("opened"),
            State("locked", hot=True),
            State("broken", final=True),
        ],
        variables=[Var("opens", range(3), default=0), Var("notes", range(4), default=0)],
        events=[
            Event("push"),
            Event("pull", [Field("force", range(3))]),
            Event("lock", policy="ignore"),
            Event("unlock", [Field("key", ("right", "wrong"))]),
            Event("kick", policy="error"),
            Event("note", [Field("k", range(1, 3))], policy="ignore"),
        ],
        transitions=[
            Transition(
                "closed",
                "push",
                "opened",
                guard=lambda s, p: s.opens < 2,
                effect=lambda s, p: {"opens": s.opens + 1},
                emit=[out("creak"), out("bell", loud=False)],
            ),
            Transition("opened", "pull", "closed", guard=lambda s, p: p["force"] > 0),
            Transition("closed", "lock", "locked"),
            Transition(
                "locked",
                "unlock",
                "closed",
                guard=lambda s, p: p["key"] == "right",
                emit=lambda s, p: [out("unlocked", key=p["key"], was=s.state)],
            ),
            Transition(("closed", "opened", "locked"), "kick", "broken", emit=[out("crash")]),
            Transition(
                ("closed", "opened"),
                "note",
                None,
                effect=lambda s, p: {"notes": (s.notes + p["k"]) % 4},
            ),
        ],
    )


@pytest.fixture
def machine() -> Machine:
    return door()


def at(machine: Machine, state: str, **values: Any) -> Snapshot:
    return machine.snapshot(state, **values)


def test_accepted(machine: Machine) -> None:
    start = machine.initial_snapshot()
    outcome = step(machine, start, "push")
    assert outcome.status == ACCEPTED
    assert outcome.accepted and bool(outcome)
    assert outcome.snapshot == at(machine, "opened", opens=1)
    assert outcome.snapshot.state == "opened"
    assert outcome.transition is machine.transitions[0]
    assert outcome.event == "push"
    assert outcome.reason == ""


def test_rejected_when_no_guard_holds(machine: Machine) -> None:
    start = at(machine, "closed", opens=2)
    outcome = step(machine, start, "push")
    assert outcome.status == REJECTED
    assert not outcome.accepted and not outcome
    assert outcome.snapshot is start
    assert outcome.outputs == ()
    assert outcome.transition is None
    assert "guard" in outcome.reason


def test_rejected_when_no_transition_from_state(machine: Machine) -> None:
    start = at(machine, "closed")
    outcome = step(machine, start, "pull", {"force": 2})
    assert outcome.status == REJECTED
    assert outcome.snapshot is start
    assert "no transition" in outcome.reason


def test_ignored(machine: Machine) -> None:
    start = at(machine, "opened")
    outcome = step(machine, start, "lock")
    assert outcome.status == IGNORED
    assert not outcome
    assert outcome.snapshot is start
    assert outcome.outputs == ()


def test_ignored_when_no_transition_from_state(machine: Machine) -> None:
    start = at(machine, "locked")
    assert step(machine, start, "note", {"k": 1}).status == IGNORED


def test_error_policy_raises_transition_error(machine: Machine) -> None:
    with pytest.raises(TransitionError) as info:
        step(machine, at(machine, "broken"), "kick")
    message = str(info.value)
    assert "'door'" in message
    assert "'broken'" in message
    assert "'kick'" in message


def test_error_policy_accepts_when_enabled(machine: Machine) -> None:
    outcome = step(machine, at(machine, "opened"), "kick")
    assert outcome.status == ACCEPTED
    assert outcome.snapshot.state == "broken"


@pytest.mark.parametrize("event", ["push", "lock", "kick"])
def test_unknown_event_raises_fire_error(machine: Machine, event: str) -> None:
    """Whatever the policy of the events that do exist."""
    for state in ("closed", "broken"):
        with pytest.raises(FireError) as info:
            step(machine, at(machine, state), event + "_typo")
        assert "'door'" in str(info.value)
        assert f"'{event}_typo'" in str(info.value)


@pytest.mark.parametrize(
    ("event", "payload", "named"),
    [
        ("pull", {}, "missing ['force']"),
        ("pull", {"force": 1, "extra": 2}, "unknown ['extra']"),
        ("pull", {"farce": 1}, "missing ['force'], unknown ['farce']"),
        ("push", {"force": 1}, "unknown ['force']"),  # reject policy
        ("lock", {"x": 1}, "unknown ['x']"),  # ignore policy
        ("kick", {"x": 1}, "unknown ['x']"),  # error policy
        ("note", {}, "missing ['k']"),
        ("unlock", {"key": "right", "force": 1}, "unknown ['force']"),
    ],
)
@pytest.mark.parametrize("state", ["closed", "opened", "locked", "broken"])
def test_payload_mismatch_raises_fire_error(
    machine: Machine, event: str, payload: dict[str, Any], named: str, state: str
) -> None:
    """From every state: with an enabled transition, a disabled one, or none."""
    with pytest.raises(FireError) as info:
        step(machine, at(machine, state), event, payload)
    message = str(info.value)
    assert "'door'" in message
    assert f"event {event!r}" in message
    assert named in message


def test_none_payload_means_empty(machine: Machine) -> None:
    assert step(machine, machine.initial_snapshot(), "push", None).accepted
    with pytest.raises(FireError):
        step(machine, machine.initial_snapshot(), "pull", None)


def test_self_loop_keeps_state_and_applies_effect(machine: Machine) -> None:
    start = at(machine, "opened", opens=1, notes=3)
    outcome = step(machine, start, "note", {"k": 2})
    assert outcome.status == ACCEPTED
    assert outcome.snapshot == at(machine, "opened", opens=1, notes=1)
    assert outcome.transition is not None and outcome.transition.target is None


def test_self_loop_without_effect_returns_same_snapshot() -> None:
    machine = Machine(
        "loop",
        states=[State("a", initial=True)],
        events=[Event("tick")],
        transitions=[Transition("a", "tick")],
    )
    start = machine.initial_snapshot()
    outcome = step(machine, start, "tick")
    assert outcome.accepted
    assert outcome.snapshot == start


def test_static_outputs(machine: Machine) -> None:
    outcome = step(machine, machine.initial_snapshot(), "push")
    assert outcome.outputs == (Output("creak"), Output("bell", (("loud", False),)))
    assert outcome.outputs[1].get("loud") is False
    assert str(outcome.outputs[1]) == "bell(loud=False)"


def test_dynamic_outputs_see_the_payload_and_the_snapshot_before_the_step(
    machine: Machine,
) -> None:
    outcome = step(machine, at(machine, "locked"), "unlock", {"key": "right"})
    assert outcome.snapshot.state == "closed"
    assert outcome.outputs == (out("unlocked", key="right", was="locked"),)
    rejected = step(machine, at(machine, "locked"), "unlock", {"key": "wrong"})
    assert rejected.status == REJECTED
    assert rejected.outputs == ()


def test_accepted_without_emit_has_no_outputs(machine: Machine) -> None:
    outcome = step(machine, at(machine, "opened"), "pull", {"force": 1})
    assert outcome.accepted
    assert outcome.outputs == ()


@pytest.mark.parametrize("source", ["closed", "opened", "locked"])
def test_multi_source_transition(machine: Machine, source: str) -> None:
    outcome = step(machine, at(machine, source, opens=1), "kick")
    assert outcome.accepted
    assert outcome.snapshot == at(machine, "broken", opens=1)
    assert outcome.outputs == (out("crash"),)
    assert outcome.transition is machine.transitions[4]


def test_multi_source_self_loop_stays_in_each_source(machine: Machine) -> None:
    for source in ("closed", "opened"):
        assert step(machine, at(machine, source), "note", {"k": 1}).snapshot.state == source


def test_step_does_not_mutate_its_inputs(machine: Machine) -> None:
    start = at(machine, "opened", opens=1, notes=2)
    before = tuple(start)
    payload = {"k": 2}
    payload_before = copy.deepcopy(payload)
    outcome = step(machine, start, "note", payload)
    assert outcome.snapshot != start
    assert tuple(start) == before
    assert payload == payload_before
    # step is pure: it does not fill the runtime's memo either.
    assert memo_of(machine) == {}


def test_step_is_repeatable(machine: Machine) -> None:
    start = at(machine, "closed", opens=1)
    assert step(machine, start, "push") == step(machine, start, "push")


def test_step_accepts_any_mapping_payload(machine: Machine) -> None:
    from types import MappingProxyType

    outcome = step(machine, at(machine, "opened"), "pull", MappingProxyType({"force": 2}))
    assert outcome.accepted


# -- snapshots -------------------------------------------------------------


def test_snapshot_attributes(machine: Machine) -> None:
    snap = at(machine, "opened", opens=2)
    assert snap.state == "opened"
    assert snap.opens == 2
    assert snap.notes == 0
    assert snap.values() == {"opens": 2, "notes": 0}
    assert isinstance(snap, Snapshot)


def test_snapshot_repr(machine: Machine) -> None:
    assert repr(at(machine, "opened", opens=2)) == "door(state='opened', opens=2, notes=0)"


def test_snapshot_equality_and_hash(machine: Machine) -> None:
    a = at(machine, "opened", opens=2)
    b = at(machine, "opened", opens=2, notes=0)
    assert a == b and hash(a) == hash(b)
    assert a != at(machine, "opened", opens=1)
    assert a != at(machine, "closed", opens=2)
    assert len({a, b, at(machine, "closed", opens=2)}) == 2


def test_initial_snapshot_uses_defaults(machine: Machine) -> None:
    assert machine.initial_snapshot() == at(machine, "closed", opens=0, notes=0)


def test_snapshot_unknown_variable_attribute(machine: Machine) -> None:
    snap = machine.initial_snapshot()
    with pytest.raises(AttributeError) as info:
        _ = snap.colour
    assert "'door'" in str(info.value)
    assert "'colour'" in str(info.value)


def test_machine_snapshot_unknown_state(machine: Machine) -> None:
    with pytest.raises(UnknownStateError) as info:
        machine.snapshot("ajar")
    assert "'door'" in str(info.value) and "'ajar'" in str(info.value)


def test_machine_snapshot_unknown_variable(machine: Machine) -> None:
    with pytest.raises(UnknownVariableError) as info:
        machine.snapshot("closed", colour=1)
    assert "'door'" in str(info.value) and "'colour'" in str(info.value)


def test_enabled_events(machine: Machine) -> None:
    assert set(machine.enabled_events(at(machine, "closed"))) == {"push", "lock", "kick", "note"}
    assert machine.enabled_events(at(machine, "broken")) == ()
