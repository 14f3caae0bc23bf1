"""Systems: machines composed with shared variables and interleaving actors.

A `System` is a model with the Stateright-like interface the explorer and the
fuzzer need, and nothing more:

* `init_states()` - the initial `SystemState` values;
* `actions(state)` - the `ActionLabel` values enabled in a state;
* `next_state(state, action)` - the state an action leads to.

(`successors(state)` gives both at once, with the outputs emitted and the
machine transitions taken, which is what the explorer uses.)

A system state holds one *slot* per (component, key): the generation number
and the current snapshot of that key's instance, or ``None`` when there is
none. Re-using a key with `Tx.spawn` starts a *new generation*; a `Handle`
names one generation, so an old handle can never reach its successor -
firing through it is rejected as stale. Shared variables (a FIFO queue, say)
are `Global` values. Everything is an immutable tuple, hashable, so states
can be deduplicated.

Behaviour lives in `Action` functions that run a `Tx` (a transaction over one
state). An action belongs to an actor (scheduler thread, save thread,
consumer); the explorer interleaves every actor's enabled actions. Internal
actions (those the system takes by itself, like the save thread draining its
queue) decide quiescence: a state with no enabled internal action is
quiescent, and that is where "eventually" properties are judged.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable, Hashable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Generic, NamedTuple, TypeVar

from .definition import Machine, Output, Snapshot, check_identifier
from .errors import ActionError, StatecoreError, SystemDefinitionError
from .records import Global, make_record, reader, record_globals
from .runtime import remembered_step
from .semantics import ACCEPTED, REJECTED, Outcome


class ModelValue(NamedTuple):
    """An opaque id of a bounded model (TLA+'s model values), e.g. ``ext0``.

    Ids of one `Keys` set are interchangeable when the set is symmetric: the
    explorer may then rename them to a canonical order.
    """

    group: str
    number: int

    def __repr__(self) -> str:
        return f"{self.group}{self.number}"

    def __str__(self) -> str:
        return f"{self.group}{self.number}"


@dataclass(frozen=True)
class Keys:
    """A bounded set of ids, e.g. ``Keys("ext", 2)`` gives ``ext0, ext1``."""

    name: str
    size: int
    symmetric: bool = True

    @property
    def values(self) -> tuple[ModelValue, ...]:
        """The ids of the set, in order."""
        return tuple(ModelValue(self.name, i) for i in range(self.size))


class Handle(NamedTuple):
    """One generation of one component's key: what a retained reference holds."""

    component: str
    key: Hashable
    generation: int

    def __repr__(self) -> str:
        return f"{self.component}[{self.key}]#{self.generation}"


@dataclass(frozen=True)
class Component:
    """A machine instantiated once per key, with at most `max_generations` per key.

    `untaken` names transitions of `machine` this system is not meant to take,
    each with the reason (a reused machine whose other users take them, say).
    Coverage reports list them as explained rather than as dead model code.
    """

    name: str
    machine: Machine
    keys: Keys | Sequence[Hashable]
    max_generations: int = 1
    untaken: Mapping[str, str] = field(default_factory=dict, compare=False, hash=False)

    @property
    def key_values(self) -> tuple[Hashable, ...]:
        """The concrete keys of this component."""
        return self.keys.values if isinstance(self.keys, Keys) else tuple(self.keys)


class Slot(NamedTuple):
    """The generation counter and current snapshot (or None) of one key."""

    generation: int
    snapshot: Snapshot | None


class SystemState(NamedTuple):
    """An immutable, hashable system state: slots in declaration order, then globals."""

    slots: tuple[Slot, ...]
    values: tuple[Hashable, ...]


class ActionLabel(NamedTuple):
    """An action with its arguments: what a trace step records."""

    name: str
    args: tuple[tuple[str, Hashable], ...] = ()

    def arg(self, name: str) -> Any:
        """The value of argument `name`."""
        return dict(self.args)[name]

    def __str__(self) -> str:
        inner = ", ".join(f"{k}={v!r}" for k, v in self.args)
        return f"{self.name}({inner})"

    def __repr__(self) -> str:
        return str(self)


class Emitted(NamedTuple):
    """An output and who emitted it (a handle, or None for the action itself)."""

    source: Handle | None
    output: Output


class TakenTransition(NamedTuple):
    """A machine transition taken during a system step (for coverage)."""

    component: str
    machine: str
    transition: str


class SystemStep(NamedTuple):
    """One enabled action and its effect."""

    action: ActionLabel
    actor: str
    internal: bool
    state: SystemState
    outputs: tuple[Emitted, ...]
    taken: tuple[TakenTransition, ...]


RunFn = Callable[..., None]


@dataclass(frozen=True)
class Action:
    """A kind of step an actor can take.

    `run(tx, **args)` is called with a `Tx` and one value for each parameter,
    drawn from `params` (a `Keys` set or any finite iterable). It changes the
    state through the transaction, or calls ``tx.require(False)`` to say the
    action is not enabled with these arguments. It must be deterministic.
    """

    name: str
    actor: str
    run: RunFn
    params: Mapping[str, Keys | Sequence[Hashable]] = field(default_factory=dict)
    internal: bool = False
    doc: str = ""

    def arguments(self) -> Iterator[tuple[tuple[str, Hashable], ...]]:
        """Every combination of argument values, as ``((name, value), ...)``."""
        names = list(self.params)
        domains = [d.values if isinstance(d, Keys) else tuple(d) for d in self.params.values()]
        for combo in itertools.product(*domains):
            yield tuple(zip(names, combo))


class _Disabled(Exception):
    """Raised inside a transaction to say the action is not enabled."""


_DISABLED = _Disabled()  # raised as is on the hot path: no object to build
_new = tuple.__new__  # builds a named tuple without its Python-level __new__


_WROTE = object()  # in a Tx log: the location was written


G = TypeVar("G")
"""The system's globals record type (see `statecore.records`)."""


class Tx(Generic[G]):
    """A transaction: reads one `SystemState` and builds the next.

    Every write goes to a private copy; nothing is shared with the state the
    transaction started from, so actions stay pure from the outside.

    The transaction logs what it reads and writes (slot i as location i,
    global j as location ~j): an action is a function of what it read, which
    lets the explorer memoise it (see `statecore.stepcache`).
    """

    __slots__ = (
        "_before",
        "_g",
        "_log",
        "_outputs",
        "_slots",
        "_taken",
        "_values",
        "_whole",
        "system",
    )

    def __init__(self, system: System, state: SystemState) -> None:
        self.system = system
        self._before = state
        # Copied on first write: most attempted actions are disabled before writing.
        self._slots: tuple[Slot, ...] | list[Slot] = state.slots
        self._values: tuple[Hashable, ...] | list[Hashable] = state.values
        self._outputs: list[Emitted] = []
        self._taken: list[TakenTransition] = []
        self._log: list[tuple[int, Any]] = []  # (location, value read or _WROTE)
        self._whole = False  # whether the whole state was looked at
        self._g: G | None = None

    @property
    def before(self) -> SystemState:
        """The state the transaction started from."""
        self._whole = True
        return self._before

    # -- reads and writes of locations: all go through these four ---------------

    def _slot(self, index: int) -> Slot:
        slot = self._slots[index]
        self._log.append((index, slot))
        return slot

    def _value(self, index: int) -> Any:
        value = self._values[index]
        self._log.append((~index, value))
        return value

    def _write_slot(self, index: int, slot: Slot) -> None:
        if type(self._slots) is tuple:
            self._slots = list(self._slots)
        self._slots[index] = slot  # type: ignore[index]
        self._log.append((index, _WROTE))

    def _write_value(self, index: int, value: Hashable) -> None:
        if type(self._values) is tuple:
            self._values = list(self._values)
        self._values[index] = value  # type: ignore[index]
        self._log.append((~index, _WROTE))

    def _reads(self) -> list[tuple[int, Any]]:
        """``(location, value)`` of each location of the starting state read, in order.

        Later reads of a location, and reads after writing it, add nothing.
        """
        seen: set[int] = set()
        reads = []
        for location, value in self._log:
            if location not in seen:
                seen.add(location)
                if value is not _WROTE:
                    reads.append((location, value))
        return reads

    def _writes(self) -> tuple[tuple[tuple[int, Slot], ...], tuple[tuple[int, Hashable], ...]]:
        """The final value of each slot and global written, by index."""
        written = sorted({location for location, value in self._log if value is _WROTE})
        slots, values = self._slots, self._values
        return (
            tuple([(i, slots[i]) for i in written if i >= 0]),
            tuple([(~i, values[~i]) for i in written if i < 0]),
        )

    # -- enabling --------------------------------------------------------

    def require(self, condition: object, why: str = "") -> None:
        """Disable the action (with these arguments) unless `condition` holds."""
        if not condition:
            # The shared instance must shed its traceback, or every raise would
            # chain onto it and keep each disabled attempt's frames alive.
            raise _Disabled(why) if why else _DISABLED.with_traceback(None)

    # -- globals -----------------------------------------------------------

    @property
    def g(self) -> G:
        """The globals, read field by field: ``tx.g.queue`` (each read is logged)."""
        found = self._g
        if found is None:
            found = self._g = self.system.globals_reader()(self)
        return found

    def put(self, **changes: Hashable) -> None:
        """Write globals by field name: ``tx.put(queue=queue + (task,))``."""
        index = self.system.global_field_index
        for name, value in changes.items():
            self._write_value(index(name), value)

    def get(self, name: str) -> Any:
        """The current value of global `name`."""
        return self._value(self.system.global_index(name))

    def set(self, name: str, value: Hashable) -> None:
        """Set global `name` to `value` (must be hashable)."""
        self._write_value(self.system.global_index(name), value)

    # -- instances ---------------------------------------------------------

    def handle(self, component: str, key: Hashable) -> Handle | None:
        """The live generation of `key`, or None if it has no instance."""
        slot = self._slot(self.system.slot_index(component, key))
        if slot.snapshot is None:
            return None
        return Handle(component, key, slot.generation)

    def snapshot(self, target: Handle | tuple[str, Hashable]) -> Snapshot | None:
        """The snapshot `target` refers to, or None if it is gone or stale."""
        slot = self._slot(self.system.slot_index(target[0], target[1]))
        if slot.snapshot is None:
            return None
        if isinstance(target, Handle) and target.generation != slot.generation:
            return None
        return slot.snapshot

    def live(self, target: Handle | tuple[str, Hashable]) -> bool:
        """Whether `target` refers to an instance that exists now."""
        return self.snapshot(target) is not None

    def spawn(self, component: str, key: Hashable) -> Handle:
        """Start a new generation of `key` in its machine's initial snapshot.

        Any previous generation of the key is retired first. Beyond the
        component's generation bound the action is disabled (the bound of
        the model, not a behaviour).
        """
        comp = self.system.component(component)
        index = self.system.slot_index(component, key)
        generation = self._slot(index).generation + 1
        self.require(generation <= comp.max_generations, "generation bound reached")
        self._write_slot(index, Slot(generation, comp.machine.initial_snapshot()))
        return Handle(component, key, generation)

    def retire(self, target: Handle | tuple[str, Hashable]) -> bool:
        """Remove the instance `target` refers to; False if it was already gone."""
        if not self.live(target):
            return False
        index = self.system.slot_index(target[0], target[1])
        self._write_slot(index, Slot(self._slot(index).generation, None))
        return True

    def fire(self, target: Handle | tuple[str, Hashable], event: str, /, **payload: Any) -> Outcome:
        """Fire `event` on the instance `target` refers to.

        A `Handle` reaches only its own generation: a stale or missing
        instance gives a rejected outcome whose reason says so. A
        ``(component, key)`` pair reaches whatever generation is live.
        """
        component, key = target[0], target[1]
        comp = self.system.component(component)
        index = self.system.slot_index(component, key)
        slot = self._slot(index)
        if slot.snapshot is None or (
            isinstance(target, Handle) and target.generation != slot.generation
        ):
            why = "no instance" if slot.snapshot is None else "stale generation"
            dummy = comp.machine.initial_snapshot()
            return Outcome(REJECTED, dummy, (), None, event, why)
        try:
            outcome = remembered_step(comp.machine, slot.snapshot, event, payload)
        except StatecoreError as exc:
            raise ActionError(f"system {self.system.name!r}: {exc}") from exc
        if outcome.status is ACCEPTED:
            generation = slot.generation
            self._write_slot(index, _new(Slot, (generation, outcome.snapshot)))
            if outcome.outputs:
                source = _new(Handle, (component, key, generation))
                self._outputs.extend([_new(Emitted, (source, o)) for o in outcome.outputs])
            assert outcome.transition is not None
            taken = (component, comp.machine.name, outcome.transition.name)
            self._taken.append(_new(TakenTransition, taken))
        return outcome

    def emit(self, output: Output) -> None:
        """Record an output of the action itself (e.g. the consumer received)."""
        self._outputs.append(Emitted(None, output))

    # -- result --------------------------------------------------------------

    def result(self) -> tuple[SystemState, tuple[Emitted, ...], tuple[TakenTransition, ...]]:
        """The state built so far, with the outputs and transitions recorded."""
        self._whole = True
        state = SystemState(tuple(self._slots), tuple(self._values))
        return state, tuple(self._outputs), tuple(self._taken)


@dataclass(frozen=True, eq=False)
class System:
    """Machines composed into one model; see the module docstring.

    `init` (optional) runs once on the empty state to build the initial one
    (spawn instances, fill queues). `properties` are the checks the explorer
    and the fuzzer run (see `statecore.properties`). `equivalent_mutants`
    maps the id of a mutant (see `statecore.mutation`) that behaves like the
    model itself to the reason why, so an adequacy report does not count it
    as a blind spot of the spec.
    """

    name: str
    components: tuple[Component, ...]
    actions: tuple[Action, ...]
    globals: tuple[Global, ...] = ()
    init: Callable[[Tx[Any]], None] | None = None
    properties: tuple[Any, ...] = ()
    doc: str = ""
    equivalent_mutants: Mapping[str, str] = field(default_factory=dict)
    record: type | None = None  # the globals record type, when declared as one
    _reads: Any = field(init=False, repr=False)
    _slot_index: dict[tuple[str, Hashable], int] = field(init=False, repr=False)
    _global_index: dict[str, int] = field(init=False, repr=False)
    _components: dict[str, Component] = field(init=False, repr=False)
    _actions: dict[str, Action] = field(init=False, repr=False)
    _attempts: tuple[tuple[Action, tuple[tuple[str, Hashable], ...], dict[str, Any]], ...] = field(
        init=False, repr=False
    )

    def __init__(
        self,
        name: str,
        *,
        components: Iterable[Component],
        actions: Iterable[Action],
        globals: Iterable[Global] | type = (),
        init: Callable[[Tx[Any]], None] | None = None,
        properties: Iterable[Any] = (),
        doc: str = "",
        equivalent_mutants: Mapping[str, str] | None = None,
    ) -> None:
        setattr_ = object.__setattr__
        setattr_(self, "name", name)
        setattr_(self, "components", tuple(components))
        setattr_(self, "actions", tuple(actions))
        if isinstance(globals, type):
            setattr_(self, "record", globals)
            globals = record_globals(globals, f"system {name!r}")
        else:
            setattr_(self, "record", None)
        setattr_(self, "globals", tuple(globals))
        setattr_(self, "_reads", None)
        setattr_(self, "init", init)
        setattr_(self, "properties", tuple(properties))
        setattr_(self, "doc", doc)
        setattr_(self, "equivalent_mutants", dict(equivalent_mutants or {}))
        self._validate()
        setattr_(
            self,
            "_slot_index",
            {
                (c.name, k): i
                for i, (c, k) in enumerate((c, k) for c in self.components for k in c.key_values)
            },
        )
        setattr_(self, "_global_index", {g.name: i for i, g in enumerate(self.globals)})
        setattr_(self, "_components", {c.name: c for c in self.components})
        setattr_(self, "_actions", {a.name: a for a in self.actions})
        setattr_(
            self,
            "_attempts",
            tuple((a, args, dict(args)) for a in self.actions for args in a.arguments()),
        )

    def _validate(self) -> None:
        where = f"system {self.name!r}"
        check_identifier("system", self.name, "system definition")
        for kind, names in (
            ("component", [c.name for c in self.components]),
            ("action", [a.name for a in self.actions]),
            ("global", [g.name for g in self.globals]),
        ):
            for name in names:
                check_identifier(kind, name, where)
            if len(set(names)) != len(names):
                dup = next(n for n in names if names.count(n) > 1)
                raise SystemDefinitionError(f"{where}: {kind} {dup!r} is declared twice")
        for comp in self.components:
            if comp.max_generations < 1:
                raise SystemDefinitionError(
                    f"{where}: component {comp.name!r} has max_generations="
                    f"{comp.max_generations}; it must be at least 1"
                )
            if not comp.key_values:
                raise SystemDefinitionError(f"{where}: component {comp.name!r} has no keys")
            transitions = {t.name for t in comp.machine.transitions}
            for name in comp.untaken:
                if name not in transitions:
                    raise SystemDefinitionError(
                        f"{where}: component {comp.name!r} declares {name!r} untaken, but "
                        f"machine {comp.machine.name!r} has no such transition"
                    )
        for g in self.globals:
            try:
                hash(g.default)
            except TypeError:
                raise SystemDefinitionError(
                    f"{where}: default of global {g.name!r} is unhashable "
                    f"({type(g.default).__name__}); use tuples and frozensets"
                ) from None
        for action in self.actions:
            for pname in action.params:
                check_identifier("parameter", pname, f"{where}, action {action.name!r}")

    # -- lookups -------------------------------------------------------------

    def component(self, name: str) -> Component:
        """The component called `name`."""
        try:
            return self._components[name]
        except KeyError:
            raise ActionError(
                f"system {self.name!r} has no component {name!r}; components are "
                f"{sorted(self._components)}"
            ) from None

    def action(self, name: str) -> Action:
        """The action called `name`."""
        try:
            return self._actions[name]
        except KeyError:
            raise ActionError(
                f"system {self.name!r} has no action {name!r}; actions are {sorted(self._actions)}"
            ) from None

    def slot_index(self, component: str, key: Hashable) -> int:
        """Position of the slot of (`component`, `key`) in `SystemState.slots`."""
        index = self._slot_index.get((component, key))
        if index is not None:
            return index
        try:
            return self._slot_index[(component, key)]
        except KeyError:
            comp = self.component(component)
            raise ActionError(
                f"system {self.name!r}: component {component!r} has no key {key!r}; "
                f"keys are {list(comp.key_values)}"
            ) from None

    def global_index(self, name: str) -> int:
        """Position of global `name` in `SystemState.values`."""
        try:
            return self._global_index[name]
        except KeyError:
            raise ActionError(
                f"system {self.name!r} has no global {name!r}; globals are "
                f"{sorted(self._global_index)}"
            ) from None

    def global_field_index(self, name: str) -> int:
        """Position of record field `name` in `SystemState.values` (for `Tx.put`)."""
        index = self._global_index.get(name)
        if index is None or self.record is None:
            raise ActionError(self._not_a_field(name))
        return index

    def _not_a_field(self, name: str) -> str:
        if self.record is None:
            return (
                f"system {self.name!r} declares its globals as Global entries, not as a "
                f"record type; read and write them with tx.get/tx.set, or pass "
                f"globals=<a NamedTuple> to System"
            )
        return (
            f"system {self.name!r}: globals record {self.record.__name__} has no field "
            f"{name!r}; fields are {[g.name for g in self.globals]}"
        )

    def globals_reader(self) -> Any:
        """The class whose instances read the globals record through a `Tx`."""
        reads = self._reads
        if reads is None:
            if self.record is None:
                raise ActionError(self._not_a_field("g"))
            names = tuple(g.name for g in self.globals)
            reads = reader(self.record, names, f"system {self.name!r}")
            object.__setattr__(self, "_reads", reads)
        return reads

    def labels(self) -> tuple[ActionLabel, ...]:
        """Every action with every argument combination, enabled or not."""
        return tuple(ActionLabel(a.name, args) for a, args, _ in self._attempts)

    def slot_keys(self) -> tuple[tuple[str, Hashable], ...]:
        """``(component, key)`` for each slot, in slot order."""
        return tuple(self._slot_index)

    # -- the model interface ---------------------------------------------------

    def init_states(self) -> tuple[SystemState, ...]:
        """The initial states (one: the empty state after `init`)."""
        empty = SystemState(
            tuple(Slot(0, None) for _ in self._slot_index),
            tuple(g.default for g in self.globals),
        )
        if self.init is None:
            return (empty,)
        tx: Tx[Any] = Tx(self, empty)
        try:
            self.init(tx)
        except _Disabled as exc:
            raise SystemDefinitionError(
                f"system {self.name!r}: init disabled itself ({exc}); init must always run"
            ) from None
        return (tx.result()[0],)

    def successors(self, state: SystemState) -> list[SystemStep]:
        """Every enabled action in `state` with the step it makes."""
        steps: list[SystemStep] = []
        for action, args, kwargs in self._attempts:
            tx: Tx[Any] = Tx(self, state)
            try:
                action.run(tx, **kwargs)
            except _Disabled:
                continue
            nxt, outputs, taken = tx.result()
            steps.append(
                SystemStep(
                    ActionLabel(action.name, args),
                    action.actor,
                    action.internal,
                    nxt,
                    outputs,
                    taken,
                )
            )
        return steps

    def actions_in(self, state: SystemState) -> list[ActionLabel]:
        """The actions enabled in `state` (Stateright's ``actions``)."""
        return [s.action for s in self.successors(state)]

    def next_step(self, state: SystemState, label: ActionLabel) -> SystemStep:
        """Apply `label` to `state`; raise `ActionError` if it is not enabled."""
        action = self.action(label.name)
        expected = set(action.params)
        given = {k for k, _ in label.args}
        if given != expected:
            raise ActionError(
                f"system {self.name!r}: action {label.name!r} takes arguments "
                f"{sorted(expected)}, got {sorted(given)}"
            )
        ordered = tuple((name, dict(label.args)[name]) for name in action.params)
        result = self._apply(action, ordered, state)
        if result is None:
            raise ActionError(f"system {self.name!r}: action {label} is not enabled in this state")
        return result

    def spawned(self, before: SystemState, after: SystemState) -> tuple[Handle, ...]:
        """The instances a step from `before` to `after` started (`Tx.spawn`), as handles.

        A key spawned twice in one step shows its last generation only.
        """
        if before.slots is after.slots:
            return ()
        return tuple(
            Handle(component, key, new.generation)
            for (component, key), old, new in zip(self.slot_keys(), before.slots, after.slots)
            if new.generation != old.generation and new.snapshot is not None
        )

    def next_state(self, state: SystemState, label: ActionLabel) -> SystemState:
        """The state `label` leads to from `state` (Stateright's ``next_state``)."""
        return self.next_step(state, label).state

    def _apply(
        self, action: Action, args: tuple[tuple[str, Hashable], ...], state: SystemState
    ) -> SystemStep | None:
        tx: Tx[Any] = Tx(self, state)
        try:
            action.run(tx, **dict(args))
        except _Disabled:
            return None
        nxt, outputs, taken = tx.result()
        return SystemStep(
            ActionLabel(action.name, args), action.actor, action.internal, nxt, outputs, taken
        )

    # -- reading states ----------------------------------------------------------

    def view(self, state: SystemState) -> StateView[Any]:
        """A read-only accessor over `state` for predicates and tables."""
        return StateView(self, state)

    def __repr__(self) -> str:
        return (
            f"System({self.name!r}, {len(self.components)} components, "
            f"{len(self.actions)} actions, {len(self.globals)} globals)"
        )


class StateView(Generic[G]):
    """Read access to a `SystemState` by name: what properties are written against."""

    __slots__ = ("_g", "state", "system")

    def __init__(self, system: System, state: SystemState) -> None:
        self.system = system
        self.state = state
        self._g: G | None = None

    @property
    def g(self) -> G:
        """The globals as the system's record type: ``view.g.received``."""
        found = self._g
        if found is None:
            record = self.system.record
            if record is None:
                raise ActionError(self.system._not_a_field("g"))
            found = self._g = make_record(record, self.state.values)
        return found

    def get(self, name: str) -> Any:
        """The value of global `name`."""
        return self.state.values[self.system.global_index(name)]

    def slot(self, component: str, key: Hashable) -> Slot:
        """The slot (generation, snapshot) of (`component`, `key`)."""
        return self.state.slots[self.system.slot_index(component, key)]

    def snapshot(self, target: Handle | str, key: Hashable = None) -> Snapshot | None:
        """The snapshot `target` refers to, or None: as `Tx.snapshot`, for reading a state.

        ``view.snapshot(handle)`` reaches only the handle's own generation
        (None once the key was retired or re-spawned); ``view.snapshot(component,
        key)`` is whatever generation of the key is live.
        """
        if isinstance(target, Handle):
            slot = self.slot(target.component, target.key)
            if slot.generation != target.generation:
                return None
            return slot.snapshot
        return self.slot(target, key).snapshot

    def handle(self, component: str, key: Hashable) -> Handle | None:
        """The live generation of (`component`, `key`) as a `Handle`, or None."""
        slot = self.slot(component, key)
        return None if slot.snapshot is None else Handle(component, key, slot.generation)

    def instances(self, component: str) -> Iterator[tuple[Hashable, Slot]]:
        """``(key, slot)`` for every key of `component`."""
        for key in self.system.component(component).key_values:
            yield key, self.slot(component, key)

    def live(self, component: str) -> Iterator[tuple[Handle, Snapshot]]:
        """``(handle, snapshot)`` for every live instance of `component`."""
        for key, slot in self.instances(component):
            if slot.snapshot is not None:
                yield Handle(component, key, slot.generation), slot.snapshot

    def as_dict(self) -> dict[str, Any]:
        """Every slot and global by name: the variables of a trace state."""
        row: dict[str, Any] = {}
        for (component, key), slot in zip(self.system.slot_keys(), self.state.slots):
            row[f"{component}[{key}]"] = slot
        for g, value in zip(self.system.globals, self.state.values):
            row[g.name] = value
        return row
