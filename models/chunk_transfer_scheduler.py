"""The scheduler's actions in the chunk-transfer system.

``new_request``, ``save`` (``save_async`` for a chunk, a segment end or a
terminal), ``next_segment``, ``abort`` (``finish_requests``) and
``collect_failures`` (the sweep of recorded send failures each step).

`save` is the reference; the one thing 0.30.0 does differently when a
request reuses an external id is its `ReuseRule`: the reference refuses the
save visibly while the old generation lives
(`refuse_while_old_generation_lives`), 0.30.0 lets it join the old generation
and judges it against the old request's watermarks (`join_old_generation`).
"""

from __future__ import annotations

from collections.abc import Callable, Hashable
from typing import Any

from statecore.system import Handle, Tx

from .chunk_transfer_records import (
    CANCELLED,
    SEGMENT_END,
    TERMINAL,
    Owed,
    Owner,
    SaveCall,
    Shared,
    Task,
)
from .chunk_transfer_sender import (
    by_generation,
    finish_requests,
    fire_on_sender,
    record_send_failure,
    settle,
)

ReuseRule = Callable[[Tx[Shared], SaveCall, Handle | None], bool]
"""Whether a save may go on to the watermarks, given the id's sender generation (or None)."""


def scheduler_idle(tx: Tx[Shared]) -> None:
    """The scheduler is one thread: none of its steps runs while it is inside save_async."""
    tx.require(tx.g.saving is None)


def new_request(tx: Tx[Shared], ext: Hashable) -> None:
    """A request takes the external id; a reused id gets a new request generation."""
    scheduler_idle(tx)
    current = tx.snapshot(("request", ext))
    tx.require(current is None or current.state in ("terminal_saved", "aborted"))
    tx.spawn("request", ext)


def save(
    tx: Tx[Shared], ext: Hashable, *, kind: str, reuse: ReuseRule, before_lock: bool = False
) -> None:
    """``save_async``: the request saves a chunk, a segment end or its terminal.

    It is refused or skipped (`reuse`), skipped silently by the watermarks as
    a preemption replay, or queued for the save thread. With `before_lock`
    (0.30.0), a save that meets a generation the save thread may reclaim
    stops after its late check and stamp (`stamp_then_lock`).
    """
    scheduler_idle(tx)
    call = scheduler_saves(tx, ext, kind)
    token = tx.handle("sender", ext)
    if before_lock and _reclaimable(tx, call, token):
        stamp_then_lock(tx, call)
    elif reuse(tx, call, token) and watermark_admits(tx, call):
        queue_task(tx, call, token)


def stamp_then_lock(tx: Tx[Shared], call: SaveCall) -> None:
    """0.30.0's ``save_async`` up to the lock (CTA:412-446): the late check against the
    watermark as it is now, ``_segment_generation[ext] = generation``, then `save_locked`.

    Taken only where the save thread can reclaim the id's generation before
    the lock (`_reclaimable`); elsewhere nothing can run in between that the
    locked part reads, and the save is one step.
    """
    mark = ("watermark", call.request.key)
    if _late(tx.snapshot(mark), call.generation):
        tx.fire(mark, "save", **_save_payload(call))
        skip_silently(tx, call.request)
        return
    tx.fire(mark, "stamp", generation=call.generation)
    tx.put(saving=call)


def save_locked(tx: Tx[Shared]) -> None:
    """The rest of 0.30.0's ``save_async``, under the sender lock (CTA:447-492).

    The generation is read now: the one the late check met may be gone, its
    reclaim having popped the stamp and the token watermark; the locked part
    writes ``_segment_generation`` only for a segment end.
    """
    call = tx.g.saving
    tx.require(call is not None)
    assert call is not None
    tx.put(saving=None)
    ext = call.request.key
    if _cancelled(tx, ext):  # "previous sender generation is still draining"
        record_send_failure(tx, call.request)
        return
    mark = ("watermark", ext)
    watermark = tx.snapshot(mark)
    stamped = watermark is not None and watermark.expected is not None
    if watermark_admits(tx, call):
        if not stamped and call.kind != SEGMENT_END:
            tx.fire(mark, "unstamp")  # the stamp was popped in between
        queue_task(tx, call, tx.handle("sender", ext))


def _reclaimable(tx: Tx[Shared], call: SaveCall, token: Handle | None) -> bool:
    """Whether the save thread alone can cancel or reclaim the id's generation: one the
    saving request did not open (its own ends only by its terminal or an abort), or one
    already cancelled."""
    if token is None:
        return False
    return Owner(token, call.request) not in tx.g.owners or _cancelled(tx, call.request.key)


def scheduler_saves(tx: Tx[Shared], ext: Hashable, kind: str) -> SaveCall:
    """The request records the save; what the scheduler passes to ``save_async``."""
    request = tx.handle("request", ext)
    tx.require(request is not None)
    assert request is not None
    before = tx.snapshot(request)
    assert before is not None
    tx.require(tx.fire(request, kind).accepted)
    after = tx.snapshot(request)
    assert after is not None
    if kind == TERMINAL:
        tx.put(terminals=tx.g.terminals | {request})
    return SaveCall(
        request,
        kind,
        # A segment end carries the generation of the segment it ends.
        generation=before.ends if kind == SEGMENT_END else after.ends,
        tokens=after.tokens,
        segment=before.ends,
        number=before.saved,
    )


def refuse_while_old_generation_lives(tx: Tx[Shared], call: SaveCall, token: Handle | None) -> bool:
    """The reference: while a cancelled generation drains, or another request's
    generation holds the id, the save is refused visibly (a recorded send failure)."""
    request = call.request
    if _cancelled(tx, request.key) or (
        token is not None and Owner(token, request) not in tx.g.owners
    ):
        record_send_failure(tx, request)
        return False
    return True


def join_old_generation(tx: Tx[Shared], call: SaveCall, token: Handle | None) -> bool:
    """0.30.0: no identity check; a reused id's saves meet the old request's watermarks.

    A save older than the old request's segment generation is skipped
    silently ("Skip late save_async", CTA:412-430); one that passes is
    stamped, then rejected as a send failure while the old generation is
    cancelled but still draining; otherwise it joins the old generation.
    """
    mark = ("watermark", call.request.key)
    if _late(tx.snapshot(mark), call.generation):
        tx.fire(mark, "save", **_save_payload(call))
        skip_silently(tx, call.request)
        return False
    if _cancelled(tx, call.request.key):  # "previous sender generation is still draining"
        tx.fire(mark, "stamp", generation=call.generation)
        record_send_failure(tx, call.request)
        return False
    return True


def watermark_admits(tx: Tx[Shared], call: SaveCall) -> bool:
    """The watermarks admit the save, or skip it silently as a preemption replay."""
    admission = tx.fire(("watermark", call.request.key), "save", **_save_payload(call))
    if admission.outputs[0].name == "admitted":
        return True
    skip_silently(tx, call.request)
    return False


def queue_task(tx: Tx[Shared], call: SaveCall, token: Handle | None) -> None:
    """Queue the task under the id's sender generation, opening one if there is none."""
    request = call.request
    if token is None:
        token = tx.spawn("sender", request.key)
        tx.spawn("state", request.key)
        tx.put(owners=tx.g.owners | {Owner(token, request)})
    if call.kind == TERMINAL:
        fire_on_sender(tx, token, "save_terminal")
    else:  # admitted: the consumer is owed this chunk or segment end
        tx.put(owed=tx.g.owed | {Owed(request, call.number)})
    task = Task(token, request, call.kind, segment=call.segment, save=call.number)
    tx.append("queue", task)  # _pending_save_reqs.append(task)


def skip_silently(tx: Tx[Shared], request: Handle) -> None:
    """``save_async`` returns without queueing the save and without recording a failure."""
    tx.put(lost=tx.g.lost | {request})


def next_segment(tx: Tx[Shared], ext: Hashable) -> None:
    """A streaming update opens the next segment (``_omni_segment_generation += 1``)."""
    scheduler_idle(tx)
    request = tx.handle("request", ext)
    tx.require(request is not None and tx.fire(request, "next_segment").accepted)


def abort(tx: Tx[Shared], ext: Hashable, *, isolate: bool) -> None:
    """``finish_requests`` for the id's request, which runs ``cleanup_sender``."""
    scheduler_idle(tx)
    request = tx.handle("request", ext)
    tx.require(request is not None and finish_requests(tx, request, isolate=isolate))


def collect_failures(tx: Tx[Shared], *, isolate: bool) -> None:
    """The reference sweep: each recorded send failure fails its request visibly.

    The orchestrator ends the request on every stage (its consumer is owed
    nothing more): on this one, ``finish_requests``, and the consumer stage
    is told to finish it too.
    """
    collected = drain_send_failures(tx)
    already = tx.g.failed | tx.g.released
    for request in sorted(collected - already, key=by_generation):
        tx.put(failed=tx.g.failed | {request})
        settle(tx, request)
        finish_requests(tx, request, isolate=isolate)


def collect_failures_and_log(tx: Tx[Shared]) -> None:
    """0.30.0's ``_log_failed_chunk_sends``: each failure is only logged, so the
    consumer waits for its input deadline."""
    drain_send_failures(tx)


def drain_send_failures(tx: Tx[Shared]) -> frozenset[Handle]:
    """``collect_failed_send_request_ids()``: drain ``_send_failures`` (never empty here)."""
    scheduler_idle(tx)
    collected = tx.g.send_failures
    tx.require(collected)
    tx.put(send_failures=frozenset())
    return collected


def _cancelled(tx: Tx[Shared], ext: Hashable) -> bool:
    """The id's sender generation is cancelled (draining or retiring)."""
    token_state = tx.snapshot(("sender", ext))
    return token_state is not None and token_state.state in CANCELLED


def _save_payload(call: SaveCall) -> dict[str, Any]:
    """The ``save`` event of the watermark machine for one ``save_async`` call."""
    return {
        "kind": call.kind,
        "generation": call.generation,
        "confirmed": call.tokens,
        "counter": True,
    }


def _late(watermark: Any, generation: int) -> bool:
    """``generation < _segment_generation.get(ext, generation)`` (CTA:412-430)."""
    return bool(watermark.expected is not None and generation < watermark.expected)
