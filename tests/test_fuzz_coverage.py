"""``statecore fuzz --coverage``: the implementation's lines and branches a run reached."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import pytest
from test_cli import run
from test_cli_benchmarks import load

from statecore.fuzzing.coverage import (
    CodeCoverage,
    FunctionCoverage,
    compact_ranges,
    parse_target,
)

MODULE = "statecore.models.implementations.request_state"
FUZZ = ("fuzz", "request_state_system", "--adapter", "request-state-accessor")


def fuzz_json(*extra: str) -> dict[str, Any]:
    code, out, err = run(*FUZZ, "--max-examples", "10", "--json", *extra)
    assert code == 0, err
    data: dict[str, Any] = json.loads(out)
    return data


def test_every_function_of_the_module_with_consistent_figures() -> None:
    reached = fuzz_json("--coverage", MODULE)["code_coverage"]
    assert reached["module"] == MODULE and reached["file"].endswith("request_state.py")
    rows = {f["name"]: f for f in reached["functions"]}
    assert tuple(rows) == parse_target(MODULE).functions
    for f in rows.values():
        assert 0 <= f["branches_taken"] <= f["branches"] and 0 <= f["lines_run"] <= f["lines"]
        assert 0.0 <= f["percent"] <= 100.0
        assert (f["missed_lines"] == "") == (f["lines_run"] == f["lines"])
    # The binding never prints the accessor; it opens a generation at every new sender.
    assert rows["RequestStateAccessor.__repr__"]["percent"] == 0.0
    assert rows["RequestStateAccessor.__repr__"]["missed_lines"] != ""
    opened = rows["RequestStateAccessor.open"]
    assert opened["percent"] > 0 and opened["lines_run"] > 0 and opened["branches_taken"] > 0
    total = reached["total"]
    for key in ("lines", "lines_run", "branches", "branches_taken"):
        assert total[key] == sum(f[key] for f in rows.values())
    assert 0 < total["branches_taken"] < total["branches"]


def test_named_functions_only_by_name_or_class_and_name() -> None:
    spec = f"{MODULE}:open,RequestStateView.resolve,get_or_create"
    reached = fuzz_json("--coverage", spec)["code_coverage"]
    assert [f["name"] for f in reached["functions"]] == [
        "RequestStateAccessor.open",
        "RequestStateView.resolve",
        "RequestStateView.get_or_create",  # a bare name: every function of that name
        "RequestStateAccessor.get_or_create",
    ]


def test_the_text_report_has_a_line_per_function_and_a_total() -> None:
    code, out, _ = run(*FUZZ, "--max-examples", "5", "--coverage", f"{MODULE}:open,__repr__")
    assert code == 0
    table = out.split(f"  code coverage of {MODULE} (coverage.py, branches):\n")[1].splitlines()
    assert [line.split()[0] for line in table] == [
        "RequestStateAccessor.open",
        "RequestStateView.__repr__",
        "RequestStateAccessor.__repr__",
        "total",
    ]
    assert " 0.0%  missed " in table[2]


def test_without_the_flag_the_json_has_no_code_coverage() -> None:
    assert "code_coverage" not in fuzz_json()


@pytest.mark.parametrize(
    ("spec", "says"),
    [
        ("no_such_module_xyz", "importing it raised ModuleNotFoundError"),
        (f"{MODULE}:no_such_function", "defines no function 'no_such_function'"),
        (f"{MODULE}:open,,cleanup", "an empty function name"),
        (":open", "give MODULE or MODULE:FUNC,FUNC"),
    ],
)
def test_a_bad_module_or_function_is_one_line_before_fuzzing(
    spec: str, says: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr("statecore.fuzzing.fuzz.fuzz", _must_not_fuzz)
    code, out, err = run(*FUZZ, "--coverage", spec)
    assert code == 2 and out == ""
    (line,) = err.splitlines()
    assert line.startswith("statecore: error: --coverage ") and says in line


def test_without_coverage_py_exit_2_naming_the_extra(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr("statecore.fuzzing.fuzz.fuzz", _must_not_fuzz)
    monkeypatch.setitem(sys.modules, "coverage", None)  # `import coverage` fails
    code, out, err = run(*FUZZ, "--coverage", MODULE)
    assert code == 2 and out == ""
    (line,) = err.splitlines()
    assert line.startswith("statecore: error: statecore fuzz needs coverage.py")
    assert "install the 'coverage' extra: pip install -e '.[coverage]'" in line


def _must_not_fuzz(*args: object, **kwargs: object) -> None:
    raise AssertionError("fuzzed although the command line was refused")


def test_missed_lines_are_compact_ranges_over_statements() -> None:
    statements = [10, 11, 12, 14, 15, 20, 22]
    assert compact_ranges(statements, [11, 12, 14, 22]) == "11-14, 22"
    assert compact_ranges(statements, []) == ""
    f = FunctionCoverage(
        "f", 7, 4, 4, 1, (11, 12, 14), ((10, 11), (15, 20), (20, -1), (12, 13)), tuple(statements)
    )
    # A branch into or out of a missed line is not repeated; an exit is named.
    assert f.missed == "11-14, 15->20, 20->exit"
    assert f.percent == pytest.approx(100 * 5 / 11)


def test_the_benchmark_sums_sender_and_receiver_apart(capsys: pytest.CaptureFixture[str]) -> None:
    bench = load("coverage")
    names = (*bench.SENDER, *bench.RECEIVER)
    functions = tuple(
        FunctionCoverage(
            f"{bench.CLASS}.{n}", 4, 2, 2, int(n in bench.SENDER), (5, 6), (), (3, 4, 5, 6)
        )
        for n in names
    )
    sender, receiver, overall = bench.show(CodeCoverage("m", Path("m.py"), functions))
    assert (sender.branches_taken, sender.branches) == (len(bench.SENDER), 2 * len(bench.SENDER))
    assert (receiver.branches_taken, receiver.branches) == (0, 2 * len(bench.RECEIVER))
    assert overall.branches == 2 * len(names)
    out = capsys.readouterr().out
    assert f"total: branches 9/28 {100 * 9 / 28:.1f}%, lines 28/56" in out
    assert "  load_async" in out and "missed 5-6" in out
