"""Hypothesis strategies for random small, valid, flat statecore machines.

A machine is generated as plain data first (`MachineSpec`) and then built
(`build_machine`), so that an oracle can rebuild the very same machine in
another library from `describe(machine)`. Guarantees, by construction:

* 2-6 states, the first one initial and never final; every state is reachable
  through a spanning tree whose edges leave earlier non-final states;
* no transition leaves a final state, every declared event has a transition;
* the guards of the transitions sharing a (source, event) pair partition the
  values of one key (the event's payload field, or a variable), so at most one
  holds for any payload and snapshot;
* effects are modular increments, so they never leave a variable's domain.

Importers: ``from strategies import machines, event_sequences, describe``.
"""

from __future__ import annotations

import weakref
from collections.abc import Callable, Mapping, Sequence
from dataclasses import asdict, dataclass
from typing import Any

from hypothesis import strategies as st

from statecore import Event, Field, Machine, Output, Snapshot, State, Transition, Var, out

SAFE_POLICIES: tuple[str, ...] = ("reject", "ignore")
FIELD_NAME = "f"

Payload = dict[str, Any]
Step = tuple[str, Payload]


@dataclass(frozen=True)
class GuardSpec:
    """The guard ``<key> in values``, key being a payload field or a variable."""

    on: str  # "payload" or "var"
    key: str
    values: tuple[int, ...]

    def holds(self, variables: Mapping[str, Any], payload: Mapping[str, Any]) -> bool:
        """Evaluate the guard; ``in`` on a tuple compares with ``==``, never hashes."""
        value = payload[self.key] if self.on == "payload" else variables[self.key]
        return value in self.values


@dataclass(frozen=True)
class EffectSpec:
    """``var := (var + delta + (payload[field] if add_field)) % size``."""

    var: str
    size: int
    delta: int
    add_field: str | None = None

    def apply(self, variables: Mapping[str, Any], payload: Mapping[str, Any]) -> int:
        extra = payload[self.add_field] if self.add_field is not None else 0
        return int((variables[self.var] + self.delta + extra) % self.size)


@dataclass(frozen=True)
class VarSpec:
    name: str
    size: int  # domain is range(size)
    default: int


@dataclass(frozen=True)
class EventSpec:
    name: str
    field_size: int | None  # payload field FIELD_NAME with domain range(field_size)
    policy: str

    @property
    def field(self) -> str | None:
        return None if self.field_size is None else FIELD_NAME


@dataclass(frozen=True)
class TransitionSpec:
    source: str
    event: str
    target: str | None  # None: stay in the source state
    guard: GuardSpec | None = None
    effect: EffectSpec | None = None
    emit: tuple[str, ...] = ()  # static outputs, by name, no fields
    emit_dynamic: bool = False  # emit out("dyn", src=state, **payload) instead

    def outputs(self, state: str, payload: Mapping[str, Any]) -> tuple[Output, ...]:
        """The outputs this transition emits from `state` with `payload`."""
        if self.emit_dynamic:
            return (out("dyn", src=state, **payload),)
        return tuple(out(name) for name in self.emit)


@dataclass(frozen=True)
class MachineSpec:
    name: str
    states: tuple[str, ...]  # states[0] is the initial state
    finals: tuple[str, ...]
    hot: tuple[str, ...]
    variables: tuple[VarSpec, ...]
    events: tuple[EventSpec, ...]
    transitions: tuple[TransitionSpec, ...]

    @property
    def initial(self) -> str:
        return self.states[0]

    def as_dict(self) -> dict[str, Any]:
        """The whole description as nested dicts, lists and scalars."""
        return asdict(self)

    def initial_values(self) -> dict[str, int]:
        return {v.name: v.default for v in self.variables}


_SPECS: weakref.WeakKeyDictionary[Machine, MachineSpec] = weakref.WeakKeyDictionary()


def describe(machine: Machine) -> MachineSpec:
    """The plain-data description a machine from `machines()` was built from."""
    return _SPECS[machine]


def _guard_fn(spec: GuardSpec) -> Callable[[Snapshot, Mapping[str, Any]], bool]:
    if spec.on == "payload":
        key, values = spec.key, spec.values
        return lambda s, p: p[key] in values
    key, values = spec.key, spec.values
    return lambda s, p: getattr(s, key) in values


def _effect_fn(spec: EffectSpec) -> Callable[[Snapshot, Mapping[str, Any]], dict[str, int]]:
    return lambda s, p: {spec.var: spec.apply(s.values(), p)}


def _emit(spec: TransitionSpec) -> Any:
    if spec.emit_dynamic:
        return lambda s, p: spec.outputs(s.state, p)
    return spec.outputs("", {})


def build_machine(spec: MachineSpec, *, check_limit: int = 200_000) -> Machine:
    """Build the statecore `Machine` described by `spec` and remember the spec."""
    finals, hot = set(spec.finals), set(spec.hot)
    machine = Machine(
        spec.name,
        states=[
            State(name, initial=i == 0, final=name in finals, hot=name in hot)
            for i, name in enumerate(spec.states)
        ],
        variables=[Var(v.name, range(v.size), default=v.default) for v in spec.variables],
        events=[
            Event(
                e.name,
                [] if e.field_size is None else [Field(FIELD_NAME, range(e.field_size))],
                policy=e.policy,  # type: ignore[arg-type]
            )
            for e in spec.events
        ],
        transitions=[
            Transition(
                t.source,
                t.event,
                t.target,
                guard=None if t.guard is None else _guard_fn(t.guard),
                effect=None if t.effect is None else _effect_fn(t.effect),
                emit=_emit(t),
                name=f"t{i}",
            )
            for i, t in enumerate(spec.transitions)
        ],
        check_limit=check_limit,
    )
    _SPECS[machine] = spec
    return machine


@st.composite
def machine_specs(draw: st.DrawFn, policies: Sequence[str] = SAFE_POLICIES) -> MachineSpec:
    """A random valid `MachineSpec` (see the module docstring for the guarantees)."""
    n_states = draw(st.integers(2, 6))
    n_finals = draw(st.integers(0, min(2, n_states - 1)))
    n_nonfinal = n_states - n_finals
    # Non-final states first, so each one can hang off its predecessor.
    states = [f"s{i}" for i in range(n_states)]
    nonfinal, finals = states[:n_nonfinal], states[n_nonfinal:]

    variables = [
        VarSpec(f"v{i}", size, draw(st.integers(0, size - 1)))
        for i, size in enumerate(draw(st.lists(st.integers(2, 4), max_size=2)))
    ]
    events = [
        EventSpec(
            f"e{i}",
            draw(st.none() | st.integers(1, 3)),
            draw(st.sampled_from(tuple(policies))),
        )
        for i in range(draw(st.integers(1, 4)))
    ]
    by_name = {e.name: e for e in events}

    def keyed(event: str) -> bool:
        return by_name[event].field_size is not None or bool(variables)

    edges: list[tuple[str, str, str | None]] = []
    slots: set[tuple[str, str]] = set()

    def free(sources: Sequence[str]) -> list[tuple[str, str]]:
        return [
            (s, e.name)
            for s in sources
            for e in events
            if (s, e.name) not in slots or keyed(e.name)
        ]

    def add(source: str, event: str, target: str | None) -> None:
        edges.append((source, event, target))
        slots.add((source, event))

    kept = [states[0]]
    for name in states[1:]:
        earlier = [s for s in kept if s in nonfinal]
        candidates = free(earlier)
        if not candidates:  # only possible for a final state: drop it
            continue
        source, event = draw(st.sampled_from(candidates))
        add(source, event, name)
        kept.append(name)
    nonfinal = [s for s in nonfinal if s in kept]
    finals = [s for s in finals if s in kept]

    for _ in range(draw(st.integers(0, 5))):
        candidates = free(nonfinal)
        if not candidates:
            break
        source, event = draw(st.sampled_from(candidates))
        target = draw(st.sampled_from([None, *kept]))
        add(source, event, target)
    for e in events:
        if not any(edge[1] == e.name for edge in edges):
            candidates = [c for c in free(nonfinal) if c[1] == e.name]
            if candidates:
                source, _ = draw(st.sampled_from(candidates))
                add(source, e.name, draw(st.sampled_from([None, *kept])))
    used = {edge[1] for edge in edges}
    events = [e for e in events if e.name in used]

    transitions: list[TransitionSpec] = []
    groups: dict[tuple[str, str], list[tuple[str, str, str | None]]] = {}
    for edge in edges:
        groups.setdefault((edge[0], edge[1]), []).append(edge)
    for (_source, event), group in groups.items():
        keys: list[tuple[str, str, int]] = [("var", v.name, v.size) for v in variables]
        if by_name[event].field_size is not None:
            keys.append(("payload", FIELD_NAME, by_name[event].field_size))  # type: ignore[arg-type]
        guards: list[GuardSpec | None] = [None] * len(group)
        if keys and (len(group) > 1 or draw(st.booleans())):
            on, key, size = draw(st.sampled_from(keys))
            # Each value of the key goes to one transition, or to none (-1).
            owner = draw(st.lists(st.integers(-1, len(group) - 1), min_size=size, max_size=size))
            guards = [
                GuardSpec(on, key, tuple(v for v in range(size) if owner[v] == j))
                for j in range(len(group))
            ]
        for (source, ev, target), guard in zip(group, guards):
            transitions.append(
                TransitionSpec(
                    source,
                    ev,
                    target,
                    guard,
                    draw(_effects(variables, by_name[ev])),
                    tuple(draw(st.lists(st.sampled_from(("a", "b")), max_size=2))),
                    draw(st.booleans()),
                )
            )
    hot = [s for s in nonfinal if s != states[0] and draw(st.booleans())]
    return MachineSpec(
        "m",
        tuple(kept),
        tuple(finals),
        tuple(hot),
        tuple(variables),
        tuple(events),
        tuple(draw(st.permutations(transitions))),
    )


def _effects(
    variables: Sequence[VarSpec], event: EventSpec
) -> st.SearchStrategy[EffectSpec | None]:
    if not variables:
        return st.none()
    effect = st.builds(
        lambda v, delta, add: EffectSpec(
            v.name, v.size, delta % v.size, event.field if add else None
        ),
        st.sampled_from(tuple(variables)),
        st.integers(0, 3),
        st.booleans() if event.field is not None else st.just(False),
    )
    return st.none() | effect


def machines(policies: Sequence[str] = SAFE_POLICIES) -> st.SearchStrategy[Machine]:
    """Random valid flat machines; `describe(machine)` gives their `MachineSpec`."""
    return machine_specs(policies).map(build_machine)


def payloads(event: Event) -> st.SearchStrategy[Payload]:
    """A payload for `event`, each field drawn from its domain (or sample)."""
    return st.fixed_dictionaries({f.name: st.sampled_from(f.values) for f in event.fields})


def fired_events(machine: Machine) -> st.SearchStrategy[Step]:
    """One declared event of `machine` with a payload drawn from its fields."""
    return st.sampled_from(machine.events).flatmap(lambda e: payloads(e).map(lambda p: (e.name, p)))


def event_sequences(
    machine: Machine, *, min_size: int = 0, max_size: int = 25
) -> st.SearchStrategy[list[Step]]:
    """A random sequence of ``(event name, payload)`` for `machine`."""
    return st.lists(fired_events(machine), min_size=min_size, max_size=max_size)


@st.composite
def machines_and_sequences(
    draw: st.DrawFn,
    policies: Sequence[str] = SAFE_POLICIES,
    min_size: int = 0,
    max_size: int = 25,
) -> tuple[Machine, list[Step]]:
    """A random machine with a random event sequence for it."""
    machine = draw(machines(policies))
    return machine, draw(event_sequences(machine, min_size=min_size, max_size=max_size))
