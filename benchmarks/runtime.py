"""Runtime speed and memory: statecore `Instance` against pytransitions,
python-statemachine and a hand-written class, side by side in one process.

The lifecycle is the same in all four: a sender-generation-like machine
``idle -> queued -> in_flight -> sent`` with ``cancel`` from any non-final
state, one guard (``put`` only when ``ok``) and one effect (count the puts).
One cycle drives an instance to ``sent`` with four fires: ``enqueue``,
``begin``, ``put(ok=False)`` (refused by the guard), ``put(ok=True)``.

Fires are timed directly: instances are created first, outside the clock,
then one loop drives each through one cycle, so the clock holds only the
loop and the fires. Times are CPU time of this process (`time.process_time`),
so other processes on the machine inflate them less; a figure is the best
of several repeats, which go round all implementations and workloads in
turn, divided by the fires made. Three workloads:

* warm: the same payloads every cycle, so statecore serves each fire from its
  memo;
* cold: statecore's memo is cleared before each cycle, so each fire runs
  `step` (the clearing is inside the clock); the others have no memo, so
  their figure is the warm one;
* distinct: ``put`` also carries ``nbytes``, an unbounded int that differs on
  every fire, so statecore computes each ``put`` (and remembers nothing).

Creation compares equal work: an instance of a machine defined once
(statecore `Instance(machine)` against pytransitions' ``add_model`` on a shared
machine), a machine defined per instance (statecore ``Machine`` build plus
`Instance` against pytransitions' ``Machine(model=...)``), and the one-off
definition itself. Memory: the RSS and the memo's size sampled over a run of
fires with payloads that never repeat; it must stop growing once the memo is
full (`statecore.runtime.CACHE_LIMIT` entries per machine).

Run: ``python benchmarks/runtime.py [--quick] [--memo-limit N]``. The last
line is ``RESULT warm_speedup_vs_transitions=<x>
distinct_speedup_vs_transitions=<x> warm_slowdown_vs_handwritten=<x>``.
"""

from __future__ import annotations

import argparse
import gc
import itertools
import json
import os
import resource
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

from statecore import Event, Field, Instance, Machine, State, Transition, Var
from statecore import runtime as sc_runtime

FIRES_PER_CYCLE = 4  # enqueue, begin, put(ok=False) (refused by the guard), put(ok=True)

# Instances, number of the first cycle -> one cycle on each instance. A drive
# loops itself, so no call per cycle is timed with the fires.
Drive = Callable[[list[Any], int], None]


@dataclass
class Impl:
    """How one implementation defines, creates and drives the lifecycle."""

    build: Callable[[bool], Any]  # distinct payloads? -> the shared definition
    create: Callable[[Any], Any]  # shared definition -> instance
    create_own: Callable[[], Any] | None  # an instance with a definition of its own
    drive: Drive
    drive_distinct: Drive  # ``nbytes`` different on every put
    drive_cold: Callable[[list[Any], Any], None] | None = None  # memo cleared per cycle


# -- statecore --------------------------------------------------------------------


def sender_machine(distinct: bool = False) -> Machine:
    """The lifecycle; with `distinct`, ``put`` also carries an unbounded ``nbytes``."""
    put_fields = [Field("ok", (True, False))]
    if distinct:
        put_fields.append(Field("nbytes", sample=(0, 4096), type=int))
    return Machine(
        "sender",
        states=[
            State("idle", initial=True),
            State("queued"),
            State("in_flight", hot=True),
            State("sent", final=True),
            State("cancelled", final=True),
        ],
        variables=[Var("puts", range(2), 0)],
        events=[Event("enqueue"), Event("begin"), Event("put", put_fields), Event("cancel")],
        transitions=[
            Transition("idle", "enqueue", "queued"),
            Transition("queued", "begin", "in_flight"),
            Transition(
                "in_flight",
                "put",
                "sent",
                guard=(lambda s, p: p["ok"] and p["nbytes"] >= 0)
                if distinct
                else (lambda s, p: p["ok"]),
                effect=lambda s, p: {"puts": s.puts + 1},
            ),
            Transition(("idle", "queued", "in_flight"), "cancel", "cancelled"),
        ],
    )


def statecore_impl() -> Impl:
    def drive(insts: list[Instance], start: int) -> None:
        for inst in insts:
            inst.fire("enqueue")
            inst.fire("begin")
            inst.fire("put", ok=False)
            inst.fire("put", ok=True)

    def drive_distinct(insts: list[Instance], start: int) -> None:
        for i, inst in enumerate(insts, start):
            inst.fire("enqueue")
            inst.fire("begin")
            inst.fire("put", ok=False, nbytes=2 * i)
            inst.fire("put", ok=True, nbytes=2 * i + 1)

    def drive_cold(insts: list[Instance], machine: Machine) -> None:
        clear = sc_runtime.clear_memo
        for inst in insts:
            clear(machine)
            inst.fire("enqueue")
            inst.fire("begin")
            inst.fire("put", ok=False)
            inst.fire("put", ok=True)

    return Impl(
        build=sender_machine,
        create=Instance,
        create_own=lambda: Instance(sender_machine()),
        drive=drive,
        drive_distinct=drive_distinct,
        drive_cold=drive_cold,
    )


# -- pytransitions ------------------------------------------------------------------

STATES = ["idle", "queued", "in_flight", "sent", "cancelled"]
TABLE: list[dict[str, Any]] = [
    {"trigger": "enqueue", "source": "idle", "dest": "queued"},
    {"trigger": "begin", "source": "queued", "dest": "in_flight"},
    {
        "trigger": "put",
        "source": "in_flight",
        "dest": "sent",
        "conditions": "is_ok",
        "after": "count_put",
    },
    {"trigger": "cancel", "source": ["idle", "queued", "in_flight"], "dest": "cancelled"},
]


class TModel:
    """The pytransitions model: the guard and the effect as methods."""

    def __init__(self) -> None:
        self.puts = 0

    def is_ok(self, ok: bool = False, nbytes: int = 0) -> bool:
        return ok and nbytes >= 0

    def count_put(self, ok: bool = False, nbytes: int = 0) -> None:
        self.puts += 1


def drive_named(objs: list[Any], start: int) -> None:
    """Cycles through methods named after the events (pytransitions, hand-written)."""
    for obj in objs:
        obj.enqueue()
        obj.begin()
        obj.put(ok=False)
        obj.put(ok=True)


def drive_named_distinct(objs: list[Any], start: int) -> None:
    for i, obj in enumerate(objs, start):
        obj.enqueue()
        obj.begin()
        obj.put(ok=False, nbytes=2 * i)
        obj.put(ok=True, nbytes=2 * i + 1)


def transitions_impl() -> Impl:
    from transitions import Machine as TMachine

    def build(distinct: bool = False) -> Any:
        return TMachine(model=None, states=STATES, transitions=TABLE, initial="idle")

    def create(shared: Any) -> TModel:
        model = TModel()
        shared.add_model(model)
        return model

    def create_own() -> TModel:
        model = TModel()
        TMachine(model=model, states=STATES, transitions=TABLE, initial="idle")
        return model

    return Impl(build, create, create_own, drive_named, drive_named_distinct)


# -- python-statemachine ------------------------------------------------------------


def python_statemachine_impl() -> Impl:
    from statemachine import State as PState
    from statemachine import StateMachine

    def build(distinct: bool = False) -> Any:
        class Sender(StateMachine):  # type: ignore[misc]
            allow_event_without_transition = True  # a refused put is not an error
            idle = PState(initial=True)
            queued = PState()
            in_flight = PState()
            sent = PState(final=True)
            cancelled = PState(final=True)
            enqueue = idle.to(queued)
            begin = queued.to(in_flight)
            put = in_flight.to(sent, cond="is_ok")
            cancel = idle.to(cancelled) | queued.to(cancelled) | in_flight.to(cancelled)

            def __init__(self) -> None:
                self.puts = 0
                super().__init__()

            def is_ok(self, ok: bool = False, nbytes: int = 0) -> bool:
                return ok and nbytes >= 0

            def on_put(self) -> None:
                self.puts += 1

        return Sender

    def drive(sms: list[Any], start: int) -> None:
        for sm in sms:
            sm.send("enqueue")
            sm.send("begin")
            sm.send("put", ok=False)
            sm.send("put", ok=True)

    def drive_distinct(sms: list[Any], start: int) -> None:
        for i, sm in enumerate(sms, start):
            sm.send("enqueue")
            sm.send("begin")
            sm.send("put", ok=False, nbytes=2 * i)
            sm.send("put", ok=True, nbytes=2 * i + 1)

    return Impl(build, lambda cls: cls(), None, drive, drive_distinct)


# -- hand-written -------------------------------------------------------------------


class HandWritten:
    """What a careful engineer writes by hand: a string state and if-chains.

    Like `Instance` it is safe to share between the scheduler and the save
    thread, so each method holds a per-instance lock; otherwise it does the
    least work possible (no outcome object, no listeners).
    """

    __slots__ = ("_lock", "puts", "state")

    def __init__(self) -> None:
        self.state = "idle"
        self.puts = 0
        self._lock = threading.Lock()

    def enqueue(self) -> bool:
        with self._lock:
            if self.state == "idle":
                self.state = "queued"
                return True
            return False

    def begin(self) -> bool:
        with self._lock:
            if self.state == "queued":
                self.state = "in_flight"
                return True
            return False

    def put(self, ok: bool, nbytes: int = 0) -> bool:
        with self._lock:
            if self.state == "in_flight" and ok and nbytes >= 0:
                self.state = "sent"
                self.puts += 1
                return True
            return False

    def cancel(self) -> bool:
        with self._lock:
            if self.state in ("idle", "queued", "in_flight"):
                self.state = "cancelled"
                return True
            return False


def handwritten_impl() -> Impl:
    return Impl(lambda d: None, lambda _: HandWritten(), None, drive_named, drive_named_distinct)


IMPLS: dict[str, Callable[[], Impl]] = {
    "statecore": statecore_impl,
    "transitions": transitions_impl,
    "python-statemachine": python_statemachine_impl,
    "hand-written": handwritten_impl,
}
SLOW = ("transitions", "python-statemachine")


# -- measuring ----------------------------------------------------------------------


@contextmanager
def no_gc() -> Iterator[None]:
    """Keep the collector out of a timed loop (as `timeit` does)."""
    enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if enabled:
            gc.enable()


def best(run: Callable[[], float], repeat: int) -> float:
    """The least of `repeat` runs: noise only ever adds time."""
    return min(run() for _ in range(repeat))


_cycle_numbers = itertools.count(0, 1 << 32)  # where each run's distinct payloads start


def time_fires(impl: Impl, workload: str, cycles: int, repeat: int) -> float:
    """µs per fire of `workload` on instances created beforehand."""
    drive = impl.drive_distinct if workload == "distinct" else impl.drive
    cold = impl.drive_cold if workload == "cold" else None

    def run() -> float:
        shared = impl.build(workload == "distinct")  # a fresh one: add_model accumulates
        start = next(_cycle_numbers)
        drive([impl.create(shared)], start)  # warms caches and the memo
        objs = [impl.create(shared) for _ in range(cycles)]
        with no_gc():
            started = time.process_time()
            if cold is None:
                drive(objs, start + 1)
            else:
                cold(objs, shared)
            elapsed = time.process_time() - started
        return elapsed / (cycles * FIRES_PER_CYCLE) * 1e6

    return best(run, repeat)


def time_calls(fn: Callable[[], Any], number: int, repeat: int) -> float:
    """µs per call of `fn`."""

    def run() -> float:
        with no_gc():
            started = time.process_time()
            for _ in range(number):
                fn()
            return (time.process_time() - started) / number * 1e6

    return best(run, repeat)


def time_creation(impl: Impl, number: int, repeat: int) -> tuple[float, float, float]:
    """µs per instance of a shared definition, per instance with its own, per definition."""
    shared = impl.build(False)
    few = max(number // 50, 20)
    instance = time_calls(lambda: impl.create(shared), number, repeat)
    own = time_calls(impl.create_own, few, repeat) if impl.create_own else 0.0
    definition = time_calls(lambda: impl.build(False), few, repeat)
    return instance, own, definition


def check_equivalence() -> None:
    """All four implementations end in ``sent`` with one put counted, both workloads."""
    for name, factory in IMPLS.items():
        impl = factory()
        for distinct in (False, True):
            obj = impl.create(impl.build(distinct))
            (impl.drive_distinct if distinct else impl.drive)([obj], 7)
            state: object
            if isinstance(obj, Instance):
                state, puts = obj.state, obj.snapshot.puts
            else:
                state = getattr(obj, "current_state_value", getattr(obj, "state", None))
                puts = obj.puts
            if str(state) != "sent" or puts != 1:
                raise SystemExit(f"{name}: ended in {state!r} with puts={puts}, expected sent/1")


# -- memory -------------------------------------------------------------------------


def rss_mb() -> float:
    """The process's resident set size now (Linux), else its peak so far."""
    try:
        with open("/proc/self/statm", encoding="ascii") as statm:
            pages = int(statm.read().split()[1])
        return pages * os.sysconf("SC_PAGE_SIZE") / 2**20
    except (OSError, ValueError, IndexError):
        return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def wide_machine(values: int) -> Machine:
    """One event whose finite domain is wider than the memo bound."""
    return Machine(
        "wide",
        states=[State("open", initial=True)],
        events=[Event("slot", [Field("n", range(values))])],
        transitions=[Transition("open", "slot", None)],
    )


MemoryWorkload = tuple[str, Callable[[int], Machine], Callable[[Instance, int], object]]

MEMORY_WORKLOADS: dict[str, MemoryWorkload] = {
    "unbounded": (
        "unbounded nbytes=i",
        lambda wide: sender_machine(distinct=True),
        lambda inst, i: inst.fire("put", ok=True, nbytes=i),
    ),
    "out-of-domain": (
        "out-of-domain ok=i",
        lambda wide: sender_machine(),
        lambda inst, i: inst.fire("put", ok=i),
    ),
    "wide": (
        "a wide domain, n=i",
        wide_machine,
        lambda inst, i: inst.fire(
            "slot", n=i % len(inst.machine.event_index["slot"].fields[0].values)
        ),
    ),
}


def memory_rows(workload: str, fires: int, samples: int, wide: int) -> list[tuple[int, float, int]]:
    """[(fires so far, RSS MB, memo entries)] over `fires` fires of `workload`, `samples` + 1 rows.

    Payloads never repeat, except that the wide domain is cycled through.
    """
    _, build, fire = MEMORY_WORKLOADS[workload]
    machine = build(wide)
    sender = machine.name == "sender"
    inst = in_flight(machine) if sender else Instance(machine)
    rows = [(0, rss_mb(), sc_runtime.memo_size(machine))]
    step = fires // samples
    for done in range(step, fires + 1, step):
        for i in range(done - step, done):
            if fire(inst, i) and sender:
                inst = in_flight(machine)  # sent: the next request
        rows.append((done, rss_mb(), sc_runtime.memo_size(machine)))
    return rows


def in_flight(machine: Machine) -> Instance:
    """A new sender instance, where ``put`` is fired."""
    inst = Instance(machine)
    inst.fire("enqueue")
    inst.fire("begin")
    return inst


def memory_profile(
    fires: int, samples: int, wide: int, memo_limit: int
) -> list[tuple[str, list[tuple[int, float, int]]]]:
    """(workload, rows of `memory_rows`), each workload in a fresh process.

    A fresh process starts from the same RSS, with no memory left over (and
    kept by the allocator) from the timing runs or another workload.
    """
    profiles = []
    for workload, (label, _, _) in MEMORY_WORKLOADS.items():
        command = [
            sys.executable,
            os.path.abspath(__file__),
            "--rss",
            workload,
            f"--fires={fires}",
            f"--samples={samples}",
            f"--wide={wide}",
            f"--memo-limit={memo_limit}",
        ]
        result = subprocess.run(command, capture_output=True, text=True, check=True)
        rows = [(int(done), float(rss), int(memo)) for done, rss, memo in json.loads(result.stdout)]
        profiles.append((label, rows))
    return profiles


# -- report -------------------------------------------------------------------------


def main(argv: list[str] | None = None) -> dict[str, Any]:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="fewer iterations (for tests)")
    parser.add_argument(
        "--memo-limit",
        type=int,
        default=sc_runtime.CACHE_LIMIT,
        help="statecore's memo bound per machine (statecore.runtime.CACHE_LIMIT)",
    )
    parser.add_argument("--rss", choices=sorted(MEMORY_WORKLOADS), help=argparse.SUPPRESS)
    parser.add_argument("--fires", type=int, default=0, help=argparse.SUPPRESS)
    parser.add_argument("--samples", type=int, default=4, help=argparse.SUPPRESS)
    parser.add_argument("--wide", type=int, default=0, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    sc_runtime.CACHE_LIMIT = args.memo_limit
    if args.rss:  # a child of `memory_profile`
        print(json.dumps(memory_rows(args.rss, args.fires, args.samples, args.wide)))
        return {}
    check_equivalence()
    if args.quick:
        fast, slow, repeat, fires, wide = 500, 50, 2, 20_000, 5_000
    else:
        fast, slow, repeat, fires, wide = 20_000, 1_000, 15, 1_000_000, 200_000
    results = time_all(fast, slow, repeat)
    profiles = memory_profile(fires, 4, wide, args.memo_limit)
    results["memory"] = profiles
    print(
        f"\nRSS and memo entries over {fires:,} fires whose payloads never repeat "
        f"(each workload in a fresh process; memo bound {args.memo_limit:,} entries per machine)"
    )
    print(f"{'workload':<22}" + "".join(f"{done:>20,}" for done, _, _ in profiles[0][1]))
    for name, rows in profiles:
        print(f"{name:<22}" + "".join(f"{rss:>9.1f} MB {memo:>7,}" for _, rss, memo in rows))
    sc_warm, _, sc_distinct = results["fire"]["statecore"]
    tr_warm, _, tr_distinct = results["fire"]["transitions"]
    hw_warm = results["fire"]["hand-written"][0]
    print(
        f"RESULT warm_speedup_vs_transitions={tr_warm / sc_warm:.1f} "
        f"distinct_speedup_vs_transitions={tr_distinct / sc_distinct:.1f} "
        f"warm_slowdown_vs_handwritten={sc_warm / hw_warm:.2f}"
    )
    return results


WORKLOADS = ("warm", "cold", "distinct")


def time_all(fast: int, slow: int, repeat: int) -> dict[str, Any]:
    """Time every implementation's fires and creation; print them as a table.

    The repeats go round all implementations and workloads in turn, so a
    burst of load from elsewhere slows one repeat of each, not all repeats of
    one; each figure is the best of its repeats.
    """
    impls = {name: factory() for name, factory in IMPLS.items()}
    fires: dict[tuple[str, str], float] = {}
    creation: dict[str, tuple[float, float, float]] = {}
    for _ in range(repeat):
        for name, impl in impls.items():
            cycles = slow if name in SLOW else fast
            for workload in WORKLOADS:
                if workload == "cold" and impl.drive_cold is None:
                    continue  # no memo to clear: the warm figure is the cold one
                figure = time_fires(impl, workload, cycles, 1)
                fires[name, workload] = min(fires.get((name, workload), figure), figure)
            instance, own, definition = time_creation(impl, cycles, 1)
            best = creation.get(name, (instance, own, definition))
            creation[name] = (min(best[0], instance), min(best[1], own), min(best[2], definition))
    results: dict[str, Any] = {"fire": {}, "create": creation}
    print(f"{'':<22}{'µs per fire':^30}   {'µs per create':^36}")
    print(
        f"{'implementation':<22}{'warm':>10}{'cold':>10}{'distinct':>10}"
        f"   {'instance':>12}{'own machine':>12}{'definition':>12}"
    )
    for name in impls:
        warm, distinct = fires[name, "warm"], fires[name, "distinct"]
        cold = fires.get((name, "cold"), warm)
        instance, own, definition = creation[name]
        results["fire"][name] = (warm, cold, distinct)
        print(
            f"{name:<22}{warm:>10.3f}{cold:>10.3f}{distinct:>10.3f}"
            f"   {instance:>12.2f}{_or_dash(own):>12}{definition:>12.1f}"
        )
    print(
        "cold: statecore's memo is cleared before each cycle of four fires (clearing "
        "included);\n      the others have no memo, so their cold figure is the warm one."
    )
    print(
        "instance: of a shared definition (Instance(machine); pytransitions add_model); "
        "own machine:\n      a definition per instance (Machine + Instance; "
        "pytransitions Machine(model=...))."
    )
    return results


def _or_dash(value: float) -> str:
    return f"{value:.1f}" if value else "—"


if __name__ == "__main__":
    main()
