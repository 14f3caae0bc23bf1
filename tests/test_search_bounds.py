"""A depth bound keeps exactly the states within that many steps, and judges each of them;
a search any bound stops (states, depth, memory, time, Ctrl-C) says how deep it was complete.

`explore(max_depth=D)` is the unbounded breadth-first search cut after depth
D: the same nodes up to depth D, and no deeper one; complete exactly where
the space is no deeper than D; each violation the unbounded search finds
within reach found with a trace as long, none beyond reach. On several
workers, with fingerprints and under symmetry it reports what one process
reports; under partial-order reduction its note says what it did not keep.

A search stopped by its state, memory or time bound, or interrupted, is complete to
`Report.complete_depth`: every node of the unbounded search that near is
kept, and every violation it finds that near is found, with a trace as long.
"""

from __future__ import annotations

from typing import Any

import pytest
from golden_targets import systems
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st
from system_strategies import (
    ActionSpec,
    ComponentSpec,
    GlobalSpec,
    MachineSpec,
    MonitorSpec,
    PredSpec,
    PropertySpec,
    SystemSpec,
    build_system,
)
from system_strategies import systems as random_systems
from test_cli import run as run_cli
from test_parallel_explore import assert_traces_real, summary

from statecore.check.explore import explore
from statecore.check.explorer import Explorer
from statecore.check.results import ExplorationInterrupted, Limits, Report
from statecore.check.symmetry_guard import Asymmetry
from statecore.check.values import NotInterchangeable
from statecore.properties import always
from statecore.system import StateView, System

Node = tuple[Any, ...]


def depths(parents: dict[Node, Any]) -> dict[Node, int]:
    """Each stored node's depth: the length of its path in the search tree."""
    found: dict[Node, int] = {}
    for node in parents:
        path = []
        while node not in found:
            entry = parents[node]
            if entry is None:
                found[node] = 0
                break
            path.append(node)
            node = entry[0]
        for step in reversed(path):
            found[step] = found[parents[step][0]] + 1
    return found


def searched(system: System, symmetry: bool, max_depth: int | None) -> tuple[Report, Any]:
    """One process's report, and its explorer (for the nodes it stored)."""
    explorer = Explorer(system, None, symmetry, Limits(max_depth=max_depth))
    return explorer.run(), explorer


def lengths(report: Report) -> dict[str, tuple[str, int | None]]:
    return {
        r.property.id: (r.verdict, None if r.trace is None else len(r.trace))
        for r in report.results
    }


@settings(max_examples=80, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(random_systems(symmetric_pair=True), st.integers(0, 7), st.booleans())
def test_the_bound_cuts_the_unbounded_search_after_its_depth(
    spec: SystemSpec, max_depth: int, symmetry: bool
) -> None:
    """The nodes kept are the unbounded search's nodes within `max_depth` steps; complete iff
    none is deeper; every finding within reach is found, with a trace as long (a monitor's
    refusal is a step out of the deepest level), and none beyond it."""
    system = build_system(spec)
    try:
        full_report, full = searched(system, symmetry, None)
        report, bounded = searched(system, symmetry, max_depth)
    except (Asymmetry, NotInterchangeable):
        return  # (such systems are searched another way: not this test's business)
    depth_of = depths(full.parents)
    assert set(bounded.parents) == {n for n, d in depth_of.items() if d <= max_depth}
    deepest = max(depth_of.values())
    assert report.complete == (deepest <= max_depth)
    assert report.stop == ("" if report.complete else "max_depth")
    assert report.depth == min(deepest, max_depth)
    assert report.complete_depth == report.depth
    assert any(n.startswith(f"complete to depth {max_depth}: every") for n in report.notes) == (
        not report.complete
    )
    for pid, (verdict, length) in lengths(full_report).items():
        got = lengths(report)[pid]
        reach = max_depth + (1 if verdict == "violated" and _refusal(full_report, pid) else 0)
        if (
            verdict in ("violated", "holds") and length is not None and length <= reach
        ) or report.complete:
            assert got == (verdict, length)
        else:
            assert got == ("unknown", None)


def _refusal(report: Report, pid: str) -> bool:
    """Whether `pid`'s violation is a monitor refusing a step (not a state, nor quiescence)."""
    result = report.result(pid)
    return result.property.kind == "monitor" and "left in hot state" not in result.detail


def assert_complete_to(
    system: System, report: Report, explorer: Any, symmetry: bool = False
) -> None:
    """`report` (of `explorer`'s search) found every node and every finding of the unbounded
    search within `report.complete_depth` steps; a refusal, one step further."""
    full_report, full = searched(system, symmetry, None)
    depth = report.complete_depth
    assert depth <= report.depth
    assert {n for n, d in depths(full.parents).items() if d <= depth} <= set(explorer.parents)
    for pid, (verdict, length) in lengths(full_report).items():
        reach = depth + (1 if verdict == "violated" and _refusal(full_report, pid) else 0)
        if verdict == "violated" and length is not None and length <= reach:
            assert lengths(report)[pid] == (verdict, length)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(random_systems(), st.integers(1, 60))
def test_a_state_bound_says_how_deep_the_search_was_complete(
    spec: SystemSpec, max_states: int
) -> None:
    system = build_system(spec)
    explorer = Explorer(system, None, False, Limits(max_states=max_states))
    try:
        report = explorer.run()
    except NotInterchangeable:
        return
    assert_complete_to(system, report, explorer)
    if report.stop == "max_states":
        assert f"complete to depth {report.complete_depth:,}: every state" in report.notes[-1]
    one = explore(system, stop_on_violation=False, max_states=max_states)
    many = explore(system, stop_on_violation=False, max_states=max_states, workers=2)
    assert many.complete_depth == one.complete_depth


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(random_systems(), st.integers(1, 40), st.booleans())
def test_a_search_stopped_part_way_through_a_level_is_complete_one_level_short(
    spec: SystemSpec, after: int, interrupt: bool
) -> None:
    """Out of memory (or interrupted) while expanding a level: complete to the level before."""
    system = build_system(spec)
    explorer = Explorer(system, None, False)
    looks = iter(range(after, -1, -1))
    if interrupt:  # Ctrl-C before the `after`-th expansion
        expand = explorer._expand

        def interrupted(*args: Any) -> None:
            if not next(looks, 0):
                raise KeyboardInterrupt
            expand(*args)

        explorer._expand = interrupted  # type: ignore[method-assign]
    else:  # out of memory at the `after`-th look (one per level, after its first node)
        explorer.max_memory = 1
        explorer._out_of_memory = lambda: not next(looks, 0)  # type: ignore[method-assign]
    try:
        report = explorer.run()
    except ExplorationInterrupted as stopped:
        report = stopped.report
    except NotInterchangeable:
        return
    assert_complete_to(system, report, explorer)
    if report.stop in ("max_memory", "interrupted"):
        assert report.complete_depth == explorer.depth - 1


# A monitor refusing a step out of depth 0, met before an eventually's violation on the last
# node of that level: stopping at the violation, the level is whole, and its refusals stand.
REJECT = (("a", "reject"), ("b", "reject"), ("c", "reject"))
REFUSAL_BEFORE_THE_STOP = SystemSpec(
    components=(
        ComponentSpec(
            "c0",
            MachineSpec(
                "m0",
                (("s0", False, True), ("s1", True, False)),
                (
                    ("s0", "a", "s1", ("o0",)),
                    ("s0", "c", "s1", ("o1",)),
                    ("s0", "b", "s1", ("o1",)),
                ),
                REJECT,
            ),
            "k0",
            1,
            1,
        ),
        ComponentSpec(
            "c1",
            MachineSpec(
                "m1",
                (("s0", False, False), ("s1", True, False), ("s2", False, True)),
                (
                    ("s0", "c", "s1", ("o0",)),
                    ("s0", "b", "s2", ()),
                    ("s0", "a", "s1", ()),
                    ("s2", "c", "s1", ("o0",)),
                ),
                REJECT,
            ),
            "k1",
            1,
            2,
        ),
    ),
    global_=GlobalSpec("g", "counter", 1),
    actions=(
        ActionSpec("act0", "scheduler", False, "spawn", "c1", "b", counted=True, emit="o0"),
        ActionSpec("act1", "scheduler", True, "count", "c0", "a", fresh=False),
        ActionSpec("act2", "saver", False, "retire", "c1", "a", counted=True),
        ActionSpec("act3", "consumer", True, "retire", "c0", "a", counted=True),
    ),
    properties=(PropertySpec("p0", "eventually", PredSpec("count", "c0", "", ">=", 1)),),
    monitors=(
        MonitorSpec(
            "mon",
            MachineSpec(
                "mon",
                (("s0", False, True), ("s1", False, False)),
                (("s0", "o1", "s1", ()), ("s1", "o1", "s1", ()), ("s1", "o0", "s0", ())),
                (("o0", "reject"), ("o1", "error")),
            ),
        ),
    ),
)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(random_systems(), st.booleans())
@example(REFUSAL_BEFORE_THE_STOP, False)
def test_a_search_stopped_at_a_violation_is_complete_to_its_depth_too(
    spec: SystemSpec, interrupt: bool
) -> None:
    """Stopping at the first violation, or Ctrl-C while a whole level's refusals are being
    reported: what the report says was complete holds (refusals within one step more)."""
    system = build_system(spec)
    explorer = Explorer(system, None, False, Limits(stop_on_violation=True))
    if interrupt:
        commit = explorer._commit_refusals

        def interrupted() -> None:
            if explorer.refusals:
                raise KeyboardInterrupt
            commit()

        explorer._commit_refusals = interrupted  # type: ignore[method-assign]
    try:
        report = explorer.run()
    except ExplorationInterrupted as stopped:
        report = stopped.report
    except NotInterchangeable:
        return
    assert_complete_to(system, report, explorer)


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    random_systems(),
    st.integers(0, 7),
    st.sampled_from([0, 64]),
    st.sampled_from([2, 3]),
)
def test_workers_bounded_by_depth_report_what_one_process_reports(
    spec: SystemSpec, max_depth: int, bits: int, workers: int
) -> None:
    """Every node within the bound is expanded on both, so even the transitions and the
    coverage are one process's, not only the states, depth and completeness."""
    system = build_system(spec)
    one = explore(system, stop_on_violation=False, fingerprints=bits, max_depth=max_depth)
    many = explore(
        system, stop_on_violation=False, fingerprints=bits, max_depth=max_depth, workers=workers
    )
    assert summary(many) == summary(one)
    assert many.stop == one.stop
    assert_traces_real(system, many)


# Two interchangeable ids, each spawned, then taken through a and b: a state of depth 3 at the
# least has an instance in s2, and the property looks for one of k0's only.
DEEP = SystemSpec(
    components=(
        ComponentSpec(
            "c0",
            MachineSpec(
                "m0",
                (("s0", False, False), ("s1", False, False), ("s2", False, False)),
                (("s0", "a", "s1", ()), ("s1", "b", "s2", ())),
            ),
            "k",
            2,
            1,
        ),
    ),
    global_=None,
    actions=(
        ActionSpec("spawn", "scheduler", False, "spawn", "c0", "a"),
        ActionSpec("fa", "scheduler", False, "fire", "c0", "a"),
        ActionSpec("fb", "scheduler", False, "fire", "c0", "b"),
    ),
    properties=(PropertySpec("p0", "always", PredSpec("key", "c0", "s2", "<=", 0, 0)),),
    monitors=(),
)


def raises_in_s2(view: StateView[Any]) -> bool:
    if any(snap.state == "s2" for _, snap in view.live("c0")):
        raise RuntimeError("judged a state past the depth bound")
    return True


@pytest.mark.parametrize("workers", [2, 3])
@pytest.mark.parametrize("bits", [0, 64])
def test_workers_judge_no_state_past_the_depth_bound(bits: int, workers: int) -> None:
    """At the bound a successor another worker owns is claimed, to learn whether it is new,
    but not judged: a property that tells the ids apart only past the bound keeps symmetry on,
    and one that raises there does not stop the search, as on one process."""
    system = build_system(DEEP)
    one = explore(system, stop_on_violation=False, max_depth=2, fingerprints=bits)
    many = explore(system, stop_on_violation=False, max_depth=2, fingerprints=bits, workers=workers)
    assert one.symmetry and summary(many) == summary(one)
    raising = System(
        "raising",
        components=list(system.components),
        actions=list(system.actions),
        properties=[always("p0", "raises past the bound", raises_in_s2)],
    )
    one = explore(raising, stop_on_violation=False, max_depth=2, fingerprints=bits)
    many = explore(
        raising, stop_on_violation=False, max_depth=2, fingerprints=bits, workers=workers
    )
    assert summary(many) == summary(one)
    assert (many.stop, many.results[0].verdict) == ("max_depth", "unknown")


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(random_systems(), st.sampled_from([None, 0, 1, 2, 3]))
def test_a_violation_on_the_last_level_ends_the_search_as_on_one_process(
    spec: SystemSpec, max_depth: int | None
) -> None:
    """Stopping at a violation: where one process runs out of successors (the space, or the
    depth bound) the workers say complete, or stopped by the bound, as it does, not stopped at
    the violation. (Where one process stops part-way through a level they may differ: the
    workers finish it.)"""
    system = build_system(spec)
    one = explore(system, max_depth=max_depth)
    many = explore(system, max_depth=max_depth, workers=2)
    if one.stop != "violation":
        assert (many.complete, many.stop) == (one.complete, one.stop)


@pytest.mark.parametrize("bits", [0, 64])
def test_a_bundled_target_bounded_by_depth_on_two_workers(bits: int) -> None:
    """chunk_transfer cut at depth 12 of its 30: one process's figures on two workers, and the
    state bound, where it binds first, still names itself as the stop."""
    system = systems()["chunk_transfer"]()
    one = explore(system, fingerprints=bits, max_depth=12)
    two = explore(system, fingerprints=bits, max_depth=12, workers=2)
    assert summary(two) == summary(one)
    assert (one.stop, one.depth, one.complete) == ("max_depth", 12, False)
    whole = explore(system, fingerprints=bits, max_depth=1000, workers=2)
    assert (whole.complete, whole.stop) == (True, "")
    assert whole.states > one.states
    states = explore(system, fingerprints=bits, max_depth=12, max_states=100, workers=2)
    assert (states.stop, states.states) == ("max_states", 100)


def test_a_depth_bound_with_partial_order_reduction_says_what_it_left_out() -> None:
    """Under POR the states near the initial ones are not all kept: the note says so, and a
    violation within reach still has the shortest trace."""
    system = systems()["request_lifecycle_sync_abort"]()
    plain = explore(system, stop_on_violation=False, symmetry=False)
    violated = {
        r.property.id: len(r.trace)
        for r in plain.results
        if r.verdict == "violated" and r.trace is not None
    }
    reach = max(violated.values())
    reduced = explore(system, stop_on_violation=False, por=True, max_depth=reach)
    for pid, length in violated.items():
        result = reduced.result(pid)
        assert result.verdict == "violated"
        assert result.trace is not None and len(result.trace) == length
    if not reduced.complete:
        assert any("only an unreduced search keeps them all" in n for n in reduced.notes)


@pytest.mark.parametrize("workers", [1, 2])
def test_a_time_bound_stops_the_search_and_says_how_deep_it_was_complete(workers: int) -> None:
    """Wherever the clock stops it (it may not), the search found every state and every
    violation within its complete depth; a bound already spent stops it at its first look."""
    system = systems()["chunk_transfer_seed000_p1"]()
    report = explore(system, stop_on_violation=False, max_seconds=0.5, workers=workers)
    full_report, full = searched(system, True, None)
    within = [d for d in depths(full.parents).values() if d <= report.complete_depth]
    assert report.states >= len(within)
    assert report.stop in ("", "max_time")
    for pid, (verdict, length) in lengths(full_report).items():
        if verdict == "violated" and length is not None and length <= report.complete_depth:
            assert lengths(report)[pid] == (verdict, length)
    spent = explore(system, stop_on_violation=False, max_seconds=1e-9, workers=workers)
    assert (spent.stop, spent.complete, spent.complete_depth) == ("max_time", False, -1)
    assert all(r.verdict in ("unknown", "holds", "violated") for r in spent.results)


def test_one_process_stopped_by_its_time_bound_kept_every_state_within_its_depth() -> None:
    system = systems()["chunk_transfer"]()
    explorer = Explorer(system, None, True, Limits(max_seconds=0.3))
    report = explorer.run()
    assert_complete_to(system, report, explorer, symmetry=True)
    if report.stop == "max_time":  # (a machine fast enough finishes first)
        assert report.notes[-1].startswith(f"complete to depth {report.complete_depth}: every")


@pytest.mark.parametrize("bad", [0, -1.0, float("nan")])
def test_a_time_bound_that_is_no_time_is_refused(bad: float) -> None:
    with pytest.raises(ValueError, match="max_seconds must be positive"):
        explore(systems()["segments"](), max_seconds=bad)


@pytest.mark.parametrize("bad", [-1, 1.5, "3"])
def test_a_depth_bound_that_is_no_count_of_steps_is_refused(bad: Any) -> None:
    with pytest.raises(ValueError, match="max_depth must be 0 or more"):
        explore(systems()["segments"](), max_depth=bad)


def test_the_cli_says_where_a_time_bound_stopped() -> None:
    code, out, _ = run_cli("check", "chunk_transfer", "--max-time", "0.000001")
    assert code == 4
    assert "stopped at --max-time 1e-06 before every property was decided" in out


def test_the_cli_says_how_far_a_depth_bound_searched() -> None:
    code, out, _ = run_cli("check", "segments", "--max-depth", "3")
    assert code == 4  # incomplete: a bound stopped the search
    assert "stopped at --max-depth 3" in out
    assert "every state within 3 steps of an initial state was judged" in out
    code, out, _ = run_cli("check", "segments", "--max-depth", "1000")
    assert code == 0
