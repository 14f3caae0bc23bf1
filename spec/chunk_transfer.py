"""Properties of the chunk-transfer system (`statecore.models.chunk_transfer`).

Each property names the review finding or code comment it comes from. The
globals they read are documented on the system: ``terminals`` (requests whose
terminal the scheduler saved), ``received`` (whose consumer got
``finished=True``), ``failures`` (recorded send failures), ``released``
(failed visibly: the consumer stage finished the request), ``failed`` (failed
by the scheduler, not yet finished on the consumer stage), ``owed`` (admitted
chunks and segment ends the consumer has not read, that the processor did not
withhold, of a request that neither failed nor was finished),
``error_markers`` (not failed visibly, and the connector got a marker sent in
place of a payload the processor raised on), ``queue`` / ``in_flight`` /
``mailbox`` (the tasks and puts, each with its save number), ``lost`` (a save
``save_async`` skipped silently), ``overwritten`` (a request whose unread,
awaited put another put replaced under the same connector key), ``made`` (producer state
and the request whose processor made it), ``crossed`` (a processor read
another request's state).

Failing a request is three steps, none atomic with the others: the save
thread records the failure, the scheduler's sweep fails the request and runs
``finish_requests`` on the producer stage, and the consumer stage runs its
own ``finish_requests``. A consumer nothing releases meets its input
deadline, a step of its own, so the failure properties are judged at rest.

Segment order and the silent-drop rule are shared with
`statecore.spec.segment` (segment order judged at rest here: a consumer may
misread before a failure reaches it, as long as one does); the
retained-state rule with `statecore.spec.request_state`.
"""

from __future__ import annotations

from collections.abc import Callable, Hashable, Mapping
from typing import TYPE_CHECKING, Any

from statecore import Event, Machine, State, Transition
from statecore.properties import Property, always, eventually, monitor, sometimes
from statecore.system import Emitted, StateView

from .request_state import STATE_RETAINED
from .segment import NO_CURRENT_SAVE_DROPPED, SEGMENT_ORDER, segment_stream_monitor

if TYPE_CHECKING:
    from statecore.models.chunk_transfer_records import Shared

TERMINAL_DELIVERED = "terminal_delivered"
NOTHING_AFTER_TERMINAL = "nothing_after_terminal"
CHUNK_DELIVERED = "chunk_delivered"
SAVES_SENT_ONCE = "saves_sent_once"
FAILED_REQUEST_FINISHED = "failed_request_finished"
PROCESSOR_FAILURE_VISIBLE = "processor_failure_visible"
FAILURE_RELEASES_CONSUMER = "failure_releases_consumer"
NO_SENDER_LEAK = "no_sender_leak"
REUSE_ISOLATION = "reuse_isolation"
NO_UNREAD_OVERWRITE = "no_unread_overwrite"

LIVE_REQUEST = ("running", "parked")


def _terminal_delivered(v: StateView[Shared]) -> bool:
    return bool(v.g.terminals <= v.g.received | v.g.released)


def _saves_sent_once(v: StateView[Shared]) -> bool:
    """No save has two copies in the queue, the save thread (before its put) and the connector."""
    copies = [(task.request, task.kind, task.save) for task in v.g.queue]
    flight = v.g.in_flight
    if flight is not None and not flight.put_returned:
        task = flight.task
        copies.append((task.request, task.kind, task.save))
    copies += [(item.request, item.kind, item.save) for item in v.g.mailbox]
    return len(copies) == len(set(copies))


def _failed_requests_finished(v: StateView[Shared]) -> bool:
    """A failed request, while it is still its id's current request, is aborted."""
    for request in v.g.failed | v.g.released:
        slot = v.slot("request", request.key)
        held = slot.snapshot if slot.generation == request.generation else None
        if held is not None and held.state != "aborted":
            return False
    return True


def _chunks_delivered(v: StateView[Shared]) -> bool:
    return not v.g.owed


def _error_markers_visible(v: StateView[Shared]) -> bool:
    return not v.g.error_markers


def _failures_release(v: StateView[Shared]) -> bool:
    return bool(v.g.failures <= v.g.released)


def _nothing_dropped(v: StateView[Shared]) -> bool:
    return not v.g.lost


def _no_state_crossed(v: StateView[Shared]) -> bool:
    return not v.g.crossed


def _nothing_overwritten(v: StateView[Shared]) -> bool:
    return not v.g.overwritten


def _state_made(v: StateView[Shared]) -> bool:
    return bool(v.g.made)


def _terminal_received(v: StateView[Shared]) -> bool:
    return bool(v.g.received)


def _cleanup_while_terminal_pending(v: StateView[Shared]) -> bool:
    return any(s.state in ("draining", "retiring") for _, s in v.live("sender"))


def _external_id_reused(v: StateView[Shared]) -> bool:
    return any(slot.generation >= 2 for _, slot in v.instances("request"))


def _request_aborted(v: StateView[Shared]) -> bool:
    return any(s.state == "aborted" and h not in v.g.failures for h, s in v.live("request"))


def _next_segment_opened(v: StateView[Shared]) -> bool:
    return any(s.state == "running" and s.ends for _, s in v.live("request"))


def _segment_completed_with_state(v: StateView[Shared]) -> bool:
    return bool(v.g.segment_done)


def _no_sender_leak(v: StateView[Shared]) -> bool:
    """Sender state (generation, producer state, watermarks) only for a live request."""
    held = {handle.key for kind in ("sender", "state") for handle, _ in v.live(kind)}
    held |= {h.key for h, s in v.live("watermark") if (s.expected, s.sent) != (None, None)}
    for key in held:
        request = v.snapshot("request", key)
        if request is None or request.state not in LIVE_REQUEST:
            return False
    return True


def _state_retained(v: StateView[Shared]) -> bool:
    """Every producer state a processor made is still there while its generation lives."""
    for made in v.g.made:
        slot = v.slot("state", made.state.key)
        held = slot.snapshot if slot.generation == made.state.generation else None
        if held is not None and not held.ns0:
            return False
    return True


def _segment_order_monitor(segments: int) -> Machine:
    """`segment_stream_monitor` judged at rest: a misread must end in a visible failure.

    A failure takes steps to reach the consumer (recorded, swept by the
    scheduler, then the consumer stage's finish_requests), and the save thread
    may put the next segment's chunk in between. A read out of order takes the
    monitor to the hot ``misread`` state, which only ``released`` leaves: at
    rest, a consumer that misread and was never released is a violation.
    """
    strict = segment_stream_monitor(segments, abortable=True)
    reads = ("chunk", "segment_end", "request_end")
    out_of_order = [
        Transition(
            "streaming",
            t.event,
            "misread",
            guard=_negated(t.guard),
            guard_label=f"not {t.guard_label}",
        )
        for t in strict.transitions
        if t.source == ("streaming",) and t.event in reads and t.guard is not None
    ]
    return Machine(
        "segment_stream_at_rest",
        doc=strict.doc + " A read out of order owes a visible failure.",
        states=[
            *strict.states,
            State("misread", hot=True, doc="read out of order; its request must fail visibly"),
        ],
        variables=strict.variables,
        events=strict.events,
        transitions=[
            *strict.transitions,
            *out_of_order,
            Transition("misread", "released", "failed"),
            *(Transition("misread", event, None) for event in reads),
        ],
    )


def _negated(guard: Callable[[Any, Any], bool]) -> Callable[[Any, Any], bool]:
    def negated(s: Any, p: Any) -> bool:
        return not guard(s, p)

    return negated


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
            "and a consumer that misreads them has its request fail visibly.",
            _segment_order_monitor(segments),
            _route_segments,
            source="meta.is_segment_finished vs meta.finished (CTA:409); request-global "
            "connector keys (put_req_chunk)",
        ),
        always(
            NO_CURRENT_SAVE_DROPPED,
            "save_async never silently drops a chunk, segment end or terminal of a request.",
            _nothing_dropped,
            source="save_async 'Skip late save_async' (CTA:421-429) and the token watermark "
            "(CTA:452-463) record no failure",
        ),
        always(
            SAVES_SENT_ONCE,
            "Each admitted save is queued, run and put once: no two copies of it are in the "
            "save queue, the save thread and the connector at a time.",
            _saves_sent_once,
            source="save_loop pops each task before it runs it (BASE:119-132); "
            "requests_num_chunks_sent keeps a preempted step from being queued twice",
        ),
        always(
            REUSE_ISOLATION,
            "A request that reuses an external id never reads the previous request's "
            "producer state (request_payload).",
            _no_state_crossed,
            source="seed 000 (RFC #6453): state fenced by sender-generation identity",
        ),
        always(
            NO_UNREAD_OVERWRITE,
            "A put never replaces, under its connector key, a put whose consumer has not "
            "read it and still waits for it: a request reusing an external id puts under "
            "keys of its own.",
            _nothing_overwritten,
            source="connector keys '{ext}_{stage}_{chunk}' (CTA:777-778) and "
            "_clear_sender_state_locked popping put_req_chunk (CTA:1031); seed 004: 'the "
            "channel must distinguish request instances across ID reuse'",
        ),
        always(
            STATE_RETAINED,
            "While a request's producer state lives, what its processor made is still there: "
            "segment completion keeps request-wide state.",
            _state_retained,
            when=_state_made,
            source="seed 000 PR: 'segment completion retains request-wide state'",
        ),
        eventually(
            CHUNK_DELIVERED,
            "Every chunk and segment end save_async admitted reaches the consumer, or the "
            "request fails visibly (unless the processor had nothing to send, or "
            "finish_requests cancelled the request).",
            _chunks_delivered,
            source="_send_single_request_for_generation: a processor exception on a "
            "non-terminal chunk is logged, nothing is put, no failure is recorded (0.30.0)",
        ),
        eventually(
            PROCESSOR_FAILURE_VISIBLE,
            "A marker sent in place of a payload the processor raised on (an empty segment "
            "end or terminal) never passes for a normal one: that request fails visibly.",
            _error_markers_visible,
            source="seed 000 (RFC #6453): processor exceptions enter the failure path",
        ),
        always(
            FAILED_REQUEST_FINISHED,
            "A request the scheduler failed visibly is finished on the producer stage: it is "
            "never scheduled again.",
            _failed_requests_finished,
            source="omni_scheduler_mixin.py:934-936: finish_requests skips a request that "
            "already reports is_finished(); the failure path must still end it",
        ),
        eventually(
            FAILURE_RELEASES_CONSUMER,
            "A recorded send failure fails the request visibly: the consumer stage finishes "
            "it, and its consumer is not left to its input deadline.",
            _failures_release,
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
            _terminal_received,
            source="vacuity guard",
        ),
        sometimes(
            "cleanup_while_terminal_pending",
            "cleanup_sender can run while a terminal is queued.",
            _cleanup_while_terminal_pending,
            source="vacuity guard for #6670",
        ),
        *(
            [
                sometimes(
                    "external_id_reused",
                    "A new request can reuse an external id.",
                    _external_id_reused,
                    source="vacuity guard for reuse isolation",
                )
            ]
            if reuse
            else []
        ),
        sometimes(
            "request_aborted",
            "finish_requests can end a request whose send never failed (an abort).",
            _request_aborted,
            source="vacuity guard for the abort path",
        ),
        sometimes(
            "next_segment_opened",
            "A streaming update reopens a request after its segment end.",
            _next_segment_opened,
            source="vacuity guard for segment_order past the first segment",
        ),
        sometimes(
            "segment_completed_with_state",
            "A segment completes while its request holds producer state.",
            _segment_completed_with_state,
            source=f"vacuity guard for {STATE_RETAINED}",
        ),
    )
