"""Resumable realtime segments under one request id: the segment-generation watermark.

Mirrors vLLM-Omni 0.30.0, but for one finding: the reference sends a retired
sender generation's queue up to its terminal, where 0.30.0 discards it
(``segments_0_30_0`` is 0.30.0 as released, below). Paths are relative to ``vllm_omni/``; ``CTA`` is
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
  (MIX:929-933), saves the terminal with ``force_request_finished``, then
  calls ``finish_requests(FINISHED_STOPPED)``, whose adapter part runs
  ``cleanup_sender`` (CTA:977-1012): with the terminal queued it retires the
  sender generation (``cancelled``; save_async takes nothing more) and leaves
  the reclaim to the terminal's put; 0.30.0's save thread then discards every
  queued task of the retired generation but the terminal (CTA:697-714).

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
  ``end_parked`` (``_finish_parked_streaming_session``: the terminal's save and
  the finish in one step, enabled while the id has an active sender generation,
  ``_adapter_owing_terminal``); ``late_save`` (a
  frame of the segment whose end was already saved arrives while the request
  is parked, reading the request's - still old - generation);
  ``preempted_rerun`` (a preempted request recomputes, and a re-run step saves
  a chunk below the token watermark: CTA:451 "If the request is preempted,
  skip the already saved chunks"; the skip is deduplication, not a loss);
* save thread (internal) - ``send``: the head of the FIFO is put (a task of a
  generation whose sender state was reclaimed is discarded); the global
  ``sender`` is the id's generation (none, active, retired);
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

`SegmentConfig` selects the behaviour; each variant replaces one part of the
reference (`statecore.models.segment_watermark`,
`statecore.models.realtime_request`, `statecore.models.segment_actions`):

* ``segments_0_30_0`` - 0.30.0 as released: the reference is 0.30.0 but for
  one thing, a retired generation still sends what was queued before its
  terminal (the fence the terminal holds covers the generation's queue). In
  0.30.0 ``cancelled`` vetoes every queued task but the terminal, so a parked
  session ended while its last segment end (and chunks) still wait on the save
  thread loses them: the consumer reads the request end without the last
  segment's end (docs/findings.md);

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

from collections.abc import Callable
from dataclasses import dataclass

from statecore.spec.segment import (
    LATE_SAVE_DROPPED,
    NO_CURRENT_SAVE_DROPPED,
    REQUEST_END_AFTER_SEGMENTS,
    REQUEST_END_DELIVERED,
    SEGMENT_ORDER,
    properties,
)

from statecore import Transition
from statecore.registry import Target
from statecore.system import Action, Component, System, Tx

from .realtime_request import (
    END_PARKED,
    END_PARKED_WITHOUT_BUMP,
    RESUME,
    UPDATE,
    realtime_request_machine,
)
from .segment_actions import (
    EXT,
    arrive,
    chunk,
    end_parked,
    finish,
    init,
    late_save,
    next_segment,
    preempted_rerun,
    receive,
    segment_end,
    send,
    send_0_30_0,
)
from .segment_records import Shared, Task
from .segment_watermark import (
    BOOL,
    CHUNK,
    KINDS,
    SEGMENT_END,
    SEGMENT_END_0_30_0,
    SEGMENT_END_BEFORE_6816,
    SEGMENT_END_KEEPS_TOKENS,
    SEGMENT_END_NEVER_ADVANCES,
    TERMINAL,
    Advance,
    segment_watermark_machine,
    watermark_machine,
)

__all__ = [
    "BOOL",
    "CHUNK",
    "EQUIVALENT_MUTANTS",
    "KINDS",
    "RESUME",
    "SEGMENTS",
    "SEGMENT_END",
    "TARGETS",
    "TERMINAL",
    "UPDATE",
    "Advance",
    "SegmentConfig",
    "Shared",
    "Task",
    "build",
    "realtime_request_machine",
    "released_0_30_0",
    "segment_watermark_machine",
    "variant_6816",
    "variant_no_dedup",
    "variant_no_token_reset",
    "variant_parked_unbumped",
]


@dataclass(frozen=True)
class SegmentConfig:
    """Bounds, and the parts a known-bug variant replaces."""

    name: str = "segments"
    segments: int = 3
    chunks: int = 1  # chunks per segment
    # The watermark's transitions for a queued segment end (CTA:474-486).
    segment_ends: tuple[Transition, ...] = SEGMENT_END_0_30_0
    # _finish_parked_streaming_session (MIX:926-943).
    end_parked: Transition = END_PARKED
    # The save thread's put of the queue's head (CTA:684-729).
    send: Callable[[Tx[Shared]], None] = send

    @property
    def max_tokens(self) -> int:
        """The largest confirmed count a save can report (one token per save)."""
        return self.segments * (self.chunks + 1)


EQUIVALENT_MUTANTS: dict[str, str] = {
    "drop-effect segment_watermark.open--save(replay)-->open": "a re-run follows an admitted "
    "chunk of the same generation, which already set expected to it",
    "skip-require scheduler_step: tx.require(handle is not None)": "init "
    "spawns the request and nothing retires it: the handle always exists",
    "skip-require late_save: tx.require(not tx.g.late_issued)": "every "
    "late save is dropped with no state change, so a second one adds nothing",
    'skip-emit receive: tx.emit(out("received", kind=task.kind, segment=task.segment, '
    "late=task.late, step=task.step))": "an output only: the consumer's state changes the same",
    "skip-require end_parked: tx.require(tx.g.sender == ACTIVE)": "a parked request's "
    "segment end opened the generation, and only the request end retires or pops it",
    "skip-put end_parked: tx.put(sender=RETIRED)": "the reference sends a retired "
    "generation's queue like an active one's; only 0.30.0's send tells them apart "
    "(segments_0_30_0)",
    "skip-put _put_head: tx.put(sender=None)": "nothing is queued or saved after the "
    "request end's put, so the popped generation is never read again",
}
"""Mutants of `segments` that behave like it, by id, with the reason."""


def build(config: SegmentConfig = SegmentConfig()) -> System:
    """The segments system for `config`, with the spec's properties."""
    request = realtime_request_machine(config.segments, config.chunks, config.end_parked)
    watermark = watermark_machine(config.segments, config.max_tokens, config.segment_ends)
    ext = {"ext": EXT}
    return System(
        config.name,
        doc=__doc__ or "",
        equivalent_mutants=EQUIVALENT_MUTANTS,
        components=[
            Component("request", request, EXT),
            Component("watermark", watermark, EXT),
        ],
        globals=Shared,
        init=init,
        actions=[
            Action("arrive", "scheduler", arrive, {**ext, "counter": BOOL}),
            Action("chunk", "scheduler", chunk, ext),
            Action("segment_end", "scheduler", segment_end, ext),
            Action("next_segment", "scheduler", next_segment, {**ext, "mode": (UPDATE, RESUME)}),
            Action("finish", "scheduler", finish, ext),
            Action("end_parked", "scheduler", end_parked, ext),
            Action("late_save", "scheduler", late_save, ext),
            Action("preempted_rerun", "scheduler", preempted_rerun, ext),
            Action("send", "save_thread", config.send, internal=True),
            Action("receive", "consumer", receive, internal=True),
        ],
        properties=properties(config.segments, config.max_tokens),
    )


SEGMENTS = build()


def released_0_30_0() -> System:
    """0.30.0 as released: a retired generation's queued chunks are discarded."""
    return build(SegmentConfig(name="segments_0_30_0", send=send_0_30_0))


def variant_6816() -> System:
    """Before #6816: a segment end always advances the watermark to gen + 1."""
    return build(SegmentConfig(name="segments_6816", segment_ends=SEGMENT_END_BEFORE_6816))


def variant_parked_unbumped() -> System:
    """_finish_parked_streaming_session without the bump of MIX:933."""
    return build(SegmentConfig(name="segments_parked_unbumped", end_parked=END_PARKED_WITHOUT_BUMP))


def variant_no_token_reset() -> System:
    """A segment end keeps the token watermark (CTA:486 removed)."""
    return build(
        SegmentConfig(name="segments_no_token_reset", segment_ends=SEGMENT_END_KEEPS_TOKENS)
    )


def variant_no_dedup() -> System:
    """A segment end never advances the watermark: late saves are not recognised."""
    return build(SegmentConfig(name="segments_no_dedup", segment_ends=SEGMENT_END_NEVER_ADVANCES))


_SG = __name__

TARGETS: tuple[Target, ...] = (
    Target(
        "segments",
        f"{_SG}:SEGMENTS",
        doc="resumable realtime segments under one request id: the segment watermark",
    ),
    Target(
        "segments_0_30_0",
        released_0_30_0,
        violates=(REQUEST_END_AFTER_SEGMENTS, SEGMENT_ORDER),
        doc="vLLM-Omni 0.30.0 as released: ending a parked session whose last segment is "
        "still queued discards that segment's chunks and end; only the terminal goes out",
        family="segments",
    ),
    Target(
        "segments_6816",
        variant_6816,
        violates=(
            NO_CURRENT_SAVE_DROPPED,
            REQUEST_END_AFTER_SEGMENTS,
            REQUEST_END_DELIVERED,
            SEGMENT_ORDER,
        ),
        doc="before vllm-omni #6816: a speculative +1 at a segment end drops every later "
        "save of a request without _omni_segment_generation",
        family="segments",
    ),
    Target(
        "segments_parked_unbumped",
        variant_parked_unbumped,
        violates=(NO_CURRENT_SAVE_DROPPED, REQUEST_END_DELIVERED),
        doc="_finish_parked_streaming_session without its bump (MIX:929-933): the parked "
        "session's terminal is dropped as a late duplicate",
        family="segments",
    ),
    Target(
        "segments_no_token_reset",
        variant_no_token_reset,
        violates=(NO_CURRENT_SAVE_DROPPED, REQUEST_END_DELIVERED),
        doc="a segment end keeps requests_num_chunks_sent (CTA:486 removed): a rebuilt "
        "segment's chunks and terminal are skipped as a preemption replay",
        family="segments",
    ),
    Target(
        "segments_no_dedup",
        variant_no_dedup,
        violates=(
            LATE_SAVE_DROPPED,
            NO_CURRENT_SAVE_DROPPED,
            REQUEST_END_DELIVERED,
            SEGMENT_ORDER,
        ),
        doc="a segment end never advances the watermark: a late save for the old segment "
        "reaches the consumer after that segment's end, and re-sets the token watermark",
        family="segments",
    ),
)
