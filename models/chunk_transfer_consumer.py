"""The consumer stage of the chunk-transfer system: it reads puts, is released, or times out."""

from __future__ import annotations

from collections.abc import Hashable

from statecore import out
from statecore.system import Handle, Tx

from .chunk_transfer_records import SEGMENT_END, TERMINAL, Owed, Shared
from .chunk_transfer_sender import by_generation


def receive(tx: Tx[Shared]) -> None:
    """The consumer takes the next put from the connector."""
    mailbox = tx.g.mailbox
    tx.require(mailbox)
    item = mailbox[0]
    tx.put(mailbox=mailbox[1:])
    finished = item.kind == TERMINAL
    tx.emit(
        out(
            "received",
            request=item.request,
            finished=finished,
            segment_finished=item.kind == SEGMENT_END,
            segment=item.segment,
            empty=item.empty,
        )
    )
    if finished:
        tx.put(received=tx.g.received | {item.request})
    else:
        tx.put(owed=tx.g.owed - {Owed(item.request, item.save)})


def release(tx: Tx[Shared], ext: Hashable) -> None:
    """The consumer stage's ``finish_requests`` for a request the orchestrator failed.

    Its consumer stops waiting for input.
    """
    pending = frozenset(r for r in tx.g.failed if r.key == ext)
    tx.require(pending)
    tx.put(failed=tx.g.failed - pending)
    tx.put(error_markers=tx.g.error_markers - pending)
    for request in sorted(pending, key=by_generation):
        tx.put(released=tx.g.released | {request})
        tx.emit(out("released", request=request))


def deadline(tx: Tx[Shared], ext: Hashable) -> None:
    """The consumer stage's ``_process_pending_chunk_timeouts``.

    A request whose producer saved its terminal and that still waits for
    input is failed after ``VLLM_OMNI_INPUT_WAIT_TIMEOUT_S`` (600 s). That
    outlasts every other step, so it passes only when nothing for the
    request is left.
    """
    over = tx.g.received | tx.g.released | tx.g.timed_out
    starved = frozenset(r for r in tx.g.terminals - over if r.key == ext and not in_progress(tx, r))
    tx.require(starved)
    tx.put(timed_out=tx.g.timed_out | starved)


def in_progress(tx: Tx[Shared], request: Handle) -> bool:
    """Whether something for `request` is left to run: a task, a put, a failure to act on."""
    flight = tx.g.in_flight
    return (
        any(task.request == request for task in tx.g.queue)
        or (flight is not None and flight.task.request == request)
        or any(item.request == request for item in tx.g.mailbox)
        or request in tx.g.send_failures
        or request in tx.g.failed
    )
