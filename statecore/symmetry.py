"""Symmetry reduction over interchangeable ids.

Ids of a symmetric `Keys` set are `ModelValue` values that no model can tell
apart, so renaming them throughout a state (slots, globals, handles inside
queues, monitor states) gives an equivalent state. The explorer keeps one
representative per such orbit: the renaming with the smallest hash.
Choosing by hash is sound - the representative is always a member of the
orbit, so no two distinguishable states are ever merged - and a hash tie can
only cost some reduction, never a wrong verdict.
"""

from __future__ import annotations

import itertools
from collections.abc import Hashable, Mapping
from typing import Any

from .system import Keys, ModelValue, System

Renaming = Mapping[ModelValue, ModelValue]


def renamings(system: System) -> tuple[Renaming, ...]:
    """Every permutation of the symmetric key sets, the identity first."""
    groups: dict[str, Keys] = {}
    for comp in system.components:
        if isinstance(comp.keys, Keys) and comp.keys.symmetric and comp.keys.size > 1:
            groups[comp.keys.name] = comp.keys
    for action in system.actions:
        for domain in action.params.values():
            if isinstance(domain, Keys) and domain.symmetric and domain.size > 1:
                groups[domain.name] = domain
    per_group = [
        [dict(zip(keys.values, perm)) for perm in itertools.permutations(keys.values)]
        for keys in groups.values()
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
    if kind is ModelValue:
        return renaming.get(value, value)
    if isinstance(value, tuple):
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
    from .system import SystemState

    if isinstance(state, SystemState):
        slots = list(state.slots)
        for index, (component, key) in enumerate(system.slot_keys()):
            new_key: Hashable = renaming.get(key, key) if isinstance(key, ModelValue) else key
            slots[system.slot_index(component, new_key)] = rename(state.slots[index], renaming)
        return SystemState(tuple(slots), rename(state.values, renaming))
    head, *rest = state
    return (rename_state(system, head, renaming), *rename(tuple(rest), renaming))


def canonical(system: System, node: Any, group: tuple[Renaming, ...]) -> Any:
    """The representative of `node`'s orbit under `group`."""
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
