"""Explorer speed: distinct states per second on a scalable sender-lifecycle model.

The model is the shape the explorer exists for: N external ids (a symmetric
`Keys` set) each carrying one request at a time, a request saving up to K
chunks and then a terminal, ids reused through generations, and a FIFO save
queue of ``(handle, kind)`` items shared by every request:

* scheduler: ``new_request(ext)`` (a new generation once the previous one is
  closed), ``save_chunk(ext)`` / ``save_terminal(ext)`` (queue an item),
  ``cleanup(ext)`` (retire a closed request);
* save thread (internal): pop the head of the queue and fire ``put_chunk`` or
  ``put_terminal`` on its handle (a stale handle is rejected, harmlessly);
* consumer: ``consume(ext)`` reads a finished request and closes it.

Properties are those a real model carries: a queue bound (always), nothing
left closing at quiescence (eventually), one terminal put per generation
(monitor), and a reuse witness (sometimes). Bounds grow until an exploration
takes more than the time budget; the headline is the states/s of the largest
one that finished within it.

Then the figures the test suite does not assert (tests never time themselves):
each bundled model checked exhaustively, and definition-time validation of a
machine whose variable has 80,001 values under ``check_limit=100``.

Run: ``python benchmarks/explore.py [--quick] [--budget SECONDS] [--no-symmetry]
[--profile] [--gc-off] [--no-models]``. Seconds are wall-clock (the rate is
wall-clock too); ``cpu s`` is the process time, the figure to trust on a busy
machine. The last line is
``RESULT distinct_states_per_s=<x> largest_states=<n>``.
"""

from __future__ import annotations

import argparse
import cProfile
import gc
import pstats
import time
import warnings
from collections.abc import Hashable
from dataclasses import dataclass
from typing import Any

from statecore import Event, Machine, State, Transition, Var, out
from statecore.check.explore import Progress, Report, explore
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
        tx.set("queue", (*tx.get("queue"), (handle, kind)))

    def save_chunk(tx: Tx, ext: Hashable) -> None:
        save(tx, ext, "save_chunk", "chunk")

    def save_terminal(tx: Tx, ext: Hashable) -> None:
        save(tx, ext, "save_terminal", "terminal")

    def save_thread(tx: Tx) -> None:
        queue = tx.get("queue")
        tx.require(queue)
        tx.set("queue", queue[1:])
        handle, kind = queue[0]
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


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="small bounds only")
    parser.add_argument("--budget", type=float, default=60.0, help="seconds per bound")
    parser.add_argument("--no-symmetry", action="store_true", help="explore without reduction")
    parser.add_argument("--profile", action="store_true", help="cProfile the largest bound")
    parser.add_argument(
        "--no-models", action="store_true", help="skip the bundled models and validation"
    )
    parser.add_argument(
        "--gc-off",
        action="store_true",
        help="diagnostic: disable Python's cyclic GC, to show what its full-heap scans cost",
    )
    args = parser.parse_args()
    if args.gc_off:
        gc.disable()
    bounds = QUICK if args.quick else FULL
    symmetry = not args.no_symmetry

    header = f"{'bound':<16}{'states':>10}{'transitions':>13}{'depth':>7}{'seconds':>10}"
    header += f"{'cpu s':>8}{'states/s':>11}"
    print(f"{header}  verdicts")
    print("-" * (len(header) + 40))
    best: tuple[Bound, Report] | None = None
    for bound in bounds:
        start, cpu = time.perf_counter(), time.process_time()
        report = run(bound, symmetry, args.budget)
        cpu = time.process_time() - cpu
        if report is None:
            took = time.perf_counter() - start
            print(
                f"{bound!s:<16}{'-':>10}{'-':>13}{'-':>7}{took:>10.1f}{cpu:>8.1f}{'-':>11}"
                f"  over budget"
            )
            break
        verdicts = " ".join(f"{r.property.id}={r.verdict}" for r in report.results)
        print(
            f"{bound!s:<16}{report.states:>10}{report.transitions:>13}{report.depth:>7}"
            f"{report.seconds:>10.2f}{cpu:>8.2f}{report.rate:>11.0f}  {verdicts}",
            flush=True,
        )
        best = (bound, report)
    if not args.no_models:
        bundled_models(symmetry)
        bounded_validation()
    if best is None:
        print("RESULT distinct_states_per_s=0 largest_states=0")
        return
    if args.profile:
        profiler = cProfile.Profile()
        profiler.enable()
        explore(model(best[0]), symmetry=symmetry, stop_on_violation=False)
        profiler.disable()
        print(f"\nprofile of {best[0]} (by own time, top 30):")
        pstats.Stats(profiler).sort_stats("tottime").print_stats(30)
    print(f"RESULT distinct_states_per_s={best[1].rate:.0f} largest_states={best[1].states}")


if __name__ == "__main__":
    main()
