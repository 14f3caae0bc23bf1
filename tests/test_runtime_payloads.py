"""Payload domains at run time, the memo's bound, and exact snapshot values."""

from __future__ import annotations

from typing import Any

import pytest

from statecore import (
    Event,
    Field,
    FireError,
    Instance,
    Machine,
    State,
    Transition,
    Var,
    out,
    runtime,
    step,
)
from statecore.memo import memo_of
from statecore.runtime import clear_memo, memo_size


def sender(policy: str = "reject") -> Machine:
    """The README's sender: ``put(ok)`` with ok in (True, False)."""
    return Machine(
        "sender",
        states=[
            State("idle", initial=True),
            State("in_flight", hot=True),
            State("sent", final=True),
        ],
        variables=[Var("puts", range(2), default=0)],
        events=[
            Event("begin"),
            Event("put", [Field("ok", (True, False))], policy=policy),  # type: ignore[arg-type]
        ],
        transitions=[
            Transition("idle", "begin", "in_flight"),
            Transition(
                "in_flight",
                "put",
                "sent",
                guard=lambda s, p: p["ok"],
                effect=lambda s, p: {"puts": s.puts + 1},
            ),
        ],
    )


def in_flight(machine: Machine) -> Instance:
    inst = Instance(machine)
    inst.fire("begin")
    return inst


def entries(machine: Machine) -> int:
    """What the memo holds, counted from its nodes: snapshots plus edges."""
    nodes = memo_of(machine)
    return len(nodes) + sum(len(node.edges) for node in nodes.values())


# -- out-of-domain payloads ------------------------------------------------------------


@pytest.mark.parametrize(("policy", "status"), [("reject", "rejected"), ("ignore", "ignored")])
def test_out_of_domain_payload_follows_the_policy(policy: str, status: str) -> None:
    machine = sender(policy)
    inst = in_flight(machine)
    for _ in range(2):  # the second fire must not be served a transition either
        outcome = inst.fire("put", ok="banana")
        assert outcome.status == status
        assert outcome.transition is None
        assert "ok='banana'" in outcome.reason and "domain" in outcome.reason
        assert inst.state == "in_flight"
    assert step(machine, inst.snapshot, "put", {"ok": "banana"}).status == status
    assert not inst.can_fire("put", ok="banana")
    assert inst.fire("put", ok=True).accepted


def test_out_of_domain_payload_under_error_policy_raises_fire_error() -> None:
    inst = in_flight(sender("error"))
    with pytest.raises(FireError, match=r"machine 'sender', event 'put': payload ok='banana'"):
        inst.fire("put", ok="banana")
    assert inst.state == "in_flight"
    assert inst.fire("put", ok=True).accepted


def test_out_of_domain_payload_where_the_state_has_no_transition() -> None:
    inst = Instance(sender())
    outcome = inst.fire("put", ok="banana")
    assert outcome.status == "rejected" and "domain" in outcome.reason


def resizer(field: Field) -> Machine:
    return Machine(
        "resizer",
        states=[State("open", initial=True)],
        events=[Event("resize", [field])],
        transitions=[Transition("open", "resize", None, emit=lambda s, p: [out("size", v=p["v"])])],
    )


def test_unbounded_field_accepts_only_its_declared_type() -> None:
    inst = Instance(resizer(Field("v", sample=(0.5, 2.0), type=float)))
    refused = inst.fire("resize", v="big")
    assert refused.status == "rejected" and "v='big' is a str, not a float" in refused.reason
    assert inst.fire("resize", v=2.5).outputs == (out("size", v=2.5),)
    assert inst.fire("resize", v=3).accepted  # an int is a float, as in typing


def test_unbounded_field_without_a_type_accepts_anything() -> None:
    inst = Instance(resizer(Field("v", sample=(0.5, 2.0))))
    assert inst.fire("resize", v="anything").accepted


class EqualToTrue:
    """Unhashable, and equal to True: in the domain by equality."""

    __hash__ = None  # type: ignore[assignment]

    def __eq__(self, other: object) -> bool:
        return other is True

    def __bool__(self) -> bool:
        return True


def test_unhashable_payload_value_is_checked_by_equality() -> None:
    inst = in_flight(sender())
    assert inst.fire("put", ok=EqualToTrue()).accepted


# -- the memo's bound ------------------------------------------------------------------


def test_out_of_domain_values_add_nothing_to_the_memo() -> None:
    machine = sender()
    inst = in_flight(machine)
    inst.fire("put", ok=False)
    before = entries(machine)
    for value in range(2, 2_000):  # 0 and 1 equal False and True: in the domain
        assert not inst.fire("put", ok=value)
    assert entries(machine) == before == memo_size(machine)


def last_amount() -> Machine:
    """The last of a stream of unbounded amounts, with a bounded event beside it."""
    return Machine(
        "last_amount",
        states=[State("open", initial=True)],
        variables=[Var("last", range(2), 0)],
        events=[Event("add", [Field("amount", type=int, sample=(0, 1))]), Event("reset")],
        transitions=[
            Transition("open", "add", None, effect=lambda s, p: {"last": p["amount"]}),
            Transition("open", "reset", None, effect=lambda s, p: {"last": 0}),
        ],
    )


def test_steps_with_unbounded_payloads_keep_their_snapshots_out_of_the_memo() -> None:
    machine = last_amount()
    inst = Instance(machine)
    inst.fire("reset")
    before = entries(machine)
    for amount in range(2, 500):  # values far outside the variable's domain
        snapshot = inst.snapshot
        outcome = inst.fire("add", amount=amount)
        assert outcome == step(machine, snapshot, "add", {"amount": amount})
        assert inst.snapshot.last == amount
    assert entries(machine) == before == memo_size(machine)
    assert inst.fire("reset").snapshot.last == 0  # a bounded event from a private snapshot
    assert inst.fire("reset").snapshot.last == 0


def wide(values: int) -> Machine:
    return Machine(
        "wide",
        states=[State("open", initial=True)],
        events=[Event("slot", [Field("n", range(values))])],
        transitions=[Transition("open", "slot", None, emit=lambda s, p: [out("slot", n=p["n"])])],
    )


def test_memo_holds_at_most_cache_limit_entries_edges_included(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(runtime, "CACHE_LIMIT", 100)
    machine = wide(1_000)
    inst = Instance(machine)
    for _ in range(2):  # the second round is partly from the memo, partly computed
        for n in range(1_000):
            assert inst.fire("slot", n=n).outputs == (out("slot", n=n),)
    assert entries(machine) == memo_size(machine) == 100


def counter(top: int) -> Machine:
    return Machine(
        "counter",
        states=[State("counting", initial=True)],
        variables=[Var("n", range(top + 1), 0)],
        events=[Event("tick")],
        transitions=[
            Transition(
                "counting",
                "tick",
                guard=lambda s, p: s.n < top,
                effect=lambda s, p: {"n": s.n + 1},
            )
        ],
    )


def test_snapshots_past_the_bound_are_still_stepped(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(runtime, "CACHE_LIMIT", 5)
    machine = counter(50)
    for _ in range(2):
        inst = Instance(machine)
        for n in range(1, 51):
            assert inst.fire("tick").snapshot.n == n
        assert inst.fire("tick").status == "rejected"
    assert entries(machine) <= 5


def test_clear_memo_forgets_steps_and_instances_keep_their_snapshots() -> None:
    machine = counter(3)
    inst = Instance(machine)
    inst.fire("tick")
    assert memo_size(machine) > 0
    clear_memo(machine)
    assert memo_size(machine) == entries(machine) == 0
    assert inst.snapshot.n == 1
    assert inst.fire("tick").snapshot.n == 2
    assert Instance(machine).fire("tick").snapshot.n == 1


# -- exact values -----------------------------------------------------------------------


def copier() -> Machine:
    """Copies a payload value equal to a domain value (True == 1) into a variable."""
    return Machine(
        "copier",
        states=[State("idle", initial=True)],
        variables=[Var("v", (1, 2), 1)],
        events=[Event("set", [Field("x", (True, 2))])],
        transitions=[Transition("idle", "set", None, effect=lambda s, p: {"v": p["x"]})],
    )


def test_instance_snapshot_holds_exactly_the_value_of_its_outcome() -> None:
    """An effect's True lands in the (1, 2) domain as its own 1, in outcome and instance."""
    machine = copier()
    for _ in range(2):  # computed, then from the memo
        inst = Instance(machine)
        outcome = inst.fire("set", x=True)
        assert type(outcome.snapshot.v) is type(inst.snapshot.v) is int
        assert outcome.snapshot.v == inst.snapshot.v == 1
        assert inst.fire("set", x=2).snapshot.v == inst.snapshot.v == 2
    stepped = step(machine, machine.initial_snapshot(), "set", {"x": True}).snapshot
    assert type(stepped.v) is int
    assert all(type(s.v) is int for s in machine.reachable_snapshots)


def test_instance_from_a_given_snapshot_keeps_its_exact_values() -> None:
    machine = copier()
    Instance(machine)  # the initial snapshot, v=1, is in the memo
    given: Any = machine.snapshot_class(("idle", True))
    assert Instance(machine, given).snapshot.v is True
