"""States given as names rather than `State` objects."""

from statecore import Event, Machine, Transition

MACHINE = "'states_as_strings'"
CULPRIT = "state 'idle' has type str, not State"
FIX = "State('idle')"


def build() -> Machine:
    return Machine(
        "states_as_strings",
        states=["idle", "busy"],  # type: ignore[list-item]
        events=[Event("go")],
        transitions=[Transition("idle", "go", "busy")],
    )
