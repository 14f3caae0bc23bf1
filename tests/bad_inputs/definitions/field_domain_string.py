"""A payload field whose domain is a string."""

from statecore import Event, Field, Machine, State, Transition

MACHINE = "'field_domain_string'"
CULPRIT = "payload field 'mode': domain is the string 'rw'"
FIX = "('rw',)"


def build() -> Machine:
    return Machine(
        "field_domain_string",
        states=[State("idle", initial=True)],
        events=[Event("open", [Field("mode", "rw")])],
        transitions=[Transition("idle", "open")],
    )
