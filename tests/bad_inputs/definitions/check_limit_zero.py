"""check_limit=0, which used to turn the semantic checks off without a word."""

from statecore import Event, Machine, State, Transition

MACHINE = "'check_limit_zero'"
CULPRIT = "check_limit=0"
FIX = "give a positive number of snapshots"


def build() -> Machine:
    return Machine(
        "check_limit_zero",
        states=[State("idle", initial=True)],
        events=[Event("go")],
        transitions=[Transition("idle", "go")],
        check_limit=0,
    )
