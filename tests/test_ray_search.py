"""The search on a Ray cluster finds what one process finds.

A local Ray cluster with two CPUs is started by the tests (once for the
module); the search runs on two actors, so successors travel between them.
Same distinct states, transitions, depth, coverage, verdicts and trace
lengths as `explore` on bundled targets and variants (symmetry kept, and
switched off; violations; fingerprints) and on random systems, symmetric
ones included; a model error reads as one process's. Without Ray, the
backend and ``statecore check --ray`` fail in one line naming the extra.
Run with ``tox -e ray`` (the default environment has no Ray: these skip).
"""

from __future__ import annotations

import functools
import importlib.util
import os
import re
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import golden_targets
import pytest
import system_strategies
import test_equal_states
import test_model_errors
from golden_targets import systems
from hypothesis import HealthCheck, given, settings
from system_strategies import SystemSpec, build_system
from system_strategies import systems as random_systems
from test_cli_benchmarks import load as load_benchmark
from test_fingerprints import GOLDEN_FIGURES, assert_golden_figures
from test_model_errors import jobs, running
from test_parallel_explore import assert_traces_real, bounded, counterexamples, summary

from statecore.check.explore import explore
from statecore.check.ray_search import RayError, ray_explore
from statecore.cli import main
from statecore.errors import ActionRaisedError, PropertyRaisedError
from statecore.properties import always
from statecore.registry import bundled
from statecore.system import Action, Tx

needs_ray = pytest.mark.skipif(
    importlib.util.find_spec("ray") is None,
    reason="Ray is not installed (pip install 'statecore[ray]'; tox -e ray)",
)


@pytest.fixture(scope="module")
def cluster() -> Iterator[Any]:
    """A local Ray cluster of two CPUs, for the module's tests; shut down after them."""
    import ray

    # The test modules that build systems are not importable on Ray's workers:
    # their functions travel by value.
    modules = (system_strategies, golden_targets, test_model_errors, test_equal_states)
    for module in (*modules, sys.modules[__name__]):
        ray.cloudpickle.register_pickle_by_value(module)
    ray.init(
        address="local",
        num_cpus=2,
        include_dashboard=False,
        object_store_memory=100 * 2**20,
        logging_level="warning",
    )
    try:
        yield ray
    finally:
        ray.shutdown()


def factory(name: str) -> Any:
    """A function Ray can send to its workers that builds the system `name`."""
    targets = {t.name: t for t in bundled()}
    return targets[name].load if name in targets else systems()[name]


# Symmetry kept (two ids) and switched off (the ids told apart); models and
# variants with violations; about half with fingerprints.
BUNDLED = [
    ("request_state_two_ids", 0),
    ("chunk_transfer_two_ids", 64),
    ("segments", 0),
    ("receiver_no_recheck", 64),
    ("request_state_seed000_p1", 0),
    ("request_lifecycle_sync_abort", 64),
    ("chunk_transfer_0_30_0_segments", 0),
    # An action argument that is NaN: the label an actor is sent back is not equal to itself.
    ("request_lifecycle_telemetry_raises", 0),
]


@needs_ray
@pytest.mark.parametrize(("name", "bits"), BUNDLED)
def test_two_actors_on_bundled_targets_find_what_one_process_finds(
    cluster: Any, name: str, bits: int
) -> None:
    golden = GOLDEN_FIGURES[name]["symmetry"]
    build = factory(name)
    report = ray_explore(build, workers=2, stop_on_violation=False, fingerprints=bits)
    assert_golden_figures(report, golden)
    assert_traces_real(build(), report)


@needs_ray
@pytest.mark.parametrize("name", ["segments_6816", "stage_pair_stale_read", "receiver_no_recheck"])
def test_two_actors_report_one_process_counterexamples(cluster: Any, name: str) -> None:
    """Without symmetry reduction the actors pick no representative of their own: of equally
    short counterexamples they report the one one process meets first, step for step."""
    build = factory(name)
    one = explore(build(), stop_on_violation=False, symmetry=False)
    two = ray_explore(build, workers=2, stop_on_violation=False, symmetry=False)
    assert not one.ok and counterexamples(two) == counterexamples(one)


@needs_ray
def test_coverage_and_symmetry_match_one_process_on_a_symmetric_target(cluster: Any) -> None:
    build = factory("request_state_two_ids")
    one = explore(build(), stop_on_violation=False)
    two = ray_explore(build, workers=2, stop_on_violation=False)
    assert one.symmetry and summary(two) == summary(one)


@needs_ray
@settings(max_examples=12, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(random_systems(symmetric_pair=True, naming=True))
def test_two_actors_find_what_one_process_finds_on_random_systems(
    cluster: Any, spec: SystemSpec
) -> None:
    """Symmetric systems, and ones whose ids are told apart (symmetry off, with its note)."""
    build = functools.partial(build_system, spec)
    one = explore(build(), stop_on_violation=False)
    two = ray_explore(build, workers=2, stop_on_violation=False)
    assert seeded(summary(two)) == seeded(summary(one))
    assert_traces_real(build(), two)


def seeded(summary: tuple[Any, ...]) -> tuple[Any, ...]:
    """`summary`, its notes cut to their kind where this process's string hash is random.

    Which asymmetry the note "symmetry reduction off" names follows which member of an
    orbit stands for it, the one of least hash: the actors share it only where they share
    this process's hash seed (tox sets ``PYTHONHASHSEED``, and the local cluster's
    workers inherit it)."""
    if os.environ.get("PYTHONHASHSEED", "random") != "random":
        return summary
    notes = tuple(note.split(":")[0] for note in summary[6])
    return (*summary[:6], notes, *summary[7:])


@needs_ray
@settings(max_examples=8, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(random_systems())
def test_stopping_at_a_violation_finds_each_of_one_process_violations(
    cluster: Any, spec: SystemSpec
) -> None:
    build = functools.partial(build_system, spec)
    one = explore(build(), fingerprints=64)
    two = ray_explore(build, workers=2, fingerprints=64)
    assert two.ok == one.ok
    for result in one.results:
        if result.verdict == "violated":
            theirs = two.result(result.property.id)
            assert theirs.verdict == "violated"
            assert result.trace is not None and theirs.trace is not None
            assert len(theirs.trace.steps) == len(result.trace.steps)


def _raising_jobs() -> Any:
    def audit(tx: Tx) -> None:
        if tx.get("ticks") == 2:
            raise ZeroDivisionError("audit divided by zero")
        tx.require(False)

    return jobs(Action("audit", "auditor", audit))


@needs_ray
def test_an_action_that_raises_on_an_actor_is_reported_as_one_process_reports_it(
    cluster: Any,
) -> None:
    with pytest.raises(ActionRaisedError) as one:
        explore(_raising_jobs())
    with pytest.raises(ActionRaisedError) as two:
        ray_explore(_raising_jobs, workers=2)
    assert str(two.value).splitlines()[0] == str(one.value).splitlines()[0]
    assert two.value.trace is not None and len(two.value.trace) == 2


def _jobs_with_a_raising_property() -> Any:
    prop = always("boom", "raises at two running", lambda v: 1 // (2 - running(v)) >= 0)
    return jobs(properties=(prop,))


@needs_ray
def test_a_property_that_raises_on_an_actor_is_reported_with_its_trace(cluster: Any) -> None:
    with pytest.raises(PropertyRaisedError) as raised:
        ray_explore(_jobs_with_a_raising_property, workers=2, stop_on_violation=False)
    assert "property 'boom' raised ZeroDivisionError" in str(raised.value).splitlines()[0]
    last = raised.value.trace.steps[-1].state  # type: ignore[attr-defined]
    assert sum(1 for slot in last.slots if slot.snapshot.state == "running") == 2


@needs_ray
@pytest.mark.parametrize("off", [-1, 0, 1])
def test_the_state_bound_keeps_as_many_states_as_one_process(cluster: Any, off: int) -> None:
    """Bounded at 500 states, and at the space's size or one state off it: as many states
    kept, to the same depth, complete exactly where one process is."""
    build = factory("segments")
    space = explore(build(), stop_on_violation=False).states
    for bound in (500, space + off):
        one = explore(build(), stop_on_violation=False, max_states=bound)
        report = ray_explore(build, workers=2, stop_on_violation=False, max_states=bound)
        assert bounded(report) == bounded(one)
    assert not one.complete if off < 0 else one.complete


@needs_ray
def test_the_depth_bound_reports_what_one_process_reports(cluster: Any) -> None:
    """Cut at depth 12 of chunk_transfer's 30: the states within it, their transitions and
    coverage, the verdicts and the note, as one process; no cut at the space's depth."""
    build = factory("chunk_transfer")
    one = explore(build(), stop_on_violation=False, max_depth=12)
    report = ray_explore(build, workers=2, stop_on_violation=False, max_depth=12)
    assert summary(report) == summary(one)
    assert (report.stop, report.depth, report.complete) == ("max_depth", 12, False)
    whole = ray_explore(build, workers=2, stop_on_violation=False, max_depth=1000)
    assert (whole.stop, whole.complete) == ("", True)
    spent = ray_explore(build, workers=2, stop_on_violation=False, max_seconds=1e-9)
    assert (spent.stop, spent.complete, spent.complete_depth) == ("max_time", False, -1)


@needs_ray
def test_more_workers_than_the_cluster_has_cpus_are_refused_in_one_line(cluster: Any) -> None:
    with pytest.raises(RayError, match="3 workers, but the cluster has 2 CPUs"):
        ray_explore(factory("segments"), workers=3)


@needs_ray
def test_statecore_check_ray_reports_as_one_process(
    cluster: Any, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["check", "request_state_seed000_p1", "--ray", "--workers", "2", "-q"]) == 1
    ray_out = capsys.readouterr().out
    assert main(["check", "request_state_seed000_p1", "-q"]) == 1
    one_out = capsys.readouterr().out
    untimed = [re.sub(r"\d+\.\d+s|[\d,]+ states/s", "", out) for out in (ray_out, one_out)]
    assert untimed[0] == untimed[1]  # the verdicts, the traces, the coverage
    assert "FAIL request_state_seed000_p1: 1617 states" in ray_out


@needs_ray
def test_the_benchmark_prints_each_search_side_by_side(
    cluster: Any, capsys: pytest.CaptureFixture[str]
) -> None:
    bench = load_benchmark("ray_explore")
    assert bench.main(["--quick"]) == 0
    out = capsys.readouterr().out
    for row in ("one process", "2 forked processes", "Ray, 1 actor", "Ray, 2 actors"):
        assert re.search(rf"^{row} +3,281 +7,442 ", out, re.MULTILINE), row
    assert out.splitlines()[-1].startswith("RESULT ray_states_per_s_per_worker=")


@needs_ray
def test_the_ray_page_shows_what_the_benchmark_prints(
    cluster: Any, capsys: pytest.CaptureFixture[str]
) -> None:
    """docs/ray.md's throughput block: the same searches, states and transitions, and each
    row's figures in place (timings aside)."""
    page = (Path(__file__).resolve().parent.parent / "docs" / "ray.md").read_text()
    command = "$ python benchmarks/ray_explore.py --fingerprints 64\n"
    shown = page.split(command, 1)[1].split("```", 1)[0].splitlines()
    assert load_benchmark("ray_explore").main(command.split()[3:]) == 0
    printed = capsys.readouterr().out.splitlines()

    def untimed(line: str) -> list[str]:
        words = line.split()
        if line.startswith("RESULT"):
            return [word.split("=")[0] for word in words]
        numbers = [i for i, word in enumerate(words) if re.fullmatch(r"[\d,.]+", word)]
        return words[: numbers[2]] if len(numbers) > 2 else words  # names, states, transitions

    assert [untimed(line) for line in printed] == [untimed(line) for line in shown]


# -- without Ray -----------------------------------------------------------------------


def test_without_ray_the_backend_names_the_extra(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "ray", None)
    with pytest.raises(RayError, match=r"pip install 'statecore\[ray\]'"):
        ray_explore(factory("segments"))


def test_without_ray_check_ray_fails_in_one_line(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setitem(sys.modules, "ray", None)
    assert main(["check", "segments", "--ray"]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1
    assert "Ray" in err and "pip install 'statecore[ray]'" in err


@needs_ray
def test_a_system_the_actors_cannot_build_fails_in_one_line(cluster: Any) -> None:
    here = os.getpid()  # the actors are other processes

    def elsewhere() -> Any:
        if os.getpid() != here:
            raise ModuleNotFoundError("No module named 'lifecycles'")
        return factory("segments")()

    with pytest.raises(RayError, match=r"could not build system 'segments': ModuleNotFoundError"):
        ray_explore(elsewhere, workers=2)


@needs_ray
@pytest.mark.parametrize("fingerprints", [0, 64])
def test_a_model_making_equal_values_that_differ_is_searched_here_without_memos(
    cluster: Any, fingerprints: int
) -> None:
    """``x`` holds 1 in one state and True in the other: the actors' search stops, and this
    process searches without memos, as `explore` does (both states, the violation)."""
    build = functools.partial(test_equal_states.one_or_true, True, 1)
    report = ray_explore(build, workers=2, stop_on_violation=False, fingerprints=fingerprints)
    expected = explore(build(), stop_on_violation=False, fingerprints=fingerprints)
    assert summary(report) == summary(expected) and report.states == 5
    assert report.notes[0].startswith("memos off: the values ")
