"""The producer stage's per-request bookkeeping that every chunk-transfer actor calls.

The adapter's ``record_send_failure``, its sender generations
(`statecore.models.sender_generation`) with ``cleanup_sender`` and
``_clear_sender_state_locked``, and the scheduler's ``finish_requests``.
"""

from __future__ import annotations

from collections.abc import Hashable
from typing import Any

from statecore import Outcome
from statecore.system import Handle, Tx

from .chunk_transfer_records import Owner, Shared
from .request_state import release_request_state
from .sender_generation import cleanup_sender, fire_sender


def record_send_failure(tx: Tx[Shared], request: Handle, *, state: bool = False) -> None:
    """``record_send_failure``; `state`: the request's own send failed (not a refusal)."""
    tx.put(failures=tx.g.failures | {request})
    tx.put(send_failures=tx.g.send_failures | {request})
    held = tx.handle("state", request.key)
    if state and held is not None:
        tx.fire(held, "send_failed")


def finish_requests(tx: Tx[Shared], request: Handle, *, isolate: bool) -> bool:
    """``finish_requests`` on the producer stage; whether it ended `request`.

    The request ends (unless it is over, or a new request took its id), the
    chunks it still has queued are owed to nobody (the cancelled generation
    discards them), and ``cleanup_sender`` runs for its external id. With
    `isolate` (the reference), a generation another request opened is left
    alone: one request's finish never cancels another's chunks.
    """
    ended = tx.fire(request, "abort").accepted
    if ended:
        settle(tx, request)
    token = tx.handle("sender", request.key)
    if isolate and token is not None and Owner(token, request) not in tx.g.owners:
        return ended
    if ended or token is not None:
        cleanup_sender(tx, request.key, clear_sender_state)
    return ended


def settle(tx: Tx[Shared], request: Handle) -> None:
    """`request` owes its consumer no chunk any more: it failed or was finished."""
    tx.put(owed=frozenset(o for o in tx.g.owed if o.request != request))


def fire_on_sender(tx: Tx[Shared], token: Handle, event: str, **payload: Any) -> Outcome:
    """Fire on a sender generation; reclaiming it pops the token and clears its state."""
    return fire_sender(tx, token, event, clear_sender_state, **payload)


def clear_sender_state(tx: Tx[Any], ext: Hashable) -> None:
    """``_clear_sender_state_locked``: pop ``put_req_chunk``, the watermarks and
    ``request_payload``."""
    tx.fire(("put_req_chunk", ext), "clear")
    tx.fire(("watermark", ext), "clear")
    release_request_state(tx, ext)


def by_generation(handle: Handle) -> tuple[int, str]:
    """Sort key: requests in the order they took their external id, then by id.

    The id breaks ties between requests of two ids with the same generation,
    so the sweep's order never depends on set iteration (or the hash seed).
    """
    return handle.generation, str(handle.key)
