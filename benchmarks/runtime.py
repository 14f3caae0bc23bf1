"""Runtime speed: statecore `Instance` against pytransitions, python-statemachine
and a hand-written class, side by side in one process.

The lifecycle is the same in all four: a sender-generation-like machine
``idle -> queued -> in_flight -> sent`` with ``cancel`` from any non-final
state, one guard (``put`` only when ``ok``) and one effect (count the puts).
Each measured cycle creates an instance and drives it to a final state; per
fire and per creation figures are derived from the same runs, the best of
several repeats, so background noise inflates nothing.

Run: ``python benchmarks/runtime.py [--quick]``. The last line is
``RESULT fire_speedup_vs_transitions=<x> create_speedup_vs_transitions=<x>
fire_slowdown_vs_handwritten=<x>``.
"""

from __future__ import annotations

import argparse
import threading
import timeit
from collections.abc import Callable
from typing import Any

from statecore import Event, Field, Instance, Machine, State, Transition, Var

FIRES_PER_CYCLE = 4  # enqueue, begin, put(ok=False) (refused by the guard), put(ok=True)


def statecore_impl() -> tuple[Callable[[], Any], Callable[[Any], None]]:
    machine = Machine(
        "sender",
        states=[
            State("idle", initial=True),
            State("queued"),
            State("in_flight", hot=True),
            State("sent", final=True),
            State("cancelled", final=True),
        ],
        variables=[Var("puts", range(2), 0)],
        events=[
            Event("enqueue"),
            Event("begin"),
            Event("put", [Field("ok", (True, False))]),
            Event("cancel"),
        ],
        transitions=[
            Transition("idle", "enqueue", "queued"),
            Transition("queued", "begin", "in_flight"),
            Transition(
                "in_flight",
                "put",
                "sent",
                guard=lambda s, p: p["ok"],
                effect=lambda s, p: {"puts": s.puts + 1},
            ),
            Transition(("idle", "queued", "in_flight"), "cancel", "cancelled"),
        ],
    )

    def create() -> Instance:
        return Instance(machine)

    def drive(inst: Instance) -> None:
        inst.fire("enqueue")
        inst.fire("begin")
        inst.fire("put", ok=False)
        inst.fire("put", ok=True)

    return create, drive


def transitions_impl() -> tuple[Callable[[], Any], Callable[[Any], None]]:
    from transitions import Machine as TMachine

    class Model:
        def __init__(self) -> None:
            self.puts = 0

        def is_ok(self, ok: bool = False) -> bool:
            return ok

        def count_put(self, ok: bool = False) -> None:
            self.puts += 1

    states = ["idle", "queued", "in_flight", "sent", "cancelled"]
    table = [
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

    def create() -> Any:
        model = Model()
        TMachine(model=model, states=states, transitions=table, initial="idle")
        return model

    def drive(model: Any) -> None:
        model.enqueue()
        model.begin()
        model.put(ok=False)
        model.put(ok=True)

    return create, drive


def python_statemachine_impl() -> tuple[Callable[[], Any], Callable[[Any], None]]:
    from statemachine import State as PState
    from statemachine import StateMachine

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

        def is_ok(self, ok: bool = False) -> bool:
            return ok

        def on_put(self) -> None:
            self.puts += 1

    def drive(sm: Any) -> None:
        sm.send("enqueue")
        sm.send("begin")
        sm.send("put", ok=False)
        sm.send("put", ok=True)

    return Sender, drive


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

    def put(self, ok: bool) -> bool:
        with self._lock:
            if self.state == "in_flight" and ok:
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


def handwritten_impl() -> tuple[Callable[[], Any], Callable[[Any], None]]:
    def drive(obj: HandWritten) -> None:
        obj.enqueue()
        obj.begin()
        obj.put(ok=False)
        obj.put(ok=True)

    return HandWritten, drive


def measure(
    create: Callable[[], Any], drive: Callable[[Any], None], number: int, repeat: int
) -> tuple[float, float]:
    """Return (µs per fire, µs per creation), best of `repeat` runs."""

    def create_only() -> None:
        create()

    def cycle() -> None:
        drive(create())

    create_s = min(timeit.repeat(create_only, number=number, repeat=repeat)) / number
    cycle_s = min(timeit.repeat(cycle, number=number, repeat=repeat)) / number
    fire_s = max(cycle_s - create_s, 1e-12) / FIRES_PER_CYCLE
    return fire_s * 1e6, create_s * 1e6


def check_equivalence() -> None:
    """All four implementations end in the same state with one put counted."""
    for name, factory in IMPLS.items():
        create, drive = factory()
        obj = create()
        drive(obj)
        state = obj.current_state_value if hasattr(obj, "current_state_value") else obj.state
        puts = obj.snapshot.puts if isinstance(obj, Instance) else obj.puts
        if str(state) not in ("sent",) or puts != 1:
            raise SystemExit(f"{name}: ended in {state!r} with puts={puts}, expected sent/1")


IMPLS: dict[str, Callable[[], tuple[Callable[[], Any], Callable[[Any], None]]]] = {
    "statecore": statecore_impl,
    "transitions": transitions_impl,
    "python-statemachine": python_statemachine_impl,
    "hand-written": handwritten_impl,
}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="fewer iterations")
    args = parser.parse_args()
    check_equivalence()
    fast_n, slow_n, repeat = (2_000, 200, 3) if args.quick else (50_000, 2_000, 5)
    results: dict[str, tuple[float, float]] = {}
    print(f"{'implementation':<22}{'µs/fire':>10}{'µs/create':>12}")
    for name, factory in IMPLS.items():
        create, drive = factory()
        number = slow_n if name in ("transitions", "python-statemachine") else fast_n
        results[name] = measure(create, drive, number, repeat)
        fire_us, create_us = results[name]
        print(f"{name:<22}{fire_us:>10.3f}{create_us:>12.3f}")
    sc_fire, sc_create = results["statecore"]
    tr_fire, tr_create = results["transitions"]
    hw_fire, _ = results["hand-written"]
    print(
        f"RESULT fire_speedup_vs_transitions={tr_fire / sc_fire:.1f} "
        f"create_speedup_vs_transitions={tr_create / sc_create:.1f} "
        f"fire_slowdown_vs_handwritten={sc_fire / hw_fire:.2f}"
    )


if __name__ == "__main__":
    main()
