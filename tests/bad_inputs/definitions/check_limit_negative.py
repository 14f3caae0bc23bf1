"""A negative check_limit."""

from statecore import Event, Machine, State, Transition

MACHINE = "'check_limit_negative'"
CULPRIT = "check_limit=-5"
FIX = "give a positive number of snapshots"


def build() -> Machine:
    return Machine(
        "check_limit_negative",
        states=[State("idle", initial=True)],
        events=[Event("go")],
        transitions=[Transition("idle", "go")],
        check_limit=-5,
    )
