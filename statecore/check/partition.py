"""One worker's share of a partitioned search, whatever carries nodes between workers.

A worker owns the nodes routed to it (`Plan.route`; by default, by
fingerprint: `partition_of`): it keeps
their visited set (`Partition`), expands them one depth level at a time, and
sends every successor it does not own to its owner, which deduplicates it
and judges it (`Share`). The worker runs the one-process explorer's own code
on its nodes; only where a finding is reported does it differ, noting the
node's reference instead of building a trace (the coordinator rebuilds it).

What carries the successors is the caller's: `Share` puts messages in the
other workers' inboxes and reads its own (queues between forked processes in
`statecore.check.parallel`, actor calls on a Ray cluster in
`statecore.check.ray_search`). A message is ``(sender, index, batch)``, or
``(sender, count, None)`` once a sender has sent its `count` batches of a
level; batches are read in sender and index order, so the order in which
they arrive does not matter.
"""

from __future__ import annotations

import contextlib
import traceback
from collections.abc import Callable, Hashable, Iterator, Sequence
from dataclasses import dataclass, field
from itertools import islice
from typing import Any, Protocol

from ..properties import Property
from ..system import ActionLabel, System
from ..traces.judge import VIOLATED, PropertyResult
from ..traces.trace import Trace
from .fingerprints import ROOT, Fingerprinter, FingerprintStore
from .frontier import Level, NodeHint, Parts, expand_hinted, new_level
from .locality import owner_by
from .parcels import Arrivals, Dispatch, Item, Outgoing, Parcel
from .symmetry_guard import Asymmetry
from .transfer import dumps, loads
from .values import NotInterchangeable

__all__ = [
    "Finding",
    "LevelReport",
    "OrbitMinimum",
    "Partition",
    "Plan",
    "Share",
    "partition_of",
    "process_hash",
]

Node = tuple[Any, ...]
_BATCH = 20_000  # successors sent to another worker in one message at most
_MEMORY_EVERY = 1024  # nodes expanded between two looks at the resident memory


def partition_of(fp: int, partitions: int) -> int:
    """The worker that owns fingerprint `fp` (bits the visited table does not index by)."""
    return (fp >> 40) % partitions


def process_hash(node: Hashable) -> int:
    """Where full states are kept, a node's route: its hash, the same in every forked worker.

    The nodes themselves decide membership, so a hash collision costs
    nothing; and it is cheaper than a fingerprint.
    """
    return hash(node) & ROOT or 1


@dataclass(frozen=True)
class Plan:
    """What every worker of one search is told: the system and how to search it.

    `stable_routes`, where the workers are not forked from one process: route
    full states by their fingerprint, and pick each orbit's representative
    by `OrbitMinimum`, both the same in every process. `route`, the positions
    a node's owner is worked out from (`statecore.check.locality`; empty: its
    fingerprint).
    """

    explorer_class: type
    system: System
    properties: tuple[Property, ...] | None
    symmetry: bool
    max_memory: int | None
    workers: int
    fingerprints: int
    stable_routes: bool = False
    route: tuple[int, ...] = ()


class OrbitMinimum:
    """A canonical form that is the same in every process: the orbit's least encoding.

    The explorer's `statecore.check.symmetry.Canonicalizer` orders candidates
    by ``hash``, which differs between processes that are not forked from
    one (``hash(None)`` is an address before Python 3.12): two of them would
    pick different representatives of one orbit, and keep both. This tries
    every renaming of the ids and keeps the node whose canonical encoding
    (`Fingerprinter.encode_node`) is least: |group| renames a state, so it
    is for the small groups symmetry reduction is used with.
    """

    def __init__(self, images: Callable[[Node], list[tuple[Any, Node]]]) -> None:
        self.images = images
        self.encode = Fingerprinter().encode_node

    def __call__(self, node: Node) -> Node:
        encode = self.encode
        best, least = node, encode(node)
        for _, image in self.images(node):
            key = encode(image)
            if key < least:
                best, least = image, key
        return best


class Inbox(Protocol):
    def put(self, message: tuple[int, int, bytes | None]) -> None: ...

    def get(self) -> tuple[int, int, bytes | None]: ...


# -- one worker's share of the visited set ---------------------------------------------


class Partition:
    """A worker's visited set, answering the explorer's ``parents`` questions.

    A successor this worker owns is added at once; one it does not is queued
    for its owner (once per level) and reported as already seen, so the
    explorer neither queues nor judges it. `exact` keeps the nodes too (a
    dict beside the fingerprints), for results that do not depend on hashes.
    """

    def __init__(
        self,
        store: FingerprintStore,
        exact: bool,
        parts: Parts | None = None,
        route: tuple[int, ...] = (),
    ) -> None:
        self.store = store
        self.me = store.partition
        self.workers = store.partitions
        slots = len(store.system.slot_keys())
        # With fingerprints, routed as they are kept: by the parts' digests.
        summing = None if exact else store.fingerprinter.summing
        route = tuple(dict.fromkeys(route))  # each position once, as the mask has it
        self.route = owner_by(route, slots, self.workers, summing) if route else None
        self.routed = sum(1 << p for p in route)  # the flat positions routed by, as a mask
        self._routed_sum = None if summing is None or not route else summing(route)
        # The successor `reached` met last, if its step left every routed position alone: it
        # has its parent's owner, this worker (a worker expands only nodes it holds).
        self._stays: object = None
        # Else its owner, worked out from its parent's sum of the routed parts' digests (the
        # route's own sum) and the parts its step changed, as a fingerprint is (`moved`).
        self._moved: object = None
        self._moved_owner = 0
        self._parent_sum = 0
        self.nodes: dict[Node, int] | None = {} if exact else None
        # With fingerprints the outbox is packed (`Outgoing`), numbered apart from the levels
        # (so only parts of successors sent are numbered there), and successors travel as
        # parcels of those numbers (`statecore.check.parcels`), built here of the levels' parts.
        self.parts = None if parts is None else Parts(*parts.shape)
        self.outbox: list[list[Item] | Outgoing] = self.new_outbox()
        self.dispatch = [Dispatch(self.parts) for _ in range(self.workers)] if self.parts else []
        self.arrivals = [Arrivals(parts) for _ in range(self.workers)] if parts else []
        self.sent: set[Hashable] = set()
        self.quota: int | None = None  # new nodes this level may still add
        self.turned_away = False
        self.boundary = 0  # the index of this level's first new node
        self._parent: object = None
        self._parent_ref = ROOT

    def new_outbox(self) -> list[list[Item] | Outgoing]:
        """An empty outbox per worker (this one's stays empty)."""
        parts, bits = self.parts, self.store.bits
        return [[] if parts is None else Outgoing(parts, bits) for _ in range(self.workers)]

    def __len__(self) -> int:
        return len(self.store)

    def batches(self, owner: int, size: int) -> Iterator[list[Item] | Parcel]:
        """This level's successors for worker `owner`, `size` at most a batch."""
        items = self.outbox[owner]
        if isinstance(items, Outgoing):
            yield from self.dispatch[owner].parcels(items, size)
            return
        queued = iter(items)
        while batch := list(islice(queued, size)):
            yield batch

    @property
    def incremental(self) -> Partition | None:
        """With fingerprints, what the search primes with each successor's fingerprint
        (`reached`): this worker expands only nodes it holds in its store."""
        return None if self.nodes is not None else self

    def expanding(self, node: Node, index: int = -1) -> int:
        """`FingerprintStore.expanding` (`index`: `node`'s, where known): `node`'s successors
        are next (its routed parts' digests are summed once for them all). A worker stores
        a level as it queues it too: its own successors as it expands, then those that
        arrived."""
        if self._routed_sum is not None:
            self._parent_sum = self._routed_sum(node[0][0] + node[0][1])
        return self.store.expanding(node, index)

    def reached(self, raw: int, node: Node, nxt: Node, writes: int, step: object = None) -> None:
        """`FingerprintStore.reached`; and `nxt`'s owner: here if its step (of flat positions
        `writes`) changed no position the route reads, else from the parts it changed."""
        self.store.reached(raw, node, nxt, writes, step)
        if self._routed_sum is None:
            return
        hit = writes & self.routed
        if not hit:
            self._stays = nxt
            return
        self._stays = None
        total = self._parent_sum + self.store.fingerprinter.swapped(node[0], nxt[0], hit)
        self._moved, self._moved_owner = nxt, total % self.workers

    def owner(self, node: Node, fp: int) -> int:
        """The worker that holds `node`, of fingerprint `fp`."""
        if node is self._stays:
            return self.me
        if node is self._moved:
            return self._moved_owner
        return partition_of(fp, self.workers) if self.route is None else self.route(node)

    def arrived(self, batches: list[tuple[int, list[Item] | Parcel]]) -> Iterator[Item]:
        """The successors of the batches other workers sent, in order; of a parcel, those not
        visited here when their turn comes (a node is built for those alone)."""
        for sender, batch in batches:
            if isinstance(batch, Parcel):
                yield from self.arrivals[sender].items(batch, self.store.find)
            else:
                yield from batch

    def __contains__(self, node: Node) -> bool:
        fp = self.store.fp_of(node)
        if self.owner(node, fp) != self.me:
            return True  # another worker's: not this one's to add
        return self.index(node, fp) >= 0

    def __setitem__(self, node: Node, entry: tuple[Node, ActionLabel] | None) -> None:
        self.setdefault(node, entry)

    def setdefault(
        self, node: Node, entry: tuple[Node, ActionLabel] | None
    ) -> tuple[Node, ActionLabel] | None:
        """Add `node` if this worker owns it and it is new, else queue it once a level for its
        owner; `entry` if added here (its parent and action are looked up only then)."""
        fp = self.store.fp_of(node)
        owner = self.owner(node, fp)
        if owner != self.me:
            sent = fp if self.nodes is None else node  # full states: two may share a hash
            if sent not in self.sent:
                self.sent.add(sent)
                self.outbox[owner].append((node, fp, *self._entry(entry)))
            return None
        if self.index(node, fp) >= 0:
            return None
        return entry if self._admit(node, fp, *self._entry(entry)) else None

    def _entry(self, entry: tuple[Node, ActionLabel] | None) -> tuple[int, int]:
        """The parent reference and action number of `entry` (the root's: none)."""
        if entry is None:
            return ROOT, 0
        return self.ref_of(entry[0]), self.store.action_of(entry[1])

    def index(self, node: Node, fp: int) -> int:
        if self.nodes is not None:
            return self.nodes.get(node, -1)
        return self.store.find(fp)

    def insert(self, node: Node, fp: int, parent: int, action: int) -> bool:
        """Add `node` if new and the quota allows; whether it was added."""
        return self.index(node, fp) < 0 and self._admit(node, fp, parent, action)

    def _admit(self, node: Node, fp: int, parent: int, action: int) -> bool:
        """Add new `node` if the quota allows; whether it was added."""
        if self.quota is not None:
            if self.quota <= 0:
                self.turned_away = True
                return False
            self.quota -= 1
        index = self.store.add(fp, parent, action)
        if self.nodes is not None:
            self.nodes[node] = index
        return True

    def ref_of(self, node: object) -> int:
        """The reference of this worker's visited `node`: index * workers + worker."""
        if self.nodes is None:  # (the store remembers the parent `expanding` met)
            return self.store.ref_of(node)
        if node is not self._parent:
            index = self.index(node, self.store.fingerprint(node))  # type: ignore[arg-type]
            assert index >= 0, "a parent is visited before its successors"
            self._parent_ref = index * self.workers + self.me
            self._parent = node
        return self._parent_ref


@dataclass
class Finding:
    """A property settled, or a monitor refusal held back, on a worker: no trace yet."""

    prop: str
    verdict: str
    detail: str
    ref: int
    last: ActionLabel | None
    length: int  # the steps of its trace


@dataclass
class LevelReport:
    worker: int
    states: int = 0
    new: int = 0
    transitions: int = 0
    findings: list[Finding] = field(default_factory=list)
    when_seen: set[str] = field(default_factory=set)
    quiescent_seen: bool = False
    turned_away: bool = False
    out_of_memory: bool = False
    store_bytes: int = 0
    error: tuple[str, str, int] | None = None  # (kind, message, reference)
    values: bytes = b""  # the (place, value)s it made since its last report, encoded


class Share:
    """One worker's side of the search: expand its nodes, exchange, report."""

    def __init__(
        self,
        plan: Plan,
        me: int,
        inboxes: Sequence[Inbox],
        codec: tuple[Callable[[Any], bytes], Callable[[bytes], Any]] = (dumps, loads),
    ) -> None:
        self.me = me
        self.inboxes = inboxes
        self.dumps, self.loads = codec
        self.system = plan.system
        share = None if plan.max_memory is None else plan.max_memory // plan.workers
        self.explorer: Any = plan.explorer_class(
            plan.system, plan.properties, plan.symmetry, None, share, False, None
        )
        if plan.stable_routes and self.explorer.symmetry:
            self.explorer.canonicalizer = OrbitMinimum(self.explorer.canonicalizer.images)
        store = FingerprintStore(
            plan.system,
            plan.fingerprints or 64,
            self.explorer._canon,
            self.explorer.monitor_steps.step,
            partition=me,
            partitions=plan.workers,
        )
        if not plan.fingerprints and not plan.stable_routes:
            store.fingerprint = process_hash
        # No states kept (fingerprints): the levels and the outbox are packed.
        packed = plan.fingerprints and self.explorer.por is None
        parts = Parts.of(plan.system, len(self.explorer.monitors)) if packed else None
        self.part = Partition(store, not plan.fingerprints, parts, plan.route)
        self.explorer.parts = parts
        self.explorer.parents = self.part
        self.findings: list[Finding] = []
        self.frontier: Level = []  # the nodes of the level to expand next
        # Their hints (`SuccessorCache.expand`, where the explorer keeps them): a node this worker
        # reached from its own parent walks again only for the actions the step changed; one sent
        # by another worker has none.
        self.hints: list[NodeHint | None] | None = None
        self.base = -1  # the depth of the level being expanded (-1: the initial nodes)
        setattr(self.explorer, "_trace", self._note)  # noqa: B010

    def _note(
        self, node: Node, last: ActionLabel | None, prop: Property | None, verdict: str, detail: str
    ) -> Trace:
        """The explorer's `_trace` on a worker: note the finding, return an empty trace."""
        ref = self.part.ref_of(node)
        depth = self.base + (1 if ref // self.part.workers >= self.part.boundary else 0)
        pid = "" if prop is None else prop.id
        if prop is not None:
            self.findings.append(
                Finding(pid, verdict, detail, ref, last, depth + (last is not None))
            )
        return Trace(self.system.name, (), pid, verdict, detail)

    def entry(self, ref: int) -> tuple[int, int, int]:
        """``(fingerprint, parent reference, action index)`` of this worker's node `ref`."""
        return self.part.store.entry(ref // self.part.workers)

    def level(self, command: str, quota: int | None, settled: dict[str, str]) -> LevelReport:
        """The initial nodes (``init``) or the next level: expand, exchange, judge; its report."""
        part, explorer = self.part, self.explorer
        props = {p.id: p for p in explorer.props}
        for pid, verdict in settled.items():
            if pid not in explorer.results:
                explorer._settle(PropertyResult(props[pid], verdict, None, ""))
        first = part.boundary  # where the frontier is stored from: as the last level began
        part.quota, part.turned_away, part.boundary = quota, False, len(part)
        report = LevelReport(self.me)
        deeper: Level = new_level(explorer.parts)
        walks = explorer.hinted  # (a received node has none; a packed one keeps none)
        hints = self.hints
        kept: list[NodeHint | None] | None = [] if walks else None  # the hints of `deeper`
        deeper_hints = kept
        current: Node | None = None
        stage = "init"
        try:
            if command == "init":
                deeper = explorer._initial_nodes()
                deeper_hints = kept = [None] * len(deeper) if walks else None
            else:
                self.base += 1
                stage = "expand"
                try:
                    for index, current in enumerate(self.frontier):
                        explorer.at = first + index  # the frontier is stored as it was queued
                        deeper_hints = expand_hinted(
                            explorer._expand, current, index, deeper, hints, deeper_hints
                        )
                        if index % _MEMORY_EVERY == 0 and explorer._out_of_memory():
                            report.out_of_memory = True
                            break
                except Exception:
                    with contextlib.suppress(Exception):
                        self._exchange()  # the other workers wait for this one's successors
                    raise
                finally:
                    explorer.at = -1
                stage = "exchange"
                received = self._exchange()
                stage = "state"
                for current in part.arrived(received):
                    if part.insert(*current):
                        deeper.append(current[0])
                        if deeper_hints is not None:
                            deeper_hints.append(None)
                        if explorer.state_props:
                            explorer._check_state(current[0])
                current = None
                for pid, (_, node, action, detail) in explorer.refusals.items():
                    ref, length = part.ref_of(node), self.base + 1
                    self.findings.append(Finding(pid, VIOLATED, detail, ref, action, length))
                explorer.refusals.clear()
        except Asymmetry as exc:
            report.error = ("asymmetry", exc.reason, 0)
        except NotInterchangeable as exc:
            report.error = ("values", exc.reason, 0)
        except Exception:
            node = current[0] if isinstance(current, tuple) and stage == "state" else current
            ref = ROOT if node is None else part.ref_of(node)
            report.error = (stage, traceback.format_exc(), ref)
        self.frontier = deeper
        self.hints = kept  # those of its first nodes (its unpacked ones), in order
        report.states, report.new = len(part), len(deeper)
        report.transitions = explorer.transitions
        report.findings, self.findings = self.findings, []
        report.when_seen = set(explorer.when_seen)
        report.quiescent_seen = explorer.quiescent_seen
        report.turned_away = part.turned_away
        report.store_bytes = part.store.nbytes
        report.values = self.dumps(explorer.values.fresh())  # another worker's may equal them
        return report

    def _exchange(self) -> list[tuple[int, list[Item] | Parcel]]:
        """Send every queued successor to its owner; the batches sent here, each with its
        sender, in worker order."""
        part = self.part
        failure: Exception | None = None
        for owner in range(part.workers):
            if owner != self.me:
                sent = 0
                try:
                    for batch in part.batches(owner, _BATCH):
                        self.inboxes[owner].put((self.me, sent, self.dumps(batch)))
                        sent += 1
                except Exception as exc:
                    failure = exc
                self.inboxes[owner].put((self.me, sent, None))  # the end of this level, always
        part.outbox = part.new_outbox()
        part.sent = set()
        received: dict[int, dict[int, bytes]] = {w: {} for w in range(part.workers)}
        expected: dict[int, int] = {}
        while len(expected) < part.workers - 1 or any(
            len(received[w]) < count for w, count in expected.items()
        ):
            sender, index, payload = self.inboxes[self.me].get()
            if payload is None:
                expected[sender] = index
            else:
                received[sender][index] = payload
        if failure is not None:
            raise failure
        order = [(w, i) for w in sorted(received) for i in sorted(received[w])]
        return [(w, self.loads(received[w][i])) for w, i in order]
