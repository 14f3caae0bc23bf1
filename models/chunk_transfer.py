"""The chunk-transfer system: scheduler, save thread, connector and consumer.

Mirrors vLLM-Omni 0.30.0,
``vllm_omni/distributed/omni_connectors/transfer_adapter/chunk_transfer_adapter.py``
("CTA": ``save_async``, the save loop in ``base.py``, ``_send_single_request``
and ``_send_single_request_for_generation``, ``cleanup_sender``,
``finish_requests``, ``record_send_failure``) and
``vllm_omni/core/sched/omni_scheduler_mixin.py`` (``_log_failed_chunk_sends``
only logs a send failure, so the consumer waits for its input deadline).

It composes three lifecycles per external id:

* the sender generation (`statecore.models.sender_generation`):
  ``_SenderGeneration`` and its identity fence;
* the segment watermarks (`statecore.models.segment`'s ``segment_watermark``):
  ``_segment_generation`` and ``requests_num_chunks_sent``, the admission state
  ``save_async`` consults before it queues a chunk;
* the producer's request-scoped state (`statecore.models.request_state`):
  ``request_payload[ext]``, which the processor reads and writes through the
  adapter, kept across segments and popped by ``_clear_sender_state_locked``.

Actors and their actions:

* scheduler - ``new_request`` (a request takes an external id; a reused id
  gets a new request generation), ``save_chunk`` / ``save_segment_end`` /
  ``save_terminal`` (``save_async``: a late or replayed save is skipped
  silently; a save is rejected and recorded as a send failure while the old
  sender generation is cancelled but still draining), ``next_segment`` (a
  streaming update opens the next segment: ``_omni_segment_generation += 1``
  and a rebuilt prompt, so confirmed token counts restart), ``abort``
  (``finish_requests`` -> ``cleanup_sender``), ``finalize_failure`` (the
  reference's failure path; 0.30.0 has none);
* save thread (internal) - ``begin`` (pop the FIFO head; a stale or vetoed
  task is discarded), ``process`` (the processor reads the request's state,
  then returns a payload, returns None or raises), ``put`` (the connector put
  succeeds, returns False or raises; then the post-put bookkeeping, the
  segment-end post-processing and, after a terminal, ``cleanup()``),
  ``finish`` (the task's ``finally``: fence release and deferred reclaim);
* consumer (internal) - ``receive`` (takes the next put from the connector).

Simplifications: a bounded number of non-terminal saves per request
(`saves`: chunks and segment ends together), of segment ends among them
(`segments`), and one terminal per request; every save commits
one token (the parked terminal of ``_finish_parked_streaming_session``
commits none); a request always carries ``_omni_segment_generation`` and
every next segment comes from a streaming update (the request without the
counter, native-duplex resume and late saves are the `segment` model's
business); connector keys are not modelled (each put is tagged with the
request that produced it); ``num_puts`` and shared-memory cleanup are left
out; the processor uses one namespace of ``request_payload``; a processor
that raises does so after it read its state.

`ChunkTransferConfig` selects the behaviour: the defaults are the reference
behaviour statecore's spec asks for; `RELEASED_0_30_0` is vLLM-Omni 0.30.0 as
released; the seed-finding variants flip one switch each.
"""

from __future__ import annotations

from collections.abc import Hashable
from dataclasses import dataclass, replace
from typing import Any, Literal

from statecore import Event, Machine, Outcome, State, Transition, Var, out
from statecore.registry import Target
from statecore.system import Action, Component, Global, Handle, Keys, System, Tx

from .request_state import release_state, request_state_machine
from .segment import segment_watermark_machine
from .sender_generation import cleanup_sender, fire_sender, sender_generation_machine

PROCESSOR_OUTCOMES = ("payload", "none", "raise")
PUT_OUTCOMES = ("ok", "false", "raise")

CHUNK = "chunk"
SEGMENT_END = "segment_end"
TERMINAL = "terminal"

NAMESPACE = "codec"
"""The one ``request_payload`` namespace the modelled processor uses."""

ProcessorRaise = Literal["log", "record_and_skip", "record"]

CANCELLED = ("draining", "retiring")  # sender states with ``cancelled`` set


@dataclass(frozen=True)
class ChunkTransferConfig:
    """Behaviour switches; each names the vLLM-Omni code or review it comes from."""

    name: str = "chunk_transfer"
    ids: int = 1
    generations: int = 2
    saves: int = 1  # chunks and segment ends a request may save before its terminal
    segments: int = 1  # how many of those may be segment ends
    # cleanup_sender defers while a terminal is queued (fixed by vllm-omni #6670).
    defer_cleanup: bool = True
    # A put that returns False is recorded with record_send_failure (vllm-omni #4855).
    record_false_put: bool = True
    # A processor exception: "log" (0.30.0: only logged; a boundary still
    # sends an empty finish marker), "record_and_skip" (seed 000 as submitted:
    # record_send_failure, then return without a put), "record" (the review's
    # fix: the request fails visibly and a boundary still sends its marker).
    processor_raise: ProcessorRaise = "record"
    # A recorded send failure fails the request and releases the consumer; in
    # 0.30.0 _log_failed_chunk_sends only logs and the consumer parks.
    failure_releases_consumer: bool = True
    # A request reusing an external id gets its own sender generation and its
    # own watermarks, or is refused visibly while the old generation lives; in
    # 0.30.0 its saves are judged against the old request's watermarks, join
    # the old generation (no identity check on the request) and its processor
    # reads the old request's request_payload.
    isolate_reuse: bool = True
    # A queued segment end pops requests_num_chunks_sent (CTA:486).
    reset_tokens: bool = True
    # Segment-end post-processing keeps request_payload (CTA:902-909; seed 000:
    # "segment completion retains request-wide state").
    segment_keeps_state: bool = True
    processor_outcomes: tuple[str, ...] = PROCESSOR_OUTCOMES
    put_outcomes: tuple[str, ...] = PUT_OUTCOMES

    @property
    def max_tokens(self) -> int:
        """The largest confirmed token count a save reports (one token per save)."""
        return self.saves + 1


RELEASED_0_30_0 = ChunkTransferConfig(
    name="chunk_transfer_v0_30_0",
    processor_raise="log",
    failure_releases_consumer=False,
    isolate_reuse=False,
)


def request_machine(saves: int = 1, segments: int = 1) -> Machine:
    """The scheduler-side request: what it has saved, and whether it is over.

    ``ends`` is also the request's ``_omni_segment_generation``: every next
    segment comes from a streaming update that bumps it, and so does
    ``_finish_parked_streaming_session`` (MIX:929-933).
    """
    segment_transitions = [
        Transition(
            "running",
            "segment_end",
            "parked",
            guard=lambda s, p: s.saved < saves and s.ends < segments,
            guard_label=f"saved < {saves}, ends < {segments}",
            effect=lambda s, p: {"saved": s.saved + 1, "ends": s.ends + 1, "tokens": s.tokens + 1},
            effect_label="saved += 1, ends += 1, tokens += 1",
        ),
        Transition(
            "parked",
            "next_segment",
            "running",
            effect=lambda s, p: {"tokens": 0},
            effect_label="generation bumped, prompt rebuilt",
        ),
        Transition("parked", "terminal", "terminal_saved", effect_label="generation bumped"),
    ]
    return Machine(
        "request",
        doc="A producer request as the scheduler drives it (save_async calls, abort).",
        states=[
            State("running", initial=True, doc="a segment is open"),
            *(
                [State("parked", doc="its segment end was saved; the next segment is not open")]
                if segments
                else []
            ),
            State("terminal_saved", doc="save_async was called for its terminal"),
            State("aborted", final=True, doc="finish_requests ran"),
        ],
        variables=[
            Var("saved", range(saves + 1), 0, doc="chunks and segment ends saved"),
            Var("ends", range(segments + 1), 0, doc="segment ends saved"),
            Var("tokens", range(saves + 2), 0, doc="confirmed_num_computed_tokens"),
        ],
        events=[
            Event("chunk"),
            *([Event("segment_end"), Event("next_segment")] if segments else []),
            Event("terminal"),
            Event("abort", policy="ignore"),
        ],
        transitions=[
            Transition(
                "running",
                "chunk",
                None,
                guard=lambda s, p: s.saved < saves,
                guard_label=f"saved < {saves}",
                effect=lambda s, p: {"saved": s.saved + 1, "tokens": s.tokens + 1},
                effect_label="saved += 1, tokens += 1",
            ),
            Transition(
                "running",
                "terminal",
                "terminal_saved",
                effect=lambda s, p: {"tokens": s.tokens + 1},
                effect_label="tokens += 1",
            ),
            *(segment_transitions if segments else []),
            Transition(("running", "terminal_saved"), "abort", "aborted"),
            *([Transition("parked", "abort", "aborted")] if segments else []),
        ],
    )


# A queued task: (sender handle, request handle, kind, segment index). The
# segment index is a ghost for the properties; the wire carries only
# ``finished`` and ``is_segment_finished``.
Task = tuple[Handle, Handle, str, int]
# The task the save thread runs: (task, phase, detail). Phases: "begun"
# (parked in the processor callback), "putting" (parked in connector.put;
# detail "data" or "empty"), "finishing" (the send returned, detail None,
# or raised, detail "raised"; the finally has not run yet).
InFlight = tuple[Task, str, Any]
# What the connector holds and the consumer reads: (request, kind, segment, empty).
Put = tuple[Handle, str, int, bool]


UNTAKEN_IN_REFERENCE: dict[str, str] = {
    "open--save(late)-->open": "the reference judges a save only against its own "
    "request's watermarks, and within one request generations only grow",
    "open--save(replay)-->open": "token counts only grow within a segment and the "
    "segment end resets the watermark; nothing here re-runs a preempted step",
    "open--stamp-->(same)": "the reference refuses a reused id before save_async "
    "touches the watermarks",
}
"""Watermark transitions only 0.30.0's reuse and the variants take, and why."""


def build(config: ChunkTransferConfig = ChunkTransferConfig()) -> System:
    """The chunk-transfer system for `config`, with the spec's properties."""
    from statecore.spec.chunk_transfer import properties

    ext = Keys("ext", config.ids)
    sender = sender_generation_machine(defer_cleanup=config.defer_cleanup)
    # Every request here carries _omni_segment_generation, so a segment end
    # always advances the watermark: advance="always" is the counter branch.
    watermark = segment_watermark_machine(
        config.segments,
        config.max_tokens,
        advance="always",
        reset_tokens=config.reset_tokens,
        stamp=True,
    )
    producer_state = request_state_machine(
        (NAMESPACE,),
        segment_keeps_state=config.segment_keeps_state,
        name="request_state" + ("" if config.segment_keeps_state else "_segment_clears"),
    )

    def init(tx: Tx) -> None:
        for key in ext.values:
            tx.spawn("watermark", key)

    # -- scheduler ---------------------------------------------------------------

    def new_request(tx: Tx, ext: Hashable) -> None:
        current = tx.snapshot(("request", ext))
        tx.require(current is None or current.state in ("terminal_saved", "aborted"))
        tx.spawn("request", ext)

    def save(tx: Tx, ext: Hashable, kind: str) -> None:
        request = tx.handle("request", ext)
        tx.require(request is not None)
        assert request is not None
        before = tx.snapshot(request)
        assert before is not None
        tx.require(tx.fire(request, kind).accepted)
        after = tx.snapshot(request)
        assert after is not None
        if kind == TERMINAL:
            tx.set("terminals", tx.get("terminals") | {request})
        generation = before.ends if kind == SEGMENT_END else after.ends
        token = tx.handle("sender", ext)
        token_state = tx.snapshot(("sender", ext))
        cancelled = token_state is not None and token_state.state in CANCELLED
        foreign = token is not None and (token, request) not in tx.get("owners")
        if config.isolate_reuse and (cancelled or foreign):
            _fail(tx, request, config)  # refused visibly: the old generation still lives
            return
        mark: Hashable = ("watermark", ext)
        if not config.isolate_reuse and _late(tx.snapshot(mark), generation):
            tx.fire(mark, "save", **_save_payload(kind, generation, after.tokens))
            tx.set("lost", tx.get("lost") | {request})  # "Skip late save_async"
            return
        if cancelled:  # "previous sender generation is still draining"
            tx.fire(mark, "stamp", generation=generation)
            _fail(tx, request, config)
            return
        admission = tx.fire(mark, "save", **_save_payload(kind, generation, after.tokens))
        if admission.outputs[0].name != "admitted":
            tx.set("lost", tx.get("lost") | {request})  # skipped as a preemption replay
            return
        if token is None:
            token = tx.spawn("sender", ext)
            tx.spawn("state", ext)
            tx.set("owners", tx.get("owners") | {(token, request)})
        if kind == TERMINAL:
            _fire_sender(tx, token, "save_terminal")
        tx.set("queue", (*tx.get("queue"), (token, request, kind, before.ends)))

    def save_chunk(tx: Tx, ext: Hashable) -> None:
        save(tx, ext, CHUNK)

    def save_segment_end(tx: Tx, ext: Hashable) -> None:
        save(tx, ext, SEGMENT_END)

    def save_terminal(tx: Tx, ext: Hashable) -> None:
        save(tx, ext, TERMINAL)

    def next_segment(tx: Tx, ext: Hashable) -> None:
        request = tx.handle("request", ext)
        tx.require(request is not None and tx.fire(request, "next_segment").accepted)

    def abort(tx: Tx, ext: Hashable) -> None:
        request = tx.handle("request", ext)
        tx.require(request is not None and tx.fire(request, "abort").accepted)
        _cleanup_sender(tx, ext)

    def finalize_failure(tx: Tx, ext: Hashable) -> None:
        # The scheduler-visible failure path: fail the request, then
        # finish_requests -> cleanup_sender. 0.30.0 has no such path.
        request = tx.handle("request", ext)
        tx.require(request is not None and request in tx.get("failures"))
        tx.require(tx.fire(request, "abort").accepted)
        _cleanup_sender(tx, ext)

    # -- save thread ---------------------------------------------------------------

    def begin(tx: Tx) -> None:
        queue = tx.get("queue")
        tx.require(queue and tx.get("in_flight") is None)
        task: Task = queue[0]
        tx.set("queue", queue[1:])
        if _fire_sender(tx, task[0], "begin", terminal=task[2] == TERMINAL).accepted:
            tx.set("in_flight", (task, "begun", None))
        # else: discarded as stale (identity lost, or cancelled and not terminal)

    def process(tx: Tx, outcome: str) -> None:
        # The processor reads request_payload[ext], then returns; the send runs
        # on by itself to the cancel check and, if that passes, blocks inside
        # connector.put.
        flight = tx.get("in_flight")
        tx.require(flight is not None and flight[1] == "begun")
        task: Task = flight[0]
        token, request, kind, _ = task
        _read_state(tx, token, request)
        boundary = kind != CHUNK
        if outcome == "raise":
            tx.set("raised", tx.get("raised") | {request})
            if config.processor_raise != "log":
                _fail(tx, request, config, state=True)
            if config.processor_raise == "record_and_skip":
                _end(tx, task)
                return
        if outcome != "payload" and not boundary:
            _end(tx, task)  # nothing is put, nothing recorded (0.30.0)
            return
        snap = tx.snapshot(token)
        if snap is None or (snap.state in CANCELLED and kind != TERMINAL):
            _end(tx, task)  # _sender_generation_is_active fails: no put, no failure
            return
        # A boundary without a payload still sends an empty finish marker.
        tx.set("in_flight", (task, "putting", "data" if outcome == "payload" else "empty"))

    def put(tx: Tx, outcome: str) -> None:
        # connector.put returns (or raises); then the post-put bookkeeping.
        flight = tx.get("in_flight")
        tx.require(flight is not None and flight[1] == "putting")
        task: Task = flight[0]
        token, request, kind, segment = task
        if outcome == "ok":
            item: Put = (request, kind, segment, flight[2] == "empty")
            tx.set("mailbox", (*tx.get("mailbox"), item))
        if outcome == "raise":  # propagates through the finally to the save loop
            tx.set("in_flight", (task, "finishing", "raised"))
            return
        tx.set("in_flight", (task, "finishing", None))
        snap = tx.snapshot(token)
        if snap is None or (snap.state == "retiring" and kind != TERMINAL):
            return  # "Ignoring completed put for retired request"
        if outcome == "false" and config.record_false_put:
            _fail(tx, request, config, state=True)
        if kind == SEGMENT_END:  # segment-end post-processing (CTA:902-909)
            state = tx.handle("state", token.key)
            if state is not None:
                held = tx.snapshot(state)
                if held is not None and held.ns0:
                    tx.set("segment_done", True)
                tx.fire(state, "complete_segment")
        if kind == TERMINAL and outcome == "ok":
            _fire_sender(tx, token, "cleanup")  # cleanup(): deferred to the finally

    def finish(tx: Tx) -> None:
        flight = tx.get("in_flight")
        tx.require(flight is not None and flight[1] == "finishing")
        task: Task = flight[0]
        _end(tx, task)
        if flight[2] == "raised":  # save_loop: record_send_failure(request_id, ...)
            _fail(tx, task[1], config, state=True)

    def receive(tx: Tx) -> None:
        mailbox = tx.get("mailbox")
        tx.require(mailbox)
        request, kind, segment, empty = mailbox[0]
        tx.set("mailbox", mailbox[1:])
        finished = kind == TERMINAL
        tx.emit(
            out(
                "received",
                request=request,
                finished=finished,
                segment_finished=kind == SEGMENT_END,
                segment=segment,
                empty=empty,
            )
        )
        if finished:
            tx.set("received", tx.get("received") | {request})
            if empty:
                tx.set("received_empty", tx.get("received_empty") | {request})

    ext_param = {"ext": ext}
    return System(
        config.name,
        doc=__doc__ or "",
        components=[
            Component(
                "request",
                request_machine(config.saves, config.segments),
                ext,
                max_generations=config.generations,
            ),
            Component("sender", sender, ext, max_generations=config.generations),
            Component(
                "watermark",
                watermark,
                ext,
                untaken=UNTAKEN_IN_REFERENCE
                if config.isolate_reuse and config.reset_tokens
                else {},
            ),
            Component("state", producer_state, ext, max_generations=config.generations),
        ],
        globals=[
            Global("queue", (), doc="_pending_save_reqs: FIFO of (token, request, kind, segment)"),
            Global("in_flight", None, doc="the task the save thread is running"),
            Global("mailbox", (), doc="puts the connector holds for the consumer"),
            Global("received", frozenset(), doc="requests whose consumer got finished=True"),
            Global("failures", frozenset(), doc="requests with a recorded send failure"),
            Global("released", frozenset(), doc="requests failed visibly (consumer released)"),
            Global("raised", frozenset(), doc="requests whose processor raised"),
            Global("terminals", frozenset(), doc="requests whose terminal the scheduler saved"),
            Global("received_empty", frozenset(), doc="requests ended by an empty marker"),
            Global("owners", frozenset(), doc="(sender generation, request that opened it)"),
            Global("lost", frozenset(), doc="requests a save of which was skipped silently"),
            Global("made", frozenset(), doc="(state generation, request whose processor made it)"),
            Global("crossed", False, doc="ghost: a processor read another request's state"),
            Global("segment_done", False, doc="ghost: a segment completed with state held"),
        ],
        init=init,
        actions=[
            Action("new_request", "scheduler", new_request, ext_param),
            Action("save_chunk", "scheduler", save_chunk, ext_param),
            *(
                [
                    Action("save_segment_end", "scheduler", save_segment_end, ext_param),
                    Action("next_segment", "scheduler", next_segment, ext_param),
                ]
                if config.segments
                else []
            ),
            Action("save_terminal", "scheduler", save_terminal, ext_param),
            Action("abort", "scheduler", abort, ext_param),
            Action("begin", "save_thread", begin, internal=True),
            Action(
                "process",
                "save_thread",
                process,
                {"outcome": config.processor_outcomes},
                internal=True,
            ),
            Action("put", "save_thread", put, {"outcome": config.put_outcomes}, internal=True),
            Action("finish", "save_thread", finish, internal=True),
            Action("receive", "consumer", receive, internal=True),
            *(
                [
                    Action(
                        "finalize_failure", "scheduler", finalize_failure, ext_param, internal=True
                    )
                ]
                if config.failure_releases_consumer
                else []
            ),
        ],
        properties=properties(config.segments, reuse=config.generations > 1),
    )


def _save_payload(kind: str, generation: int, tokens: int) -> dict[str, Any]:
    """The ``save`` event of the watermark machine for one ``save_async`` call."""
    return {"kind": kind, "generation": generation, "confirmed": tokens, "counter": True}


def _late(watermark: Any, generation: int) -> bool:
    """``generation < _segment_generation.get(ext, generation)`` (CTA:412-430)."""
    return watermark.expected is not None and generation < watermark.expected


def _read_state(tx: Tx, token: Handle, request: Handle) -> None:
    """The processor reads ``request_payload[ext]`` (creating its namespace)."""
    state = tx.handle("state", token.key)
    if state is None:
        return
    outcome = tx.fire(state, "get_or_create", namespace=NAMESPACE)
    if not outcome.accepted:
        return
    made: frozenset[tuple[Handle, Handle]] = tx.get("made")
    if outcome.outputs[0].get("created"):
        tx.set("made", made | {(state, request)})
    elif (state, request) not in made:
        tx.set("crossed", True)  # another request's processor made it


def _fail(tx: Tx, request: Handle, config: ChunkTransferConfig, *, state: bool = False) -> None:
    """``record_send_failure``; `state`: the request's own send failed (not a refusal)."""
    tx.set("failures", tx.get("failures") | {request})
    if config.failure_releases_consumer and request not in tx.get("released"):
        tx.set("released", tx.get("released") | {request})
        tx.emit(out("released", request=request))
    held = tx.handle("state", request.key)
    if state and held is not None:
        tx.fire(held, "send_failed")


def _end(tx: Tx, task: Task) -> None:
    """The task's ``finally``: fence release and deferred cleanup, in the machine."""
    _fire_sender(tx, task[0], "end", terminal=task[2] == TERMINAL)
    tx.set("in_flight", None)


def _cleanup_sender(tx: Tx, ext: Hashable) -> None:
    cleanup_sender(tx, ext, _clear_sender_state)


def _fire_sender(tx: Tx, token: Handle, event: str, **payload: Any) -> Outcome:
    """Fire on a sender generation; reclaiming it pops the token and clears its state."""
    return fire_sender(tx, token, event, _clear_sender_state, **payload)


def _clear_sender_state(tx: Tx, ext: Hashable) -> None:
    """``_clear_sender_state_locked``: pop the watermarks and ``request_payload``."""
    tx.fire(("watermark", ext), "clear")
    release_state(tx, ext)


CHUNK_TRANSFER = build()


def released_0_30_0() -> System:
    """vLLM-Omni 0.30.0 as released."""
    return build(RELEASED_0_30_0)


def released_0_30_0_segments() -> System:
    """vLLM-Omni 0.30.0 with two saves per request and no reuse: segment boundaries."""
    return build(
        replace(RELEASED_0_30_0, name="chunk_transfer_v0_30_0_segments", saves=2, generations=1)
    )


def reference_two_saves() -> System:
    """The reference at the bounds of the segment variants: two saves, no reuse."""
    return build(ChunkTransferConfig(name="chunk_transfer_two_saves", saves=2, generations=1))


def variant_6670() -> System:
    """cleanup_sender reclaims a generation whose terminal is still queued (#6670)."""
    return build(ChunkTransferConfig(name="chunk_transfer_6670", defer_cleanup=False))


def variant_4855() -> System:
    """A connector put that returns False is not recorded as a failure (#4855)."""
    return build(ChunkTransferConfig(name="chunk_transfer_4855", record_false_put=False))


def variant_seed000_p1() -> System:
    """Seed 000 P1: a processor exception is recorded, no terminal is put, and the
    failure path only logs, so the consumer parks until its input deadline."""
    return build(
        ChunkTransferConfig(
            name="chunk_transfer_seed000_p1",
            processor_raise="record_and_skip",
            failure_releases_consumer=False,
        )
    )


def variant_reuse_joins() -> System:
    """0.30.0's reuse behaviour alone: a new request joins the old generation."""
    return build(ChunkTransferConfig(name="chunk_transfer_reuse_joins", isolate_reuse=False))


def variant_no_token_reset() -> System:
    """A segment end keeps requests_num_chunks_sent (CTA:486 removed).

    Checked with two saves per request and no reuse: the bug needs a chunk
    before the segment end, not a second request.
    """
    return build(
        ChunkTransferConfig(
            name="chunk_transfer_no_token_reset", saves=2, generations=1, reset_tokens=False
        )
    )


def variant_segment_clears() -> System:
    """Segment-end post-processing pops request_payload with the segment-scoped state."""
    return build(
        ChunkTransferConfig(name="chunk_transfer_segment_clears", segment_keeps_state=False)
    )


_CT = __name__

TARGETS: tuple[Target, ...] = (
    Target(
        "chunk_transfer",
        f"{_CT}:CHUNK_TRANSFER",
        doc="scheduler, save thread, connector and consumer; the reference behaviour",
    ),
    Target(
        "chunk_transfer_0_30_0",
        f"{_CT}:released_0_30_0",
        "violates:failure_releases_consumer,no_current_save_dropped,no_sender_leak,"
        "processor_failure_visible,reuse_isolation,terminal_delivered",
        doc="vLLM-Omni 0.30.0 as released (see docs/findings.md)",
        family="chunk_transfer",
    ),
    Target(
        "chunk_transfer_0_30_0_segments",
        f"{_CT}:released_0_30_0_segments",
        "violates:failure_releases_consumer,no_sender_leak,processor_failure_visible,"
        "segment_order,terminal_delivered",
        doc="vLLM-Omni 0.30.0 with a chunk and a segment end per request: a failed "
        "segment-end put lets the next segment's chunks run into the old segment",
        family="chunk_transfer",
        reference=f"{_CT}:reference_two_saves",
    ),
    Target(
        "chunk_transfer_6670",
        f"{_CT}:variant_6670",
        "violates:terminal_delivered",
        doc="vllm-omni #6670: cleanup_sender reclaims a generation whose terminal is queued",
        family="chunk_transfer",
    ),
    Target(
        "chunk_transfer_4855",
        f"{_CT}:variant_4855",
        "violates:no_sender_leak,terminal_delivered",
        doc="vllm-omni #4855: a connector put that returns False is not recorded",
        family="chunk_transfer",
    ),
    Target(
        "chunk_transfer_seed000_p1",
        f"{_CT}:variant_seed000_p1",
        "violates:failure_releases_consumer,no_sender_leak,processor_failure_visible,"
        "terminal_delivered",
        doc="seed 000 P1: a processor exception skips the empty terminal; failure only logged",
        family="chunk_transfer",
    ),
    Target(
        "chunk_transfer_reuse_joins",
        f"{_CT}:variant_reuse_joins",
        "violates:no_current_save_dropped,no_sender_leak,reuse_isolation,terminal_delivered",
        doc="0.30.0: a reused external id joins the old sender generation, its watermarks "
        "and its request_payload",
        family="chunk_transfer",
    ),
    Target(
        "chunk_transfer_no_token_reset",
        f"{_CT}:variant_no_token_reset",
        "violates:no_current_save_dropped,no_sender_leak,terminal_delivered",
        doc="a segment end keeps requests_num_chunks_sent (CTA:486 removed): the next "
        "segment's saves are skipped silently as preemption replays",
        family="chunk_transfer",
        reference=f"{_CT}:reference_two_saves",
    ),
    Target(
        "chunk_transfer_segment_clears",
        f"{_CT}:variant_segment_clears",
        "violates:request_state_retained",
        doc="segment-end post-processing pops request_payload: the producer loses its "
        "request-wide state at every segment boundary",
        family="chunk_transfer",
    ),
)


FUZZ_CONFIG = ChunkTransferConfig(name="chunk_transfer", ids=2, generations=4, saves=4, segments=2)
"""Wider bounds for fuzzing: exhaustive search stops being cheap here, sampling does not."""


def fuzz_system(config: ChunkTransferConfig = FUZZ_CONFIG) -> System:
    """The chunk-transfer system at fuzzing bounds (same behaviour, longer runs)."""
    return build(config)
