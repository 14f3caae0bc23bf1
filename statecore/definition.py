"""Declarative machine definitions.

A `Machine` is data: named states, typed variables with finite domains, events
with payload fields, and transitions ``(source, event, guard, target, effect,
emit)``. Guards, effects and emitters must be pure functions of the current
`Snapshot` and the event's payload: the runtime remembers what they returned
and serves it to later fires (declare ``pure=False`` on the `Event` or the
`Machine` for callbacks that read a clock or count). Everything that can be
checked about a definition is checked when the `Machine` is built (see
`statecore.validation`), so a machine that exists is a machine that makes
sense.

Example::

    sender = Machine(
        "sender",
        states=[State("idle", initial=True), State("queued", hot=True),
                State("sent", final=True)],
        variables=[Var("puts", range(3), default=0)],
        events=[Event("enqueue"), Event("put", [Field("ok", (True, False))])],
        transitions=[
            Transition("idle", "enqueue", "queued"),
            Transition("queued", "put", "sent", guard=lambda s, p: p["ok"],
                       effect=lambda s, p: {"puts": s.puts + 1}),
        ],
    )
"""

from __future__ import annotations

from collections.abc import Iterable

from .machine_parts import (
    POLICIES,
    Compiled,
    Effect,
    Emitter,
    Event,
    Field,
    Guard,
    MachineData,
    Output,
    Payload,
    PayloadCheck,
    Policy,
    Snapshot,
    State,
    Transition,
    Var,
    accepted_types,
    check_identifier,
    out,
    parts,
)
from .validation import validate

__all__ = [
    "POLICIES",
    "Compiled",
    "Effect",
    "Emitter",
    "Event",
    "Field",
    "Guard",
    "Machine",
    "MachineData",
    "Output",
    "Payload",
    "PayloadCheck",
    "Policy",
    "Snapshot",
    "State",
    "Transition",
    "Var",
    "accepted_types",
    "check_identifier",
    "out",
    "parts",
]


class Machine(MachineData):
    """A validated, immutable state machine definition.

    Build one with the constructor; it raises a `DefinitionError` subclass
    naming the culprit and the fix if the definition is inconsistent. The
    finite-domain checks (non-determinism, effects leaving a domain) explore
    the reachable snapshots up to `check_limit` (a positive number); stopping
    there with snapshots left unchecked issues a `ValidationLimitWarning`.

    ``pure=False`` says guards, effects or emitters read more than the
    snapshot and the payload: the runtime then never remembers an outcome of
    this machine (see `Event` for one event). The parts and the derived
    tables are declared in `statecore.machine_parts.MachineData`.
    """

    def __init__(
        self,
        name: str,
        *,
        states: Iterable[State],
        events: Iterable[Event],
        transitions: Iterable[Transition],
        variables: Iterable[Var] = (),
        doc: str = "",
        check_limit: int = 200_000,
        pure: bool = True,
    ) -> None:
        object.__setattr__(self, "name", name)
        object.__setattr__(self, "states", parts(states))
        object.__setattr__(self, "events", parts(events))
        object.__setattr__(self, "transitions", parts(transitions))
        object.__setattr__(self, "variables", parts(variables))
        object.__setattr__(self, "doc", doc)
        object.__setattr__(self, "check_limit", check_limit)
        object.__setattr__(self, "pure", pure)
        validate(self)
