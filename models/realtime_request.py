"""The scheduler's resumable realtime request, as the segments system drives it.

Mirrors vLLM-Omni 0.30.0 (``ARS`` ``core/sched/omni_ar_scheduler.py``,
``MIX`` ``core/sched/omni_scheduler_mixin.py``): ``new`` (not yet arrived;
``arrive(counter)`` says whether it carries ``_omni_segment_generation``),
``streaming`` (a segment is open), ``parked`` (its segment end was saved;
waiting for the next segment or the end of the session), ``ended`` (the
request end was saved). Every step that saves commits one token, so
``tokens`` is the confirmed count each save reports.

``_finish_parked_streaming_session`` (MIX:926-943) is `END_PARKED`; the
known-bug variant without its bump (MIX:933) is `END_PARKED_WITHOUT_BUMP`.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from statecore import Event, Field, Machine, Snapshot, State, Transition, Var

BOOL = (False, True)

UPDATE = "update"
RESUME = "resume"

Payload = Mapping[str, Any]
Changes = dict[str, Any]


def _tick(s: Snapshot) -> int:
    """The confirmed count after one more step."""
    return int(s.tokens) + 1


def carry_counter(s: Snapshot, p: Payload) -> Changes:
    """The request arrives with or without ``_omni_segment_generation``."""
    return {"counter": p["counter"]}


def save_chunk(s: Snapshot, p: Payload) -> Changes:
    """A step of the open segment saves a chunk."""
    return {"chunks": s.chunks + 1, "tokens": _tick(s)}


def end_segment(s: Snapshot, p: Payload) -> Changes:
    """The stop step saves the segment end (ARS:656-676)."""
    return {"ends": s.ends + 1, "tokens": _tick(s)}


def install_update(s: Snapshot, p: Payload) -> Changes:
    """A streaming update bumps the counter (creating it) and rebuilds the prompt."""
    return {"counter": True, "gen": s.gen + 1, "chunks": 0, "tokens": 0}


def resume_unbumped(s: Snapshot, p: Payload) -> Changes:
    """A native-duplex resume: no bump, the confirmed count goes on (MIX:825-838)."""
    return {"chunks": 0}


def finish_step(s: Snapshot, p: Payload) -> Changes:
    """The request ends inside its open segment; the finishing step commits a token."""
    return {"tokens": _tick(s)}


def bump_counter(s: Snapshot, p: Payload) -> Changes:
    """``_omni_segment_generation += 1`` before the terminal's save (MIX:933)."""
    return {"counter": True, "gen": s.gen + 1}


END_PARKED = Transition("parked", "end_parked", "ended", effect=bump_counter)
"""``_finish_parked_streaming_session`` (MIX:926-943): bump, then save the terminal."""
END_PARKED_WITHOUT_BUMP = Transition("parked", "end_parked", "ended")
"""The same without the bump of MIX:933."""


def realtime_request_machine(
    segments: int = 3, chunks: int = 1, end_parked: Transition = END_PARKED
) -> Machine:
    """The scheduler's resumable request with `segments` segments of `chunks` chunks."""
    max_tokens = segments * (chunks + 1)

    def chunks_left(s: Snapshot, p: Payload) -> bool:
        return bool(s.chunks < chunks)

    def update_with_segments_left(s: Snapshot, p: Payload) -> bool:
        return bool(p["mode"] == UPDATE and s.ends < segments)

    def resume_without_counter(s: Snapshot, p: Payload) -> bool:
        return bool(p["mode"] == RESUME and s.ends < segments and not s.counter)

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
            Transition("new", "arrive", "streaming", effect=carry_counter),
            Transition("streaming", "chunk", None, guard=chunks_left, effect=save_chunk),
            Transition("streaming", "segment_end", "parked", effect=end_segment),
            Transition(
                "parked",
                "next_segment",
                "streaming",
                guard=update_with_segments_left,
                effect=install_update,
                name="parked--next_segment(update)-->streaming",
            ),
            Transition(
                "parked",
                "next_segment",
                "streaming",
                guard=resume_without_counter,
                effect=resume_unbumped,
                name="parked--next_segment(resume)-->streaming",
            ),
            Transition("streaming", "finish", "ended", effect=finish_step),
            end_parked,
        ],
    )
