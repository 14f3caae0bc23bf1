"""Memoised successors: each action attempt as a decision tree over what it reads.

An action is a deterministic function of the slots and globals it reads
through its `Tx`, so what one attempt (an action with fixed arguments) does
is decided by the values of the locations it read, in the order it read them.
`SuccessorCache` keeps one tree per attempt: an inner node names the location
read next and branches on its value; a leaf is the outcome (disabled, or the
values written with the outputs and transitions). Expanding a state walks
each tree; only a path never seen before runs the action, recording its reads.

Most attempts are disabled after one or two reads, so most of the explorer's
successor work becomes a few dictionary lookups, and the states it builds
share their slot and global objects.

Values are told apart by equality, as the explorer's visited set tells states
apart. An action that looks at the whole state (`Tx.before`, or `Tx.result()`
inside the action) reads everything: such a run is used but not cached.
"""

from __future__ import annotations

from collections.abc import Hashable
from typing import Any

from .system import (
    ActionLabel,
    Emitted,
    Slot,
    System,
    SystemState,
    SystemStep,
    TakenTransition,
    Tx,
    _Disabled,
)

# Slot i is location i; global j is location ~j (negative).
Location = int

_new = tuple.__new__


class _Leaf:
    """What an enabled attempt does: its writes and the step's fixed parts."""

    __slots__ = ("actor", "internal", "label", "outputs", "slot_writes", "taken", "value_writes")

    def __init__(
        self,
        label: ActionLabel,
        actor: str,
        internal: bool,
        slot_writes: tuple[tuple[int, Slot], ...],
        value_writes: tuple[tuple[int, Hashable], ...],
        outputs: tuple[Emitted, ...],
        taken: tuple[TakenTransition, ...],
    ) -> None:
        self.label = label
        self.actor = actor
        self.internal = internal
        self.slot_writes = slot_writes
        self.value_writes = value_writes
        self.outputs = outputs
        self.taken = taken

    def step(self, state: SystemState) -> SystemStep:
        """The step this outcome makes from `state`."""
        slots, values = state
        if self.slot_writes:
            new_slots = list(slots)
            for index, slot in self.slot_writes:
                new_slots[index] = slot
            slots = tuple(new_slots)
        if self.value_writes:
            new_values = list(values)
            for index, value in self.value_writes:
                new_values[index] = value
            values = tuple(new_values)
        nxt = _new(SystemState, (slots, values))
        return _new(
            SystemStep, (self.label, self.actor, self.internal, nxt, self.outputs, self.taken)
        )


class _Probe:
    """An inner node: read `location`, then follow the branch of its value."""

    __slots__ = ("branches", "location")

    def __init__(self, location: Location) -> None:
        self.location = location
        self.branches: dict[Any, _Node] = {}


class _Mark:
    """A sentinel leaf."""

    __slots__ = ("name",)

    def __init__(self, name: str) -> None:
        self.name = name

    def __repr__(self) -> str:
        return self.name


_OFF = _Mark("disabled")
_UNKNOWN = _Mark("unknown")  # a path no run has taken yet

_Node = _Probe | _Leaf | _Mark


class SuccessorCache:
    """`System.successors`, memoised per attempt on the locations it reads.

    The trees stop growing at `max_nodes` nodes; past that, new paths are
    run directly every time.
    """

    def __init__(self, system: System, max_nodes: int = 1 << 21) -> None:
        self.system = system
        self._attempts = system._attempts
        self._labels = system.labels()
        self._roots: list[_Node] = [_UNKNOWN] * len(self._attempts)
        self._room = max_nodes

    def __call__(self, state: SystemState) -> list[SystemStep]:
        """Every enabled action in `state` with the step it makes, as `System.successors`."""
        slots, values = state
        steps: list[SystemStep] = []
        for index, node in enumerate(self._roots):
            while type(node) is _Probe:
                location = node.location
                value = slots[location] if location >= 0 else values[~location]
                node = node.branches.get(value, _UNKNOWN)
            if node is _OFF:
                continue
            if node is _UNKNOWN:
                node = self._learn(index, state)
            if type(node) is _Leaf:
                steps.append(node.step(state))
        return steps

    def _learn(self, index: int, state: SystemState) -> _Leaf | _Mark:
        """Run attempt `index` on `state`, and remember the path it took."""
        action, _, kwargs = self._attempts[index]
        tx = Tx(self.system, state)
        leaf: _Leaf | _Mark
        try:
            action.run(tx, **kwargs)
        except _Disabled:
            leaf = _OFF
        else:
            slot_writes, value_writes = tx._writes()
            outputs, taken = tuple(tx._outputs), tuple(tx._taken)
            leaf = _Leaf(
                self._labels[index],
                action.actor,
                action.internal,
                slot_writes,
                value_writes,
                outputs,
                taken,
            )
        if not tx._whole and self._room > 0:
            self._insert(index, tx._reads(), leaf)
        return leaf

    def _insert(self, index: int, reads: list[tuple[Location, Any]], leaf: _Leaf | _Mark) -> None:
        """Add the path `reads` -> `leaf` to the tree of attempt `index`.

        A path that disagrees with the tree (another location read after the
        same values) comes from an action that is not deterministic; it is
        left out, and that action is run each time it gets there.
        """
        parent: dict[Any, _Node] | None = None
        key: Any = None
        node = self._roots[index]
        for location, value in reads:
            if node is _UNKNOWN:
                node = _Probe(location)
                self._attach(index, parent, key, node)
            if not isinstance(node, _Probe) or node.location != location:
                return
            parent, key = node.branches, value
            node = parent.get(value, _UNKNOWN)
        if node is _UNKNOWN:
            self._attach(index, parent, key, leaf)

    def _attach(self, index: int, parent: dict[Any, _Node] | None, key: Any, node: _Node) -> None:
        self._room -= 1
        if parent is None:
            self._roots[index] = node
        else:
            parent[key] = node
