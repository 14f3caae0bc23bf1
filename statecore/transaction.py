"""Transactions: how an action reads one `SystemState` and builds the next.

A `Tx` is what every `Action` function receives. Reads and writes go through
it and are logged by location, so what an action did is a function of what it
read; `Tx.record` gives that log (`TxRecord`) to the successor memo
(`statecore.check.stepcache`). `Tx.require` disables the action by raising
`Disabled`. `statecore.system` re-exports `Tx`.
"""

from __future__ import annotations

from collections.abc import Hashable
from typing import Any, Generic, NamedTuple, Protocol, TypeVar

from .definition import Output, Snapshot
from .errors import ActionError, StatecoreError
from .memo import remembered_step
from .semantics import ACCEPTED, REJECTED, Outcome
from .system_parts import Component, Emitted, Handle, Slot, SystemState, TakenTransition


class Disabled(Exception):
    """Raised inside a transaction (by `Tx.require`) to say the action is not enabled."""


_Disabled = Disabled  # the name it had in `statecore.system`
_new = tuple.__new__  # builds a named tuple without its Python-level __new__


G = TypeVar("G")
"""The system's globals record type (see `statecore.records`)."""


class SystemLayout(Protocol):
    """What a `Tx` needs of its system (a `statecore.system.System` is one)."""

    @property
    def name(self) -> str: ...

    def component(self, name: str) -> Component: ...

    def slot_index(self, component: str, key: Hashable) -> int: ...

    def global_index(self, name: str) -> int: ...

    def global_field_index(self, name: str) -> int: ...

    def place(self, component: str, key: Hashable) -> tuple[int, Component]:
        """The slot index of (`component`, `key`) with the component: one lookup for both."""
        ...

    def globals_reader(self) -> Any: ...


class TxRecord(NamedTuple):
    """What one transaction did, as `Tx.record` gives it.

    Locations number the starting state's parts: slot i is location i, global
    j is location ~j (negative). `reads` is ``(location, value)`` for each
    location of the starting state read before being written, in the order of
    the first read; `slot_writes` and `value_writes` are the final value of
    each slot and global written, by index (an `Edited` for a global the
    transaction took from the front of or appended to without reading it
    whole, whose front then shows in `reads` as a `Front`); `whole` says the transaction
    looked at the whole state (`Tx.before`, `Tx.result`), so its reads do not
    tell all it depended on.
    """

    reads: tuple[tuple[int, Any], ...]
    slot_writes: tuple[tuple[int, Slot], ...]
    value_writes: tuple[tuple[int, Hashable], ...]
    outputs: tuple[Emitted, ...]
    taken: tuple[TakenTransition, ...]
    whole: bool


class Edited(NamedTuple):
    """A global's write in a `TxRecord` when the action only took from its front and appended.

    `Tx.popleft` and `Tx.append` on a FIFO the action did not read whole: the
    value written is the starting value without its first `dropped` items,
    with `items` after it, whatever the rest held (`onto`).
    """

    dropped: int
    items: tuple[Hashable, ...]

    def onto(self, value: Any) -> tuple[Hashable, ...]:
        """The value written when the global held `value`."""
        return (*value[self.dropped :], *self.items)


class Front(NamedTuple):
    """What `Tx.popleft` reads of a global: its first item, or that it has none.

    `kind` is "item" (with the first item), "empty" (an empty tuple) or
    "other" (no tuple at all: the whole value, which `Tx.append`'s error names).
    """

    kind: str
    item: Hashable = None

    @staticmethod
    def of(value: Any) -> Front:
        """The front of `value`, as `Tx.popleft` reads it."""
        if type(value) is not tuple:
            return _new(Front, ("other", value))
        return _new(Front, ("item", value[0])) if value else _EMPTY


_EMPTY = Front("empty")


class Tx(Generic[G]):
    """A transaction: reads one `SystemState` and builds the next.

    Every write goes to a private copy; nothing is shared with the state the
    transaction started from, so actions stay pure from the outside.

    The transaction logs what it reads and writes (slot i as location i,
    global j as location ~j): an action is a function of what it read, which
    lets the explorer memoise it (see `statecore.check.stepcache`).
    """

    __slots__ = (
        "_before",
        "_edits",
        "_g",
        "_outputs",
        "_reads",
        "_seen",
        "_slots",
        "_taken",
        "_values",
        "_whole",
        "_written",
        "system",
    )

    def __init__(self, system: SystemLayout, state: SystemState) -> None:
        self.system = system
        self._before = state
        # Copied on first write: most attempted actions are disabled before writing.
        self._slots: tuple[Slot, ...] | list[Slot] = state.slots
        self._values: tuple[Hashable, ...] | list[Hashable] = state.values
        self._outputs: list[Emitted] = []
        self._taken: list[TakenTransition] = []
        # The log: (location, value) of each first read of the starting state, in order;
        # every location read or written (a read after a write reads no starting value);
        # the locations written.
        self._reads: list[tuple[int, Any]] = []
        self._seen: set[int] = set()
        self._written: set[int] = set()
        self._whole = False  # whether the whole state was looked at
        self._g: G | None = None
        # Per global the action took from the front of or appended to, without reading
        # the rest or overwriting it: [items dropped from the front, items appended].
        self._edits: dict[int, list[Any]] = {}

    @property
    def before(self) -> SystemState:
        """The state the transaction started from."""
        self._whole = True
        return self._before

    # -- reads and writes of locations: all go through these four ---------------

    def _slot(self, index: int) -> Slot:
        slot = self._slots[index]
        if index not in self._seen:
            self._seen.add(index)
            self._reads.append((index, slot))
        return slot

    def _value(self, index: int) -> Any:
        value = self._values[index]
        location = ~index
        if location not in self._seen or (self._edits and index in self._edits):
            self._seen.add(location)
            # The starting value: `append` and `popleft` change it without reading it all.
            self._reads.append((location, self._before[1][index]))
            self._edits.pop(index, None)  # what they did now depends on it
        return value

    # Global `index`, read and logged: what each field of ``tx.g`` reads
    # (`statecore.records.reader`). The same function as `_value`, not a call to it.
    value_at = _value

    def _write_slot(self, index: int, slot: Slot) -> None:
        if type(self._slots) is tuple:
            self._slots = list(self._slots)
        self._slots[index] = slot  # type: ignore[index]
        self._seen.add(index)
        self._written.add(index)

    def _write_value(self, index: int, value: Hashable) -> None:
        if type(self._values) is tuple:
            self._values = list(self._values)
        self._values[index] = value  # type: ignore[index]
        self._seen.add(~index)
        self._written.add(~index)
        if self._edits:
            self._edits.pop(index, None)  # overwritten: what was taken and appended is gone

    def record(self) -> TxRecord:
        """What the transaction did so far: see `TxRecord` (used by `statecore.check.stepcache`).

        The log is kept as the transaction goes: the first access of a location
        is a read of the starting state unless it is a write (later reads of a
        location, and reads after writing it, add nothing).
        """
        self._g = None  # the globals reader refers back to this Tx: no cycle left for the collector
        written = self._written
        if not written:
            return _new(
                TxRecord,
                (tuple(self._reads), (), (), tuple(self._outputs), tuple(self._taken), self._whole),
            )
        slots, values, edits = self._slots, self._values, self._edits
        order = sorted(written)
        return _new(
            TxRecord,
            (
                tuple(self._reads),
                tuple([(i, slots[i]) for i in order if i >= 0]),
                tuple(
                    [
                        (~i, Edited(*edits[~i]) if ~i in edits else values[~i])
                        for i in order
                        if i < 0
                    ]
                ),
                tuple(self._outputs),
                tuple(self._taken),
                self._whole,
            ),
        )

    # -- enabling --------------------------------------------------------

    def require(self, condition: object, why: str = "") -> None:
        """Disable the action (with these arguments) unless `condition` holds."""
        if not condition:
            # A new instance each time: a shared one would keep its last
            # traceback, and with it the frames of the search that raised it
            # (an explorer and its visited set) until the process ends.
            raise Disabled(why)

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

    def append(self, name: str, item: Hashable) -> None:
        """Append `item` to the tuple in global `name` without reading it: a FIFO's put.

        ``tx.append("queue", task)`` is ``tx.set("queue", (*tx.get("queue"), task))``
        but for the log, and but that the global must hold a tuple: the action
        has looked only at the queue's front (a `Front`, which also tells a
        tuple from anything else), so what it does holds whatever the rest of
        the queue holds, and the successor memo learns it once per front
        instead of once per queue (`Edited`). Reading the global later in the
        same action reads it as usual (the log then has its starting value).
        """
        index, first = self._fifo(name, "append")
        if first:
            self._edits[index] = [0, ()]
        edit = self._edits.get(index)
        if edit is not None:
            edit[1] = (*edit[1], item)
        current: tuple[Hashable, ...] = self._values[index]  # type: ignore[assignment]
        self._write_fifo(index, (*current, item))

    def popleft(self, name: str) -> Any:
        """Take the first item of the tuple in global `name`, reading only that: a FIFO's get.

        The action is disabled while the tuple is empty. As with `append`, the
        log holds what was read, here the front (`Front`), so the successor
        memo learns the action once per first item, not once per queue. A
        second take, or a take after other reads or writes of the global,
        reads the starting value whole.
        """
        index, first = self._fifo(name, "popleft")
        current: tuple[Hashable, ...] = self._values[index]  # type: ignore[assignment]
        if not first:
            current = self._value(index)  # read whole: what the action did so far depends on it
        elif current:
            self._edits[index] = [1, ()]
        if not current:
            raise Disabled(f"global {name!r} is empty")
        self._write_fifo(index, current[1:])
        return current[0]

    def _fifo(self, name: str, method: str) -> tuple[int, bool]:
        """The index of global `name`, which must hold a tuple for `method`, and whether
        this is the action's first look at it: that reads its front (`Front`, logged
        before anything can raise, so the log tells a tuple from anything else)."""
        index = self.system.global_index(name)
        location = ~index
        current = self._values[index]
        first = location not in self._seen
        if first:
            self._seen.add(location)
            self._reads.append((location, Front.of(current)))
        if type(current) is not tuple:
            raise ActionError(
                f"system {self.system.name!r}: tx.{method}({name!r}, ...) needs a tuple in "
                f"global {name!r}, which holds {current!r}; keep a FIFO in a tuple global, "
                "or read and write others with tx.get and tx.set"
            )
        return index, first

    def _write_fifo(self, index: int, value: tuple[Hashable, ...]) -> None:
        if type(self._values) is tuple:
            self._values = list(self._values)
        self._values[index] = value  # type: ignore[index]
        self._written.add(~index)

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
        return _new(Handle, (component, key, slot.generation))

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
        self._write_slot(index, _new(Slot, (generation, comp.machine.initial_snapshot())))
        return _new(Handle, (component, key, generation))

    def retire(self, target: Handle | tuple[str, Hashable]) -> bool:
        """Remove the instance `target` refers to; False if it was already gone."""
        if not self.live(target):
            return False
        index = self.system.slot_index(target[0], target[1])
        self._write_slot(index, _new(Slot, (self._slot(index).generation, None)))
        return True

    def fire(self, target: Handle | tuple[str, Hashable], event: str, /, **payload: Any) -> Outcome:
        """Fire `event` on the instance `target` refers to.

        A `Handle` reaches only its own generation: a stale or missing
        instance gives a rejected outcome whose reason says so. A
        ``(component, key)`` pair reaches whatever generation is live.
        """
        component, key = target[0], target[1]
        index, comp = self.system.place(component, key)
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
        self._outputs.append(_new(Emitted, (None, output)))

    # -- result --------------------------------------------------------------

    def result(self) -> tuple[SystemState, tuple[Emitted, ...], tuple[TakenTransition, ...]]:
        """The state built so far, with the outputs and transitions recorded."""
        self._whole = True
        self._g = None  # as in record: break the reader's cycle (`g` makes a new one if read again)
        state = SystemState(tuple(self._slots), tuple(self._values))
        return state, tuple(self._outputs), tuple(self._taken)
