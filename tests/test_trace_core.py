"""The trace core: `statecore.traces.path` replays actions, `statecore.traces.judge` judges a path.

Every tool that follows actions or judges a property along a path goes
through these two modules, so they are tested here once, directly, on a
small system: the one not-enabled error, the lenient stop, the explorer's
notion of rest (a stuttering internal action is rest, not progress) in a
replay, and the overview's refusal to hide a model error.
"""

from __future__ import annotations

from typing import Any

import pytest

from statecore import Event, Machine, State, Transition
from statecore.check.explore import VIOLATED, explore
from statecore.errors import ActionError, FireError
from statecore.properties import always, eventually
from statecore.render.diagram import system_overview_dot
from statecore.system import Action, ActionLabel, Component, Global, Keys, System, Tx
from statecore.traces.judge import HOLDS, judge_path
from statecore.traces.path import NotEnabledError, follow, take
from statecore.traces.replay import replay_actions

JOBS = Keys("job", 1)
JOB = Machine(
    "job",
    states=[State("queued", initial=True), State("running"), State("done", final=True)],
    events=[Event("start"), Event("stop")],
    transitions=[
        Transition("queued", "start", "running"),
        Transition("running", "stop", "done"),
    ],
)
START = ActionLabel("start", (("job", JOBS.values[0]),))
STOP = ActionLabel("stop", (("job", JOBS.values[0]),))


def _fire(event: str) -> Any:
    def run(tx: Tx[Any], job: Any) -> None:
        tx.require(tx.fire(("job", job), event).accepted)

    return run


def _spawn(tx: Tx[Any]) -> None:
    tx.spawn("job", JOBS.values[0])


def _poll(tx: Tx[Any]) -> None:
    tx.get("ticks")  # finds nothing to do: a stutter


def jobs(*extra: Action, properties: tuple[Any, ...] = ()) -> System:
    return System(
        "jobs",
        components=[Component("job", JOB, JOBS)],
        globals=[Global("ticks", 0)],
        actions=[
            Action("start", "scheduler", _fire("start"), {"job": JOBS}),
            Action("stop", "scheduler", _fire("stop"), {"job": JOBS}),
            *extra,
        ],
        init=_spawn,
        properties=properties,
    )


def done(view: Any) -> bool:
    return all(snap.state == "done" for _, snap in view.live("job"))


def test_follow_replays_actions_and_stops_where_one_is_not_enabled() -> None:
    system = jobs()
    path = follow(system, [START, STOP])
    assert path.blocked is None and [s.action for s in path.steps] == [START, STOP]
    assert path.trace().actions == (START, STOP) and len(path.trace_steps) == 3
    with pytest.raises(NotEnabledError) as raised:
        follow(system, [STOP])
    error = raised.value
    assert isinstance(error, ActionError)  # what callers caught before still catches it
    assert error.index == 1 and error.label == STOP
    assert str(error) == str(error.cause)  # the model's own message, unchanged
    assert error.reason.startswith(f"{STOP} is not enabled (")
    stopped = follow(system, [START, START, STOP], stop=True)
    assert stopped.blocked is not None and stopped.blocked.index == 2
    assert [s.action for s in stopped.steps] == [START]


def test_take_names_the_step() -> None:
    system = jobs()
    with pytest.raises(NotEnabledError) as raised:
        take(system, system.init_states()[0], STOP, 7)
    assert raised.value.index == 7


def test_a_replay_judges_rest_as_the_explorer_does() -> None:
    """A stuttering internal action is rest: replay and explorer agree on the violation."""
    finished = eventually("finished", "every job ends", done)
    system = jobs(Action("poll", "save_thread", _poll, internal=True), properties=(finished,))
    found = explore(system).result("finished")
    assert found.verdict == VIOLATED and found.trace is not None
    replayed = replay_actions(system, found.trace.actions, "finished")
    assert (replayed.verdict, replayed.detail) == (found.verdict, found.detail)


def test_judge_path_words_an_invariant_by_its_step() -> None:
    never_running = always(
        "never_running",
        "no job runs",
        lambda v: all(s.state != "running" for _, s in v.live("job")),
    )
    system = jobs(properties=(never_running,))
    steps = follow(system, [START, STOP]).trace_steps
    assert judge_path(system, never_running, steps) == (
        VIOLATED,
        "the invariant is false at step 1",
        1,
    )
    assert judge_path(system, never_running, steps[:1])[0] == HOLDS


def test_the_overview_surfaces_a_model_error() -> None:
    """An action firing an undeclared event is a bug in the model, not a refusal."""

    def typo(tx: Tx[Any], job: Any) -> None:
        tx.fire(("job", job), "strat")

    system = jobs(Action("typo", "scheduler", typo, {"job": JOBS}))
    with pytest.raises(ActionError, match="strat") as raised:
        system_overview_dot(system)
    assert isinstance(raised.value.__cause__, FireError)


def test_a_set_in_a_trace_prints_its_items_in_sorted_order() -> None:
    """A set prints in hash order, which changes with the process's hash seed: the trace table
    sorts its items, so the same counterexample prints the same on every run."""
    names = ("kilo", "alpha", "juliet", "echo", "bravo", "hotel", "delta", "golf")

    def tag(tx: Tx) -> None:
        tx.require(not tx.get("tags"))
        tx.set("tags", frozenset(names))
        tx.set("pairs", (("b", frozenset(names[:3])), ("a", frozenset())))

    system = System(
        "tags",
        components=[],
        globals=[Global("tags", frozenset()), Global("pairs", None)],
        actions=[Action("tag", "tagger", tag)],
        properties=[always("untagged", "no tag is set", lambda v: not v.get("tags"))],
    )
    report = explore(system)
    trace = report.result("untagged").trace
    assert trace is not None
    row = trace.table(system).splitlines()[-2]
    shown = ", ".join(repr(n) for n in sorted(names))
    assert f"tags=frozenset({{{shown}}})" in row
    first = ", ".join(repr(n) for n in sorted(names[:3]))
    assert f"pairs=(('b', frozenset({{{first}}})), ('a', frozenset()))" in row
