"""Properties of the request-lifecycle system (`statecore.models.request_lifecycle`).

Each property names the seed 004 review point it comes from (RFC #6472, the
once-only stream-edge event recorder owned by ``ClientRequestState``). The
globals they read are documented on the system:

``state_objects``  ``(request, kind)`` for every registered request instance
``owner``          ``(recorder/edge/segment handle, request it belongs to)``; a
                   producer may retain every segment handle handed out
``removed``        ``(request, path)``: who popped it, ``cleanup`` or ``abort``
``cleaned``        requests canonical cleanup ran for
``gauge``          the request count the running/waiting gauges last published
``consumed``       ids whose request state holds consumed metric message ids
``late_accepts``   requests whose recorder accepted an event after removal
``misattributed``  ``(observed instance, instance that recorded it)``

The answer of every observation call is an output (see
`statecore.spec.stream_edge`): ``observation(request, segment, current,
taken, same, elapsed_ms, result, reason)`` after the call, and
``recorded(event, elapsed_ms)`` from a segment handle that stored a value.
The fail-open properties judge those answers, with the spec's own reading of
a usable elapsed time (`statecore.spec.stream_edge.usable`); the ``sometimes``
guards below say that each situation they need is reachable.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

from statecore.spec.stream_edge import (
    DROPPED,
    OBSERVATION,
    ONCE_ONLY,
    RAISED,
    breach_monitor,
    breaches,
    current_observation_recorded,
    once_only_monitor,
    rejected_observation_leaves_no_state,
    route_recorded,
    usable,
)

from statecore.properties import Property, always, eventually, monitor, sometimes
from statecore.system import Emitted, Handle, StateView

if TYPE_CHECKING:  # the model imports this spec: at run time the import would be a cycle
    from statecore.models.request_lifecycle_records import Ownership, Shared

    View = StateView[Shared]

RECORD_FAIL_OPEN = "record_fail_open"
LATE_FAIL_OPEN = "late_observation_fail_open"
NO_LEAK = "no_leak_after_cleanup"
REQUESTS_DRAIN = "requests_drain"
RELEASES_RECORDER = "removal_releases_recorder"
RECORDER_OPEN = "recorder_open_while_registered"
GAUGES = "gauges_republished"
SIDE_TABLES = "side_tables_cleared"
CLOSED_OWNER_REJECTS = "closed_owner_rejects"
REUSE_ISOLATION = "reuse_isolation"

SOURCE = "vllm-omni PR for RFC #6472 (seed 004), review at head 9323594"
OMNI = "vllm-omni 0.30.0"


def live(v: View, handle: Handle) -> bool:
    """Whether `handle` names the instance that is live now (not removed, not stale)."""
    slot = v.slot(handle.component, handle.key)
    return slot.snapshot is not None and slot.generation == handle.generation


def kind_of(v: View, request: Handle) -> str | None:
    """The kind of state object registered for `request`."""
    for state_object in v.g.state_objects:
        if state_object.request == request:
            return state_object.kind
    return None


def registered(v: View) -> int:
    """How many request states ``request_states`` holds."""
    return sum(1 for _ in v.live("request"))


def _open_parts(v: View, request: Handle) -> list[Handle]:
    """The recorder, edges and segments of `request` still able to take something."""
    found = []
    for owned in v.g.owner:
        if owned.request != request or not live(v, owned.part):
            continue
        snap = v.slot(owned.part.component, owned.part.key).snapshot
        assert snap is not None
        if snap.state in ("open", "idle", "active", "live"):
            found.append(owned.part)
    return found


def _no_open_orphan(v: View) -> bool:
    """No recorder, edge or segment is open for a request that is no longer registered."""
    requests = {owned.request for owned in v.g.owner}
    return all(live(v, r) or not _open_parts(v, r) for r in requests)


def _recorders_open(v: View) -> bool:
    """Every registered request's recorder is open."""
    for owned in v.g.owner:
        part = owned.part
        if part.component == "recorder" and live(v, owned.request) and live(v, part):
            snap = v.slot("recorder", part.key).snapshot
            if snap is None or snap.state != "open":
                return False
    return True


def _gauge_current(v: View) -> bool:
    """The published gauge counts no request that has left request_states."""
    return v.g.gauge <= registered(v)


def _cleanup_ran(v: View) -> bool:
    return bool(v.g.cleaned)


def _cleanup_total(v: View) -> bool:
    return all(not live(v, r) for r in v.g.cleaned)


def _side_tables_clear(v: View) -> bool:
    return all(v.snapshot("request", x) is not None for x in v.g.consumed)


def _no_late_accepts(v: View) -> bool:
    return not v.g.late_accepts


def _none_misattributed(v: View) -> bool:
    return not v.g.misattributed


def _id_reused(v: View) -> bool:
    return any(slot.generation >= 2 for _, slot in v.instances("request"))


def retained(v: View) -> list[Ownership]:
    """``(segment handle, request)`` for every segment handle handed out."""
    return [owned for owned in v.g.owner if owned.part.component == "segment"]


def _retained_past_removal(v: View) -> bool:
    return any(not live(v, owned.request) for owned in retained(v))


def _stale_handle_retained(v: View) -> bool:
    """A producer holds a handle of an older instance while a newer one is registered."""
    for owned in retained(v):
        slot = v.slot("request", owned.request.key)
        if slot.snapshot is not None and slot.generation > owned.request.generation:
            return True
    return False


def _gauge_counts_a_request(v: View) -> bool:
    return v.g.gauge > 0


def _side_table_entry(v: View) -> bool:
    return bool(v.g.consumed)


def _sync_abort_with_recorder(v: View) -> bool:
    return any(r.path == "abort" and kind_of(v, r.request) == "client" for r in v.g.removed)


def _cleanup_of(kind: str) -> Callable[[View], bool]:
    """Whether canonical cleanup ran for a request with a state object of `kind`."""

    def cleaned(v: View) -> bool:
        return any(kind_of(v, r) == kind for r in v.g.cleaned)

    return cleaned


def _retained_states(v: View, *, recorded: bool = False) -> set[str]:
    """The states of the segment instances producers hold current handles to.

    ``live``, ``retired`` or ``closed``; with `recorded`, only live segments
    with some event already recorded.
    """
    found: set[str] = set()
    for owned in retained(v):
        if live(v, owned.part):
            snap = v.slot(owned.part.component, owned.part.key).snapshot
            assert snap is not None
            if not recorded or (snap.state == "live" and any(snap.values().values())):
                found.add(snap.state)
    return found


def _bad_or_raised_by_record(emitted: Emitted) -> str | None:
    o = emitted.output
    if o.name == "recorded" and not usable(o.get("elapsed_ms")):
        return "an unusable elapsed time was recorded"
    if o.name == OBSERVATION and o.get("result") == RAISED and o.get("reason") == "record":
        return "record() raised into the request"
    return None


def _late_not_dropped(emitted: Emitted) -> str | None:
    o = emitted.output
    if o.name != OBSERVATION or o.get("result") == DROPPED:
        return None
    current, segment = o.get("current"), o.get("segment")
    if current >= 0 and segment < current:
        return f"a late observation for an older segment was {o.get('result')}"
    return None


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
        monitor(
            RECORD_FAIL_OPEN,
            "record() never raises into a request: a NaN, negative or infinite elapsed time "
            "is dropped and returns False, and no such value is ever recorded.",
            breach_monitor("record_fail_open"),
            breaches(_bad_or_raised_by_record),
            source=f"{SOURCE}, point 3: 'return False for runtime conditions'; "
            "metrics/stats.py:335,369 swallow telemetry errors",
        ),
        monitor(
            LATE_FAIL_OPEN,
            "A late observation for an older segment is dropped: it is neither recorded nor "
            "raised into a request.",
            breach_monitor("late_fail_open"),
            breaches(_late_not_dropped),
            source=f"{SOURCE}, point 2: start_segment(key) per StageMetricsMessage raises "
            "ValueError for a retired segment (stream_edge.py:113-114)",
        ),
        current_observation_recorded(
            f"{SOURCE}, point 3: failing open must not drop a valid observation"
        ),
        rejected_observation_leaves_no_state(
            f"{SOURCE}, point 3: a rejected observation 'returns False' and changes nothing"
        ),
        always(
            NO_LEAK,
            "Canonical cleanup pops the request even when the state object lacks the release "
            "hook or the hook raises: nothing it calls can skip the pop.",
            _cleanup_total,
            when=_cleanup_ran,
            source=f"{SOURCE}, bot P1: release_stream_edge_metrics() first in the finally of "
            "_log_summary_and_cleanup (omni_base.py:452-458)",
        ),
        eventually(
            REQUESTS_DRAIN,
            "At rest no request state is left in request_states.",
            lambda v: registered(v) == 0,
            source=f"{SOURCE}, bot P1: the request leaks in request_states",
        ),
        always(
            RELEASES_RECORDER,
            "Every removal path (canonical cleanup and sync Omni.abort) closes the request's "
            "recorder, its edges and its segments: none stays open after its request.",
            _no_open_orphan,
            source=f"{SOURCE}, point 1: Omni.abort pops request_states directly (omni.py:222-228)",
        ),
        always(
            RECORDER_OPEN,
            "A registered request's recorder is open: only the request's removal closes it.",
            _recorders_open,
            source=f"{SOURCE}: the recorder is 'owned by ClientRequestState and released by "
            "canonical cleanup'",
        ),
        always(
            GAUGES,
            "Every removal path republishes the running/waiting gauges: the published count "
            "never includes a request that has left request_states.",
            _gauge_current,
            source=f"{OMNI} omni_base.py:451-456, _log_summary_and_cleanup: 'Republish gauges "
            "so any stale value ... is corrected after the pop'; Omni.abort (omni.py:222-228) "
            "pops without it",
        ),
        always(
            SIDE_TABLES,
            "Nothing kept per request outlives it on any removal path: the consumed metric "
            "message ids go with the request state.",
            _side_tables_clear,
            source=f"{OMNI} client_request_state.py:48-53: kept on the request state, not in "
            "a class-level dict, 'so it is released with the state' (#6462, #6561)",
        ),
        always(
            CLOSED_OWNER_REJECTS,
            "Once a request is removed, no retained handle or late observation is recorded for it.",
            _no_late_accepts,
            when=_retained_past_removal,
            source=f"{SOURCE}, point 1: 'a recorder kept past an aborted sync request "
            "still returns True'",
        ),
        always(
            REUSE_ISOLATION,
            "An observation for one request instance is never recorded on another instance "
            "that reused its id.",
            _none_misattributed,
            when=_id_reused,
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
            "gauge_counts_a_request",
            "The published gauges count a registered request.",
            _gauge_counts_a_request,
            source="vacuity guard for gauges_republished",
        ),
        sometimes(
            "side_table_entry",
            "A request state holds consumed metric message ids.",
            _side_table_entry,
            source="vacuity guard for side_tables_cleared",
        ),
        sometimes(
            "sync_abort_with_recorder",
            "Omni.abort removes a request that owns a recorder.",
            _sync_abort_with_recorder,
            source="vacuity guard for removal_releases_recorder",
        ),
        sometimes(
            "cleanup_of_duck_state",
            "Canonical cleanup runs on a duck-typed state without the release hook.",
            _cleanup_of("duck"),
            source="vacuity guard for no_leak_after_cleanup",
        ),
        sometimes(
            "cleanup_with_raising_hook",
            "Canonical cleanup runs on a state whose release hook raises.",
            _cleanup_of("raising"),
            source="vacuity guard for no_leak_after_cleanup",
        ),
    )
