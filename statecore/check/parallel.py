"""Exploration on every core: the frontier partitioned by fingerprint across processes.

Each of N worker processes owns the nodes whose fingerprint falls in its
partition: it keeps their visited set (`Partition`), expands them, and sends
every successor it does not own to the owner, which deduplicates it and
judges it. The search is level-synchronous: every worker expands depth d,
exchanges successors, and reports to the coordinating process before any
worker starts depth d + 1. So every node is reached by a shortest path and
the counts, verdicts and counterexample lengths are those of one process.

Each worker runs the one-process explorer's own code on its nodes (its
successors, quiescence, monitors and symmetry checks); only where a finding
is reported does it differ, noting the node's reference instead of building
a trace. The coordinator picks, per property, the shortest finding of the
level (as one process would) and rebuilds its trace from the parents the
workers keep, by replay. A worker's model error is replayed the same way,
so it reads as one process's error, trace included.

Where one process stops part-way through a level, the workers stop at its
end: with ``stop_on_violation`` they may report more violations than one
process (each with a shortest trace) and more states; ``max_states`` is
shared out among them level by level, so the states kept under the bound
are not the same ones; of several equally short counterexamples they may
report another one. Partial-order reduction does not run on several
workers yet (refused).

Workers are forked (they share the loaded system and the per-process hash
secret the symmetry canonicalizer relies on), so this needs the ``fork``
start method: Linux, or macOS where it is still offered.
"""

from __future__ import annotations

import contextlib
import gc
import multiprocessing
import pickle
import signal
import time
import traceback
from collections import Counter
from collections.abc import Callable, Hashable, Sequence
from dataclasses import dataclass, field
from multiprocessing.connection import Connection
from typing import Any

from ..properties import Property
from ..system import ActionLabel, System
from ..traces.judge import HOLDS, VIOLATED, PropertyResult
from ..traces.trace import Trace
from .fingerprints import ROOT, FingerprintStore, collision_note, replay_chain
from .results import ExplorationInterrupted, Progress, Report
from .symmetry_guard import Asymmetry
from .transfer import dumps

__all__ = ["ParallelSearch", "parallel_search", "partition_of"]

Node = tuple[Any, ...]
_BATCH = 20_000  # successors sent to another worker in one message at most
WITNESS = "witness"  # the verdict a `sometimes` witness's trace is worded with
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


def parallel_search(
    explorer: type, workers: int, por: bool = False
) -> Callable[..., ParallelSearch]:
    """A factory with the explorer's constructor signature, searching on `workers` processes."""
    if workers < 1:
        raise ValueError(f"workers must be 1 or more, got {workers}")
    if por:
        raise ValueError(
            "partial-order reduction does not run on several workers yet: "
            "drop por (--por) or use one worker"
        )

    def make(*args: Any) -> ParallelSearch:
        return ParallelSearch(explorer, workers, *args)

    return make


# -- one worker's share of the visited set ---------------------------------------------


class Partition:
    """A worker's visited set, answering the explorer's ``parents`` questions.

    A successor this worker owns is added at once; one it does not is queued
    for its owner (once per level) and reported as already seen, so the
    explorer neither queues nor judges it. `exact` keeps the nodes too (a
    dict beside the fingerprints), for results that do not depend on hashes.
    """

    def __init__(self, store: FingerprintStore, exact: bool) -> None:
        self.store = store
        self.me = store.partition
        self.workers = store.partitions
        self.nodes: dict[Node, int] | None = {} if exact else None
        self.outbox: list[list[tuple[Node, int, int, int]]] = [[] for _ in range(self.workers)]
        self.sent: set[int] = set()
        self.quota: int | None = None  # new nodes this level may still add
        self.turned_away = False
        self.boundary = 0  # the index of this level's first new node
        self._parent: object = None
        self._parent_ref = ROOT

    def __len__(self) -> int:
        return len(self.store)

    def __contains__(self, node: Node) -> bool:
        fp = self.store.fingerprint(node)
        if partition_of(fp, self.workers) != self.me:
            return True  # another worker's: not this one's to add
        return self.index(node, fp) >= 0

    def __setitem__(self, node: Node, entry: tuple[Node, ActionLabel] | None) -> None:
        self.setdefault(node, entry)

    def setdefault(
        self, node: Node, entry: tuple[Node, ActionLabel] | None
    ) -> tuple[Node, ActionLabel] | None:
        fp = self.store.fingerprint(node)
        parent, action = ROOT, 0
        if entry is not None:
            parent, action = self.ref_of(entry[0]), self.store.action_of(entry[1])
        owner = partition_of(fp, self.workers)
        if owner != self.me:
            if fp not in self.sent:
                self.sent.add(fp)
                self.outbox[owner].append((node, fp, parent, action))
            return None
        return entry if self.insert(node, fp, parent, action) else None

    def index(self, node: Node, fp: int) -> int:
        if self.nodes is not None:
            return self.nodes.get(node, -1)
        return self.store.find(fp)

    def insert(self, node: Node, fp: int, parent: int, action: int) -> bool:
        """Add `node` if new and the quota allows; whether it was added."""
        if self.index(node, fp) >= 0:
            return False
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
        if node is not self._parent:
            index = self.index(node, self.store.fingerprint(node))  # type: ignore[arg-type]
            assert index >= 0, "a parent is visited before its successors"
            self._parent_ref = index * self.workers + self.me
            self._parent = node
        return self._parent_ref


@dataclass
class _Finding:
    """A property settled, or a monitor refusal held back, on a worker: no trace yet."""

    prop: str
    verdict: str
    detail: str
    ref: int
    last: ActionLabel | None
    length: int  # the steps of its trace


@dataclass
class _LevelReport:
    worker: int
    states: int = 0
    new: int = 0
    transitions: int = 0
    findings: list[_Finding] = field(default_factory=list)
    when_seen: set[str] = field(default_factory=set)
    quiescent_seen: bool = False
    turned_away: bool = False
    out_of_memory: bool = False
    store_bytes: int = 0
    error: tuple[str, str, int] | None = None  # (kind, message, reference)


class _Worker:
    """One process's side of the search: expand its nodes, exchange, report."""

    def __init__(
        self, search: ParallelSearch, me: int, conn: Connection, inboxes: Sequence[Any]
    ) -> None:
        self.search = search
        self.me = me
        self.conn = conn
        self.inboxes = inboxes
        share = None if search.max_memory is None else search.max_memory // search.workers
        self.explorer: Any = search.explorer_class(
            search.system, search.properties, search.symmetry, None, share, False, None
        )
        bits = search.fingerprints or 64
        store = FingerprintStore(
            search.system,
            bits,
            self.explorer._canon,
            self.explorer._step_monitors,
            partition=me,
            partitions=search.workers,
        )
        if not search.fingerprints:
            store.fingerprint = process_hash
        self.part = Partition(store, exact=not search.fingerprints)
        self.explorer.parents = self.part
        self.findings: list[_Finding] = []
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
                _Finding(pid, verdict, detail, ref, last, depth + (last is not None))
            )
        return Trace(self.search.system.name, (), pid, verdict, detail)

    def serve(self) -> None:
        level: list[Node] = []
        while True:
            command, *args = self.conn.recv()
            if command == "entry":
                self.conn.send(self.part.store.entry(args[0] // self.part.workers))
            elif command == "finish":
                self.conn.send(self.explorer.taken)
                return
            else:
                level = self._level(command, level, *args)

    def _level(
        self, command: str, level: list[Node], quota: int | None, settled: Any
    ) -> list[Node]:
        part, explorer = self.part, self.explorer
        props = {p.id: p for p in explorer.props}
        for pid, verdict in settled.items():
            if pid not in explorer.results:
                explorer._settle(PropertyResult(props[pid], verdict, None, ""))
        part.quota, part.turned_away, part.boundary = quota, False, len(part)
        report = _LevelReport(self.me)
        deeper: list[Node] = []
        current: Node | None = None
        stage = "init"
        try:
            if command == "init":
                deeper = explorer._initial_nodes()
            else:
                self.base += 1
                stage = "expand"
                try:
                    for index, current in enumerate(level):
                        explorer._expand(current, deeper)
                        if index % _MEMORY_EVERY == 0 and explorer._out_of_memory():
                            report.out_of_memory = True
                            break
                except Exception:
                    with contextlib.suppress(Exception):
                        self._exchange()  # the other workers wait for this one's successors
                    raise
                stage = "exchange"
                received = self._exchange()
                stage = "state"
                for current in received:
                    if part.insert(*current):
                        deeper.append(current[0])
                        if explorer.state_props:
                            explorer._check_state(current[0])
                current = None
                for pid, (_, node, action, detail) in explorer.refusals.items():
                    ref, length = part.ref_of(node), self.base + 1
                    self.findings.append(_Finding(pid, VIOLATED, detail, ref, action, length))
                explorer.refusals.clear()
        except Asymmetry as exc:
            report.error = ("asymmetry", exc.reason, 0)
        except Exception:
            node = current[0] if isinstance(current, tuple) and stage == "state" else current
            ref = ROOT if node is None else part.ref_of(node)
            report.error = (stage, traceback.format_exc(), ref)
        report.states, report.new = len(part), len(deeper)
        report.transitions = explorer.transitions
        report.findings, self.findings = self.findings, []
        report.when_seen = set(explorer.when_seen)
        report.quiescent_seen = explorer.quiescent_seen
        report.turned_away = part.turned_away
        report.store_bytes = part.store.nbytes
        self.conn.send(report)
        return deeper

    def _exchange(self) -> list[tuple[Node, int, int, int]]:
        """Send every queued successor to its owner; the ones sent here, in worker order."""
        part = self.part
        failure: Exception | None = None
        for owner, items in enumerate(part.outbox):
            if owner != self.me:
                try:
                    for start in range(0, len(items), _BATCH):
                        self.inboxes[owner].put((self.me, dumps(items[start : start + _BATCH])))
                except Exception as exc:
                    failure = exc
                self.inboxes[owner].put((self.me, b""))  # the end of this level, always
        part.outbox = [[] for _ in range(part.workers)]
        part.sent = set()
        received: dict[int, list[bytes]] = {w: [] for w in range(part.workers)}
        ended = 0
        while ended < part.workers - 1:
            sender, payload = self.inboxes[self.me].get()
            if payload:
                received[sender].append(payload)
            else:
                ended += 1
        if failure is not None:
            raise failure
        return [
            item for w in sorted(received) for data in received[w] for item in pickle.loads(data)
        ]


def _work(search: ParallelSearch, me: int, conn: Connection, inboxes: Sequence[Any]) -> None:
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # Ctrl-C is the coordinator's to handle
    gc.disable()
    _Worker(search, me, conn, inboxes).serve()


# -- the coordinator -------------------------------------------------------------------


class ParallelSearch:
    """The search of `statecore.check.explore` on `workers` processes; `run` gives its report."""

    def __init__(
        self,
        explorer_class: type,
        workers: int,
        system: System,
        properties: tuple[Property, ...] | None,
        symmetry: bool,
        max_states: int | None,
        max_memory: int | None,
        stop_on_violation: bool,
        progress: Callable[[Progress], None] | None,
        fingerprints: int = 0,
    ) -> None:
        self.explorer_class = explorer_class
        self.workers = workers
        self.system = system
        self.properties = properties
        self.max_states = max_states
        self.max_memory = max_memory
        self.stop_on_violation = stop_on_violation
        self.progress = progress
        self.fingerprints = fingerprints
        # The coordinator's own explorer: it judges nothing, but words the
        # verdicts and rebuilds traces and errors exactly as one process does.
        self.judge: Any = explorer_class(system, properties, symmetry, None, None, False, None)
        self.symmetry = self.judge.symmetry
        self.replayer = FingerprintStore(
            system, fingerprints or 64, self.judge._canon, self.judge._step_monitors
        )
        if not fingerprints:
            self.replayer.fingerprint = process_hash
        self.conns: list[Connection] = []
        self.procs: list[Any] = []
        self.states = 0
        self.transitions = 0
        self.store_bytes = 0

    def run(self) -> Report:
        try:
            context = multiprocessing.get_context("fork")
        except ValueError:
            raise ValueError(
                "workers > 1 needs the fork start method, which this platform lacks; use workers=1"
            ) from None
        start = time.perf_counter()
        inboxes = [context.Queue() for _ in range(self.workers)]
        for me in range(self.workers):
            ours, theirs = context.Pipe()
            proc = context.Process(target=_work, args=(self, me, theirs, inboxes), daemon=True)
            proc.start()
            self.conns.append(ours)
            self.procs.append(proc)
        try:
            complete, stop = self._search(start)
            taken: Counter[Any] = Counter()
            for conn in self.conns:
                conn.send(("finish",))
            for me in range(self.workers):
                taken.update(self._receive(me))
            self.judge.taken = taken
            return self._report(complete, stop, time.perf_counter() - start)
        except KeyboardInterrupt:
            report = self._report(False, "interrupted", time.perf_counter() - start)
            raise ExplorationInterrupted(report) from None
        finally:
            for proc in self.procs:
                if proc.is_alive():
                    proc.terminate()
                proc.join()

    def _search(self, start: float) -> tuple[bool, str]:
        complete, depth, last_report = True, 0, start
        command = "init"
        while True:
            quota = self._quotas()
            settled = {pid: r.verdict for pid, r in self.judge.results.items()}
            for me, conn in enumerate(self.conns):
                conn.send((command, None if quota is None else quota[me], settled))
            reports: list[_LevelReport] = [self._receive(me) for me in range(self.workers)]
            self._merge(reports, command)
            complete = complete and not any(r.turned_away for r in reports)
            new = sum(r.new for r in reports)
            if command != "init":
                self.judge.depth = depth
                depth += 1
            if any(r.out_of_memory for r in reports):
                return False, "max_memory"
            if self.stop_on_violation and self.judge.violated:
                return False, "violation"
            if self.progress is not None and time.perf_counter() - last_report > 0.5:
                last_report = time.perf_counter()
                sample = Progress(self.states, self.transitions, depth, new, last_report - start)
                self.progress(sample)
            if not new:
                return complete, "" if complete else "max_states"
            command = "level"

    def _receive(self, me: int) -> Any:
        """Worker `me`'s answer; a worker that died (killed for its memory, say) is an error."""
        conn = self.conns[me]
        while not conn.poll(1.0):
            if not self.procs[me].is_alive():
                code = self.procs[me].exitcode
                raise RuntimeError(
                    f"explore: worker {me} of {self.workers} died (exit code {code}); "
                    "if the system killed it for its memory, use fewer workers or --fingerprints"
                )
        return conn.recv()

    def _quotas(self) -> list[int] | None:
        if self.max_states is None:
            return None
        left = max(0, self.max_states - self.states)
        return [left // self.workers + (me < left % self.workers) for me in range(self.workers)]

    def _merge(self, reports: list[_LevelReport], command: str) -> None:
        """Fold one level's reports in: counts, then each property's shortest finding."""
        judge = self.judge
        for report in reports:
            if report.error is not None:
                self._raise(*report.error, command)
        self.states = sum(r.states for r in reports)
        self.transitions = judge.transitions = sum(r.transitions for r in reports)
        self.store_bytes = sum(r.store_bytes for r in reports)
        for report in reports:
            judge.when_seen |= report.when_seen
            judge.quiescent_seen = judge.quiescent_seen or report.quiescent_seen
        best: dict[str, _Finding] = {}
        for report in reports:
            for finding in report.findings:
                held = best.get(finding.prop)
                if held is None or finding.length < held.length:
                    best[finding.prop] = finding
        props = {p.id: p for p in judge.props}
        for pid, finding in sorted(best.items()):
            if pid in judge.results:
                continue
            prop = props[pid]
            node = self._replay(finding.ref)
            trace = judge._trace(node, finding.last, prop, finding.verdict, finding.detail)
            verdict = HOLDS if finding.verdict == WITNESS else finding.verdict
            judge._settle(PropertyResult(prop, verdict, trace, finding.detail))

    def _replay(self, ref: int) -> Node:
        """The node of reference `ref`, with the judge's parents set to the path to it."""
        actions: list[int] = []
        while True:
            conn = self.conns[ref % self.workers]
            conn.send(("entry", ref))
            fp, parent, action = self._receive(ref % self.workers)
            if parent == ROOT:
                break
            actions.append(action)
            ref = parent
        actions.reverse()
        chain, node = replay_chain(self.replayer, fp, actions, len(self.judge.monitors))
        self.judge.parents = chain
        return node

    def _raise(self, kind: str, message: str, ref: int, command: str) -> None:
        """Raise, in this process, the error a worker met (as one process would word it)."""
        if kind == "asymmetry":
            raise Asymmetry(message)
        if kind == "exchange":
            raise RuntimeError(f"a worker failed to exchange successors: {message}")
        judge = self.judge
        if kind == "init" or ref == ROOT:
            judge._initial_nodes()  # raises the same error, worded with its trace
        else:
            node = self._replay(ref)
            if kind == "expand":
                judge._expand(node, [])
            else:
                judge.state_props = [p for p in judge.props if p.kind in ("always", "sometimes")]
                judge._check_state(node)
        raise RuntimeError(
            f"explore: a worker of the search of {self.system.name!r} failed where one process "
            f"does not; please report it, with its traceback:\n{message}"
        )

    def _report(self, complete: bool, stop: str, seconds: float) -> Report:
        judge = self.judge
        judge.stop = stop
        results = tuple(judge._verdict(prop, complete) for prop in judge.props)
        notes: tuple[str, ...] = ()
        if self.fingerprints:
            notes = (collision_note(self.fingerprints, self.states, self.store_bytes),)
        return Report(
            self.system,
            results,
            self.states,
            self.transitions,
            judge.depth,
            seconds,
            complete,
            self.symmetry,
            judge._coverage(),
            stop,
            notes=notes,
        )
