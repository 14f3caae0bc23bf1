"""Properties of one stream-edge recorder (`statecore.models.stream_edge`).

The recorder alone, with two directed edges, two segments and two events:
first write wins per (edge, segment, event), and nothing else. The globals
they read are documented on the system: ``recorded`` (every ``(edge, segment,
event)`` recorded so far), ``started`` (every ``(edge, segment)`` the
runtime started) and ``breaches`` (``fence``: a segment that is not its edge's
current one recorded; ``closed``: something recorded after close).

Every observation call - ``SegmentHandle.record`` through a handle,
``StreamEdgeRecorder.record`` by key - ends with one `OBSERVATION` output: the
segment it names, what the recorder showed when it arrived (the edge's
current segment, whether its event was already taken there, whether the
observation came from the instance that received it) and its answer
(``recorded``, ``dropped`` or, where production code raised, ``raised``). A
segment handle that stores a value emits ``recorded(event, elapsed_ms)``. The
monitors below judge those outputs; `once_only_monitor`, `route_recorded`,
`usable`, `current_observation_recorded` and
`rejected_observation_leaves_no_state` are shared with the request-lifecycle
spec.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Hashable, Mapping
from typing import TYPE_CHECKING, Any, cast

from statecore import Event, Field, Machine, State, Transition
from statecore.properties import Property, Route, always, monitor, sometimes
from statecore.system import Emitted, StateView

if TYPE_CHECKING:  # the model imports this spec: at run time the import would be a cycle
    from statecore.models.stream_edge import Shared

    View = StateView[Shared]

ONCE_ONLY = "once_only_events"
SEGMENTS_FENCED = "segments_fenced"
CLOSED_RECORDS_NOTHING = "closed_records_nothing"
TELEMETRY_NEVER_ADVANCES = "telemetry_never_advances"
CURRENT_RECORDED = "current_observation_recorded"
REJECTED_LEAVES_NOTHING = "rejected_observation_leaves_no_state"

OBSERVATION = "observation"
"""The output an observation call ends with (see the module docstring)."""
RECORDED, DROPPED, RAISED = "recorded", "dropped", "raised"
"""The answers of an observation call: True, False, or an exception."""

SOURCE = "vllm-omni PR for RFC #6472 (seed 004)"


def usable(elapsed_ms: object) -> bool:
    """Whether an elapsed time may be stored: a finite, non-negative number.

    The spec's own reading of the review's rule, deliberately not the model's
    ``valid_elapsed``: a model that stores a NaN, a negative or an infinite
    value fails here whatever it believes is valid.
    """
    if isinstance(elapsed_ms, bool) or not isinstance(elapsed_ms, (int, float)):
        return False
    return math.isfinite(elapsed_ms) and elapsed_ms >= 0


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


def nothing_excuses_a_breach(s: object, p: Mapping[str, Any]) -> bool:
    """A breach monitor's guard: no output routed to it is ever accepted."""
    return False


def breach_monitor(name: str) -> Machine:
    """A monitor that refuses every output routed to it: its router sends only breaches."""
    return Machine(
        name,
        doc="Refuses every output routed to it; the router routes only breaches, "
        "keyed by what went wrong.",
        states=[State("holds", initial=True)],
        events=[Event("breach", policy="reject", doc="an output that breaks the property")],
        transitions=[
            Transition(
                "holds",
                "breach",
                None,
                guard=nothing_excuses_a_breach,
            )
        ],
    )


def breaches(judge: Callable[[Emitted], str | None]) -> Route:
    """A router for `breach_monitor`: ``judge(output)`` names what it breaks, or None."""

    def route(emitted: Emitted) -> tuple[Hashable, str, Mapping[str, object]] | None:
        why = judge(emitted)
        return None if why is None else (why, "breach", {})

    return route


def _due(emitted: Emitted) -> str | None:
    """A valid first observation for the current segment of its own instance, dropped."""
    o = emitted.output
    if o.name != OBSERVATION or o.get("result") == RECORDED:
        return None
    due = (
        o.get("same")
        and o.get("current") == o.get("segment")
        and not o.get("taken")
        and usable(o.get("elapsed_ms"))
    )
    if not due:
        return None
    return f"a valid first observation of the current segment was {o.get('result')}"


def answered_recorded(s: object, p: Mapping[str, Any]) -> bool:
    """The observation call answered ``recorded``."""
    return bool(p["result"] == RECORDED)


def answered_dropped_or_raised(s: object, p: Mapping[str, Any]) -> bool:
    """The observation call answered ``dropped`` or raised."""
    return bool(p["result"] != RECORDED)


def answer_monitor() -> Machine:
    """One observation call: a stored value comes with a ``recorded`` answer, and only then."""
    return Machine(
        "answer_matches_store",
        doc="Pairs each value a segment stores with the answer of the call that stored it.",
        states=[
            State("idle", initial=True, doc="no call is storing"),
            State("storing", hot=True, doc="a value was stored; the answer must say recorded"),
        ],
        events=[
            Event("stored", policy="reject", doc="a segment handle stored a value"),
            Event(
                "answered",
                [Field("result", (RECORDED, DROPPED, RAISED))],
                policy="reject",
                doc="the observation call returned (or raised)",
            ),
        ],
        transitions=[
            Transition("idle", "stored", "storing"),
            Transition(
                "storing",
                "answered",
                "idle",
                guard=answered_recorded,
            ),
            Transition(
                "idle",
                "answered",
                None,
                guard=answered_dropped_or_raised,
            ),
        ],
    )


def route_answers(emitted: Emitted) -> tuple[Hashable, str, Mapping[str, object]] | None:
    """Route stored values and observation answers to one monitor key per system."""
    if emitted.output.name == "recorded" and emitted.source is not None:
        return "call", "stored", {}
    if emitted.output.name == OBSERVATION:
        return "call", "answered", {"result": emitted.output.get("result")}
    return None


def current_observation_recorded(source: str) -> Property:
    """Failing open never drops good telemetry (shared with the request-lifecycle spec)."""
    return monitor(
        CURRENT_RECORDED,
        "An observation for its own request instance's current segment, with a usable "
        "elapsed time and its event not yet recorded there, is recorded.",
        breach_monitor("current_recorded"),
        breaches(_due),
        source=source,
    )


def rejected_observation_leaves_no_state(source: str) -> Property:
    """An observation's answer is what it left (shared with the request-lifecycle spec)."""
    return monitor(
        REJECTED_LEAVES_NOTHING,
        "A dropped or raising observation stores no value, and a recorded one stores "
        "exactly one: an observation's answer is what it left behind.",
        answer_monitor(),
        route_answers,
        source=source,
    )


def _no_breach(kind: str) -> Callable[[View], bool]:
    def pred(v: View) -> bool:
        return kind not in v.g.breaches

    return pred


def _runtime_segments_only(v: View) -> bool:
    """On every edge the runtime started: its segments, and only its latest one live."""
    started = set(v.g.started)
    latest: dict[str, int] = {}
    for edge, segment in started:
        latest[edge] = max(latest.get(edge, segment), segment)
    held = set()
    for key, slot in v.instances("segment"):
        edge, segment = cast("tuple[str, int]", key)
        if edge not in latest or slot.snapshot is None:
            continue
        held.add(key)
        if slot.snapshot.state == "live" and segment != latest[edge]:
            return False
    return held == started


def _recorded_twice(v: View, *, same_edge: bool, same_segment: bool) -> bool:
    """Some event is recorded on two (edge, segment) pairs differing as asked."""
    rows = v.g.recorded
    for edge, segment, event in rows:
        for edge2, segment2, event2 in rows:
            if event2 != event or (edge2, segment2) == (edge, segment):
                continue
            if (edge2 == edge) == same_edge and (segment2 == segment) == same_segment:
                return True
    return False


def _two_events_on_one_segment(v: View) -> bool:
    rows = v.g.recorded
    return any(sum(1 for e2, s2, _ in rows if (e2, s2) == (e, s)) >= 2 for e, s, _ in rows)


def _live_handle_handed_out(v: View) -> bool:
    return any(
        (snap := v.snapshot("segment", key)) is not None and snap.state == "live"
        for key in v.g.started
    )


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
            "Arriving telemetry never advances an edge to a newer segment: on every edge the "
            "runtime started, the recorder holds exactly the segments it started, and only "
            "the latest one is live.",
            _runtime_segments_only,
            source=f"{SOURCE}, review point 2 and the author's RFC clarification",
        ),
        current_observation_recorded(
            f"{SOURCE}, review point 3: failing open must not drop a valid observation"
        ),
        rejected_observation_leaves_no_state(
            f"{SOURCE}: a rejected observation 'returns False' and changes nothing"
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
            _two_events_on_one_segment,
            source="vacuity guard: first write wins per event",
        ),
        sometimes(
            "live_handle_handed_out",
            "A producer holds a live segment handle the runtime handed out.",
            _live_handle_handed_out,
            source="vacuity guard: the producers' path through a handle",
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
