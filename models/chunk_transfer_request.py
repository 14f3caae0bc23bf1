"""The scheduler-side request of the chunk-transfer system: what it saved, whether it is over."""

from __future__ import annotations

from statecore import Event, Machine, State, Transition, Var
from statecore.definition import Payload, Snapshot


def request_machine(saves: int = 1, segments: int = 1) -> Machine:
    """The scheduler-side request: what it has saved, and whether it is over.

    `saves` bounds the chunks and segment ends it saves before its terminal,
    `segments` the segment ends among them. ``ends`` is also the request's
    ``_omni_segment_generation``: every next segment comes from a streaming
    update that bumps it, and so does ``_finish_parked_streaming_session``
    (MIX:929-933). Every save commits one token (``tokens`` is
    ``confirmed_num_computed_tokens``); the parked terminal commits none.
    """

    def under_save_bound(s: Snapshot, p: Payload) -> bool:
        return bool(s.saved < saves)

    def under_segment_bound(s: Snapshot, p: Payload) -> bool:
        return bool(s.saved < saves and s.ends < segments)

    def count_chunk(s: Snapshot, p: Payload) -> dict[str, int]:
        return {"saved": s.saved + 1, "tokens": s.tokens + 1}

    def count_segment_end(s: Snapshot, p: Payload) -> dict[str, int]:
        return {"saved": s.saved + 1, "ends": s.ends + 1, "tokens": s.tokens + 1}

    def count_terminal_token(s: Snapshot, p: Payload) -> dict[str, int]:
        return {"tokens": s.tokens + 1}

    def restart_tokens(s: Snapshot, p: Payload) -> dict[str, int]:
        # The streaming update rebuilt the prompt: confirmed token counts restart.
        return {"tokens": 0}

    segment_transitions = [
        Transition(
            "running",
            "segment_end",
            "parked",
            guard=under_segment_bound,
            effect=count_segment_end,
        ),
        Transition("parked", "next_segment", "running", effect=restart_tokens),
        Transition("parked", "terminal", "terminal_saved"),
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
            Transition("running", "chunk", None, guard=under_save_bound, effect=count_chunk),
            Transition("running", "terminal", "terminal_saved", effect=count_terminal_token),
            *(segment_transitions if segments else []),
            Transition(("running", "terminal_saved"), "abort", "aborted"),
            *([Transition("parked", "abort", "aborted")] if segments else []),
        ],
    )
