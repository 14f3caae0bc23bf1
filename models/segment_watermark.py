"""The segment watermark: ``save_async``'s admission state for one external id.

Mirrors vLLM-Omni 0.30.0 ``chunk_transfer_adapter.py`` (``CTA``). The machine
``segment_watermark`` holds ``expected`` (``_segment_generation[ext]``, None
when absent) and ``sent`` (``requests_num_chunks_sent[ext]``, None when
absent), and takes one transition per branch of ``save_async``:

* ``late`` - ``generation < expected``: a late save for an old segment,
  skipped silently (CTA:412-430);
* ``replay`` - not a segment end and ``confirmed < sent``: a preemption
  replay, skipped silently after the generation is stored (CTA:452-463);
* ``admit`` - a chunk or terminal: both watermarks set, the task queued
  (CTA:464-469);
* the segment end's ``advance`` (to ``generation + 1``) or ``stay`` (at
  ``generation``), which pop the token watermark (CTA:474-486);
* ``clear`` - the terminal's cleanup, ``_clear_sender_state_locked``, pops
  both (CTA:1029-1043).

The segment end's transitions are what the known-bug variants replace (see
`segment_end_saves`); everything else is the same in every system that uses
the machine (`statecore.models.segment`, `statecore.models.chunk_transfer`).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any, Literal

from statecore import Event, Field, Machine, Output, Snapshot, State, Transition, Var, out

BOOL = (False, True)

CHUNK = "chunk"
SEGMENT_END = "segment_end"
TERMINAL = "terminal"
KINDS: tuple[str, ...] = (CHUNK, SEGMENT_END, TERMINAL)
"""What ``save_async`` is asked to save: a chunk, a segment end, the request end."""

Advance = Literal["counter", "always", "never"]
"""When a queued segment end advances ``_segment_generation`` to ``generation + 1``:
``"counter"`` only if the request carries ``_omni_segment_generation`` (0.30.0,
the #6816 fix, CTA:482-485), ``"always"`` (before #6816), ``"never"`` (no
deduplication of late saves at all)."""

Payload = Mapping[str, Any]
Changes = dict[str, Any]
SaveGuard = Callable[[Snapshot, Payload], bool]
SaveEffect = Callable[[Snapshot, Payload], Changes]

ADMITTED = (out("admitted"),)
ADVANCE = "segment end, advance"
STAY = "segment end, stay"


# -- guards: the branches of save_async ----------------------------------------------


def late(s: Snapshot, p: Payload) -> bool:
    """``generation < expected``: a save for an old segment (CTA:421-429)."""
    return bool(s.expected is not None and p["generation"] < s.expected)


def below_sent(s: Snapshot, p: Payload) -> bool:
    """Not a segment end and ``confirmed < sent``: already saved (CTA:452-463)."""
    sent = 0 if s.sent is None else s.sent
    return p["kind"] != SEGMENT_END and bool(p["confirmed"] < sent)


def replay(s: Snapshot, p: Payload) -> bool:
    """Not late, but below the token watermark: a preemption replay."""
    return not late(s, p) and below_sent(s, p)


def chunk_or_terminal(s: Snapshot, p: Payload) -> bool:
    """Not late, not a segment end, not a replay: admitted."""
    return not late(s, p) and p["kind"] != SEGMENT_END and not below_sent(s, p)


def segment_end(s: Snapshot, p: Payload) -> bool:
    """A segment end that is not late (segment ends are exempt from the token watermark)."""
    return not late(s, p) and p["kind"] == SEGMENT_END


def segment_end_with_counter(s: Snapshot, p: Payload) -> bool:
    """A segment end of a request that carries ``_omni_segment_generation``."""
    return bool(segment_end(s, p) and p["counter"])


def segment_end_without_counter(s: Snapshot, p: Payload) -> bool:
    """A segment end of a request without ``_omni_segment_generation``."""
    return bool(segment_end(s, p) and not p["counter"])


# -- effects -----------------------------------------------------------------------


def store_generation(s: Snapshot, p: Payload) -> Changes:
    """``_segment_generation[ext] = generation`` (CTA:430)."""
    return {"expected": p["generation"]}


def store_both(s: Snapshot, p: Payload) -> Changes:
    """The generation, and the token watermark set to the confirmed count (CTA:464)."""
    return {"expected": p["generation"], "sent": p["confirmed"]}


def advance_pop_sent(s: Snapshot, p: Payload) -> Changes:
    """``_segment_generation[ext] = generation + 1``; ``requests_num_chunks_sent`` popped."""
    return {"expected": p["generation"] + 1, "sent": None}


def stay_pop_sent(s: Snapshot, p: Payload) -> Changes:
    """``_segment_generation[ext] = generation`` (#6816); ``requests_num_chunks_sent`` popped."""
    return {"expected": p["generation"], "sent": None}


def advance_keep_sent(s: Snapshot, p: Payload) -> Changes:
    """CTA:486 removed: advance, and the token watermark stays at the confirmed count."""
    return {"expected": p["generation"] + 1, "sent": int(p["confirmed"])}


def stay_keep_sent(s: Snapshot, p: Payload) -> Changes:
    """CTA:486 removed: stay, and the token watermark stays at the confirmed count."""
    return {"expected": p["generation"], "sent": int(p["confirmed"])}


def pop_both(s: Snapshot, p: Payload) -> Changes:
    """``_clear_sender_state_locked`` pops both watermarks."""
    return {"expected": None, "sent": None}


def pop_generation(s: Snapshot, p: Payload) -> Changes:
    """``_segment_generation`` absent: the save's stamp was popped before its lock."""
    return {"expected": None}


def pop_sent(s: Snapshot, p: Payload) -> Changes:
    """``requests_num_chunks_sent.pop(ext)``: a rebuilt prompt restarts the token count."""
    return {"sent": None}


# -- the segment end's transitions ----------------------------------------------------


def _save(
    branch: str, guard: SaveGuard, effect: SaveEffect | None, emit: tuple[Output, ...]
) -> Transition:
    """The ``save`` transition of one branch of ``save_async``."""
    name = f"open--save({branch})-->open"
    return Transition("open", "save", None, guard=guard, effect=effect, emit=emit, name=name)


def segment_end_saves(
    advance: Advance = "counter", reset_tokens: bool = True
) -> tuple[Transition, ...]:
    """The watermark's transitions for a queued segment end (CTA:474-486).

    0.30.0 (the defaults): advance to ``generation + 1`` with the counter, stay
    at ``generation`` without it, and pop the token watermark either way.
    `advance` (see `Advance`) and ``reset_tokens=False`` (CTA:486 removed: the
    token watermark keeps the confirmed count) select a known-bug replacement.
    """
    advancing = advance_pop_sent if reset_tokens else advance_keep_sent
    staying = stay_pop_sent if reset_tokens else stay_keep_sent
    if advance == "always":
        return (_save(ADVANCE, segment_end, advancing, ADMITTED),)
    if advance == "never":
        return (_save(STAY, segment_end, staying, ADMITTED),)
    return (
        _save(ADVANCE, segment_end_with_counter, advancing, ADMITTED),
        _save(STAY, segment_end_without_counter, staying, ADMITTED),
    )


SEGMENT_END_0_30_0 = segment_end_saves()
"""0.30.0: advance only with the counter (#6816), pop the token watermark (CTA:486)."""
SEGMENT_END_BEFORE_6816 = segment_end_saves(advance="always")
"""Before #6816: a segment end always advances to ``generation + 1``."""
SEGMENT_END_KEEPS_TOKENS = segment_end_saves(reset_tokens=False)
"""CTA:486 removed: a segment end keeps the token watermark."""
SEGMENT_END_NEVER_ADVANCES = segment_end_saves(advance="never")
"""No deduplication: a segment end never advances the watermark."""


# -- the machine ---------------------------------------------------------------------


def watermark_machine(
    segments: int = 3,
    max_tokens: int = 6,
    segment_ends: tuple[Transition, ...] = SEGMENT_END_0_30_0,
    *,
    stamp: bool = False,
) -> Machine:
    """The admission branches of ``save_async`` for one external id.

    `segment_ends` are the segment end's transitions (see `segment_end_saves`).
    ``stamp=True`` adds the ``stamp`` and ``unstamp`` events for a system that
    models the sender lock: a save that passes the late check sets
    ``_segment_generation`` before the lock (CTA:430), even if the lock then
    rejects it, and a clear in between pops it for good (``unstamp``: the
    locked part of a chunk or terminal writes only the token watermark).
    """
    generations = range(segments + 1)
    save_fields = [
        Field("kind", KINDS),
        Field("generation", generations),
        Field("confirmed", range(max_tokens + 1)),
        Field("counter", BOOL),
    ]
    stamps = (
        [
            Event(
                "stamp",
                [Field("generation", generations)],
                policy="error",
                doc="the late check passed: _segment_generation is set before the lock",
            ),
            Event(
                "unstamp",
                policy="error",
                doc="a clear popped the stamp before the lock; the locked part of a chunk "
                "or terminal does not write it again",
            ),
        ],
        [
            Transition("open", "stamp", None, effect=store_generation),
            Transition("open", "unstamp", None, effect=pop_generation),
        ],
    )
    return _machine(segments, max_tokens, save_fields, segment_ends, stamps if stamp else ([], []))


def unbounded_watermark_machine() -> Machine:
    """`watermark_machine` for the unbounded counts a running adapter sees.

    The generations and token counts a server sees have no bound, so the
    ``save`` event's ``generation`` and ``confirmed`` are typed ``int`` fields
    (the bounded machine's values are their sample) and the variables may
    hold any count. The segment end is 0.30.0's (advance only with the
    counter, #6816). One event more than the checked systems drive:
    ``rebuild_prompt``, the scheduler's ``requests_num_chunks_sent.pop(ext)``
    when it rebuilds a streaming prompt (MIX:202, MIX:313, AR:903), which the
    checked systems fold into the segment end that precedes it. A running
    adapter keeps it as `statecore.models.segment_watermark_runtime` splits
    it: presence in a machine whose fires are remembered, counts beside it.
    """
    segments, max_tokens = 3, 6
    save_fields = [
        Field("kind", KINDS),
        Field("generation", type=int, sample=range(segments + 1)),
        Field("confirmed", type=int, sample=range(max_tokens + 1)),
        Field("counter", BOOL),
    ]
    rebuild = (
        [Event("rebuild_prompt", policy="ignore", doc="the scheduler pops the token watermark")],
        [Transition("open", "rebuild_prompt", None, effect=pop_sent)],
    )
    return _machine(segments, max_tokens, save_fields, SEGMENT_END_0_30_0, rebuild)


def _machine(
    segments: int,
    max_tokens: int,
    save_fields: list[Field],
    segment_ends: tuple[Transition, ...],
    extra: tuple[list[Event], list[Transition]],
) -> Machine:
    """The ``segment_watermark`` machine with `save_fields` and `extra` events."""
    extra_events, extra_transitions = extra
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
                save_fields,
                policy="error",
                doc="save_async(kind) of a request at this generation and token count",
            ),
            Event("clear", policy="ignore", doc="_clear_sender_state_locked (terminal cleanup)"),
            *extra_events,
        ],
        transitions=[
            _save("late", late, None, (out("skipped", reason="late"),)),
            _save("replay", replay, store_generation, (out("skipped", reason="replay"),)),
            _save("admit", chunk_or_terminal, store_both, ADMITTED),
            *segment_ends,
            Transition("open", "clear", None, effect=pop_both),
            *extra_transitions,
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
    """`watermark_machine` with the segment end of `segment_end_saves(advance, reset_tokens)`."""
    return watermark_machine(
        segments, max_tokens, segment_end_saves(advance, reset_tokens), stamp=stamp
    )
