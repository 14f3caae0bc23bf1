"""The symmetry guard at three ids: checked orbits are skipped, never a broken renaming.

`SymmetryGuard.check_run` remembers the orbit of every run it checked (the run
and each renamed image) and does not check a run of that orbit again; it
renames states with the canonicalizer's cached plans. With three ids there
are five renamings besides the identity, so a model can break one of them
only: the guard must still turn symmetry off there, and the reduced search
must keep the verdicts and counterexample lengths of the full one.
"""

from __future__ import annotations

from collections.abc import Hashable
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from system_strategies import SystemSpec, build_system, systems
from test_explore import check_trace_shows

from statecore import Event, Machine, State, Transition, out
from statecore.check import symmetry_guard
from statecore.check.explore import VIOLATED, explore
from statecore.check.reachable import reachable
from statecore.check.stepcache import SuccessorCache, run_attempt
from statecore.check.symmetry import Canonicalizer, rename, rename_state, renamings
from statecore.check.symmetry_guard import Asymmetry, SymmetryGuard
from statecore.properties import always, eventually, monitor, sometimes
from statecore.system import Action, Component, Emitted, Global, Keys, System, Tx

IDS = Keys("ext", 3)
SENDER = Machine(
    "sender",
    states=[State("open", initial=True), State("closing", hot=True), State("done", final=True)],
    events=[Event("save"), Event("put")],
    transitions=[
        Transition("open", "save", "closing"),
        Transition("closing", "put", "done", emit=[out("put")]),
    ],
)
ONCE = Machine(
    "once",
    states=[State("open", initial=True), State("done", final=True)],
    events=[Event("put")],
    transitions=[Transition("open", "put", "done")],
)


def route(emitted: Emitted) -> tuple[Hashable, str, dict[str, Any]] | None:
    return None if emitted.source is None else (emitted.source, "put", {})


def senders(*, odd_one: Any = None) -> System:
    """Three ids saving into one FIFO of handles; `odd_one` may not save behind two others."""

    def start(tx: Tx, ext: Hashable) -> None:
        tx.require(tx.snapshot(("sender", ext)) is None)
        tx.spawn("sender", ext)

    def save(tx: Tx, ext: Hashable) -> None:
        handle = tx.handle("sender", ext)
        tx.require(handle is not None)
        assert handle is not None
        queue = tx.get("queue")
        tx.require(not (ext == odd_one and len(queue) == 2))
        tx.require(tx.fire(handle, "save").accepted)
        tx.set("queue", (*queue, handle))

    def put(tx: Tx) -> None:
        queue = tx.get("queue")
        tx.require(queue)
        tx.set("queue", queue[1:])
        tx.fire(queue[0], "put")

    return System(
        "senders",
        components=[Component("sender", SENDER, IDS)],
        globals=[Global("queue", ())],
        actions=[
            Action("start", "scheduler", start, {"ext": IDS}),
            Action("save", "scheduler", save, {"ext": IDS}),
            Action("put", "saver", put, internal=True),
        ],
        properties=[
            always("short_queue", "at most two saves queued", lambda v: len(v.get("queue")) < 3),
            eventually(
                "drained",
                "nothing left closing",
                lambda v: all(s.state != "closing" for _, s in v.live("sender")),
            ),
            sometimes("all_done", "every id done", lambda v: len(v.get("queue")) == 0),
            monitor("one_put", "one put per sender", ONCE, route),
        ],
    )


def test_a_plan_renames_like_rename_state() -> None:
    system = senders()
    canonicalizer = Canonicalizer(system)
    states = reachable(system)
    for renaming in renamings(system):
        plan = canonicalizer.plan_of(renaming)
        for state in states:
            assert plan.apply((state,), plan.slots(state.slots))[0] == rename_state(
                system, state, renaming
            )


def test_a_checked_orbit_is_not_run_again(monkeypatch: pytest.MonkeyPatch) -> None:
    system = senders()
    guard = SymmetryGuard(system, Canonicalizer(system))
    runs: list[int] = []

    def counted(system_: System, index: int, state: Any) -> Any:
        runs.append(index)
        return run_attempt(system_, index, state)

    monkeypatch.setattr(symmetry_guard, "run_attempt", counted)
    state = next(iter(reachable(system)))
    index = next(i for i, (a, _, _) in enumerate(system.attempts) if a.name == "start")
    guard.check_run(index, state, run_attempt(system, index, state))
    assert len(runs) == 10  # each renaming's image, run twice: the memo may learn it
    for renaming in guard.renamings:
        image = rename_state(system, state, renaming)
        other = system.labels().index(rename(system.labels()[index], renaming))
        guard.check_run(other, image, run_attempt(system, other, image))
    assert len(runs) == 10  # every image is in the checked orbit


def guarded_cache(system: System, max_nodes: int = 1 << 21) -> SuccessorCache:
    """The successor memo as a search with symmetry builds it: learning the guard's images."""
    guard = SymmetryGuard(system, Canonicalizer(system))
    cache = SuccessorCache(system, max_nodes, verify=guard.check_run)
    guard.values = cache.values
    cache.values.renamed = True
    return cache


def assert_agrees_everywhere(system: System, max_nodes: int = 1 << 21) -> None:
    """A memo learning the guard's images gives `System.successors` on every state the full
    search reaches (not only representatives); unless the guard finds the system asymmetric,
    where the search drops the memo with symmetry."""
    order = list(system.init_states())
    seen = set(order)
    try:
        cache = guarded_cache(system, max_nodes)
        for state in order:
            expected = system.successors(state)
            assert cache(state) == expected
            for step in expected:
                if step.state not in seen:
                    seen.add(step.state)
                    order.append(step.state)
    except Asymmetry:
        return


@pytest.mark.parametrize("odd_one", [None, *IDS.values], ids=["symmetric", "ext0", "ext1", "ext2"])
@pytest.mark.parametrize("max_nodes", [1 << 21, 5])
def test_a_memo_learning_images_matches_successors_at_three_ids(
    odd_one: Any, max_nodes: int
) -> None:
    """Five renamings: each image of a run lands on another attempt, or on the run's own."""
    assert_agrees_everywhere(senders(odd_one=odd_one), max_nodes)


def test_the_images_the_guard_ran_are_learned() -> None:
    system = senders()
    cache = guarded_cache(system)
    state = next(iter(system.init_states()))
    steps = cache(state)
    # Each action is learned (run twice) on its first id; the guard checks that run on the
    # five renamings by running the other ids' attempts, and the memo learns those runs:
    # start, save and put are run twice each, and no attempt of ext1 or ext2 is run for itself.
    assert cache.runs == 2 * len(system.actions) < 2 * len(system.attempts)
    assert steps == system.successors(state)
    for step in steps:  # and the paths learned so hold on the states that read alike
        assert cache(step.state) == system.successors(step.state)


@settings(
    max_examples=300,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)
@given(systems(symmetric_pair=True, naming=True))
def test_a_memo_learning_images_matches_successors_on_random_systems(spec: SystemSpec) -> None:
    system = build_system(spec)
    for max_nodes in (1 << 21, 3):  # a tree cut short takes only some images
        assert_agrees_everywhere(system, max_nodes)


@pytest.mark.parametrize("odd_one", [None, *IDS.values], ids=["symmetric", "ext0", "ext1", "ext2"])
def test_three_ids_keep_the_verdicts_of_the_full_search(odd_one: Any) -> None:
    system = senders(odd_one=odd_one)
    full = explore(system, symmetry=False, stop_on_violation=False)
    reduced = explore(system, symmetry=True, stop_on_violation=False)
    if odd_one is None:
        assert reduced.symmetry and reduced.states < full.states
    else:  # one id is told apart: the guard must see it, whichever renaming shows it
        assert not reduced.symmetry and "symmetry reduction off" in reduced.notes[0]
        assert (reduced.states, reduced.transitions) == (full.states, full.transitions)
    for a, b in zip(full.results, reduced.results):
        assert (a.property.id, a.verdict) == (b.property.id, b.verdict)
        assert (a.trace is None) == (b.trace is None)
        if a.trace is not None and b.trace is not None:
            assert len(a.trace) == len(b.trace)
        if b.verdict == VIOLATED:
            check_trace_shows(system, b)
