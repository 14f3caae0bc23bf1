"""The runtime `Instance`: listeners, re-entrancy, thread safety, import hygiene."""

from __future__ import annotations

import json
import subprocess
import sys
import threading
import warnings
from collections.abc import Callable
from typing import Any

import pytest

from statecore import (
    ACCEPTED,
    Event,
    Field,
    FireError,
    Instance,
    Machine,
    Outcome,
    State,
    Transition,
    TransitionError,
    Var,
    out,
    step,
)
from statecore.errors import (
    InvalidNameError,
    ListenerError,
    ReentrantFireError,
    ValidationLimitWarning,
)


def switch() -> Machine:
    return Machine(
        "switch",
        states=[State("off", initial=True), State("on"), State("gone", final=True)],
        variables=[Var("flips", range(3), default=0)],
        events=[
            Event("flip", [Field("hard", (False, True))]),
            Event("hold", policy="ignore"),
            Event("press"),
            Event("remove", policy="error"),
        ],
        transitions=[
            Transition(
                "off",
                "flip",
                "on",
                effect=lambda s, p: {"flips": (s.flips + 1) % 3},
                emit=[out("light", on=True)],
            ),
            Transition("on", "flip", "off", guard=lambda s, p: p["hard"]),
            Transition("off", "press", "on"),
            Transition("on", "hold"),
            Transition("on", "remove", "gone"),
        ],
    )


Call = tuple[Instance, Outcome, object]


def recorder(calls: list[Call]) -> Callable[[Instance, Outcome], None]:
    """A listener that records its arguments and the instance's snapshot at call time."""

    def listener(instance: Instance, outcome: Outcome) -> None:
        calls.append((instance, outcome, instance.snapshot))

    return listener


def test_fire_returns_outcome_and_commits() -> None:
    instance = Instance(switch())
    outcome = instance.fire("flip", hard=False)
    assert outcome.status == ACCEPTED
    assert outcome.outputs == (out("light", on=True),)
    assert instance.state == "on"
    assert instance.snapshot.flips == 1
    assert instance.snapshot is not None and not instance.is_final
    assert repr(instance) == "Instance(switch(state='on', flips=1))"


def test_instances_are_independent() -> None:
    machine = switch()
    a, b = Instance(machine), Instance(machine)
    a.fire("flip", hard=False)
    assert a.state == "on"
    assert b.state == "off"


def test_instance_from_a_given_snapshot() -> None:
    machine = switch()
    instance = Instance(machine, machine.snapshot("on", flips=2))
    assert instance.fire("remove").accepted
    assert instance.is_final
    assert instance.snapshot == machine.snapshot("gone", flips=2)


def test_listeners_called_after_commit_only_on_accepted() -> None:
    calls: list[Call] = []
    instance = Instance(switch(), listeners=(recorder(calls),))
    assert instance.fire("flip", hard=False).accepted  # off -> on
    assert instance.fire("flip", hard=False).status == "rejected"  # guard fails
    assert instance.fire("press").status == "rejected"  # no transition from on
    assert instance.fire("hold").accepted  # self-loop
    assert len(calls) == 2
    for got_instance, outcome, seen in calls:
        assert got_instance is instance
        assert outcome.accepted
        assert seen == outcome.snapshot  # committed before the listener ran
    assert calls[0][1].event == "flip"
    assert calls[1][1].event == "hold"


def test_listener_not_called_on_ignored_or_error() -> None:
    calls: list[Call] = []
    instance = Instance(switch(), listeners=(recorder(calls),))
    assert instance.fire("hold").status == "ignored"
    with pytest.raises(TransitionError):
        instance.fire("remove")
    with pytest.raises(FireError):
        instance.fire("flip")
    assert calls == []
    assert instance.state == "off"


def test_add_and_remove_listener() -> None:
    first: list[Call] = []
    second: list[Call] = []
    listener_1, listener_2 = recorder(first), recorder(second)
    instance = Instance(switch())
    instance.add_listener(listener_1)
    instance.fire("press")
    instance.add_listener(listener_2)
    instance.fire("flip", hard=True)
    instance.remove_listener(listener_1)
    instance.fire("press")
    instance.remove_listener(listener_1)  # not registered any more: a no-op
    instance.remove_listener(listener_2)
    instance.fire("flip", hard=True)
    assert [c[1].event for c in first] == ["press", "flip"]
    assert [c[1].event for c in second] == ["flip", "press"]


def test_listeners_run_in_registration_order() -> None:
    order: list[str] = []
    instance = Instance(switch())
    instance.add_listener(lambda i, o: order.append("a"))
    instance.add_listener(lambda i, o: order.append("b"))
    instance.fire("press")
    assert order == ["a", "b"]


def run_with_timeout(fn: Callable[[], None], seconds: float = 10.0) -> None:
    """Run `fn` on a daemon thread; fail (rather than hang) if it deadlocks."""
    errors: list[BaseException] = []

    def target() -> None:
        try:
            fn()
        except BaseException as exc:  # reported below
            errors.append(exc)

    thread = threading.Thread(target=target, daemon=True)
    thread.start()
    thread.join(seconds)
    assert not thread.is_alive(), "deadlock: the call did not return"
    if errors:
        raise errors[0]


def test_listener_firing_on_the_same_instance_does_not_deadlock() -> None:
    seen: list[str] = []

    def bounce(instance: Instance, outcome: Outcome) -> None:
        seen.append(outcome.snapshot.state)
        if outcome.snapshot.state == "on" and outcome.event == "press":
            instance.fire("flip", hard=True)  # on -> off, from inside the listener

    instance = Instance(switch(), listeners=(bounce,))
    run_with_timeout(lambda: instance.fire("press"))
    assert seen == ["on", "off"]
    assert instance.state == "off"


def fires_back(holder: list[Instance], where: str) -> Machine:
    """A machine whose guard, effect or emitter fires on the instance in `holder`."""

    def callback(s: object, p: object) -> Any:
        if holder:
            holder[0].fire("press")
        return {"guard": True, "effect": None, "emit": ()}[where]

    kwargs: dict[str, Any] = {where: callback}
    return Machine(
        "bouncer",
        states=[State("off", initial=True), State("on")],
        events=[Event("flip"), Event("press")],
        transitions=[Transition("off", "flip", "on", **kwargs), Transition("off", "press", "on")],
    )


@pytest.mark.parametrize("where", ["guard", "effect", "emit"])
def test_fire_from_inside_a_step_raises_instead_of_deadlocking(where: str) -> None:
    holder: list[Instance] = []
    instance = Instance(fires_back(holder, where))
    holder.append(instance)

    def fire() -> None:
        with pytest.raises(ReentrantFireError, match="machine 'bouncer'"):
            instance.fire("flip")

    run_with_timeout(fire)
    assert instance.state == "off"  # nothing committed
    run_with_timeout(lambda: instance.fire("press"))  # and the lock was released
    assert instance.state == "on"


def test_a_step_may_fire_on_another_instance() -> None:
    holder: list[Instance] = []
    machine = fires_back(holder, "effect")
    other, instance = Instance(machine), Instance(machine)
    holder.append(other)
    run_with_timeout(lambda: instance.fire("flip"))
    assert instance.state == other.state == "on"


def test_a_guard_may_add_a_listener_without_deadlocking() -> None:
    instances: list[Instance] = []

    def adds_listener(s: object, p: object) -> bool:
        for inst in instances:
            inst.add_listener(lambda i, o: None)
        return True

    machine = Machine(
        "adder",
        states=[State("off", initial=True), State("on")],
        events=[Event("flip")],
        transitions=[Transition("off", "flip", "on", guard=adds_listener)],
    )
    instance = Instance(machine)
    instances.append(instance)
    run_with_timeout(lambda: instance.fire("flip"))
    assert instance.state == "on"


def test_every_listener_runs_and_their_errors_are_raised_together() -> None:
    seen: list[str] = []

    def boom(instance: Instance, outcome: Outcome) -> None:
        raise ValueError("boom")

    def record(instance: Instance, outcome: Outcome) -> None:
        seen.append(outcome.event)

    def crash(instance: Instance, outcome: Outcome) -> None:
        raise KeyError("crash")

    instance = Instance(switch(), listeners=(boom, record, crash))
    with pytest.raises(ListenerError) as caught:
        instance.fire("press")
    assert seen == ["press"]  # the listener after the failing one still ran
    assert instance.state == "on"  # the transition stands
    error = caught.value
    assert [type(e) for e in error.errors] == [ValueError, KeyError]
    assert error.__cause__ is error.errors[0]
    assert isinstance(error.outcome, Outcome) and error.outcome.snapshot == instance.snapshot
    message = str(error)
    assert "\n" not in message and "machine 'switch'" in message
    assert "boom raised ValueError: boom" in message and "crash raised KeyError" in message
    # The next fire runs every listener again.
    with pytest.raises(ListenerError):
        instance.fire("flip", hard=True)
    assert seen == ["press", "flip"]


def test_can_fire() -> None:
    instance = Instance(switch())
    assert instance.can_fire("press")
    assert instance.can_fire("flip", hard=False)
    assert not instance.can_fire("hold")
    instance.fire("press")
    assert not instance.can_fire("flip", hard=False)
    assert instance.can_fire("flip", hard=True)
    assert instance.state == "on"  # can_fire does not fire


THREADS = 8
FIRES = 10_000
TOTAL = THREADS * FIRES


def counter() -> Machine:
    """Counts to TOTAL; check_limit keeps validation from exploring 80,001 snapshots.

    Validation warns that it stopped there; that is the point, so the warning is muted.
    """
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ValidationLimitWarning)
        return _counter()


def _counter() -> Machine:
    return Machine(
        "counter",
        states=[State("counting", initial=True)],
        variables=[Var("n", range(TOTAL + 1), default=0)],
        events=[Event("tick")],
        transitions=[
            Transition(
                "counting",
                "tick",
                guard=lambda s, p: s.n < TOTAL,
                effect=lambda s, p: {"n": s.n + 1},
            )
        ],
        check_limit=100,
    )


def test_counter_machine_validates() -> None:
    counter()  # check_limit bounds the work; timed in benchmarks/explore.py


def test_thread_stress_no_lost_or_double_transitions() -> None:
    machine = counter()
    seen: list[int] = []
    instance = Instance(machine, listeners=(lambda i, o: seen.append(o.snapshot.n),))
    accepted = [0] * THREADS
    errors: list[BaseException] = []
    barrier = threading.Barrier(THREADS)

    def worker(index: int) -> None:
        try:
            barrier.wait()
            count = 0
            for _ in range(FIRES):
                if instance.fire("tick").accepted:
                    count += 1
            accepted[index] = count
        except BaseException as exc:  # reported below
            errors.append(exc)

    threads = [threading.Thread(target=worker, args=(i,)) for i in range(THREADS)]
    previous = sys.getswitchinterval()
    sys.setswitchinterval(1e-5)  # switch threads often, to provoke races
    try:
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join(60)
    finally:
        sys.setswitchinterval(previous)
    assert errors == []
    assert not any(thread.is_alive() for thread in threads)
    assert sum(accepted) == TOTAL
    assert instance.snapshot.n == TOTAL
    # Each value 1..TOTAL was committed by exactly one transition.
    assert len(seen) == TOTAL
    assert sorted(seen) == list(range(1, TOTAL + 1))
    # One more is rejected: the guard stops at the end of the domain.
    assert instance.fire("tick").status == "rejected"


def test_concurrent_instances_sharing_a_machine() -> None:
    """Separate instances, separate locks, one shared memo."""
    machine = counter()
    instances = [Instance(machine) for _ in range(THREADS)]
    barrier = threading.Barrier(THREADS)

    def worker(instance: Instance) -> None:
        barrier.wait()
        for _ in range(2_000):
            instance.fire("tick")

    threads = [threading.Thread(target=worker, args=(i,)) for i in instances]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(60)
    assert [i.snapshot.n for i in instances] == [2_000] * THREADS


HEAVY = ("hypothesis", "crosshair", "transitions", "torch", "vllm")


def test_import_statecore_stays_light() -> None:
    code = (
        "import json, sys, statecore\n"
        f"heavy = {HEAVY!r}\n"
        "print(json.dumps(sorted(m for m in sys.modules if m.split('.')[0] in heavy)))\n"
    )
    result = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True, timeout=60
    )
    assert json.loads(result.stdout) == []


# -- regressions ----------------------------------------------------------------


def _typed_machine() -> Machine:
    """Tells True from 1 in its emitter: the memo must too."""
    return Machine(
        "typed",
        states=[State("idle", initial=True)],
        events=[Event("go", [Field("x", (1, True, 2))])],
        transitions=[
            Transition(
                "idle",
                "go",
                None,
                emit=lambda s, p: [out("seen", kind=type(p["x"]).__name__)],
            )
        ],
    )


def test_memo_keeps_equal_payloads_of_different_types_apart() -> None:
    machine = _typed_machine()
    inst = Instance(machine)
    assert inst.fire("go", x=True).outputs == (out("seen", kind="bool"),)
    assert inst.fire("go", x=1).outputs == (out("seen", kind="int"),)
    assert step(machine, inst.snapshot, "go", {"x": 1}).outputs == (out("seen", kind="int"),)


def test_can_fire_rejects_undeclared_events_and_wrong_payloads() -> None:
    inst = Instance(_typed_machine())
    with pytest.raises(FireError, match="no event 'nope'"):
        inst.can_fire("nope")
    with pytest.raises(FireError, match="missing"):
        inst.can_fire("go")
    assert inst.can_fire("go", x=2)


def test_keywords_are_not_names() -> None:
    with pytest.raises(InvalidNameError, match="'class'"):
        Machine(
            "class",
            states=[State("a", initial=True)],
            events=[Event("e")],
            transitions=[Transition("a", "e")],
        )


def test_a_machines_memo_goes_with_it_and_a_new_machine_starts_empty() -> None:
    import gc

    from statecore.memo import MEMOS, memo_size

    ids = set()
    for _ in range(50):  # a dead machine's id is soon reused: its memo must not be
        machine = switch()
        assert memo_size(machine) == 0
        Instance(machine).fire("flip", hard=True)
        assert memo_size(machine) > 0
        ids.add(id(machine))
        del machine
        gc.collect()
    assert not ids & set(MEMOS)
