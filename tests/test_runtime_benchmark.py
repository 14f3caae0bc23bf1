"""benchmarks/runtime.py runs (``--quick``), and its memory workloads keep the memo bounded.

No wall-clock figure is asserted: only that every workload runs, that the
four implementations agree, and the memo's entry counts.
"""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from types import ModuleType

import pytest

from statecore import runtime

BENCHMARK = Path(__file__).resolve().parent.parent / "benchmarks" / "runtime.py"
LIMIT = 2_000  # below the quick run's 5,000-value domain, so the bound is reached


def load() -> ModuleType:
    spec = importlib.util.spec_from_file_location("runtime_benchmark", BENCHMARK)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses look their module up there
    spec.loader.exec_module(module)
    return module


def test_quick_run_reports_three_workloads_and_a_flat_memo(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    pytest.importorskip("transitions")
    pytest.importorskip("statemachine")
    monkeypatch.setattr(runtime, "CACHE_LIMIT", runtime.CACHE_LIMIT)  # main sets it
    results = load().main(["--quick", f"--memo-limit={LIMIT}"])
    printed = capsys.readouterr().out
    assert "RESULT warm_speedup_vs_transitions=" in printed
    assert set(results["fire"]) == {
        "statecore",
        "transitions",
        "python-statemachine",
        "hand-written",
    }
    assert all(len(figures) == 3 and min(figures) > 0 for figures in results["fire"].values())
    memory = dict(results["memory"])
    for name in ("unbounded nbytes=i", "out-of-domain ok=i"):
        counts = [memo for _, _, memo in memory[name]]
        assert counts[1] == counts[-1], (name, counts)  # nothing kept per distinct payload
    wide = [memo for _, _, memo in memory["a wide domain, n=i"]]
    assert max(wide) == wide[-1] == LIMIT  # grew to the bound, then stayed there
