"""Properties of the segments system (`statecore.models.segment`).

Each property names the vLLM-Omni 0.30.0 code it comes from (paths relative to
``vllm_omni/``; ``CTA`` is the chunk transfer adapter). The globals they read
are documented on the system: ``seen_ends`` / ``seen_end`` (what the consumer
has read), ``lost`` (``save_async`` silently dropped a save of the request's
open segment), ``late_issued`` / ``late_enqueued`` (the late save for an old
segment generation was issued / queued). The consumer's outputs
``received(kind, segment, late, step)`` carry ghosts the wire does not carry:
the index of the segment each key belongs to, whether it is the late save, and
the step it saves (the confirmed token count the save reported).
"""

from __future__ import annotations

from collections.abc import Callable, Hashable, Mapping
from typing import Any, Protocol

from statecore import Event, Field, Machine, Snapshot, State, Transition, Var
from statecore.properties import Property, always, eventually, monitor, sometimes
from statecore.system import Emitted, StateView

SEGMENT_ORDER = "segment_order"
LATE_SAVE_DROPPED = "late_save_dropped"
NO_CURRENT_SAVE_DROPPED = "no_current_save_dropped"
REQUEST_END_AFTER_SEGMENTS = "request_end_after_segments"
REQUEST_END_DELIVERED = "request_end_delivered"
STEPS_READ_ONCE = "steps_read_once"
WATERMARKS_CLEARED = "watermarks_cleared"

SAVE_ASYNC = "chunk_transfer_adapter.py save_async (CTA:370-492)"

Payload = Mapping[str, Any]


class Consumed(Protocol):
    """The globals the properties read (fields of `statecore.models.segment.Shared`)."""

    @property
    def seen_ends(self) -> int: ...
    @property
    def seen_end(self) -> bool: ...
    @property
    def lost(self) -> bool: ...
    @property
    def late_issued(self) -> bool: ...
    @property
    def late_enqueued(self) -> bool: ...


View = StateView[Consumed]


def segment_stream_monitor(segments: int = 3, *, abortable: bool = False) -> Machine:
    """What one request's consumer may read: segment by segment, then the request end.

    ``abortable=True`` is for a system with cancellation and send failures:
    the request end may arrive while segments are still open
    (``cleanup_sender`` discards an aborted request's queued chunks and
    segment ends, but not its terminal), and a ``released`` event (the
    request failed visibly, its consumer was released) ends the judgement.
    """
    indices = range(segments + 1)
    return Machine(
        "segment_stream",
        doc="Chunks of the open segment, its end, the next segment, ..., then the request "
        "end, then nothing.",
        states=[
            State("streaming", initial=True, doc="reading the segment `current`"),
            State("ended", final=True, doc="the request end was read"),
            *([State("failed", doc="failed visibly: nothing more is judged")] if abortable else []),
        ],
        variables=[Var("current", range(segments + 2), 0, doc="the segment being read")],
        events=[
            Event("chunk", [Field("segment", indices)], policy="reject"),
            Event("segment_end", [Field("segment", indices)], policy="reject"),
            Event("request_end", [Field("segment", indices)], policy="reject"),
            *([Event("released", policy="ignore")] if abortable else []),
        ],
        transitions=[
            Transition("streaming", "chunk", None, guard=of_the_open_segment),
            Transition(
                "streaming",
                "segment_end",
                None,
                guard=of_the_open_segment,
                effect=next_segment,
            ),
            Transition(
                "streaming",
                "request_end",
                "ended",
                guard=of_the_open_segment_or_later if abortable else after_every_segment_end,
            ),
            *(_released_transitions() if abortable else []),
        ],
    )


def of_the_open_segment(s: Snapshot, p: Payload) -> bool:
    """The key belongs to the segment being read."""
    return bool(p["segment"] == s.current)


def next_segment(s: Snapshot, p: Payload) -> dict[str, Any]:
    """The open segment's end was read: the next one is open."""
    return {"current": s.current + 1}


def after_every_segment_end(s: Snapshot, p: Payload) -> bool:
    """The request end comes after every earlier segment's end."""
    return bool(p["segment"] == s.current)


def of_the_open_segment_or_later(s: Snapshot, p: Payload) -> bool:
    """Cut short: the request end of the open segment or a later one."""
    return bool(p["segment"] >= s.current)


def _released_transitions() -> list[Transition]:
    """A visibly failed request's consumer is released: whatever comes later is moot."""
    return [
        Transition("streaming", "released", "failed"),
        *(Transition("failed", e, None) for e in ("chunk", "segment_end", "request_end")),
    ]


_EVENTS = {"chunk": "chunk", "segment_end": "segment_end", "terminal": "request_end"}


def route_received(emitted: Emitted) -> tuple[Hashable, str, Mapping[str, object]] | None:
    """Route the consumer's ``received(kind, segment)`` to the request's monitor."""
    output = emitted.output
    if output.name != "received":
        return None
    return "request", _EVENTS[str(output.get("kind"))], {"segment": output.get("segment")}


def step_order_monitor(max_tokens: int = 6) -> Machine:
    """The steps one segment's keys carry, as the consumer reads them: each a later one."""
    return Machine(
        "step_order",
        doc="Within a segment, each key the consumer reads carries a later step (confirmed "
        "token count) than the one before: no step is read twice.",
        states=[State("reading", initial=True, doc="`last` is the latest step read")],
        variables=[Var("last", (None, *range(max_tokens + 1)), None, doc="None: nothing yet")],
        events=[Event("key", [Field("step", range(max_tokens + 1))], policy="reject")],
        transitions=[Transition("reading", "key", None, guard=a_later_step, effect=last_step)],
    )


def a_later_step(s: Snapshot, p: Payload) -> bool:
    """The key carries a later step than the last one read (or is the first)."""
    return bool(s.last is None or p["step"] > s.last)


def last_step(s: Snapshot, p: Payload) -> dict[str, Any]:
    """Remember the step just read."""
    return {"last": p["step"]}


def route_steps(emitted: Emitted) -> tuple[Hashable, str, Mapping[str, object]] | None:
    """Route a received key, late saves aside, to the monitor of its segment."""
    output = emitted.output
    if output.name != "received" or output.get("late"):
        return None  # a late save is late_save_dropped's business
    return ("request", output.get("segment")), "key", {"step": output.get("step")}


def _watermarks_cleared(v: View) -> bool:
    """The id holds neither watermark (both popped by the terminal's cleanup)."""
    return all(snap.expected is None and snap.sent is None for _, snap in v.live("watermark"))


def _counter_from_arrival(v: View) -> bool:
    return any(
        snap.state == "parked" and snap.counter and snap.gen == 0 for _, snap in v.live("request")
    )


def _rerun_possible(v: View) -> bool:
    return any(snap.state == "streaming" and snap.chunks >= 1 for _, snap in v.live("request"))


def _end_after_segments(v: View) -> bool:
    """The consumer read as many segment ends as the scheduler saved."""
    return all(snap.ends == v.g.seen_ends for _, snap in v.live("request"))


def _end_delivered(v: View) -> bool:
    ended = any(snap.state == "ended" for _, snap in v.live("request"))
    return v.g.seen_end or not ended


def _resumed_without_counter(v: View) -> bool:
    return any(
        snap.state == "streaming" and not snap.counter and snap.ends >= 1
        for _, snap in v.live("request")
    )


def _late_save_not_queued(v: View) -> bool:
    return not v.g.late_enqueued


def _late_save_issued(v: View) -> bool:
    return v.g.late_issued


def _nothing_lost(v: View) -> bool:
    return not v.g.lost


def _request_end_read(v: View) -> bool:
    return v.g.seen_end


def _every_segment_then_end(segments: int) -> Callable[[View], bool]:
    def every_segment_then_end(v: View) -> bool:
        return v.g.seen_end and v.g.seen_ends == segments

    return every_segment_then_end


def properties(segments: int = 3, max_tokens: int = 6) -> tuple[Property, ...]:
    """The segments properties, in the order reports list them."""
    return (
        monitor(
            SEGMENT_ORDER,
            "The consumer reads each segment's chunks, then its end, segments in order, "
            "then the request end, and nothing after it.",
            segment_stream_monitor(segments),
            route_received,
            source="meta.is_segment_finished vs meta.finished (CTA:409, ARS:656-676); "
            "request-global connector keys (put_req_chunk)",
        ),
        always(
            LATE_SAVE_DROPPED,
            "A late save_async for an old segment generation is dropped: it never reaches "
            "the consumer.",
            _late_save_not_queued,
            when=_late_save_issued,
            source=f"{SAVE_ASYNC}: 'Skip late save_async' (CTA:421-429); the +1 at a "
            "segment end (CTA:474-483)",
        ),
        always(
            NO_CURRENT_SAVE_DROPPED,
            "save_async never silently drops a chunk, segment end or request end of the "
            "request's open segment.",
            _nothing_lost,
            source="#6816 (CTA:476-485); MIX:929-933; the token watermark reset (CTA:486)",
        ),
        always(
            REQUEST_END_AFTER_SEGMENTS,
            "The consumer reads the request end only after every segment end the scheduler saved.",
            _end_after_segments,
            when=_request_end_read,
            source="_finish_parked_streaming_session (MIX:926-943); ARS:656-676",
        ),
        eventually(
            REQUEST_END_DELIVERED,
            "Once the scheduler saves the request end, the consumer reads it (never parked "
            "until its input deadline).",
            _end_delivered,
            source="meta.finished is the consumer's only end of stream; a dropped save "
            "records no failure (CTA:421-429, CTA:452-463)",
        ),
        monitor(
            STEPS_READ_ONCE,
            "The consumer reads each step once: within a segment, every key it reads (late "
            "saves aside) carries a later confirmed token count than the one before, so a "
            "preempted re-run of a step already sent never reaches it.",
            step_order_monitor(max_tokens),
            route_steps,
            source=f"{SAVE_ASYNC}: 'If the request is preempted, skip the already saved "
            "chunks' (CTA:451-463, requests_num_chunks_sent)",
        ),
        always(
            WATERMARKS_CLEARED,
            "Once the consumer has read the request end, the adapter keeps neither watermark "
            "of the id: the terminal's cleanup popped both.",
            _watermarks_cleared,
            when=_request_end_read,
            source="cleanup -> _clear_sender_state_locked pops _segment_generation and "
            "requests_num_chunks_sent (CTA:882, CTA:1029-1043)",
        ),
        sometimes(
            "late_save_issued",
            "A late save_async for an old segment generation is issued.",
            _late_save_issued,
            source=f"vacuity guard for {LATE_SAVE_DROPPED}",
        ),
        sometimes(
            "every_segment_then_end",
            f"The consumer reads all {segments} segment ends, then the request end.",
            _every_segment_then_end(segments),
            source=f"vacuity guard for {REQUEST_END_AFTER_SEGMENTS}",
        ),
        sometimes(
            "counter_from_arrival",
            "A request that carries _omni_segment_generation from its arrival parks its first "
            "segment (the segment end advanced the watermark from generation 0).",
            _counter_from_arrival,
            source="vacuity guard for the counter branch of #6816 (CTA:482-483)",
        ),
        sometimes(
            "rerun_meets_watermark",
            "A request streams with a chunk of its open segment already saved, where a "
            "preempted re-run meets the token watermark.",
            _rerun_possible,
            source=f"vacuity guard for {STEPS_READ_ONCE}",
        ),
        sometimes(
            "resumed_without_counter",
            "A request without _omni_segment_generation resumes its next segment.",
            _resumed_without_counter,
            source="vacuity guard for #6816 (MIX:825-838)",
        ),
    )
