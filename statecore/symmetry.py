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
from collections.abc import Hashable, Iterator, Mapping, Sequence
from typing import Any

from .definition import Snapshot
from .system import Handle, Keys, ModelValue, Slot, System, SystemState

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


class Canonicalizer:
    """Maps explorer nodes to orbit representatives; see the module docstring."""

    def __init__(self, system: System) -> None:
        self.system = system
        self.groups = symmetric_groups(system)
        # For each group: the slot positions each id owns, in a fixed order.
        self._owned: list[list[tuple[ModelValue, tuple[int, ...]]]] = []
        for keys in self.groups:
            owned = []
            for key in keys.values:
                positions = tuple(i for i, (_, k) in enumerate(system.slot_keys()) if k == key)
                owned.append((key, positions))
            self._owned.append(owned)
        self._plans: dict[
            tuple[tuple[ModelValue, ...], ...],
            tuple[dict[ModelValue, ModelValue], bool, tuple[int, ...]],
        ] = {}

    @property
    def active(self) -> bool:
        """Whether there is anything to reduce."""
        return bool(self.groups)

    def __call__(self, node: Any) -> Any:
        if not self.groups:
            return node
        slots = node[0].slots
        choices: list[list[tuple[ModelValue, ...]]] = []
        for owned in self._owned:
            ranked = sorted(
                ((hash(tuple(slots[i] for i in positions)), key) for key, positions in owned),
                key=lambda pair: pair[0],
            )
            choices.append(list(_orders(ranked)))
        best = None
        best_hash = 0
        for combo in itertools.product(*choices):
            plan = self._plans.get(combo) or self._plan(combo)
            candidate = node if plan[1] else _apply(node, plan[0], plan[2])
            h = hash(candidate)
            if best is None or h < best_hash:
                best, best_hash = candidate, h
        return best

    def _plan(
        self, combo: tuple[tuple[ModelValue, ...], ...]
    ) -> tuple[dict[ModelValue, ModelValue], bool, tuple[int, ...]]:
        """The renaming an ordering of ids stands for, and where each slot moves."""
        renaming: dict[ModelValue, ModelValue] = {}
        for keys, order in zip(self.groups, combo):
            renaming.update(zip(order, keys.values))
        moves = tuple(
            self.system.slot_index(
                component, renaming.get(key, key) if isinstance(key, ModelValue) else key
            )
            for component, key in self.system.slot_keys()
        )
        plan = (renaming, _identity(renaming), moves)
        self._plans[combo] = plan
        return plan


def _apply(node: Any, renaming: Renaming, moves: Sequence[int]) -> Any:
    """`rename_state` with the slot moves worked out in advance."""
    state: SystemState = node[0]
    old = state.slots
    new: list[Any] = [None] * len(old)
    for index, target in enumerate(moves):
        new[target] = rename(old[index], renaming)
    renamed = SystemState(tuple(new), rename(state.values, renaming))
    if len(node) == 1:
        return (renamed,)
    return (renamed, *rename(tuple(node[1:]), renaming))


def _identity(renaming: Mapping[ModelValue, ModelValue]) -> bool:
    return all(k == v for k, v in renaming.items())


def _orders(ranked: Sequence[tuple[int, ModelValue]]) -> Iterator[tuple[ModelValue, ...]]:
    """The ids in signature order; ids with equal signatures in every order among themselves.

    Position i of an order gets the i-th canonical name.
    """
    blocks: list[list[ModelValue]] = []
    last: int | None = None
    for sig, key in ranked:
        if blocks and sig == last:
            blocks[-1].append(key)
        else:
            blocks.append([key])
        last = sig
    for arrangement in itertools.product(*(itertools.permutations(b) for b in blocks)):
        yield tuple(key for block in arrangement for key in block)


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
