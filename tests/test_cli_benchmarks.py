"""The benchmark scripts' RESULT lines: one denominator per kind of target."""

from __future__ import annotations

import importlib.util
import subprocess
import sys
from collections import Counter
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parent.parent


def load(name: str) -> ModuleType:
    spec = importlib.util.spec_from_file_location(
        f"benchmark_{name}", ROOT / "benchmarks" / f"{name}.py"
    )
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses look their module up
    spec.loader.exec_module(module)
    return module


def test_fuzz_reports_real_adapter_mutants_and_model_variants_apart() -> None:
    bench = load("fuzz")

    def outcome(*found: bool) -> object:
        seconds = [1.0 + i for i in range(len(found))]
        return bench.Outcome(tuple(bench.Attempt(f, s, 10, "x") for f, s in zip(found, seconds)))

    hit, miss, none = outcome(True, True, True), outcome(False, False, False), bench.Outcome(None)
    targets = [
        bench.Target("m1", "mutant", hit, hit),
        bench.Target("m2", "mutant", hit, miss),
        bench.Target("m3", "mutant", miss, miss),
        bench.Target("v1", "variant", hit, none),
        bench.Target("v2", "variant", hit, none),
    ]
    real, variants = bench.result_lines(123.4, targets)
    assert real.startswith("RESULT real_adapter_steps_per_s=123 ")
    assert "mutants_found=2/3 " in real and "baseline_mutants_found=1/3 " in real
    assert "variant" not in real
    assert variants.startswith("RESULT model_variants_found=2/2 ")
    assert "mutant" not in variants


def test_fuzz_runs_more_seeds_on_a_target_only_while_they_are_cheap(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    bench = load("fuzz")
    mode = bench.Mode(
        seeds=3,
        max_seeds=9,
        seed_budget=1.0,
        cap=30.0,
        max_examples=10,
        throughput_examples=1,
        workers_budget=1.0,
    )
    seeds_run: list[int] = []

    def searched(seconds: float) -> object:
        def first_failure(machine: object, seed: int, cap: float, max_examples: int) -> object:
            seeds_run.append(seed)
            return bench.Attempt(True, seconds, 1, "x")

        return first_failure

    monkeypatch.setattr(bench, "first_failure", searched(0.05))
    cheap = bench.run_seeds(lambda: object, mode)
    assert seeds_run == list(range(9)) and cheap.hits == "9/9"  # 9 x 0.05 s is under budget

    seeds_run.clear()
    monkeypatch.setattr(bench, "first_failure", searched(0.3))
    dear = bench.run_seeds(lambda: object, mode)
    assert seeds_run == [0, 1, 2, 3] and dear.hits == "4/4"  # 1.2 s spent after 4 runs

    seeds_run.clear()
    monkeypatch.setattr(bench, "first_failure", searched(30.0))
    capped = bench.run_seeds(lambda: object, mode)
    assert seeds_run == [0, 1, 2] and capped.hits == "3/3"  # never fewer than `seeds`


def test_explore_counts_what_fingerprinting_adds_per_state(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """`benchmarks/explore.py --instructions`: both stores search the same states, and the
    fingerprints cost instructions on top of the full states' search; so on the first states
    of the scale goal's model too."""
    monkeypatch.syspath_prepend(str(ROOT / "benchmarks"))  # its sibling module, scale_goal
    bench = load("explore")
    bound = bench.Bound(2, 1, 2)
    full_states, full = bench.instructions_per_state(bound, 0)
    fp_states, fingerprinted = bench.instructions_per_state(bound, 64)
    assert full_states == fp_states == bench.explore(bench.model(bound)).states
    assert 0 < full < fingerprinted
    goal_model = bench.build(bench.ChunkTransferConfig(ids=2, generations=2, saves=1, segments=1))
    first = [bench.instructions_per_state(goal_model, bits, False, 300) for bits in (0, 64)]
    assert [states for states, _ in first] == [300, 300]
    assert 0 < first[0][1] < first[1][1]


@pytest.mark.parametrize("workers", [1, 2])
def test_the_side_by_side_runs_report_the_search_they_ran(
    monkeypatch: pytest.MonkeyPatch, workers: int
) -> None:
    """`benchmarks/explore.py --measure` (a row of the 1 against 2 workers tables): the
    search's states and verdicts, its CPU seconds, and its fingerprint store's bytes."""
    monkeypatch.syspath_prepend(str(ROOT / "benchmarks"))
    bench = load("explore")
    got = bench.measure("2,1,2", 64, workers, None)
    report = bench.explore(bench.model(bench.Bound(2, 1, 2)), stop_on_violation=False)
    assert (got["states"], got["complete"]) == (report.states, True)
    assert got["verdicts"] == sorted((r.property.id, r.verdict) for r in report.results)
    assert got["cpu"] > 0 and got["store"] is not None and 0 < got["store"] < 64


@pytest.mark.parametrize("workers", [1, 2])
def test_the_scale_goal_reports_the_check_it_ran(
    monkeypatch: pytest.MonkeyPatch, workers: int
) -> None:
    """`benchmarks/scale_goal.py`'s figures are the search's: states, depth, verdicts, and the
    new states of each depth (one process's, on any number of workers)."""
    monkeypatch.syspath_prepend(str(ROOT / "benchmarks"))
    goal = load("scale_goal")
    config = goal.ChunkTransferConfig(ids=1, generations=2, saves=1, segments=1)
    bounds: list[int] = []
    explore = goal.explore

    def bounded(*args: Any, **kwargs: Any) -> Any:
        bounds.append(kwargs["max_memory"])
        return explore(*args, **kwargs)

    monkeypatch.setattr(goal, "explore", bounded)
    got = goal.complete_check(600, workers, config)
    # The goal's memory in all: `explore` shares its bound out among the workers.
    kept_back = goal.COORDINATOR_BYTES if workers > 1 else 0
    assert bounds == [goal.GOAL_BYTES - kept_back]
    report = explore(goal.build(config), stop_on_violation=False)
    assert (got["states"], got["depth"], got["complete"]) == (report.states, report.depth, True)
    assert (got["complete_depth"], got["stop"]) == (report.depth, "")
    assert got["judged"] == got["properties"] == len(report.results)
    assert got["verdicts"] == dict(Counter(r.verdict for r in report.results))
    violated = [r.property.id for r in report.results if r.verdict == "violated"]
    assert got["violated"] == violated
    assert len(got["levels"]) == report.depth + 1 and sum(got["levels"]) == report.states
    if workers > 1:
        assert got["levels"] == goal.complete_check(600, 1, config)["levels"]
    spent = goal.complete_check(1e-9, workers, config)  # the budget spent before any level
    assert (spent["complete"], spent["stop"], spent["complete_depth"]) == (False, "max_time", -1)
    assert spent["levels"] == got["levels"][:1]  # the initial states: no level cut short


def test_each_search_against_times_has_its_own_result_key() -> None:
    """`benchmarks/against.py`'s RESULT line names each search apart."""
    bench = load("against")
    keys = [bench.result_key(search) for search in bench.SEARCHES]
    assert len(set(keys)) == len(keys)
    assert "chunk_transfer_ids2_fp" in keys


def test_against_runs_each_side_on_its_own_package(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """`benchmarks/against.py`: REV's tree laid out as the package, and each timed search
    imports the package it was given (else a pair would compare a tree with itself)."""
    bench = load("against")
    base = bench.revision("HEAD", tmp_path / "rev")
    assert (base / "statecore" / "models" / "__init__.py").is_file()
    assert (base / "statecore" / "spec" / "__init__.py").is_file()
    small = "from statecore.registry import bundled\n"
    small += "system = next(t for t in bundled() if t.name == 'receiver_system').load()\n"
    monkeypatch.setitem(bench.SEARCHES, "small", small)
    this = bench.lay_out(ROOT, tmp_path / "this")
    (ratio,) = bench.pairs(base, this, "small", 1)
    assert ratio > 0
    seconds, states = bench.timed(base, "small")
    assert states == 640 and seconds > 0
    elsewhere = tmp_path / "empty"
    (elsewhere / "statecore").mkdir(parents=True)  # a package that is not statecore's whole tree
    with pytest.raises((subprocess.CalledProcessError, SystemExit)):  # it fails, or is refused
        bench.timed(elsewhere, "small")


def test_the_reduction_table_reports_the_searches_it_ran(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """`benchmarks/explore.py --reductions N`: each row's plain and reduced states are those
    searches' (POR judging no property against a plain search judging none), and a POR row
    reports the share of states it expanded with a proper ample set as the reducer counted."""
    monkeypatch.syspath_prepend(str(ROOT / "benchmarks"))
    goal = load("scale_goal")
    goal.reduction_factors(500)
    rows = [line.split() for line in capsys.readouterr().out.splitlines() if "POR" in line]
    small = goal.build(goal.ChunkTransferConfig(ids=2, generations=1, saves=0, segments=0))
    plain = goal.explore(small, symmetry=False, stop_on_violation=False)
    bare = goal.explore(small, symmetry=False, stop_on_violation=False, properties=())
    reduced = goal.explore(small, por=True, stop_on_violation=False, properties=())
    assert [r[0] for r in rows] == ["POR", "POR,", "POR", "POR,"]
    judged = goal.explore(small, por=True, stop_on_violation=False)
    assert rows[0][5:7] == [f"{plain.states}", f"{judged.states}"]
    assert rows[1][4:6] == [f"{bare.states}", f"{reduced.states}"]
    assert bare.states < plain.states  # (the monitors' states count in the plain search)
    assert rows[3][4:6] == ["500", "500"]
    share = goal.por_states(
        goal.ChunkTransferConfig(ids=2, generations=1, saves=0, segments=0), None, ()
    )[1]
    assert rows[1][7] == f"{share:.1%}"


def test_the_por_table_reports_the_searches_it_ran(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """`benchmarks/por.py`: a row's states and transitions, with POR and without, are those
    searches' (no symmetry), and its factors their ratios."""
    monkeypatch.syspath_prepend(str(ROOT / "benchmarks"))
    bench = load("por")
    model = bench.explore_benchmark()
    system = model.model(model.QUICK[3])
    factors = bench.compare("explore model", system)
    row = capsys.readouterr().out.split()
    full = bench.explore(system, symmetry=False, stop_on_violation=False)
    reduced = bench.explore(system, symmetry=False, stop_on_violation=False, por=True)
    assert row[2:4] == [f"{full.states}", f"{reduced.states}"]
    assert row[5:7] == [f"{full.transitions}", f"{reduced.transitions}"]
    assert factors == (full.states / reduced.states, full.transitions / reduced.transitions)
    assert "VERDICTS DIFFER" not in row
