"""A string as a domain, which would be three one-letter values."""

from statecore import Event, Machine, State, Transition, Var

MACHINE = "'var_domain_string'"
CULPRIT = "variable 'mode': domain is the string 'abc'"
FIX = "('abc',)"


def build() -> Machine:
    return Machine(
        "var_domain_string",
        states=[State("idle", initial=True)],
        variables=[Var("mode", "abc", "a")],
        events=[Event("go")],
        transitions=[Transition("idle", "go")],
    )
