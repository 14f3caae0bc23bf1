"""A transition written as a tuple."""

from statecore import Event, Machine, State

MACHINE = "'transition_as_tuple'"
CULPRIT = "transition ('idle', 'go', 'busy') has type tuple"
FIX = "Transition('idle', 'go', 'busy')"


def build() -> Machine:
    return Machine(
        "transition_as_tuple",
        states=[State("idle", initial=True), State("busy")],
        events=[Event("go")],
        transitions=[("idle", "go", "busy")],  # type: ignore[list-item]
    )
