"""The explorer's fast paths give what the plain computation gives.

`SuccessorCache.expand` lets a state reuse where its parent's walk of each
attempt ended when the step between them wrote nothing that walk read. These
tests check, on random systems and on every bundled target and variant, that a
breadth-first search carrying those hints finds exactly `System.successors` in
every state, and that the explorer with and without the hints reports the same
figures, verdicts and traces (with symmetry on, where the hints stop at a renamed
state, too).
"""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from system_strategies import WITH_FIXTURE, SystemSpec, build_system, systems

from statecore.check import explore as explore_module
from statecore.check.explore import Report, explore
from statecore.check.stepcache import Hint, Ids, SuccessorCache, ValueIds
from statecore.registry import bundled
from statecore.system import System, SystemState


def hinted_closure(system: System, limit: int, cache: SuccessorCache | None = None) -> int:
    """Breadth-first from the initial states with hints; each state's steps checked.

    Returns how many states were checked (at most `limit`).
    """
    cache = cache or SuccessorCache(system)
    queue: list[tuple[SystemState, Hint | None]] = [(s, None) for s in system.init_states()]
    seen = {state for state, _ in queue}
    for state, hint in queue:
        expansion = cache.expand(state, hint)
        assert expansion.steps == system.successors(state)
        assert len(expansion.ends) == len(system.attempts)
        assert_ids_of(cache.ids, state, expansion.ids)
        for number, step in enumerate(expansion.steps):
            if step.state not in seen and len(seen) < limit:
                seen.add(step.state)
                queue.append((step.state, expansion.hint(number)))
    return len(queue)


def assert_ids_of(ids: ValueIds, state: SystemState, found: Ids) -> None:
    """Each id a state's expansion worked out or took from its parent is the id of the
    value there."""
    flat = state[0] + state[1]
    assert len(found) == len(flat)
    for position, value_id in enumerate(found):
        if value_id is not None:
            assert value_id == ids(flat[position]), position


def figures(report: Report) -> Any:
    return (
        report.states,
        report.transitions,
        report.depth,
        report.complete,
        report.notes,
        report.coverage,
        [
            (r.property.id, r.verdict, r.detail, None if r.trace is None else r.trace.actions)
            for r in report.results
        ],
    )


def with_and_without_hints(
    monkeypatch: pytest.MonkeyPatch, system: System, **options: Any
) -> tuple[Report, Report]:
    hinted = explore(system, **options)
    with monkeypatch.context() as m:
        m.setattr(explore_module.Explorer, "walks", False)
        plain = explore(system, **options)
    return hinted, plain


@settings(
    max_examples=200,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)
@given(systems(symmetric_pair=True, naming=True))
def test_hinted_walks_find_every_successor_on_random_systems(spec: SystemSpec) -> None:
    hinted_closure(build_system(spec), 5_000)


@WITH_FIXTURE
@given(systems(symmetric_pair=True, naming=True))
def test_the_explorer_reports_the_same_with_and_without_hints_on_random_systems(
    monkeypatch: pytest.MonkeyPatch, spec: SystemSpec
) -> None:
    system = build_system(spec)
    for symmetry in (True, False):
        hinted, plain = with_and_without_hints(
            monkeypatch, system, symmetry=symmetry, stop_on_violation=False
        )
        assert figures(hinted) == figures(plain)


@pytest.mark.parametrize("name", [t.name for t in bundled() if t.kind in ("model", "variant")])
def test_hinted_walks_find_every_successor_on_bundled_targets(name: str) -> None:
    target = next(t for t in bundled() if t.name == name)
    assert hinted_closure(target.load(), 600) > 1


@pytest.mark.parametrize("name", [t.name for t in bundled() if t.kind == "variant"])
def test_a_variant_stops_at_the_same_violation_with_and_without_hints(
    monkeypatch: pytest.MonkeyPatch, name: str
) -> None:
    target = next(t for t in bundled() if t.name == name)
    hinted, plain = with_and_without_hints(monkeypatch, target.load())
    assert figures(hinted) == figures(plain)


def test_a_full_memo_gives_no_more_values_an_id() -> None:
    """Only what a tree keeps gets an id: past its last node a search keeps no more values."""
    system = next(t for t in bundled() if t.name == "chunk_transfer").load()
    cache = SuccessorCache(system, max_nodes=40)
    hinted_closure(system, 300, cache)
    assert cache._room <= 0  # full
    named = len(cache.ids._ids)
    assert hinted_closure(system, 3_000, cache) == 3_000
    assert len(cache.ids._ids) == named
