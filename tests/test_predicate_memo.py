"""The explorer's memoised predicates give what judging the predicate plainly gives.

The differential test judges every property of random systems on every
reachable state both ways; where the memo says a value holds on the whole
orbit, it checks every renaming of the state too. The other tests are the
cases built to break it: equal frozensets that iterate in different orders,
a predicate that can tell the logging view apart, one that is not
deterministic, one whose every state is new, and one that reads elsewhere
under a renaming.
"""

from __future__ import annotations

import dataclasses
import itertools
from collections.abc import Callable
from typing import Any, NamedTuple

import pytest
from hypothesis import HealthCheck, given, settings
from system_strategies import WITH_FIXTURE, SystemSpec, build_system, systems
from test_symmetry_soundness import W0, W1, WORKERS, workers

from statecore.check import explorer as explorer_module
from statecore.check import predicates as predicates_module
from statecore.check.explore import HOLDS, VIOLATED, explore
from statecore.check.predicates import Judgement, PredicateCache, PredicateNotDeterministic
from statecore.check.stepcache import typed
from statecore.check.symmetry import Canonicalizer, rename_state
from statecore.check.symmetry_guard import Asymmetry, SymmetryGuard
from statecore.errors import PropertyRaisedError
from statecore.properties import always, sometimes
from statecore.registry import Target, bundled
from statecore.system import Action, Global, StateView, System, SystemState, Tx

Predicate = Callable[[StateView[Any]], object]


def reachable(system: System) -> list[SystemState]:
    order = list(system.init_states())
    seen = set(order)
    for state in order:
        for step in system.successors(state):
            if step.state not in seen:
                seen.add(step.state)
                order.append(step.state)
    return order


def predicates_of(system: System) -> list[Predicate]:
    found: list[Predicate] = []
    for prop in system.properties:
        found += [p for p in (prop.when, prop.predicate) if p is not None]
    return found


def plain(system: System, predicate: Predicate, state: SystemState) -> bool:
    return bool(predicate(StateView(system, state)))


def guard_of(system: System) -> SymmetryGuard | None:
    canonicalizer = Canonicalizer(system)
    if not canonicalizer.active:
        return None
    try:
        return SymmetryGuard(system, canonicalizer)
    except Asymmetry:  # an action for one id only: the explorer searches without symmetry
        return None


def assert_agrees(system: System, cache: PredicateCache, guard: SymmetryGuard | None) -> None:
    states = reachable(system)
    flats = [state[0] + state[1] for state in states]
    for (state, flat), predicate in itertools.product(zip(states, flats), predicates_of(system)):
        expected = plain(system, predicate, state)
        try:
            value, on_orbit, decided_by = cache.judge(predicate, state)
        except Asymmetry:  # then some renaming of this state must really differ
            assert guard is not None
            assert any(
                plain(system, predicate, rename_state(system, state, r)) != expected
                for r in guard.renamings
            )
            return
        assert value == expected
        if decided_by != -1:  # every state equal there has the value (the explorer reuses it)
            where = [p for p in range(len(flat)) if decided_by >> p & 1]
            for other, other_flat in zip(states, flats):
                if all(typed(flat[p]) == typed(other_flat[p]) for p in where):
                    assert plain(system, predicate, other) == value
        if on_orbit:
            assert guard is not None
            for renaming in guard.renamings:
                assert plain(system, predicate, rename_state(system, state, renaming)) == value


@settings(
    max_examples=300,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)
@given(systems(symmetric_pair=True, naming=True))
def test_the_memo_gives_the_plain_value_and_orbit_claims_hold_on_random_systems(
    spec: SystemSpec,
) -> None:
    system = build_system(spec)
    guard = guard_of(system)
    assert_agrees(system, PredicateCache(system, guard), guard)
    assert_agrees(system, PredicateCache(system, guard, max_nodes=3), guard)  # a tree cut short
    assert_agrees(system, PredicateCache(system), None)


def test_a_predicate_is_run_only_to_learn_a_path() -> None:
    calls = []

    def busy_at_most_two(v: StateView[Any]) -> bool:
        calls.append(1)
        return sum(1 for _, s in v.live("worker") if s.state == "busy") <= 2

    system = workers(always("bounded", "at most two busy", busy_at_most_two))
    states = reachable(system)
    cache = PredicateCache(system)
    for state in states:
        assert cache.judge(busy_at_most_two, state)[:2] == (True, False)
    assert len(calls) == 3 * len({s.slots for s in states})  # it reads the workers' slots
    learned = len(calls)
    for state in states * 2:
        assert cache.judge(busy_at_most_two, state)[:2] == (True, False)
    assert len(calls) == learned


def test_a_symmetric_predicate_is_checked_once_per_path_not_on_every_renamed_state(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Its paths are checked on their orbit when learned: no state's renamings are made."""
    system = workers(
        always(
            "bounded",
            "at most two busy",
            lambda v: sum(1 for _, s in v.live("worker") if s.state == "busy") <= 2,
        )
    )
    made = []
    original = SymmetryGuard.images
    monkeypatch.setattr(
        SymmetryGuard, "images", lambda self, node: made.append(node) or original(self, node)
    )
    report = explore(system, stop_on_violation=False)
    assert report.symmetry and not report.notes
    assert [r.verdict for r in report.results] == [HOLDS]
    assert made == []


def test_a_predicate_that_reads_elsewhere_under_a_renaming_is_checked_state_by_state() -> None:
    """``any`` stops at the first busy worker: on the renamed reads it stops at another."""

    def one_busy(v: StateView[Any]) -> bool:
        return any(s.state == "busy" for _, s in v.live("worker"))

    system = workers(always("p", "some worker busy", one_busy))
    guard = guard_of(system)
    assert guard is not None
    cache = PredicateCache(system, guard)
    busy_first = next(
        s for s in reachable(system) if StateView(system, s).snapshot("worker", W0).state == "busy"
    )
    assert cache.judge(one_busy, busy_first)[:2] == (True, False)


def test_an_asymmetric_predicate_is_caught_when_its_path_is_learned() -> None:
    guard_system = workers(always("p", "w1 never first", lambda v: v.get("first") != W1))
    guard = guard_of(guard_system)
    assert guard is not None
    predicate = guard_system.properties[0].predicate
    assert predicate is not None
    cache = PredicateCache(guard_system, guard, {predicate: "its predicate of property 'p'"})
    first_w0 = next(s for s in reachable(guard_system) if s.values[0] == W0)
    with pytest.raises(Asymmetry, match="its predicate of property 'p' tells symmetric ids"):
        cache.judge(predicate, first_w0)


def test_equal_frozensets_iterating_in_different_orders_give_the_plain_value() -> None:
    """0 and 8 share a hash bucket, so the set built from (0, 8) iterates 0 first, and
    the one from (8, 0) iterates 8 first: a predicate that stops early reads other globals."""
    one, other = frozenset((0, 8)), frozenset((8, 0))
    assert one == other and list(one) != list(other)
    system = System(
        "sets",
        components=[],
        actions=[],
        globals=[Global("set", one), Global("a0", False), Global("a8", False)],
    )

    def all_set(v: StateView[Any]) -> bool:
        return all(v.get(f"a{i}") for i in v.get("set"))

    cache = PredicateCache(system)
    for order, a0, a8 in itertools.product((one, other), (False, True), (False, True)):
        state = SystemState((), (order, a0, a8))
        assert cache.judge(all_set, state)[0] == plain(system, all_set, state)


def test_a_predicate_that_tells_the_logging_view_apart_is_judged_plainly() -> None:
    system = workers()
    states = reachable(system)

    def plain_tuples(v: StateView[Any]) -> bool:
        return type(v.state.slots) is tuple

    cache = PredicateCache(system)
    assert all(cache.judge(plain_tuples, s) == (True, False, -1) for s in states)


def test_a_predicate_that_is_not_deterministic_stops_the_search() -> None:
    ticks = itertools.count()
    system = workers(always("flaky", "flips a coin", lambda v: next(ticks) % 2 == 0))
    with pytest.raises(PropertyRaisedError, match=r"'flaky'.*is not deterministic"):
        explore(system)
    with pytest.raises(PredicateNotDeterministic):
        PredicateCache(system).judge(lambda v: next(ticks) % 2 == 0, reachable(system)[0])


def test_a_predicate_with_a_new_path_on_most_states_is_judged_plainly(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(predicates_module, "_WINDOW", 8)
    calls = []

    def first_is_set(v: StateView[Any]) -> bool:
        calls.append(1)
        return v.get("counter") >= 0

    system = System("count", components=[], actions=[], globals=[Global("counter", 0)])
    cache = PredicateCache(system)
    for n in range(40):
        assert cache.judge(first_is_set, SystemState((), (n,)))[:2] == (True, False)
    # Learning the first eight costs three judgements each; plainly, one each.
    assert len(calls) == 3 * 8 + (40 - 8)


def test_verdicts_of_the_workers_cases_are_unchanged() -> None:
    """The adversarial symmetry cases still turn reduction off (their own tests say why)."""
    system = workers(always("p", "w1 never first", lambda v: v.get("first") != W1))
    report = explore(system, stop_on_violation=False)
    assert [r.verdict for r in report.results] == [VIOLATED]
    assert not report.symmetry and report.notes
    assert WORKERS.values == (W0, W1)


def test_an_asymmetric_predicate_judged_plainly_is_caught_on_the_renamed_states() -> None:
    """Judged plainly (it tells the logging view apart), a predicate is checked on every
    renaming of each state's system state, and one that names an id is caught there."""

    def w1_never_first(v: StateView[Any]) -> bool:
        return type(v.state.values) is tuple and v.get("first") != W1

    system = workers(always("p", "w1 never first", w1_never_first))
    report = explore(system, stop_on_violation=False)
    assert [r.verdict for r in report.results] == [VIOLATED]
    assert not report.symmetry
    assert "'p' tells symmetric ids apart" in report.notes[0]


# -- the explorer with and without the memo -----------------------------------------------


class PlainJudge(PredicateCache):
    """Every predicate judged plainly, every value checked state by state: the explorer
    as it was before the memo."""

    def judge(self, predicate: Predicate, state: SystemState) -> Judgement:
        return plain(self.system, predicate, state), False, -1

    def on_image(self, predicate: Predicate) -> Callable[[tuple[Any, ...]], bool]:
        return lambda node: plain(self.system, predicate, node[0])


def summary(report: Any) -> tuple[Any, ...]:
    results = tuple(
        (r.property.id, r.verdict, r.detail, None if r.trace is None else r.trace.steps)
        for r in report.results
    )
    return results, report.states, report.transitions, report.symmetry, report.notes


def both_ways(system: System, monkeypatch: pytest.MonkeyPatch, stop_on_violation: bool) -> None:
    memo = summary(explore(system, stop_on_violation=stop_on_violation))
    with monkeypatch.context() as patch:
        patch.setattr(explorer_module, "PredicateCache", PlainJudge)
        assert summary(explore(system, stop_on_violation=stop_on_violation)) == memo


@WITH_FIXTURE
@given(spec=systems(symmetric_pair=True, naming=True))
def test_reports_are_those_of_plain_judging_on_random_systems(
    spec: SystemSpec, monkeypatch: pytest.MonkeyPatch
) -> None:
    both_ways(build_system(spec), monkeypatch, stop_on_violation=False)


@pytest.mark.parametrize("target", bundled(), ids=lambda t: t.name)
def test_reports_are_those_of_plain_judging_on_every_bundled_target(
    target: Target, monkeypatch: pytest.MonkeyPatch
) -> None:
    """As ``statecore check`` runs them: to the first violation."""
    both_ways(target.load(), monkeypatch, stop_on_violation=True)


class Counts(NamedTuple):
    n: int = 0
    done: bool = False


def counting(*properties: Any) -> System:
    def step(tx: Tx) -> None:
        tx.require(tx.g.n < 2)
        tx.put(n=tx.g.n + 1)

    def finish(tx: Tx) -> None:
        tx.require(tx.g.n == 2 and not tx.g.done)
        tx.put(done=True)

    return System(
        "counting",
        components=[],
        actions=[Action("step", "u", step), Action("finish", "u", finish)],
        globals=Counts,
        properties=properties,
    )


def test_a_predicate_comparing_the_whole_record_reads_all_of_it(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """``v.g == Counts(2, True)`` on the logging view compares the record itself."""
    system = counting(
        sometimes("finished", "the last globals", lambda v: v.g == Counts(2, True)),
        always("not_final", "never the last globals", lambda v: v.g != Counts(2, True)),
        always("a_record", "the globals are a Counts", lambda v: isinstance(v.g, Counts)),
    )
    report = explore(system, stop_on_violation=False)
    assert [r.verdict for r in report.results] == [HOLDS, VIOLATED, HOLDS]
    both_ways(system, monkeypatch, stop_on_violation=False)


def test_equal_values_of_different_types_are_told_apart(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Two states differ in a tag and hold 1 and True: the predicate tells them apart."""

    def setter(value: object, tag: int) -> Callable[[Tx], None]:
        def run(tx: Tx) -> None:
            tx.require(tx.get("tag") == 0)
            tx.set("x", value)
            tx.set("tag", tag)

        return run

    system = System(
        "types",
        components=[],
        actions=[Action("one", "u", setter(1, 1)), Action("true", "u", setter(True, 2))],
        globals=[Global("x", 0), Global("tag", 0)],
        properties=[always("not_bool", "x is no bool", lambda v: not isinstance(v.get("x"), bool))],
    )
    assert [r.verdict for r in explore(system).results] == [VIOLATED]
    both_ways(system, monkeypatch, stop_on_violation=False)


class Pair(NamedTuple):
    a: int = 0
    b: int = 0


def _set_once(name: str) -> Callable[[Tx], None]:
    def run(tx: Tx) -> None:
        tx.require(getattr(tx.g, name) == 0)
        tx.put(**{name: 1})

    return run


def _not_b_alone(v: StateView[Any]) -> bool:
    match v.g:
        case (0, 1):
            return False
        case _:
            return True


def test_a_match_on_the_record_as_a_sequence_reads_all_of_it(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """``case (0, 1):`` matches a tuple record; on the logging view it must match too (and read
    every field), or a path that read nothing answers every state, and partial-order
    reduction takes the property for one no action can change."""
    system = System(
        "pairs",
        components=[],
        actions=[Action("set_a", "u", _set_once("a")), Action("set_b", "u", _set_once("b"))],
        globals=Pair,
        properties=[always("not_b_alone", "never b without a", _not_b_alone)],
    )
    for por in (False, True):
        report = explore(system, stop_on_violation=False, por=por)
        assert [r.verdict for r in report.results] == [VIOLATED]
    both_ways(system, monkeypatch, stop_on_violation=False)


@dataclasses.dataclass(frozen=True)
class Backlog:
    pending: int = 1

    def __bool__(self) -> bool:
        return self.pending > 0


def test_a_record_that_defines_bool_is_judged_as_itself(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    def work(tx: Tx) -> None:
        tx.require(tx.g.pending > 0)
        tx.put(pending=tx.g.pending - 1)

    system = System(
        "backlog",
        components=[],
        actions=[Action("work", "u", work)],
        globals=Backlog,
        properties=[always("busy", "work is always pending", lambda v: bool(v.g))],
    )
    assert [r.verdict for r in explore(system).results] == [VIOLATED]
    both_ways(system, monkeypatch, stop_on_violation=False)
