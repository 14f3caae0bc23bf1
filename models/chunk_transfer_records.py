"""The chunk-transfer system's configuration and the records its state is made of.

`ChunkTransferConfig` selects the behaviour (the defaults are the reference
statecore's spec asks for; `RELEASED_0_30_0` is vLLM-Omni 0.30.0 as
released). `Shared` is the system's globals, one field per global in the
order the state is laid out; `Task`, `InFlight` and `Put` are what the save
queue, the save thread and the connector hold.
"""

from __future__ import annotations

from collections.abc import Hashable
from dataclasses import dataclass
from typing import Annotated, Literal, NamedTuple

from statecore.system import Handle

PROCESSOR_OUTCOMES = ("payload", "none", "raise")
PUT_OUTCOMES = ("ok", "false", "raise")

CHUNK = "chunk"
SEGMENT_END = "segment_end"
TERMINAL = "terminal"

NAMESPACE = "codec"
"""The one ``request_payload`` namespace the modelled processor uses."""

ProcessorRaise = Literal["log", "record_and_skip", "record"]

CANCELLED = ("draining", "retiring")  # sender states with ``cancelled`` set


@dataclass(frozen=True)
class ChunkTransferConfig:
    """Behaviour switches; each names the vLLM-Omni code or review it comes from."""

    name: str = "chunk_transfer"
    ids: int = 1
    generations: int = 2
    saves: int = 1  # chunks and segment ends a request may save before its terminal
    segments: int = 1  # how many of those may be segment ends
    # cleanup_sender defers while a terminal is queued (fixed by vllm-omni #6670).
    defer_cleanup: bool = True
    # A put that returns False is recorded with record_send_failure (vllm-omni #4855).
    record_false_put: bool = True
    # A processor exception: "log" (0.30.0: only logged; a boundary still
    # sends an empty finish marker), "record_and_skip" (seed 000 as submitted:
    # record_send_failure, then return without a put), "record" (the review's
    # fix: the request fails visibly and a boundary still sends its marker).
    processor_raise: ProcessorRaise = "record"
    # The scheduler's sweep of recorded send failures fails each request
    # visibly (finish_requests on both stages); in 0.30.0
    # _log_failed_chunk_sends only logs them, so the consumer waits for its
    # input deadline.
    fail_on_send_failure: bool = True
    # A request reusing an external id gets its own sender generation and its
    # own watermarks, or is refused visibly while the old generation lives; in
    # 0.30.0 its saves are judged against the old request's watermarks, join
    # the old generation (no identity check on the request) and its processor
    # reads the old request's request_payload.
    isolate_reuse: bool = True
    # A queued segment end pops requests_num_chunks_sent (CTA:486).
    reset_tokens: bool = True
    # Segment-end post-processing keeps request_payload (CTA:902-909; seed 000:
    # "segment completion retains request-wide state").
    segment_keeps_state: bool = True
    # A connector key names the request instance (its sender generation) as
    # well as the external id and the chunk (seed 004: "the channel must
    # distinguish request instances across ID reuse"); 0.30.0's key is
    # "{ext}_{stage}_{chunk}" (CTA:777-778), and _clear_sender_state_locked
    # pops put_req_chunk (CTA:1031), so a request reusing the id starts again
    # at chunk 0, over the old request's unread puts.
    keys_per_instance: bool = True
    # save_async judges a save under the sender lock. 0.30.0 runs the late
    # check and writes _segment_generation before it takes the lock (CTA:412-447):
    # where the save thread can reclaim the id's generation in between (a
    # reused id's save meeting the old generation), the save is two steps,
    # `save_*` before the lock and `save_locked`, and the scheduler is inside
    # save_async between them.
    stamp_before_lock: bool = False
    processor_outcomes: tuple[str, ...] = PROCESSOR_OUTCOMES
    put_outcomes: tuple[str, ...] = PUT_OUTCOMES

    @property
    def max_tokens(self) -> int:
        """The largest confirmed token count a save reports (one token per save)."""
        return self.saves + 1


RELEASED_0_30_0 = ChunkTransferConfig(
    name="chunk_transfer_v0_30_0",
    processor_raise="log",
    fail_on_send_failure=False,
    isolate_reuse=False,
    keys_per_instance=False,
    stamp_before_lock=True,
)


class SaveCall(NamedTuple):
    """One ``save_async`` call as the scheduler makes it."""

    request: Handle
    kind: str
    generation: int  # the request's _omni_segment_generation the save carries
    tokens: int  # its confirmed_num_computed_tokens
    segment: int  # the segment it belongs to (a ghost the task carries)
    number: int  # how many saves of the request came before it (a ghost too)


class Task(NamedTuple):
    """A queued ``save_async`` task (an entry of ``_pending_save_reqs``).

    `segment` and `save` are ghosts for the properties; the wire carries only
    ``finished`` and ``is_segment_finished`` (both from `kind`).
    """

    sender: Handle  # the sender generation (``sender_token``) it was queued under
    request: Handle
    kind: str  # CHUNK, SEGMENT_END or TERMINAL
    segment: int  # the request's segment index when it was saved
    save: int  # how many saves of the request came before it


# Where the save thread is in the task it runs (`InFlight.phase`).
BEGUN = "begun"  # parked in the processor callback
PUTTING = "putting"  # parked in connector.put
FINISHING = "finishing"  # the send returned or raised; the finally has not run yet

# What a task in connector.put carries (`InFlight.detail` while PUTTING): the
# processor's payload, an empty marker (the processor returned None) or the
# same empty marker sent in place of a payload the processor raised on.
DATA, EMPTY, ERROR = "data", "empty", "error"
RAISED = "raised"  # `InFlight.detail` while FINISHING: connector.put raised


class InFlight(NamedTuple):
    """The task the save thread runs, and how far it got."""

    task: Task
    phase: str  # BEGUN, PUTTING or FINISHING
    detail: str | None  # PUTTING: DATA, EMPTY or ERROR; FINISHING: None or RAISED

    @property
    def put_returned(self) -> bool:
        """connector.put returned or raised: the task holds no copy of its save any more."""
        return self.phase == FINISHING


class Key(NamedTuple):
    """A connector key: ``{ext}_{stage}_{chunk}``, and the request instance it names.

    `instance` is the sender generation the put was made under where keys
    name the request instance (the reference), 0 where they do not (0.30.0).
    """

    ext: Hashable
    instance: int
    chunk: int  # put_req_chunk[ext] when the put was made


class Put(NamedTuple):
    """What the connector holds under `key` and the consumer reads."""

    request: Handle  # the request that produced it
    kind: str
    segment: int
    empty: bool  # a boundary's finish marker with no payload
    save: int
    key: Key


class Owner(NamedTuple):
    """A sender generation and the request whose save opened it."""

    sender: Handle
    request: Handle


class Owed(NamedTuple):
    """A save the consumer is owed: the request and its save number."""

    request: Handle
    save: int


class Made(NamedTuple):
    """A producer-state generation and the request whose processor made it."""

    state: Handle
    request: Handle


class Shared(NamedTuple):
    """The chunk-transfer system's globals (field order is the state layout)."""

    queue: Annotated[
        tuple[Task, ...],
        "_pending_save_reqs: FIFO of (token, request, kind, segment, save number)",
    ] = ()
    in_flight: Annotated[InFlight | None, "the task the save thread is running"] = None
    saving: Annotated[
        SaveCall | None,
        "the save_async call the scheduler is inside, between its late check and the lock",
    ] = None
    mailbox: Annotated[tuple[Put, ...], "puts the connector holds for the consumer"] = ()
    send_failures: Annotated[frozenset[Handle], "_send_failures: not yet collected"] = frozenset()
    failed: Annotated[
        frozenset[Handle],
        "requests the scheduler failed visibly, not yet finished on the consumer stage",
    ] = frozenset()
    received: Annotated[frozenset[Handle], "requests whose consumer got finished=True"] = (
        frozenset()
    )
    released: Annotated[frozenset[Handle], "requests whose consumer stage finished them"] = (
        frozenset()
    )
    timed_out: Annotated[frozenset[Handle], "requests whose consumer's deadline passed"] = (
        frozenset()
    )
    terminals: Annotated[frozenset[Handle], "requests whose terminal the scheduler saved"] = (
        frozenset()
    )
    owners: Annotated[frozenset[Owner], "(sender generation, request that opened it)"] = frozenset()
    failures: Annotated[frozenset[Handle], "ghost: requests with a recorded send failure"] = (
        frozenset()
    )
    owed: Annotated[frozenset[Owed], "ghost: (request, save number) the consumer is owed"] = (
        frozenset()
    )
    error_markers: Annotated[
        frozenset[Handle],
        "ghost: requests not failed visibly whose connector got a marker in place "
        "of a payload the processor raised on",
    ] = frozenset()
    lost: Annotated[frozenset[Handle], "requests a save of which was skipped silently"] = (
        frozenset()
    )
    made: Annotated[frozenset[Made], "(state generation, request whose processor made it)"] = (
        frozenset()
    )
    crossed: Annotated[bool, "ghost: a processor read another request's state"] = False
    overwritten: Annotated[
        frozenset[Handle],
        "ghost: requests a put of which, unread and still awaited, another put replaced "
        "under the same connector key",
    ] = frozenset()
    segment_done: Annotated[bool, "ghost: a segment completed with state held"] = False
