"""How a request state leaves ``request_states`` (seed 004).

The review's helper ``_drop_request_state`` (`statecore.models.implementations.stream_edge`
provides it as ``drop_request_state``), which both removal paths call: the
release hook through ``release_request_telemetry`` (errors logged), then the
pop and the republished gauges. `drop_request_state_unguarded` is the PR
head's (the hook called bare), `pop` 0.30.0's ``Omni.abort`` (the pop alone).
"""

from __future__ import annotations

from collections.abc import Callable

from statecore.system import Handle, Tx

from .request_lifecycle_recorder import edges_of, kind_of, owned, recorder_of, segments_of
from .request_lifecycle_records import Raised, Removal, Shared

RemovalCall = Callable[[Tx[Shared], Handle, str], bool]
"""A removal of a request on a path: False if the request cannot take it."""


def registered_count(tx: Tx[Shared]) -> int:
    """How many states request_states holds: what the running/waiting gauges publish."""
    return sum(1 for ext in tx.system.component("request").key_values if tx.live(("request", ext)))


def release_stream_edge_metrics(tx: Tx[Shared], request: Handle) -> None:
    """``req_state.release_stream_edge_metrics()``: closes the recorder, or raises."""
    if kind_of(tx, request) != "client":
        # AttributeError on a duck-typed state; the hook's own error on a raising one.
        raise Raised("release_stream_edge_metrics")
    recorder = recorder_of(tx, request)
    if recorder is None or not tx.fire(recorder, "close").accepted:
        return
    for edge in edges_of(tx, request):
        edge_handle = owned(tx, "edge", (request.key, edge), request)
        if edge_handle is not None:
            tx.fire(edge_handle, "close")
        for segment in segments_of(tx, request, edge):
            handle = owned(tx, "segment", (request.key, edge, segment), request)
            if handle is not None:
                tx.fire(handle, "close")


def release_request_telemetry(tx: Tx[Shared], request: Handle) -> None:
    """``release_request_telemetry(state)``: the hook if the state has one; errors logged."""
    try:
        release_stream_edge_metrics(tx, request)
    except Raised:
        pass  # logged; the removal goes on


def pop(tx: Tx[Shared], request: Handle, path: str) -> bool:
    """``request_states.pop(id)`` on `path`; False if the request cannot take it."""
    if not tx.fire(request, path).accepted:
        return False
    tx.retire(request)
    # What the state object holds per request goes with it.
    tx.put(consumed=tx.g.consumed - {request.key})
    tx.put(removed=tx.g.removed | {Removal(request, path)})
    return True


def pop_and_republish(tx: Tx[Shared], request: Handle, path: str) -> bool:
    """`pop`, then republish the gauges (``_log_summary_and_cleanup``'s ``finally``)."""
    popped = pop(tx, request, path)
    tx.put(gauge=registered_count(tx))  # republished after the pop
    return popped


def drop_request_state(tx: Tx[Shared], request: Handle, path: str) -> bool:
    """``drop_request_state``: release (errors logged), then pop and republish the gauges."""
    release_request_telemetry(tx, request)
    return pop_and_republish(tx, request, path)


def drop_request_state_unguarded(tx: Tx[Shared], request: Handle, path: str) -> bool:
    """The PR head: ``req_state.release_stream_edge_metrics()`` first, called bare.

    Its AttributeError (or the hook's own error) leaves the removal before the pop.
    """
    release_stream_edge_metrics(tx, request)
    return pop_and_republish(tx, request, path)


def remove(tx: Tx[Shared], removal: RemovalCall, request: Handle, path: str) -> bool:
    """Run a removal; an exception escaping it leaves what ran before it (and happened)."""
    try:
        return removal(tx, request, path)
    except Raised:
        return True
