"""`Table`: a tabulated fire gives exactly what `step` gives, or raises what it raises.

Compared with `step` along random event sequences of random machines (with
the ``"error"`` policy too), on machines built to break a table (equal values
of different types, an impure effect, an effect that raises), and its
refusals: an impure or unbounded event, another machine's event, too many
snapshots.
"""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from strategies import Step, event_sequences, machines
from test_runtime_keys import typed_pair
from test_runtime_prepared import impure, same

import statecore as sc
from statecore import Event, Field, Machine, Prepared, State, Transition, Var, prepare
from statecore.errors import FireError, ImpureCallbackError, StatecoreError, TransitionError
from statecore.table import Row, Table


def _prepared(machine: Machine, steps: list[Step]) -> dict[Step, Prepared]:
    return {
        (event, payload): prepare(machine, event, **payload)
        for event, payload in ((e, p) for e, p in steps)
    }


def _key(step: Step) -> tuple[str, tuple[tuple[str, Any], ...]]:
    return step[0], tuple(step[1].items())


@settings(max_examples=300, deadline=None)
@given(data=st.data())
def test_a_table_fires_as_step_on_random_machines(data: st.DataObject) -> None:
    machine: Machine = data.draw(machines(("reject", "ignore", "error")))
    sequence: list[Step] = data.draw(event_sequences(machine, max_size=30))
    prepared = {_key(s): prepare(machine, s[0], **s[1]) for s in sequence}
    table = Table(machine, prepared.values())
    row: Row = table.initial
    snapshot = machine.initial_snap
    assert row.snapshot == snapshot and row.state == snapshot[0]
    for step in sequence:
        event = prepared[_key(step)]
        try:
            expected = sc.step(machine, snapshot, *step)
        except StatecoreError as exc:
            with pytest.raises(type(exc), match="not allowed"):
                table.fire(row, event)
            assert event not in row.edges
            continue
        outcome, row = table.fire(row, event)
        assert same(outcome, expected)
        assert row.snapshot == expected.snapshot
        assert tuple(map(type, row.snapshot)) == tuple(map(type, expected.snapshot))
        assert table.row_of(row.snapshot) is row  # one row per snapshot
        snapshot = expected.snapshot


@settings(max_examples=100, deadline=None)
@given(machine=machines())
def test_every_row_is_reachable_and_every_edge_is_steps(machine: Machine) -> None:
    events = [
        prepare(machine, e.name, **dict(zip((f.name for f in e.fields), values, strict=True)))
        for e in machine.events
        for values in _combinations(e)
    ]
    table = Table(machine, events)
    assert {row.snapshot for row in table.rows.values()} <= set(machine.reachable_snapshots)
    for row in table.rows.values():
        snapshot = row.snapshot
        for event in events:
            outcome, nxt = row.edges[event]
            assert same(outcome, sc.step(machine, snapshot, event.event, dict(event.payload)))
            assert nxt is table.row_of(outcome.snapshot)


def _combinations(event: Event) -> list[tuple[Any, ...]]:
    combos: list[tuple[Any, ...]] = [()]
    for f in event.fields:
        combos = [(*c, v) for c in combos for v in f.values]
    return combos


def test_equal_payload_values_of_different_types_are_two_edges() -> None:
    machine = typed_pair()
    as_bool, as_int = prepare(machine, "one", x=True), prepare(machine, "one", x=1)
    table = Table(machine, [as_bool, as_int])
    assert table.fire(table.initial, as_bool)[0].outputs[0].fields == (("x", "bool"),)
    assert table.fire(table.initial, as_int)[0].outputs[0].fields == (("x", "int"),)


def kept_type() -> Machine:
    """Writes the payload's value, True or 1: stored as the domain's 1, as `step` stores it."""
    return Machine(
        "kept_type",
        states=[State("idle", initial=True)],
        variables=[Var("v", (0, 1), 0)],
        events=[Event("put", [Field("x", (1, True))])],
        transitions=[Transition("idle", "put", None, effect=lambda s, p: {"v": p["x"]})],
    )


def test_a_value_written_in_another_type_is_stored_as_step_stores_it() -> None:
    machine = kept_type()
    as_bool, as_int = prepare(machine, "put", x=True), prepare(machine, "put", x=1)
    table = Table(machine, [as_bool, as_int])
    for first in (as_bool, as_int):
        for second in (as_bool, as_int):
            _, row = table.fire(table.initial, first)
            outcome, row = table.fire(row, second)
            expected = sc.step(
                machine,
                sc.step(machine, machine.initial_snap, "put", dict(first.payload)).snapshot,
                "put",
                dict(second.payload),
            )
            assert same(outcome, expected)
            assert type(row.snapshot.v) is type(expected.snapshot.v)


def test_an_impure_effect_is_refused_when_the_table_is_built() -> None:
    machine, _ = impure()
    with pytest.raises(ImpureCallbackError, match="count_call"):
        Table(machine, [prepare(machine, "go")])


def test_an_effect_that_raises_on_one_of_two_runs_is_refused_as_impure() -> None:
    armed, calls = [False], [0]

    def flaky(s: Any, p: Any) -> dict[str, int]:
        if armed[0]:
            calls[0] += 1
            if calls[0] == 1:
                raise TransitionError("first call")
        return {}

    machine = Machine(
        "raising",
        states=[State("idle", initial=True)],
        events=[Event("go")],
        transitions=[Transition("idle", "go", None, effect=flaky, effect_label="flaky")],
    )
    armed[0] = True
    with pytest.raises(ImpureCallbackError, match="gave another result"):
        Table(machine, [prepare(machine, "go")])


def test_an_error_policy_step_has_no_entry_and_raises_again_on_fire() -> None:
    machine = Machine(
        "strict",
        states=[State("idle", initial=True), State("done")],
        events=[Event("finish"), Event("go", policy="error")],
        transitions=[Transition("idle", "finish", "done"), Transition("done", "go", None)],
    )
    go, finish = prepare(machine, "go"), prepare(machine, "finish")
    table = Table(machine, [go, finish])
    assert go not in table.initial.edges
    with pytest.raises(TransitionError, match="not allowed in state 'idle'"):
        table.fire(table.initial, go)
    _, done = table.fire(table.initial, finish)
    assert table.fire(done, go)[0].accepted


def test_refusals_name_the_problem_and_the_fix() -> None:
    machine = typed_pair()
    table = Table(machine, [prepare(machine, "none")])
    with pytest.raises(FireError, match="not one of the events it was built with; add it"):
        table.fire(table.initial, prepare(machine, "one", x=1))
    with pytest.raises(TypeError, match="must be Prepared"):
        Table(machine, ["none"])  # type: ignore[list-item]
    other = kept_type()
    with pytest.raises(FireError):
        Table(machine, [prepare(other, "put", x=1)])
    unbounded = Machine(
        "unbounded",
        states=[State("idle", initial=True)],
        events=[Event("go", [Field("x", sample=(1, 2), type=int)])],
        transitions=[Transition("idle", "go", None)],
    )
    with pytest.raises(ValueError, match=r"pure=False .* use an Instance"):
        Table(unbounded, [prepare(unbounded, "go", x=3)])
    counter = Machine(
        "counter",
        states=[State("idle", initial=True)],
        variables=[Var("n", range(100), 0)],
        events=[Event("inc")],
        transitions=[
            Transition(
                "idle", "inc", None, guard=lambda s, p: s.n < 99, effect=lambda s, p: {"n": s.n + 1}
            )
        ],
    )
    with pytest.raises(ValueError, match=r"more than 10 snapshots .* use an Instance"):
        Table(counter, [prepare(counter, "inc")], limit=10)
    assert len(Table(counter, [prepare(counter, "inc")]).rows) == 100


def test_equal_snapshots_of_different_types_are_two_rows_and_the_table_is_finite() -> None:
    # Effects writing outside the domain (unchecked past `check_limit`): 2 and 2.0 are equal
    # snapshots that `step` tells apart, and each leads to the other.
    with pytest.warns(UserWarning):
        machine = Machine(
            "aliases",
            states=[State("a", initial=True), State("b")],
            variables=[Var("x", (0, 1), 0)],
            events=[Event("go"), Event("as_int"), Event("as_float")],
            transitions=[
                Transition("a", "go", "b", effect=lambda s, p: {"x": 1}),
                Transition("b", "as_int", None, effect=lambda s, p: {"x": 2}),
                Transition("b", "as_float", None, effect=lambda s, p: {"x": 2.0}),
            ],
            check_limit=1,
        )
    events = [prepare(machine, e) for e in ("go", "as_int", "as_float")]
    table = Table(machine, events)
    assert len(table.rows) == 4  # a, b with 1, b with 2, b with 2.0
    _, b = table.fire(table.initial, events[0])
    _, as_int = table.fire(b, events[1])
    _, as_float = table.fire(as_int, events[2])
    assert type(as_int.snapshot.x) is int and type(as_float.snapshot.x) is float
    assert table.fire(as_float, events[1])[1] is as_int
