"""Explorer speed: distinct states per second on a scalable sender-lifecycle model.

The model is the shape the explorer exists for: N external ids (a symmetric
`Keys` set) each carrying one request at a time, a request saving up to K
chunks and then a terminal, ids reused through generations, and a FIFO save
queue of ``(handle, kind)`` items shared by every request:

* scheduler: ``new_request(ext)`` (a new generation once the previous one is
  closed), ``save_chunk(ext)`` / ``save_terminal(ext)`` (queue an item with
  ``tx.append``, as the adapter's ``_pending_save_reqs.append``),
  ``cleanup(ext)`` (retire a closed request);
* save thread (internal): take the head of the queue (``tx.popleft``) and fire
  ``put_chunk`` or ``put_terminal`` on its handle (a stale handle is rejected,
  harmlessly);
* consumer: ``consume(ext)`` reads a finished request and closes it.

Properties are those a real model carries: a queue bound (always), nothing
left closing at quiescence (eventually), one terminal put per generation
(monitor), and a reuse witness (sometimes). Bounds grow until an exploration
takes more than the time budget; the headline is the states/s of the largest
one that finished within it.

Then the figures the test suite does not assert (tests never time themselves):
each bundled model checked exhaustively; the ``statecore check`` command on
the bundled set, in a fresh process, with ``--jobs 1`` and with its default
(one process per core), wall-clock and CPU seconds; and definition-time validation of a
machine whose variable has 80,001 values under ``check_limit=100``.

Then the visited set and the processes side by side: full states against
64-bit fingerprints, on 1 and 2 workers, on the benchmark model, on
chunk_transfer at two ids with one request each (``ChunkTransferConfig(ids=2,
generations=1, saves=1, segments=1)``, complete; ``--quick``: ``segments=0``),
and on chunk_transfer at two ids reused (``generations=2``, bounded by
``--ct-states``, 200,000 by default: its complete space is beyond a short
run), each table followed by how many times as fast 2 workers are as 1
(wall-clock); and 64-bit fingerprints on one process
with everything in memory (``disk``: a fingerprint search's level past
`statecore.check.frontier.SPILL` bytes goes to a file, and so do its store's parents past
`statecore.check.spill.PARENTS` bytes). Each runs in a fresh process, so its
peak resident memory is its own: ``B/state`` is that peak (the coordinator's
plus, with workers, N times the largest worker's) over the states, less the
memory before the search; ``store B/st`` is what the fingerprint store's
arrays hold per state.

``--instructions`` prints, instead of all this, the bytecode instructions a
state costs at N=3 K=1 G=2 with full states and with 64-bit fingerprints, and on the
first `INSTRUCTIONS_CT_STATES` states of chunk_transfer at two ids (the scale goal's
model) with and without symmetry, counted
by the interpreter's tracer: unlike seconds, the count does not move with the
machine's load, so it tells a change of the explorer from noise (it leaves out
time spent in C: hashing, BLAKE2b). It still moves by a percent or two between
runs: symmetry reduction keeps the member of each orbit with the least hash, and
a few hashes follow memory addresses, so each run meets the memos' entries in
another order.

``--reductions N`` prints symmetry's and POR's factors on chunk_transfer at two ids
(and why each is what it is; POR also judging no property, the most it can take away
while the actions touch what they do); ``--complete-budget 600`` runs the scale goal: that
model checked completely with 64-bit fingerprints, on 1 and on 2 processes, each within 600 s
and 4 GB.

Run: ``python benchmarks/explore.py [--quick] [--budget SECONDS] [--no-symmetry]
[--profile] [--gc-off] [--no-models] [--no-stores] [--ct-states N] [--reductions N]
[--complete-budget SECONDS]`` or ``python benchmarks/explore.py --instructions``. Seconds are
wall-clock (``states/s`` is wall-clock too); ``cpu s`` is the process time and
``states/cpu s`` the rate on it, the figures to trust on a busy machine (with workers:
theirs too). The last line is ``RESULT distinct_states_per_s=<x>
distinct_states_per_cpu_s=<y> largest_states=<n>``.
"""

from __future__ import annotations

import argparse
import cProfile
import gc
import json
import os
import pstats
import re
import resource
import subprocess
import sys
import time
import warnings
from collections.abc import Hashable
from dataclasses import dataclass
from types import FrameType
from typing import Any

from scale_goal import goal_run, reduction_factors
from statecore.models.chunk_transfer import ChunkTransferConfig, build

from statecore import Event, Machine, State, Transition, Var, out
from statecore.check import frontier
from statecore.check import spill as spill_module
from statecore.check.explore import Progress, Report, explore
from statecore.check.memory import resident_memory
from statecore.properties import always, eventually, monitor, sometimes
from statecore.registry import bundled
from statecore.system import Action, Component, Emitted, Global, Keys, StateView, System, Tx


@dataclass(frozen=True)
class Bound:
    """Model size: ids, chunks per request, generations per id."""

    ids: int
    chunks: int
    generations: int

    def __str__(self) -> str:
        return f"N={self.ids} K={self.chunks} G={self.generations}"


def sender_machine(chunks: int) -> Machine:
    """One request's sender: queue chunks, then the terminal; puts follow in order."""
    return Machine(
        "sender",
        states=[
            State("open", initial=True),
            State("closing", hot=True),
            State("finished"),
            State("closed", final=True),
        ],
        variables=[Var("queued", range(chunks + 1), 0), Var("put", range(chunks + 1), 0)],
        events=[
            Event("save_chunk"),
            Event("save_terminal"),
            Event("put_chunk"),
            Event("put_terminal"),
            Event("consume"),
        ],
        transitions=[
            Transition(
                "open",
                "save_chunk",
                guard=lambda s, p: s.queued < chunks,
                effect=lambda s, p: {"queued": s.queued + 1},
            ),
            Transition("open", "save_terminal", "closing"),
            Transition(
                ("open", "closing"),
                "put_chunk",
                guard=lambda s, p: s.put < s.queued,
                effect=lambda s, p: {"put": s.put + 1},
                emit=[out("put", finished=False)],
            ),
            Transition(
                "closing",
                "put_terminal",
                "finished",
                guard=lambda s, p: s.put == s.queued,
                emit=[out("put", finished=True)],
            ),
            Transition("finished", "consume", "closed", emit=[out("received")]),
        ],
    )


ONE_TERMINAL = Machine(
    "one_terminal",
    states=[State("open", initial=True), State("done", final=True)],
    events=[Event("terminal")],
    transitions=[Transition("open", "terminal", "done")],
)


def terminal_route(emitted: Emitted) -> tuple[Hashable, str, dict[str, Any]] | None:
    if emitted.source is not None and emitted.output == out("put", finished=True):
        return emitted.source, "terminal", {}
    return None


def model(bound: Bound) -> System:
    """The sender lifecycle at `bound`."""
    ext = Keys("ext", bound.ids)
    queue_cap = bound.ids * (bound.chunks + 1)

    def new_request(tx: Tx, ext: Hashable) -> None:
        snap = tx.snapshot(("sender", ext))
        tx.require(snap is None or snap.state == "closed")
        tx.spawn("sender", ext)

    def save(tx: Tx, ext: Hashable, event: str, kind: str) -> None:
        handle = tx.handle("sender", ext)
        tx.require(handle is not None)
        assert handle is not None
        tx.require(tx.fire(handle, event).accepted)
        tx.append("queue", (handle, kind))

    def save_chunk(tx: Tx, ext: Hashable) -> None:
        save(tx, ext, "save_chunk", "chunk")

    def save_terminal(tx: Tx, ext: Hashable) -> None:
        save(tx, ext, "save_terminal", "terminal")

    def save_thread(tx: Tx) -> None:
        handle, kind = tx.popleft("queue")
        tx.fire(handle, "put_chunk" if kind == "chunk" else "put_terminal")

    def consume(tx: Tx, ext: Hashable) -> None:
        tx.require(tx.fire(("sender", ext), "consume").accepted)

    def cleanup(tx: Tx, ext: Hashable) -> None:
        snap = tx.snapshot(("sender", ext))
        tx.require(snap is not None and snap.state == "closed")
        tx.retire(("sender", ext))

    def closing(view: StateView) -> int:
        return sum(1 for _, snap in view.live("sender") if snap.state == "closing")

    return System(
        "sender_lifecycle",
        components=[Component("sender", sender_machine(bound.chunks), ext, bound.generations)],
        globals=[Global("queue", ())],
        actions=[
            Action("new_request", "scheduler", new_request, {"ext": ext}),
            Action("save_chunk", "scheduler", save_chunk, {"ext": ext}),
            Action("save_terminal", "scheduler", save_terminal, {"ext": ext}),
            Action("cleanup", "scheduler", cleanup, {"ext": ext}),
            Action("save_thread", "save_thread", save_thread, internal=True),
            Action("consume", "consumer", consume, {"ext": ext}),
        ],
        properties=[
            always(
                "queue_bounded",
                "the save queue never holds more than N*(K+1) items",
                lambda v: len(v.get("queue")) <= queue_cap,
            ),
            eventually(
                "drained", "no request is left closing at quiescence", lambda v: not closing(v)
            ),
            monitor(
                "one_terminal", "one terminal put per generation", ONE_TERMINAL, terminal_route
            ),
            sometimes(
                "reused",
                "an id reaches its last generation",
                lambda v: any(s.generation == bound.generations for _, s in v.instances("sender")),
            ),
        ],
    )


FULL = [
    Bound(1, 1, 1),
    Bound(1, 2, 2),
    Bound(2, 1, 2),
    Bound(2, 2, 2),
    Bound(3, 1, 2),
    Bound(2, 3, 3),
    Bound(3, 2, 2),
    Bound(3, 2, 3),
    Bound(4, 2, 2),
    Bound(4, 2, 3),
    Bound(5, 2, 2),
]
QUICK = FULL[:5]


class _OverBudget(Exception):
    pass


def run(bound: Bound, symmetry: bool, budget: float) -> Report | None:
    """Explore `bound`; None if it did not finish within `budget` seconds."""

    def watch(p: Progress) -> None:
        if p.seconds > budget:
            raise _OverBudget

    try:
        return explore(model(bound), symmetry=symmetry, stop_on_violation=False, progress=watch)
    except _OverBudget:
        return None


def bundled_models(symmetry: bool) -> None:
    """Check every bundled model exhaustively, as its test does, and time it."""
    print(f"\n{'bundled model':<24}{'states':>10}{'transitions':>13}{'depth':>7}", end="")
    print(f"{'seconds':>10}{'cpu s':>8}{'states/s':>11}  verdicts")
    print("-" * 95)
    for target in bundled():
        if target.kind != "model":
            continue
        system = target.load()
        cpu = time.process_time()
        report = explore(system, symmetry=symmetry, stop_on_violation=False)
        cpu = time.process_time() - cpu
        held = sum(r.verdict == "holds" for r in report.results)
        print(
            f"{target.name:<24}{report.states:>10}{report.transitions:>13}{report.depth:>7}"
            f"{report.seconds:>10.2f}{cpu:>8.2f}{report.rate:>11.0f}  "
            f"{held}/{len(report.results)} hold",
            flush=True,
        )


def check_command() -> None:
    """``statecore check`` as a user runs it, a fresh process each: one process, then all cores.

    The goal is the default bundled set under 5 s. Wall-clock seconds, with the
    CPU seconds of the process and its children beside them.
    """
    print(f"\n{'statecore check (bundled set)':<36}{'wall s':>8}{'cpu s':>8}  verdict")
    print("-" * 60)
    for label, extra in (("--jobs 1", ["--jobs", "1"]), ("default (one per core)", [])):
        before = resource.getrusage(resource.RUSAGE_CHILDREN)
        start = time.perf_counter()
        done = subprocess.run(
            [sys.executable, "-m", "statecore", "check", "-q", *extra],
            capture_output=True,
            text=True,
            check=False,
        )
        wall = time.perf_counter() - start
        after = resource.getrusage(resource.RUSAGE_CHILDREN)
        cpu = (after.ru_utime + after.ru_stime) - (before.ru_utime + before.ru_stime)
        verdict = done.stdout.strip().splitlines()[-1] if done.stdout.strip() else done.stderr
        print(f"{label:<36}{wall:>8.2f}{cpu:>8.2f}  {verdict}", flush=True)


def bounded_validation() -> None:
    """Validate a machine whose variable has 80,001 values: `check_limit` bounds the work."""
    total = 80_000
    start, cpu = time.perf_counter(), time.process_time()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # stopping at check_limit is the point here
        Machine(
            "counter",
            states=[State("counting", initial=True)],
            variables=[Var("n", range(total + 1), default=0)],
            events=[Event("tick")],
            transitions=[
                Transition(
                    "counting",
                    "tick",
                    guard=lambda s, p: s.n < total,
                    effect=lambda s, p: {"n": s.n + 1},
                )
            ],
            check_limit=100,
        )
    took, cpu = time.perf_counter() - start, time.process_time() - cpu
    print(
        f"\nvalidation of a {total + 1:,}-value counter, check_limit=100: "
        f"{took:.3f}s ({cpu:.3f} cpu s)"
    )


# -- the visited set and the processes, side by side ----------------------------------

TWO_IDS = {  # chunk_transfer at two ids: the scale goal's model, and one request per id
    "chunk_transfer_ids2": ChunkTransferConfig(ids=2, generations=2, saves=1, segments=1),
    "chunk_transfer_ids2_gen1": ChunkTransferConfig(ids=2, generations=1, saves=1, segments=1),
    "chunk_transfer_ids2_gen1_quick": ChunkTransferConfig(
        ids=2, generations=1, saves=1, segments=0
    ),
}
# (fingerprint bits or 0 for full states, workers, whether levels and parents go to files)
STORES = [(0, 1, True), (64, 1, True), (64, 1, False), (0, 2, True), (64, 2, True)]
STORE_BYTES = re.compile(r"\((\d+) bytes each\)")  # in the fingerprint store's note


def measure(
    which: str, bits: int, workers: int, max_states: int | None, spill: bool = True
) -> dict[str, Any]:
    """Explore `which` once in this process; what the side-by-side table prints. Without
    `spill`, every level and the store's parents stay in memory
    (`statecore.check.frontier.SPILL`, `statecore.check.spill.PARENTS`)."""
    if not spill:
        frontier.SPILL = spill_module.PARENTS = 1 << 62
    if which in TWO_IDS:
        system = build(TWO_IDS[which])
    else:
        system = model(Bound(*(int(n) for n in which.split(","))))
    before = resident_memory()
    cpu = time.process_time()
    report = explore(
        system,
        stop_on_violation=False,
        fingerprints=bits,
        workers=workers,
        max_states=max_states,
    )
    cpu = time.process_time() - cpu
    children = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu += children.ru_utime + children.ru_stime
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
    if workers > 1:
        peak += workers * children.ru_maxrss * 1024 - before * workers  # forked from `before`
    return {
        "states": report.states,
        "complete": report.complete,
        "seconds": report.seconds,
        "cpu": cpu,
        "bytes": max(0, peak - before) / max(1, report.states),
        "store": next(
            (float(m.group(1)) for m in map(STORE_BYTES.search, report.notes) if m), None
        ),
        "verdicts": sorted((r.property.id, r.verdict) for r in report.results),
    }


def config_text(config: ChunkTransferConfig) -> str:
    """``ids=2 generations=1 saves=1 segments=0``: the bounds of `config`."""
    bounds = ("ids", "generations", "saves", "segments")
    return " ".join(f"{name}={getattr(config, name)}" for name in bounds)


def stores_and_workers(which: str, label: str, max_states: int | None) -> None:
    """The runs of `STORES` on `which` side by side, each in a fresh process."""
    print(f"\n{label}")
    print(f"{'store':<12}{'disk':>8}{'workers':>8}{'states':>10}{'seconds':>9}", end="")
    print(f"{'cpu s':>8}{'states/cpu s':>14}{'B/state':>9}{'store B/st':>11}  same verdicts")
    print("-" * 103)
    first: dict[str, Any] | None = None
    wall: dict[tuple[int, int, bool], float] = {}
    for bits, workers, spill in STORES:
        command = [sys.executable, __file__, "--measure", which, str(bits), str(workers)]
        command += [str(max_states or 0), str(int(spill))]
        env = {**os.environ, "PYTHONPATH": os.path.dirname(__file__)}
        out = subprocess.run(command, capture_output=True, text=True, check=True, env=env)
        got = json.loads(out.stdout.splitlines()[-1])
        first = first or got
        wall[bits, workers, spill] = got["seconds"]
        store = "full states" if not bits else f"{bits}-bit fp"
        kept = "-" if got["store"] is None else f"{got['store']:.1f}"
        same = got["verdicts"] == first["verdicts"] and got["states"] == first["states"]
        done = "" if got["complete"] else " (bounded)"
        print(
            f"{store:<12}{'file' if spill and bits else 'memory':>8}{workers:>8}"
            f"{got['states']:>10}{got['seconds']:>9.2f}{got['cpu']:>8.2f}"
            f"{got['states'] / max(got['cpu'], 1e-9):>14.0f}{got['bytes']:>9.0f}{kept:>11}"
            f"  {'yes' if same else 'NO'}{done}",
            flush=True,
        )
    for bits in (0, 64):
        one, two = wall[bits, 1, True], wall[bits, 2, True]
        store = "full states" if not bits else f"{bits}-bit fingerprints"
        print(f"2 workers against 1, {store}: {one / max(two, 1e-9):.2f} times as fast")


INSTRUCTIONS_BOUND = Bound(3, 1, 2)
INSTRUCTIONS_CT_STATES = 30_000


def instructions_per_state(
    bound: Bound | System, bits: int, symmetry: bool = True, max_states: int | None = None
) -> tuple[int, float]:
    """States, and bytecode instructions per state, of one search of `bound` (the benchmark
    model's, or a system; `bits`: 0 for full states, else fingerprints)."""
    system = model(bound) if isinstance(bound, Bound) else bound
    count = 0

    def trace(frame: FrameType, event: str, arg: object) -> Any:
        nonlocal count
        frame.f_trace_opcodes = True
        if event == "opcode":
            count += 1
        return trace

    collecting = gc.isenabled()
    gc.disable()  # a collection runs weakref callbacks, whenever it comes
    sys.settrace(trace)
    try:
        report = explore(
            system,
            stop_on_violation=False,
            fingerprints=bits,
            symmetry=symmetry,
            max_states=max_states,
        )
    finally:
        sys.settrace(None)
        if collecting:
            gc.enable()
    return report.states, count / report.states


def instructions() -> None:
    """The counts, in a process whose string hashes are fixed: symmetry reduction keeps the
    member of each orbit with the least hash, so the states searched follow the hash seed
    (and, by a percent or two, memory addresses)."""
    if os.environ.get("PYTHONHASHSEED") != "0":
        env = {**os.environ, "PYTHONHASHSEED": "0"}
        subprocess.run([sys.executable, __file__, "--instructions"], check=True, env=env)
        return
    print(f"bytecode instructions per state, benchmark model {INSTRUCTIONS_BOUND}")
    print(f"{'store':<14}{'states':>8}{'per state':>11}")
    for bits in (0, 64):
        states, per_state = instructions_per_state(INSTRUCTIONS_BOUND, bits)
        store = "full states" if not bits else f"{bits}-bit fp"
        print(f"{store:<14}{states:>8}{per_state:>11.0f}")
    print(f"\nchunk_transfer at two ids, its first {INSTRUCTIONS_CT_STATES:,} states")
    print(f"{'store':<26}{'states':>8}{'per state':>11}")
    for bits, symmetry in ((64, True), (64, False), (0, False)):
        system = build(ChunkTransferConfig(ids=2, generations=2, saves=1, segments=1))
        states, per_state = instructions_per_state(system, bits, symmetry, INSTRUCTIONS_CT_STATES)
        store = "full states" if not bits else f"{bits}-bit fp"
        store += ", symmetry" if symmetry else ", no symmetry"
        print(f"{store:<26}{states:>8}{per_state:>11.0f}")


def main() -> None:
    if sys.argv[1:2] == ["--measure"]:
        which, bits, workers, bound, *spill = sys.argv[2:7]
        gc.disable()
        got = measure(which, int(bits), int(workers), int(bound) or None, spill != ["0"])
        print(json.dumps(got))
        return
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="small bounds only")
    parser.add_argument("--budget", type=float, default=60.0, help="seconds per bound")
    parser.add_argument("--no-symmetry", action="store_true", help="explore without reduction")
    parser.add_argument("--profile", action="store_true", help="cProfile the largest bound")
    parser.add_argument(
        "--no-models", action="store_true", help="skip the bundled models and validation"
    )
    parser.add_argument(
        "--no-stores", action="store_true", help="skip full states vs fingerprints, 1 vs 2 workers"
    )
    parser.add_argument(
        "--ct-states",
        type=int,
        default=200_000,
        help="the state bound of chunk_transfer at two ids (0: none, a complete run)",
    )
    parser.add_argument(
        "--complete-budget",
        type=float,
        default=0.0,
        help="seconds for the complete check of chunk_transfer at two ids (0: skip it; goal: 600)",
    )
    parser.add_argument(
        "--reductions",
        type=int,
        default=0,
        help="print symmetry's and POR's factors on chunk_transfer at two ids, this many states",
    )
    parser.add_argument(
        "--gc-off",
        action="store_true",
        help="diagnostic: disable Python's cyclic GC, to show what its full-heap scans cost",
    )
    parser.add_argument(
        "--instructions",
        action="store_true",
        help="only bytecode instructions per state, full states and 64-bit fingerprints",
    )
    args = parser.parse_args()
    if args.instructions:
        instructions()
        return
    if args.gc_off:
        gc.disable()
    bounds = QUICK if args.quick else FULL
    symmetry = not args.no_symmetry

    header = f"{'bound':<16}{'states':>10}{'transitions':>13}{'depth':>7}{'seconds':>10}"
    header += f"{'cpu s':>8}{'states/s':>11}{'states/cpu s':>14}"
    print(f"{header}  verdicts")
    print("-" * (len(header) + 40))
    best: tuple[Bound, Report, float] | None = None
    for bound in bounds:
        start, cpu = time.perf_counter(), time.process_time()
        report = run(bound, symmetry, args.budget)
        cpu = time.process_time() - cpu
        if report is None:
            took = time.perf_counter() - start
            print(
                f"{bound!s:<16}{'-':>10}{'-':>13}{'-':>7}{took:>10.1f}{cpu:>8.1f}{'-':>11}"
                f"{'-':>14}  over budget"
            )
            break
        verdicts = " ".join(f"{r.property.id}={r.verdict}" for r in report.results)
        print(
            f"{bound!s:<16}{report.states:>10}{report.transitions:>13}{report.depth:>7}"
            f"{report.seconds:>10.2f}{cpu:>8.2f}{report.rate:>11.0f}"
            f"{report.states / max(cpu, 1e-9):>14.0f}  {verdicts}",
            flush=True,
        )
        best = (bound, report, cpu)
    if not args.no_models:
        bundled_models(symmetry)
        check_command()
        bounded_validation()
    if not args.no_stores:
        side = Bound(2, 2, 2) if args.quick else Bound(3, 2, 2)
        stores_and_workers(
            f"{side.ids},{side.chunks},{side.generations}", f"benchmark model {side}", None
        )
        one_each = "chunk_transfer_ids2_gen1" + ("_quick" if args.quick else "")
        stores_and_workers(
            one_each, f"chunk_transfer {config_text(TWO_IDS[one_each])}, complete", None
        )
        ct_bound = min(args.ct_states, 20_000) if args.quick else args.ct_states
        stores_and_workers(
            "chunk_transfer_ids2",
            "chunk_transfer ids=2 generations=2 saves=1 segments=1"
            + (f", bounded at {ct_bound:,} states" if ct_bound else ""),
            ct_bound or None,
        )
    if args.reductions:
        reduction_factors(args.reductions)
    if args.complete_budget:
        for workers in (1, 2):  # one process holds one set of memos; two, two
            goal_run(args.complete_budget, workers)
    if best is None:
        print("RESULT distinct_states_per_s=0 distinct_states_per_cpu_s=0 largest_states=0")
        return
    if args.profile:
        profiler = cProfile.Profile()
        profiler.enable()
        explore(model(best[0]), symmetry=symmetry, stop_on_violation=False)
        profiler.disable()
        print(f"\nprofile of {best[0]} (by own time, top 30):")
        pstats.Stats(profiler).sort_stats("tottime").print_stats(30)
    bound, report, cpu = best
    print(
        f"RESULT distinct_states_per_s={report.rate:.0f} "
        f"distinct_states_per_cpu_s={report.states / max(cpu, 1e-9):.0f} "
        f"largest_states={report.states}"
    )


if __name__ == "__main__":
    main()
