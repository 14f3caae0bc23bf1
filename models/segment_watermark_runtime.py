"""The segment watermark a running adapter keeps: presence in a machine, counts beside it.

A server's segment generations and token counts have no bound, so the
checked ``segment_watermark`` run as it is (`unbounded_watermark_machine`,
whose variables hold the counts) cannot be remembered: every ``save`` is a
snapshot never seen before, computed in full on the hot path. Its guards,
though, only compare counts (``generation < expected``, ``confirmed < sent``)
and its effects only copy counts from the payload (or ``generation + 1``).
So a running adapter keeps it in two parts:

* `presence_machine` - the machine it fires: the checked transitions (the
  same names, outputs and order), with the two comparisons as the payload
  and, as variables, whether each watermark is present. It has finitely many
  snapshots and payloads, so every fire after the first is a memo lookup;
* `Counts` - the counts, written by each transition's own checked effect and
  compared by the checked guards (`late`, `below_sent`).

A `Watermark` holds the two for one id; its `Watermark.save` and
`Watermark.fire_checked` run one event both ways. Their guards and effects are the
checked machine's own functions: the presence machine evaluates them on a
witness (`_witness`) whose counts compare as the payload says. That the
pair behaves as the checked machine is a test
(``tests/test_checked_sender.py``): every snapshot and payload of a bound,
and counts far beyond it, give the same transition, outputs and counts.
"""

from __future__ import annotations

import functools
from collections.abc import Mapping
from typing import Any, NamedTuple

from statecore import (
    Event,
    Field,
    Machine,
    Outcome,
    Prepared,
    Snapshot,
    State,
    Transition,
    Var,
    prepare,
)
from statecore.errors import FireError
from statecore.machine_parts import Effect
from statecore.runtime import Instance, SerialInstance

from .segment_watermark import (
    BOOL,
    KINDS,
    Payload,
    SaveGuard,
    below_sent,
    late,
    unbounded_watermark_machine,
)

__all__ = ["ABSENT", "Counts", "Watermark", "presence_machine"]


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


def _prepared_saves(machine: Machine) -> dict[tuple[str, bool, bool, bool], Prepared]:
    """Every ``save`` the presence machine can be fired with, keyed (kind, counter, late, below)."""
    return {
        (kind, counter, is_late, below): prepare(
            machine, "save", kind=kind, counter=counter, late=is_late, below=below
        )
        for kind in KINDS
        for counter in BOOL
        for is_late in BOOL
        for below in BOOL
    }


class Watermark(SerialInstance):
    """One external id's watermark: a `presence_machine` instance with the `Counts` beside it.

    Its owner serialises every fire on it (the adapter holds its sender lock
    around them), so it is a `SerialInstance`. `save` and `fire_checked` fire
    an event both ways: the machine, then the taken transition's checked
    effect on `counts`. Firing it with `Instance.fire` would leave the counts
    behind, so the adapter never does.
    """

    __slots__ = ("_saves", "counts")

    def __init__(
        self, machine: Machine, snapshot: Snapshot | None = None, counts: Counts = ABSENT
    ) -> None:
        Instance.__init__(self, machine, snapshot)  # `SerialInstance.__init__` only narrows it
        self.counts = counts
        self._saves = _SAVES[machine]

    def save(self, kind: str, generation: int, confirmed: int, counter: bool) -> Outcome:
        """The ``save`` event with the checked machine's payload (the hot path of every save).

        The two checked comparisons pick one of the presence machine's saves,
        prepared once per machine (`_prepared_saves`), so a save costs the
        comparisons, a memo lookup and the taken transition's checked effect.
        """
        if type(generation) is not int or type(confirmed) is not int:
            _check_counts(generation, confirmed)
        payload = {
            "kind": kind,
            "generation": generation,
            "confirmed": confirmed,
            "counter": counter,
        }
        counts = self.counts
        prepared = None
        if type(kind) is str and type(counter) is bool:  # as `fire`'s memo key, 1 is not True
            prepared = self._saves.get(
                (kind, counter, late(counts, payload), below_sent(counts, payload))  # type: ignore[arg-type]
            )
        if prepared is None:  # outside the declared domains: the machine says why
            is_late, below = late(counts, payload), below_sent(counts, payload)  # type: ignore[arg-type]
            outcome = self.fire("save", kind=kind, counter=counter, late=is_late, below=below)
        else:
            outcome = self.fire_prepared(prepared)
        transition = outcome.transition
        if transition is not None:  # `_applied`, inlined: this is every save's path
            effect = EFFECTS[transition.name]
            if effect is not None:
                changes = effect(counts, payload) or _NO_CHANGES  # type: ignore[arg-type]
                self.counts = _new_counts(
                    Counts, (changes.get("expected", counts[0]), changes.get("sent", counts[1]))
                )
        return outcome

    def fire_checked(self, event: str, /, **payload: Any) -> Outcome:
        """Fire `event` with the checked machine's payload: on the machine, then on `counts`.

        A ``save`` carries ``kind``, ``generation``, ``confirmed`` and
        ``counter``; the machine is fired with the comparisons (`save`).
        """
        if event == "save":
            return self.save(**payload)
        outcome = self.fire(event, **payload)
        self.counts = _applied(outcome, self.counts, payload)
        return outcome


def _check_counts(generation: object, confirmed: object) -> None:
    """A save's counts must be ints (an int subclass, as an enum's, is one)."""
    if not (isinstance(generation, int) and isinstance(confirmed, int)):
        raise FireError(
            f"machine 'segment_watermark', event 'save': generation={generation!r} and "
            f"confirmed={confirmed!r} must be ints; pass the request's counts as int"
        )


def _applied(outcome: Outcome, counts: Counts, payload: Payload) -> Counts:
    """`counts` after the checked effect of the transition `outcome` took, if any."""
    transition = outcome.transition
    effect = None if transition is None else EFFECTS[transition.name]
    if effect is None:
        return counts
    return counts.changed(effect(counts, payload) or _NO_CHANGES)  # type: ignore[arg-type]


_NO_CHANGES: Mapping[str, Any] = {}


class _Saves(dict[Machine, dict[tuple[str, bool, bool, bool], Prepared]]):
    """`_prepared_saves` of each presence machine, built on its first save."""

    def __missing__(self, machine: Machine) -> dict[tuple[str, bool, bool, bool], Prepared]:
        saves = self[machine] = _prepared_saves(machine)
        return saves


_SAVES = _Saves()
