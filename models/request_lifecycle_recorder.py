"""The stream-edge recorder as the request-lifecycle system calls it (seed 004).

Each function is one call of RFC #6472's ``StreamEdgeRecorder`` (or of the
transport handler around it) on the recorder a request instance owns, made
through the transaction of the step that calls it: ``start_segment``,
routing an observation by key, ``SegmentHandle.record``, and what the
recorder shows an arriving observation. `statecore.models.request_lifecycle`
composes them into actions.
"""

from __future__ import annotations

from collections.abc import Hashable
from typing import cast

from statecore import TransitionError, out
from statecore.errors import ActionError
from statecore.system import Handle, Tx

from .request_lifecycle_records import (
    DROPPED,
    RAISED,
    RECORDED,
    Answer,
    Arrival,
    Misattribution,
    Ownership,
    Raised,
    Shared,
)
from .stream_edge import Current, segment_order

WriteTarget = Handle | tuple[str, Hashable]
"""What a call fires at: a handle (one instance) or ``(component, key)`` (whichever is live)."""


def own(tx: Tx[Shared], part: Handle, request: Handle) -> None:
    """Note that the recorder, edge or segment `part` belongs to `request`."""
    tx.put(owner=tx.g.owner | {Ownership(part, request)})


def owned(tx: Tx[Shared], component: str, key: Hashable, request: Handle) -> Handle | None:
    """The live instance of (`component`, `key`) if it belongs to `request`."""
    handle = tx.handle(component, key)
    if handle is not None and Ownership(handle, request) in tx.g.owner:
        return handle
    return None


def owner_of(tx: Tx[Shared], part: Handle) -> Handle:
    """The request instance the recorder, edge or segment `part` belongs to."""
    return next(o.request for o in tx.g.owner if o.part == part)


def recorder_of(tx: Tx[Shared], request: Handle) -> Handle | None:
    """``getattr(state, "stream_edge_events", None)``: `request`'s recorder, if it has one."""
    return owned(tx, "recorder", request.key, request)


def kind_of(tx: Tx[Shared], request: Handle) -> str | None:
    """The kind of state object registered for `request`."""
    for state_object in tx.g.state_objects:
        if state_object.request == request:
            return state_object.kind
    return None


def edges_of(tx: Tx[Shared], request: Handle) -> list[str]:
    """The edges a recorder of `request` may have (the system's bound), in order."""
    keys = cast("tuple[tuple[Hashable, str], ...]", tx.system.component("edge").key_values)
    return [edge for ext, edge in keys if ext == request.key]


def segments_of(tx: Tx[Shared], request: Handle, edge: str) -> list[int]:
    """The segments `request`'s `edge` may have (the system's bound), in order."""
    keys = cast("tuple[tuple[Hashable, str, int], ...]", tx.system.component("segment").key_values)
    return [segment for ext, e, segment in keys if ext == request.key and e == edge]


def current(tx: Tx[Shared], request: Handle, edge: str) -> Current | None:
    """The current segment of `request`'s `edge`: its live segment handle."""
    for segment in segments_of(tx, request, edge):
        handle = owned(tx, "segment", (request.key, edge, segment), request)
        snap = tx.snapshot(handle) if handle is not None else None
        if handle is not None and snap is not None and snap.state == "live":
            return Current(segment, handle)
    return None


def start_segment(tx: Tx[Shared], request: Handle, edge: str, segment: int) -> Handle | None:
    """``recorder.start_segment(edge, segment)``: a handle, or None (dropped)."""
    recorder = recorder_of(tx, request)
    if recorder is None:
        return None
    edge_handle = owned(tx, "edge", (request.key, edge), request)
    if edge_handle is None:
        if not tx.fire(recorder, "open_edge").accepted:
            return None
        edge_handle = tx.spawn("edge", (request.key, edge))
        own(tx, edge_handle, request)
    cur = current(tx, request, edge)
    order = segment_order(segment, None if cur is None else cur.segment)
    try:
        started = tx.fire(edge_handle, "start_segment", order=order).accepted
    except ActionError as exc:  # the PR's start_segment raises for an older segment
        if not isinstance(exc.__cause__, TransitionError):
            raise
        raise Raised("start_segment") from exc
    if not started:
        return None
    if order == "same":
        assert cur is not None
        return cur.handle
    if cur is not None:
        tx.fire(cur.handle, "retire")
    handle = tx.spawn("segment", (request.key, edge, segment))
    own(tx, handle, request)
    return handle


def route(tx: Tx[Shared], request: Handle, edge: str, segment: int) -> tuple[Handle | None, str]:
    """Where ``record(key, segment, ...)`` writes: the current segment, or why not.

    The review's transport handler: it records by key, so arriving telemetry
    never starts or advances a segment.
    """
    edge_handle = owned(tx, "edge", (request.key, edge), request)
    if edge_handle is None:
        return None, "no_edge"  # telemetry never opens an edge
    cur = current(tx, request, edge)
    order = segment_order(segment, None if cur is None else cur.segment)
    if tx.fire(edge_handle, "observe", order=order).accepted:
        assert cur is not None
        return cur.handle, ""
    edge_snap = tx.snapshot(edge_handle)
    if edge_snap is not None and edge_snap.state == "closed":
        return None, "closed"
    return None, "late" if order == "older" else "not_started"


def start_per_message(
    tx: Tx[Shared], request: Handle, edge: str, segment: int
) -> tuple[Handle | None, str]:
    """Where the PR's transport handler writes: ``start_segment(key)`` for each message."""
    return start_segment(tx, request, edge, segment), "closed"


def arrival(tx: Tx[Shared], request: Handle, edge: str, event: str) -> Arrival:
    """What `request`'s recorder shows an arriving observation of `event` on `edge`."""
    cur = current(tx, request, edge)
    if cur is None:
        return Arrival(-1, False)
    snap = tx.snapshot(cur.handle)
    return Arrival(cur.segment, snap is not None and bool(getattr(snap, event)))


def observe(
    tx: Tx[Shared], observed: Handle, target: WriteTarget, event: str, elapsed: float
) -> Answer:
    """``handle.record(event, elapsed)`` for an observation of `observed`: its answer."""
    snap = tx.snapshot(target)
    try:
        outcome = tx.fire(target, "record", event=event, elapsed_ms=elapsed)
    except ValueError as exc:  # the PR head validates by raising
        raise Raised("record") from exc
    if outcome.accepted:
        accepting = target if isinstance(target, Handle) else tx.handle(*target)
        assert accepting is not None
        owner = owner_of(tx, accepting)
        if owner != observed:
            tx.put(misattributed=tx.g.misattributed | {Misattribution(observed, owner)})
        if not tx.live(owner):
            tx.put(late_accepts=tx.g.late_accepts | {owner})
        return Answer(RECORDED)
    if snap is None:
        return Answer(DROPPED, "stale_instance")
    if snap.state != "live":
        return Answer(DROPPED, snap.state)  # retired or closed
    return Answer(DROPPED, "duplicate" if getattr(snap, event) else "bad_elapsed")


def raised_into(tx: Tx[Shared], request: Handle, exc: Raised) -> Answer:
    """A telemetry call raised into the stage serving `request`: the request fails."""
    tx.fire(request, "fail")
    return Answer(RAISED, exc.call)


def answer(
    tx: Tx[Shared],
    observed: Handle,
    segment: int,
    arrived: Arrival,
    same: bool,
    elapsed: float,
    answered: Answer,
) -> None:
    """The ``observation`` output an observation call ends with."""
    tx.emit(
        out(
            "observation",
            request=observed,
            segment=segment,
            current=arrived.current,
            taken=arrived.taken,
            same=same,
            elapsed_ms=elapsed,
            result=answered.result,
            reason=answered.reason,
        )
    )
