"""A payload field given as its name."""

from statecore import Event, Machine, State, Transition

MACHINE = "'field_as_string'"
CULPRIT = "event 'put': payload field 'ok' has type str"
FIX = "Field('ok', (True, False))"


def build() -> Machine:
    return Machine(
        "field_as_string",
        states=[State("idle", initial=True)],
        events=[Event("put", ["ok"])],  # type: ignore[list-item]
        transitions=[Transition("idle", "put")],
    )
