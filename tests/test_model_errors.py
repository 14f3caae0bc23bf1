"""A model that misbehaves, and a search that is stopped, still give a clear answer.

An action or a property that raises, or an action that is not deterministic,
stops `explore` with a `ModelError` naming the culprit, carrying the trace
that reached the state and the original exception. Ctrl-C and the state and
memory bounds stop it with a partial report whose undecided verdicts are
``unknown``.
"""

from __future__ import annotations

import itertools
import random
from collections.abc import Hashable, Mapping
from typing import Any

import pytest

from statecore import Event, Machine, State, Transition, out
from statecore.check.explore import (
    HOLDS,
    UNKNOWN,
    VIOLATED,
    ExplorationInterrupted,
    explore,
    resident_memory,
)
from statecore.errors import (
    ActionRaisedError,
    ModelError,
    NondeterministicActionError,
    PropertyRaisedError,
)
from statecore.properties import always, eventually, monitor, sometimes
from statecore.system import Action, ActionLabel, Component, Emitted, Global, Keys, System, Tx

JOBS = Keys("job", 2)

JOB = Machine(
    "job",
    states=[State("queued", initial=True), State("running"), State("done", final=True)],
    events=[Event("start"), Event("stop")],
    transitions=[
        Transition("queued", "start", "running", emit=[out("started")]),
        Transition("running", "stop", "done"),
    ],
)


def start(tx: Tx, job: Hashable) -> None:
    tx.require(tx.fire(("job", job), "start").accepted)
    tx.set("ticks", min(tx.get("ticks") + 1, 3))


def stop(tx: Tx, job: Hashable) -> None:
    tx.require(tx.fire(("job", job), "stop").accepted)


def spawn_jobs(tx: Tx) -> None:
    for job in JOBS.values:
        tx.spawn("job", job)


def jobs(*extra: Action, properties: tuple[Any, ...] = (), init: Any = spawn_jobs) -> System:
    return System(
        "jobs",
        components=[Component("job", JOB, JOBS)],
        globals=[Global("ticks", 0)],
        actions=[
            Action("start", "scheduler", start, {"job": JOBS}),
            Action("stop", "scheduler", stop, {"job": JOBS}),
            *extra,
        ],
        init=init,
        properties=properties,
    )


def running(view: Any) -> int:
    return sum(1 for _, snap in view.live("job") if snap.state == "running")


# -- an action or a property that raises ---------------------------------------------------


@pytest.mark.parametrize("symmetry", [True, False])
def test_an_action_that_raises_is_reported_with_its_trace(symmetry: bool) -> None:
    def audit(tx: Tx) -> None:
        if tx.get("ticks") == 2:
            raise ZeroDivisionError("audit divided by zero")
        tx.require(False)

    system = jobs(Action("audit", "auditor", audit))
    with pytest.raises(ActionRaisedError) as raised:
        explore(system, symmetry=symmetry)
    error = raised.value
    first, *table = str(error).splitlines()
    assert "action audit()" in first and "ZeroDivisionError('audit divided by zero')" in first
    assert isinstance(error.__cause__, ZeroDivisionError)
    assert error.trace is not None and len(error.trace) == 2  # two starts reach ticks == 2
    assert error.trace.steps[-1].state.values == (2,)
    assert any("start(job=" in line for line in table)


def test_an_init_that_raises_is_reported() -> None:
    def broken(tx: Tx) -> None:
        raise KeyError("config")

    with pytest.raises(ActionRaisedError, match=r"init raised KeyError\('config'\)"):
        explore(jobs(init=broken))


@pytest.mark.parametrize(
    "prop",
    [
        always("boom", "raises at two running", lambda v: 1 // (2 - running(v)) >= 0),
        always(
            "boom", "condition raises", lambda v: True, when=lambda v: 1 // (2 - running(v)) > 0
        ),
        sometimes("boom", "raises at two running", lambda v: 1 // (2 - running(v)) < 0),
        eventually("boom", "raises at quiescence", lambda v: 1 // (2 - running(v)) >= 0),
    ],
    ids=["always", "when", "sometimes", "eventually"],
)
def test_a_property_that_raises_is_reported_with_its_trace(prop: Any) -> None:
    with pytest.raises(PropertyRaisedError) as raised:
        explore(jobs(properties=(prop,)), stop_on_violation=False)
    error = raised.value
    first = str(error).splitlines()[0]
    assert "property 'boom' raised ZeroDivisionError" in first
    assert isinstance(error.__cause__, ZeroDivisionError)
    last = error.trace.steps[-1].state  # type: ignore[attr-defined]
    assert sum(1 for slot in last.slots if slot.snapshot.state == "running") == 2


def test_a_monitor_router_that_raises_is_reported() -> None:
    def route(emitted: Emitted) -> tuple[Hashable, str, Mapping[str, Any]] | None:
        raise RuntimeError("router bug")

    watch = Machine(
        "watch",
        states=[State("idle", initial=True), State("seen")],
        events=[Event("started")],
        transitions=[Transition("idle", "started", "seen")],
    )
    with pytest.raises(PropertyRaisedError) as raised:
        explore(jobs(properties=(monitor("watch", "router raises", watch, route),)))
    assert "its router of property 'watch' raised RuntimeError('router bug')" in str(raised.value)
    assert "on the outputs of start(job=" in str(raised.value)


# -- an action that is not deterministic --------------------------------------------------


def test_an_action_reading_a_counter_of_its_own_is_not_deterministic() -> None:
    calls = itertools.count()

    def tick(tx: Tx) -> None:
        tx.require(tx.get("ticks") < 3)
        tx.set("ticks", min(3, tx.get("ticks") + next(calls) % 2 + 1))

    with pytest.raises(NondeterministicActionError) as raised:
        explore(jobs(Action("tick", "clock", tick)), symmetry=False)
    first = str(raised.value).splitlines()[0]
    assert "action tick() is not deterministic" in first
    assert "the globals written differ" in first
    assert raised.value.trace is not None


@pytest.mark.parametrize("seed", range(5))
def test_an_action_reading_random_is_reported_not_a_flipping_verdict(seed: int) -> None:
    rng = random.Random(seed)

    def flaky(tx: Tx, job: Hashable) -> None:
        tx.require(tx.live(("job", job)))
        tx.require(rng.random() < 0.5, "coin")
        tx.fire(("job", job), "start")

    with pytest.raises(NondeterministicActionError, match=r"action flaky\(job=job\d\) is not"):
        explore(jobs(Action("flaky", "chaos", flaky, {"job": JOBS})))


# -- stopping early ------------------------------------------------------------------------

DONE = sometimes(
    "both_done", "both jobs finish", lambda v: all(s.state == "done" for _, s in v.live("job"))
)
ANY_RUNNING = sometimes("one_runs", "a job runs", lambda v: running(v) >= 1)


def test_ctrl_c_gives_the_partial_report() -> None:
    calls = itertools.count()

    def done_or_interrupt(view: Any) -> bool:
        if next(calls) == 5:  # the user presses Ctrl-C while the search runs
            raise KeyboardInterrupt
        return all(s.state == "done" for _, s in view.live("job"))

    slow_done = sometimes("both_done", "both jobs finish", done_or_interrupt)
    with pytest.raises(ExplorationInterrupted) as raised:
        explore(jobs(properties=(ANY_RUNNING, slow_done)), stop_on_violation=False)
    assert isinstance(raised.value, KeyboardInterrupt)
    report = raised.value.report
    assert report.stop == "interrupted" and not report.complete and not report.ok
    assert report.states >= 2
    assert report.result("one_runs").verdict == HOLDS  # decided at depth 1, before the stop
    assert report.result("both_done").verdict == UNKNOWN
    assert report.result("both_done").detail == "undecided: the search was interrupted"


def test_the_memory_bound_stops_the_search_with_unknown_verdicts() -> None:
    report = explore(jobs(properties=(DONE,)), max_memory=1, stop_on_violation=False)
    assert report.stop == "max_memory" and not report.complete
    assert report.result("both_done").verdict == UNKNOWN
    assert "memory bound" in report.result("both_done").detail
    assert resident_memory() > 1


def test_the_state_bound_says_which_bound_stopped_it() -> None:
    report = explore(jobs(properties=(DONE,)), max_states=3, stop_on_violation=False)
    assert report.stop == "max_states" and not report.complete and report.states == 3
    assert report.result("both_done").detail == "undecided: the search hit its state bound"


def test_a_finished_search_has_no_stop_and_a_violation_stop_is_named() -> None:
    never = always("never_two", "never two running", lambda v: running(v) < 2)
    finished = explore(jobs(properties=(DONE,)))
    assert finished.complete and finished.stop == ""
    stopped = explore(jobs(properties=(never, DONE)))
    assert stopped.result("never_two").verdict == VIOLATED
    assert stopped.stop == "violation" or stopped.complete


@pytest.mark.parametrize("bound", [{"max_states": 0}, {"max_states": -1}, {"max_memory": 0}])
def test_non_positive_bounds_are_refused(bound: dict[str, int]) -> None:
    with pytest.raises(ValueError, match="must be positive"):
        explore(jobs(), **bound)


def test_model_errors_are_definition_errors_the_cli_reports() -> None:
    from statecore.errors import DefinitionError

    assert issubclass(ModelError, DefinitionError)
    assert ActionLabel("tick") == ActionLabel("tick", ())


# -- a stuttering internal action is no progress -------------------------------------------


def test_an_internal_action_that_only_stutters_does_not_hide_a_resting_state() -> None:
    def poll(tx: Tx) -> None:
        tx.get("ticks")  # the save thread finds nothing to do and polls again

    both_done = eventually(
        "both_done", "every job ends", lambda v: all(s.state == "done" for _, s in v.live("job"))
    )
    system = jobs(Action("poll", "save_thread", poll, internal=True), properties=(both_done,))
    report = explore(system, stop_on_violation=False)
    result = report.result("both_done")
    # Without the stutter rule no state would be quiescent and the property vacuous.
    assert result.verdict == VIOLATED and result.trace is not None
    assert len(result.trace) == 0  # the initial state already rests with two queued jobs


def test_the_fuzzer_agrees_a_stutter_is_rest_not_a_livelock() -> None:
    from statecore.adapter import SystemAdapter
    from statecore.fuzzing.fuzz import fuzz

    def poll(tx: Tx) -> None:
        tx.get("ticks")

    settles = eventually("settles", "ticks stay bounded", lambda v: v.get("ticks") <= 3)
    system = jobs(Action("poll", "save_thread", poll, internal=True), properties=(settles,))
    assert explore(system).ok
    report = fuzz(system, lambda: SystemAdapter(system), max_examples=10, seed=0)
    assert report.finding is None, report.finding
