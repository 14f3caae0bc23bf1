"""The request-lifecycle system's bounds and the records its state is made of.

`RequestLifecycleConfig` holds the bounds (`statecore.models.request_lifecycle`
says what each variant replaces). `Shared` is the system's globals, one field
per global in the order the state is laid out; `StateObject`, `Ownership`,
`Removal` and `Misattribution` are the rows its sets hold. `Answer` and
`Arrival` are what the recorder's calls return within a step.
"""

from __future__ import annotations

import math
from collections.abc import Hashable
from dataclasses import dataclass
from typing import Annotated, NamedTuple

from statecore.system import Handle

KINDS: tuple[str, ...] = ("client", "duck", "raising")
"""The state objects a request may register: a real ``ClientRequestState``
owning a recorder, a duck-typed ``SimpleNamespace`` without the release hook,
or a state whose release hook raises."""

# One event is enough for the lifecycle; `statecore.models.stream_edge` checks
# first-write-wins across events, edges and segments on a recorder alone.
EVENTS: tuple[str, ...] = ("producer_emit",)
ELAPSED: tuple[float, ...] = (12.5, math.nan, -1.0, math.inf)

RECORDED, DROPPED, RAISED = "recorded", "dropped", "raised"

CLEANUP, ABORT = "cleanup", "abort"
"""The two removal paths (the request machine's events of the same names)."""


class Raised(Exception):
    """Production code raised: `call` is the call that raised (``record``, ...)."""

    def __init__(self, call: str) -> None:
        super().__init__(call)
        self.call = call


@dataclass(frozen=True)
class RequestLifecycleConfig:
    """The system's name and bounds."""

    name: str = "request_lifecycle"
    ids: int = 1
    generations: int = 2
    edges: tuple[str, ...] = ("e0",)
    segments: int = 2
    events: tuple[str, ...] = EVENTS
    elapsed: tuple[float, ...] = ELAPSED
    kinds: tuple[str, ...] = KINDS


class StateObject(NamedTuple):
    """A request instance and the kind of state object registered for it (`KINDS`)."""

    request: Handle
    kind: str


class Ownership(NamedTuple):
    """A recorder, edge or segment handle and the request instance it belongs to."""

    part: Handle
    request: Handle


class Removal(NamedTuple):
    """A request instance popped from ``request_states`` and the path that popped it."""

    request: Handle
    path: str  # CLEANUP or ABORT


class Misattribution(NamedTuple):
    """An observation of one request instance recorded by another that reused its id."""

    observed: Handle
    recorded_by: Handle


class Shared(NamedTuple):
    """The request-lifecycle system's globals."""

    state_objects: Annotated[frozenset[StateObject], "(request, kind of state object)"] = (
        frozenset()
    )
    owner: Annotated[frozenset[Ownership], "(recorder/edge/segment handle, its request)"] = (
        frozenset()
    )
    removed: Annotated[frozenset[Removal], "(request, removal path)"] = frozenset()
    cleaned: Annotated[frozenset[Handle], "requests canonical cleanup ran for"] = frozenset()
    gauge: Annotated[int, "the request count the gauges last published"] = 0
    consumed: Annotated[frozenset[Hashable], "ids whose state holds consumed metric ids"] = (
        frozenset()
    )
    late_accepts: Annotated[frozenset[Handle], "removed requests that still recorded"] = frozenset()
    misattributed: Annotated[frozenset[Misattribution], "(observed, recording instance)"] = (
        frozenset()
    )


class Arrival(NamedTuple):
    """What a recorder shows an arriving observation: the edge's current segment
    (-1 if none) and whether the observation's event is already taken there."""

    current: int
    taken: bool


class Answer(NamedTuple):
    """What an observation call answers: `RECORDED`, `DROPPED` or `RAISED`, and why."""

    result: str
    reason: str = ""
