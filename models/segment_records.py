"""What the segments system's state is made of: the queued task and the globals.

`Task` is one save ``save_async`` queued; `Shared` is the system's globals,
one field per global in the order the state is laid out.
"""

from __future__ import annotations

from typing import Annotated, NamedTuple


class Task(NamedTuple):
    """A queued save: its kind, and ghosts for the properties.

    The wire carries only ``finished`` and ``is_segment_finished`` (the kind);
    the segment index it belongs to, whether it is the late save and the step
    it saves (the confirmed token count of the scheduler step) let the
    consumer's reads be judged segment by segment and step by step.
    """

    kind: str
    segment: int
    late: bool
    step: int


class Shared(NamedTuple):
    """The segments system's globals."""

    queue: Annotated[
        tuple[Task, ...], "_pending_save_reqs: FIFO of Task (kind, segment, late, step)"
    ] = ()
    mailbox: Annotated[tuple[Task, ...], "keys put and not yet read by the consumer, in order"] = ()
    seen_ends: Annotated[int, "segment ends the consumer has read"] = 0
    seen_end: Annotated[bool, "the consumer has read the request end"] = False
    lost: Annotated[bool, "ghost: save_async dropped a save of the open segment"] = False
    late_issued: Annotated[bool, "ghost: the late save was issued"] = False
    late_enqueued: Annotated[bool, "ghost: the late save was queued"] = False
    sender: Annotated[
        str | None,
        "_sender_tokens[ext]: None (none), 'active', or 'retired' (cancelled by cleanup_sender "
        "with a terminal queued, which then reclaims it)",
    ] = None
