"""The partitioned search on a Ray cluster: one actor per partition, on any machine.

It is `statecore.check.parallel`'s search with Ray actors for worker
processes: each actor owns the nodes whose fingerprint falls in its
partition (`statecore.check.partition`) and expands its share of each depth
level. It claims the successors another actor owns and keeps them (with
full states, the claims carry the states). Claims go straight to the other
actors, as actor calls (`_Actor.deliver`;
Ray moves large messages through its object store, between machines too). The coordinator, in the
calling process, only sends each level's command and merges the reports, so
the counts, verdicts and counterexample lengths are those of one process.

The actors are not forked from the caller, so:

* each builds the system itself from `build` (a function Ray can pickle and
  every node can import: a bundled target's ``load``, say), and nodes travel
  as `statecore.check.transfer.Codec` pickles them;
* full states are owned by their fingerprint, which is the same in every
  process (a fingerprint search owns them by it anyway); so a state must have a
  canonical encoding (`statecore.check.fingerprints`) even without
  ``fingerprints``;
* ``hash`` differs between them, so under symmetry reduction the actors
  pick each orbit's representative by its encoding
  (`statecore.check.partition.OrbitMinimum`), and an actor turns a finding's
  path of representatives into the concrete path it stands for
  (`_Actor.concrete`), which the caller replays without symmetry.

Actors are kept for the next search of the same process (a Ray worker takes
a second or so to start), and killed after a failure or Ctrl-C. Ray is
imported only here, and only when a search runs: ``pip install
'statecore[ray]'``.
"""

from __future__ import annotations

import gc
import importlib
import queue
from collections import Counter
from collections.abc import Callable
from dataclasses import replace
from typing import Any

from ..errors import StatecoreError
from ..properties import EMPTY_MONITOR, Property
from ..system import ActionLabel, System
from ..traces.judge import VIOLATED, judge_path
from ..traces.trace import Trace
from .counterexample import rebuild
from .explorer import Explorer
from .fingerprints import FingerprintStore, replay_chain
from .parallel import ParallelSearch
from .partition import Finding, LevelReport, Plan, Share
from .plain import note as note_of
from .plain import without_memos
from .results import Limits, Progress, Report, noted
from .symmetry_guard import Asymmetry
from .transfer import Codec
from .values import NotInterchangeable

__all__ = ["INSTALL_HINT", "RayError", "RaySearch", "ray_explore"]

INSTALL_HINT = "pip install 'statecore[ray]'"

Node = tuple[Any, ...]


class RayError(StatecoreError):
    """Ray is not installed, or the cluster cannot be reached."""


def ray_explore(
    build: Callable[[], System],
    *,
    system: System | None = None,
    address: str | None = None,
    workers: int | None = None,
    max_states: int | None = None,
    max_memory: int | None = None,
    symmetry: bool = True,
    stop_on_violation: bool = True,
    properties: tuple[Property, ...] | None = None,
    progress: Callable[[Progress], None] | None = None,
    fingerprints: int = 0,
    max_depth: int | None = None,
    max_seconds: float | None = None,
) -> Report:
    """`statecore.check.explore.explore` on `workers` Ray actors (default: one per CPU).

    `build` makes the system, here (unless `system` is given) and on every
    actor; `address` is the cluster's (``auto``, ``HOST:6379``), where Ray is
    not yet initialized in this process; none starts a local one, or joins
    the one ``ray start --head`` started here. `properties` must be among
    the system's own (the actors find theirs by id).
    """
    ray = _ray()
    if system is None:
        system = build()
    ids = None if properties is None else tuple(p.id for p in properties)
    unknown = set(ids or ()) - {p.id for p in system.properties}
    if unknown:
        raise ValueError(
            f"properties {sorted(unknown)} are not among system {system.name!r}'s: on Ray, "
            "each actor finds the properties by id in the system it builds"
        )
    _connect(ray, address)
    cpus = int(ray.cluster_resources().get("CPU", 0))
    if workers is None:
        workers = max(1, cpus)
    if workers < 1:
        raise ValueError(f"workers must be 1 or more, got {workers}")
    if workers > cpus:  # an actor holds a CPU: the ones beyond would wait for ever
        raise RayError(
            f"Ray: {workers} workers, but the cluster has {cpus} CPUs and each worker holds "
            f"one; use at most {cpus} workers, or add machines to the cluster"
        )
    limits = Limits(
        max_states, max_memory, stop_on_violation, progress, fingerprints, max_depth, max_seconds
    ).checked()

    def search(symmetric: bool) -> Report:
        pool = _pool(ray, workers)
        return RaySearch(pool, build, ids, system, properties, symmetric, limits).run()

    try:
        try:
            return search(symmetry)
        except Asymmetry as exc:
            note = f"symmetry reduction off: {exc.reason}; every state was explored without it"
        return noted(lambda: search(False), note)
    except NotInterchangeable as exc:  # the memos' premise fails: searched here, without them
        plain = without_memos(Explorer(system, properties, False, limits))
        return noted(plain.run, note_of(exc.reason))


def _ray() -> Any:
    try:
        ray = importlib.import_module("ray")  # by name: no stubs where Ray is not installed
    except ImportError:
        raise RayError(
            f"the Ray backend needs Ray, which is not installed; install it: {INSTALL_HINT}"
        ) from None
    return ray


def _connect(ray: Any, address: str | None) -> None:
    if ray.is_initialized():
        return
    try:
        ray.init(address=address, include_dashboard=False, logging_level="warning")
    except (ConnectionError, RuntimeError, ValueError) as exc:
        where = f"at {address!r}" if address else "on this machine"
        raise RayError(
            f"Ray: cannot connect to a cluster {where} ({str(exc).splitlines()[0]}); start one "
            "with 'ray start --head', or give its address (HOST:6379, or auto)"
        ) from None


# -- the actors ---------------------------------------------------------------------

_POOLS: dict[tuple[str, int], list[Any]] = {}  # kept actors: (Ray job, workers) -> them


def _pool(ray: Any, workers: int) -> list[Any]:
    """`workers` actors of this Ray job, kept from the last search when there was one."""
    key = (ray.get_runtime_context().get_job_id(), workers)
    if key not in _POOLS:
        for other in list(_POOLS):
            _drop(ray, other, idle=True)
        actor = ray.remote(_Actor).options(
            num_cpus=1,
            max_concurrency=2,  # deliveries from the other actors while a level runs
            scheduling_strategy="SPREAD",
        )
        _POOLS[key] = [actor.remote() for _ in range(workers)]
    return _POOLS[key]


def _drop(ray: Any, key: tuple[str, int], idle: bool = False) -> None:
    """End the actors of `key`: idle ones when they are done, busy ones at once."""
    for actor in _POOLS.pop(key, []):
        if idle:
            actor.__ray_terminate__.remote()
        else:
            ray.kill(actor)


class _Peer:
    """Another actor's inbox, as `statecore.check.partition.Share` puts messages in one."""

    def __init__(self, actor: Any) -> None:
        self.actor = actor

    def put(self, message: tuple[int, int, bytes | None]) -> None:
        self.actor.deliver.remote(message)

    def get(self) -> tuple[int, int, bytes | None]:
        raise AssertionError("a worker reads only its own inbox")


class _Actor:
    """A Ray actor: one worker's share of the search, set up anew for each search."""

    def __init__(self) -> None:
        self.inbox: queue.Queue[tuple[int, int, bytes | None]] = queue.Queue()
        self.share: Share | None = None

    def setup(
        self,
        me: int,
        peers: list[Any],
        build: Callable[[], System],
        ids: tuple[str, ...] | None,
        options: tuple[bool, int | None, int],
    ) -> tuple[str, int]:
        """Build the system and this worker's share; the system's name and action count."""
        self.share = None
        gc.collect()
        gc.disable()  # the visited set only grows: the cyclic collector finds nothing there
        system = build()
        properties = None
        if ids is not None:
            properties = tuple(p for p in system.properties if p.id in ids)
        symmetry, max_memory, fingerprints = options
        plan = Plan(
            Explorer, system, properties, symmetry, max_memory, len(peers), fingerprints, True
        )
        inboxes: list[Any] = [_Peer(actor) for actor in peers]
        inboxes[me] = self.inbox
        codec = Codec(system)
        self.share = Share(plan, me, inboxes, (codec.dumps, codec.loads))
        return system.name, len(system.labels())

    def deliver(self, message: tuple[int, int, bytes | None]) -> None:
        self.inbox.put(message)

    def level(
        self,
        command: str,
        quota: int | None,
        settled: dict[str, str],
        keep: int | None,
        seconds: float | None,
    ) -> LevelReport:
        assert self.share is not None
        return self.share.level(command, quota, settled, keep, seconds)

    def entry(self, ref: int) -> tuple[int, int, int]:
        assert self.share is not None
        return self.share.entry(ref)

    def finish(self) -> Counter[Any]:
        assert self.share is not None
        taken: Counter[Any] = self.share.explorer.taken
        return taken

    def concrete(
        self, fp: int, actions: list[int], last: ActionLabel | None
    ) -> tuple[int, list[int]]:
        """The concrete path the representatives' path from `fp` along `actions` stands for.

        The fingerprint of its initial node (no renaming) and its actions'
        indices, `last` (renamed to fit) included.
        """
        assert self.share is not None
        explorer, store = self.share.explorer, self.share.part.store
        chain, node = replay_chain(store, fp, actions, len(explorer.monitors))
        steps = rebuild(
            explorer.system,
            chain,
            node,
            last,
            explorer._canon,
            explorer.group,
            explorer.monitor_steps.step,
        )
        root = store.fingerprint((steps[0].state, *(EMPTY_MONITOR for _ in explorer.monitors)))
        return root, [store.action_of(step.action) for step in steps[1:] if step.action is not None]


def _cause(exc: Exception) -> str:
    """What failed on an actor, in one line: the exception it raised, else Ray's own."""
    cause = getattr(exc, "cause", None) or exc
    text = str(cause).strip().splitlines()
    return f"{type(cause).__name__}: {text[-1] if text else ''}"


# -- the coordinator ------------------------------------------------------------------


class RaySearch(ParallelSearch):
    """`ParallelSearch` whose workers are the Ray actors `pool`; `run` gives its report."""

    stable_routes = True

    def __init__(
        self,
        pool: list[Any],
        build: Callable[[], System],
        ids: tuple[str, ...] | None,
        system: System,
        properties: tuple[Property, ...] | None,
        symmetry: bool,
        limits: Limits,
    ) -> None:
        super().__init__(Explorer, len(pool), system, properties, symmetry, limits)
        self.ray = _ray()
        self.pool = pool
        self.build = build
        self.ids = ids
        self.clean = False  # whether the actors finished the search and can serve another
        # The actors' representatives are not this process's: its judge replays
        # the concrete paths they stand for (`_replay`), without symmetry.
        self.judge = Explorer(system, properties, False)
        self.decode = Codec(system).loads
        self.replayer = FingerprintStore(
            system, self.fingerprints or 64, self.judge._canon, self.judge.monitor_steps.step
        )

    def _start(self) -> None:
        options = (self.plan.symmetry, self.plan.max_memory, self.fingerprints)
        calls = [
            actor.setup.remote(me, self.pool, self.build, self.ids, options)
            for me, actor in enumerate(self.pool)
        ]
        try:
            built = self.ray.get(calls)
        except self.ray.exceptions.RayTaskError as exc:
            raise RayError(
                f"Ray: the actors could not build system {self.system.name!r}: {_cause(exc)}; "
                "every node must be able to import the target (install it there, or give "
                "ray.init a runtime_env)"
            ) from None
        expected = (self.system.name, len(self.system.labels()))
        for name, labels in built:
            if (name, labels) != expected:
                raise RayError(
                    f"Ray: the actors built system {name!r} with {labels} actions, not "
                    f"{expected[0]!r} with {expected[1]}: build must make the same system "
                    "in every process"
                )

    def _ask_all(self, messages: list[tuple[Any, ...]]) -> list[Any]:
        answers = self._get([self._call(me, message) for me, message in enumerate(messages)])
        if messages[0][0] == "finish":
            self.clean = True
        return answers

    def _ask(self, me: int, message: tuple[Any, ...]) -> Any:
        return self._get([self._call(me, message)])[0]

    def _call(self, me: int, message: tuple[Any, ...]) -> Any:
        command, *args = message
        actor = self.pool[me]
        if command in ("init", "level"):
            return actor.level.remote(command, *args)
        method = getattr(actor, command)
        return method.remote(*args)

    def _get(self, refs: list[Any]) -> list[Any]:
        """The actors' answers; a failure as soon as it comes (the others may wait on it)."""
        try:
            pending = list(refs)
            while pending:
                ready, pending = self.ray.wait(pending, num_returns=1)
                self.ray.get(ready)
            return list(self.ray.get(refs))
        except self.ray.exceptions.RayError as exc:
            raise RuntimeError(
                f"explore: a Ray worker of the search of {self.system.name!r} failed: "
                f"{_cause(exc)}; if it was killed for its memory, use more workers or "
                "--fingerprints"
            ) from exc

    def _close(self) -> None:
        if not self.clean:  # mid-level after an error or Ctrl-C: start afresh next time
            for key, actors in list(_POOLS.items()):
                if actors is self.pool:
                    _drop(self.ray, key)

    def _replay(self, ref: int, last: ActionLabel | None = None) -> tuple[Node, ActionLabel | None]:
        """The concrete node a representative's path stands for, and `last` renamed to fit."""
        fp, actions = self._path(ref)
        root, path = self._ask(0, ("concrete", fp, actions, last))
        if last is not None:
            last, path = self.replayer.labels[path[-1]], path[:-1]
        chain, node = replay_chain(self.replayer, root, path, len(self.judge.monitors))
        self.judge.parents = chain
        return node, last

    def _trace(self, finding: Finding, prop: Property) -> Trace:
        trace = super()._trace(finding, prop)
        if self.symmetry and prop.kind == "monitor" and finding.verdict == VIOLATED:
            # The detail was worded on a renamed state; word it on the real path.
            trace = replace(
                trace, detail=judge_path(self.system, prop, trace.steps)[1] or trace.detail
            )
        return trace
