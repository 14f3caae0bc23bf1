"""A variable's domain given as a number rather than a collection of values."""

from statecore import Event, Machine, State, Transition, Var

MACHINE = "'var_domain_int'"
CULPRIT = "variable 'puts': domain is 3 (type int)"
FIX = "range(3)"


def build() -> Machine:
    return Machine(
        "var_domain_int",
        states=[State("idle", initial=True)],
        variables=[Var("puts", 3, 0)],  # type: ignore[arg-type]
        events=[Event("go")],
        transitions=[Transition("idle", "go")],
    )
