"""A guard that returns a count rather than a bool."""

from statecore import Event, Machine, State, Transition, Var

MACHINE = "'guard_returns_non_bool'"
CULPRIT = "guard of transition 'idle--go-->busy' returned 0 (type int)"
FIX = "wrap the expression in bool(...)"


def build() -> Machine:
    return Machine(
        "guard_returns_non_bool",
        states=[State("idle", initial=True), State("busy")],
        variables=[Var("puts", range(2), 0)],
        events=[Event("go")],
        transitions=[Transition("idle", "go", "busy", guard=lambda s, p: s.puts)],
    )
