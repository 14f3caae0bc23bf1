"""Symmetry reduction over interchangeable ids.

Ids of a symmetric `Keys` set are `ModelValue` values that no model can tell
apart, so renaming them throughout a state (slots, globals, handles inside
queues, monitor states) gives an equivalent state. The explorer keeps one
representative per such orbit.

Finding the representative by trying every renaming costs ``k!`` deep
renames per state. Instead the ids are first ordered by a *signature*: the
hash of the slots each id owns (its instances and their generations), which
does not change when ids are renamed. Ids with distinct signatures get their
canonical names from that order in one rename; only ids whose signatures tie
are tried in every order, keeping the renamed state with the smallest hash.

Both steps are sound - the representative is always a renaming of the state,
so no two distinguishable states are ever merged. A signature that mentions
other ids, or a hash tie, can only cost some reduction, never a wrong verdict.
"""

from __future__ import annotations

import itertools
from collections.abc import Container, Hashable, Mapping, Sequence
from operator import is_
from typing import Any

from ..definition import Snapshot
from ..system import Handle, Keys, ModelValue, Slot, System, SystemState

Renaming = Mapping[ModelValue, ModelValue]

_SCALARS = frozenset({str, int, float, bool, type(None), bytes})


def symmetric_groups(system: System) -> tuple[Keys, ...]:
    """The symmetric key sets of `system` with more than one id."""
    groups: dict[str, Keys] = {}
    for comp in system.components:
        if isinstance(comp.keys, Keys) and comp.keys.symmetric and comp.keys.size > 1:
            groups[comp.keys.name] = comp.keys
    for action in system.actions:
        for domain in action.params.values():
            if isinstance(domain, Keys) and domain.symmetric and domain.size > 1:
                groups[domain.name] = domain
    return tuple(groups.values())


def renamings(system: System) -> tuple[Renaming, ...]:
    """Every permutation of the symmetric key sets, the identity first."""
    per_group = [
        [dict(zip(keys.values, perm)) for perm in itertools.permutations(keys.values)]
        for keys in symmetric_groups(system)
    ]
    result: list[Renaming] = []
    for combo in itertools.product(*per_group):
        merged: dict[ModelValue, ModelValue] = {}
        for part in combo:
            merged.update(part)
        result.append(merged)
    return tuple(result) if result else ({},)


def rename(value: Any, renaming: Renaming) -> Any:
    """`value` with every `ModelValue` replaced through `renaming`."""
    kind = type(value)
    if kind in _SCALARS:
        return value
    if kind is ModelValue:
        return renaming.get(value, value)
    if kind is Handle:
        key = value.key
        return Handle(value.component, renaming.get(key, key), value.generation)
    if kind is Slot:
        snap = value.snapshot
        if snap is None or type(snap)._plain:
            return value
        return Slot(value.generation, rename(snap, renaming))
    if isinstance(value, tuple):
        if isinstance(value, Snapshot) and type(value)._plain:
            return value  # a machine whose domains hold no ids
        items = [rename(item, renaming) for item in value]
        if kind is tuple:
            return tuple(items)
        make = getattr(kind, "_make", None)
        return make(items) if make is not None else kind(items)
    if isinstance(value, frozenset):
        return frozenset(rename(item, renaming) for item in value)
    return value


def holds_id(value: Any, ids: Container[ModelValue] | None = None) -> bool:
    """Whether `rename` may give something else than `value`: one of `ids` inside it (None:
    any id; a handle, or a slot whose snapshot may hold one, counts as one)."""
    kind = type(value)
    if kind in _SCALARS:
        return False
    if kind is ModelValue:
        return ids is None or value in ids
    if kind is Handle:
        return True
    if kind is Slot:
        snap = value.snapshot
        return snap is not None and not type(snap)._plain and holds_id(snap, ids)
    if isinstance(value, tuple) and isinstance(value, Snapshot) and type(value)._plain:
        return False
    if isinstance(value, (tuple, frozenset)):
        return any([holds_id(item, ids) for item in value])
    return False


def rename_state(system: System, state: Any, renaming: Renaming) -> Any:
    """Rename a `SystemState` (slots move to their renamed keys) or an explorer node."""
    if isinstance(state, SystemState):
        slots = list(state.slots)
        for index, (component, key) in enumerate(system.slot_keys()):
            new_key: Hashable = renaming.get(key, key) if isinstance(key, ModelValue) else key
            slots[system.slot_index(component, new_key)] = rename(state.slots[index], renaming)
        return SystemState(tuple(slots), rename(state.values, renaming))
    head, *rest = state
    return (rename_state(system, head, renaming), *rename(tuple(rest), renaming))


class _Plan:
    """One renaming of the ids, worked out in advance for `Canonicalizer`.

    `sources[i]` is the slot that lands at position i. Renamed values are
    cached, down to the items of tuples and frozensets: the same queue
    entries and monitor states turn up in many states, and renaming them
    is most of the work.
    """

    __slots__ = ("cache", "globals", "identity", "plain", "renaming", "sources", "targets")

    def __init__(
        self,
        renaming: dict[ModelValue, ModelValue],
        sources: tuple[int, ...],
        plain: tuple[bool, ...],
    ) -> None:
        self.renaming = renaming
        self.sources = sources
        self.targets = tuple(sorted(range(len(sources)), key=sources.__getitem__))
        self.plain = plain  # per slot: no id can be inside it, it only moves
        self.identity = _identity(renaming)
        self.cache: dict[Any, Any] = {}
        self.globals: list[dict[Any, Any]] = []  # per global: its tuples' renamings (`renamed_at`)

    def renamed(self, value: Any) -> Any:
        """`rename(value, self.renaming)`, cached."""
        kind = type(value)
        if kind in _SCALARS:
            return value
        if kind is ModelValue:
            return self.renaming.get(value, value)
        if kind is Slot:
            snap = value[1]
            if snap is None or type(snap)._plain:
                return value  # no id inside: not worth a cache entry
        cache = self.cache
        # A record (a NamedTuple) equals the plain tuple of its items: key it by its type
        # too, or a renamed record could come back as a tuple; and by a marker no state
        # holds, or a tuple (Record, record) would share its entry.
        key = value if kind is tuple or kind is frozenset else (_TYPED, kind, value)
        found = cache.get(key, cache)
        if found is cache:
            found = self._entry(cache, key, value)
        # A value without ids is its own renaming: the value itself, not the equal one
        # the entry was made for, which may differ from it ((1,) and (True,)).
        return value if found is _SAME else found

    def renamed_at(self, index: int, value: Any) -> Any:
        """`renamed`, of the value of global `index`. A tuple there is looked up among that
        global's own: a FIFO's (`Tx.append`) is made in the state, not by a run, so only its
        items are noted (`statecore.check.values`), and among the tuples of other places it
        could meet an equal one unlike it."""
        if type(value) is not tuple:
            return self.renamed(value)
        caches = self.globals
        while len(caches) <= index:
            caches.append({})
        cache = caches[index]
        found = cache.get(value, cache)
        if found is cache:
            found = self._entry(cache, value, value)
        return value if found is _SAME else found

    def _entry(self, cache: dict[Any, Any], key: Any, value: Any) -> Any:
        """The renaming of `value`, kept in `cache` under `key`: `_SAME` if it renames to itself
        (the items of a value without ids come back as they are)."""
        kind = type(value)
        if kind is tuple or kind is frozenset:
            items = [self.renamed(item) for item in value]
            unchanged = all(map(is_, items, value))
            found = _SAME if unchanged else tuple(items) if kind is tuple else frozenset(items)
        else:
            found = rename(value, self.renaming) if holds_id(value) else _SAME
        if len(cache) >= _CACHE_LIMIT:
            cache.clear()
        cache[key] = found
        return found

    def place(self, place: Hashable) -> Hashable:
        """Where a value at `place` (of `statecore.check.values`: slot i is i) lands renamed:
        a slot moves with its id, anything else stays."""
        return self.targets[place] if type(place) is int and place >= 0 else place

    def slots(self, old: tuple[Slot, ...]) -> tuple[Slot, ...]:
        """The slots of a state, renamed and moved to their new positions."""
        if all(self.plain):
            return tuple([old[i] for i in self.sources])
        return tuple(
            [
                old[i] if plain else self.renamed(old[i])
                for i, plain in zip(self.sources, self.plain)
            ]
        )

    def apply(self, node: Any, slots: tuple[Slot, ...]) -> Any:
        """`rename_state` of the explorer node `node`, whose slots renamed are `slots`."""
        if self.identity:
            return node
        # A state's tuple of globals, and its monitors, are rarely met twice: renamed
        # item by item, without a cache entry of their own to hash and keep.
        rename_ = self.renamed
        values = tuple([self.renamed_at(i, v) for i, v in enumerate(node[0].values)])
        renamed = _new(SystemState, (slots, values))
        if len(node) == 1:
            return (renamed,)
        return (renamed, *[rename_(m) for m in node[1:]])


_CACHE_LIMIT = 1 << 17  # renamed values kept per renaming, and slot tuples
_SAME = object()  # a cache entry: the value renames to itself
_TYPED = object()  # a cache key's first item: the key of a value that is no tuple or set
_new = tuple.__new__


class Canonicalizer:
    """Maps explorer nodes to orbit representatives; see the module docstring."""

    def __init__(self, system: System) -> None:
        self.system = system
        self.groups = symmetric_groups(system)
        # For each group: the slot positions each id owns, ids in the group's order.
        self._owned: list[tuple[tuple[int, ...], ...]] = [
            tuple(
                tuple(i for i, (_, k) in enumerate(system.slot_keys()) if k == key)
                for key in keys.values
            )
            for keys in self.groups
        ]
        self._plain = tuple(
            bool(system.component(component).machine.snapshot_class._plain)
            for component, _ in system.slot_keys()
        )
        self._plans: dict[tuple[tuple[int, ...], ...], _Plan] = {}
        self._orderings: dict[tuple[tuple[int, ...], tuple[int, ...]], list[tuple[int, ...]]] = {}
        # Per tuple of slots: the renamings to try, each with the slots it makes.
        self._options: dict[tuple[Slot, ...], list[tuple[_Plan, tuple[Slot, ...]]]] = {}
        self._others: list[_Plan] | None = None  # every renaming but the identity

    @property
    def active(self) -> bool:
        """Whether there is anything to reduce."""
        return bool(self.groups)

    def __call__(self, node: Any) -> Any:
        if not self.groups:
            return node
        slots = node[0].slots
        options = self._options.get(slots)
        if options is None:
            options = self._options_for(slots)
        if len(options) == 1:
            plan, renamed_slots = options[0]
            return plan.apply(node, renamed_slots)
        best = None
        best_hash = 0
        for plan, renamed_slots in options:
            candidate = plan.apply(node, renamed_slots)
            h = hash(candidate)
            if best is None or h < best_hash:
                best, best_hash = candidate, h
        return best

    def others(self) -> list[_Plan]:
        """The plans of every renaming of the ids but the identity."""
        if self._others is None:
            combos = itertools.product(
                *(itertools.permutations(range(keys.size)) for keys in self.groups)
            )
            plans = (self._plan(combo) for combo in combos)
            self._others = [plan for plan in plans if not plan.identity]
        return self._others

    @property
    def moved(self) -> frozenset[ModelValue]:
        """The ids a renaming moves."""
        return frozenset(v for keys in self.groups for v in keys.values)

    def images(self, node: Any) -> list[tuple[Renaming, Any]]:
        """`node` under every renaming of the ids but the identity, with the renaming."""
        slots = node[0].slots
        return [(plan.renaming, plan.apply(node, plan.slots(slots))) for plan in self.others()]

    def plan_of(self, renaming: Renaming) -> _Plan:
        """The plan (cached renames of values and slots) of `renaming`, one of `renamings`."""
        # Position j of an order names the id that gets the j-th name.
        source = {renaming.get(v, v): v for keys in self.groups for v in keys.values}
        combo = tuple(
            tuple(keys.values.index(source[v]) for v in keys.values) for keys in self.groups
        )
        plan = self._plan(combo)
        assert all(plan.renaming[k] == renaming.get(k, k) for k in plan.renaming)
        return plan

    def _options_for(self, slots: tuple[Slot, ...]) -> list[tuple[_Plan, tuple[Slot, ...]]]:
        """The renamings the signatures of `slots` leave to try, with the slots each makes."""
        choices = [self._orders(slots, owned) for owned in self._owned]
        options = []
        for combo in itertools.product(*choices):
            plan = self._plan(combo)
            options.append((plan, plan.slots(slots)))
        if len(self._options) >= _CACHE_LIMIT:
            self._options.clear()
        self._options[slots] = options
        return options

    def _orders(
        self, slots: tuple[Slot, ...], owned: tuple[tuple[int, ...], ...]
    ) -> list[tuple[int, ...]]:
        """The group's ids (as indices) ordered by the signature of the slots they own.

        Ids with equal signatures come in every order among themselves.
        """
        sigs = [hash(tuple([slots[i] for i in positions])) for positions in owned]
        order = tuple(sorted(range(len(sigs)), key=sigs.__getitem__))
        key = (order, _blocks(order, sigs))
        found = self._orderings.get(key)
        if found is None:
            found = self._orderings[key] = _permuted(*key)
        return found

    def _plan(self, combo: tuple[tuple[int, ...], ...]) -> _Plan:
        """The renaming an ordering of ids stands for, and where each slot comes from."""
        plan = self._plans.get(combo)
        if plan is not None:
            return plan
        renaming: dict[ModelValue, ModelValue] = {}
        for keys, order in zip(self.groups, combo):
            values = keys.values
            renaming.update((values[i], target) for i, target in zip(order, values))
        sources = [0] * len(self._plain)
        for index, (component, key) in enumerate(self.system.slot_keys()):
            new_key = renaming.get(key, key) if isinstance(key, ModelValue) else key
            sources[self.system.slot_index(component, new_key)] = index
        plain = tuple(self._plain[i] for i in sources)
        plan = self._plans[combo] = _Plan(renaming, tuple(sources), plain)
        return plan


def _identity(renaming: Mapping[ModelValue, ModelValue]) -> bool:
    return all(k == v for k, v in renaming.items())


def _blocks(order: tuple[int, ...], sigs: Sequence[int]) -> tuple[int, ...]:
    """The lengths of the runs of equal signatures along `order`."""
    sizes: list[int] = []
    for position, i in enumerate(order):
        if position and sigs[i] == sigs[order[position - 1]]:
            sizes[-1] += 1
        else:
            sizes.append(1)
    return tuple(sizes)


def _permuted(order: tuple[int, ...], blocks: tuple[int, ...]) -> list[tuple[int, ...]]:
    """`order` with each block in every order among itself.

    Position i of an order gets the i-th canonical name.
    """
    parts: list[tuple[int, ...]] = []
    start = 0
    for size in blocks:
        parts.append(order[start : start + size])
        start += size
    return [
        tuple(i for part in arrangement for i in part)
        for arrangement in itertools.product(*(itertools.permutations(p) for p in parts))
    ]


def canonical(system: System, node: Any, group: tuple[Renaming, ...]) -> Any:
    """The representative of `node`'s orbit, trying every renaming in `group`.

    The brute-force form, kept as the reference the fast `Canonicalizer` is
    tested against.
    """
    if len(group) == 1:
        return node
    best = node
    best_hash = hash(node)
    for renaming in group[1:]:
        other = rename_state(system, node, renaming)
        h = hash(other)
        if h < best_hash:
            best, best_hash = other, h
    return best
