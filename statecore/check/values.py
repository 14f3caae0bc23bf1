"""Equal values must be interchangeable: the premise of the visited set and every memo,
checked on the values a search makes.

The explorer keeps one of two equal states, and its memos (the successor
memo, the predicate memo, partial-order reduction's footprints, the monitor
steps) answer a value read with what they learned on an equal one. That is
sound only if equal values behave alike. Python has equal values that do
not: ``1``, ``True`` and ``1.0``, ``0.0`` and ``-0.0``, ``Decimal("1.0")``
and ``Decimal("1.00")``, ``(1,)`` and ``(True,)``. Two states that hold such
values at one location and differ elsewhere are both kept, and a memo would
answer the second with what the first did; two that differ nowhere else are
one state to the visited set, and which one the search keeps depends on the
order it meets them (one process or several). The memos tell ``1`` from
``True`` at the top of a location; the visited set does not.

Every value in a state comes from an initial state or from a run of an
action the successor memo learned (a memo answer replays a learned write;
a FIFO append adds a learned item). `ValueRegistry` sees each of them once,
when it is made, and keeps the first of equal values at each place. Two
equal values must have one `strict` form: the value with every part's exact
type and a number's sign and digits (`alike` compares them part by part, and
a value made again from the memo's own parts costs an identity test). Two
that do not raise `NotInterchangeable`, before any state holds the second
one, so no memo has answered with the first: the explorer then searches
again without its memos, telling such states apart (`statecore.check.plain`).

A set's order is not part of its form: equal sets can iterate in different
orders (one built from ``(0, 8)``, the other from ``(8, 0)``), and in
another process they do. A model must not depend on it: the explorer keeps
one of two equal states whatever their sets' orders, with or without memos.
"""

from __future__ import annotations

from collections.abc import Hashable, Iterator, MutableMapping, Sequence
from typing import Any

from ..forms import PLAIN, SPELLED, alike, strict
from ..system import ActionLabel, ModelValue, Slot, SystemState
from ..transaction import Edited, Front
from .symmetry import _Plan, holds_id

__all__ = ["NotInterchangeable", "StrictParents", "ValueRegistry", "alike", "strict"]

_PLAIN = PLAIN | {ModelValue}  # (an id's parts are a str and an int)
_NONE = object()  # no value noted yet
Node = tuple[Any, ...]
Entry = tuple[Node, ActionLabel] | None


class NotInterchangeable(Exception):
    """Two equal values a search made behave differently; `reason` names them."""

    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason


class ValueRegistry:
    """The values a search has made, by where they are, each with its `strict` form.

    A memo looks a value up where it was read (a slot, a global, a FIFO's
    front, a step's outputs), and the visited set compares states place by
    place: so two values conflict only at one place, whatever their types.
    A place is a location of `statecore.transaction` (slot i is i, global j
    is ~j), ``("item", j)`` for the items of a FIFO j (`add_global`), or
    ``"outputs"``.
    """

    def __init__(self) -> None:
        self._first: dict[Hashable, Hashable] = {}  # key -> the first value noted
        self._fresh: list[tuple[Hashable, Hashable]] = []  # noted since `fresh`
        # With symmetry reduction, the renaming cache (`statecore.check.symmetry`) looks every
        # tuple, set and record up by equality wherever it sits, parts included: those too
        # must be alike wherever they are (`renamed`). And a search holds each value renamed
        # too (`rename_by`).
        self.renamed = False
        self._plans: Sequence[_Plan] = ()
        self._moved: frozenset[ModelValue] | None = None  # the ids a renaming moves (None: all)
        self._fifos: set[int] = set()  # the globals a run appended to or took a front of
        self._items: dict[int, list[Hashable]] = {}  # the items of the others, so far

    def add(self, place: Hashable, value: Hashable) -> None:
        """Note `value` at `place`, and each renaming of it where a representative or an
        image of a state would hold it (`rename_by`: the plans are the whole group, so
        these are its whole orbit); raise `NotInterchangeable` if an equal one differs."""
        if self._note(place, value):
            for plan in self._plans:
                self._note(plan.place(place), plan.renamed(value))

    def _note(self, place: Hashable, value: Hashable) -> bool:
        """Note `value` at `place`; whether it is new there. Raise `NotInterchangeable` if an
        equal one differs."""
        key = (place, value)
        try:
            first = self._first.get(key, _NONE)
        except TypeError:  # unhashable: no state can hold it, no memo can key on it
            return False
        if first is _NONE:
            if self.renamed:
                self._parts(value)
            self._first[key] = value
            self._fresh.append((place, value))
            return True
        if not alike(first, value):  # alike: so are its parts, noted with the first
            raise NotInterchangeable(
                f"the values {first!r} and {value!r} are equal but not interchangeable "
                "(a part of another type, or a number's sign or digits); the visited set would "
                "keep one of two states equal but for them, and a memo would answer one with "
                "what it learned on the other"
            )
        return False

    def _parts(self, value: Any) -> None:
        """`value` and each value inside it that the renaming cache looks up, wherever they
        sit: by equality for a tuple or a set (whose items it renames one by one), by type
        and equality for anything else but a number, a string or an id, or a slot whose
        snapshot holds no id (`statecore.check.symmetry._Plan.renamed`). The cache gives a
        value without ids back as it is, so two such values never conflict: only where one
        holds an id would the other get its renaming."""
        kind = type(value)
        if kind in _PLAIN or kind in SPELLED:
            return
        if kind is Slot and (value[1] is None or type(value[1])._plain):
            return
        nested = kind is tuple or kind is frozenset
        key = ("renamed", None if nested else kind, value)
        first = self._first.get(key, _NONE)
        if first is _NONE:  # (not sent as fresh: the top value it sits in is, parts and all)
            self._first[key] = value
            if nested:
                for item in value:
                    self._parts(item)
        elif not alike(first, value) and (
            holds_id(first, self._moved) or holds_id(value, self._moved)
        ):
            raise NotInterchangeable(
                f"the values {first!r} and {value!r} are equal but not interchangeable "
                "(a part of another type, or a number's sign or digits); renaming the ids "
                "would give one for the other"
            )

    def rename_by(self, plans: Sequence[_Plan], moved: frozenset[ModelValue]) -> None:
        """Symmetry reduction is on: its `plans` (each renaming but the identity) rename the
        ids `moved`. A representative, or an image the symmetry guard judges, holds a value
        renamed at the renamed place (a slot moves with its id): each value noted is noted
        so too, so that a value equal to another's renaming but unlike it (``(True, w1)``
        against ``(1, w1)``, or a set of ``(True, w0)`` and ``(1, w1)`` against its own
        renaming) conflicts as it would where a search without symmetry met both."""
        self.renamed = True
        self._plans = plans
        self._moved = moved

    def fresh(self) -> list[tuple[Hashable, Hashable]]:
        """``add``'s arguments of the values first noted since the last call: for a whole
        search's registry."""
        fresh, self._fresh = self._fresh, []
        return fresh

    def add_global(self, index: int, value: Hashable) -> None:
        """Global `index`'s value, and the items of a FIFO's (see `fifo`)."""
        if type(value) is Edited:
            self.fifo(index)
            for item in value.items:
                self.add(("item", index), item)
            return
        self.add(~index, value)
        if type(value) is tuple:
            if index in self._fifos:
                for item in value:
                    self.add(("item", index), item)
            else:
                self._items.setdefault(index, []).extend(value)

    def fifo(self, index: int) -> None:
        """Global `index` is a FIFO: a run took its front (`Tx.popleft`, a memo key of its
        own) or appended to it (which makes queues no run wrote whole). Its items, from
        now on and so far, are compared whatever their types: a queue holds them."""
        if index not in self._fifos:
            self._fifos.add(index)
            for item in self._items.pop(index, ()):
                self.add(("item", index), item)

    def add_state(self, state: SystemState) -> None:
        """Every slot and global of an initial state."""
        for index, slot in enumerate(state.slots):
            self.add(index, slot)
        for index, value in enumerate(state.values):
            self.add_global(index, value)

    def add_run(self, reads: tuple[tuple[int, Any], ...], outcome: Any) -> None:
        """A learned run: the FIFOs whose front it took, then `add_outcome`."""
        for location, value in reads:
            if type(value) is Front:
                self.fifo(~location)
        if outcome is not None:
            self.add_outcome(outcome)

    def add_outcome(self, outcome: Any) -> None:
        """What a learned run wrote: its slots, its globals (a FIFO's items) and its outputs."""
        slot_writes, value_writes, outputs, _taken = outcome
        for index, slot in slot_writes:
            self.add(index, slot)
        for index, value in value_writes:
            self.add_global(index, value)
        self.add("outputs", outputs)


class StrictParents(MutableMapping[Node, Entry]):
    """The visited set of full states (node -> parent and action), where two nodes are one
    only if they are alike: equal, and of one type in every part, sign and digits included."""

    def __init__(self) -> None:
        self._entries: dict[_Alike, Entry] = {}

    def __getitem__(self, node: Node) -> Entry:
        return self._entries[_Alike(node)]

    def __setitem__(self, node: Node, entry: Entry) -> None:
        self._entries[_Alike(node)] = entry

    def __delitem__(self, node: Node) -> None:
        del self._entries[_Alike(node)]

    def __contains__(self, node: object) -> bool:
        return _Alike(node) in self._entries

    def setdefault(self, node: Node, entry: Entry = None) -> Entry:
        return self._entries.setdefault(_Alike(node), entry)

    def __iter__(self) -> Iterator[Node]:
        return (key.node for key in self._entries)

    def __len__(self) -> int:
        return len(self._entries)


class _Alike:
    """A node as a key: equal to another only if `alike`."""

    __slots__ = ("_hash", "node")

    def __init__(self, node: Any) -> None:
        self.node = node
        self._hash = hash(node)

    def __hash__(self) -> int:
        return self._hash

    def __eq__(self, other: object) -> bool:
        return (
            isinstance(other, _Alike) and self.node == other.node and alike(self.node, other.node)
        )
