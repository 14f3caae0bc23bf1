"""The segment watermark a running adapter keeps: its machine as a table, counts beside it.

A server's segment generations and token counts have no bound, so the
checked ``segment_watermark`` run as it is (`unbounded_watermark_machine`,
whose variables hold the counts) cannot be remembered: every ``save`` is a
snapshot never seen before, computed in full on the hot path. Its guards,
though, only compare counts (``generation < expected``, ``confirmed < sent``)
and its effects only copy counts from the payload (or ``generation + 1``).
So a running adapter keeps it in two parts:

* `presence_machine` - the checked transitions (the same names, outputs and
  order), with the two comparisons as the payload and, as variables,
  whether each watermark is present. It has four snapshots and 24 saves;
* `Counts` - the counts, written by each transition's own checked effect.

`WatermarkTable` is the presence machine tabulated: `statecore.step` run
once on each of its snapshots with each event it can be fired with. An id's
watermark is then its `Counts` alone (its presence snapshot is which counts
are there), and a save is the two comparisons, one lookup and the taken
transition's checked effect: no object per id and no fire through an
`Instance`, which the adapter's sender lock serialises anyway.

The guards and effects are the checked machine's own functions: the
presence machine evaluates the guards on a witness (`_witness`) whose counts
compare as the payload says. That the table behaves as the checked machine
is a test (``tests/test_checked_sender.py``): every snapshot and payload of
a bound, and counts far beyond it, give the same transition, outputs and
counts.
"""

from __future__ import annotations

import functools
import itertools
from collections.abc import Callable, Mapping
from typing import Any, NamedTuple

from statecore import Event, Field, Machine, Outcome, Snapshot, State, Transition, Var, step
from statecore.errors import FireError
from statecore.machine_parts import Effect

from .segment_watermark import (
    BOOL,
    KINDS,
    SEGMENT_END,
    Payload,
    SaveGuard,
    below_sent,
    late,
    unbounded_watermark_machine,
)

__all__ = ["ABSENT", "Counts", "Step", "WatermarkTable", "presence_machine"]


class Counts(NamedTuple):
    """One id's watermarks (None: absent), read by the checked guards as a snapshot is."""

    expected: int | None = None
    """``_segment_generation[ext]``."""
    sent: int | None = None
    """``requests_num_chunks_sent[ext]``."""

    def changed(self, changes: Mapping[str, Any]) -> Counts:
        """These counts with a checked effect's `changes` applied."""
        return _new_counts(Counts, (changes.get("expected", self[0]), changes.get("sent", self[1])))


_new_counts = tuple.__new__  # `Counts(...)` without NamedTuple's Python-level __new__
ABSENT = Counts()

_WITNESS = Counts(expected=1, sent=1)
"""Counts against which a payload's comparisons can be replayed (see `_witness`)."""
_CLEAR_PROBES = [Counts(e, s) for e in (None, 0, 1_000_003) for s in (None, 0, 2_000_003)]
"""Counts with each watermark absent, zero or large: what `clear` is tried on."""

_PRESENCE = {"expected": "has_expected", "sent": "has_sent"}


def _witness(p: Payload) -> dict[str, Any]:
    """A save whose counts compare with `_WITNESS` as ``late`` and ``below`` say."""
    return {
        "kind": p["kind"],
        "generation": 0 if p["late"] else 1,
        "confirmed": 0 if p["below"] else 1,
        "counter": p["counter"],
    }


def _on_witness(guard: SaveGuard) -> SaveGuard:
    """The checked `guard`, decided by the comparisons in the payload."""

    @functools.wraps(guard)
    def decided(s: Snapshot, p: Payload) -> bool:
        return guard(_WITNESS, _witness(p))  # type: ignore[arg-type]

    return decided


def _presence(effect: Effect) -> Effect:
    """The checked `effect`, reduced to which watermarks it leaves present."""

    @functools.wraps(effect)
    def present(s: Snapshot, p: Payload) -> dict[str, bool]:
        changes = effect(_WITNESS, _witness(p) if p else p) or {}  # type: ignore[arg-type]
        return {_PRESENCE[name]: value is not None for name, value in changes.items()}

    return present


UNBOUNDED = unbounded_watermark_machine()
EFFECTS: dict[str, Effect | None] = {t.name: t.effect for t in UNBOUNDED.transitions}
"""Each transition's checked effect on the counts, by transition name."""


def presence_machine() -> Machine:
    """`unbounded_watermark_machine` over presence and comparisons (see the module doc)."""
    events = []
    for event in UNBOUNDED.events:
        if event.name == "save":
            fields = [
                Field("kind", KINDS),
                Field("counter", BOOL),
                Field("late", BOOL),
                Field("below", BOOL),
            ]
            event = Event("save", fields, policy=event.policy, doc=event.doc)
        events.append(event)
    transitions = [
        Transition(
            t.source,
            t.event,
            t.target,
            guard=None if t.guard is None else _on_witness(t.guard),
            effect=None if t.effect is None else _presence(t.effect),
            emit=t.emit,
            name=t.name,
        )
        for t in UNBOUNDED.transitions
    ]
    return Machine(
        "segment_watermark",
        doc="save_async's admission state for one external id; the counts live beside it",
        states=[State(s.name, initial=s.initial, doc=s.doc) for s in UNBOUNDED.states],
        variables=[
            Var("has_expected", BOOL, False, doc="_segment_generation has an entry"),
            Var("has_sent", BOOL, False, doc="requests_num_chunks_sent has an entry"),
        ],
        events=events,
        transitions=transitions,
    )


SaveKey = tuple[type, type, bool, bool, str, bool, bool, bool]
"""A save's table key: (the two counts' classes, has_expected, has_sent, kind, counter,
late, below)."""


class Step(NamedTuple):
    """One tabulated step of the presence machine."""

    outcome: Outcome
    """`statecore.step`'s outcome on the presence snapshot."""
    verdict: str
    """A save's verdict: "admitted", or why it is skipped ("late", "replay")."""
    effect: Effect | None
    """The taken transition's checked effect on the counts."""
    update: Update | None
    """`effect` on a save's counts (`compiled`); None where there is no effect."""


class WatermarkTable:
    """`presence_machine` tabulated: each snapshot and event, stepped once (see the module doc).

    The owner keeps each id's `Counts` and serialises the calls for one id
    (the adapter's sender lock). `save` is the hot path; `fire` takes any
    event of the checked machine.
    """

    __slots__ = ("_clear_empties", "_events", "_saves", "machine")

    def __init__(self, machine: Machine | None = None) -> None:
        self.machine = machine = machine or presence_machine()
        self._saves: dict[SaveKey, Step] = {}
        self._events: dict[tuple[bool, bool, str], Step] = {}
        for has_expected, has_sent in itertools.product(BOOL, BOOL):
            snapshot = machine.snapshot("open", has_expected=has_expected, has_sent=has_sent)
            for kind, counter, is_late, below in itertools.product(KINDS, BOOL, BOOL, BOOL):
                payload = {"kind": kind, "counter": counter, "late": is_late, "below": below}
                key = (int, int, has_expected, has_sent, kind, counter, is_late, below)
                self._saves[key] = _step(machine, snapshot, "save", payload)
            for event in machine.events:
                if not event.fields:
                    self._events[has_expected, has_sent, event.name] = _step(
                        machine, snapshot, event.name, {}
                    )
        clears = [self.fire(counts, "clear")[1] for counts in _CLEAR_PROBES]
        self._clear_empties = clears == [ABSENT] * len(clears)
        """``clear`` left no count from any of `_CLEAR_PROBES` (the checked machine's
        ``pop_both`` sets both to None whatever they were): `clear` then only drops the entry."""

    def save(
        self,
        marks: dict[str, Counts],
        ext: str,
        kind: str,
        generation: int,
        confirmed: int,
        counter: bool,
    ) -> Step:
        """The ``save`` event on the watermarks ``marks[ext]`` (absent: `ABSENT`), updated in place.

        The counts' classes and the checked guards' two comparisons (`late`,
        `below_sent`), written out on the counts, pick the step, looked up by
        equality as the checked machine's domains are; any other input (a
        count that is an int subclass or no int, a kind or counter outside
        the domains) misses and takes `_save_checked`, which calls the guards
        themselves.
        """
        expected, sent = counts = marks.get(ext, ABSENT)
        has_expected = expected is not None
        try:
            step = self._saves[
                generation.__class__,  # `int` in every key: a subclass misses
                confirmed.__class__,
                has_expected,
                sent is not None,
                kind,
                counter,
                has_expected and generation < expected,  # type: ignore[operator]  # not None
                kind != SEGMENT_END and confirmed < (sent or 0),
            ]
        except (KeyError, TypeError):  # outside the declared domains: the machine says why
            pass
        else:
            update = step[3]
            if update is not None:
                marks[ext] = update(counts, kind, generation, confirmed, counter)
            return step
        step, marks[ext] = self._save_checked(counts, kind, generation, confirmed, counter)
        return step

    def clear(self, marks: dict[str, Counts], ext: str) -> None:
        """The ``clear`` event on the watermarks ``marks[ext]``: absent counts are no entry."""
        counts = marks.pop(ext, None)
        if counts is not None and not self._clear_empties:
            counts = self.fire(counts, "clear")[1]
            if counts != ABSENT:
                marks[ext] = counts

    def step(self, counts: Counts, event: str) -> Step:
        """The step of `event`, an event without fields (``clear``, ``rebuild_prompt``)."""
        step = self._events.get((counts[0] is not None, counts[1] is not None, event))
        if step is None:  # not a declared event without fields: the machine says why
            step = _step(self.machine, self._presence(counts), event, {})
        return step

    def fire(self, counts: Counts, event: str, /, **payload: Any) -> tuple[Step, Counts]:
        """`event` with the checked machine's payload: its step and the new counts.

        A ``save`` carries ``kind``, ``generation``, ``confirmed`` and
        ``counter``; ``clear`` and ``rebuild_prompt`` carry nothing.
        """
        if event == "save":
            marks = {"": counts}
            return self.save(marks, "", **payload), marks[""]
        if payload:  # no field of an event without fields: the machine says why
            _step(self.machine, self._presence(counts), event, payload)
        step = self.step(counts, event)
        return step, _applied(step, counts, payload)

    def _save_checked(
        self, counts: Counts, kind: str, generation: int, confirmed: int, counter: bool
    ) -> tuple[Step, Counts]:
        """`save` for any input: the checked guards decide, the machine says what is wrong."""
        _check_counts(generation, confirmed)
        payload = _save_payload(kind, generation, confirmed, counter)
        is_late, below = late(counts, payload), below_sent(counts, payload)  # type: ignore[arg-type]
        fired = {"kind": kind, "counter": counter, "late": is_late, "below": below}
        step = _step(self.machine, self._presence(counts), "save", fired)
        return step, _applied(step, counts, payload)

    def _presence(self, counts: Counts) -> Snapshot:
        """The presence machine's snapshot of `counts`: which of them are there."""
        return self.machine.snapshot(
            "open", has_expected=counts[0] is not None, has_sent=counts[1] is not None
        )


def _step(machine: Machine, snapshot: Snapshot, event: str, payload: dict[str, Any]) -> Step:
    """`statecore.step` of the presence machine, with the verdict and the checked effect."""
    outcome = step(machine, snapshot, event, payload)
    transition = outcome.transition
    verdict = ""
    if outcome.outputs:
        first = outcome.outputs[0]
        verdict = "admitted" if first.name == "admitted" else str(first.get("reason"))
    effect = None if transition is None else EFFECTS[transition.name]
    return Step(outcome, verdict, effect, None if effect is None else compiled(effect))


def _check_counts(generation: object, confirmed: object) -> None:
    """A save's counts must be ints (an int subclass, as an enum's, is one)."""
    if not (isinstance(generation, int) and isinstance(confirmed, int)):
        raise FireError(
            f"machine 'segment_watermark', event 'save': generation={generation!r} and "
            f"confirmed={confirmed!r} must be ints; pass the request's counts as int"
        )


def _applied(step: Step, counts: Counts, payload: Payload) -> Counts:
    """`counts` after the checked effect of `step`'s transition, if any."""
    effect = step.effect
    return counts if effect is None else _changed(effect, counts, payload)


def _changed(effect: Effect, counts: Counts, payload: Payload) -> Counts:
    """`counts` with the checked `effect`'s changes applied."""
    return counts.changed(effect(counts, payload) or _NO_CHANGES)  # type: ignore[arg-type]


def _save_payload(kind: str, generation: int, confirmed: int, counter: bool) -> dict[str, Any]:
    """The checked machine's ``save`` payload."""
    return {"kind": kind, "generation": generation, "confirmed": confirmed, "counter": counter}


_NO_CHANGES: Mapping[str, Any] = {}

Update = Callable[[Counts, str, int, int, bool], Counts]
"""A save's effect on the counts: (counts, kind, generation, confirmed, counter) -> counts."""

_PROBES = [
    (Counts(expected, sent), generation, confirmed)
    for expected, sent in ((1_000_003, 2_000_003), (40, 70))
    for generation, confirmed in ((3_000_017, 4_000_037), (11, 23))
]
"""Counts and save counts of distinct values, each count above and below the others."""


@functools.cache
def compiled(effect: Effect) -> Update:
    """`effect` as an `Update`: a copy of the save's counts where that is all it does.

    Most checked effects set each count to None, to one of the save's counts
    (plus a constant: ``generation + 1``) or leave it. Probed with `_PROBES`
    for every kind and counter, such an effect gets that copy as a function
    of its own, built once; any other effect is called as it is, with the
    save's payload. ``tests/test_checked_sender.py`` runs the table against
    the checked machine on every bounded case and at any count.
    """
    sources: dict[str, set[str]] = {"expected": set(), "sent": set()}
    for (counts, generation, confirmed), kind, counter in itertools.product(_PROBES, KINDS, BOOL):
        payload = _save_payload(kind, generation, confirmed, counter)
        changes = effect(counts, payload) or _NO_CHANGES  # type: ignore[arg-type]
        for name, values in sources.items():
            values.add(_source(name, changes, counts, generation, confirmed))
    if any(len(values) != 1 or "" in values for values in sources.values()):
        return functools.partial(_calling, effect)
    [expected], [sent] = sources["expected"], sources["sent"]
    arguments = "counts, kind, generation, confirmed, counter"
    code = f"lambda {arguments}: new(Counts, ({expected}, {sent}))"  # `_source`'s words only
    namespace = {"new": _new_counts, "Counts": Counts}
    update: Update = eval(compile(code, __file__, "eval"), namespace)  # named as this module's
    return update


def _source(
    name: str, changes: Mapping[str, Any], counts: Counts, generation: int, confirmed: int
) -> str:
    """How `changes` sets the count `name`, in an `Update`'s arguments ("": in none of them)."""
    index = Counts._fields.index(name)
    value = changes.get(name, counts[index])
    if value is None:
        return "None"
    if type(value) is int and value == counts[index]:
        return f"counts[{index}]"
    for given, count in (("generation", generation), ("confirmed", confirmed)):
        if type(value) is int and -2 <= value - count <= 2:
            offset = value - count
            return f"{given} + {offset}" if offset else given
    return ""


def _calling(
    effect: Effect, counts: Counts, kind: str, generation: int, confirmed: int, counter: bool
) -> Counts:
    """`effect` on the counts, called with the save's payload."""
    return _changed(effect, counts, _save_payload(kind, generation, confirmed, counter))
