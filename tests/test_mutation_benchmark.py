"""benchmarks/mutation.py's tally: one denominator for both tools, and saved verdicts read back.

The fuzzing itself needs the vLLM stack (the benchmark is run by hand); what it
makes of the verdicts is checked here on made-up mutants.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from test_cli_benchmarks import load

bench = load("mutation")


@dataclass(frozen=True)
class FakeMutant:
    id: str
    function: str
    where: str = "x.py:1"


def verdicts(**status: str) -> dict[str, Any]:
    return {mutant_id: bench.Verdict(s) for mutant_id, s in status.items()}


def test_both_tools_share_one_denominator(capsys: pytest.CaptureFixture[str]) -> None:
    todo = [
        FakeMutant("a", "C.save"),
        FakeMutant("b", "C.save"),
        FakeMutant("c", "C.save"),  # declared equivalent: out of both scores
        FakeMutant("d", "C.finish"),  # does not import: out of both scores
        FakeMutant("e", "C.finish"),  # hangs under statecore: not a kill
    ]
    ours = verdicts(a="killed", b="survived", c="survived", d="crashed", e="timeout")
    theirs = verdicts(a="killed", b="killed", c="killed", d="crashed", e="survived")
    result = bench.print_report(todo, {"c": "a log call"}, ours, theirs)
    assert result == (
        "RESULT mutants=5 non_equivalent=3 statecore_killed=1 statecore_score=33.3% "
        "baseline_killed=2 baseline_score=66.7% baseline_only=1"
    )
    out = capsys.readouterr().out
    assert "killed by both 1, by statecore only 0, by the baseline only 1, by neither 1" in out
    assert "baseline only: 'b'" in out
    rows = {line.split()[0]: line.split()[1:] for line in out.splitlines() if line[:1].isalpha()}
    assert rows["save"][:6] == ["3", "1", "2", "1", "1", "0"]  # mutants equiv n-eq killed surv hang
    assert rows["finish"][:6] == ["2", "0", "1", "0", "0", "1"]


def test_without_the_baseline_only_statecore_is_scored(capsys: pytest.CaptureFixture[str]) -> None:
    todo = [FakeMutant("a", "C.save"), FakeMutant("b", "C.save")]
    result = bench.print_report(todo, {}, verdicts(a="killed", b="survived"), None)
    assert result == "RESULT mutants=2 non_equivalent=2 statecore_killed=1 statecore_score=50.0%"
    assert "killed by both" not in capsys.readouterr().out


def test_saved_reports_and_progress_lines_read_back(tmp_path: Path) -> None:
    report = {
        "target": bench.TARGET,
        "module": bench.MODULE,
        "mutants": [
            {"id": "a", "status": "killed", "finding": {"kind": "crash", "property": "crash"}},
            {"id": "b", "status": "equivalent", "finding": None},
        ],
    }
    first = tmp_path / "first.json"
    first.write_text(json.dumps(report), encoding="utf-8")
    report["mutants"] = [{"id": "a", "status": "survived", "finding": None}]
    later = tmp_path / "later.json"
    later.write_text(json.dumps(report), encoding="utf-8")
    read = bench.saved_statecore([str(first), str(later)])
    assert {k: v.status for k, v in read.items()} == {"a": "survived", "b": "survived"}
    log = tmp_path / "run.err"
    log.write_text(
        "statecore: fuzzing chunk_transfer / vllm-omni: mutant 3/12 killed: "
        "swap-is C.f: if x is None: (/a/b.py:12)\n",
        encoding="utf-8",
    )
    assert bench.logged_statecore([str(log)])["swap-is C.f: if x is None:"].killed
