"""A machine whose definition is invalid: a state no transition reaches."""

from __future__ import annotations

from statecore import Event, Machine, State, Transition

MACHINE = Machine(
    "door",
    states=[State("closed", initial=True), State("open"), State("locked")],
    events=[Event("push")],
    transitions=[Transition("closed", "push", "open")],
)
