"""A compact visited set: 64- or 128-bit fingerprints of nodes instead of the nodes.

A fingerprint is built from BLAKE2b digests of a canonical byte encoding of
each part of the node (`Fingerprinter`), so it is the same in every process
and on every machine (Python's own ``hash`` is salted per process for
strings, and the parallel search routes each node to the process that owns
its fingerprint). Values that compare equal encode equally: a tuple subclass
(a record, a snapshot) encodes as its items, a bool as its int, a frozenset
as its sorted items. A one-process search works each successor's
fingerprint out from its parent's (`FingerprintStore.expanding`,
`FingerprintStore.reached`).

`FingerprintStore` keeps, per visited node, its fingerprint, its parent's
index and the index of the action taken (dense arrays, in insertion order)
and an open-addressing table of indices: under 40 bytes a node
(``tests/test_fingerprints.py``), where the node itself takes hundreds. A
trace is rebuilt from the parent indices: the actions back to an initial
node, replayed forward (`replay_chain`). Only a trace reads those, so past
a few million nodes they go to a file, as TLC's trace file does
(`statecore.check.spill.ParentLog`): then a node holds about 16 bytes of
memory.

Two distinct nodes with the same fingerprint would be merged and the second
never explored, so a fingerprint search reports the probability of that
(`collision_note`), as TLC does; keeping full states is the exact default.
"""

from __future__ import annotations

import enum
from array import array
from collections import Counter
from collections.abc import Callable, Hashable, Iterator, Sequence
from dataclasses import fields, is_dataclass
from hashlib import blake2b
from typing import Any

from ..errors import DefinitionError, NondeterministicActionError
from ..properties import EMPTY_MONITOR
from ..system import ActionLabel, System, SystemState
from ..traces.path import NotEnabledError, take
from .spill import ParentLog
from .values import StrictParents

__all__ = [
    "BITS",
    "ROOT",
    "FingerprintError",
    "FingerprintStore",
    "Fingerprinter",
    "collision_bound",
    "collision_note",
    "replay_chain",
    "store_notes",
]

BITS = (64, 128)  # the fingerprint sizes offered
ROOT = (1 << 64) - 1  # the parent reference of an initial node
_CACHE = 1 << 17  # encodings of slots, globals and monitor states remembered at most
_RECHECK = 1 << 8  # of the nodes expanded by index, each this many-th is checked whole
_MAX_LOAD = 0.75  # the index table doubles beyond this share of used slots

Node = tuple[Any, ...]
Canon = Callable[[Node], Node]
StepMonitors = Callable[[tuple[Any, ...], tuple[Any, ...]], tuple[tuple[Any, ...], Any]]


class FingerprintError(DefinitionError):
    """A state holds a value with no canonical encoding, so it cannot be fingerprinted."""


class Fingerprinter:
    """The fingerprint of a node: an int of `bits` bits, never 0, stable across processes.

    A node's fingerprint is the sum, modulo ``2**bits``, of one hash per
    position (each slot, global and monitor state): a BLAKE2b digest of the
    part's encoding, personalised by its position. Two distinct nodes differ
    at some position, and that position's digest enters one sum and not the
    other, so they share a fingerprint with probability ``2**-bits``, as with
    one digest of the whole node. A sum changes where a step wrote and nowhere
    else, so a successor's fingerprint is its parent's with the written
    positions' digests swapped (`moved`): a step writes one or two parts of
    dozens.
    """

    def __init__(self, bits: int = 64) -> None:
        if bits not in BITS:
            raise ValueError(f"fingerprints must be one of {BITS} bits, got {bits}")
        self.bits = bits
        self._size = bits // 8
        self._mask = (1 << bits) - 1
        self._cache: dict[Hashable, bytes] = {}
        # Per position, the digests of the parts met there by the identity of the objects
        # (most are the memos' shared objects, met again and again): an int's hash, where a
        # record's is worked out item by item. Each is kept alive while remembered.
        self._known: list[dict[int, int]] = []
        self._kept: list[Hashable] = []
        self._equal: list[dict[Hashable, int]] = []  # per position, the digests by value
        self._equals = 0  # and how many they hold
        self._width = -1  # the slots of the nodes `moved` met last, and its split masks
        self._written: dict[int, tuple[tuple[int, int, int], ...]] = {}
        self._changes: dict[object, int] = {}  # per `moved` step: its change of a sum

    def __call__(self, node: Hashable) -> int:
        if isinstance(node, tuple) and node and type(node[0]) is SystemState:
            return self.raw(node) or 1
        digest = blake2b(self.encode(node), digest_size=self._size).digest()
        return int.from_bytes(digest, "little") or 1

    def raw(self, node: Node) -> int:
        """The sum of the digests of `node`'s parts (its fingerprint, but where that is 1
        for a sum of 0): what `moved` works from."""
        state = node[0]
        items = (*state[0], *state[1], *node[1:])
        known = self._known
        while len(known) < len(items):
            known.append({})
            self._equal.append({})
        digests = list(map(dict.get, known, map(id, items)))
        if None in digests:
            for position, digest in enumerate(digests):
                if digest is None:
                    digests[position] = self._digest(position, items[position])
        return sum(digests) & self._mask  # type: ignore[arg-type]  # every None was filled

    def moved(self, raw: int, node: Node, nxt: Node, writes: int, step: object = None) -> int:
        """`raw` of `nxt`, given `raw` of `node`: `nxt` is `node` with the slots and globals
        of the flat positions in the bit mask `writes` replaced, and maybe its monitor states.

        `step`, if given, stands for every step that replaces equal slots and globals by
        equal ones (a memo leaf whose path fixes what it replaces): their change of the sum
        is worked out once, on the first, and kept while `step` is."""
        old_state = node[0]
        if step is None:
            raw += self.swapped(old_state, nxt[0], writes)
        else:
            change = self._changes.get(step)
            if change is None:
                if len(self._changes) >= _CACHE:
                    self._changes.clear()
                change = self._changes[step] = self.swapped(old_state, nxt[0], writes)
            raw += change
        if len(node) > 1 and node[1:] != nxt[1:]:  # (most steps move no monitor: the same objects)
            position = len(old_state[0]) + len(old_state[1])
            for old, new in zip(node[1:], nxt[1:]):
                if old is not new:
                    raw += self._at(position, new) - self._at(position, old)
                position += 1
        return raw & self._mask

    def swapped(self, old_state: SystemState, new_state: SystemState, writes: int) -> int:
        """What the slots and globals at the flat positions in the bit mask `writes` add to a
        sum of digests (unmasked) in `new_state`, less what they add in `old_state`."""
        width = len(old_state[0])
        if width != self._width:  # another system's layout: the split masks differ
            self._width, self._written = width, {}
        known = self._known
        spots = self._written.get(writes)
        if spots is None:
            spots = self._spots(writes)
        change = 0
        for position, part, index in spots:
            old, new = old_state[part][index], new_state[part][index]
            if old is not new:
                get = known[position].get
                was, now = get(id(old)), get(id(new))
                if was is None:
                    was = self._digest(position, old)
                if now is None:
                    now = self._digest(position, new)
                change += now - was
        return change

    def _spots(self, writes: int) -> tuple[tuple[int, int, int], ...]:
        """The flat positions in the bit mask `writes`, each as (position, 0 for the slots or
        1 for the globals, index there); remembered per mask (a system's steps write few)."""
        width = self._width
        positions = [p for p in range(writes.bit_length()) if writes >> p & 1]
        spots = tuple((p, 0, p) if p < width else (p, 1, p - width) for p in positions)
        self._written[writes] = spots
        return spots

    def part(self, position: int, part: Hashable) -> int:
        """The digest of `part` at flat `position` (slots, globals, then monitor states): what
        it adds to a fingerprint."""
        known = self._known
        while len(known) <= position:  # (before any node was fingerprinted whole)
            known.append({})
            self._equal.append({})
        return self._at(position, part)

    def _at(self, position: int, part: Hashable) -> int:
        digest = self._known[position].get(id(part))
        return self._digest(position, part) if digest is None else digest

    def _digest(self, position: int, part: Hashable) -> int:
        """The digest of `part` at `position`, an object not met there (or forgotten), noted
        by the object's identity."""
        value = self._worked_out(position, part)
        if len(self._kept) >= _CACHE:
            self._kept.clear()
            for known in self._known:
                known.clear()
        self._known[position][id(part)] = value
        self._kept.append(part)
        return value

    def _worked_out(self, position: int, part: Hashable) -> int:
        """The digest of `part` at `position`: that of an equal part met there, else worked
        out (equal parts encode alike)."""
        equal = self._equal[position]
        value = equal.get(part)
        if value is None:
            value = self.digest(self._cache.get(part) or self._remember(part), position)
            self._equals += 1
            if self._equals > _CACHE:  # at every position together
                self._equals = 1
                for equal_there in self._equal:
                    equal_there.clear()
            equal[part] = value
        return value

    def digest(self, data: bytes, position: int) -> int:
        """The digest of a part's encoding `data` at `position`."""
        person = b"%d" % position
        return int.from_bytes(
            blake2b(data, digest_size=self._size, person=person).digest(), "little"
        )

    def encode_node(self, node: Node) -> bytes:
        """The canonical bytes of an explorer node: its slots, globals and monitor states in
        turn (an order every process agrees on, whatever its hash seed)."""
        items = (*node[0].slots, *node[0].values, *node[1:])
        return b"".join([self._cache.get(item) or self._remember(item) for item in items])

    def _remember(self, value: Hashable) -> bytes:
        data = self.encode(value)
        if len(self._cache) >= _CACHE:
            self._cache.clear()
        self._cache[value] = data
        return data

    def encode(self, value: Any) -> bytes:
        """The canonical bytes of `value` (equal values, equal bytes)."""
        kind = type(value)
        if kind is str:
            data = value.encode("utf-8", "surrogatepass")
            return b"s%d:%b" % (len(data), data)
        if kind is int or kind is bool:
            return b"i%d;" % value
        if value is None:
            return b"n"
        if isinstance(value, tuple):  # its items recur across values (a queue's entries)
            cache = self._cache
            parts = [cache.get(item) or self._remember(item) for item in value]
            return b"t%d:%b" % (len(value), b"".join(parts))
        if isinstance(value, frozenset):
            items = sorted([self.encode(item) for item in value])
            return b"f%d:%b" % (len(items), b"".join(items))
        return self._encode_other(value)

    def _encode_other(self, value: Any) -> bytes:
        if isinstance(value, str):  # a str enum: equal to its text
            return self.encode(str.__str__(value))
        if isinstance(value, int):  # an int enum or a bool subclass
            return b"i%d;" % int(value)
        if isinstance(value, float):
            return b"i%d;" % int(value) if value.is_integer() else b"d%r;" % value
        if isinstance(value, bytes):
            return b"b%d:%b" % (len(value), value)
        if isinstance(value, enum.Enum):
            name = f"{type(value).__qualname__}.{value.name}".encode()
            return b"e%d:%b" % (len(name), name)
        if is_dataclass(value) and not isinstance(value, type):
            items = (type(value).__qualname__, *(getattr(value, f.name) for f in fields(value)))
            return b"c" + self.encode(items)
        raise FingerprintError(
            f"fingerprints: a state holds {value!r} of type {type(value).__name__}, which has "
            "no canonical encoding; keep full states (no --fingerprints), or hold only "
            "str, int, None, tuples, frozensets, enums and frozen dataclasses in states"
        )


class FingerprintStore:
    """The explorer's visited set as fingerprints: node -> (parent, action), compactly.

    It answers what the explorer asks of its ``parents`` dict (``in``,
    ``setdefault``, item assignment, ``len``); an entry ``(parent_node,
    label)`` is kept as the parent's index and the label's index in
    ``system.labels()``. `references` lets a parallel search number nodes
    across processes: node ``i`` of partition ``p`` of ``n`` is ``i * n + p``.
    """

    def __init__(
        self,
        system: System,
        bits: int,
        canon: Canon,
        step_monitors: StepMonitors,
        *,
        partition: int = 0,
        partitions: int = 1,
    ) -> None:
        self.system = system
        self.fingerprinter = Fingerprinter(bits)
        self.fingerprint: Callable[[Hashable], int] = self.fingerprinter
        self.canon = canon
        self.step_monitors = step_monitors
        self.partition = partition
        self.partitions = partitions
        self.labels = system.labels()
        self.label_index = {label: index for index, label in enumerate(self.labels)}
        # By text too, for one sent from another process that is not equal to itself there
        # (a float NaN among its arguments is another object, and NaN != NaN): once only.
        said = Counter(repr(label) for label in self.labels)
        self.label_text = {repr(s): i for i, s in enumerate(self.labels) if said[repr(s)] == 1}
        self.bits = bits
        self.fps = array("Q")  # the low 64 bits of each fingerprint
        self.wide = array("Q")  # the high 64 bits of 128-bit fingerprints
        # Each node's parent reference and action: only a trace reads them (a file past
        # `statecore.check.spill.PARENTS` bytes).
        self.log = ParentLog(wide_actions=len(self.labels) >= 1 << 16)
        self.table = array("I", bytes(4 * 1024))
        self.mask = len(self.table) - 1
        self._key: object = None  # the node fingerprinted last, and its fingerprint
        self._key_fp = 0
        self._parent: object = None  # the parent met last, and its reference
        self._parent_ref = ROOT
        self._missed = -1  # the fingerprint `find` missed last (none was added since)
        self._free = 0  # and the free slot its probe ended at
        self._expanded = 0  # nodes `expanding` was told the index of

    # -- what the explorer asks ------------------------------------------------

    def __len__(self) -> int:
        return len(self.log)

    def __contains__(self, node: object) -> bool:
        return self.find(self.fp_of(node)) >= 0

    def __setitem__(self, node: Node, entry: tuple[Node, ActionLabel] | None) -> None:
        self.setdefault(node, entry)

    def setdefault(
        self, node: Node, entry: tuple[Node, ActionLabel] | None
    ) -> tuple[Node, ActionLabel] | None:
        """Add `node` if new and return `entry`; return None if it was there."""
        fp = self.fp_of(node)
        if fp != self._missed and self.find(fp) >= 0:  # (``in`` just missed it: new)
            return None
        if entry is None:
            self.add(fp, ROOT, 0)
        else:
            self.add(fp, self.ref_of(entry[0]), self.action_of(entry[1]))
        return entry

    @property
    def incremental(self) -> FingerprintStore:
        """The store whose `expanding` and `reached` the search calls: this one."""
        return self

    def fp_of(self, node: object) -> int:
        """The fingerprint of `node` (the last one is remembered: `in` then assignment)."""
        if node is not self._key:
            self._key_fp = self.fingerprint(node)
            self._key = node
        return self._key_fp

    def ref_of(self, node: object) -> int:
        """The reference of visited `node` (the parent met last is remembered)."""
        if node is not self._parent:
            index = self.find(self.fingerprint(node))
            assert index >= 0, "a parent is visited before its successors"
            self._parent_ref = index * self.partitions + self.partition
            self._parent = node
        return self._parent_ref

    def expanding(self, node: Node, index: int = -1) -> int:
        """The successors of visited `node` are next: its reference is remembered, and its
        `Fingerprinter.raw` sum returned for `reached`.

        `index`, where known, is `node`'s index here: a breadth-first search stores the
        nodes of a level in the order it queues them, so the i-th node of a level is the
        i-th it stored since the level began. The sum is then the fingerprint stored there
        (unless that is 1, which a sum of 0 is stored as), not worked out from every part;
        every `_RECHECK`-th is worked out whole all the same, and must agree (which also
        checks the fingerprints worked out step by step).
        """
        if index >= 0:
            return self.expanding_held(
                node, self._fp_at(index), index * self.partitions + self.partition
            )
        raw = self.fingerprinter.raw(node)
        index = self.find(raw or 1)
        assert index >= 0, "a parent is visited before its successors"
        self._parent, self._parent_ref = node, index * self.partitions + self.partition
        return raw

    def expanding_held(self, node: Node, fp: int, ref: int) -> int:
        """`expanding`, of a node whose fingerprint `fp` and reference `ref` (here or in another
        worker's store) its holder kept: the sum is `fp`, checked whole now and then."""
        self._expanded += 1
        raw = fp
        if fp == 1 or not self._expanded % _RECHECK:
            raw = self.fingerprinter.raw(node)
            if (raw or 1) != fp:
                raise RuntimeError(
                    f"fingerprints: the fingerprint kept for node {ref} is not that of the "
                    "node expanded: the search kept a level out of its order, or worked a "
                    "successor's fingerprint out wrong; please report it"
                )
        self._parent, self._parent_ref = node, ref
        return raw

    def reached(self, raw: int, node: Node, nxt: Node, writes: int, step: object = None) -> None:
        """`nxt` is `node` (of sum `raw`) where its step wrote the flat positions `writes`:
        its fingerprint, for the `in` or `setdefault` next, is worked out from those alone
        (`step`: as `Fingerprinter.moved`'s)."""
        self._key = nxt
        self._key_fp = self.fingerprinter.moved(raw, node, nxt, writes, step) or 1

    def action_of(self, label: ActionLabel) -> int:
        found = self.label_index.get(label)
        if found is None:
            found = self.label_text.get(repr(label))
        if found is None:
            raise FingerprintError(
                f"fingerprints: system {self.system.name!r} took action {label}, which is "
                "not among its labels(); keep full states (no --fingerprints)"
            )
        return found

    def __iter__(self) -> Iterator[Node]:
        raise TypeError("a fingerprint store keeps no states to list: keep full states")

    # -- the table --------------------------------------------------------------

    def find(self, fp: int) -> int:
        """The index of fingerprint `fp`, or -1."""
        table, fps, mask = self.table, self.fps, self.mask
        low = fp & ROOT
        slot = low & mask
        while index := table[slot]:
            if fps[index - 1] == low and (self.bits == 64 or self.wide[index - 1] == fp >> 64):
                return index - 1
            slot = (slot + 1) & mask
        self._missed, self._free = fp, slot  # where `add` puts it, if it comes next
        return -1

    def _fp_at(self, index: int) -> int:
        if self.bits == 64:
            return self.fps[index]
        return self.fps[index] | self.wide[index] << 64

    def add(self, fp: int, parent: int, action: int) -> int:
        """Add fingerprint `fp` (known to be new); its index."""
        index = len(self.log)
        self.fps.append(fp & ROOT)
        if self.bits == 128:
            self.wide.append(fp >> 64)
        self.log.append(parent, action)
        if (index + 1) > _MAX_LOAD * len(self.table):
            self._grow()
        elif fp == self._missed:  # the probe that missed it ended at a free slot
            self.table[self._free] = index + 1
        else:
            self._place(fp, index + 1)
        self._missed = -1
        return index

    def _place(self, fp: int, value: int) -> None:
        table = self.table
        mask = self.mask
        slot = fp & ROOT & mask
        while table[slot]:
            slot = (slot + 1) & mask
        table[slot] = value

    def _grow(self) -> None:
        self.table = array("I", bytes(8 * len(self.table)))
        self.mask = len(self.table) - 1
        for index in range(len(self.fps)):
            self._place(self._fp_at(index), index + 1)

    @property
    def nbytes(self) -> int:
        """The bytes the store holds in memory."""
        arrays = (self.fps, self.wide, self.table)
        return sum(len(a) * a.itemsize for a in arrays) + self.log.nbytes

    # -- traces ----------------------------------------------------------------

    def entry(self, index: int) -> tuple[int, int, int]:
        """``(fingerprint, parent reference, action index)`` of node `index`."""
        return (self._fp_at(index), *self.log[index])

    def set_entry(self, index: int, parent: int, action: int) -> None:
        """Node `index` was reached first from `parent` by `action` (a worker's claim)."""
        self.log[index] = (parent, action)

    def path_to(self, node: Node) -> StrictParents:
        """The explorer's parents along the shortest path to visited `node`, by replay."""
        index = self.find(self.fingerprint(node))
        assert index >= 0, "only a visited node has a path"
        actions: list[int] = []
        fp, parent, action = self.entry(index)
        while parent != ROOT:
            actions.append(action)
            fp, parent, action = self.entry(parent // self.partitions)
        actions.reverse()
        chain, last = replay_chain(self, fp, actions, len(node) - 1)
        if last != node:
            raise _diverged(self.system, "the replayed path ends elsewhere")
        return chain


def replay_chain(
    store: FingerprintStore, root: int, actions: Sequence[int], monitors: int
) -> tuple[StrictParents, Node]:
    """The nodes (with `monitors` monitor states) from the initial node `root` along `actions`.

    Each step applies the stored action to the representative reached so far
    and canonicalizes, as the search did, so the replayed nodes are the ones
    the search stored; the result is the explorer's ``parents`` mapping for
    `statecore.check.counterexample.rebuild`, and the last node.
    """
    system, fingerprint, canon = store.system, store.fingerprint, store.canon
    current: Node | None = None
    for init in system.init_states():
        candidate = canon((init, *(EMPTY_MONITOR for _ in range(monitors))))
        if fingerprint(candidate) == root:
            current = candidate
            break
    if current is None:
        raise _diverged(system, "no initial state has the stored fingerprint")
    # (Keyed strictly: without memos, a path may pass two states equal but for a type.)
    chain = StrictParents()
    chain[current] = None
    for step_index, action in enumerate(actions, 1):
        label = store.labels[action]
        try:
            step_ = take(system, current[0], label, step_index)
        except NotEnabledError:
            raise _diverged(system, f"action {label} is no longer enabled") from None
        after = store.step_monitors(current[1:], step_.outputs)[0] if monitors else ()
        nxt = canon((step_.state, *after))
        chain[nxt] = (current, label)
        current = nxt
    return chain, current


def _diverged(system: System, what: str) -> NondeterministicActionError:
    return NondeterministicActionError(
        f"system {system.name!r}: replaying the search's path by fingerprints, {what}; "
        "an action must be a function of what it reads through its Tx (or two states "
        "shared a fingerprint: rerun without --fingerprints)"
    )


def collision_bound(bits: int, states: int) -> float:
    """An upper bound on the probability that two of `states` distinct nodes share a fingerprint."""
    return min(1.0, states * (states - 1) / float(2 ** (bits + 1)))


def collision_note(bits: int, states: int, nbytes: int) -> str:
    """The line a fingerprint search reports (as TLC does), with the store's bytes a state."""
    return (
        f"fingerprints: {bits}-bit, {states:,} states ({nbytes / max(1, states):.0f} bytes "
        f"each), probability of a collision <= {collision_bound(bits, states):.1e}"
    )


def store_notes(parents: object) -> tuple[str, ...]:
    """The notes a visited set adds to a report: the collision bound of a fingerprint store."""
    if isinstance(parents, FingerprintStore):
        return (collision_note(parents.bits, len(parents), parents.nbytes),)
    return ()
