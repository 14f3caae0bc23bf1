"""Definition-time validation: one test per kind of mistake.

Each test asserts the exact exception class (not just `DefinitionError`) and
that the message names the machine and the culprit.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

import pytest

from statecore import DefinitionError, Event, Field, Machine, State, Transition, Var, out
from statecore import errors as E

NAME = "lamp"


def states(*extra: State) -> list[State]:
    return [State("idle", initial=True), State("done", final=True), *extra]


def build(
    *,
    states: Iterable[State] | None = None,
    events: Iterable[Event] | None = None,
    transitions: Iterable[Transition] | None = None,
    variables: Iterable[Var] = (),
    name: str = NAME,
    **kwargs: Any,
) -> Machine:
    """A valid two-state machine unless an argument breaks it."""
    return Machine(
        name,
        states=[State("idle", initial=True), State("done", final=True)]
        if states is None
        else states,
        events=[Event("go")] if events is None else events,
        transitions=[Transition("idle", "go", "done")] if transitions is None else transitions,
        variables=variables,
        **kwargs,
    )


def raises(exc: type[Exception], *culprits: str, **machine: Any) -> str:
    """Build the machine, check the exact class and that the message names everything."""
    with pytest.raises(DefinitionError) as info:
        build(**machine)
    assert type(info.value) is exc, f"expected {exc.__name__}, got {info.value!r}"
    message = str(info.value)
    for culprit in culprits:
        assert culprit in message, f"{culprit!r} not named in: {message}"
    return message


def test_valid_baseline_builds() -> None:
    machine = build()
    assert machine.initial.name == "idle"
    assert machine.final_states == {"done"}


def test_unknown_source_state() -> None:
    message = raises(
        E.UnknownStateError,
        repr(NAME),
        "'nowhere'",
        transitions=[Transition("idle", "go", "done"), Transition("nowhere", "go", "done")],
    )
    assert "source" in message


def test_unknown_target_state() -> None:
    message = raises(
        E.UnknownStateError,
        repr(NAME),
        "'nowhere'",
        transitions=[Transition("idle", "go", "nowhere")],
    )
    assert "target" in message


def test_unknown_event_in_transition() -> None:
    raises(
        E.UnknownEventError,
        repr(NAME),
        "'fly'",
        transitions=[Transition("idle", "go", "done"), Transition("idle", "fly", "done")],
    )


def test_missing_initial_state() -> None:
    raises(
        E.InitialStateError,
        repr(NAME),
        "initial",
        states=[State("idle"), State("done", final=True)],
    )


def test_no_states_at_all() -> None:
    raises(E.InitialStateError, repr(NAME), states=[], transitions=[])


def test_duplicate_initial_state() -> None:
    raises(
        E.InitialStateError,
        repr(NAME),
        "'idle'",
        "'busy'",
        states=[State("idle", initial=True), State("busy", initial=True), State("done")],
        transitions=[Transition("idle", "go", "done"), Transition("busy", "go", "done")],
    )


def test_duplicate_state_name() -> None:
    raises(
        E.DuplicateNameError,
        repr(NAME),
        "state 'done'",
        states=[*states(), State("done")],
    )


def test_duplicate_event() -> None:
    raises(E.DuplicateNameError, repr(NAME), "event 'go'", events=[Event("go"), Event("go")])


def test_duplicate_variable() -> None:
    raises(
        E.DuplicateNameError,
        repr(NAME),
        "variable 'n'",
        variables=[Var("n", range(2), 0), Var("n", range(3), 0)],
    )


def test_duplicate_payload_field() -> None:
    raises(
        E.DuplicateNameError,
        repr(NAME),
        "event 'go'",
        "field 'ok'",
        events=[Event("go", [Field("ok", (True, False)), Field("ok", (1, 2))])],
    )


@pytest.mark.parametrize("bad", ["2fast", "has space", "dash-ed", ""])
@pytest.mark.parametrize("kind", ["state", "event", "variable", "payload field"])
def test_invalid_name(kind: str, bad: str) -> None:
    machine: dict[str, Any] = {}
    if kind == "state":
        machine["states"] = [*states(), State(bad)]
    elif kind == "event":
        machine["events"] = [Event("go"), Event(bad)]
    elif kind == "variable":
        machine["variables"] = [Var(bad, range(2), 0)]
    else:
        machine["events"] = [Event("go", [Field(bad, (1,))])]
    raises(E.InvalidNameError, repr(NAME), f"{kind} name {bad!r}", **machine)


def test_invalid_machine_name() -> None:
    raises(E.InvalidNameError, "'my lamp'", "machine name", name="my lamp")


def test_transition_from_final_state() -> None:
    raises(
        E.FinalStateTransitionError,
        repr(NAME),
        "final state 'done'",
        events=[Event("go"), Event("back")],
        transitions=[Transition("idle", "go", "done"), Transition("done", "back", "idle")],
    )


def test_unreachable_state() -> None:
    raises(
        E.UnreachableStateError,
        repr(NAME),
        "'island'",
        "'idle'",
        states=states(State("island")),
        events=[Event("go"), Event("swim")],
        transitions=[Transition("idle", "go", "done"), Transition("island", "swim", "done")],
    )


def test_event_with_no_transition() -> None:
    raises(E.UnusedEventError, repr(NAME), "'spare'", events=[Event("go"), Event("spare")])


def overlapping_on_payload() -> dict[str, Any]:
    return {
        "events": [Event("go", [Field("x", range(3))])],
        "states": states(State("other", final=True)),
        "transitions": [
            Transition("idle", "go", "done", guard=lambda s, p: p["x"] >= 1),
            Transition("idle", "go", "other", guard=lambda s, p: p["x"] <= 1),
        ],
    }


def overlapping_on_variable() -> dict[str, Any]:
    """The overlap (n == 2) is only reachable after two ticks."""
    return {
        "events": [Event("go"), Event("tick")],
        "states": states(State("other", final=True)),
        "variables": [Var("n", range(3), 0)],
        "transitions": [
            Transition(
                "idle", "tick", guard=lambda s, p: s.n < 2, effect=lambda s, p: {"n": s.n + 1}
            ),
            Transition("idle", "go", "done", guard=lambda s, p: s.n == 2),
            Transition("idle", "go", "other", guard=lambda s, p: s.n != 1),
        ],
    }


@pytest.mark.parametrize(
    ("machine", "witness"),
    [(overlapping_on_payload, "'x': 1"), (overlapping_on_variable, "n=2")],
)
def test_nondeterminism(machine: Any, witness: str) -> None:
    raises(
        E.NondeterminismError,
        repr(NAME),
        "'idle--go-->done'",
        "'idle--go-->other'",
        "event 'go'",
        witness,
        **machine(),
    )


def test_mutually_exclusive_guards_pass() -> None:
    machine = build(
        events=[Event("go", [Field("x", range(3))]), Event("tick")],
        states=states(State("other", final=True)),
        variables=[Var("n", range(3), 0)],
        transitions=[
            Transition(
                "idle", "tick", guard=lambda s, p: s.n < 2, effect=lambda s, p: {"n": s.n + 1}
            ),
            Transition("idle", "go", "done", guard=lambda s, p: p["x"] >= 1 and s.n == 2),
            Transition("idle", "go", "other", guard=lambda s, p: p["x"] < 1 or s.n != 2),
        ],
    )
    snap = machine.snapshot
    assert machine.reachable_snapshots == {
        *(snap("idle", n=n) for n in range(3)),
        snap("done", n=2),
        *(snap("other", n=n) for n in range(3)),
    }


def test_variable_default_outside_domain() -> None:
    raises(
        E.VariableDomainError,
        repr(NAME),
        "variable 'n'",
        "default 5",
        variables=[Var("n", range(3), 5)],
    )


def test_variable_empty_domain() -> None:
    raises(E.VariableDomainError, repr(NAME), "variable 'n'", "empty", variables=[Var("n", (), 0)])


def test_effect_assigns_unknown_variable() -> None:
    raises(
        E.UnknownVariableError,
        repr(NAME),
        "'ghost'",
        "'idle--go-->done'",
        variables=[Var("n", range(2), 0)],
        transitions=[Transition("idle", "go", "done", effect=lambda s, p: {"ghost": 1})],
    )


def test_effect_leaves_domain_only_for_one_payload() -> None:
    raises(
        E.EffectDomainError,
        repr(NAME),
        "'idle--go-->done'",
        "n=3",
        "'k': 3",
        events=[Event("go", [Field("k", range(4))])],
        variables=[Var("n", range(3), 0)],
        transitions=[Transition("idle", "go", "done", effect=lambda s, p: {"n": p["k"]})],
    )


def test_payload_field_without_domain_or_sample() -> None:
    raises(
        E.FieldDomainError,
        repr(NAME),
        "event 'go'",
        "field 'size'",
        events=[Event("go", [Field("size", type=float)])],
    )


def test_payload_field_with_empty_domain() -> None:
    raises(
        E.FieldDomainError,
        repr(NAME),
        "event 'go'",
        "field 'size'",
        events=[Event("go", [Field("size", ())])],
    )


def test_payload_field_with_sample_only_is_fine() -> None:
    machine = build(events=[Event("go", [Field("size", sample=(0.5, 2.0), type=float)])])
    assert "go" not in machine.cacheable_events


def test_hot_state_that_is_final() -> None:
    raises(
        E.HotFinalStateError,
        repr(NAME),
        "'done'",
        states=[State("idle", initial=True), State("done", final=True, hot=True)],
    )


def test_state_event_name_clash() -> None:
    raises(
        E.NameClashError,
        repr(NAME),
        "'done'",
        events=[Event("go"), Event("done")],
        transitions=[Transition("idle", "go", "done"), Transition("idle", "done", "done")],
    )


@pytest.mark.parametrize("reserved", ["state", "values", "count", "index", "_hidden"])
def test_reserved_variable_name(reserved: str) -> None:
    raises(
        E.NameClashError,
        repr(NAME),
        f"variable name {reserved!r}",
        variables=[Var(reserved, range(2), 0)],
    )


def test_bad_policy() -> None:
    """The policy is checked when the Event is built, before any machine exists."""
    with pytest.raises(E.PolicyError) as info:
        Event("go", policy="explode")  # type: ignore[arg-type]
    assert isinstance(info.value, DefinitionError)
    assert "'go'" in str(info.value)
    assert "'explode'" in str(info.value)


def test_guard_raising_during_validation() -> None:
    message = raises(
        E.CallbackError,
        repr(NAME),
        "'idle--go-->done'",
        "ZeroDivisionError",
        "'x': 0",
        events=[Event("go", [Field("x", range(3))])],
        transitions=[Transition("idle", "go", "done", guard=lambda s, p: 1 / p["x"] > 0)],
    )
    assert "guard" in message


def test_effect_raising_during_validation() -> None:
    raises(
        E.CallbackError,
        repr(NAME),
        "'idle--go-->done'",
        "KeyError",
        variables=[Var("n", range(2), 0)],
        transitions=[Transition("idle", "go", "done", effect=lambda s, p: {"n": p["missing"]})],
    )


def test_effect_returning_non_mapping() -> None:
    raises(
        E.CallbackError,
        repr(NAME),
        "'idle--go-->done'",
        "list",
        variables=[Var("n", range(2), 0)],
        transitions=[Transition("idle", "go", "done", effect=lambda s, p: [("n", 1)])],
    )


def test_emitter_returning_non_output() -> None:
    raises(
        E.CallbackError,
        repr(NAME),
        "'idle--go-->done'",
        "'put'",
        transitions=[Transition("idle", "go", "done", emit=lambda s, p: ["put"])],
    )


def test_emitter_returning_outputs_is_fine() -> None:
    machine = build(transitions=[Transition("idle", "go", "done", emit=lambda s, p: [out("put")])])
    assert machine.dispatch["idle"]["go"][0].emit_fn is not None


def test_each_kind_has_its_own_class() -> None:
    kinds = [
        E.InvalidNameError,
        E.DuplicateNameError,
        E.NameClashError,
        E.InitialStateError,
        E.UnknownStateError,
        E.UnknownEventError,
        E.FinalStateTransitionError,
        E.HotFinalStateError,
        E.UnreachableStateError,
        E.UnusedEventError,
        E.NondeterminismError,
        E.VariableDomainError,
        E.UnknownVariableError,
        E.EffectDomainError,
        E.FieldDomainError,
        E.PolicyError,
        E.CallbackError,
    ]
    assert len(set(kinds)) == len(kinds)
    assert all(issubclass(k, DefinitionError) and k is not DefinitionError for k in kinds)


# -- check_limit -------------------------------------------------------------------


def late_nondeterminism(check_limit: int) -> Machine:
    """Two guards both hold at n == 250 only: found only when validation gets there."""
    return Machine(
        "late",
        states=[State("counting", initial=True)],
        variables=[Var("n", range(301), 0)],
        events=[Event("tick")],
        transitions=[
            Transition(
                "counting", "tick", guard=lambda s, p: s.n < 300, effect=lambda s, p: {"n": s.n + 1}
            ),
            Transition("counting", "tick", guard=lambda s, p: s.n == 250, name="late_tick"),
        ],
        check_limit=check_limit,
    )


def test_non_determinism_beyond_the_check_limit_is_reported_or_warned() -> None:
    with pytest.raises(E.NondeterminismError, match="late_tick"):
        late_nondeterminism(check_limit=1_000)
    with pytest.warns(E.ValidationLimitWarning) as caught:
        late_nondeterminism(check_limit=200)
    message = str(caught[0].message)
    assert "machine 'late'" in message and "check_limit=200" in message
    assert "raise check_limit" in message
    assert caught[0].filename == __file__  # points at the definition, not at statecore


@pytest.mark.parametrize("limit", [0, -1, -300_000])
def test_non_positive_check_limit_is_rejected(limit: int) -> None:
    raises(E.CheckLimitError, repr(NAME), f"check_limit={limit}", "positive", check_limit=limit)


def test_warns_only_when_snapshots_are_left_unchecked(recwarn: pytest.WarningsRecorder) -> None:
    build(check_limit=2)  # exactly its two snapshots
    assert not [w for w in recwarn if issubclass(w.category, E.ValidationLimitWarning)]
    with pytest.warns(E.ValidationLimitWarning):
        build(check_limit=1)


# -- equal values of different types -----------------------------------------------


@pytest.mark.parametrize(
    ("domain", "pair"),
    [((1, True, 2), "1 and True"), ((0.0, 0, 1), "0.0 and 0"), ((0.0, -0.0), "0.0 and -0.0")],
)
def test_variable_domain_with_equal_values_of_different_types(
    domain: tuple[object, ...], pair: str
) -> None:
    raises(
        E.VariableDomainError,
        repr(NAME),
        "variable 'x'",
        f"both {pair}",
        variables=[Var("x", domain, domain[-1])],
    )


def test_payload_domain_may_hold_equal_values_of_different_types() -> None:
    """Payloads are never merged: the memo keys on the value's type too."""
    machine = build(events=[Event("go", [Field("x", (1, True))])])
    assert machine.event_index["go"].fields[0].domain == (1, True)
