"""Equal values must be interchangeable: every memo's premise, checked on the values a search makes.

The explorer keeps one of two equal states, and its memos (the successor
memo, the predicate memo, partial-order reduction's footprints, the monitor
steps) answer a value read with what they learned on an equal one. That is
sound only if equal values behave alike. Python has equal values that do
not: ``0.0`` and ``-0.0``, ``Decimal("1.0")`` and ``Decimal("1.00")``,
``(1,)`` and ``(True,)`` (the memos tell ``1`` from ``True`` at the top of a
location, not inside a container). Two states that hold such values at one location and
differ elsewhere are both kept, and a memo would answer the second with
what the first did.

Every value in a state comes from an initial state or from a run of an
action the successor memo learned (a memo answer replays a learned write;
a FIFO append adds a learned item). `ValueRegistry` sees each of them once,
when it is made, and keeps the first of equal values. Two equal values must
have one `strict` form: the value with every part's exact type and a
number's sign and digits (`alike` compares them part by part, and a value
made again from the memo's own parts costs an identity test). Two that do
not raise `NotInterchangeable`, before any state holds the second one, so no
memo has answered with the first: the explorer then searches again without
its memos (`statecore.check.explore`).

A set's order is not part of its form: equal sets can iterate in different
orders (one built from ``(0, 8)``, the other from ``(8, 0)``), and in
another process they do. A model must not depend on it: the explorer keeps
one of two equal states whatever their sets' orders, with or without memos.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Hashable
from decimal import Decimal
from typing import Any

from ..system import ModelValue, Slot, SystemState
from ..transaction import Edited, Front

__all__ = ["NotInterchangeable", "ValueRegistry", "alike", "strict"]

# Types whose equal values of the one type behave alike: their value is their form.
_PLAIN = frozenset({int, bool, str, bytes, type(None), ModelValue})
# Numbers whose equal values can still differ (sign of zero, digits): their repr tells.
_SPELLED = frozenset({float, complex, Decimal})
_NONE = object()  # no value noted yet


class NotInterchangeable(Exception):
    """Two equal values a search made behave differently; `reason` names them."""

    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason


def strict(value: Any) -> Hashable:
    """`value` as a form that tells apart what ``==`` does not (see the module doc)."""
    kind = type(value)
    if kind in _PLAIN:
        return kind, value
    if kind in _SPELLED:
        return kind, repr(value)
    if isinstance(value, tuple):  # records, slots and snapshots too
        return kind, tuple([strict(item) for item in value])
    if isinstance(value, frozenset):
        return kind, frozenset([strict(item) for item in value])
    if dataclasses.is_dataclass(value):  # its fields (not its InitVars or ClassVars)
        return kind, tuple([strict(getattr(value, f.name)) for f in dataclasses.fields(value)])
    return kind, value  # anything else: its equality is its own to define


def alike(first: Any, second: Any) -> bool:
    """Whether two equal values are alike in every part (have one `strict` form); cheap
    where they share parts, as a renamed value and its cache entry mostly do."""
    if first is second:
        return True
    kind = type(first)
    if kind is not type(second):
        return False
    if kind in _PLAIN:
        return True
    if isinstance(first, tuple):  # equal tuples: as long as each other
        return all([alike(a, b) for a, b in zip(first, second)])
    return strict(first) == strict(second)


class ValueRegistry:
    """The values a search has made, by where they are, each with its `strict` form.

    A memo looks a value up where it was read (a slot, a global, a FIFO's
    front, a step's outputs), by type and equality: so two values conflict
    only at one place, of one type. A FIFO's items conflict whatever their
    types (`add_global`). A place is a location of
    `statecore.transaction` (slot i is i, global j is ~j), ``("item", j)``
    for the items of global j, or ``"outputs"``.
    """

    def __init__(self) -> None:
        self._first: dict[Hashable, Hashable] = {}  # key -> the first value noted
        self._fresh: list[tuple[Hashable, Hashable, bool]] = []  # noted since `fresh`
        # With symmetry reduction, the renaming cache (`statecore.check.symmetry`) looks every
        # tuple, set and record up by equality wherever it sits, parts included: those too
        # must be alike wherever they are (`renamed`).
        self.renamed = False
        self._fifos: set[int] = set()  # the globals a run appended to or took a front of
        self._items: dict[int, list[Hashable]] = {}  # the items of the others, so far

    def add(self, place: Hashable, value: Hashable, typed: bool = True) -> None:
        """Note `value` at `place`; raise `NotInterchangeable` if an equal one differs.

        `typed`: the memos tell values of two types apart there (the top of a
        location); not inside a value (a FIFO's item is inside its queue).
        """
        key = (place, type(value) if typed else None, value)
        try:
            first = self._first.get(key, _NONE)
        except TypeError:  # unhashable: no state can hold it, no memo can key on it
            return
        if first is _NONE:
            if self.renamed:
                self._parts(value)
            self._first[key] = value
            self._fresh.append((place, value, typed))
        elif not alike(first, value):  # alike: so are its parts, noted with the first
            raise NotInterchangeable(
                f"the values {first!r} and {value!r} are equal but not interchangeable "
                "(a part of another type, or a number's sign or digits); a memo would answer "
                "one with what it learned on the other"
            )

    def _parts(self, value: Any) -> None:
        """`value` and each value inside it that the renaming cache looks up, wherever they
        sit: by equality for a tuple or a set (whose items it renames one by one), by type
        and equality for anything else but a number, a string or an id, or a slot whose
        snapshot holds no id (`statecore.check.symmetry._Plan.renamed`)."""
        kind = type(value)
        if kind in _PLAIN or kind in _SPELLED:
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
        elif not alike(first, value):
            raise NotInterchangeable(
                f"the values {first!r} and {value!r} are equal but not interchangeable "
                "(a part of another type, or a number's sign or digits); renaming the ids "
                "would give one for the other"
            )

    def fresh(self) -> list[tuple[Hashable, Hashable, bool]]:
        """``add``'s arguments of the values first noted since the last call: for a whole
        search's registry."""
        fresh, self._fresh = self._fresh, []
        return fresh

    def add_global(self, index: int, value: Hashable) -> None:
        """Global `index`'s value, and the items of a FIFO's (see `fifo`)."""
        if type(value) is Edited:
            self.fifo(index)
            for item in value.items:
                self.add(("item", index), item, typed=False)
            return
        self.add(~index, value)
        if type(value) is tuple:
            if index in self._fifos:
                for item in value:
                    self.add(("item", index), item, typed=False)
            else:
                self._items.setdefault(index, []).extend(value)

    def fifo(self, index: int) -> None:
        """Global `index` is a FIFO: a run took its front (`Tx.popleft`, a memo key of its
        own) or appended to it (which makes queues no run wrote whole). Its items, from
        now on and so far, are compared whatever their types: a queue holds them."""
        if index not in self._fifos:
            self._fifos.add(index)
            for item in self._items.pop(index, ()):
                self.add(("item", index), item, typed=False)

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
