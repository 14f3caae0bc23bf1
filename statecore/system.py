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
can be deduplicated (the value types are in `statecore.system_parts`).

Behaviour lives in `Action` functions that run a `Tx` (a transaction over one
state; see `statecore.transaction`). An action belongs to an actor (scheduler thread, save thread,
consumer); the explorer interleaves every actor's enabled actions. Internal
actions (those the system takes by itself, like the save thread draining its
queue) decide quiescence: a state with no enabled internal action is
quiescent, and that is where "eventually" properties are judged.
"""

from __future__ import annotations

from collections.abc import Callable, Hashable, Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Generic

from .definition import Snapshot, check_identifier
from .errors import ActionError, SystemDefinitionError
from .forms import aliased, alike
from .records import Global, make_record, reader, record_globals
from .system_parts import (
    Action,
    ActionLabel,
    Component,
    Emitted,
    Handle,
    Keys,
    ModelValue,
    RunFn,
    Slot,
    SystemState,
    SystemStep,
    TakenTransition,
)

if TYPE_CHECKING:  # `statecore.properties` reads states through `StateView`, from here
    from .properties import Property

from .transaction import Disabled, G, Tx, TxRecord, _Disabled

__all__ = [
    "Action",
    "ActionLabel",
    "Component",
    "Disabled",
    "Emitted",
    "G",
    "Global",
    "Handle",
    "Keys",
    "ModelValue",
    "RunFn",
    "Slot",
    "StateView",
    "System",
    "SystemState",
    "SystemStep",
    "TakenTransition",
    "Tx",
    "TxRecord",
    "_Disabled",
]


@dataclass(frozen=True, eq=False)
class System:
    """Machines composed into one model; see the module docstring.

    `init` (optional) runs once on the empty state to build the initial one
    (spawn instances, fill queues). `properties` are the checks the explorer
    and the fuzzer run (see `statecore.properties`). `equivalent_mutants`
    maps the id of a mutant (see `statecore.check.mutation`) that behaves like the
    model itself to the reason why, so an adequacy report does not count it
    as a blind spot of the spec.
    """

    name: str
    components: tuple[Component, ...]
    actions: tuple[Action, ...]
    globals: tuple[Global, ...] = ()
    init: Callable[[Tx[Any]], None] | None = None
    properties: tuple[Property, ...] = ()
    doc: str = ""
    equivalent_mutants: Mapping[str, str] = field(default_factory=dict)
    record: type | None = None  # the globals record type, when declared as one
    _reads: Any = field(init=False, repr=False)
    _slot_index: dict[tuple[str, Hashable], int] = field(init=False, repr=False)
    _global_index: dict[str, int] = field(init=False, repr=False)
    _places: dict[tuple[str, Hashable], tuple[int, Component]] = field(init=False, repr=False)
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
        properties: Iterable[Property] = (),
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
        setattr_(
            self,
            "_places",
            {ck: (i, self._components[ck[0]]) for ck, i in self._slot_index.items()},
        )
        setattr_(self, "_actions", {a.name: a for a in self.actions})
        setattr_(
            self,
            "_attempts",
            tuple((a, args, dict(args)) for a in self.actions for args in a.arguments()),
        )
        self._check_labels()

    def _check_labels(self) -> None:
        """Refuse an action whose parameter domain holds equal values that are not alike (1
        and True): its labels, ``set(v=1)`` and ``set(v=True)``, would be one label."""
        for action in self.actions:
            try:
                pair = aliased(args for a, args, _ in self._attempts if a is action)
            except TypeError:  # an unhashable argument: no label is looked up by it
                continue
            if pair is not None:
                labels: tuple[Any, Any] = pair
                name, value, other = next(
                    (name, value, other)
                    for (name, value), (_, other) in zip(*labels)
                    if not alike(value, other)
                )
                raise SystemDefinitionError(
                    f"system {self.name!r}, action {action.name!r}: parameter {name!r} has "
                    f"both {value!r} and {other!r} in its domain; they compare equal, so the "
                    "action's labels cannot tell them apart; keep one, or use values that "
                    "differ (e.g. strings)"
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

    def place(self, component: str, key: Hashable) -> tuple[int, Component]:
        """`slot_index` of (`component`, `key`) with the `component` itself, in one lookup."""
        found = self._places.get((component, key))
        if found is None:
            return self.slot_index(component, key), self.component(component)
        return found

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

    @property
    def attempts(
        self,
    ) -> tuple[tuple[Action, tuple[tuple[str, Hashable], ...], dict[str, Any]], ...]:
        """Every action with every argument combination, as ``(action, args, kwargs)``.

        An *attempt* is one entry; `statecore.check.stepcache` memoises each by index.
        """
        return self._attempts

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
        except Disabled as exc:
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
            except Disabled:
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
        except Disabled:
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
            found = self._g = make_record(record, self._values())
        return found

    def _values(self) -> tuple[Any, ...]:
        """The globals' values, as `g` reads them (a renamed view renames only these)."""
        return self.state.values

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
