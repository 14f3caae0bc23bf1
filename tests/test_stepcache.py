"""The explorer's memoised successors agree with `System.successors` everywhere."""

from __future__ import annotations

from collections.abc import Hashable

import pytest
from hypothesis import HealthCheck, given, settings
from system_strategies import SystemSpec, build_system, systems

from statecore import Event, Machine, State, Transition, out
from statecore.check.stepcache import ActionFault, SuccessorCache
from statecore.system import Action, ActionLabel, Component, Global, Keys, System, SystemState, Tx

KEYS = Keys("k", 2)
TOGGLE = Machine(
    "toggle",
    states=[State("off", initial=True), State("on")],
    events=[Event("flip")],
    transitions=[
        Transition("off", "flip", "on", emit=[out("lit")]),
        Transition("on", "flip", "off"),
    ],
)


def closure(system: System, successors: SuccessorCache) -> list[SystemState]:
    """Every reachable state, breadth-first, expanded with `successors`."""
    order = list(system.init_states())
    seen = set(order)
    for state in order:
        for step in successors(state):
            if step.state not in seen:
                seen.add(step.state)
                order.append(step.state)
    return order


def assert_agrees(system: System, cache: SuccessorCache) -> None:
    for state in closure(system, cache):
        assert cache(state) == system.successors(state)


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(systems())
def test_cache_matches_successors_on_random_systems(spec: SystemSpec) -> None:
    system = build_system(spec)
    assert_agrees(system, SuccessorCache(system))
    assert_agrees(system, SuccessorCache(system, max_nodes=3))  # a tree cut short


def toggles(run_counts: dict[str, int], whole_state: bool = False) -> System:
    """Two toggles and a counter; `flip` reads its own slot, `count` the counter."""

    def flip(tx: Tx, key: Hashable) -> None:
        run_counts["flip"] += 1
        if whole_state:
            assert tx.before is not None
        tx.require(tx.fire(("t", key), "flip").accepted)

    def count(tx: Tx) -> None:
        run_counts["count"] += 1
        tx.require(tx.get("n") < 3)
        tx.set("n", tx.get("n") + 1)

    def init(tx: Tx) -> None:
        for key in KEYS.values:
            tx.spawn("t", key)

    return System(
        "toggles",
        components=[Component("t", TOGGLE, KEYS)],
        globals=[Global("n", 0)],
        actions=[
            Action("flip", "user", flip, {"key": KEYS}),
            Action("count", "clock", count),
        ],
        init=init,
    )


def test_a_path_seen_once_never_runs_the_action_again() -> None:
    runs = {"flip": 0, "count": 0}
    system = toggles(runs)
    cache = SuccessorCache(system)
    states = closure(system, cache)
    assert len(states) == 2 * 2 * 4
    # Each flip(k) reads one slot (two values), count reads n (four values);
    # each path is run twice when it is learned, to check it is deterministic.
    assert runs == {"flip": 2 * 2 * 2, "count": 4 * 2}
    assert cache.runs == sum(runs.values())
    for state in states:
        cache(state)
    assert runs == {"flip": 2 * 2 * 2, "count": 4 * 2}
    assert_agrees(system, cache)


def test_an_action_reading_the_whole_state_is_run_every_time() -> None:
    runs = {"flip": 0, "count": 0}
    system = toggles(runs, whole_state=True)
    cache = SuccessorCache(system)
    states = closure(system, cache)
    # Two flips per state, each run twice (the determinism check), every time.
    assert runs["flip"] == 2 * 2 * len(states)
    assert_agrees(system, cache)


def test_an_action_that_raises_raises_every_time() -> None:
    def boom(tx: Tx) -> None:
        if tx.get("n") == 0:
            raise RuntimeError("model bug")
        tx.require(False)

    system = System(
        "boom",
        components=[Component("t", TOGGLE, KEYS)],
        globals=[Global("n", 0)],
        actions=[Action("boom", "user", boom)],
    )
    cache = SuccessorCache(system)
    (state,) = system.init_states()
    for _ in range(2):
        with pytest.raises(ActionFault, match="model bug") as raised:
            cache(state)
        assert isinstance(raised.value.cause, RuntimeError)
        assert raised.value.label == ActionLabel("boom") and raised.value.state == state
    assert cache(state._replace(values=(1,))) == []


def test_a_leaf_is_fixed_where_its_path_read_whole_every_position_it_writes() -> None:
    """`_Leaf.fixed`: a step that read what it writes replaces the same value wherever its
    leaf is reached; one that writes without reading, or edits a FIFO it read at the front
    only, does not (what it replaces depends on the state)."""

    def bump(tx: Tx) -> None:
        tx.require(tx.get("n") < 2)
        tx.set("n", tx.get("n") + 1)

    def reset(tx: Tx) -> None:
        tx.set("n", 0)

    def push(tx: Tx) -> None:
        tx.require(tx.get("pushed") < 2)
        tx.set("pushed", tx.get("pushed") + 1)
        tx.append("q", "x")

    def pop(tx: Tx) -> None:
        tx.popleft("q")

    def flip(tx: Tx, k: Hashable) -> None:
        tx.fire(("t", k), "flip")

    system = System(
        "fixed_leaves",
        components=[Component("t", TOGGLE, KEYS)],
        globals=[Global("n", 0), Global("pushed", 0), Global("q", ())],
        actions=[
            Action("bump", "a", bump),
            Action("reset", "a", reset),
            Action("push", "a", push),
            Action("pop", "a", pop),
            Action("flip", "a", flip, {"k": KEYS}),
        ],
    )
    cache = SuccessorCache(system)
    fixed: dict[str, set[bool]] = {}
    for state in closure(system, cache):
        expansion = cache.expand(state, None)
        for leaf in expansion.leaves:
            fixed.setdefault(leaf.label.name, set()).add(leaf.fixed)
    assert fixed == {
        "bump": {True},
        "reset": {False},
        "push": {False},
        "pop": {False},
        "flip": {True},
    }
