"""Properties of the request-lifecycle system (`statecore.models.request_lifecycle`).

Each property names the seed 004 review point it comes from (RFC #6472, the
once-only stream-edge event recorder owned by ``ClientRequestState``). The
globals they read are documented on the system:

``state_objects``  ``(request, kind)`` for every registered request instance
``owner``          ``(recorder/edge/segment handle, request it belongs to)``; a
                   producer may retain every segment handle handed out
``removed``        ``(request, path)``: who popped it, ``cleanup`` or ``abort``
``cleaned``        requests canonical cleanup ran for
``republished``    requests whose cleanup popped them and republished gauges
``crashed``        ``(request, site)``: a telemetry call raised into the request
``late_accepts``   requests whose recorder accepted an event after removal
``misattributed``  ``(observed instance, instance that recorded it)``

Why an observation was refused is an output (``refused(request, reason)``),
not a global, so it does not multiply the state space; the ``sometimes``
guards below say that each situation a refusal needs is reachable.
"""

from __future__ import annotations

from statecore.spec.stream_edge import ONCE_ONLY, once_only_monitor, route_recorded

from statecore.properties import Predicate, Property, always, eventually, monitor, sometimes
from statecore.system import Handle, StateView

RECORD_FAIL_OPEN = "record_fail_open"
LATE_FAIL_OPEN = "late_observation_fail_open"
NO_LEAK = "no_leak_after_cleanup"
REQUESTS_DRAIN = "requests_drain"
RELEASES_RECORDER = "removal_releases_recorder"
CLOSED_OWNER_REJECTS = "closed_owner_rejects"
REUSE_ISOLATION = "reuse_isolation"

SOURCE = "vllm-omni PR for RFC #6472 (seed 004), review at head 9323594"


def live(v: StateView, handle: Handle) -> bool:
    """Whether `handle` names the instance that is live now (not removed, not stale)."""
    slot = v.slot(handle.component, handle.key)
    return slot.snapshot is not None and slot.generation == handle.generation


def kind_of(v: StateView, request: Handle) -> str | None:
    """The kind of state object registered for `request`."""
    for handle, kind in v.get("state_objects"):
        if handle == request:
            return str(kind)
    return None


def _no_open_orphan(v: StateView) -> bool:
    """Every open recorder belongs to a request that is still registered."""
    for handle, request in v.get("owner"):
        if handle.component != "recorder" or not live(v, handle):
            continue
        snap = v.slot(handle.component, handle.key).snapshot
        if snap is not None and snap.state == "open" and not live(v, request):
            return False
    return True


def _cleanup_total(v: StateView) -> bool:
    crashed = v.get("crashed")
    republished = v.get("republished")
    return all(
        not live(v, r) and r in republished and (r, "cleanup") not in crashed
        for r in v.get("cleaned")
    )


def retained(v: StateView) -> list[tuple[Handle, Handle]]:
    """``(segment handle, request)`` for every segment handle handed out."""
    return [(h, r) for h, r in v.get("owner") if h.component == "segment"]


def _retained_past_removal(v: StateView) -> bool:
    return any(not live(v, r) for _, r in retained(v))


def _stale_handle_retained(v: StateView) -> bool:
    """A producer holds a handle of an older instance while a newer one is registered."""
    for _, request in retained(v):
        slot = v.slot("request", request.key)
        if slot.snapshot is not None and slot.generation > request.generation:
            return True
    return False


def _retained_states(v: StateView, *, recorded: bool = False) -> set[str]:
    """The states of the segment instances producers hold current handles to.

    ``live``, ``retired`` or ``closed``; with `recorded`, only live segments
    with some event already recorded.
    """
    found: set[str] = set()
    for handle, _ in retained(v):
        if live(v, handle):
            snap = v.slot(handle.component, handle.key).snapshot
            assert snap is not None
            if not recorded or (snap.state == "live" and any(snap.values().values())):
                found.add(snap.state)
    return found


def _no_crash_at(site: str) -> Predicate:
    def pred(v: StateView) -> bool:
        return all(where != site for _, where in v.get("crashed"))

    return pred


def properties() -> tuple[Property, ...]:
    """The request-lifecycle properties, in the order reports list them."""
    return (
        monitor(
            ONCE_ONLY,
            "Each event of each segment instance is recorded at most once: the first write wins.",
            once_only_monitor(),
            route_recorded,
            source=f"{SOURCE}: 'typed, once-only event recording'",
        ),
        always(
            RECORD_FAIL_OPEN,
            "record() never raises into a request: a NaN, negative or infinite elapsed time "
            "is dropped and returns False.",
            _no_crash_at("record"),
            source=f"{SOURCE}, point 3: 'return False for runtime conditions'; "
            "metrics/stats.py:335,369 swallow telemetry errors",
        ),
        always(
            LATE_FAIL_OPEN,
            "A late observation for an older segment is dropped; it never raises into a request.",
            _no_crash_at("start_segment"),
            source=f"{SOURCE}, point 2: start_segment(key) per StageMetricsMessage raises "
            "ValueError for a retired segment (stream_edge.py:113-114)",
        ),
        always(
            NO_LEAK,
            "Canonical cleanup pops the request and republishes the gauges even when the state "
            "object lacks the release hook or the hook raises; it never raises itself.",
            _cleanup_total,
            when=lambda v: bool(v.get("cleaned")),
            source=f"{SOURCE}, bot P1: release_stream_edge_metrics() first in the finally of "
            "_log_summary_and_cleanup (omni_base.py:452-458)",
        ),
        eventually(
            REQUESTS_DRAIN,
            "At rest no request state is left in request_states.",
            lambda v: not any(True for _ in v.live("request")),
            source=f"{SOURCE}, bot P1: the request leaks in request_states",
        ),
        always(
            RELEASES_RECORDER,
            "Every removal path (canonical cleanup and sync Omni.abort) closes the request's "
            "recorder: no open recorder outlives its request.",
            _no_open_orphan,
            source=f"{SOURCE}, point 1: Omni.abort pops request_states directly (omni.py:222-228)",
        ),
        always(
            CLOSED_OWNER_REJECTS,
            "Once a request is removed, no retained handle or late observation is recorded for it.",
            lambda v: not v.get("late_accepts"),
            when=_retained_past_removal,
            source=f"{SOURCE}, point 1: 'a recorder kept past an aborted sync request "
            "still returns True'",
        ),
        always(
            REUSE_ISOLATION,
            "An observation for one request instance is never recorded on another instance "
            "that reused its id.",
            lambda v: not v.get("misattributed"),
            when=lambda v: any(slot.generation >= 2 for _, slot in v.instances("request")),
            source=f"{SOURCE}: author's revision 3, 'the channel must distinguish request "
            "instances across ID reuse'",
        ),
        sometimes(
            "observation_recorded",
            "Some observation is recorded.",
            lambda v: any(any(snap.values().values()) for _, snap in v.live("segment")),
            source="vacuity guard",
        ),
        sometimes(
            "recorded_handle_retained",
            "A producer holds a live handle whose event is already recorded (a duplicate).",
            lambda v: any(_retained_states(v, recorded=True)),
            source="vacuity guard for once_only_events",
        ),
        sometimes(
            "live_handle_retained",
            "A producer holds a live handle, which a bad elapsed time can reach.",
            lambda v: "live" in _retained_states(v),
            source="vacuity guard for record_fail_open",
        ),
        sometimes(
            "retired_handle_retained",
            "A producer holds the handle of a segment a newer segment retired.",
            lambda v: "retired" in _retained_states(v),
            source="vacuity guard for late_observation_fail_open and segment fencing",
        ),
        sometimes(
            "closed_handle_retained",
            "A producer holds a handle of a closed recorder.",
            lambda v: "closed" in _retained_states(v),
            source="vacuity guard for closed_owner_rejects",
        ),
        sometimes(
            "stale_handle_retained",
            "A producer holds a handle of an older instance while a newer one is registered.",
            _stale_handle_retained,
            source="vacuity guard for reuse_isolation",
        ),
        sometimes(
            "sync_abort_with_recorder",
            "Omni.abort removes a request that owns a recorder.",
            lambda v: any(
                path == "abort" and kind_of(v, r) == "client" for r, path in v.get("removed")
            ),
            source="vacuity guard for removal_releases_recorder",
        ),
        sometimes(
            "cleanup_of_duck_state",
            "Canonical cleanup runs on a duck-typed state without the release hook.",
            lambda v: any(kind_of(v, r) == "duck" for r in v.get("cleaned")),
            source="vacuity guard for no_leak_after_cleanup",
        ),
        sometimes(
            "cleanup_with_raising_hook",
            "Canonical cleanup runs on a state whose release hook raises.",
            lambda v: any(kind_of(v, r) == "raising" for r in v.get("cleaned")),
            source="vacuity guard for no_leak_after_cleanup",
        ),
    )
