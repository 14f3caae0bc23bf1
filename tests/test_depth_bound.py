"""A depth bound keeps exactly the states within that many steps, and judges each of them.

`explore(max_depth=D)` is the unbounded breadth-first search cut after depth
D: the same nodes up to depth D, and no deeper one; complete exactly where
the space is no deeper than D; each violation the unbounded search finds
within reach found with a trace as long, none beyond reach. On several
workers, with fingerprints and under symmetry it reports what one process
reports; under partial-order reduction its note says what it did not keep.
"""

from __future__ import annotations

from typing import Any

import pytest
from golden_targets import systems
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from system_strategies import SystemSpec, build_system
from system_strategies import systems as random_systems
from test_cli import run as run_cli
from test_parallel_explore import assert_traces_real, summary

from statecore.check.explore import _Explorer, explore
from statecore.check.results import Report
from statecore.check.symmetry_guard import Asymmetry
from statecore.check.values import NotInterchangeable
from statecore.system import System

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
    explorer = _Explorer(system, None, symmetry, None, None, False, None, 0, max_depth)
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
    assert any(n.startswith("depth bound: every state within") for n in report.notes) == (
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


@pytest.mark.parametrize("bad", [-1, 1.5, "3"])
def test_a_depth_bound_that_is_no_count_of_steps_is_refused(bad: Any) -> None:
    with pytest.raises(ValueError, match="max_depth must be 0 or more"):
        explore(systems()["segments"](), max_depth=bad)


def test_the_cli_says_how_far_a_depth_bound_searched() -> None:
    code, out, _ = run_cli("check", "segments", "--max-depth", "3")
    assert code == 4  # incomplete: a bound stopped the search
    assert "stopped at --max-depth 3" in out
    assert "every state within 3 steps of an initial state was judged" in out
    code, out, _ = run_cli("check", "segments", "--max-depth", "1000")
    assert code == 0
