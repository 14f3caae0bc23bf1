"""A variable whose domain holds 1 and True, which snapshots cannot tell apart."""

from statecore import Event, Machine, State, Transition, Var

MACHINE = "'var_domain_aliasing'"
CULPRIT = "variable 'x' has both 1 and True"
FIX = "keep one"


def build() -> Machine:
    return Machine(
        "var_domain_aliasing",
        states=[State("idle", initial=True)],
        variables=[Var("x", (1, True, 2), 1)],
        events=[Event("go")],
        transitions=[Transition("idle", "go")],
    )
