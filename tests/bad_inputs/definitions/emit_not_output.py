"""A static emit holding a tuple rather than an `Output`."""

from statecore import Event, Machine, State, Transition

MACHINE = "'emit_not_output'"
CULPRIT = "emits ('put', True) (type tuple), not an Output"
FIX = "emit=[out('name', field=value)]"


def build() -> Machine:
    return Machine(
        "emit_not_output",
        states=[State("idle", initial=True), State("sent")],
        events=[Event("send")],
        transitions=[
            Transition("idle", "send", "sent", emit=[("put", True)]),  # type: ignore[list-item]
        ],
    )
