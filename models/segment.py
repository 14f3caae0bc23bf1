"""Resumable realtime segments under one request id: the segment-generation watermark.

Mirrors vLLM-Omni 0.30.0. Paths are relative to ``vllm_omni/``; ``CTA`` is
``distributed/omni_connectors/transfer_adapter/chunk_transfer_adapter.py``,
``ARS`` ``core/sched/omni_ar_scheduler.py``, ``MIX``
``core/sched/omni_scheduler_mixin.py``:

* ``save_async`` (CTA:370-492), the admission of one chunk:

  - ``is_finished = force_request_finished or (request.is_finished() and not
    request.resumable)`` (CTA:409): a resumable request's stop is a *segment
    end* (``is_segment_finished=True``), not the *request end*
    (``is_finished=True``, the terminal);
  - the segment watermark (CTA:412-430): ``generation`` is the explicit
    ``segment_generation`` or ``request._omni_segment_generation`` (0 when
    absent); ``expected = _segment_generation.get(ext, generation)``; a save
    with ``generation < expected`` is a late save for an old segment and
    returns **silently** ("Skip late save_async", no failure recorded);
    otherwise ``_segment_generation[ext] = generation``, before the lock;
  - the token watermark (CTA:452-464): a save that is not a segment end and
    whose ``confirmed_num_computed_tokens`` is below
    ``requests_num_chunks_sent[ext]`` is skipped silently as a preemption
    replay (a terminal is *not* exempt); otherwise the watermark is set to
    the confirmed count and the task is queued (CTA:464-469);
  - a queued segment end (CTA:474-486) advances ``_segment_generation[ext]``
    to ``generation + 1`` only when the request carries
    ``_omni_segment_generation`` (CTA:482-483), else keeps ``generation``
    (CTA:485, the #6816 fix: "a speculative +1 makes every subsequent frame
    look stale and starves the stream permanently"), and pops the token
    watermark (CTA:486);
* the save thread (``save_loop``, ``_send_single_request_for_generation``,
  CTA:764-909) puts the queued tasks in FIFO order; the connector keys are
  request-global (``put_req_chunk`` keeps counting across segments), so the
  consumer reads them in that order; a successful terminal put runs
  ``cleanup`` (CTA:882), whose ``_clear_sender_state_locked`` (CTA:1029-1043)
  pops both watermarks;
* the scheduler: ARS:656-676 turns a resumable stop into a segment end and
  passes the boundary generation it captured (ARS:667, ARS:768-782); a new
  segment installed by a streaming update bumps ``_omni_segment_generation``
  (``getattr(..., 0) + 1``, which *creates* the attribute: MIX:198,
  ARS:905/981/1006), and a rebuilt prompt is admitted from zero (ARS:977,
  MIX:196-204); a native-duplex receiver resumes the next segment without an
  update, hence without a bump (``_resume_downstream_chunk_receiver``,
  MIX:825-838, called at ARS:683); ``_finish_parked_streaming_session``
  (MIX:926-943) bumps the counter, "exactly as ``_update_request_as_session``
  would have, or ``save_async`` drops this chunk as a late duplicate"
  (MIX:929-933), then saves the terminal with ``force_request_finished``.

Machines:

* ``realtime_request`` - the scheduler's request: ``new`` (not yet arrived;
  ``arrive(counter)`` says whether it carries ``_omni_segment_generation``),
  ``streaming`` (a segment is open), ``parked`` (its segment end was saved;
  waiting for the next segment or the end of the session), ``ended`` (the
  request end was saved). Variables: ``counter``, ``gen`` (the counter's
  value, 0 when absent), ``ends`` (segment ends saved = the index of the open
  segment), ``chunks`` (chunks saved in the open segment), ``tokens`` (the
  confirmed token count each save reports);
* ``segment_watermark`` - the adapter's admission state for one external id:
  ``expected`` (``_segment_generation[ext]``, None when absent) and ``sent``
  (``requests_num_chunks_sent[ext]``, None when absent). One transition per
  branch of ``save_async``: ``late``, ``replay``, ``admit``, and the segment
  end's ``advance`` (+1) / ``stay``; ``clear`` is the terminal's cleanup.

The system `segments` (one external id):

* scheduler - ``arrive``; ``chunk`` (a chunk of the open segment);
  ``segment_end``; ``next_segment(mode)`` (``update``: a streaming update
  bumps the counter and rebuilds the prompt, so the confirmed count restarts
  at 0; ``resume``: a native-duplex resume, no bump, the count goes on);
  ``finish`` (the request ends inside its open segment, ARS natural finish);
  ``end_parked`` (``_finish_parked_streaming_session``); ``late_save`` (a
  frame of the segment whose end was already saved arrives while the request
  is parked, reading the request's - still old - generation);
  ``preempted_rerun`` (a preempted request recomputes, and a re-run step saves
  a chunk below the token watermark: CTA:451 "If the request is preempted,
  skip the already saved chunks"; the skip is deduplication, not a loss);
* save thread (internal) - ``send``: the head of the FIFO is put;
* consumer (internal) - ``receive``: the next key is read, in order.

Each queued task carries, as ghosts the wire does not carry, the segment it
belongs to, whether it is the late save, and the step it saves (the confirmed
token count of the scheduler step), so that the consumer's reads can be judged
segment by segment and step by step.

Simplifications: one external id and one request; one chunk per segment
(`SegmentConfig.chunks`) and three segments (`SegmentConfig.segments`); every
scheduler step that saves commits exactly one token (a chunk, a segment end's
stop step, a natural finish) and the parked terminal commits none; cancellation,
send failures, processors and connector failures are
`statecore.models.chunk_transfer`'s business, so every queued task is put and
read; ``send`` is one step (the admission decisions all happen in
``save_async``, so splitting the put changes nothing here); the consumer is the
ordered stream of connector keys (registration and polling are
`statecore.models.receiver`'s business). A late save is issued only while the
request is parked and carries the counter: a frame of a segment whose end was
saved after the next segment's update bumped the counter reads the *new*
generation, so the watermark cannot see it (the scheduler's async-token
discard, ``num_stale_output_tokens``, is what drops it; not modelled); and for
a request without the counter, a late frame of segment k and a frame of a
resumed segment k+1 both carry generation 0, so since #6816 the adapter
delivers both by design (the model does not judge that trade-off). The
queued-update case, where ``_handle_stopped_request`` bumps the counter between
ARS:667 and the segment end's ``save_async``, advances like the counter case
and is not modelled separately. No save happens after the request end (the
scheduler has freed the request), so the watermark popped by the terminal's
cleanup is never consulted again. ``next_segment(resume)`` is enabled only
for a request without the counter: the fix at CTA:482 relies on a request
that carries the counter being bumped before its next segment ("a
request-side counter that can catch up"); a request that carries it and
resumed without a bump would have its next segment dropped as late in 0.30.0
too. Whether a native-duplex resume (ARS:683) can meet a request whose
counter an earlier streaming update created is not established here.

Every transition of both machines is taken in the reference, which holds with
no vacuous property. Mutants no property can tell from the reference
(``statecore check --adequacy``), declared in `EQUIVALENT_MUTANTS`: the
replay branch's ``expected = gen`` (a re-run follows an admitted chunk of the
same generation, which already set it); the scheduler's check that the
request exists (init spawns it and nothing retires it); the one-late-save
bound (every late save is dropped with no state change, so a second adds
nothing); and the consumer's ``received`` output (an observation).

`SegmentConfig` selects the behaviour; each variant flips one switch:

* ``segments_6816`` - before #6816 a segment end always advanced the watermark
  to ``generation + 1``; a request without the counter that resumes its next
  segment (no bump) then has every later save dropped as late;
* ``segments_parked_unbumped`` - ``_finish_parked_streaming_session`` without
  the bump of MIX:933: the parked session's terminal is dropped as late;
* ``segments_no_token_reset`` - the segment end keeps the token watermark
  (CTA:486 removed): a rebuilt segment's chunks and terminal, whose confirmed
  counts restart at 0, are skipped as a preemption replay (the terminal is not
  exempt);
* ``segments_no_dedup`` - the segment end never advances the watermark: a late
  save for the old segment reaches the consumer after the segment's end (what
  the +1 of CTA:474-483 is for: "The queued FIFO item now owns the old
  segment"). The admitted late save also re-sets the token watermark that the
  segment end had just popped, so a rebuilt next segment's chunks and its
  terminal are then skipped as replays. 0.30.0 admits a late frame of a
  request *without* the counter in the same way (see above); whether such a
  frame can reach ``save_async`` while the request is parked depends on the
  scheduler's async-token discard, which the model does not claim either way.
"""

from __future__ import annotations

from collections.abc import Hashable, Mapping
from dataclasses import dataclass
from typing import Any, Literal

from statecore import Event, Field, Machine, Snapshot, State, Transition, Var, out
from statecore.registry import Target
from statecore.system import Action, Component, Global, Keys, System, Tx

BOOL = (False, True)

CHUNK = "chunk"
SEGMENT_END = "segment_end"
TERMINAL = "terminal"
KINDS: tuple[str, ...] = (CHUNK, SEGMENT_END, TERMINAL)

UPDATE = "update"
RESUME = "resume"

Advance = Literal["counter", "always", "never"]

# A queued task: (kind, segment index it belongs to, is a late save, the
# confirmed token count of the step it saves). The segment index, the late
# flag and the step are ghosts for the properties: the wire carries only
# ``finished`` and ``is_segment_finished``.
Task = tuple[str, int, bool, int]


@dataclass(frozen=True)
class SegmentConfig:
    """Behaviour switches; each names the vLLM-Omni code it comes from."""

    name: str = "segments"
    segments: int = 3
    chunks: int = 1  # chunks per segment
    # When a queued segment end advances _segment_generation to gen + 1:
    # "counter" - only if the request carries _omni_segment_generation (0.30.0,
    # the #6816 fix, CTA:482-485); "always" - before #6816; "never" - no
    # deduplication of late saves at all.
    advance: Advance = "counter"
    # A queued segment end pops requests_num_chunks_sent (CTA:486).
    reset_tokens: bool = True
    # _finish_parked_streaming_session bumps _omni_segment_generation (MIX:933).
    parked_end_bumps: bool = True

    @property
    def max_tokens(self) -> int:
        """The largest confirmed count a save can report (one token per save)."""
        return self.segments * (self.chunks + 1)


def realtime_request_machine(
    segments: int = 3, chunks: int = 1, *, parked_end_bumps: bool = True
) -> Machine:
    """The scheduler's resumable request; ``parked_end_bumps=False`` drops MIX:933."""
    max_tokens = segments * (chunks + 1)

    def tick(s: Snapshot) -> int:
        return int(s.tokens) + 1

    end_parked = (
        Transition(
            "parked",
            "end_parked",
            "ended",
            effect=lambda s, p: {"counter": True, "gen": s.gen + 1},
            effect_label="_omni_segment_generation += 1 (MIX:933)",
        )
        if parked_end_bumps
        else Transition("parked", "end_parked", "ended", effect_label="no bump")
    )
    return Machine(
        "realtime_request",
        doc="A resumable realtime request as the scheduler drives it (see the module doc).",
        states=[
            State("new", initial=True, doc="not arrived yet"),
            State("streaming", doc="a segment is open"),
            State("parked", doc="its segment end was saved; waiting for the next segment"),
            State("ended", final=True, doc="the request end was saved"),
        ],
        variables=[
            Var("counter", BOOL, False, doc="the request carries _omni_segment_generation"),
            Var("gen", range(segments + 1), 0, doc="_omni_segment_generation (0 when absent)"),
            Var("ends", range(segments + 1), 0, doc="segment ends saved: the open segment"),
            Var("chunks", range(chunks + 1), 0, doc="chunks saved in the open segment"),
            Var("tokens", range(max_tokens + 1), 0, doc="confirmed_num_computed_tokens"),
        ],
        events=[
            Event("arrive", [Field("counter", BOOL)], doc="the request is admitted"),
            Event("chunk", doc="a step of the open segment saves a chunk"),
            Event("segment_end", doc="a resumable stop: is_segment_finished=True"),
            Event(
                "next_segment",
                [Field("mode", (UPDATE, RESUME))],
                doc="update: a streaming update bumps the counter and rebuilds the prompt; "
                "resume: native duplex resumes without a bump",
            ),
            Event("finish", doc="the request ends inside its open segment"),
            Event("end_parked", doc="_finish_parked_streaming_session"),
        ],
        transitions=[
            Transition(
                "new",
                "arrive",
                "streaming",
                effect=lambda s, p: {"counter": p["counter"]},
                effect_label="counter",
            ),
            Transition(
                "streaming",
                "chunk",
                None,
                guard=lambda s, p: s.chunks < chunks,
                guard_label=f"chunks < {chunks}",
                effect=lambda s, p: {"chunks": s.chunks + 1, "tokens": tick(s)},
                effect_label="chunks += 1, tokens += 1",
            ),
            Transition(
                "streaming",
                "segment_end",
                "parked",
                effect=lambda s, p: {"ends": s.ends + 1, "tokens": tick(s)},
                effect_label="ends += 1, tokens += 1",
            ),
            Transition(
                "parked",
                "next_segment",
                "streaming",
                guard=lambda s, p: p["mode"] == UPDATE and s.ends < segments,
                guard_label=f"update, ends < {segments}",
                effect=lambda s, p: {"counter": True, "gen": s.gen + 1, "chunks": 0, "tokens": 0},
                effect_label="gen += 1 (creates the counter), prompt rebuilt",
                name="parked--next_segment(update)-->streaming",
            ),
            Transition(
                "parked",
                "next_segment",
                "streaming",
                guard=lambda s, p: p["mode"] == RESUME and s.ends < segments and not s.counter,
                guard_label=f"resume, ends < {segments}, no counter",
                effect=lambda s, p: {"chunks": 0},
                effect_label="no bump",
                name="parked--next_segment(resume)-->streaming",
            ),
            Transition(
                "streaming",
                "finish",
                "ended",
                effect=lambda s, p: {"tokens": tick(s)},
                effect_label="tokens += 1",
            ),
            end_parked,
        ],
    )


def segment_watermark_machine(
    segments: int = 3,
    max_tokens: int = 6,
    *,
    advance: Advance = "counter",
    reset_tokens: bool = True,
    stamp: bool = False,
) -> Machine:
    """The admission branches of ``save_async`` for one external id.

    ``stamp=True`` adds the ``stamp`` event for a system that models the
    sender lock: a save that passes the late check sets ``_segment_generation``
    before the lock (CTA:430), even if the lock then rejects it.
    """
    generations = range(segments + 1)

    def late(s: Snapshot, p: Mapping[str, Any]) -> bool:
        return s.expected is not None and p["generation"] < s.expected

    def replay(s: Snapshot, p: Mapping[str, Any]) -> bool:
        sent = 0 if s.sent is None else s.sent
        return p["kind"] != SEGMENT_END and bool(p["confirmed"] < sent)

    def boundary(s: Snapshot, p: Mapping[str, Any]) -> bool:
        return not late(s, p) and p["kind"] == SEGMENT_END

    def sent_after_boundary(p: Mapping[str, Any]) -> int | None:
        return None if reset_tokens else int(p["confirmed"])

    admitted = (out("admitted"),)
    stamps_events = (
        [
            Event(
                "stamp",
                [Field("generation", generations)],
                policy="error",
                doc="a save the sender lock rejects: only _segment_generation is set",
            )
        ]
        if stamp
        else []
    )
    stamps = (
        [
            Transition(
                "open",
                "stamp",
                None,
                effect=lambda s, p: {"expected": p["generation"]},
                effect_label="expected = gen",
            )
        ]
        if stamp
        else []
    )
    boundaries: list[Transition] = []
    if advance in ("counter", "always"):
        boundaries.append(
            Transition(
                "open",
                "save",
                None,
                guard=(lambda s, p: boundary(s, p) and p["counter"])
                if advance == "counter"
                else boundary,
                guard_label="segment end" + (", counter" if advance == "counter" else ""),
                effect=lambda s, p: {
                    "expected": p["generation"] + 1,
                    "sent": sent_after_boundary(p),
                },
                effect_label="expected = gen + 1"
                + (", pop sent" if reset_tokens else ", sent = confirmed"),
                emit=admitted,
                name="open--save(segment end, advance)-->open",
            )
        )
    if advance in ("counter", "never"):
        boundaries.append(
            Transition(
                "open",
                "save",
                None,
                guard=(lambda s, p: boundary(s, p) and not p["counter"])
                if advance == "counter"
                else boundary,
                guard_label="segment end" + (", no counter" if advance == "counter" else ""),
                effect=lambda s, p: {
                    "expected": p["generation"],
                    "sent": sent_after_boundary(p),
                },
                effect_label="expected = gen"
                + (", pop sent" if reset_tokens else ", sent = confirmed"),
                emit=admitted,
                name="open--save(segment end, stay)-->open",
            )
        )
    return Machine(
        "segment_watermark",
        doc="save_async's admission state for one external id (see the module doc).",
        states=[State("open", initial=True, doc="the adapter's per-external-id dicts")],
        variables=[
            Var(
                "expected",
                (None, *range(segments + 2)),
                None,
                doc="_segment_generation[ext] (None: absent)",
            ),
            Var(
                "sent",
                (None, *range(max_tokens + 1)),
                None,
                doc="requests_num_chunks_sent[ext] (None: absent)",
            ),
        ],
        events=[
            Event(
                "save",
                [
                    Field("kind", KINDS),
                    Field("generation", generations),
                    Field("confirmed", range(max_tokens + 1)),
                    Field("counter", BOOL),
                ],
                policy="error",
                doc="save_async(kind) of a request at this generation and token count",
            ),
            Event("clear", policy="ignore", doc="_clear_sender_state_locked (terminal cleanup)"),
            *stamps_events,
        ],
        transitions=[
            Transition(
                "open",
                "save",
                None,
                guard=late,
                guard_label="generation < expected",
                emit=(out("skipped", reason="late"),),
                name="open--save(late)-->open",
            ),
            Transition(
                "open",
                "save",
                None,
                guard=lambda s, p: not late(s, p) and replay(s, p),
                guard_label="not a segment end, confirmed < sent",
                effect=lambda s, p: {"expected": p["generation"]},
                effect_label="expected = gen",
                emit=(out("skipped", reason="replay"),),
                name="open--save(replay)-->open",
            ),
            Transition(
                "open",
                "save",
                None,
                guard=lambda s, p: not late(s, p) and p["kind"] != SEGMENT_END and not replay(s, p),
                guard_label="chunk or terminal",
                effect=lambda s, p: {"expected": p["generation"], "sent": p["confirmed"]},
                effect_label="expected = gen, sent = confirmed",
                emit=admitted,
                name="open--save(admit)-->open",
            ),
            *boundaries,
            Transition(
                "open",
                "clear",
                None,
                effect=lambda s, p: {"expected": None, "sent": None},
                effect_label="pop both",
            ),
            *stamps,
        ],
    )


EQUIVALENT_MUTANTS: dict[str, str] = {
    "drop-effect segment_watermark.open--save(replay)-->open": "a re-run follows an admitted "
    "chunk of the same generation, which already set expected to it",
    "skip-require build.<locals>.scheduler_step: tx.require(handle is not None)": "init "
    "spawns the request and nothing retires it: the handle always exists",
    'skip-require build.<locals>.late_save: tx.require(not tx.get("late_issued"))': "every "
    "late save is dropped with no state change, so a second one adds nothing",
    'skip-emit build.<locals>.receive: tx.emit(out("received", kind=kind, segment=segment, '
    "late=late, step=step))": "an output only: the consumer's state changes the same",
}
"""Mutants of `segments` that behave like it, by id, with the reason."""


def build(config: SegmentConfig = SegmentConfig()) -> System:
    """The segments system for `config`, with the spec's properties."""
    from statecore.spec.segment import properties

    ext_keys = Keys("ext", 1)
    request = realtime_request_machine(
        config.segments, config.chunks, parked_end_bumps=config.parked_end_bumps
    )
    watermark = segment_watermark_machine(
        config.segments,
        config.max_tokens,
        advance=config.advance,
        reset_tokens=config.reset_tokens,
    )

    def init(tx: Tx) -> None:
        for ext in ext_keys.values:
            tx.spawn("request", ext)
            tx.spawn("watermark", ext)

    def admit(tx: Tx, ext: Hashable, kind: str, snap: Snapshot) -> bool:
        """``save_async``'s admission for a save of `snap`'s request; True if queued."""
        outcome = tx.fire(
            ("watermark", ext),
            "save",
            kind=kind,
            generation=snap.gen,
            confirmed=snap.tokens,
            counter=snap.counter,
        )
        return outcome.outputs[0].name == "admitted"

    def scheduler_step(tx: Tx, ext: Hashable, event: str, kind: str | None, **payload: Any) -> None:
        handle = tx.handle("request", ext)
        tx.require(handle is not None)
        assert handle is not None
        before = tx.snapshot(handle)
        assert before is not None
        tx.require(tx.fire(handle, event, **payload).accepted)
        if kind is None:
            return
        after = tx.snapshot(handle)
        assert after is not None
        if admit(tx, ext, kind, after):
            task: Task = (kind, before.ends, False, after.tokens)
            tx.set("queue", (*tx.get("queue"), task))
        else:
            tx.set("lost", True)  # a save of the request's own segment, dropped silently

    def arrive(tx: Tx, ext: Hashable, counter: bool) -> None:
        scheduler_step(tx, ext, "arrive", None, counter=counter)

    def chunk(tx: Tx, ext: Hashable) -> None:
        scheduler_step(tx, ext, "chunk", CHUNK)

    def segment_end(tx: Tx, ext: Hashable) -> None:
        scheduler_step(tx, ext, "segment_end", SEGMENT_END)

    def next_segment(tx: Tx, ext: Hashable, mode: str) -> None:
        scheduler_step(tx, ext, "next_segment", None, mode=mode)

    def finish(tx: Tx, ext: Hashable) -> None:
        scheduler_step(tx, ext, "finish", TERMINAL)

    def end_parked(tx: Tx, ext: Hashable) -> None:
        scheduler_step(tx, ext, "end_parked", TERMINAL)

    def late_save(tx: Tx, ext: Hashable) -> None:
        tx.require(not tx.get("late_issued"))
        snap = tx.snapshot(("request", ext))
        tx.require(snap is not None and snap.state == "parked" and snap.counter)
        assert snap is not None
        tx.set("late_issued", True)
        if admit(tx, ext, CHUNK, snap):
            task: Task = (CHUNK, snap.ends - 1, True, snap.tokens)
            tx.set("queue", (*tx.get("queue"), task))
            tx.set("late_enqueued", True)

    def preempted_rerun(tx: Tx, ext: Hashable) -> None:
        # A preempted request recomputes: a re-run step saves a chunk whose
        # confirmed count is below the token watermark (already sent). The
        # skip is the intended deduplication, not a loss; nothing changes.
        snap = tx.snapshot(("request", ext))
        tx.require(snap is not None and snap.state == "streaming" and snap.chunks >= 1)
        assert snap is not None
        outcome = tx.fire(
            ("watermark", ext),
            "save",
            kind=CHUNK,
            generation=snap.gen,
            confirmed=snap.tokens - 1,
            counter=snap.counter,
        )
        if outcome.outputs[0].name == "admitted":  # a duplicate goes out
            task: Task = (CHUNK, snap.ends, False, snap.tokens - 1)
            tx.set("queue", (*tx.get("queue"), task))

    def send(tx: Tx) -> None:
        queue = tx.get("queue")
        tx.require(queue)
        task: Task = queue[0]
        tx.set("queue", queue[1:])
        if task[0] == TERMINAL:  # the put succeeded: cleanup pops both watermarks
            for ext in ext_keys.values:
                tx.fire(("watermark", ext), "clear")
        tx.set("mailbox", (*tx.get("mailbox"), task))

    def receive(tx: Tx) -> None:
        mailbox = tx.get("mailbox")
        tx.require(mailbox)
        kind, segment, late, step = mailbox[0]
        tx.set("mailbox", mailbox[1:])
        tx.emit(out("received", kind=kind, segment=segment, late=late, step=step))
        if kind == SEGMENT_END:
            tx.set("seen_ends", tx.get("seen_ends") + 1)
        elif kind == TERMINAL:
            tx.set("seen_end", True)

    ext_param = {"ext": ext_keys}
    return System(
        config.name,
        doc=__doc__ or "",
        equivalent_mutants=EQUIVALENT_MUTANTS,
        components=[
            Component("request", request, ext_keys),
            Component("watermark", watermark, ext_keys),
        ],
        globals=[
            Global("queue", (), doc="_pending_save_reqs: FIFO of Task (kind, segment, late, step)"),
            Global("mailbox", (), doc="keys put and not yet read by the consumer, in order"),
            Global("seen_ends", 0, doc="segment ends the consumer has read"),
            Global("seen_end", False, doc="the consumer has read the request end"),
            Global("lost", False, doc="ghost: save_async dropped a save of the open segment"),
            Global("late_issued", False, doc="ghost: the late save was issued"),
            Global("late_enqueued", False, doc="ghost: the late save was queued"),
        ],
        init=init,
        actions=[
            Action("arrive", "scheduler", arrive, {**ext_param, "counter": BOOL}),
            Action("chunk", "scheduler", chunk, ext_param),
            Action("segment_end", "scheduler", segment_end, ext_param),
            Action(
                "next_segment", "scheduler", next_segment, {**ext_param, "mode": (UPDATE, RESUME)}
            ),
            Action("finish", "scheduler", finish, ext_param),
            Action("end_parked", "scheduler", end_parked, ext_param),
            Action("late_save", "scheduler", late_save, ext_param),
            Action("preempted_rerun", "scheduler", preempted_rerun, ext_param),
            Action("send", "save_thread", send, internal=True),
            Action("receive", "consumer", receive, internal=True),
        ],
        properties=properties(config.segments, config.max_tokens),
    )


SEGMENTS = build()


def variant_6816() -> System:
    """Before #6816: a segment end always advances the watermark to gen + 1."""
    return build(SegmentConfig(name="segments_6816", advance="always"))


def variant_parked_unbumped() -> System:
    """_finish_parked_streaming_session without the bump of MIX:933."""
    return build(SegmentConfig(name="segments_parked_unbumped", parked_end_bumps=False))


def variant_no_token_reset() -> System:
    """A segment end keeps the token watermark (CTA:486 removed)."""
    return build(SegmentConfig(name="segments_no_token_reset", reset_tokens=False))


def variant_no_dedup() -> System:
    """A segment end never advances the watermark: late saves are not recognised."""
    return build(SegmentConfig(name="segments_no_dedup", advance="never"))


_SG = __name__

TARGETS: tuple[Target, ...] = (
    Target(
        "segments",
        f"{_SG}:SEGMENTS",
        doc="resumable realtime segments under one request id: the segment watermark",
    ),
    Target(
        "segments_6816",
        f"{_SG}:variant_6816",
        "violates:no_current_save_dropped,request_end_after_segments,request_end_delivered,"
        "segment_order",
        doc="before vllm-omni #6816: a speculative +1 at a segment end drops every later "
        "save of a request without _omni_segment_generation",
        family="segments",
    ),
    Target(
        "segments_parked_unbumped",
        f"{_SG}:variant_parked_unbumped",
        "violates:no_current_save_dropped,request_end_delivered",
        doc="_finish_parked_streaming_session without its bump (MIX:929-933): the parked "
        "session's terminal is dropped as a late duplicate",
        family="segments",
    ),
    Target(
        "segments_no_token_reset",
        f"{_SG}:variant_no_token_reset",
        "violates:no_current_save_dropped,request_end_delivered",
        doc="a segment end keeps requests_num_chunks_sent (CTA:486 removed): a rebuilt "
        "segment's chunks and terminal are skipped as a preemption replay",
        family="segments",
    ),
    Target(
        "segments_no_dedup",
        f"{_SG}:variant_no_dedup",
        "violates:late_save_dropped,no_current_save_dropped,request_end_delivered,segment_order",
        doc="a segment end never advances the watermark: a late save for the old segment "
        "reaches the consumer after that segment's end, and re-sets the token watermark",
        family="segments",
    ),
)
