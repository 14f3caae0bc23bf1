"""Which worker owns a node, and what it keeps of the nodes it owns and of those it claims.

`Partition` is one worker's visited set, answering the explorer's
``parents`` questions as one process's store does, and knowing which
successors are another worker's (`partition_of` of their fingerprint, or
with full states of `process_hash`). `statecore.check.partition` runs a worker's
share of the search on it.
"""

from __future__ import annotations

from array import array
from collections.abc import Hashable, Sequence
from itertools import accumulate, pairwise
from typing import Any

from ..system import ActionLabel
from .fingerprints import ROOT, FingerprintStore

__all__ = ["DEAD", "PENDING", "STEP_BITS", "Partition", "partition_of", "process_hash"]

Node = tuple[Any, ...]
PENDING = -2  # the reference of a claimed node whose owner has not answered yet
DEAD = -1  # of a claimed node its owner turned down: left in its level, never expanded
_SEEN, _TURNED_AWAY = -1, -2  # an owner's answer to a claim on a node it has, or over quota
_NOWHERE = -1  # where a claim of a closed level (`Partition.closed`) queued its node: nowhere
_KNOWN = 1 << 20  # claims on other workers' nodes remembered, as their fingerprints, at most
_CLAIM = 5  # numbers a claim takes: fingerprint (low, high), parent, action, discovery key
STEP_BITS = 24
"""A node's discovery key is its parent's rank in its level, shifted by this, with the number of
the action that reached it (an initial node's: its place among the initial states)."""


def partition_of(fp: int, partitions: int) -> int:
    """The worker that owns fingerprint `fp` (bits the visited table does not index by)."""
    return (fp >> 40) % partitions


def process_hash(node: Hashable) -> int:
    """Where full states are kept, what decides a node's owner: its hash, the same in every
    forked worker.

    The nodes themselves decide membership, so a hash collision costs
    nothing; and it is cheaper than a fingerprint.
    """
    return hash(node) & ROOT or 1


class Partition:
    """A worker's visited set, answering the explorer's ``parents`` questions.

    The worker that owns a node (`partition_of` its fingerprint) keeps it in
    its visited set: its fingerprint, or with full states (`exact`) the node
    too, in a dict beside the fingerprints (process hashes then), for results
    that do not depend on hashes.

    A successor another worker owns is *claimed* from it: its fingerprint,
    parent, action and discovery key go to the owner (with full states, the
    node too), and the node stays with the worker that reached it, which queues
    and judges it at once, as if new, with what its parent's expansion learned.
    At the level's end the owner keeps, of the workers that reached a node new
    in this level, itself included, the one that reached it first in one
    process's order: the least discovery key (`STEP_BITS`), whose parent and
    action it stores. It answers that claim with where it stored the node; a
    claim turned down (seen before, or reached first by another, or over the
    quota) leaves its node in the level as dead, never expanded, and whatever
    its judgement found is dropped (the node's holder found it too), as is the
    owner's own node that a claim reached first. So a worker expands the nodes
    it reached, each node's parent is one process's, and with fingerprints
    only 40 bytes a claim cross.

    A node's rank is its place in its level in one process's order: the
    workers expand their nodes in that order (`order`), so the first of a
    worker's ways to a node is its least; `rank` works the next level's out.
    """

    def __init__(self, store: FingerprintStore, exact: bool) -> None:
        self.store = store
        self.me = store.partition
        self.workers = store.partitions
        self.nodes: dict[Node, int] | None = {} if exact else None
        # The successors claimed from their owners: in this level (full states), or with
        # fingerprints in this level or an earlier one but not turned away by the quota: each
        # of those the owner keeps already, whatever it answered (up to `_KNOWN`).
        self.sent: set[Hashable] = set()
        self.quota: int | None = None  # new nodes this level may still add
        self.closed = False  # no worker may add a node this level: claims are not queued
        self.turned_away = False
        self._parent: object = None
        self._parent_ref = ROOT
        self.parent_rank = 0  # the initial nodes': one root before them all
        self._asked = 0  # initial nodes asked about so far (the last one's discovery key)
        self.rooting = True  # queuing the initial nodes
        # Per node of the level being queued, and of the one being expanded, its fingerprint
        # and reference (`DEAD`: a claim turned down, `PENDING`: a claim not answered yet);
        # per owner, this level's claims, their nodes' places, and with full states the nodes.
        self.queued_fps, self.queued_refs = _Fingerprints(store.bits), array("q")
        self.frontier_fps, self.frontier_refs = _Fingerprints(store.bits), array("q")
        # Per node queued, its discovery key, then its rank; per node to expand, its rank.
        self.queued_keys, self.frontier_ranks = array("q"), array("q")
        self.ranks = 1  # the ranks of the level being expanded: 0 to this (the root's: 0)
        self.next_ranks = 0  # and of the level queued, once ranked
        # The nodes this worker stored in this level, from `first` on: their discovery keys,
        # and the places of those it queued itself (-1: another worker's claim's).
        self.first = 0
        self.level_keys, self.level_places = array("q"), array("q")
        self.claims = [array("Q") for _ in range(self.workers)]
        self.claimed_at = [array("q") for _ in range(self.workers)]
        self.claimed_nodes: list[list[Node]] = [[] for _ in range(self.workers)]
        self._claimed: object = None  # the node claimed last

    def __len__(self) -> int:
        return len(self.store)

    @property
    def incremental(self) -> Partition | None:
        """With fingerprints, what the search primes with each successor's fingerprint
        (`reached`) and its parent's (`expanding`)."""
        return None if self.nodes is not None else self

    def expanding(self, node: Node, index: int = -1) -> int:
        """`FingerprintStore.expanding` of the `index`-th node of the level being expanded,
        whose fingerprint and reference this worker kept when it queued it."""
        return self.store.expanding_held(node, self.frontier_fps[index], self.frontier_refs[index])

    def hold(self, node: Node, index: int) -> None:
        """The `index`-th node of the level being expanded, `node`, is expanded next."""
        self._parent, self._parent_ref = node, self.frontier_refs[index]
        self.parent_rank = self.frontier_ranks[index]

    def order(self) -> Sequence[int]:
        """The places of the level to expand, in one process's order (by rank): a worker's own
        nodes are in order already, and those another sent it to even out come after them."""
        ranks = self.frontier_ranks
        if all(a < b for a, b in pairwise(ranks)):
            return range(len(ranks))
        return sorted(range(len(ranks)), key=ranks.__getitem__)

    def reached(self, raw: int, node: Node, nxt: Node, writes: int, step: object = None) -> None:
        """`FingerprintStore.reached`."""
        self.store.reached(raw, node, nxt, writes, step)

    def __contains__(self, node: Node) -> bool:
        self._asked += self.rooting  # (every worker asks of every initial node, in order)
        fp = self.store.fp_of(node)
        if partition_of(fp, self.workers) != self.me:
            return True  # another worker's: not this one's to add
        return self.index(node, fp) >= 0

    def __setitem__(self, node: Node, entry: tuple[Node, ActionLabel] | None) -> None:
        self.setdefault(node, entry)

    def setdefault(
        self, node: Node, entry: tuple[Node, ActionLabel] | None
    ) -> tuple[Node, ActionLabel] | None:
        """`entry` if `node` is to be queued: new here (added), or claimed from its owner;
        else None (seen, or claimed already). In a `closed` level a claim is sent, for its
        owner to say whether the node was new (then the search is incomplete), but its node is
        not queued, nor judged: one process turns it away unjudged."""
        fp = self.store.fp_of(node)
        owner = partition_of(fp, self.workers)
        if owner == self.me:
            if self.index(node, fp) >= 0:  # (reached before: by a less key, in this level)
                return None
            parent, action = self._entry(entry)
            key = self._key(entry, action)
            index = self._admit(node, fp, parent, action)
            if index < 0:
                return None
            self.level_keys.append(key)
            self.level_places.append(len(self.queued_fps))
            self._queue(fp, index * self.workers + self.me, key)
            return entry
        sent = fp if self.nodes is None else node  # full states: two may share a hash
        if sent in self.sent:
            return None
        self.sent.add(sent)
        parent, action = self._entry(entry)
        key = self._key(entry, action)
        self.claims[owner].extend((fp & ROOT, fp >> 64, parent, action, key))
        if self.nodes is not None:
            self.claimed_nodes[owner].append(node)
        if self.closed:
            self.claimed_at[owner].append(_NOWHERE)
            return None
        self.claimed_at[owner].append(len(self.queued_fps))
        self._queue(fp, PENDING, key)
        self._claimed = node
        return entry

    def _key(self, entry: tuple[Node, ActionLabel] | None, action: int) -> int:
        """The discovery key of a node reached by `entry` (by `action`): see `STEP_BITS`."""
        if entry is None:  # an initial node: its place among those asked about
            return self._asked - 1
        return self.parent_rank << STEP_BITS | action

    def _queue(self, fp: int, ref: int, key: int) -> None:
        self.queued_fps.append(fp)
        self.queued_refs.append(ref)
        self.queued_keys.append(key)

    def _entry(self, entry: tuple[Node, ActionLabel] | None) -> tuple[int, int]:
        """The parent reference and action number of `entry` (the root's: none)."""
        if entry is None:
            return ROOT, 0
        return self.ref_of(entry[0]), self.store.action_of(entry[1])

    def index(self, node: Node, fp: int) -> int:
        if self.nodes is not None:
            return self.nodes.get(node, -1)
        return self.store.find(fp)

    def _admit(self, node: Node | None, fp: int, parent: int, action: int) -> int:
        """Add new `node` if the quota allows; its index, or `_TURNED_AWAY`."""
        if self.quota is not None:
            if self.quota <= 0:
                self.turned_away = True
                return _TURNED_AWAY
            self.quota -= 1
        index = self.store.add(fp, parent, action)
        if self.nodes is not None:
            self.nodes[node] = index  # type: ignore[index]  # (full states: a node always)
        return index

    def ref_of(self, node: object) -> int:
        """The reference of the node being expanded (`hold`), of a node this worker added, or
        of a claimed `node`: index * workers + owner (`PENDING` for a claim not answered yet)."""
        if node is self._parent:
            return self._parent_ref
        if node is self._claimed:
            return PENDING
        if self.nodes is None:
            return self.store.ref_of(node)
        index = self.index(node, self.store.fingerprint(node))  # type: ignore[arg-type]
        assert index >= 0, "a node is added before its reference is asked for"
        return index * self.workers + self.me

    def claims_for(self, owner: int) -> bytes:
        """This level's claims on worker `owner`'s nodes: (fingerprint's low and high 64 bits,
        parent reference, action, discovery key) each."""
        return self.claims[owner].tobytes()

    def answer(
        self, got: dict[int, tuple[bytes, list[Node] | None]]
    ) -> tuple[dict[int, bytes], int]:
        """Take the other workers' claims (`claims_for`, by sender; with full states, their
        nodes): a node new in this level goes to the least discovery key, a claim's or this
        worker's own, and a node new here is added if the quota allows. Per sender, per
        claim, its index here, `_SEEN` or `_TURNED_AWAY`; and how many of this worker's own
        nodes a claim reached first (each left dead)."""
        answers: dict[int, array[int]] = {}
        held: dict[int, tuple[int, int]] = {}  # a node a claim holds: (sender, claim)
        lost = 0
        for sender in sorted(got):
            payload, nodes = got[sender]
            claims = array("Q")
            claims.frombytes(payload)
            answered = answers[sender] = array("q")
            for k in range(0, len(claims), _CLAIM):
                fp = claims[k] | claims[k + 1] << 64
                parent, action, key = claims[k + 2], claims[k + 3], claims[k + 4]
                node = None if nodes is None else nodes[k // _CLAIM]
                index = self.index(node, fp)  # type: ignore[arg-type]  # (a node, if exact)
                if index < 0:
                    index = self._admit(node, fp, parent, action)
                    if index >= 0:
                        self.level_keys.append(key)
                        self.level_places.append(-1)
                        held[index] = (sender, len(answered))
                    answered.append(index)
                    continue
                at = index - self.first
                if at < 0 or key >= self.level_keys[at]:  # an earlier level, or reached first
                    answered.append(_SEEN)
                    continue
                self.store.set_entry(index, parent, action)  # this claim reached it first
                self.level_keys[at] = key
                place = self.level_places[at]
                if place >= 0:  # this worker's own node: dead
                    self.queued_refs[place] = DEAD
                    self.level_places[at] = -1
                    lost += 1
                else:  # another claim's
                    other, number = held[index]
                    answers[other][number] = _SEEN
                held[index] = (sender, len(answered))
                answered.append(index)
        return {sender: a.tobytes() for sender, a in answers.items()}, lost

    def kids(self) -> bytes:
        """Per rank of the level expanded, how many of the nodes queued and kept its node
        reached first (4 bytes each; each rank is one worker's)."""
        kids = array("I", bytes(4 * self.ranks))
        refs = self.queued_refs
        for place, key in enumerate(self.queued_keys):
            if refs[place] != DEAD:
                kids[key >> STEP_BITS] += 1
        return kids.tobytes()

    def rank_roots(self) -> None:
        """Rank the initial nodes: by their places among those asked about, the same on
        every worker (not one after another: no rank is shared out)."""
        self.next_ranks = self._asked

    def rank(self, kids: list[bytes]) -> None:
        """Rank the nodes queued and kept, from every worker's `kids`: a node's rank is the
        nodes of the level its parent's rank reached first before it, and the ones its parent
        reached before it by a less key (one process queues them in that order)."""
        combined = 0  # (no count reaches 2**32: added as numbers, they add up field by field)
        for payload in kids:
            combined += int.from_bytes(payload, "little")
        counts = array("I", combined.to_bytes(4 * self.ranks, "little"))
        before = array("q", accumulate(counts, initial=0))
        refs, keys = self.queued_refs, self.queued_keys
        parent, sibling = -1, 0
        for place, key in enumerate(keys):
            if refs[place] == DEAD:
                continue
            if key >> STEP_BITS != parent:
                parent, sibling = key >> STEP_BITS, 0
            keys[place] = before[parent] + sibling
            sibling += 1
        self.next_ranks = before[-1]

    def answered(self, owner: int, payload: bytes) -> int:
        """Take worker `owner`'s answers to this level's claims on it; the claims turned down.
        A claim turned away by the quota is forgotten: the node may be claimed again."""
        answers = array("q")
        answers.frombytes(payload)
        refs, lost, claims = self.queued_refs, 0, self.claims[owner]
        for k, (place, index) in enumerate(zip(self.claimed_at[owner], answers)):
            if index == _TURNED_AWAY:
                self.sent.discard(claims[4 * k] | claims[4 * k + 1] << 64)
            if place == _NOWHERE:  # (a closed level's claim: its node was not queued)
                continue
            if index < 0:
                refs[place] = DEAD
                lost += 1
            else:
                refs[place] = index * self.workers + owner
        return lost

    def next_level(self) -> None:
        """The level queued is the one to expand next (`rank` ranked it)."""
        self.frontier_fps, self.frontier_refs = self.queued_fps, self.queued_refs
        self.frontier_ranks, self.ranks = self.queued_keys, self.next_ranks
        self.queued_fps, self.queued_refs = _Fingerprints(self.store.bits), array("q")
        self.queued_keys = array("q")
        self.first = len(self.store)
        self.level_keys, self.level_places = array("q"), array("q")
        self.rooting = False
        self.claims = [array("Q") for _ in range(self.workers)]
        self.claimed_at = [array("q") for _ in range(self.workers)]
        self.claimed_nodes = [[] for _ in range(self.workers)]
        if self.nodes is not None or len(self.sent) > _KNOWN:
            self.sent = set()
        self._claimed = self._parent = None


class _Fingerprints:
    """Fingerprints of 64 or 128 bits, in arrays of 64-bit numbers."""

    __slots__ = ("high", "low")

    def __init__(self, bits: int) -> None:
        self.low = array("Q")
        self.high = array("Q") if bits > 64 else None

    def append(self, fp: int) -> None:
        self.low.append(fp & ROOT)
        if self.high is not None:
            self.high.append(fp >> 64)

    def __getitem__(self, index: int) -> int:
        low = self.low[index]
        return low if self.high is None else low | self.high[index] << 64

    def __len__(self) -> int:
        return len(self.low)
