"""The parts a `Machine` is declared with, and the machine's data.

States, variables, events with their payload fields, transitions and
outputs (`State`, `Var`, `Event`, `Field`, `Transition`, `Output`), the
`Snapshot` an instance is in, and `MachineData`: a machine's declared parts
with the tables derived from them. `statecore.validation` checks and compiles
a `MachineData`; `statecore.definition.Machine` is the validated machine
everyone builds, and re-exports every name here.
"""

from __future__ import annotations

import builtins
import keyword
from collections.abc import Callable, Hashable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any, Literal, NamedTuple

from .errors import DefinitionError, InvalidNameError, PolicyError

Policy = Literal["reject", "ignore", "error"]
POLICIES: tuple[str, ...] = ("reject", "ignore", "error")

Payload = Mapping[str, Any]


class Output(NamedTuple):
    """An observable output emitted by a transition, e.g. ``put(finished=True)``.

    Outputs are hashable values: trace monitors and the fuzz interpreter compare
    them with what a real implementation did.
    """

    name: str
    fields: tuple[tuple[str, Hashable], ...] = ()

    def get(self, key: str, default: Any = None) -> Any:
        """Return the value of field `key`, or `default`."""
        for name, value in self.fields:
            if name == key:
                return value
        return default

    def __str__(self) -> str:
        inner = ", ".join(f"{k}={v!r}" for k, v in self.fields)
        return f"{self.name}({inner})"


def out(name: str, **fields: Hashable) -> Output:
    """Build an `Output`: ``out("put", finished=True)``."""
    return Output(name, tuple(fields.items()))


class Snapshot(tuple[Any, ...]):
    """The immutable, hashable state of one machine: a control state plus variables.

    Each machine has its own subclass with one attribute per variable, so
    guards read ``s.puts`` and ``s.state``. Two snapshots are equal, and hash
    equal, exactly when they hold the same state and the same values.
    """

    __slots__ = ()
    _machine_name: str = "?"
    _fields: tuple[str, ...] = ("state",)
    _plain: bool = False  # no variable can hold a model value (symmetry skips it)

    @property
    def state(self) -> str:
        """The name of the control state."""
        return str(self[0])

    def values(self) -> dict[str, Any]:
        """The variables as a new dict (name -> value)."""
        return dict(zip(self._fields[1:], self[1:]))

    def __getattr__(self, name: str) -> Any:
        raise AttributeError(
            f"machine {self._machine_name!r} has no variable {name!r}; "
            f"its variables are {list(self._fields[1:])}"
        )

    def __repr__(self) -> str:
        inner = ", ".join(f"{k}={v!r}" for k, v in zip(self._fields, self))
        return f"{self._machine_name}({inner})"


Guard = Callable[[Snapshot, Payload], bool]
Effect = Callable[[Snapshot, Payload], Mapping[str, Any] | None]
Emitter = Callable[[Snapshot, Payload], Iterable[Output]]


def check_identifier(kind: str, name: object, where: str) -> str:
    """Return `name` if it is a valid identifier, else raise `InvalidNameError`."""
    if not isinstance(name, str) or not name.isidentifier() or keyword.iskeyword(name):
        raise InvalidNameError(
            f"{where}: {kind} name {name!r} is not a Python identifier; use letters, "
            f"digits and underscores, not starting with a digit, and not a keyword"
        )
    return name


@dataclass(frozen=True)
class State:
    """A control state.

    `final` states have no outgoing transition; `hot` states are states the
    machine must not rest in once the system is quiescent (a queued terminal
    that was never sent, say).
    """

    name: str
    initial: bool = False
    final: bool = False
    hot: bool = False
    doc: str = ""


def parts(items: object) -> tuple[Any, ...]:
    """`items` as a tuple; one part given alone (a string, a `State`) is one item.

    Validation then reports a part of the wrong type by name, rather than
    the characters of a string or a raw ``TypeError``.
    """
    if isinstance(items, (str, bytes)) or not isinstance(items, Iterable):
        return (items,)
    return tuple(items)


def _as_values(values: object) -> tuple[tuple[Hashable, ...], str]:
    """`values` as a tuple, and what is wrong with them ("" if nothing).

    A definition part cannot name its machine, so a wrong domain is kept as
    a problem text for validation to report with the machine's name.
    """
    if isinstance(values, (str, bytes)):
        return (), (
            f"is the string {values!r}, which would be the one-letter values "
            f"{list(values)!r}; write ({values!r},) for one value"
        )
    if not isinstance(values, Iterable):
        hint = f"range({values!r})" if isinstance(values, int) else "(a, b, ...)"
        return (), (
            f"is {values!r} (type {type(values).__name__}), not a collection of "
            f"values; write {hint}"
        )
    return tuple(values), ""


@dataclass(frozen=True)
class Var:
    """A machine variable with a finite domain and a default value.

    `problem` says what is wrong with the domain as given ("" if nothing);
    validation reports it with the machine's name.
    """

    name: str
    domain: tuple[Hashable, ...]
    default: Hashable
    doc: str = ""
    problem: str = field(default="", init=False, repr=False, compare=False)

    def __init__(
        self, name: str, domain: Iterable[Hashable], default: Hashable, doc: str = ""
    ) -> None:
        values, problem = _as_values(domain)
        object.__setattr__(self, "name", name)
        object.__setattr__(self, "domain", values)
        object.__setattr__(self, "default", default)
        object.__setattr__(self, "doc", doc)
        object.__setattr__(self, "problem", problem and f"domain {problem}")


@dataclass(frozen=True)
class Field:
    """A payload field of an event.

    Give a finite `domain` for values the explorer enumerates exhaustively, or,
    for unbounded types such as ``float``, a `sample` of representative values
    (the symbolic check looks beyond it).
    """

    name: str
    domain: tuple[Hashable, ...] | None = None
    sample: tuple[Hashable, ...] | None = None
    type: builtins.type | None = None
    doc: str = ""
    problem: str = field(default="", init=False, repr=False, compare=False)

    def __init__(
        self,
        name: str,
        domain: Iterable[Hashable] | None = None,
        *,
        sample: Iterable[Hashable] | None = None,
        type: builtins.type | None = None,
        doc: str = "",
    ) -> None:
        problems: list[str] = []
        for kind, values in (("domain", domain), ("sample", sample)):
            if values is None:
                object.__setattr__(self, kind, None)
                continue
            kept, problem = _as_values(values)
            object.__setattr__(self, kind, kept)
            if problem:
                problems.append(f"{kind} {problem}")
        object.__setattr__(self, "name", name)
        object.__setattr__(self, "type", type)
        object.__setattr__(self, "doc", doc)
        object.__setattr__(self, "problem", "; ".join(problems))

    @property
    def bounded(self) -> bool:
        """Whether the field has a finite domain (rather than only a sample)."""
        return self.domain is not None

    @property
    def values(self) -> tuple[Hashable, ...]:
        """The values the explorer tries: the domain, else the sample."""
        if self.domain is not None:
            return self.domain
        return self.sample or ()


@dataclass(frozen=True)
class Event:
    """An event with payload fields and a policy for when no transition is enabled.

    ``reject`` returns a rejected outcome (production paths that must fail
    open), ``ignore`` returns an ignored outcome (a no-op by design), ``error``
    raises `TransitionError` (firing it there is a programmer error).
    """

    name: str
    fields: tuple[Field, ...] = ()
    policy: Policy = "reject"
    doc: str = ""
    pure: bool = True
    _field_names: frozenset[str] = field(init=False, repr=False, compare=False)

    def __init__(
        self,
        name: str,
        fields: Iterable[Field] = (),
        policy: Policy = "reject",
        doc: str = "",
        *,
        pure: bool = True,
    ) -> None:
        object.__setattr__(self, "name", name)
        object.__setattr__(self, "fields", parts(fields))
        object.__setattr__(self, "policy", policy)
        object.__setattr__(self, "doc", doc)
        object.__setattr__(self, "pure", pure)
        # A field that is not a `Field` is reported by validation, with the machine.
        names = frozenset(f.name for f in self.fields if isinstance(f, Field))
        object.__setattr__(self, "_field_names", names)
        if policy not in POLICIES:
            raise PolicyError(f"event {name!r}: policy {policy!r} is not one of {list(POLICIES)}")

    @property
    def field_names(self) -> frozenset[str]:
        """The names of the payload fields."""
        return self._field_names


def _as_emit(emit: object) -> Any:
    """A static `emit` as a tuple: one `Output` is one output, a string stays whole.

    Validation reports anything in the tuple that is not an `Output`.
    """
    if callable(emit):
        return emit
    if isinstance(emit, (Output, str, bytes)) or not isinstance(emit, Iterable):
        return (emit,)
    return tuple(emit)


def _callable_label(fn: object, fallback: str) -> str:
    name = getattr(fn, "__name__", "")
    if not name or name == "<lambda>":
        return fallback
    return str(name)


@dataclass(frozen=True)
class Transition:
    """``source --event [guard] / effect--> target``, emitting outputs.

    `source` is one state name or several. `target` ``None`` means "stay in
    the source state" (a self-loop that may still change variables). `guard`
    returns whether the transition is enabled (True or False); `effect`
    returns the variables it changes (a mapping, or ``None`` for none); `emit`
    is a tuple of `Output` values (or one `Output`) or a function returning
    them. All three must be pure functions of the snapshot and the payload
    (see the module docstring). Labels are the short texts shown on diagrams
    and in traces.
    """

    source: tuple[str, ...]
    event: str
    target: str | None
    guard: Guard | None = None
    effect: Effect | None = None
    emit: tuple[Output, ...] | Emitter = ()
    guard_label: str = ""
    effect_label: str = ""
    name: str = ""

    def __init__(
        self,
        source: str | Iterable[str],
        event: str,
        target: str | None = None,
        *,
        guard: Guard | None = None,
        effect: Effect | None = None,
        emit: Iterable[Output] | Emitter = (),
        guard_label: str = "",
        effect_label: str = "",
        name: str = "",
    ) -> None:
        sources = (source,) if isinstance(source, str) else tuple(source)
        default_name = f"{'|'.join(sources)}--{event}-->{target or '(same)'}"
        for label, part, what in (
            (guard_label, guard, "guard"),
            (effect_label, effect, "effect"),
        ):
            if label and part is None:
                raise DefinitionError(
                    f"transition {name or default_name!r}: {what}_label={label!r} labels no "
                    f"{what}; a label names the {what} it is on (pass {what}=a function, "
                    f"whose name is the label, or drop the label)"
                )
        object.__setattr__(self, "source", sources)
        object.__setattr__(self, "event", event)
        object.__setattr__(self, "target", target)
        object.__setattr__(self, "guard", guard)
        object.__setattr__(self, "effect", effect)
        object.__setattr__(self, "emit", _as_emit(emit))
        object.__setattr__(
            self, "guard_label", guard_label or (guard and _callable_label(guard, "guard")) or ""
        )
        object.__setattr__(
            self,
            "effect_label",
            effect_label or (effect and _callable_label(effect, "effect")) or "",
        )
        object.__setattr__(self, "name", name or default_name)

    def label(self) -> str:
        """``event [guard] / effect``: the edge label used on diagrams."""
        text = self.event
        if self.guard_label:
            text += f" [{self.guard_label}]"
        if self.effect_label:
            text += f" / {self.effect_label}"
        return text


class PayloadCheck(NamedTuple):
    """How `statecore.semantics.step` tells an event's payload in or out of its domains.

    `finite` pairs each finite field with its domain as a set; `typed` pairs
    each unbounded field that declares a type with the types it accepts.
    """

    finite: tuple[tuple[str, frozenset[Hashable]], ...]
    typed: tuple[tuple[str, tuple[builtins.type, ...]], ...]


def accepted_types(declared: builtins.type) -> tuple[builtins.type, ...]:
    """The types a field declared as `declared` accepts: an int is a float, as in typing."""
    if declared is float:
        return (float, int)
    if declared is complex:
        return (complex, float, int)
    return (declared,)


class Compiled(NamedTuple):
    """One transition from one concrete source state, ready to run.

    A tuple so that the hot path in `statecore.semantics.step` can unpack it
    in one go.
    """

    target: str
    guard: Guard | None
    effect: Effect | None
    emit_fn: Emitter | None
    emit_static: tuple[Output, ...]
    transition: Transition
    field_names: frozenset[str]


@dataclass(frozen=True, eq=False, init=False)
class MachineData:
    """A machine's declared parts and the tables derived from them.

    `statecore.definition.Machine` is the one to build: its constructor
    validates the parts (`statecore.validation`) and installs the tables.
    """

    name: str
    states: tuple[State, ...]
    events: tuple[Event, ...]
    transitions: tuple[Transition, ...]
    variables: tuple[Var, ...] = ()
    doc: str = ""
    check_limit: int = 200_000
    pure: bool = True
    # Derived, installed by `statecore.validation.validate`.
    initial: State = field(init=False, repr=False)
    snapshot_class: type[Snapshot] = field(init=False, repr=False)
    state_index: Mapping[str, State] = field(init=False, repr=False)
    event_index: Mapping[str, Event] = field(init=False, repr=False)
    var_index: Mapping[str, int] = field(init=False, repr=False)
    var_slots: Mapping[str, tuple[int, Mapping[Hashable, Hashable]]] = field(init=False, repr=False)
    dispatch: Mapping[str, Mapping[str, tuple[Compiled, ...]]] = field(init=False, repr=False)
    initial_snap: Snapshot = field(init=False, repr=False)
    cacheable_events: frozenset[str] = field(init=False, repr=False)
    payload_domains: Mapping[str, PayloadCheck] = field(init=False, repr=False)
    reachable_snapshots: frozenset[Snapshot] = field(init=False, repr=False)

    # -- construction helpers used by validation ---------------------------

    def _install(self, **derived: Any) -> None:
        for key, value in derived.items():
            object.__setattr__(self, key, value)

    # -- public queries ----------------------------------------------------

    @property
    def final_states(self) -> frozenset[str]:
        """Names of the final states."""
        return frozenset(s.name for s in self.states if s.final)

    @property
    def hot_states(self) -> frozenset[str]:
        """Names of the hot states."""
        return frozenset(s.name for s in self.states if s.hot)

    def initial_snapshot(self) -> Snapshot:
        """The snapshot every new instance starts in."""
        return self.initial_snap

    def snapshot(self, state: str, **values: Any) -> Snapshot:
        """Build a snapshot in `state`, variables at their defaults unless given."""
        from .errors import UnknownStateError, UnknownVariableError

        if state not in self.state_index:
            raise UnknownStateError(
                f"machine {self.name!r}: no state {state!r}; states are "
                f"{[s.name for s in self.states]}"
            )
        unknown = set(values) - set(self.var_index)
        if unknown:
            raise UnknownVariableError(
                f"machine {self.name!r}: no variable(s) {sorted(unknown)}; "
                f"variables are {[v.name for v in self.variables]}"
            )
        for var in self.variables:
            if var.name in values and values[var.name] not in var.domain:
                from .errors import VariableDomainError

                raise VariableDomainError(
                    f"machine {self.name!r}: {var.name}={values[var.name]!r} is outside its domain"
                )
        row = [state]
        for var in self.variables:
            value = values.get(var.name, var.default)
            try:  # the domain's own value, as `step` stores it
                row.append(self.var_slots[var.name][1].get(value, value))
            except TypeError:  # an unhashable value equal to a domain value
                row.append(value)
        return self.snapshot_class(row)

    def enabled_events(self, snapshot: Snapshot) -> tuple[str, ...]:
        """Events with at least one transition out of the snapshot's state."""
        return tuple(self.dispatch[snapshot.state])

    def __repr__(self) -> str:
        return (
            f"Machine({self.name!r}, {len(self.states)} states, "
            f"{len(self.events)} events, {len(self.transitions)} transitions)"
        )
