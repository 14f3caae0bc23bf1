"""Definition-time validation and compilation of a `Machine`.

Two kinds of checks run, in this order, each raising its own `DefinitionError`
subclass with a message that names the machine, the culprit and the fix:

1. Structural: the type of every part (a `State`, not a string), names,
   duplicates, clashes, the initial state, hot and final flags, domains and
   defaults (a domain that is a collection of hashable values, no two equal
   values of different types in a variable's), unknown states and events,
   static outputs, transitions out of final states, unused events and
   structurally unreachable states.
2. Semantic, over the finite domains: every snapshot reachable from the
   initial one is visited, every event fired with every payload combination
   (domains, or samples for unbounded fields). Two enabled guards at once
   (non-determinism), a guard that raises or returns a non-bool, an effect
   that raises, assigns an unknown variable or leaves a domain are all
   reported with the snapshot and payload that show it. At most
   `check_limit` snapshots are visited; stopping there with more reachable
   issues a `ValidationLimitWarning`, since the rest went unchecked.
"""

from __future__ import annotations

import itertools
import os
import sys
import warnings
from collections import deque
from collections.abc import Hashable, Iterable, Iterator, Mapping
from operator import itemgetter
from typing import Any

from .errors import (
    CallbackError,
    CheckLimitError,
    DefinitionTypeError,
    DuplicateNameError,
    EffectDomainError,
    FieldDomainError,
    FinalStateTransitionError,
    HotFinalStateError,
    InitialStateError,
    NameClashError,
    NondeterminismError,
    UnknownEventError,
    UnknownStateError,
    UnknownVariableError,
    UnreachableStateError,
    UnusedEventError,
    ValidationLimitWarning,
    VariableDomainError,
)
from .forms import aliased
from .machine_parts import (
    Compiled,
    Event,
    Field,
    MachineData,
    Output,
    PayloadCheck,
    Snapshot,
    State,
    Transition,
    Var,
    accepted_types,
    check_identifier,
)

RESERVED_VARIABLE_NAMES = frozenset({"state", "values", "count", "index"})


def validate(machine: MachineData) -> None:
    """Check `machine` and install its derived tables; raise on the first problem."""
    _check_parts(machine)
    _check_names(machine)
    _check_states(machine)
    _check_variables(machine)
    _check_fields(machine)
    _check_transitions(machine)
    machine._install(
        state_index={s.name: s for s in machine.states},
        event_index={e.name: e for e in machine.events},
        var_index={v.name: i + 1 for i, v in enumerate(machine.variables)},
        var_slots={
            v.name: (i + 1, {value: value for value in v.domain})
            for i, v in enumerate(machine.variables)
        },
        initial=next(s for s in machine.states if s.initial),
        snapshot_class=_snapshot_class(machine),
        dispatch=_compile(machine),
    )
    machine._install(
        initial_snap=machine.snapshot(machine.initial.name),
        cacheable_events=frozenset(
            e.name
            for e in machine.events
            if machine.pure and e.pure and all(f.bounded for f in e.fields)
        ),
        payload_domains={e.name: _payload_check(e) for e in machine.events},
    )
    _check_reachable_structurally(machine)
    machine._install(reachable_snapshots=_check_semantics(machine))


def _where(machine: MachineData) -> str:
    return f"machine {machine.name!r}"


_EXAMPLES: dict[type, str] = {
    State: "State({name!r})",
    Event: "Event({name!r})",
    Var: "Var({name!r}, range(2), 0)",
    Field: "Field({name!r}, (True, False))",
}


def _wrong_part(where: str, kind: str, item: object, cls: type) -> DefinitionTypeError:
    """The error for `item`, which should have been a `cls`, with how to write one."""
    if isinstance(item, tuple) and cls is Transition:
        fix = f"Transition({', '.join(map(repr, item))})"
    else:
        name = item if isinstance(item, str) else getattr(item, "name", "name")
        fix = _EXAMPLES.get(cls, f"{cls.__name__}(...)").format(name=name)
    return DefinitionTypeError(
        f"{where}: {kind} {item!r} has type {type(item).__name__}, not {cls.__name__}; write {fix}"
    )


def _check_parts(machine: MachineData) -> None:
    """Every part has its type, so later checks never fail with a raw AttributeError."""
    where = _where(machine)
    limit = machine.check_limit
    if isinstance(limit, bool) or not isinstance(limit, int) or limit <= 0:
        raise CheckLimitError(
            f"{where}: check_limit={limit!r} would check no snapshot at all; give a "
            f"positive number of snapshots to check (the default is 200_000)"
        )
    for kind, cls, items in (
        ("state", State, machine.states),
        ("event", Event, machine.events),
        ("variable", Var, machine.variables),
        ("transition", Transition, machine.transitions),
    ):
        for item in items:
            if not isinstance(item, cls):
                raise _wrong_part(where, kind, item, cls)
    for event in machine.events:
        for fld in event.fields:
            if not isinstance(fld, Field):
                raise _wrong_part(f"{where}, event {event.name!r}", "payload field", fld, Field)
            if fld.problem:
                raise FieldDomainError(
                    f"{where}, event {event.name!r}: payload field {fld.name!r}: {fld.problem}"
                )
    for var in machine.variables:
        if var.problem:
            raise VariableDomainError(f"{where}: variable {var.name!r}: {var.problem}")


def _duplicates(names: Iterable[str]) -> list[str]:
    seen: set[str] = set()
    dups: list[str] = []
    for name in names:
        if name in seen and name not in dups:
            dups.append(name)
        seen.add(name)
    return dups


def _check_names(machine: MachineData) -> None:
    where = _where(machine)
    check_identifier("machine", machine.name, "machine definition")
    for kind, names in (
        ("state", [s.name for s in machine.states]),
        ("event", [e.name for e in machine.events]),
        ("variable", [v.name for v in machine.variables]),
    ):
        for name in names:
            check_identifier(kind, name, where)
        dups = _duplicates(names)
        if dups:
            raise DuplicateNameError(
                f"{where}: {kind} {dups[0]!r} is declared more than once; "
                f"give each {kind} a unique name"
            )
    for event in machine.events:
        names = [f.name for f in event.fields]
        for name in names:
            check_identifier("payload field", name, f"{where}, event {event.name!r}")
        dups = _duplicates(names)
        if dups:
            raise DuplicateNameError(
                f"{where}, event {event.name!r}: payload field {dups[0]!r} is "
                f"declared more than once"
            )
    clash = {s.name for s in machine.states} & {e.name for e in machine.events}
    if clash:
        name = sorted(clash)[0]
        raise NameClashError(
            f"{where}: {name!r} is both a state and an event, which makes traces "
            f"and diagrams ambiguous; rename one (e.g. state {name + '_done'!r})"
        )
    for var in machine.variables:
        if var.name in RESERVED_VARIABLE_NAMES or var.name.startswith("_"):
            raise NameClashError(
                f"{where}: variable name {var.name!r} clashes with a snapshot "
                f"attribute; rename the variable"
            )


def _check_states(machine: MachineData) -> None:
    where = _where(machine)
    if not machine.states:
        raise InitialStateError(f"{where}: declares no states; add State(..., initial=True)")
    initials = [s.name for s in machine.states if s.initial]
    if not initials:
        raise InitialStateError(
            f"{where}: no initial state; mark exactly one state with initial=True"
        )
    if len(initials) > 1:
        raise InitialStateError(
            f"{where}: states {initials} are all marked initial; keep exactly one"
        )
    for state in machine.states:
        if state.hot and state.final:
            raise HotFinalStateError(
                f"{where}: state {state.name!r} is both hot and final; a final "
                f"state is where the machine rests, so drop hot=True or final=True"
            )


def _check_variables(machine: MachineData) -> None:
    where = _where(machine)
    for var in machine.variables:
        if not var.domain:
            raise VariableDomainError(f"{where}: variable {var.name!r} has an empty domain")
        try:
            domain = set(var.domain)
        except TypeError as exc:
            raise VariableDomainError(
                f"{where}: variable {var.name!r} has an unhashable value in its domain: {exc}"
            ) from None
        if not _member(var.default, domain):
            raise VariableDomainError(
                f"{where}: default {var.default!r} of variable {var.name!r} is "
                f"outside its domain {_show(var.domain)}; change the default or "
                f"widen the domain"
            )
        pair = aliased(var.domain)
        if pair is not None:
            raise VariableDomainError(
                f"{where}: variable {var.name!r} has both {pair[0]!r} and {pair[1]!r} in "
                f"its domain; they compare equal, so snapshots cannot tell them apart; "
                f"keep one, or use values that differ (e.g. strings)"
            )


def _check_fields(machine: MachineData) -> None:
    where = _where(machine)
    for event in machine.events:
        for fld in event.fields:
            if fld.domain is None and not fld.sample:
                raise FieldDomainError(
                    f"{where}, event {event.name!r}: payload field {fld.name!r} has "
                    f"neither a domain nor a sample; give domain=(...) for finite "
                    f"values or sample=(...) for an unbounded type"
                )
            if fld.domain is not None and not fld.domain:
                raise FieldDomainError(
                    f"{where}, event {event.name!r}: payload field {fld.name!r} has an empty domain"
                )
            _check_field_values(f"{where}, event {event.name!r}: payload field {fld.name!r}", fld)


def _check_field_values(where: str, fld: Field) -> None:
    """Field values are hashable (the memo and the explorer key on them) and typed."""
    for kind, values in (("domain", fld.domain), ("sample", fld.sample)):
        for value in values or ():
            try:
                hash(value)
            except TypeError:
                raise FieldDomainError(
                    f"{where}: {kind} value {value!r} (type {type(value).__name__}) is "
                    f"unhashable; use hashable values (a tuple rather than a list)"
                ) from None
    if fld.type is None:
        return
    if not isinstance(fld.type, type):
        raise FieldDomainError(
            f"{where}: type={fld.type!r} is not a class; give a class such as float"
        )
    accepted = accepted_types(fld.type)
    for value in fld.sample or ():
        if not isinstance(value, accepted):
            raise FieldDomainError(
                f"{where}: sample value {value!r} is not a {fld.type.__name__}; fire "
                f"would reject it, so make the samples match type={fld.type.__name__}"
            )


def _payload_check(event: Event) -> PayloadCheck:
    """How `semantics.step` tells a payload of `event` in or out of its domains."""
    finite = tuple((f.name, frozenset(f.domain)) for f in event.fields if f.domain is not None)
    typed = tuple(
        (f.name, accepted_types(f.type))
        for f in event.fields
        if f.domain is None and f.type is not None
    )
    return PayloadCheck(finite, typed)


def _check_transitions(machine: MachineData) -> None:
    where = _where(machine)
    states = {s.name: s for s in machine.states}
    events = {e.name for e in machine.events}
    for t in machine.transitions:
        if not t.source:
            raise UnknownStateError(f"{where}: transition {t.name!r} has no source state")
        for name in (*t.source, *([t.target] if t.target is not None else [])):
            if name not in states:
                role = "target" if name == t.target and name not in t.source else "source"
                raise UnknownStateError(
                    f"{where}: transition {t.name!r} names unknown {role} state "
                    f"{name!r}; declared states are {sorted(states)}"
                )
        if t.event not in events:
            raise UnknownEventError(
                f"{where}: transition {t.name!r} names unknown event {t.event!r}; "
                f"declare Event({t.event!r}) or fix the name"
            )
        for item in () if callable(t.emit) else t.emit:
            if not isinstance(item, Output):
                raise CallbackError(
                    f"{where}: transition {t.name!r} emits {item!r} (type "
                    f"{type(item).__name__}), not an Output; write "
                    f"emit=[out('name', field=value)]"
                )
        for name in t.source:
            if states[name].final:
                raise FinalStateTransitionError(
                    f"{where}: transition {t.name!r} leaves final state {name!r}; "
                    f"final states have no outgoing transitions, so remove the "
                    f"transition or make {name!r} non-final"
                )
    used = {t.event for t in machine.transitions}
    for event in machine.events:
        if event.name not in used:
            raise UnusedEventError(
                f"{where}: event {event.name!r} has no transition; add one or remove the event"
            )


def _snapshot_class(machine: MachineData) -> type[Snapshot]:
    names = ("state", *(v.name for v in machine.variables))
    namespace: dict[str, Any] = {
        "__slots__": (),
        "_machine_name": machine.name,
        "_fields": names,
        "_plain": all(
            type(value) in (str, int, float, bool, type(None))
            for var in machine.variables
            for value in var.domain
        ),
    }
    for index, name in enumerate(names):
        namespace[name] = property(itemgetter(index), doc=f"value of {name!r}")
    return type(f"{machine.name}_snapshot", (Snapshot,), namespace)


def _compile(machine: MachineData) -> dict[str, dict[str, tuple[Compiled, ...]]]:
    table: dict[str, dict[str, list[Compiled]]] = {s.name: {} for s in machine.states}
    fields = {e.name: e.field_names for e in machine.events}
    for t in machine.transitions:
        emit_fn = t.emit if callable(t.emit) else None
        emit_static = () if callable(t.emit) else t.emit
        for source in t.source:
            compiled = Compiled(
                t.target or source, t.guard, t.effect, emit_fn, emit_static, t, fields[t.event]
            )
            table[source].setdefault(t.event, []).append(compiled)
    return {
        state: {event: tuple(cs) for event, cs in by_event.items()}
        for state, by_event in table.items()
    }


def _check_reachable_structurally(machine: MachineData) -> None:
    seen = {machine.initial.name}
    frontier = [machine.initial.name]
    while frontier:
        state = frontier.pop()
        for compiled in itertools.chain.from_iterable(machine.dispatch[state].values()):
            if compiled.target not in seen:
                seen.add(compiled.target)
                frontier.append(compiled.target)
    for declared in machine.states:
        if declared.name not in seen:
            raise UnreachableStateError(
                f"{_where(machine)}: state {declared.name!r} cannot be reached from "
                f"initial state {machine.initial.name!r}; add a transition into "
                f"it or remove it"
            )


def payloads(event: Event) -> Iterator[dict[str, Any]]:
    """Every payload combination of `event` (domains, else samples)."""
    names = [f.name for f in event.fields]
    for combo in itertools.product(*(f.values for f in event.fields)):
        yield dict(zip(names, combo))


def _check_semantics(machine: MachineData) -> frozenset[Snapshot]:
    start = machine.initial_snapshot()
    seen = {start}
    queue = deque([start])
    domains = {v.name: set(v.domain) for v in machine.variables}
    events = {e.name: e for e in machine.events}
    for _ in range(machine.check_limit):
        if not queue:
            break
        snap = queue.popleft()
        for event_name, candidates in machine.dispatch[snap.state].items():
            event = events[event_name]
            for payload in payloads(event):
                enabled = [c for c in candidates if _guard_holds(machine, c, snap, payload)]
                if len(enabled) > 1:
                    names = [c.transition.name for c in enabled]
                    raise NondeterminismError(
                        f"{_where(machine)}: transitions {names} are both enabled in "
                        f"{snap!r} on event {event_name!r} with payload {payload!r}; "
                        f"make their guards mutually exclusive"
                    )
                for compiled in enabled:
                    nxt = _successor(machine, compiled, snap, payload, domains)
                    if nxt not in seen:
                        seen.add(nxt)
                        queue.append(nxt)
    if queue:
        warnings.warn(
            f"{_where(machine)}: validation stopped at check_limit={machine.check_limit} "
            f"snapshots with reachable ones left unchecked ({len(queue)} found so far), "
            f"so non-determinism or a failing guard or effect there goes unreported; "
            f"raise check_limit to check them all",
            ValidationLimitWarning,
            stacklevel=_caller_level(),
        )
    return frozenset(seen)


def _caller_level() -> int:
    """The `stacklevel` of the first caller outside statecore (who built the machine)."""
    package = os.path.dirname(os.path.abspath(__file__))
    frame = sys._getframe(1)
    level = 1
    while frame.f_back is not None and frame.f_code.co_filename.startswith(package):
        frame = frame.f_back
        level += 1
    return level


def _guard_holds(
    machine: MachineData, compiled: Compiled, snap: Snapshot, payload: dict[str, Any]
) -> bool:
    if compiled.guard is None:
        return True
    try:
        result = compiled.guard(snap, payload)
    except Exception as exc:
        raise CallbackError(
            f"{_where(machine)}: guard of transition {compiled.transition.name!r} "
            f"raised {type(exc).__name__}: {exc} in {snap!r} with payload "
            f"{payload!r}; guards must return a bool for every value in the domains"
        ) from exc
    if not isinstance(result, bool):
        raise CallbackError(
            f"{_where(machine)}: guard of transition {compiled.transition.name!r} "
            f"returned {result!r} (type {type(result).__name__}) in {snap!r} with payload "
            f"{payload!r}; return True or False, e.g. wrap the expression in bool(...)"
        )
    return result


def _successor(
    machine: MachineData,
    compiled: Compiled,
    snap: Snapshot,
    payload: dict[str, Any],
    domains: Mapping[str, set[Hashable]],
) -> Snapshot:
    where = f"{_where(machine)}: transition {compiled.transition.name!r}"
    updates: Mapping[str, Any] | None = None
    if compiled.effect is not None:
        try:
            updates = compiled.effect(snap, payload)
        except Exception as exc:
            raise CallbackError(
                f"{where}: effect raised {type(exc).__name__}: {exc} in {snap!r} "
                f"with payload {payload!r}"
            ) from exc
        if updates is not None and not isinstance(updates, Mapping):
            raise CallbackError(
                f"{where}: effect returned {type(updates).__name__}, expected a "
                f"mapping of variable names to new values (or None)"
            )
        for name, value in (updates or {}).items():
            if name not in domains:
                raise UnknownVariableError(
                    f"{where}: effect assigns unknown variable {name!r}; declared "
                    f"variables are {sorted(domains)}"
                )
            if not _member(value, domains[name]):
                raise EffectDomainError(
                    f"{where}: effect sets {name}={value!r}, outside its domain "
                    f"{_show(tuple(domains[name]))}, in {snap!r} with payload "
                    f"{payload!r}; guard the transition or widen the domain"
                )
    if compiled.emit_fn is not None:
        try:
            outputs = tuple(compiled.emit_fn(snap, payload))
        except Exception as exc:
            raise CallbackError(
                f"{where}: emitter raised {type(exc).__name__}: {exc} in {snap!r}"
            ) from exc
        bad = [o for o in outputs if not isinstance(o, Output)]
        if bad:
            raise CallbackError(
                f"{where}: emitter returned {bad[0]!r}; emit Output values, "
                f"e.g. out('put', finished=True)"
            )
    row = list(snap)
    row[0] = compiled.target
    for name, value in (updates or {}).items():
        index, canonical = machine.var_slots[name]
        row[index] = canonical.get(value, value)  # as `step` stores it
    return machine.snapshot_class(row)


def _member(value: object, domain: set[Hashable]) -> bool:
    try:
        return value in domain
    except TypeError:
        return False


def _show(values: tuple[Hashable, ...]) -> str:
    if len(values) <= 8:
        return repr(list(values))
    return f"[{values[0]!r}, {values[1]!r}, ..., {values[-1]!r}] ({len(values)} values)"
