"""Which worker owns a full state: by the parts of it that steps rarely change.

Where workers keep full states (no fingerprints), a successor another worker
owns is sent to it whole (`statecore.check.partition`). Routing nodes by hash
spreads them evenly, but sends a successor to another worker with
probability ``1 - 1/N``: on two workers, half of all successors are pickled,
sent, unpickled, and met by their owner without the walk hints their
parent's expansion had (`statecore.check.frontier`), so each worker does
nearly the work of one process. Routing by a few positions of the node (slots, globals) that most
steps leave alone keeps most successors with the worker that reached them,
as Lerda and Sisto's distributed Spin routes by one process's local state.

The positions are picked from a breadth-first sample of the search's first
states, run by the coordinator: how often a step (after symmetry's renaming)
changes each position, and how evenly each candidate key spreads the deepest
sampled levels over the workers, a key of a few lumps counting as
unsplit (`_busiest`). `route_positions` keeps the cheapest key by
a cost estimate (the busiest worker's share times the cost of the successors
that cross), or none, where routing by hash is estimated cheaper. The
owner is a function of the node alone, so which key is picked changes where
nodes are held, never which nodes are reached: the counts and verdicts are
one process's whatever the sample saw.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Hashable, Sequence
from operator import itemgetter
from typing import Any

from ..system import SystemState, SystemStep

__all__ = ["SAMPLE", "owner_by", "route_positions"]

Node = tuple[Any, ...]

SAMPLE = 20_000
"""The states the coordinator expands, breadth first, before it picks a key: at most `_BEAM`
of each level, so the sample reaches the deep levels, where a full search spends its time."""
_BEAM = 500
_KEYS = 64  # a key's values, as keys of even weight, a sampled level needs per worker
_SPARSE = 16  # ... or one in so many of its nodes, on a level too small for that
_LEVEL = 256  # the smallest sampled level whose spread over the workers is taken as a guide
_CROSSING = 1.2  # what a successor sent to another worker costs, over one kept (measured)


def owner_by(positions: tuple[int, ...], slots: int, workers: int) -> Callable[[Node], int]:
    """The owner of a node: its parts at `positions` (flat: the `slots` slots, then the
    globals), hashed.

    `hash` is the same in every process forked from one; equal nodes have
    equal parts, so one owner.
    """
    in_slots = _getter([p for p in positions if p < slots])
    in_globals = _getter([p - slots for p in positions if p >= slots])

    def owner(node: Node) -> int:
        state: SystemState = node[0]
        return hash((in_slots(state[0]), in_globals(state[1]))) % workers

    return owner


def _getter(indices: list[int]) -> Callable[[tuple[Any, ...]], Any]:
    """The items of a tuple at `indices`, in one call (None for no index)."""
    return itemgetter(*indices) if indices else _nothing


def _nothing(_: tuple[Any, ...]) -> None:
    return None


def route_positions(
    initial: Sequence[Node],
    successors: Callable[[SystemState], list[SystemStep]],
    canon: Callable[[Node], Node],
    workers: int,
    sample: int = SAMPLE,
) -> tuple[int, ...]:
    """The positions to route by on `workers` workers (empty: by hash).

    Expands up to `sample` states breadth first from `initial`, at most
    `_BEAM` of each level, evenly spread over it (monitor states are carried
    unchanged: they are not routed by), noting per flat position how often a
    step changes it; then tries the keys made of the least-changed
    positions, one more at a time, on the deeper half of the sampled levels.
    """
    if workers < 2 or not initial:
        return ()
    width = len(initial[0][0][0]) + len(initial[0][0][1])
    changed = [0] * width
    masks: Counter[int] = Counter()  # per step, the positions it changed (bit p: position p)
    seen: set[Node] = set(initial)
    level: list[Node] = list(initial)
    levels: list[list[Node]] = []
    expanded = 0
    while level and expanded < sample:
        deeper: list[Node] = []
        for node in level:
            flat = node[0][0] + node[0][1]
            for step_ in successors(node[0]):
                nxt = canon((step_.state, *node[1:]))
                after = nxt[0][0] + nxt[0][1]
                mask = 0
                for position, (old, new) in enumerate(zip(flat, after)):
                    if old is not new and old != new:
                        changed[position] += 1
                        mask |= 1 << position
                masks[mask] += 1
                if nxt not in seen:
                    seen.add(nxt)
                    deeper.append(nxt)
        expanded += len(level)
        if len(deeper) >= _LEVEL:
            levels.append(deeper)
        level = deeper[:: max(1, -(-len(deeper) // _BEAM))]  # evenly spread over the level
    steps = sum(masks.values())
    if not levels or not steps:
        return ()
    guide = levels[len(levels) // 2 :]
    order = sorted(range(width), key=lambda p: changed[p])
    best: tuple[float, tuple[int, ...]] = (1 + _CROSSING * (1 - 1 / workers), ())
    key: list[int] = []
    bits = 0
    for position in order:
        key.append(position)
        bits |= 1 << position
        crossing = sum(n for mask, n in masks.items() if mask & bits) / steps
        spread = max(_busiest(level, tuple(key), workers) for level in guide)
        cost = spread * (1 + _CROSSING * crossing * (1 - 1 / workers))
        if cost < best[0]:
            best = (cost, tuple(key))
    return best[1]


def _busiest(
    level: list[Node],
    key: tuple[int, ...],
    workers: int,
) -> float:
    """The busiest worker's share of `level` routed by `key`, over an even share (1: even);
    as if all of the level went to one worker where its keys are lumpier than `_KEYS` keys of
    even weight per worker (or, on a small level, one in `_SPARSE` nodes).

    Deeper down a key's weights shift, so an even split of a few lumps on a sample is luck,
    and a lump too big for one worker's share is found only when the level comes.
    """
    flat = [node[0][0] + node[0][1] for node in level]
    lumps = Counter(tuple([parts[p] for p in key]) for parts in flat)
    even = len(level) ** 2 / sum(n * n for n in lumps.values())  # keys of even weight alike
    if even < min(_KEYS * workers, len(level) / _SPARSE):
        return float(workers)
    owner = owner_by(key, len(level[0][0][0]), workers)
    loads: Counter[Hashable] = Counter(owner(node) for node in level)
    return max(loads.values()) * workers / len(level)
