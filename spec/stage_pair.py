"""Properties of the stage pair (`statecore.models.stage_pair`): stage N's sender,
the connector's keys, stage N+1's receiver, judged end to end.

``CTA`` is ``vllm_omni/distributed/omni_connectors/transfer_adapter/chunk_transfer_adapter.py``.
The globals they read are documented on the system; those judged here are
ghosts keyed by the request's generation (the n-th use of the external id,
the same on both stages): ``owed`` (chunks put successfully and not yet
committed by their own receiver, of a request not aborted or failed),
``terminals_put``, ``exhausted`` (the receiver committed its own finished
chunk), ``released`` (aborted or failed visibly on both stages),
``timed_out`` (the receiver met its input deadline) and ``crossed`` (a
receiver committed another request's chunk). The output
``committed(request, producer, chunk, kind)`` names the receiver's
incarnation, the producing request's generation and the chunk's ordinal
among that request's successful puts.
"""

from __future__ import annotations

from typing import Protocol

from statecore.properties import Property, always, eventually, monitor, sometimes
from statecore.system import StateView

from .receiver import chunk_order_monitor, route_committed

PAIR_OWN_CHUNKS = "pair_own_chunks"
PAIR_IN_ORDER = "pair_in_order"
PAIR_DELIVERED = "pair_delivered"
TERMINAL_RELEASES_RECEIVER = "terminal_releases_receiver"
FAILURE_RELEASES_RECEIVER = "failure_releases_receiver"


class Paired(Protocol):
    """The globals the properties read (fields of `statecore.models.stage_pair_records.Shared`)."""

    @property
    def owed(self) -> frozenset[tuple[int, int]]: ...
    @property
    def terminals_put(self) -> frozenset[int]: ...
    @property
    def exhausted(self) -> frozenset[int]: ...
    @property
    def released(self) -> frozenset[int]: ...
    @property
    def timed_out(self) -> frozenset[int]: ...
    @property
    def crossed(self) -> bool: ...


View = StateView[Paired]


def _own_chunks(v: View) -> bool:
    return not v.g.crossed


def _delivered(v: View) -> bool:
    return not v.g.owed


def _terminal_releases(v: View) -> bool:
    return v.g.terminals_put <= v.g.exhausted | v.g.released


def _no_deadline(v: View) -> bool:
    return not v.g.timed_out


def _terminal_delivered(v: View) -> bool:
    return bool(v.g.exhausted)


def _reused_id_delivered(v: View) -> bool:
    return any(gen >= 2 for gen in v.g.exhausted)


def _aborted_with_chunk_put(v: View) -> bool:
    return any(gen in v.g.released for gen in v.g.terminals_put)


def properties(chunks: int) -> tuple[Property, ...]:
    """The stage-pair properties, in report order; `chunks` bounds a receiver's commits."""
    return (
        always(
            PAIR_OWN_CHUNKS,
            "A receiver commits only chunks its own upstream request put: a request that "
            "reuses an external id never reads the keys an earlier one left.",
            _own_chunks,
            source="connector keys {ext}_{stage}_{chunk} (CTA:722, CTA:502); put_req_chunk and "
            "get_req_chunk restart at 0 for a new request (CTA:1029, CTA:947-966)",
        ),
        monitor(
            PAIR_IN_ORDER,
            "Each receiver commits its own upstream's successful puts in put order from the "
            "first, without gaps, and nothing after the finished one.",
            chunk_order_monitor(chunks),
            route_committed,
            source="put_req_chunk advances on a successful put only (CTA:853-860); "
            "get_req_chunk on a commit (CTA:561)",
        ),
        eventually(
            PAIR_DELIVERED,
            "At rest, every chunk a request put successfully has been committed by its "
            "receiver, unless the request was aborted or failed visibly on both stages.",
            _delivered,
            source="finished=True is the consumer's only end-of-stream signal; a chunk under "
            "a key the receiver never polls is never read",
        ),
        eventually(
            TERMINAL_RELEASES_RECEIVER,
            "At rest, a request whose terminal was put has its receiver upstream-exhausted "
            "(it committed the finished chunk), unless it was aborted first.",
            _terminal_releases,
            source="meta.finished (CTA:821-822) -> upstream_exhausted_requests (CTA:597-605)",
        ),
        always(
            FAILURE_RELEASES_RECEIVER,
            "No receiver is left to its input deadline: a failed or aborted sender releases "
            "it (cleanup_receiver) or fails it visibly.",
            _no_deadline,
            source="_log_failed_chunk_sends only logs (omni_scheduler_mixin.py:482-521); "
            "VLLM_OMNI_INPUT_WAIT_TIMEOUT_S",
        ),
        sometimes(
            "pair_terminal_delivered",
            "Some receiver commits its upstream's finished chunk.",
            _terminal_delivered,
            source=f"vacuity guard for {TERMINAL_RELEASES_RECEIVER}",
        ),
        sometimes(
            "pair_reused_id_delivered",
            "A request that reuses the external id is delivered to its end.",
            _reused_id_delivered,
            source=f"vacuity guard for {PAIR_OWN_CHUNKS}",
        ),
        sometimes(
            "pair_aborted_after_terminal_put",
            "A request is aborted after its terminal was put: its keys may outlive it.",
            _aborted_with_chunk_put,
            source=f"vacuity guard for {PAIR_OWN_CHUNKS} (a successful terminal skips the "
            "SHM cleanup, CTA:1014-1027)",
        ),
    )
