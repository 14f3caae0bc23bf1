"""A payload field whose domain holds lists."""

from statecore import Event, Field, Machine, State, Transition

MACHINE = "'field_domain_unhashable'"
CULPRIT = "payload field 'chunk': domain value [1, 2] (type list) is unhashable"
FIX = "a tuple rather than a list"


def build() -> Machine:
    return Machine(
        "field_domain_unhashable",
        states=[State("idle", initial=True)],
        events=[Event("put", [Field("chunk", ([1, 2], [3]))])],  # type: ignore[list-item]
        transitions=[Transition("idle", "put")],
    )
