"""Differential test: statecore against pytransitions as an independent oracle.

Both machines are built from the same plain-data description
(`strategies.describe`); the same random event sequence is fired through
both, and on every step they must agree on whether a transition was taken
and on the resulting state and variables.
"""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given, settings
from strategies import (
    GuardSpec,
    MachineSpec,
    Step,
    TransitionSpec,
    describe,
    machines_and_sequences,
)

from statecore import Instance, Machine, step

transitions = pytest.importorskip("transitions")


class Model:
    """The pytransitions model: `state` plus one attribute per variable."""

    def __init__(self, values: dict[str, int]) -> None:
        self.__dict__.update(values)

    def variables(self, spec: MachineSpec) -> dict[str, int]:
        return {v.name: getattr(self, v.name) for v in spec.variables}


def _condition(spec: MachineSpec, guard: GuardSpec) -> Any:
    def condition(event: Any) -> bool:
        return guard.holds(event.model.variables(spec), event.kwargs)

    return condition


def _effect(spec: MachineSpec, t: TransitionSpec) -> Any:
    effect = t.effect
    assert effect is not None

    def apply(event: Any) -> None:
        model = event.model
        setattr(model, effect.var, effect.apply(model.variables(spec), event.kwargs))

    return apply


def oracle(spec: MachineSpec) -> Model:
    """A pytransitions machine for `spec`, returned as its model."""
    model = Model(spec.initial_values())
    machine = transitions.Machine(
        model=model,
        states=list(spec.states),
        initial=spec.initial,
        send_event=True,
        ignore_invalid_triggers=True,
        auto_transitions=False,
    )
    for t in spec.transitions:
        machine.add_transition(
            t.event,
            t.source,
            t.target if t.target is not None else t.source,
            conditions=[] if t.guard is None else [_condition(spec, t.guard)],
            before=[] if t.effect is None else [_effect(spec, t)],
        )
    return model


@settings(max_examples=250, deadline=None)
@given(machines_and_sequences(min_size=10, max_size=40))
def test_statecore_agrees_with_pytransitions(case: tuple[Machine, list[Step]]) -> None:
    machine, steps = case
    spec = describe(machine)
    model = oracle(spec)
    instance = Instance(machine)
    snapshot = machine.initial_snapshot()
    for event, payload in steps:
        context = f"{event}({payload}) from {snapshot!r}"
        taken = model.trigger(event, **payload)
        outcome = instance.fire(event, **payload)
        pure = step(machine, snapshot, event, payload)
        snapshot = pure.snapshot
        assert outcome.accepted is taken, context
        assert pure.accepted is taken, context
        assert instance.state == model.state == pure.snapshot.state, context
        assert instance.snapshot.values() == model.variables(spec), context
        assert pure.snapshot.values() == model.variables(spec), context
