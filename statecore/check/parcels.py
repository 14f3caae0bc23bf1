"""Successors for another worker, sent as numbers: each part crosses once per pair of workers.

A worker queues the successors another worker owns packed (`Outgoing`: one number per part,
from its own `Parts`). At the level's exchange a batch of them travels as a `Parcel`: the
numbers, and the parts the receiver has not been sent yet. The receiver (`Arrivals`) maps the
sender's numbers to its own objects for those parts, numbered in its own `Parts`
(`Parts.shared`), and builds each node from them.

So a received node is made of the objects the receiver's own nodes are made of. The memos
that go by an object's identity (fingerprint digests, symmetry renamings, the successor memo's
value ids, a level's packing) know them, for the node and for every successor it has in the
parts its steps leave alone. A node unpickled whole would bring a new object in every part,
which each of those memos works out again, node after node; and its pickle would carry every
part where a parcel carries two bytes.
"""

from __future__ import annotations

from array import array
from collections.abc import Callable, Hashable, Iterator
from typing import Any, NamedTuple

from ..system import SystemState
from .frontier import Frontier, Parts

__all__ = ["Arrivals", "Dispatch", "Item", "Outgoing", "Parcel"]

Node = tuple[Any, ...]
Item = tuple[Node, int, int, int]  # a successor sent to its owner: node, fp, parent, action
_WORD = (1 << 64) - 1
_new = tuple.__new__  # builds a named tuple without its Python-level __new__


class Outgoing:
    """Successors queued for another worker until the level's exchange, packed: the nodes in a
    `Frontier` that packs them all, their fingerprints (64 or 128 bits), parent references and
    actions in arrays. Iterating gives ``(node, fingerprint, parent, action)`` in the order
    appended."""

    def __init__(self, parts: Parts, bits: int) -> None:
        self.nodes = Frontier(parts)
        self.fps = [array("Q") for _ in range(bits // 64)]  # 64 bits each, lowest first
        self.refs = array("Q")
        self.actions = array("I")

    def append(self, item: Item) -> None:
        node, fp, parent, action = item
        self.nodes.append(node)
        for shift, fps in enumerate(self.fps):
            fps.append(fp >> (64 * shift) & _WORD)
        self.refs.append(parent)
        self.actions.append(action)

    def __len__(self) -> int:
        return len(self.nodes)

    def __iter__(self) -> Iterator[Item]:
        fps = zip(*self.fps)
        for node, words, parent, action in zip(self.nodes, fps, self.refs, self.actions):
            yield node, _joined(words), parent, action


class Parcel(NamedTuple):
    """A batch of successors for one worker: the parts it was not sent before, as
    ``(position, the sender's number of the first, those parts)``, and per successor its
    parts' numbers (`Parts.width` of them), fingerprint words, parent and action."""

    new: tuple[tuple[int, int, tuple[Hashable, ...]], ...]
    codes: array[int]
    fps: tuple[array[int], ...]
    refs: array[int]
    actions: array[int]


class Dispatch:
    """What one worker sends another: each position's parts up to the number sent so far."""

    def __init__(self, parts: Parts) -> None:
        self.parts = parts
        self.sent = [0] * parts.width

    def parcels(self, outgoing: Outgoing, size: int) -> Iterator[Parcel]:
        """`outgoing`'s successors, `size` at most a parcel, each parcel with the parts its
        numbers name that no earlier one carried."""
        tables, width, sent = self.parts.tables, self.parts.width, self.sent
        for start in range(0, len(outgoing), size):
            stop = min(start + size, len(outgoing))
            codes = outgoing.nodes.rows(start, stop)
            new = []
            for position in range(width):
                top = max(codes[position::width]) + 1
                first = sent[position]
                if top > first:
                    new.append((position, first, tuple(tables[position][first:top])))
                    sent[position] = top
            yield Parcel(
                tuple(new),
                codes,
                tuple(fps[start:stop] for fps in outgoing.fps),
                outgoing.refs[start:stop],
                outgoing.actions[start:stop],
            )


class Arrivals:
    """What one worker was sent by another: the sender's numbers, position by position, mapped
    to this worker's objects for the parts they name."""

    def __init__(self, parts: Parts) -> None:
        self.parts = parts
        self.local: list[list[Hashable]] = [[] for _ in range(parts.width)]

    def items(self, parcel: Parcel, find: Callable[[int], int]) -> Iterator[Item]:
        """The successors of `parcel`, built of this worker's objects, but for those whose
        fingerprint `find` places (>= 0: visited here already), asked as each one's turn
        comes; parcels are taken in the order they were sent."""
        local, shared = self.local, self.parts.shared
        for position, first, new in parcel.new:
            known = local[position]
            assert len(known) == first, "a worker's parcels are taken in the order sent"
            known.extend(shared(position, part) for part in new)
        width, slots, split = self.parts.width, self.parts.slots, self.parts.split
        codes = parcel.codes
        fps = zip(*parcel.fps)
        for row, (words, parent, action) in enumerate(zip(fps, parcel.refs, parcel.actions)):
            fp = _joined(words)
            if find(fp) >= 0:
                continue
            parts = list(map(list.__getitem__, local, codes[row * width : (row + 1) * width]))
            state = _new(SystemState, (tuple(parts[:slots]), tuple(parts[slots:split])))
            yield (state, *parts[split:]), fp, parent, action


def _joined(words: tuple[int, ...]) -> int:
    """A fingerprint from its 64-bit words, lowest first."""
    return words[0] if len(words) == 1 else words[0] | words[1] << 64
