"""A variable given as its name."""

from statecore import Event, Machine, State, Transition

MACHINE = "'variables_as_strings'"
CULPRIT = "variable 'puts' has type str, not Var"
FIX = "Var('puts', range(2), 0)"


def build() -> Machine:
    return Machine(
        "variables_as_strings",
        states=[State("idle", initial=True)],
        variables=["puts"],  # type: ignore[list-item]
        events=[Event("go")],
        transitions=[Transition("idle", "go")],
    )
