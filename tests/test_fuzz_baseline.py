"""The hand-written Hypothesis baseline of ``benchmarks/fuzz.py`` still tests the real adapter.

Its figures (time to each mutant) are only worth printing if it passes the
unmutated 0.30.0 adapter and fails a mutant by one of its own checks; a
harness that drifted from the binding's would "find" every mutant with an
AttributeError. Needs the vLLM stack (``tox -e vllm``); skipped without it.
"""

from __future__ import annotations

import pytest
from test_cli_benchmarks import load

pytest.importorskip("vllm_omni")

from statecore.models.bindings.vllm_omni import MUTANTS, real_classes

real_classes()  # the 15-50 s import, once per process
BENCH = load("fuzz")


def test_the_baseline_passes_the_unmutated_adapter() -> None:
    attempt = BENCH.first_failure(BENCH.baseline_machine(), 0, 120.0, 60)
    assert not attempt.found, attempt.what
    assert attempt.examples >= 60


def test_the_baseline_finds_a_mutant_by_its_own_check() -> None:
    (mutant,) = [m for m in MUTANTS if m.name == "cancelled_vetoes_terminal"]
    with BENCH.mutated(mutant):
        attempt = BENCH.first_failure(BENCH.baseline_machine(), 0, 120.0, 100_000)
    assert attempt.found and attempt.what == BENCH.TERMINAL_LOST


def test_a_tool_failing_the_unmutated_adapter_stops_the_benchmark() -> None:
    broken = BENCH.Attempt(True, 0.1, 3, "AttributeError")
    with pytest.raises(SystemExit, match=r"the baseline fails on the unmutated 0\.30\.0 adapter"):
        BENCH.require_clean("the baseline", broken)
    BENCH.require_clean("the baseline", BENCH.Attempt(False, 1.0, 60, ""))


def test_the_workers_table_runs_each_worker_count_on_the_real_adapter() -> None:
    """Part 3 of the benchmark: 1 and 2 worker processes fuzz the real adapter for the
    budget each, and a row's figures are its workers' (the steps summed, one rate each)."""
    mode = BENCH.Mode(1, 1, 1.0, 30.0, 100, 10, workers_budget=3)
    one, two = BENCH.measure_workers(mode)
    assert (one.workers, len(one.per_worker)) == (1, 1)
    assert (two.workers, len(two.per_worker)) == (2, 2)
    for row in (one, two):
        assert row.steps > 0 and all(rate > 0 for rate in row.per_worker)
        assert row.seconds >= mode.workers_budget
        assert row.steps_per_second == pytest.approx(row.steps / row.seconds)
