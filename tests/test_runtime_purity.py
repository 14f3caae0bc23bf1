"""The purity contract: ``pure=False`` bypasses the memo; `verify_memo` catches impurity."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Iterator
from typing import Any

import pytest

from statecore import Event, Instance, Machine, State, Transition, Var, runtime, step
from statecore.errors import ImpureCallbackError
from statecore.runtime import verify_memo


@pytest.fixture
def verifying() -> Iterator[None]:
    """Verify every memo hit during the test; restore the setting afterwards."""
    previous = verify_memo(1)
    yield
    verify_memo(previous)


@pytest.fixture
def not_verifying() -> Iterator[None]:
    previous = verify_memo(0)
    yield
    verify_memo(previous)


class Calls:
    """An effect that counts its calls: impure on purpose."""

    def __init__(self) -> None:
        self.count = 0

    def __call__(self, s: Any, p: Any) -> dict[str, int]:
        self.count += 1
        return {"n": self.count % 4}


def counting(calls: Calls, *, event_pure: bool = True, machine_pure: bool = True) -> Machine:
    return Machine(
        "counting",
        states=[State("idle", initial=True), State("done")],
        variables=[Var("n", range(4), 0)],
        events=[Event("go", pure=event_pure)],
        transitions=[Transition("idle", "go", "done", effect=calls, effect_label="count_call")],
        pure=machine_pure,
    )


@pytest.mark.parametrize(("event_pure", "machine_pure"), [(False, True), (True, False)])
def test_impure_event_or_machine_runs_step_on_every_fire(
    event_pure: bool, machine_pure: bool
) -> None:
    calls = Calls()
    machine = counting(calls, event_pure=event_pure, machine_pure=machine_pure)
    calls.count = 0
    fired = [Instance(machine).fire("go").snapshot.n for _ in range(3)]
    calls.count = 0
    stepped = [step(machine, machine.initial_snapshot(), "go").snapshot.n for _ in range(3)]
    assert fired == stepped == [1, 2, 3]


class Clock:
    def __init__(self) -> None:
        self.now = 0.0


def deadline_machine(clock: Clock, *, pure: bool) -> Machine:
    def before_deadline(s: Any, p: Any) -> bool:
        return clock.now < 10.0

    return Machine(
        "deadline",
        states=[State("open", initial=True)],
        events=[Event("send", pure=pure)],
        transitions=[Transition("open", "send", None, guard=before_deadline)],
    )


def test_impure_guard_sees_the_deadline_pass(not_verifying: None) -> None:
    clock = Clock()
    inst = Instance(deadline_machine(clock, pure=False))
    assert inst.fire("send").accepted
    clock.now = 20.0
    assert inst.fire("send").status == "rejected"


def test_verify_memo_names_the_impure_guard(verifying: None) -> None:
    clock = Clock()
    inst = Instance(deadline_machine(clock, pure=True))
    assert inst.fire("send").accepted  # computed and remembered
    assert inst.fire("send").accepted  # a memo hit that step agrees with
    clock.now = 20.0
    with pytest.raises(ImpureCallbackError) as caught:
        inst.fire("send")
    message = str(caught.value)
    assert "\n" not in message
    assert "machine 'deadline'" in message
    assert "guard 'before_deadline' of transition 'open--send-->(same)'" in message
    assert "pure=False" in message


def test_verify_memo_names_the_impure_effect(verifying: None) -> None:
    calls = Calls()
    machine = counting(calls)
    assert Instance(machine).fire("go").accepted
    with pytest.raises(ImpureCallbackError, match="effect 'count_call' of transition"):
        Instance(machine).fire("go")


def test_verify_memo_samples_every_nth_hit() -> None:
    calls = Calls()
    machine = counting(calls)
    previous = verify_memo(3)
    try:
        Instance(machine).fire("go")  # computed: not a hit
        Instance(machine).fire("go")  # hit 1
        Instance(machine).fire("go")  # hit 2
        with pytest.raises(ImpureCallbackError):
            Instance(machine).fire("go")  # hit 3: checked
    finally:
        verify_memo(previous)


def test_verification_off_leaves_the_fast_fire(not_verifying: None) -> None:
    assert Instance.fire is runtime._fast_fire
    calls = Calls()
    machine = counting(calls)
    results = {Instance(machine).fire("go").snapshot.n for _ in range(3)}
    assert len(results) == 1  # pure by declaration: remembered, as the contract says


@pytest.mark.parametrize("every", [-1, True, "1"])
def test_verify_memo_rejects_what_is_not_a_count(every: Any) -> None:
    with pytest.raises(ValueError, match="verify_memo"):
        verify_memo(every)


SCRIPT = """
from statecore import Event, Instance, Machine, State, Transition
box = [0]
def clocked(s, p):
    return box[0] == 0
m = Machine("m", states=[State("a", initial=True)], events=[Event("e")],
            transitions=[Transition("a", "e", None, guard=clocked)])
Instance(m).fire("e")
box[0] = 1
try:
    Instance(m).fire("e")
except Exception as exc:
    print(type(exc).__name__)
else:
    print("silent")
"""


@pytest.mark.parametrize(("value", "expected"), [("1", "ImpureCallbackError"), ("0", "silent")])
def test_environment_variable_turns_verification_on(value: str, expected: str) -> None:
    env = {**os.environ, "STATECORE_VERIFY_MEMO": value}
    result = subprocess.run(
        [sys.executable, "-c", SCRIPT], env=env, capture_output=True, text=True, timeout=60
    )
    assert result.stdout.strip() == expected, result.stderr


def test_environment_variable_must_be_a_count() -> None:
    env = {**os.environ, "STATECORE_VERIFY_MEMO": "yes"}
    result = subprocess.run(
        [sys.executable, "-c", "import statecore"],
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert result.returncode != 0
    assert "STATECORE_VERIFY_MEMO='yes'" in result.stderr
