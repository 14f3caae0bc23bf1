"""``statecore check --jobs N``: targets side by side, reported exactly as one process reports them.

Whatever the number of processes, the same stdout (but the seconds), the same
``--json`` document, the same trace files and regression tests, and the same
exit code; a target that fails in its process fails as it does alone.
"""

from __future__ import annotations

import json
import os
import re
import time
from pathlib import Path
from typing import Any

import pytest
from test_cli import run as run_cli

from statecore.cli import check as cli_check
from statecore.cli import check_bounds
from statecore.cli.check_jobs import jobs_for

SECONDS = re.compile(r"\d+\.\d\ds|[\d,]+ states/s")

# A model, variants with findings (exit 1), a target that does not load and one
# whose action raises, in an order that puts the failures between successes.
PASSING = ["segments", "stage_pair", "receiver_system"]
FINDING = ["stage_pair_failures_logged", "receiver_no_recheck", "segments_0_30_0"]


def run(*argv: str) -> tuple[int, str, str]:
    """``statecore ARGV`` in this process, its seconds masked."""
    code, out, err = run_cli(*argv)
    return code, SECONDS.sub("#", out), err


def _json(text: str) -> dict[str, Any]:
    doc: dict[str, Any] = json.loads(text)
    for entry in doc["targets"]:
        del entry["seconds"], entry["states_per_s"]
    return doc


def _files(directory: Path) -> dict[str, str]:
    return {p.name: p.read_text() for p in sorted(directory.iterdir())}


@pytest.mark.parametrize("targets", [PASSING, PASSING + FINDING], ids=["pass", "finding"])
def test_side_by_side_reports_what_one_process_reports(targets: list[str], tmp_path: Path) -> None:
    reports = {}
    for jobs in ("1", "2", "3"):
        traces, tests = tmp_path / f"traces{jobs}", tmp_path / f"tests{jobs}"
        extra = ["--trace-out", str(traces), "--regression-out", str(tests)]
        code, out, _ = run("check", *targets, "--jobs", jobs, *extra)
        jcode, jout, _ = run("check", *targets, "--jobs", jobs, "--json")
        written = _files(traces) if traces.exists() else {}
        tests_written = _files(tests) if tests.exists() else {}
        out = out.replace(str(traces), "TRACES")
        reports[jobs] = (code, out, jcode, _json(jout.replace(str(traces), "TRACES")))
        reports[jobs] += (written, tests_written)
    assert reports["1"] == reports["2"] == reports["3"]
    code, out, jcode, doc, written, _ = reports["1"]
    assert code == jcode == (1 if len(targets) > len(PASSING) else 0)
    assert [e["name"] for e in doc["targets"]] == targets
    assert bool(written) == (code == 1)
    assert out.index("stage_pair:") < out.index("receiver_system:")


@pytest.mark.parametrize(
    "failing, exit_code, message",
    [
        ("no_such_target", 2, "no_such_target"),
        ("stage_pair_failures_logged", 1, None),
    ],
)
def test_a_failing_target_fails_as_it_does_alone(
    failing: str, exit_code: int, message: str | None
) -> None:
    targets = ["segments", failing, "stage_pair"]
    alone = run("check", *targets, "--jobs", "1")
    side_by_side = run("check", *targets, "--jobs", "2")
    assert side_by_side == alone
    assert alone[0] == exit_code
    if message is not None:
        assert message in alone[2] and "not checked: stage_pair" in alone[1]


def test_an_error_in_a_worker_is_raised_again_here(monkeypatch: pytest.MonkeyPatch) -> None:
    """A target whose check raises in its process is checked again in this one."""
    real = cli_check.explore
    calls: list[str] = []

    def explore(system: Any, **kwargs: Any) -> Any:
        calls.append(system.name)
        if system.name == "stage_pair":
            raise RuntimeError("boom in stage_pair")
        return real(system, **kwargs)

    monkeypatch.setattr(cli_check, "explore", explore)
    code, out, err = run("check", "segments", "stage_pair", "receiver_system", "--jobs", "2")
    assert code == 3  # statecore's own failure, as without --jobs
    assert "boom in stage_pair" in err
    assert "segments:" in out and "receiver_system:" not in out.split("not checked")[0]
    assert "not checked: receiver_system" in out
    assert calls == ["stage_pair"]  # only the parent's call is seen here: the rest were forked


def test_jobs_for_keeps_one_process_where_side_by_side_cannot_help() -> None:
    def args(**kw: Any) -> Any:
        base = {"jobs": 4, "ray": None, "workers": None}
        return type("A", (), {**base, **kw})()

    assert jobs_for(args(), ["a"]) == 1
    assert jobs_for(args(), ["a", "b"]) == 2
    assert jobs_for(args(jobs=1), ["a", "b", "c"]) == 1
    assert jobs_for(args(workers=2), ["a", "b"]) == 1
    assert jobs_for(args(ray="auto"), ["a", "b"]) == 1


def test_the_default_memory_bound_is_split_between_the_processes() -> None:
    def args(**kw: Any) -> Any:
        return type("A", (), {"max_memory": None, **kw})()

    whole = check_bounds.memory_bound(args())
    if whole is None:
        pytest.skip("this system does not tell its physical memory")
    assert check_bounds.memory_bound(args(memory_share=2)) == whole // 2
    assert check_bounds.memory_bound(args(max_memory=1.0, memory_share=2)) == 2**30


def test_a_report_kept_for_later_is_coloured_as_on_the_terminal() -> None:
    from statecore.cli.check_jobs import Printed
    from statecore.cli.common import colour

    assert colour("PASS", "32", Printed(True)) == "\033[32mPASS\033[0m"
    assert colour("PASS", "32", Printed(False)) == "PASS"


# -- the processes -----------------------------------------------------------------------


def test_side_by_side_gives_the_results_in_order_and_raises_a_workers_error() -> None:
    from statecore.cli.check_jobs import side_by_side

    def work(name: str) -> Any:
        if name == "bad":
            raise ValueError(f"no target {name}")
        return name.upper(), os.getpid()

    results = side_by_side(["a", "b", "c", "bad", "d"], work, 2)
    got = [next(results) for _ in range(3)]
    assert [(name, value[0]) for name, value in got] == [("a", "A"), ("b", "B"), ("c", "C")]
    assert len({pid for _, (_, pid) in got} | {os.getpid()}) == 4  # each in its own process
    with pytest.raises(ValueError, match="no target bad"):
        next(results)


def test_a_long_first_target_does_not_hold_back_the_others(tmp_path: Path) -> None:
    """With two processes, the targets after a long first one are all checked while it runs."""
    from statecore.cli.check_jobs import side_by_side

    others = ["b", "c", "d"]

    def work(name: str) -> list[str]:
        if name != "long":
            (tmp_path / name).touch()
            return []
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            if all((tmp_path / other).exists() for other in others):
                break
            time.sleep(0.01)
        return sorted(p.name for p in tmp_path.iterdir())

    results = list(side_by_side(["long", *others], work, 2))
    assert [name for name, _ in results] == ["long", *others]
    assert results[0][1] == others  # each other target was done before the first one ended


def test_side_by_side_names_a_worker_that_died() -> None:
    from statecore.cli.check_jobs import side_by_side

    with pytest.raises(RuntimeError, match="'gone' died before it reported"):
        list(side_by_side(["gone"], lambda name: os._exit(3), 2))


def test_side_by_side_kills_the_workers_still_running_when_the_caller_stops(
    tmp_path: Path,
) -> None:
    from statecore.cli.check_jobs import side_by_side

    def work(name: str) -> str:
        written = tmp_path / f"{name}.part"  # renamed whole: the file is never seen empty
        written.write_text(str(os.getpid()))
        written.replace(tmp_path / name)
        if name == "slow":
            time.sleep(120)
        return name

    results = side_by_side(["fast", "slow"], work, 2)
    assert next(results) == ("fast", "fast")
    deadline = time.monotonic() + 30
    while not (tmp_path / "slow").exists() and time.monotonic() < deadline:
        time.sleep(0.01)
    results.close()  # the caller stops (an error, Ctrl-C): the slow worker is killed and reaped
    with pytest.raises(ProcessLookupError):
        os.kill(int((tmp_path / "slow").read_text()), 0)
