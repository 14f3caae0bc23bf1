"""The chunk-transfer system: scheduler, save thread, connector and consumer.

Mirrors vLLM-Omni 0.30.0,
``vllm_omni/distributed/omni_connectors/transfer_adapter/chunk_transfer_adapter.py``
("CTA": ``save_async``, the save loop in ``base.py``, ``_send_single_request``
and ``_send_single_request_for_generation``, ``cleanup_sender``,
``finish_requests``, ``record_send_failure``) and
``vllm_omni/core/sched/omni_scheduler_mixin.py`` ("MIX":
``_log_failed_chunk_sends`` only logs a send failure, so the consumer waits
for its input deadline, ``_process_pending_chunk_timeouts``).

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
  (``finish_requests`` -> ``cleanup_sender``), ``collect_failures``
  (internal: the sweep of recorded send failures each scheduler step; the
  reference fails each request visibly and runs ``finish_requests`` for it,
  0.30.0's ``_log_failed_chunk_sends`` only logs);
* save thread (internal) - ``begin`` (pop the FIFO head; a stale or vetoed
  task is discarded), ``process`` (the processor reads the request's state,
  then returns a payload, returns None or raises), ``put`` (the connector put
  succeeds, returns False or raises; then the post-put bookkeeping, the
  segment-end post-processing and, after a terminal, ``cleanup()``),
  ``finish`` (the task's ``finally``: fence release and deferred reclaim);
* consumer stage (internal) - ``receive`` (takes the next put from the
  connector), ``release`` (its ``finish_requests`` for a request the
  scheduler failed: the consumer stops waiting), ``deadline`` (its
  ``_process_pending_chunk_timeouts``: a consumer still waiting for input
  after ``VLLM_OMNI_INPUT_WAIT_TIMEOUT_S`` is failed).

A send failure thus takes three steps to reach the consumer (recorded by the
save thread, swept by the scheduler, finished on the consumer stage), and
the save thread and the consumer run on in between.

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
that raises does so after it read its state. The consumer waits for a
request's input until its terminal; a client abort before the terminal ends
the request on every stage, so its consumer is not modelled past it. The
600 s input deadline outlasts every other step: it passes only for a
consumer whose producer saved its terminal and for which nothing is left to
run (no task, no unread put, no failure the scheduler or the consumer stage
has yet to act on).

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
    # The scheduler's sweep of recorded send failures fails each request
    # visibly (finish_requests on both stages); in 0.30.0
    # _log_failed_chunk_sends only logs them, so the consumer waits for its
    # input deadline.
    fail_on_send_failure: bool = True
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
    fail_on_send_failure=False,
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


# A queued task: (sender handle, request handle, kind, segment index, save
# number). The segment index and the save number (how many saves of the
# request came before it) are ghosts for the properties; the wire carries only
# ``finished`` and ``is_segment_finished``.
Task = tuple[Handle, Handle, str, int, int]
# The task the save thread runs: (task, phase, detail). Phases: "begun"
# (parked in the processor callback), "putting" (parked in connector.put;
# detail: DATA, EMPTY or ERROR below), "finishing" (the send returned, detail
# None, or raised, detail "raised"; the finally has not run yet).
InFlight = tuple[Task, str, Any]
# What the connector holds and the consumer reads: (request, kind, segment,
# empty, save number); empty: a boundary's finish marker with no payload.
Put = tuple[Handle, str, int, bool, int]
# What a task in connector.put carries: the processor's payload, an empty
# marker (the processor returned None) or the same empty marker sent in place
# of a payload the processor raised on.
DATA, EMPTY, ERROR = "data", "empty", "error"


UNTAKEN_IN_REFERENCE: dict[str, str] = {
    "open--save(late)-->open": "the reference judges a save only against its own "
    "request's watermarks, and within one request generations only grow",
    "open--save(replay)-->open": "token counts only grow within a segment and the "
    "segment end resets the watermark; nothing here re-runs a preempted step",
    "open--stamp-->(same)": "the reference refuses a reused id before save_async "
    "touches the watermarks",
}
"""Watermark transitions only 0.30.0's reuse and the variants take, and why."""

_UNTAKEN = "a transition the reference never takes (UNTAKEN_IN_REFERENCE)"
_RETIRED = "the generation is retired in the same step: its last snapshot is never read"
_GHOST = "a ghost no action reads; only the property it feeds reads it"

EQUIVALENT_MUTANTS: dict[str, str] = {
    # The scheduler-side request.
    "drop-effect request.running--terminal-->terminal_saved": "the terminal's count only "
    "sets requests_num_chunks_sent, which no later save of the reference reads: the request "
    "saves nothing after its terminal, and a reused id is refused until the generation and "
    "its watermarks are gone",
    "drop-effect request.parked--next_segment-->running": "the segment end popped "
    "requests_num_chunks_sent, so the next segment's saves are admitted whatever count they "
    "carry, and nothing else reads the count",
    "skip-require build.<locals>.next_segment: tx.require(request is not None and "
    'tx.fire(request, "next_segment").accepted)': "the fire is the action's only effect: "
    "where next_segment is rejected the step changes nothing",
    "skip-require build.<locals>.abort: tx.require(request is not None and "
    "_finish_requests(tx, request, isolate=isolate))": "where abort is not accepted the "
    "request is already aborted: its generation is cancelled, gone or another request's, "
    "and a second cleanup_sender changes nothing",
    # The sender generation.
    "drop-guard sender_generation.open|terminal_pending--begin-->(same)": "one save thread: "
    "a task begins only after the previous task's finally cleared in_flight, so the guard "
    "always holds at begin",
    "drop-guard sender_generation.draining--begin-->(same)": "the pre-put check "
    "(_sender_generation_is_active) vetoes the same chunk, so nothing more is put; its "
    "processor running first is what the reference does when the cancel lands while the "
    "chunk is in the processor",
    "drop-effect sender_generation.draining--end-->reclaimed": _RETIRED,
    "drop-effect sender_generation.retiring--end-->reclaimed": _RETIRED,
    "drop-guard sender_generation.retiring--end-->reclaimed": "a generation retires only "
    "while in flight, and only its running task's finally fires end: the guard always holds",
    # The segment watermarks: only the late and replay branches compare them.
    "drop-emit segment_watermark.open--save(late)-->open": _UNTAKEN,
    "drop-effect segment_watermark.open--save(replay)-->open": _UNTAKEN,
    "drop-emit segment_watermark.open--save(replay)-->open": _UNTAKEN,
    "drop-effect segment_watermark.open--stamp-->(same)": _UNTAKEN,
    "drop-effect segment_watermark.open--save(admit)-->open": "the watermarks an admitted "
    "save records are compared only by the late and replay branches, which the reference "
    "never takes (UNTAKEN_IN_REFERENCE)",
    "drop-effect segment_watermark.open--save(segment end, advance)-->open": "the watermarks "
    "a segment end records are compared only by the late and replay branches, which the "
    "reference never takes (UNTAKEN_IN_REFERENCE)",
    # The producer state.
    "drop-effect request_state.open|failed--release-->released": _RETIRED,
    'skip-fire release_state: tx.fire(state, "release")': _RETIRED,
    'skip-set release_state: tx.set("made", frozenset(m for m in tx.get("made") if m[0] != '
    "state))": "a made entry names a state generation: once it is retired no live handle "
    "equals it (_read_state and request_state_retained compare generations)",
    'skip-fire _fail: tx.fire(held, "send_failed")': "the reference's request state keeps "
    "its namespaces on send_failed, and open and failed accept the same events",
    'skip-fire build.<locals>.put: tx.fire(state, "complete_segment")': "the reference's "
    "request state keeps request-wide state at a segment end: the transition changes nothing",
    # Ghosts and outputs only the spec reads.
    'skip-set build.<locals>.save: tx.set("owed", tx.get("owed") | {(request, before.saved)})': (
        _GHOST
    ),
    'skip-set build.<locals>.put: tx.set("error_markers", tx.get("error_markers") | '
    "{request})": _GHOST,
    'skip-set _fail: tx.set("failures", tx.get("failures") | {request})': _GHOST,
    'skip-set build.<locals>.save: tx.set("terminals", tx.get("terminals") | {request})': "read "
    "only by terminal_delivered and by the deadline, which the reference never reaches: "
    "each terminal it saves is received or its request released",
    "skip-emit build.<locals>.receive: tx.emit(": "the output feeds only the consumer "
    "monitors; no action reads it",
    'skip-emit build.<locals>.release: tx.emit(out("released", request=request))': "the "
    "output feeds only the segment_order monitor, where at one save per request no read is "
    "out of order for it to excuse",
    # Steps that become self-loops.
    'skip-set build.<locals>.collect_failures: tx.set("send_failures", frozenset())': "the "
    "undrained set changes nothing else: every later sweep finds its requests already "
    "failed and finished",
    'skip-set build.<locals>.release: tx.set("failed", tx.get("failed") - pending)': "every "
    "later release finds its requests already released, and the monitors ignore a second "
    "released",
    'skip-set build.<locals>.put: tx.set("in_flight", (task, "finishing", "raised"))': "a "
    "raising put becomes a self-loop (the task stays in connector.put): the mutant reaches "
    "no state the reference does not",
    "skip-require build.<locals>.collect_failures: tx.require(collected)": "with nothing "
    "collected the sweep changes nothing: a self-loop",
    "skip-require build.<locals>.release: tx.require(pending)": "with nothing pending the "
    "release changes nothing: a self-loop",
    "skip-require build.<locals>.deadline: tx.require(starved)": "with no starved consumer "
    "the deadline changes nothing: a self-loop",
    "negate-require build.<locals>.deadline: tx.require(starved)": "the reference never "
    "starves a consumer, so the deadline only runs where nothing is starved, and there it "
    "changes nothing",
}
"""Mutants of the reference that behave like it (``statecore check --adequacy``), and why."""


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

    isolate = config.isolate_reuse

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
            _fail(tx, request)  # refused visibly: the old generation still lives
            return
        mark: tuple[str, Hashable] = ("watermark", ext)
        if not config.isolate_reuse and _late(tx.snapshot(mark), generation):
            tx.fire(mark, "save", **_save_payload(kind, generation, after.tokens))
            tx.set("lost", tx.get("lost") | {request})  # "Skip late save_async"
            return
        if cancelled:  # "previous sender generation is still draining"
            tx.fire(mark, "stamp", generation=generation)
            _fail(tx, request)
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
        else:  # admitted: the consumer is owed this chunk or segment end
            tx.set("owed", tx.get("owed") | {(request, before.saved)})
        tx.set("queue", (*tx.get("queue"), (token, request, kind, before.ends, before.saved)))

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
        tx.require(request is not None and _finish_requests(tx, request, isolate=isolate))

    def collect_failures(tx: Tx) -> None:
        # _log_failed_chunk_sends, every scheduler step:
        # collect_failed_send_request_ids() drains _send_failures.
        collected = tx.get("send_failures")
        tx.require(collected)
        tx.set("send_failures", frozenset())
        if not config.fail_on_send_failure:
            return  # 0.30.0: each is logged; the consumer waits for its input deadline
        already = tx.get("failed") | tx.get("released")
        for request in sorted(collected - already, key=_generation):
            # The request fails visibly (its consumer is owed nothing more): the
            # orchestrator ends it on every stage; on this one, finish_requests,
            # and the consumer stage is told to finish it too.
            tx.set("failed", tx.get("failed") | {request})
            _settle(tx, request)
            _finish_requests(tx, request, isolate=isolate)

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
        token, request, kind, _, number = task
        _read_state(tx, token, request)
        if outcome == "raise" and config.processor_raise != "log":
            _fail(tx, request, state=True)
            if config.processor_raise == "record_and_skip":
                _end(tx, task)
                return
        if outcome != "payload" and kind == CHUNK:
            if outcome == "none":  # the processor has nothing to send for this chunk
                tx.set("owed", tx.get("owed") - {(request, number)})
            _end(tx, task)  # nothing is put (on a raise, 0.30.0 records nothing either)
            return
        snap = tx.snapshot(token)
        if snap is None or (snap.state in CANCELLED and kind != TERMINAL):
            _end(tx, task)  # _sender_generation_is_active fails: no put, no failure
            return
        # A boundary without a payload still sends an empty finish marker.
        payload = DATA if outcome == "payload" else ERROR if outcome == "raise" else EMPTY
        tx.set("in_flight", (task, "putting", payload))

    def put(tx: Tx, outcome: str) -> None:
        # connector.put returns (or raises); then the post-put bookkeeping.
        flight = tx.get("in_flight")
        tx.require(flight is not None and flight[1] == "putting")
        task: Task = flight[0]
        token, request, kind, segment, number = task
        if outcome == "ok":
            item: Put = (request, kind, segment, flight[2] != DATA, number)
            tx.set("mailbox", (*tx.get("mailbox"), item))
            if flight[2] == ERROR and request not in tx.get("released"):
                # a marker in place of a payload the processor raised on
                tx.set("error_markers", tx.get("error_markers") | {request})
        if outcome == "raise":  # propagates through the finally to the save loop
            tx.set("in_flight", (task, "finishing", "raised"))
            return
        tx.set("in_flight", (task, "finishing", None))
        snap = tx.snapshot(token)
        if snap is None or (snap.state == "retiring" and kind != TERMINAL):
            return  # "Ignoring completed put for retired request"
        if outcome == "false" and config.record_false_put:
            _fail(tx, request, state=True)
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
            _fail(tx, task[1], state=True)

    # -- consumer stage --------------------------------------------------------------

    def receive(tx: Tx) -> None:
        mailbox = tx.get("mailbox")
        tx.require(mailbox)
        request, kind, segment, empty, number = mailbox[0]
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
        else:
            tx.set("owed", tx.get("owed") - {(request, number)})

    def release(tx: Tx, ext: Hashable) -> None:
        # The consumer stage's finish_requests for a request the orchestrator
        # failed: its consumer stops waiting for input.
        pending = frozenset(r for r in tx.get("failed") if r.key == ext)
        tx.require(pending)
        tx.set("failed", tx.get("failed") - pending)
        tx.set("error_markers", tx.get("error_markers") - pending)
        for request in sorted(pending, key=_generation):
            tx.set("released", tx.get("released") | {request})
            tx.emit(out("released", request=request))

    def deadline(tx: Tx, ext: Hashable) -> None:
        # The consumer stage's _process_pending_chunk_timeouts: a request whose
        # producer saved its terminal and that still waits for input is failed
        # after VLLM_OMNI_INPUT_WAIT_TIMEOUT_S (600 s). That outlasts every
        # other step, so it passes only when nothing for the request is left.
        over = tx.get("received") | tx.get("released") | tx.get("timed_out")
        starved = frozenset(
            r for r in tx.get("terminals") - over if r.key == ext and not _in_progress(tx, r)
        )
        tx.require(starved)
        tx.set("timed_out", tx.get("timed_out") | starved)

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
            Global(
                "queue",
                (),
                doc="_pending_save_reqs: FIFO of (token, request, kind, segment, save number)",
            ),
            Global("in_flight", None, doc="the task the save thread is running"),
            Global("mailbox", (), doc="puts the connector holds for the consumer"),
            Global("send_failures", frozenset(), doc="_send_failures: not yet collected"),
            Global(
                "failed",
                frozenset(),
                doc="requests the scheduler failed visibly, not yet finished on the consumer stage",
            ),
            Global("received", frozenset(), doc="requests whose consumer got finished=True"),
            Global("released", frozenset(), doc="requests whose consumer stage finished them"),
            Global("timed_out", frozenset(), doc="requests whose consumer's deadline passed"),
            Global("terminals", frozenset(), doc="requests whose terminal the scheduler saved"),
            Global("owners", frozenset(), doc="(sender generation, request that opened it)"),
            Global("failures", frozenset(), doc="ghost: requests with a recorded send failure"),
            Global("owed", frozenset(), doc="ghost: (request, save number) the consumer is owed"),
            Global(
                "error_markers",
                frozenset(),
                doc="ghost: requests not failed visibly whose connector got a marker in place "
                "of a payload the processor raised on",
            ),
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
            Action("collect_failures", "scheduler", collect_failures, internal=True),
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
            Action("release", "consumer", release, ext_param, internal=True),
            Action("deadline", "consumer", deadline, ext_param, internal=True),
        ],
        properties=properties(config.segments, reuse=config.generations > 1),
        equivalent_mutants=EQUIVALENT_MUTANTS,
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


def _fail(tx: Tx, request: Handle, *, state: bool = False) -> None:
    """``record_send_failure``; `state`: the request's own send failed (not a refusal)."""
    tx.set("failures", tx.get("failures") | {request})
    tx.set("send_failures", tx.get("send_failures") | {request})
    held = tx.handle("state", request.key)
    if state and held is not None:
        tx.fire(held, "send_failed")


def _finish_requests(tx: Tx, request: Handle, *, isolate: bool) -> bool:
    """``finish_requests`` on the producer stage; whether it ended `request`.

    The request ends (unless it is over, or a new request took its id), the
    chunks it still has queued are owed to nobody (the cancelled generation
    discards them), and ``cleanup_sender`` runs for its external id. With
    `isolate` (the reference), a generation another request opened is left
    alone: one request's finish never cancels another's chunks.
    """
    ended = tx.fire(request, "abort").accepted
    if ended:
        _settle(tx, request)
    token = tx.handle("sender", request.key)
    if isolate and token is not None and (token, request) not in tx.get("owners"):
        return ended
    if ended or token is not None:
        _cleanup_sender(tx, request.key)
    return ended


def _settle(tx: Tx, request: Handle) -> None:
    """`request` owes its consumer no chunk any more: it failed or was finished."""
    tx.set("owed", frozenset(o for o in tx.get("owed") if o[0] != request))


def _in_progress(tx: Tx, request: Handle) -> bool:
    """Whether something for `request` is left to run: a task, a put, a failure to act on."""
    flight = tx.get("in_flight")
    return (
        any(task[1] == request for task in tx.get("queue"))
        or (flight is not None and flight[0][1] == request)
        or any(item[0] == request for item in tx.get("mailbox"))
        or request in tx.get("send_failures")
        or request in tx.get("failed")
    )


def _generation(handle: Handle) -> int:
    return handle.generation


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
            fail_on_send_failure=False,
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
        "violates:chunk_delivered,failure_releases_consumer,no_current_save_dropped,"
        "no_sender_leak,processor_failure_visible,reuse_isolation,terminal_delivered",
        doc="vLLM-Omni 0.30.0 as released (see docs/findings.md)",
        family="chunk_transfer",
    ),
    Target(
        "chunk_transfer_0_30_0_segments",
        f"{_CT}:released_0_30_0_segments",
        "violates:chunk_delivered,failure_releases_consumer,no_sender_leak,"
        "processor_failure_visible,segment_order,terminal_delivered",
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
        "violates:chunk_delivered,no_sender_leak,terminal_delivered",
        doc="vllm-omni #4855: a connector put that returns False is not recorded",
        family="chunk_transfer",
    ),
    Target(
        "chunk_transfer_seed000_p1",
        f"{_CT}:variant_seed000_p1",
        "violates:chunk_delivered,failure_releases_consumer,no_sender_leak,terminal_delivered",
        doc="seed 000 P1: a processor exception skips the empty terminal; failure only logged",
        family="chunk_transfer",
    ),
    Target(
        "chunk_transfer_reuse_joins",
        f"{_CT}:variant_reuse_joins",
        "violates:chunk_delivered,no_current_save_dropped,reuse_isolation,terminal_delivered",
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
