"""The segments system's actions: the scheduler, the save thread, the consumer.

The scheduler drives the `realtime_request` machine and asks the
`segment_watermark` machine to admit each save (``save_async``); an admitted
save is queued as a `Task` of the id's sender generation, opening one if there
is none (CTA:465-469). ``end_parked`` also finishes the request
(``finish_requests`` -> ``cleanup_sender``), which retires the generation. The
save thread puts the head of the queue (a terminal's put runs ``cleanup``,
which pops both watermarks and the generation) and the consumer reads the
connector keys in order. See `statecore.models.segment` for the
vLLM-Omni code each step mirrors.
"""

from __future__ import annotations

from collections.abc import Callable, Hashable
from typing import Any

from statecore import Snapshot, out
from statecore.system import Keys, Tx

from .segment_records import Shared, Task
from .segment_watermark import CHUNK, SEGMENT_END, TERMINAL

EXT = Keys("ext", 1)
"""The one external id."""

ACTIVE = "active"
RETIRED = "retired"
"""The sender generation's states (`Shared.sender`; None: the id has none)."""


def init(tx: Tx[Shared]) -> None:
    """The request and its watermark exist from the start."""
    for ext in EXT.values:
        tx.spawn("request", ext)
        tx.spawn("watermark", ext)


def admit(tx: Tx[Shared], ext: Hashable, kind: str, snap: Snapshot) -> bool:
    """``save_async``'s admission for a save of `snap`'s request; True if queued."""
    outcome = tx.fire(
        ("watermark", ext),
        "save",
        kind=kind,
        generation=snap.gen,
        confirmed=snap.tokens,
        counter=snap.counter,
    )
    return outcome.outputs[0].name == "admitted"


def enqueue(tx: Tx[Shared], task: Task, **ghosts: bool) -> None:
    """Queue `task` on the id's sender generation, opening one if there is none."""
    tx.put(queue=(*tx.g.queue, task), **ghosts)
    if tx.g.sender is None:
        tx.put(sender=ACTIVE)


# -- scheduler -------------------------------------------------------------------------


def scheduler_step(
    tx: Tx[Shared], ext: Hashable, event: str, kind: str | None, **payload: Any
) -> None:
    """Fire `event` on the request; a step that saves (`kind`) then calls ``save_async``."""
    handle = tx.handle("request", ext)
    tx.require(handle is not None)
    assert handle is not None
    before = tx.snapshot(handle)
    assert before is not None
    tx.require(tx.fire(handle, event, **payload).accepted)
    if kind is None:
        return
    after = tx.snapshot(handle)
    assert after is not None
    if admit(tx, ext, kind, after):
        enqueue(tx, Task(kind, segment=before.ends, late=False, step=after.tokens))
    else:
        tx.put(lost=True)  # a save of the request's own segment, dropped silently


def arrive(tx: Tx[Shared], ext: Hashable, counter: bool) -> None:
    scheduler_step(tx, ext, "arrive", None, counter=counter)


def chunk(tx: Tx[Shared], ext: Hashable) -> None:
    scheduler_step(tx, ext, "chunk", CHUNK)


def segment_end(tx: Tx[Shared], ext: Hashable) -> None:
    scheduler_step(tx, ext, "segment_end", SEGMENT_END)


def next_segment(tx: Tx[Shared], ext: Hashable, mode: str) -> None:
    scheduler_step(tx, ext, "next_segment", None, mode=mode)


def finish(tx: Tx[Shared], ext: Hashable) -> None:
    scheduler_step(tx, ext, "finish", TERMINAL)


def end_parked(tx: Tx[Shared], ext: Hashable) -> None:
    """``_finish_parked_streaming_session`` (MIX:926-943), one scheduler step.

    Taken only while the id has an active sender (``_adapter_owing_terminal``,
    MIX:912-924; otherwise ``add_request`` takes vLLM's abort path, not modelled).
    The bump and the forced terminal's ``save_async``, then
    ``finish_requests(FINISHED_STOPPED)``, whose adapter part runs
    ``cleanup_sender`` (CTA:977-1012): with the terminal queued it retires the
    generation and leaves the reclaim to the terminal; with the terminal
    dropped it reclaims at once, popping both watermarks and the generation.
    """
    tx.require(tx.g.sender == ACTIVE)
    scheduler_step(tx, ext, "end_parked", TERMINAL)
    if any(task.kind == TERMINAL for task in tx.g.queue):
        tx.put(sender=RETIRED)
        return
    for key in EXT.values:
        tx.fire(("watermark", key), "clear")
    tx.put(sender=None)


def late_save(tx: Tx[Shared], ext: Hashable) -> None:
    """A frame of the parked segment arrives late, at the request's (old) generation."""
    tx.require(not tx.g.late_issued)
    snap = tx.snapshot(("request", ext))
    tx.require(snap is not None and snap.state == "parked" and snap.counter)
    assert snap is not None
    tx.put(late_issued=True)
    if admit(tx, ext, CHUNK, snap):
        enqueue(
            tx, Task(CHUNK, segment=snap.ends - 1, late=True, step=snap.tokens), late_enqueued=True
        )


def preempted_rerun(tx: Tx[Shared], ext: Hashable) -> None:
    """A preempted request recomputes: a re-run step saves a chunk already sent.

    Its confirmed count is below the token watermark; the skip is the intended
    deduplication, not a loss, and nothing changes.
    """
    snap = tx.snapshot(("request", ext))
    tx.require(snap is not None and snap.state == "streaming" and snap.chunks >= 1)
    assert snap is not None
    outcome = tx.fire(
        ("watermark", ext),
        "save",
        kind=CHUNK,
        generation=snap.gen,
        confirmed=snap.tokens - 1,
        counter=snap.counter,
    )
    if outcome.outputs[0].name == "admitted":  # a duplicate goes out
        enqueue(tx, Task(CHUNK, segment=snap.ends, late=False, step=snap.tokens - 1))


# -- save thread and consumer ----------------------------------------------------------


def _put_head(tx: Tx[Shared], sends: Callable[[Shared, Task], bool]) -> None:
    """The save thread takes the head of the queue and puts it if `sends` says so."""
    queue = tx.g.queue
    tx.require(queue)
    task = queue[0]
    tx.put(queue=queue[1:])
    if not sends(tx.g, task):
        return  # "Discarding stale queued chunk" (CTA:710-714)
    if task.kind == TERMINAL:  # the put succeeded: cleanup pops the watermarks and generation
        for ext in EXT.values:
            tx.fire(("watermark", ext), "clear")
        tx.put(sender=None)
    tx.put(mailbox=(*tx.g.mailbox, task))


def send(tx: Tx[Shared]) -> None:
    """The save thread puts the head of the queue; a retired generation still sends
    what was queued before its terminal (the fence covers the whole generation)."""
    _put_head(tx, lambda g, task: g.sender is not None)


def send_0_30_0(tx: Tx[Shared]) -> None:
    """0.30.0: a retired generation sends only its terminal (CTA:697-714: ``cancelled``
    vetoes every queued chunk but the terminal), so what the scheduler queued before
    the terminal is discarded."""
    _put_head(
        tx, lambda g, task: g.sender == ACTIVE or (g.sender == RETIRED and task.kind == TERMINAL)
    )


def receive(tx: Tx[Shared]) -> None:
    """The consumer reads the next key."""
    mailbox = tx.g.mailbox
    tx.require(mailbox)
    task = mailbox[0]
    tx.put(mailbox=mailbox[1:])
    tx.emit(out("received", kind=task.kind, segment=task.segment, late=task.late, step=task.step))
    if task.kind == SEGMENT_END:
        tx.put(seen_ends=tx.g.seen_ends + 1)
    elif task.kind == TERMINAL:
        tx.put(seen_end=True)
