"""What the request-state system holds: its globals record, the records in it, its config.

`Shared` is the system's globals (``System(globals=Shared)``); `Task`,
`InFlight`, `View` and `Made` are the records inside them. `RequestStateConfig`
selects the behaviour of one review finding per switch (the defaults are the
reference).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Annotated, Literal, NamedTuple

from statecore.system import Handle

Fence = Literal["identity", "identity_not_cancelled", "external_id", "unfenced"]
LateCheck = Literal["retained", "context"]

Kind = Literal["segment_end", "terminal"]
"""What a task saves, as ``save_async`` is called (also the request's event)."""
SEGMENT: Kind = "segment_end"
TERMINAL: Kind = "terminal"

Phase = Literal["begun", "ready"]
"""How far the task in flight got."""
BEGUN: Phase = "begun"
"""The fence of ``_send_single_request`` let it run; the producer has not run yet."""
READY: Phase = "ready"
"""The producer ran (or its exception was handled): the put is next."""

CANCELLED = ("draining", "retiring")  # sender states with `cancelled` set

# Results of a get_or_create, as the test's late check records them.
REFUSED = "refused"
CREATED = "created"
REUSED = "reused"
UNAVAILABLE = "unavailable"  # no accessor installed: raised before any view was exercised


class Task(NamedTuple):
    """A queued save (an entry of ``_pending_save_reqs``)."""

    sender: Handle  # the sender generation (``_SenderGeneration``) it was queued under
    state: Handle  # the request state generation its producer reads
    request: Handle  # the scheduler's request that saved it
    kind: Kind

    @property
    def terminal(self) -> bool:
        return self.kind == TERMINAL


class InFlight(NamedTuple):
    """The task the save thread is running, and how far it got."""

    task: Task
    phase: Phase


class View(NamedTuple):
    """An accessor view a producer retained: the generation it was handed out for."""

    sender: Handle
    state: Handle


class Made(NamedTuple):
    """Ghost: a namespace a producer created in a state generation."""

    state: Handle
    var: str  # the machine variable of the namespace (``namespace_var``)


class Shared(NamedTuple):
    """The globals of `request_state_system`, in declaration order."""

    queue: Annotated[tuple[Task, ...], "_pending_save_reqs: FIFO of tasks"] = ()
    in_flight: Annotated[InFlight | None, "the task the save thread runs, and its phase"] = None
    views: Annotated[frozenset[View], "accessor views retained by producers"] = frozenset()
    made: Annotated[frozenset[Made], "ghost: (state handle, ns var) created by a producer"] = (
        frozenset()
    )
    terminals: Annotated[frozenset[Handle], "requests whose terminal was queued"] = frozenset()
    terminal_put: Annotated[frozenset[Handle], "requests whose terminal reached connector.put"] = (
        frozenset()
    )
    failures: Annotated[frozenset[Handle], "requests with a recorded, unfinalized send failure"] = (
        frozenset()
    )
    crossed: Annotated[bool, "ghost: an access reached another generation's state"] = False
    refused_in_producer: Annotated[bool, "ghost: a running producer was refused"] = False
    late_check: Annotated[
        str | None,
        "the result of the test's late get_or_create (refused, created, reused or unavailable)",
    ] = None
    segment_done: Annotated[bool, "ghost: a segment completed while state was held"] = False
    delivered: Annotated[bool, "ghost: a terminal put succeeded"] = False


@dataclass(frozen=True)
class RequestStateConfig:
    """Behaviour switches; each names the review finding or code it comes from.

    `statecore.models.request_state.build` turns each switch into the named
    function it selects (`statecore.models.request_state_access.FENCES`, the
    save thread's refusal handling, the late check's accessor).
    """

    name: str = "request_state_system"
    ids: int = 1
    generations: int = 2
    # How an accessor decides it may touch state (the PR's is_active lambda):
    # "identity" - the review's fix, `_sender_tokens.get(ext) is sender_token`;
    # "identity_not_cancelled" - the PR as submitted (seed 000 P1): also
    #   `and not sender_token.cancelled`;
    # "external_id" - a view that resolves request_payload[ext] while any
    #   generation of ext is current (`ext in _sender_tokens`);
    # "unfenced" - only the execution-local `adapter.request_state` slot is
    #   checked; a retained accessor resolves `request_payload.setdefault(ext)`.
    fence: Fence = "identity"
    # A refused get_or_create raises RequestStateUnavailableError (the PR) or
    # fails open with a detached value (the RFC: never raise into a request).
    refusal_raises: bool = False
    # A producer exception on a boundary task: the PR's
    # `record_send_failure(...); return` skips the put; the review's fix
    # records the failure and still puts the boundary marker.
    exception_skips_put: bool = False
    # Seed 000 P2: the test's late check reads `adapter.request_state` (the
    # execution-local slot, always cleared by the producer's finally) instead
    # of the view it retained inside the producer.
    late_check: LateCheck = "retained"
    # Segment completion and a failed send keep request-wide state.
    segment_keeps_state: bool = True
    failure_keeps_state: bool = True
