"""An unbounded field whose sample does not match its declared type."""

from statecore import Event, Field, Machine, State, Transition

MACHINE = "'field_sample_wrong_type'"
CULPRIT = "payload field 'size': sample value 'big' is not a float"
FIX = "make the samples match type=float"


def build() -> Machine:
    return Machine(
        "field_sample_wrong_type",
        states=[State("idle", initial=True)],
        events=[Event("grow", [Field("size", sample=(0.5, "big"), type=float)])],
        transitions=[Transition("idle", "grow")],
    )
