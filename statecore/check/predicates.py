"""Memoised predicates: each property's predicate as a decision tree over what it reads.

A predicate (a property's ``predicate`` or ``when``) is a function of the
state it reads through its `StateView`, so its value is decided by the
locations it read and the values there, in order, exactly as an action's
run is (`statecore.check.stepcache`, whose trees this reuses). Most
properties of a lifecycle model read a few fields that most steps leave
alone, so judging them on a new state becomes a few dictionary lookups
instead of a call through a view.

The premise is checked where it costs least, on each path learned:

* the predicate is judged twice on a logging view (`statecore.check.reads`),
  and two judgements that differ stop the search (`PredicateNotDeterministic`);
* it is judged once more on the plain view: a predicate that gives another
  value, or raises, only on the logging view (it looks at the identity or
  exact type of the state's tuples) is judged plainly from then on. The
  logging view's ``view.g`` compares, hashes and iterates as the record
  itself (reading every field), and ``isinstance`` sees the record type.
  What is caught is a different value on the state being learned: a
  predicate that takes another branch on the logging view, yet the same
  value there, is outside the contract (a function of the values it reads)
  and goes unseen;
* values read are told apart by their type and equality, as the successor
  memo tells them (`statecore.check.stepcache.typed`); a model that makes
  equal values that behave differently turns every memo off
  (`statecore.check.values`);
* a path that disagrees with the tree (another location read after the same
  values) is not added. Equal values are one value to the memo, as equal
  states are one state to the explorer, yet two equal frozensets may iterate
  in different orders, and a predicate that stops early then reads different
  locations. Its value cannot differ: a predicate whose value depended on the
  order would already take either value on an equal state (which one the
  explorer keeps is chance), with or without the memo;
* a predicate whose new paths keep coming (most states give it a new
  combination of values: a whole queue, every instance's snapshot) is judged
  plainly once learning costs more than it saves: when, over a window of
  `_WINDOW` judgements, more than a third of them learned a path (a path
  learned costs three judgements, and with symmetry its orbit check costs
  about what checking a plainly judged state on its renamings does).

A judgement is the leaf its walk ended at, and says which positions decided it
(`Judgement`). A successor that differs from its parent only where its step
wrote, none of them among those positions, would walk to the same leaf, so the
explorer gives it its parent's judgement without a walk (with symmetry, only a
judgement known on the whole orbit: the guard checks each state of the others).

With symmetry reduction, `statecore.check.symmetry_guard` needs each predicate
to have one value on a whole orbit. Judged plainly, that is checked on every
renaming of every state. A learned path is checked once instead: each
renaming of its reads, patched into the state, must give the same value
while reading only those locations; then every state that follows the path
has that value on all its renamings (`SymmetryGuard.check_path`). A path that
reads elsewhere under some renaming leaves its states to the per-state check.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from ..properties import Property
from ..system import StateView, System, SystemState
from .reads import Reads, reads_of
from .stepcache import _UNKNOWN, Ids, ValueIds, _mask, _Node, _position, _Probe, add_path
from .symmetry_guard import SymmetryGuard

__all__ = [
    "Judgement",
    "Judgements",
    "Predicate",
    "PredicateCache",
    "PredicateNotDeterministic",
    "predicate_names",
]

Predicate = Callable[[StateView[Any]], object]

Judgement = tuple[bool, bool, int]
"""A predicate's value on a state, whether it is known to be the same on the whole orbit, and
the bit mask of the flat positions (`statecore.check.stepcache`) that decided it (-1: not
known, as for a predicate judged plainly). It is the leaf of the path the judgement took, so a
successor that differs from the state only where its step wrote, outside the mask, has it too."""

Judgements = dict[Predicate, Judgement]
"""What decided each predicate judged on a state (`statecore.check.explore` keeps a node's, to
judge its successors by)."""

_PLAINLY: dict[bool, Judgement] = {v: (v, False, -1) for v in (False, True)}  # judged plainly

_WINDOW = 4096  # judgements of a predicate over which its learning cost is weighed
_PLAIN = object()  # the root of a predicate judged plainly


class PredicateNotDeterministic(Exception):
    """Two judgements of a predicate on one state differed."""


class PredicateCache:
    """Judges predicates on states, memoised per predicate on the locations it reads.

    `judge` gives the value, whether it is known to be the same on every
    renaming of the state (always False without a `guard`) and what decided it
    (`Judgement`). `names` says how the guard's report names each predicate.
    """

    def __init__(
        self,
        system: System,
        guard: SymmetryGuard | None = None,
        names: dict[Predicate, str] | None = None,
        max_nodes: int = 1 << 20,
        ids: ValueIds | None = None,
    ) -> None:
        self.system = system
        self.ids = ValueIds() if ids is None else ids  # what the trees branch on
        self._names = names or {}  # how an error names a predicate
        self._guard = guard
        self._slots = len(system.slot_keys())
        self._width = self._slots + len(system.globals)  # of a state's flat tuple
        self._roots: dict[Predicate, Any] = {}
        self._counts: dict[Predicate, list[int]] = {}  # [judged, learned] in this window
        self._room = max_nodes
        self._keys: dict[Any, Any] = {}  # the trees' branch keys (`add_path`)
        self._leaves: dict[Judgement, Judgement] = {}  # one object per distinct leaf
        self._last: SystemState | None = None  # the state last judged, and for it:
        self._flat: tuple[Any, ...] | None = None  # its slots and globals in one tuple
        self._ids: Ids = []  # their ids, as far as worked out
        self._view: StateView[Any] | None = None  # a plain view

    def focus(self, state: SystemState, ids: Ids) -> None:
        """Judge `state` next, whose ids (of `self.ids`) are known as far as `ids` goes."""
        self._last, self._flat, self._ids, self._view = state, None, ids, None

    def judge(self, predicate: Predicate, state: SystemState) -> Judgement:
        """`predicate` on `state` (as a truth value), whether that holds on the whole orbit,
        and the positions that decided it (`Judgement`)."""
        if state is not self._last:  # what judging `state` needs, made once for all predicates
            self._last, self._flat, self._ids, self._view = state, None, [None] * self._width, None
        node = self._roots.get(predicate, _UNKNOWN)
        if node is _PLAIN:
            view = self._view
            if view is None:
                view = self._view = StateView(self.system, state)
            return _PLAINLY[bool(predicate(view))]
        ids = self._ids
        while type(node) is _Probe:
            key = ids[node.position]
            if key is None:
                flat = self._flat
                if flat is None:
                    flat = self._flat = state[0] + state[1]
                read = flat[node.position]
                key = self.ids.find((type(read), read), -1)
                if key >= 0:  # an unknown value is learned next, and gets an id then
                    ids[node.position] = key
            node = node.branches.get(key, _UNKNOWN)
        counts = self._counts.setdefault(predicate, [0, 0])
        counts[0] += 1
        if node is _UNKNOWN:
            return self._learn(predicate, state, counts)
        value: Judgement = node
        return value

    def is_plain(self, predicate: Predicate) -> bool:
        """Whether `predicate` is judged plainly, on a `StateView`, from now on."""
        return self._roots.get(predicate) is _PLAIN

    def on_image(self, predicate: Predicate) -> Callable[[tuple[Any, ...]], bool]:
        """`predicate`'s truth value on an explorer node (a state and its monitor states)."""
        if self._roots.get(predicate) is _PLAIN:
            system = self.system
            return lambda node: bool(predicate(StateView(system, node[0])))
        judge = self.judge
        return lambda node: judge(predicate, node[0])[0]

    def _learn(self, predicate: Predicate, state: SystemState, counts: list[int]) -> Judgement:
        """Judge `predicate` on `state` three times (see the module doc) and remember the path."""
        system = self.system
        plain = bool(predicate(StateView(system, state)))
        try:
            reads, value = reads_of(system, predicate, state)
        except Exception:  # it cannot be judged on the logging view: judge it plainly
            return self._plainly(predicate, plain)
        again = reads_of(system, predicate, state)
        if again != (reads, value):
            what = "values" if again[0] == reads else "locations or values read"
            raise PredicateNotDeterministic(
                f"is not deterministic: two judgements of the same state differ in the {what}; "
                "a predicate must be a function of the state it is given"
            )
        if value != plain:  # it can tell the logging view apart
            return self._plainly(predicate, plain)
        counts[1] += 1
        if counts[0] >= _WINDOW:  # weigh the last window: a search's first states are all new
            if 3 * counts[1] > counts[0]:  # learning costs more than it saves
                return self._plainly(predicate, plain)
            counts[0] = counts[1] = 0
        checked = self._guard is not None and self._guard.check_path(
            self._names.get(predicate, "a property's predicate"),
            lambda image: reads_of(system, predicate, image),
            state,
            reads,
            value,
        )
        judged = (value, checked, _mask([_position(i, self._slots) for i, _ in reads]))
        leaf = self._leaves.setdefault(judged, judged)
        if self._room > 0:
            self._grow(predicate, reads, leaf)
        return leaf

    def _grow(self, predicate: Predicate, reads: Reads, leaf: Judgement) -> None:
        """Add the path `reads` -> `leaf`, unless it disagrees with the tree (module doc)."""
        root: _Node = self._roots.get(predicate, _UNKNOWN)
        grown = add_path(root, reads, leaf, self._slots, self._keys, self.ids)  # type: ignore[arg-type]
        if grown is not None:
            self._roots[predicate], added = grown
            self._room -= added

    def _plainly(self, predicate: Predicate, value: bool) -> Judgement:
        """Judge `predicate` plainly from now on; `value` is its value on this state."""
        self._roots[predicate] = _PLAIN
        return _PLAINLY[value]


def predicate_names(props: tuple[Property, ...]) -> dict[Predicate, str]:
    """How a report names each property's predicate and condition (`PredicateCache`'s names)."""
    names: dict[Predicate, str] = {}
    for prop in props:
        if prop.when is not None:
            names.setdefault(prop.when, f"its condition of property {prop.id!r}")
        if prop.predicate is not None:
            names.setdefault(prop.predicate, f"its predicate of property {prop.id!r}")
    return names
