"""Exploration on every core: the frontier partitioned across processes.

Each of N worker processes keeps the visited set of the nodes it owns (by
fingerprint, or with full states by hash), and expands a share of each depth
level (`statecore.check.partition`, one worker's share). A node is expanded
by the worker that reached it: a successor another worker owns is *claimed*
from its owner (its fingerprint, parent and action; with full states the
node too, for the owner to tell it apart exactly) and stays where it was
reached, with what its parent's expansion learned; at each level's end the
workers send a few nodes to even out the next level's shares.

The search is level-synchronous: every worker expands depth d, exchanges
claims, and reports to the coordinating process before any
worker starts depth d + 1. So every node is reached by a shortest path and
the counts and verdicts are those of one process. So are the counterexamples:
each worker expands its share of a level in one process's order (by rank),
and a node several workers reach keeps the parent one process gives it, the
first in that order (`statecore.check.ownership`); of several equally short
counterexamples, the workers report the one one process meets first.

Each worker runs the one-process explorer's own code on its nodes (its
successors, quiescence, monitors and symmetry checks); only where a finding
is reported does it differ, noting the node's reference instead of building
a trace. The coordinator picks, per property, the shortest finding of the
level (as one process would) and rebuilds its trace from the parents the
workers keep, by replay. A worker's model error is replayed the same way,
so it reads as one process's error, trace included (of several met on one
level, the one one process meets first).

Where one process stops part-way through a level, the workers stop at its
end: with ``stop_on_violation`` they may report more violations than one
process (each with a shortest trace) and more states, but not a model error
met past the node where one process stopped (`_stopped_before`); where a level leaves
nothing deeper, the search is over, violation or not, as on one process.
Under ``max_states``
each worker may add all that is left of the bound; a level whose new states
pass it keeps as many as one process would keep, shared out in proportion
(`kept_shares`), and the others are never expanded. So the count, the depth
and whether the search was complete are one process's, but the states kept
on the last level are not the same ones (what was found on those dropped
stands: each is a reachable state, its trace real). On the level that
passes the bound the workers judge those states, and claims the bound turns
away, where one process judges neither: a model that tells its ids apart
only there is searched without symmetry on the workers (with its note),
with it on one process. A level with no room left at all (the state bound
met, or ``max_depth`` reached) is *closed*: every worker expands it, turns
away its own new successors and claims the others' only to learn whether
they are new, judging none of them, as one process turns them away
unjudged. A time bound (``max_seconds``) goes to the workers as the seconds
left at each level, and each stops part-way through it on its own clock, as
one process does on out of memory. Partial-order reduction does not run on
several workers yet (refused).

Workers are forked (they share the loaded system and the per-process hash
secret the symmetry canonicalizer relies on), so this needs the ``fork``
start method: Linux, or macOS where it is still offered. `ParallelSearch`
coordinates; how it reaches its workers (`_start`, `_ask_all`, `_ask`,
`_close`) is all a search on other workers (`statecore.check.ray_search`)
replaces.
"""

from __future__ import annotations

import gc
import multiprocessing
import signal
import time
from collections import Counter
from collections.abc import Callable, Sequence
from multiprocessing.connection import Connection
from typing import Any, NoReturn

from ..errors import DefinitionError
from ..properties import Property
from ..system import ActionLabel, System
from ..traces.judge import HOLDS, VIOLATED, PropertyResult
from ..traces.trace import Trace
from .fingerprints import ROOT, FingerprintStore, collision_note, replay_chain
from .ownership import STEP_BITS, partition_of, process_hash
from .partition import Finding, LevelReport, Plan, Share, kept_shares
from .results import (
    UNBOUNDED,
    ExplorationInterrupted,
    Limits,
    Progress,
    Report,
    bound_notes,
    complete_to,
)
from .symmetry_guard import Asymmetry
from .transfer import loads
from .values import NotInterchangeable

__all__ = ["ParallelSearch", "UnpicklableValue", "parallel_search", "partition_of"]

Node = tuple[Any, ...]
WITNESS = "witness"  # the verdict a `sometimes` witness's trace is worded with
_EXCHANGE = ("exchange", "pickle")  # a worker's failure to exchange, not the model's error


class UnpicklableValue(DefinitionError):
    """A value of the states cannot be pickled, as workers send values to each other."""


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


def _work(plan: Plan, me: int, conn: Connection, inboxes: Sequence[Any]) -> None:
    """A forked worker: answer the coordinator's commands until it says ``finish``."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # Ctrl-C is the coordinator's to handle
    gc.disable()
    share = Share(plan, me, inboxes)
    while True:
        command, *args = conn.recv()
        if command == "entry":
            conn.send(share.entry(args[0]))
        elif command == "finish":
            conn.send(share.explorer.taken)
            return
        else:
            conn.send(share.level(command, *args))


class ParallelSearch:
    """The search of `statecore.check.explore` on `workers` processes; `run` gives its report."""

    stable_routes = False  # forked workers own full states by their (shared) hash

    def __init__(
        self,
        explorer_class: type,
        workers: int,
        system: System,
        properties: tuple[Property, ...] | None,
        symmetry: bool,
        limits: Limits = UNBOUNDED,
    ) -> None:
        if len(system.labels()) >> STEP_BITS:  # (a discovery key holds an action's number)
            raise ValueError(
                f"system {system.name!r} has {len(system.labels()):,} actions with their "
                f"arguments; a search on several workers takes fewer than {1 << STEP_BITS:,}: "
                "search on one process"
            )
        self.workers = workers
        self.system = system
        self.max_states = limits.max_states
        self.max_depth = limits.max_depth
        self.max_seconds = limits.max_seconds
        self.stop_on_violation = limits.stop_on_violation
        self.progress = limits.progress
        self.fingerprints = fingerprints = limits.fingerprints
        # The coordinator's own explorer: it judges nothing, but words the
        # verdicts and rebuilds traces and errors exactly as one process does.
        self.judge: Any = explorer_class(system, properties, symmetry)
        self.symmetry = self.judge.symmetry
        self.plan = Plan(
            explorer_class,
            system,
            properties,
            self.symmetry,
            limits.max_memory,
            workers,
            fingerprints,
            self.stable_routes,
        )
        self.replayer = FingerprintStore(
            system, fingerprints or 64, self.judge._canon, self.judge.monitor_steps.step
        )
        if not fingerprints and not self.stable_routes:
            self.replayer.fingerprint = process_hash
        self.decode: Callable[[bytes], Any] = loads  # what workers send (`Share.dumps`)
        self.conns: list[Connection] = []
        self.procs: list[Any] = []
        self.states = 0
        self.expanded = self.cut = -1  # as `Explorer`'s: the deepest level expanded whole, and
        # the depth expanded when a bound first turned a successor away
        self.dropped = 0  # states the workers stored past the bound, and then dropped
        self.transitions = 0
        self.store_bytes = 0

    def run(self) -> Report:
        start = time.perf_counter()
        try:
            self._start()
            complete, stop = self._search(start)
            taken: Counter[Any] = Counter()
            for share in self._ask_all([("finish",)] * self.workers):
                taken.update(share)
            self.judge.taken = taken
            return self._report(complete, stop, time.perf_counter() - start)
        except KeyboardInterrupt:
            report = self._report(False, "interrupted", time.perf_counter() - start)
            raise ExplorationInterrupted(report) from None
        finally:
            self._close()

    # -- the workers, as forked processes ---------------------------------------------

    def _start(self) -> None:
        try:
            context = multiprocessing.get_context("fork")
        except ValueError:
            raise ValueError(
                "workers > 1 needs the fork start method, which this platform lacks; use workers=1"
            ) from None
        inboxes = [context.Queue() for _ in range(self.workers)]
        for me in range(self.workers):
            ours, theirs = context.Pipe()
            args = (self.plan, me, theirs, inboxes)
            proc = context.Process(target=_work, args=args, daemon=True)
            proc.start()
            self.conns.append(ours)
            self.procs.append(proc)

    def _ask_all(self, messages: list[tuple[Any, ...]]) -> list[Any]:
        """Send worker i `messages[i]`; their answers, in worker order."""
        for conn, message in zip(self.conns, messages):
            conn.send(message)
        return [self._receive(me) for me in range(self.workers)]

    def _ask(self, me: int, message: tuple[Any, ...]) -> Any:
        self.conns[me].send(message)
        return self._receive(me)

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

    def _close(self) -> None:
        for proc in self.procs:
            if proc.is_alive():
                proc.terminate()
            proc.join()

    # -- the search --------------------------------------------------------------------

    def _search(self, start: float) -> tuple[bool, str]:
        complete, depth, last_report, bound = True, 0, start, ""
        command = "init"
        keep: list[int | None] = [None] * self.workers  # each worker's nodes to expand: all
        while True:
            # Every worker may add all the states left under the bound (one process keeps
            # every initial state): each has what it reaches, whatever the others reach.
            # At the depth bound none: the level's new states are one step too deep.
            deepest = command != "init" and self.max_depth is not None and depth >= self.max_depth
            quota = 0 if deepest else self._quota(command)
            settled = {pid: r.verdict for pid, r in self.judge.results.items()}
            seconds = None
            if self.max_seconds is not None:  # what is left of it, for the workers' clocks
                seconds = self.max_seconds - (time.perf_counter() - start)
            reports: list[LevelReport] = self._ask_all(
                [(command, quota, settled, keep[me], seconds) for me in range(self.workers)]
            )
            self._merge(reports, command)
            new = sum(r.new for r in reports)
            keep = [None] * self.workers
            if quota is not None and new > quota:
                keep = list(kept_shares([r.new for r in reports], quota))
                self.states -= new - quota
                self.dropped += new - quota
                new = quota
            turned = new < sum(r.new for r in reports) or any(r.turned_away for r in reports)
            if turned and not bound:
                bound, self.cut = "max_depth" if deepest else "max_states", depth
            complete = complete and not turned
            stopped = next((r.stopped for r in reports if r.stopped), "")
            if stopped:
                if command != "init":
                    self.judge.depth = depth
                return False, stopped
            if command != "init":
                self.judge.depth, self.expanded = depth, depth
                depth += 1
            if not new:  # the search is over, as it is on one process, violation or not
                return complete, bound
            if self.stop_on_violation and self.judge.violated:
                return False, "violation"
            if self.progress is not None and time.perf_counter() - last_report > 0.5:
                last_report = time.perf_counter()
                sample = Progress(self.states, self.transitions, depth, new, last_report - start)
                self.progress(sample)
            command = "level"

    def _quota(self, command: str) -> int | None:
        """The new states each worker may add at the next level (None: any number)."""
        return None if self.max_states is None or command == "init" else self._left()

    def _left(self) -> int:
        """How many more states the bound lets the search keep."""
        assert self.max_states is not None
        return max(0, self.max_states - self.states)

    def _merge(self, reports: list[LevelReport], command: str) -> None:
        """Fold one level's reports in: counts, then each property's shortest finding."""
        judge = self.judge
        failed = [(r.error[0] not in _EXCHANGE, r.error_key, r.error) for r in reports if r.error]
        if failed:  # a failure to exchange first; else the error one process meets first
            model, where, error = min(failed, key=lambda f: f[:2])
            if not (model and self._stopped_before(reports, where[0])):
                self._raise(*error, command)
        for report in reports:  # one worker's value may be equal to another's, and differ
            try:
                values = self.decode(report.values)
            except Exception as exc:  # (pickled, but it cannot be read back)
                self._raise("pickle", f"{type(exc).__name__}: {exc}", ROOT, command)
            for made in values:
                judge.values.add(*made)
        self.states = sum(r.states for r in reports) - self.dropped
        self.transitions = judge.transitions = sum(r.transitions for r in reports)
        self.store_bytes = sum(r.store_bytes for r in reports)
        for report in reports:
            judge.when_seen |= report.when_seen
            judge.quiescent_seen = judge.quiescent_seen or report.quiescent_seen
        best: dict[str, Finding] = {}
        for report in reports:
            for finding in report.findings:
                held = best.get(finding.prop)
                if held is None or (finding.length, finding.key) < (held.length, held.key):
                    best[finding.prop] = finding
        props = {p.id: p for p in judge.props}
        for pid, finding in sorted(best.items()):
            if pid in judge.results:
                continue
            prop = props[pid]
            trace = self._trace(finding, prop)
            verdict = HOLDS if finding.verdict == WITNESS else finding.verdict
            judge._settle(PropertyResult(prop, verdict, trace, finding.detail))

    def _stopped_before(self, reports: list[LevelReport], rank: int) -> bool:
        """Whether one process, stopping at a violation, stops before it expands the node of
        `rank` in the level expanded: it stops once it has expanded a node where it met one."""
        if not self.stop_on_violation or rank < 0:  # (it judges every initial node)
            return False
        met = [f.key[0] for r in reports for f in r.findings if f.verdict == VIOLATED]
        return any(0 <= at < rank for at in met)

    def _trace(self, finding: Finding, prop: Property) -> Trace:
        """The trace of a worker's `finding`, as one process words it."""
        node, last = self._replay(finding.ref, finding.last)
        trace: Trace = self.judge._trace(node, last, prop, finding.verdict, finding.detail)
        return trace

    def _path(self, ref: int) -> tuple[int, list[int]]:
        """The fingerprint of the initial node that reference `ref` is reached from, the actions."""
        actions: list[int] = []
        while True:
            fp, parent, action = self._ask(ref % self.workers, ("entry", ref))
            if parent == ROOT:
                break
            actions.append(action)
            ref = parent
        actions.reverse()
        return fp, actions

    def _replay(self, ref: int, last: ActionLabel | None = None) -> tuple[Node, ActionLabel | None]:
        """The node of reference `ref` (and `last` from it), the judge's parents the path to it."""
        chain, node = replay_chain(self.replayer, *self._path(ref), len(self.judge.monitors))
        self.judge.parents = chain
        return node, last

    def _raise(self, kind: str, message: str, ref: int, command: str) -> NoReturn:
        """Raise, in this process, the error a worker met (as one process would word it)."""
        if kind == "asymmetry":
            raise Asymmetry(message)
        if kind == "values":
            raise NotInterchangeable(message)
        if kind == "exchange":
            last = message.strip().splitlines()[-1]  # the exception, without the traceback
            raise RuntimeError(f"a worker failed to exchange states or claims: {last}")
        if kind == "pickle":
            raise UnpicklableValue(
                f"explore: a value in the states of {self.system.name!r} cannot go from one "
                f"worker to another ({message}); make it a value pickle writes and reads "
                "back (its type defined at a module's top level, say), or search on one worker"
            )
        judge = self.judge
        if kind == "init" or ref == ROOT:
            judge._initial_nodes()  # raises the same error, worded with its trace
        else:
            node, _ = self._replay(ref)
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
        complete_depth = complete_to(self.expanded, self.cut)
        if self.fingerprints:
            stored = self.states + self.dropped  # (each may collide with another)
            note = collision_note(self.fingerprints, stored, self.store_bytes)
            if self.dropped:
                note += (
                    f"; the workers stored {self.dropped:,} of those past the state bound, "
                    "and expanded none of them"
                )
            notes = (note,)
        notes = (*notes, *bound_notes("" if complete else stop, complete_depth))
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
            complete_depth=complete_depth,
        )
