"""Events given as names rather than `Event` objects."""

from statecore import Machine, State, Transition

MACHINE = "'events_as_strings'"
CULPRIT = "event 'go' has type str, not Event"
FIX = "Event('go')"


def build() -> Machine:
    return Machine(
        "events_as_strings",
        states=[State("idle", initial=True), State("busy")],
        events=["go"],  # type: ignore[list-item]
        transitions=[Transition("idle", "go", "busy")],
    )
