"""A static emit given as a name rather than an `Output`."""

from statecore import Event, Machine, State, Transition

MACHINE = "'emit_string'"
CULPRIT = "emits 'put' (type str), not an Output"
FIX = "emit=[out('name', field=value)]"


def build() -> Machine:
    return Machine(
        "emit_string",
        states=[State("idle", initial=True), State("sent")],
        events=[Event("send")],
        transitions=[Transition("idle", "send", "sent", emit="put")],  # type: ignore[arg-type]
    )
