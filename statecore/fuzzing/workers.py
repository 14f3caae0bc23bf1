"""Fuzzing on every core: independent seeds in worker processes, findings shared.

`fuzz_workers` forks `workers` processes; worker i runs `statecore.fuzzing.fuzz.fuzz`
with seed ``seed + i``, every n-th guided path from the i-th, and its share
of the examples. The workers share findings through a Hypothesis example
database (`statecore.fuzzing.finding_store`): each replays what is stored
before anything else and again after every search batch, so a finding of one
worker is replayed by every other (which then stops too) and by the next
run. The parent merges what the workers report (`WorkersReport`): findings
de-duplicated by kind and property, the shortest trace kept, and the steps
per second of each worker and of all together.

Processes are forked (the adapter and the model, already imported and
built, are inherited), so this needs a platform with ``fork``.
"""

from __future__ import annotations

import json
import math
import multiprocessing
import queue
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from ..adapter import Adapter
from ..errors import StatecoreError
from ..system import System
from ..traces.trace import Trace
from .finding_store import FindingStore, open_database
from .interpreter import Finding, FuzzProgress, Progress

POLL = 0.1
"""Seconds the parent waits for a worker's message before checking the workers again."""


@dataclass(frozen=True)
class WorkerResult:
    """What one worker did: its seed, counts, time, and the finding it ended with."""

    index: int
    seed: int
    examples: int
    guided_paths: int
    replayed: int
    steps: int
    seconds: float
    found_in: str
    found_after: float | None
    finding: Finding | None
    known: dict[str, Trace] = field(default_factory=dict)
    interrupted: bool = False

    @property
    def steps_per_second(self) -> float:
        return self.steps / self.seconds if self.seconds > 0 else 0.0


@dataclass(frozen=True)
class WorkersReport:
    """The merged outcome of `fuzz_workers`.

    `findings` holds one finding per kind and property, the shortest any
    worker ended with; `seconds` is the wall-clock time of the whole run.
    """

    system: System
    adapter: str
    database: str
    workers: tuple[WorkerResult, ...]
    findings: tuple[Finding, ...]
    known: dict[str, Trace]
    known_reasons: dict[str, str]
    seconds: float
    interrupted: bool = False

    @property
    def ok(self) -> bool:
        return not self.findings

    @property
    def steps(self) -> int:
        return sum(w.steps for w in self.workers)

    @property
    def steps_per_second(self) -> float:
        """All workers' steps over the wall-clock time."""
        return self.steps / self.seconds if self.seconds > 0 else 0.0

    @property
    def examples(self) -> int:
        return sum(w.examples for w in self.workers)


def fuzz_workers(
    system: System,
    adapter_factory: Callable[[], Adapter],
    *,
    workers: int,
    database: str,
    budget: float | None = None,
    max_examples: int | None = None,
    seed: int = 0,
    progress: Progress | None = None,
    **options: Any,
) -> WorkersReport:
    """Fuzz with `workers` processes sharing findings through the example `database`.

    `database` is a directory or a ``redis://`` URL (`open_database`), opened
    in each worker. `max_examples` is the total over the workers (each runs
    its share, rounded up); `budget` applies to each. `options` go to `fuzz`
    as they are (``profile``, ``known``, ``swarm``, ``guided``, ...).
    """
    if workers < 1:
        raise StatecoreError(f"workers must be at least 1, not {workers}")
    open_database(database)  # a bad URL or an unreachable server fails here, in one line
    context = multiprocessing.get_context("fork")
    messages: Any = context.Queue()
    share = None if max_examples is None else math.ceil(max_examples / workers)
    started = time.perf_counter()
    processes = [
        context.Process(
            target=_worker,
            args=(messages, i, workers, seed + i, system, adapter_factory, database),
            kwargs={"budget": budget, "max_examples": share, **options},
            name=f"statecore-fuzz-{i}",
            daemon=True,
        )
        for i in range(workers)
    ]
    for process in processes:
        process.start()
    results: dict[int, dict[str, Any] | None] = {}
    latest: dict[int, FuzzProgress] = {}
    interrupted = False
    while len(results) < workers:
        try:
            kind, index, payload = messages.get(timeout=POLL)
        except queue.Empty:
            dead = [i for i, p in enumerate(processes) if not p.is_alive() and i not in results]
            if dead and messages.empty():
                _stop(processes)
                raise StatecoreError(
                    f"fuzz worker {dead[0]} exited with code {processes[dead[0]].exitcode} "
                    "without a report"
                ) from None
            continue
        except KeyboardInterrupt:
            interrupted = True  # the workers got the same Ctrl-C: collect their reports
            continue
        if kind == "progress" and progress is not None:
            latest[index] = payload
            progress(_combined(latest, time.perf_counter() - started))
        elif kind == "error":  # a usage error (an adapter that cannot run, say)
            _stop(processes)
            raise StatecoreError(f"fuzz worker {index}: {payload}")
        elif kind == "crash":
            _stop(processes)
            raise RuntimeError(f"fuzz worker {index} crashed: {payload}")
        elif kind == "done":
            results[index] = payload
    for process in processes:
        process.join(timeout=5)
    return _merge(system, database, results, time.perf_counter() - started, interrupted)


def _worker(
    messages: Any,
    index: int,
    workers: int,
    seed: int,
    system: System,
    adapter_factory: Callable[[], Adapter],
    database: str,
    **options: Any,
) -> None:
    """One worker process: fuzz, then send the report (traces as ITF JSON) to the parent."""
    from .fuzz import FuzzInterrupted, fuzz

    def progress(p: FuzzProgress) -> None:
        messages.put(("progress", index, p))

    try:
        db = open_database(database)
        try:
            report = fuzz(
                system,
                adapter_factory,
                seed=seed,
                database=db,
                share=(index, workers),
                progress=progress,
                **options,
            )
        except FuzzInterrupted as stop:
            report = stop.report
        store = FindingStore(None, system, report.adapter)
        f = report.finding
        payload = {
            "seed": seed,
            "adapter": report.adapter,
            "examples": report.examples,
            "guided": report.guided.paths if report.guided is not None else 0,
            "replayed": report.replayed,
            "steps": report.all_steps,
            "seconds": report.seconds,
            "found_in": report.found_in,
            "found_after": report.found_after,
            "finding": None
            if f is None
            else (f.kind, f.detail, f.minimal, store.encode(f.kind, f.trace)),
            "known": {pid: store.encode("known", t) for pid, t in report.known.items()},
            "reasons": dict(report.known_reasons),
            "interrupted": report.interrupted,
        }
        messages.put(("done", index, payload))
    except KeyboardInterrupt:  # before or after the run: nothing to report
        messages.put(("done", index, None))
    except StatecoreError as exc:
        messages.put(("error", index, str(exc)))
    except BaseException as exc:
        messages.put(("crash", index, f"{type(exc).__name__}: {exc}"))
        raise


def _merge(
    system: System,
    database: str,
    results: dict[int, dict[str, Any] | None],
    seconds: float,
    interrupted: bool,
) -> WorkersReport:
    from ..traces.itf import trace_from_itf

    def trace(raw: bytes) -> Trace:
        return trace_from_itf(json.loads(raw), system)

    rows = []
    best: dict[tuple[str, str], Finding] = {}
    known: dict[str, Trace] = {}
    reasons: dict[str, str] = {}
    interrupted = interrupted or any(r is None for r in results.values())
    for index in sorted(results):
        r = results[index]
        if r is None:
            continue
        finding = None
        if r["finding"] is not None:
            kind, detail, minimal, raw = r["finding"]
            t = trace(raw)
            finding = Finding(kind, t.property_id, detail, t)
            finding.minimal = minimal
            key = (kind, t.property_id)
            if key not in best or len(t) < len(best[key].trace):
                best[key] = finding
        for pid, raw in r["known"].items():
            t = trace(raw)
            if pid not in known or len(t) < len(known[pid]):
                known[pid] = t
        reasons.update(r["reasons"])
        rows.append(
            WorkerResult(
                index,
                r["seed"],
                r["examples"],
                r["guided"],
                r["replayed"],
                r["steps"],
                r["seconds"],
                r["found_in"],
                r["found_after"],
                finding,
                interrupted=r["interrupted"],
            )
        )
    adapter = next((r["adapter"] for r in results.values() if r is not None), "")
    findings = tuple(best[k] for k in sorted(best))
    stopped = interrupted or any(w.interrupted for w in rows)
    return WorkersReport(
        system, adapter, database, tuple(rows), findings, known, reasons, seconds, stopped
    )


def _combined(latest: dict[int, FuzzProgress], seconds: float) -> FuzzProgress:
    """One progress line for all workers: counts summed, the furthest phase shown."""
    ps = list(latest.values())
    covered = max(p.transitions[0] for p in ps)
    return FuzzProgress(
        ps[0].phase if len({p.phase for p in ps}) == 1 else "mixed",
        seconds,
        sum(p.paths for p in ps),
        sum(p.examples for p in ps),
        sum(p.replays for p in ps),
        sum(p.steps for p in ps),
        (covered, ps[0].transitions[1]),
        (max(p.goals[0] for p in ps), ps[0].goals[1]),
        max(p.findings for p in ps),
        max(p.known for p in ps),
    )


def _stop(processes: list[Any]) -> None:
    for process in processes:
        if process.is_alive():
            process.terminate()
        process.join(timeout=5)
