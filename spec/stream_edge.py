"""Properties of one stream-edge recorder (`statecore.models.stream_edge`).

The recorder alone, with two directed edges, two segments and two events:
first write wins per (edge, segment, event), and nothing else. The globals
they read are documented on the system: ``recorded`` (every ``(edge, segment,
event)`` recorded so far), ``breaches`` (``fence``: a segment that is not its
edge's current one recorded; ``closed``: something recorded after close;
``advance``: arriving telemetry moved an edge to a newer segment).

`once_only_monitor` and `route_recorded` are shared with the request-lifecycle
spec: both systems emit ``recorded(event)`` from the segment handle that
accepted a write.
"""

from __future__ import annotations

from collections.abc import Hashable, Mapping

from statecore import Event, Machine, State, Transition
from statecore.properties import Predicate, Property, always, monitor, sometimes
from statecore.system import Emitted, StateView

ONCE_ONLY = "once_only_events"
SEGMENTS_FENCED = "segments_fenced"
CLOSED_RECORDS_NOTHING = "closed_records_nothing"
TELEMETRY_NEVER_ADVANCES = "telemetry_never_advances"

SOURCE = "vllm-omni PR for RFC #6472 (seed 004)"


def once_only_monitor() -> Machine:
    """One (segment instance, event): at most one accepted write."""
    return Machine(
        "once_only",
        doc="One (segment instance, event): at most one accepted write.",
        states=[State("unset", initial=True), State("set", final=True)],
        events=[Event("recorded", policy="reject")],
        transitions=[Transition("unset", "recorded", "set")],
    )


def route_recorded(emitted: Emitted) -> tuple[Hashable, str, Mapping[str, object]] | None:
    """Route ``recorded(event)`` by (the segment handle that emitted it, event)."""
    if emitted.output.name != "recorded" or emitted.source is None:
        return None
    return (emitted.source, emitted.output.get("event")), "recorded", {}


def _no_breach(kind: str) -> Predicate:
    def pred(v: StateView) -> bool:
        return kind not in v.get("breaches")

    return pred


def _recorded_twice(v: StateView, *, same_edge: bool, same_segment: bool) -> bool:
    """Some event is recorded on two (edge, segment) pairs differing as asked."""
    rows = v.get("recorded")
    for edge, segment, event in rows:
        for edge2, segment2, event2 in rows:
            if event2 != event or (edge2, segment2) == (edge, segment):
                continue
            if (edge2 == edge) == same_edge and (segment2 == segment) == same_segment:
                return True
    return False


def properties() -> tuple[Property, ...]:
    """The stream-edge properties, in the order reports list them."""
    return (
        monitor(
            ONCE_ONLY,
            "Each event of each segment instance is recorded at most once: the first write wins.",
            once_only_monitor(),
            route_recorded,
            source=f"{SOURCE}: 'typed, once-only event recording'",
        ),
        always(
            SEGMENTS_FENCED,
            "Only an edge's current segment records: a retired handle or an observation for "
            "another segment is dropped.",
            _no_breach("fence"),
            source=f"{SOURCE}: 'retired segment handles ... cannot accept late events'",
        ),
        always(
            CLOSED_RECORDS_NOTHING,
            "Once the recorder is closed nothing is recorded, through any handle or key.",
            _no_breach("closed"),
            source=f"{SOURCE}: 'closed request owners cannot accept late events'",
        ),
        always(
            TELEMETRY_NEVER_ADVANCES,
            "Arriving telemetry never advances an edge to a newer segment; only the runtime does.",
            _no_breach("advance"),
            source=f"{SOURCE}, review point 2 and the author's RFC clarification",
        ),
        sometimes(
            "event_on_two_edges",
            "One event is recorded for the same segment of two edges (edges are isolated).",
            lambda v: _recorded_twice(v, same_edge=False, same_segment=True),
            source="vacuity guard: first write wins per edge",
        ),
        sometimes(
            "event_on_two_segments",
            "One event is recorded on two segments of one edge (segments are isolated).",
            lambda v: _recorded_twice(v, same_edge=True, same_segment=False),
            source="vacuity guard: first write wins per segment",
        ),
        sometimes(
            "two_events_on_one_segment",
            "Two events are recorded on one segment (events are isolated).",
            lambda v: any(
                sum(1 for e2, s2, _ in v.get("recorded") if (e2, s2) == (e, s)) >= 2
                for e, s, _ in v.get("recorded")
            ),
            source="vacuity guard: first write wins per event",
        ),
        sometimes(
            "segment_retired",
            "An edge advances and its old segment handle retires.",
            lambda v: any(snap.state == "retired" for _, snap in v.live("segment")),
            source="vacuity guard for segments_fenced",
        ),
        sometimes(
            "closed_with_segments",
            "The recorder closes while segment handles are out.",
            lambda v: any(snap.state == "closed" for _, snap in v.live("segment")),
            source="vacuity guard for closed_records_nothing",
        ),
    )
