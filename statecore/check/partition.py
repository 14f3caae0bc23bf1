"""One worker's share of a partitioned search, whatever carries messages between workers.

A worker owns the nodes of its partition of the visited set (`Partition`):
those whose fingerprint (with full states, hash) falls to it
(`ownership.partition_of`). It expands its share of each depth level with the
one-process explorer's own code; only where a finding is reported does it
differ, noting the node's reference instead of building a trace (the
coordinator rebuilds it).

A successor another worker owns stays where it was reached: it is claimed
from its owner (with full states, the node goes with the claim, for the
owner to tell it apart exactly), judged and queued at once, and expanded by
the worker that reached it, unless the owner turns the claim down
(`Partition`); the nodes to expand are then evened out (`moves`).

A worker expands its nodes in one process's order (`Partition.order`, by
rank), and notes with each finding where one process meets it
(`Finding.key`): a node several workers reach keeps one process's parent, and
of equally short findings the coordinator reports the one one process
reports. The workers rank the next level's nodes between the answers and the
evening out: each sends the others how many nodes each of its nodes reached
first (`Partition.kids`).

What carries the messages is the caller's: `Share` puts them in the other
workers' inboxes and reads its own (queues between forked processes in
`statecore.check.parallel`, actor calls on a Ray cluster in
`statecore.check.ray_search`). They travel as ``(sender, kind, bytes)``, one
message of each kind (claims, answers, counts, nodes) per pair of workers
and level, in that order; one of a later kind from a worker ahead waits
until its turn.
"""

from __future__ import annotations

import contextlib
import time
import traceback
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

from ..properties import Property
from ..system import ActionLabel, System
from ..traces.judge import VIOLATED, PropertyResult
from ..traces.trace import Trace
from .fingerprints import ROOT, Fingerprinter, FingerprintStore
from .frontier import Level, NodeHint, Parts, expand_hinted, new_level
from .ownership import DEAD, PENDING, STEP_BITS, Partition, process_hash
from .results import Limits
from .symmetry_guard import Asymmetry
from .transfer import dumps, loads
from .values import NotInterchangeable

__all__ = ["Finding", "LevelReport", "OrbitMinimum", "Plan", "Share", "kept_shares", "moves"]

Node = tuple[Any, ...]
# The messages of a level's exchange, in order.
_CLAIMS, _ANSWERS, _KIDS, _COUNTS, _NODES = range(5)
_ACTION = (1 << STEP_BITS) - 1  # a discovery key's action number
_SLACK = 32  # nodes a worker may have to expand over an even share, left uneven
_MEMORY_EVERY = 1024  # nodes expanded between two looks at the resident memory


@dataclass(frozen=True)
class Plan:
    """What every worker of one search is told: the system and how to search it.

    `stable_routes`, where the workers are not forked from one process: own
    full states by their fingerprint, and pick each orbit's representative
    by `OrbitMinimum`, both the same in every process (forked workers own full
    states by their hash, which they share).
    """

    explorer_class: type
    system: System
    properties: tuple[Property, ...] | None
    symmetry: bool
    max_memory: int | None
    workers: int
    fingerprints: int
    stable_routes: bool = False


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


def moves(counts: Sequence[int]) -> list[tuple[int, int, int]]:
    """``(sender, receiver, nodes)``: the moves that share `counts` (nodes to expand, per
    worker) out evenly, in order; none where no worker has more than `_SLACK` nodes (or a
    64th of an even share) over its share."""
    total, n = sum(counts), len(counts)
    share = [total // n + (w < total % n) for w in range(n)]
    if max(c - s for c, s in zip(counts, share)) <= max(_SLACK, total // n // 64):
        return []
    give = [[w, c - s] for w, (c, s) in enumerate(zip(counts, share)) if c > s]
    take = [[w, s - c] for w, (c, s) in enumerate(zip(counts, share)) if c < s]
    plan: list[tuple[int, int, int]] = []
    while give and take:
        count = min(give[0][1], take[0][1])
        plan.append((give[0][0], take[0][0], count))
        give[0][1] -= count
        take[0][1] -= count
        if not give[0][1]:
            give.pop(0)
        if not take[0][1]:
            take.pop(0)
    return plan


def kept_shares(counts: Sequence[int], bound: int) -> list[int]:
    """How many of its `counts` new nodes each worker keeps, where together they reached more
    than the `bound` more the search may keep: `bound` in all, shared out in proportion (the
    rest, one each, to the first workers with nodes to spare)."""
    total = sum(counts)
    keep = [count * bound // total for count in counts]
    for worker, count in enumerate(counts):
        if sum(keep) == bound:
            break
        keep[worker] += keep[worker] < count
    return keep


@dataclass
class Finding:
    """A property settled, or a monitor refusal held back, on a worker: no trace yet."""

    prop: str
    verdict: str
    detail: str
    ref: int
    last: ActionLabel | None
    length: int  # the steps of its trace
    # Where one process meets it in its level: (the rank of the node expanded, the action
    # number of the step), the step's -1 for a finding on the node itself; (-1, its place)
    # for an initial node. Of equally short findings, one process reports the least.
    key: tuple[int, int] = (0, 0)


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
    stopped: str = ""  # the bound that stopped the level part-way (`Explorer.bound_hit`)
    store_bytes: int = 0
    error: tuple[str, str, int] | None = None  # (kind, message, reference)
    error_key: tuple[int, int] = (-1, -1)  # where it was met (as `Finding.key`)
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
            plan.system, plan.properties, plan.symmetry, Limits(max_memory=share)
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
        # No states kept (fingerprints): the levels are packed.
        packed = plan.fingerprints and self.explorer.por is None
        parts = Parts.of(plan.system, len(self.explorer.monitors)) if packed else None
        self.part = Partition(store, not plan.fingerprints)
        self.explorer.parts = parts
        self.explorer.parents = self.part
        self.findings: list[Finding] = []
        self.frontier: Level = []  # the nodes of the level to expand next
        # Their hints (`SuccessorCache.expand`, where the explorer keeps them): a node this worker
        # reached from its own parent walks again only for the actions the step changed; one sent
        # by another worker has none.
        self.hints: list[NodeHint | None] | None = None
        self.base = -1  # the depth of the level being expanded (-1: the initial nodes)
        self.current: Node | None = None  # the node being expanded
        # Findings on claimed nodes: each with its node's place in the level, and the result
        # the explorer settled it with, held back until the claim stands (`_settle`).
        self.pending: list[tuple[Finding, int, PropertyResult | None]] = []
        self.placed: list[tuple[Finding, int]] = []  # findings on its own new nodes, with places
        self.mail: dict[tuple[int, int], bytes] = {}  # messages of an exchange, come early
        self.settle = self.explorer._settle  # the explorer's own
        setattr(self.explorer, "_trace", self._note)  # noqa: B010
        setattr(self.explorer, "_settle", self._settle)  # noqa: B010

    def _note(
        self, node: Node, last: ActionLabel | None, prop: Property | None, verdict: str, detail: str
    ) -> Trace:
        """The explorer's `_trace` on a worker: note the finding, return an empty trace."""
        part = self.part
        ref = part.ref_of(node)
        depth = self.base + (node is not self.current)  # the node expanded, or a new one
        pid = "" if prop is None else prop.id
        if prop is not None:
            place = len(part.queued_fps) - 1
            if node is self.current:
                key = (part.parent_rank, -1)
            else:  # the node just queued
                found = part.queued_keys[place]
                key = (-1, found) if self.current is None else (found >> STEP_BITS, found & _ACTION)
            length = depth + (last is not None)
            finding = Finding(pid, verdict, detail, ref, last, length, key)
            self.findings.append(finding)
            if ref == PENDING:
                self.pending.append((finding, place, None))
            elif node is not self.current:
                self.placed.append((finding, place))
        return Trace(self.system.name, (), pid, verdict, detail)

    def _settle(self, result: PropertyResult) -> None:
        """The explorer's `_settle`, but where the finding just noted is on a claimed node: the
        property stays undecided here, judged on every node after it, until the claim stands
        (another worker may hold that node, and have settled the property on it already)."""
        pending = self.pending
        if pending and pending[-1][2] is None and pending[-1][0].prop == result.property.id:
            finding, place, _ = pending[-1]
            pending[-1] = (finding, place, result)
            return
        self.settle(result)

    def entry(self, ref: int) -> tuple[int, int, int]:
        """``(fingerprint, parent reference, action index)`` of this worker's node `ref`."""
        return self.part.store.entry(ref // self.part.workers)

    def level(
        self,
        command: str,
        quota: int | None,
        settled: dict[str, str],
        keep: int | None = None,
        seconds: float | None = None,
    ) -> LevelReport:
        """The initial nodes (``init``) or the next level: expand, exchange, judge; its report.

        `quota`: the new nodes this worker may add. `keep`: how many of the nodes this
        worker has to expand it keeps (`kept_shares`; None: all of them). `seconds`: how long
        the search may still run (None: no time bound)."""
        part, explorer = self.part, self.explorer
        if keep is not None:
            self._drop_after(keep)
        props = {p.id: p for p in explorer.props}
        for pid, verdict in settled.items():
            if pid not in explorer.results:
                self.settle(PropertyResult(props[pid], verdict, None, ""))
        part.quota, part.turned_away = quota, False
        if seconds is not None:  # (this machine's clock: the coordinator's may be another's)
            explorer.deadline = time.perf_counter() + seconds
        part.closed = quota == 0  # (every worker's: the depth bound, or the state bound met)
        report = LevelReport(self.me)
        deeper: Level = new_level(explorer.parts)
        walks = explorer.hinted  # (a received node has none; a packed one keeps none)
        kept: list[NodeHint | None] | None = [] if walks else None  # the hints of `deeper`
        live = -1  # the nodes of `deeper` to expand (-1: all of them)
        stage = "init"
        try:
            if command == "init":
                deeper = explorer._initial_nodes()
                kept = [None] * len(deeper) if walks else None
                part.rank_roots()
                self.placed = []  # (an initial node is never left dead)
            else:
                self.base += 1
                stage = "expand"
                try:
                    deeper_hints = self._expand(deeper, kept, report)
                except Exception:
                    with contextlib.suppress(Exception):  # the other workers wait for this one
                        self._trade_claims(deeper, None)
                    raise
                self.current = None
                stage = "exchange"
                live = self._trade_claims(deeper, deeper_hints)
        except Asymmetry as exc:
            report.error = ("asymmetry", exc.reason, 0)
        except NotInterchangeable as exc:
            report.error = ("values", exc.reason, 0)
        except Exception:
            node = self.current
            ref = ROOT if node is None else part.ref_of(node)
            report.error = (stage, traceback.format_exc(), ref)
        if report.error is not None:  # where one process would meet it: the least is its
            if self.current is not None:
                report.error_key = (part.parent_rank, 0)
            elif command == "init" and part.queued_keys:
                report.error_key = (-1, part.queued_keys[-1])
        self.frontier = deeper
        self.hints = kept  # those of its first nodes (its unpacked ones), in order
        part.next_level()
        report.states, report.new = len(part), len(deeper) if live < 0 else live
        report.transitions = explorer.transitions
        report.findings, self.findings = self.findings, []
        report.when_seen = set(explorer.when_seen)
        report.quiescent_seen = explorer.quiescent_seen
        report.turned_away = part.turned_away
        report.store_bytes = part.store.nbytes
        try:
            report.values = self.dumps(explorer.values.fresh())  # another's may equal them
        except Exception as exc:  # (pickle: a type defined in a function, say)
            report.error = ("pickle", f"{type(exc).__name__}: {exc}", ROOT)
        return report

    def _drop_after(self, keep: int) -> None:
        """Expand only the first `keep` live nodes of the frontier: together the workers stored
        more new nodes than the bound allows, and one process would have turned the others
        away. They stay stored, but are never expanded; what was found on them stands (each
        is a reachable state, its trace a real one)."""
        refs = self.part.frontier_refs
        for index, ref in enumerate(refs):
            if ref != DEAD:
                if keep <= 0:
                    refs[index] = DEAD
                keep -= 1

    def _expand(
        self, deeper: Level, kept: list[NodeHint | None] | None, report: LevelReport
    ) -> list[NodeHint | None] | None:
        """Expand the frontier's live nodes into `deeper` (their hints in `kept`); each monitor
        refusal met is noted with the reference of the node it was met at. The list of
        `deeper`'s hints to go on filling (`expand_hinted`)."""
        part, explorer, hints = self.part, self.explorer, self.hints
        deeper_hints = kept
        refusals = explorer.refusals
        noted = 0
        order = part.order()
        in_order = type(order) is range  # (then a packed frontier is read as it is stored)
        for count, (index, current) in enumerate(
            enumerate(self.frontier) if in_order else ((i, self.frontier[i]) for i in order)
        ):
            if part.frontier_refs[index] == DEAD:
                continue
            part.hold(current, index)
            self.current, explorer.at = current, index
            deeper_hints = expand_hinted(
                explorer._expand, current, index, deeper, hints, deeper_hints
            )
            if len(refusals) > noted:  # pid -> (prop, node, action, detail), the first met
                for pid, (_, _, action, detail) in list(refusals.items())[noted:]:
                    ref, length = part.ref_of(current), self.base + 1
                    key = (part.parent_rank, part.store.action_of(action))
                    self.findings.append(Finding(pid, VIOLATED, detail, ref, action, length, key))
                noted = len(refusals)
            if count % _MEMORY_EVERY == 0 and (hit := explorer.bound_hit()):
                report.stopped = hit
                break
        refusals.clear()
        explorer.at = -1
        return deeper_hints

    def _trade_claims(self, deeper: Level, deeper_hints: list[NodeHint | None] | None) -> int:
        """Send this level's claims to their owners, answer theirs, and take the answers: drop
        what was found on a node turned down, give the others their references. Then even
        out the nodes each worker has to expand (`moves`). The nodes of `deeper` to expand."""
        part = self.part
        others = [w for w in range(part.workers) if w != self.me]
        failure: Exception | None = None
        for owner in others:
            payload = part.claims_for(owner)
            if part.nodes is not None:  # full states: each claim's node goes with it
                try:
                    payload = self.dumps((payload, part.claimed_nodes[owner]))
                except Exception as exc:  # the owner waits for it all the same
                    failure, payload = exc, self.dumps((b"", []))
            self.inboxes[owner].put((self.me, _CLAIMS, payload))
        claims = self._gather(_CLAIMS)
        answers: dict[int, bytes] = {sender: b"" for sender in others}
        lost = 0  # this worker's own nodes another's claim reached first
        try:  # (each node new in this level goes to the least discovery key)
            got = {
                sender: (payload, None) if part.nodes is None else self.loads(payload)
                for sender, payload in claims.items()
            }
            answers, lost = part.answer(got)
        except Exception as exc:  # the senders wait for an answer all the same
            failure = failure or exc
        for sender in others:
            self.inboxes[sender].put((self.me, _ANSWERS, answers[sender]))
        answers = self._gather(_ANSWERS)
        live = len(deeper) - lost - sum(part.answered(owner, answers[owner]) for owner in others)
        self._drop_findings_on_dead()
        kids = part.kids()
        for other in others:
            self.inboxes[other].put((self.me, _KIDS, kids))
        part.rank([kids, *self._gather(_KIDS).values()])
        live = self._even_out(deeper, deeper_hints, live)
        if failure is not None:
            raise failure
        return live

    def _drop_findings_on_dead(self) -> None:
        """Drop what was found on a node left dead (a claim turned down, or this worker's own
        node that another's claim reached first: its holder found it too), and settle what
        was found on a claim that stands."""
        part, dropped = self.part, []
        for finding, place, result in self.pending:
            finding.ref = part.queued_refs[place]
            if finding.ref == DEAD:
                dropped.append(finding)
            elif result is not None and result.property.id not in self.explorer.results:
                self.settle(result)
        dropped += [finding for finding, place in self.placed if part.queued_refs[place] == DEAD]
        self.pending, self.placed = [], []
        if dropped:
            self.findings = [f for f in self.findings if all(f is not d for d in dropped)]

    def _even_out(
        self, deeper: Level, deeper_hints: list[NodeHint | None] | None, live: int
    ) -> int:
        """Send nodes of `deeper` to the workers with fewer to expand, or take theirs, as
        `moves` says (the last live ones go, with their fingerprints and references, but not
        their hints); the nodes of `deeper` to expand then."""
        part = self.part
        for other in range(part.workers):
            if other != self.me:
                self.inboxes[other].put((self.me, _COUNTS, live.to_bytes(8, "little")))
        counts = {w: int.from_bytes(c, "little") for w, c in self._gather(_COUNTS).items()}
        counts[self.me] = live
        plan = moves([counts[w] for w in range(part.workers)])
        if not plan:
            return live
        refs, place = part.queued_refs, len(deeper)
        failure: Exception | None = None
        for sender, receiver, count in plan:
            if sender == self.me:
                items: list[tuple[Node, int, int, int]] = []  # node, fingerprint, ref, rank
                while len(items) < count:
                    place -= 1
                    if refs[place] != DEAD:
                        fp, rank = part.queued_fps[place], part.queued_keys[place]
                        items.append((deeper[place], fp, refs[place], rank))
                        refs[place] = DEAD
                try:
                    payload = self.dumps(items)
                except Exception as exc:  # the receiver waits for it all the same
                    failure, payload = exc, self.dumps([])
                self.inboxes[receiver].put((self.me, _NODES, payload))
                live -= count
        for sender, receiver, _ in plan:  # (one message from each sender, in plan order)
            if receiver == self.me:
                for node, fp, ref, rank in self.loads(self._gather(_NODES, sender)[sender]):
                    deeper.append(node)
                    if deeper_hints is not None:
                        deeper_hints.append(None)
                    part.queued_fps.append(fp)
                    part.queued_refs.append(ref)
                    part.queued_keys.append(rank)
                    live += 1
        if failure is not None:
            raise failure
        return live

    def _gather(self, kind: int, sender: int | None = None) -> dict[int, bytes]:
        """The messages of `kind` from every other worker, or from `sender` alone (one of
        another kind, from a worker ahead, waits in `mail`)."""
        mail = self.mail
        want = {w for w in range(self.part.workers) if w != self.me}
        if sender is not None:
            want = {sender}
        while not all((w, kind) in mail for w in want):
            got, k, payload = self.inboxes[self.me].get()
            assert payload is not None
            mail[got, k] = payload
        return {w: mail.pop((w, kind)) for w in want}
