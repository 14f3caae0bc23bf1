"""Properties of the chunk-transfer system (`statecore.models.chunk_transfer`).

Each property names the review finding or code comment it comes from. The
globals they read are documented on the system: ``terminals`` (requests whose
terminal the scheduler saved), ``received`` (whose consumer got
``finished=True``), ``received_empty`` (ended by an empty marker),
``failures`` (recorded send failures), ``released`` (failed visibly: the
consumer was released), ``raised`` (the processor raised), ``lost`` (a save
``save_async`` skipped silently), ``made`` (producer state and the request
whose processor made it), ``crossed`` (a processor read another request's
state). Segment order and the silent-drop rule are shared with
`statecore.spec.segment`; the retained-state rule with
`statecore.spec.request_state`.
"""

from __future__ import annotations

from collections.abc import Hashable, Mapping

from statecore import Event, Machine, State, Transition
from statecore.properties import Property, always, eventually, monitor, sometimes
from statecore.system import Emitted, StateView

from .request_state import STATE_RETAINED
from .segment import NO_CURRENT_SAVE_DROPPED, SEGMENT_ORDER, segment_stream_monitor

TERMINAL_DELIVERED = "terminal_delivered"
NOTHING_AFTER_TERMINAL = "nothing_after_terminal"
PROCESSOR_FAILURE_VISIBLE = "processor_failure_visible"
FAILURE_RELEASES_CONSUMER = "failure_releases_consumer"
NO_SENDER_LEAK = "no_sender_leak"
REUSE_ISOLATION = "reuse_isolation"

LIVE_REQUEST = ("running", "parked")


def _terminal_delivered(v: StateView) -> bool:
    settled = v.get("received") | v.get("released")
    return bool(v.get("terminals") <= settled)


def _no_empty_terminal_after_raise(v: StateView) -> bool:
    return not (v.get("raised") & v.get("received_empty")) - v.get("released")


def _failures_release(v: StateView) -> bool:
    return bool(v.get("failures") <= v.get("released"))


def _no_sender_leak(v: StateView) -> bool:
    """Sender state (generation, producer state, watermarks) only for a live request."""
    held = {handle.key for kind in ("sender", "state") for handle, _ in v.live(kind)}
    held |= {h.key for h, s in v.live("watermark") if (s.expected, s.sent) != (None, None)}
    for key in held:
        request = v.snapshot("request", key)
        if request is None or request.state not in LIVE_REQUEST:
            return False
    return True


def _state_retained(v: StateView) -> bool:
    """Every producer state a processor made is still there while its generation lives."""
    for handle, _request in v.get("made"):
        slot = v.slot("state", handle.key)
        live = slot.generation == handle.generation and slot.snapshot is not None
        if live and not slot.snapshot.ns0:
            return False
    return True


def _consumer_monitor() -> Machine:
    return Machine(
        "consumer_stream",
        doc="What one request's consumer may see: chunks, then one terminal, then nothing.",
        states=[State("streaming", initial=True), State("ended", final=True)],
        events=[Event("chunk", policy="reject"), Event("terminal", policy="reject")],
        transitions=[
            Transition("streaming", "chunk", "streaming"),
            Transition("streaming", "terminal", "ended"),
        ],
    )


def _route_received(emitted: Emitted) -> tuple[object, str, dict[str, object]] | None:
    output = emitted.output
    if output.name != "received":
        return None
    event = "terminal" if output.get("finished") else "chunk"
    return output.get("request"), event, {}


def _route_segments(emitted: Emitted) -> tuple[Hashable, str, Mapping[str, object]] | None:
    output = emitted.output
    if output.name == "released":
        return output.get("request"), "released", {}
    if output.name != "received":
        return None
    if output.get("finished"):
        event = "request_end"
    elif output.get("segment_finished"):
        event = "segment_end"
    else:
        event = "chunk"
    return output.get("request"), event, {"segment": output.get("segment")}


def properties(segments: int = 1, *, reuse: bool = True) -> tuple[Property, ...]:
    """The chunk-transfer properties, in report order.

    `segments` bounds the segment ends a request saves; `reuse` says whether
    an external id can be reused at the system's bounds (it guards the reuse
    witness, which would otherwise be reported vacuous).
    """
    return (
        eventually(
            TERMINAL_DELIVERED,
            "Every queued terminal reaches the consumer, or the request fails visibly "
            "and its consumer is released (never parked until the 600 s input deadline).",
            _terminal_delivered,
            source="vllm-omni #6670 (terminal lost on cleanup); seed 000 P1; "
            "_log_failed_chunk_sends 'only reports'",
        ),
        monitor(
            NOTHING_AFTER_TERMINAL,
            "A consumer sees no chunk after its request's terminal, and at most one terminal.",
            _consumer_monitor(),
            _route_received,
            source="chunk_transfer_adapter.py: finished=True is the consumer's only EOS",
        ),
        monitor(
            SEGMENT_ORDER,
            "A consumer reads each segment's chunks, then its end, segments in order, then "
            "the request end, and nothing after it; an abort may cut the segments short, "
            "and a request that failed visibly is no longer judged.",
            segment_stream_monitor(segments, abortable=True),
            _route_segments,
            source="meta.is_segment_finished vs meta.finished (CTA:409); request-global "
            "connector keys (put_req_chunk)",
        ),
        always(
            NO_CURRENT_SAVE_DROPPED,
            "save_async never silently drops a chunk, segment end or terminal of a request.",
            lambda v: not v.get("lost"),
            source="save_async 'Skip late save_async' (CTA:421-429) and the token watermark "
            "(CTA:452-463) record no failure",
        ),
        always(
            REUSE_ISOLATION,
            "A request that reuses an external id never reads the previous request's "
            "producer state (request_payload).",
            lambda v: not v.get("crossed"),
            source="seed 000 (RFC #6453): state fenced by sender-generation identity",
        ),
        always(
            STATE_RETAINED,
            "While a request's producer state lives, what its processor made is still there: "
            "segment completion keeps request-wide state.",
            _state_retained,
            when=lambda v: bool(v.get("made")),
            source="seed 000 PR: 'segment completion retains request-wide state'",
        ),
        always(
            PROCESSOR_FAILURE_VISIBLE,
            "A processor exception never silently becomes an empty terminal.",
            _no_empty_terminal_after_raise,
            when=lambda v: bool(v.get("raised")),
            source="seed 000 (RFC #6453): processor exceptions enter the failure path",
        ),
        always(
            FAILURE_RELEASES_CONSUMER,
            "A recorded send failure fails the request visibly and releases its consumer.",
            _failures_release,
            when=lambda v: bool(v.get("failures")),
            source="omni_scheduler_mixin._log_failed_chunk_sends only logs (0.30.0)",
        ),
        eventually(
            NO_SENDER_LEAK,
            "At rest, sender state is held only for a request that is still running.",
            _no_sender_leak,
            source="chunk_transfer_adapter.cleanup_sender; a failed terminal keeps state",
        ),
        sometimes(
            "terminal_reaches_consumer",
            "Some request's terminal reaches its consumer.",
            lambda v: bool(v.get("received")),
            source="vacuity guard",
        ),
        sometimes(
            "cleanup_while_terminal_pending",
            "cleanup_sender can run while a terminal is queued.",
            lambda v: any(s.state in ("draining", "retiring") for _, s in v.live("sender")),
            source="vacuity guard for #6670",
        ),
        *(
            [
                sometimes(
                    "external_id_reused",
                    "A new request can reuse an external id.",
                    lambda v: any(slot.generation >= 2 for _, slot in v.instances("request")),
                    source="vacuity guard for reuse isolation",
                )
            ]
            if reuse
            else []
        ),
        sometimes(
            "segment_completed_with_state",
            "A segment completes while its request holds producer state.",
            lambda v: bool(v.get("segment_done")),
            source=f"vacuity guard for {STATE_RETAINED}",
        ),
    )
