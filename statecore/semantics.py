"""The one step semantics every other part of statecore uses.

`step` is a pure function: given a machine, a snapshot and an event with its
payload it returns an `Outcome`, never mutating anything. The runtime
`Instance`, the explorer, the fuzzer and the diagrams all call it, so they
cannot disagree about what a machine means.

Rules, in order:

1. An undeclared event, or a payload whose field names differ from the
   event's, raises `FireError` (a programmer error, whatever the policy).
2. A payload value outside its field's domain (or, for an unbounded field
   with a declared ``type``, not of that type) never takes a transition: the
   event's policy decides, as in rule 4, except that ``error`` raises
   `FireError` (the caller passed a value the definition does not allow).
3. The transitions out of the current state for the event are tried in
   declaration order; the first whose guard holds is taken (validation has
   proved at most one holds over the finite domains).
4. If none is enabled the event's policy decides: ``reject`` returns a
   rejected outcome, ``ignore`` an ignored one, ``error`` raises
   `TransitionError`.
"""

from __future__ import annotations

import reprlib
from collections.abc import Mapping
from types import MappingProxyType
from typing import Any, Final, NamedTuple

from .definition import Effect, Machine, Output, Payload, Snapshot, Transition, accepted_types
from .errors import FireError, TransitionError, UnknownVariableError

ACCEPTED: Final = "accepted"
REJECTED: Final = "rejected"
IGNORED: Final = "ignored"

_EMPTY: Mapping[str, Any] = MappingProxyType({})


class Outcome(NamedTuple):
    """What firing one event did.

    `status` is ``"accepted"``, ``"rejected"`` or ``"ignored"``; `snapshot` is
    the snapshot after the step (unchanged unless accepted); `outputs` are the
    emitted outputs; `transition` the transition taken, if any; `reason` says
    why nothing happened.
    """

    status: str
    snapshot: Snapshot
    outputs: tuple[Output, ...]
    transition: Transition | None
    event: str
    reason: str

    @property
    def accepted(self) -> bool:
        """Whether a transition was taken."""
        return self.status is ACCEPTED

    def __bool__(self) -> bool:
        return self.status is ACCEPTED


def step(
    machine: Machine, snapshot: Snapshot, event: str, payload: Payload | None = None
) -> Outcome:
    """Fire `event` with `payload` at `snapshot`; return the `Outcome`."""
    if payload is None:
        payload = _EMPTY
    candidates = machine.dispatch[snapshot[0]].get(event)
    if candidates is None or payload.keys() != candidates[0].field_names:
        check_fire(machine, event, payload)
    if payload:
        fault = payload_fault(machine, event, payload)
        if fault:
            return _out_of_domain(machine, snapshot, event, fault)
    if candidates is None:
        return _no_transition(machine, snapshot, event, payload, "no transition from state")
    for target, guard, effect, emit_fn, emit_static, transition, _ in candidates:
        if guard is not None and not guard(snapshot, payload):
            continue
        if effect is not None:
            nxt = _apply_effect(machine, transition, target, effect, snapshot, payload)
        elif target == snapshot[0]:
            nxt = snapshot
        else:
            nxt = machine.snapshot_class((target,) + snapshot[1:])
        outputs = emit_static if emit_fn is None else tuple(emit_fn(snapshot, payload))
        return _new_outcome(Outcome, (ACCEPTED, nxt, outputs, transition, event, ""))
    return _no_transition(machine, snapshot, event, payload, "no guard holds")


_new_outcome = tuple.__new__


def _apply_effect(
    machine: Machine,
    transition: Transition,
    target: str,
    effect: Effect,
    snapshot: Snapshot,
    payload: Payload,
) -> Snapshot:
    row = list(snapshot)
    row[0] = target
    updates = effect(snapshot, payload)
    if updates:
        slots = machine.var_slots
        try:
            for name, value in updates.items():
                index, canonical = slots[name]
                try:  # the domain's own value: True written to a (0, 1) domain is stored as 1
                    row[index] = canonical.get(value, value)
                except TypeError:  # an unhashable value, kept as it is
                    row[index] = value
        except KeyError as exc:
            raise UnknownVariableError(
                f"machine {machine.name!r}: effect of transition "
                f"{transition.name!r} assigns unknown variable {exc}"
            ) from None
    return machine.snapshot_class(row)


def _no_transition(
    machine: Machine, snapshot: Snapshot, event: str, payload: Payload, why: str
) -> Outcome:
    policy = machine.event_index[event].policy
    if policy == "error":
        raise TransitionError(
            f"machine {machine.name!r}: event {event!r} is not allowed in state "
            f"{snapshot[0]!r} ({why}; payload {dict(payload)!r}, snapshot "
            f"{snapshot!r}); its policy is 'error', so this is a programmer error"
        )
    status = REJECTED if policy == "reject" else IGNORED
    return _new_outcome(Outcome, (status, snapshot, (), None, event, why))


def payload_fault(machine: Machine, event: str, payload: Payload) -> str:
    """Why a value of `payload` lies outside its field's domain, or "" if none does.

    Validation only ran the guards and effects on the declared values, so a
    value outside them must not reach a guard (``ok="banana"`` is truthy).
    Membership is equality, as in ``value in domain``.
    """
    finite, typed = machine.payload_domains[event]
    try:
        for name, allowed in finite:
            if payload[name] not in allowed:
                return _fault(machine, event, payload)
    except TypeError:  # an unhashable value: compare it with each domain value
        return _fault(machine, event, payload)
    for name, types in typed:
        if not isinstance(payload[name], types):
            return _fault(machine, event, payload)
    return ""


def _fault(machine: Machine, event: str, payload: Payload) -> str:
    """The first field of `payload` outside its domain, and why ("" if none)."""
    for fld in machine.event_index[event].fields:
        value = payload[fld.name]
        shown = f"payload {fld.name}={reprlib.repr(value)}"
        if fld.domain is not None and value not in fld.domain:
            return f"{shown} is outside its domain {reprlib.repr(fld.domain)}"
        declared = fld.type if fld.domain is None else None
        if declared is not None and not isinstance(value, accepted_types(declared)):
            return f"{shown} is a {type(value).__name__}, not a {declared.__name__}"
    return ""


def _out_of_domain(machine: Machine, snapshot: Snapshot, event: str, fault: str) -> Outcome:
    """The outcome of a payload outside its domain: the policy, and `FireError` for error."""
    policy = machine.event_index[event].policy
    if policy == "error":
        raise FireError(
            f"machine {machine.name!r}, event {event!r}: {fault}; pass a declared "
            f"value, or widen the field's domain"
        )
    status = REJECTED if policy == "reject" else IGNORED
    return _new_outcome(Outcome, (status, snapshot, (), None, event, fault))


def check_fire(machine: Machine, event: str, payload: Payload) -> None:
    """Raise `FireError` unless `event` is declared and `payload` has exactly its fields."""
    declared = machine.event_index.get(event)
    if declared is not None and payload.keys() == declared.field_names:
        return
    if declared is None:
        raise FireError(
            f"machine {machine.name!r} has no event {event!r}; events are "
            f"{[e.name for e in machine.events]}"
        )
    expected = declared.field_names
    given = frozenset(payload)
    if given != expected:
        missing = sorted(expected - given)
        unknown = sorted(given - expected)
        raise FireError(
            f"machine {machine.name!r}, event {event!r}: payload fields do not "
            f"match the declaration (missing {missing}, unknown {unknown})"
        )


def enabled(machine: Machine, snapshot: Snapshot, event: str, payload: Payload) -> bool:
    """Whether some transition is enabled for `event` with `payload` at `snapshot`."""
    if payload and payload_fault(machine, event, payload):
        return False
    for candidate in machine.dispatch[snapshot[0]].get(event, ()):
        if candidate.guard is None or candidate.guard(snapshot, payload):
            return True
    return False
