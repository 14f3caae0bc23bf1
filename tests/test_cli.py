"""The command line's contract: one exit code per outcome, one-line errors, nothing lost.

The bad inputs are a corpus: user modules with the defects and a table of command
lines (``tests/bad_inputs/cli/cases.toml``), each with its exit code and a fragment
of its message. The tests here run that table, then the outcomes a table cannot
set up: a variant not caught, a replayed violation, Ctrl-C, a crash inside
statecore, a progress line, an output that fails after the work was done.
"""

from __future__ import annotations

import argparse
import errno
import io
import json
import math
import os
import shutil
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest

from statecore import cli
from statecore.check.explore import ExplorationInterrupted, Progress, Report, explore
from statecore.cli import check as cli_check
from statecore.cli import main
from statecore.errors import StatecoreError
from statecore.registry import Target

try:
    import tomllib
except ModuleNotFoundError:  # Python 3.10: pytest brings tomli
    import tomli as tomllib

ROOT = Path(__file__).resolve().parent.parent
CORPUS = ROOT / "tests" / "bad_inputs" / "cli"
CASES: list[dict[str, Any]] = tomllib.loads((CORPUS / "cases.toml").read_text())["case"]
MODULES = sorted(
    {p.name.split(".")[0] for p in CORPUS.iterdir() if p.name.endswith((".py", ".py.txt"))}
)
EXIT_CODES = {0, 1, 2, 3, 4, 130}


def install_corpus(directory: Path) -> Path:
    """The corpus modules as an importable folder (``x.py.txt`` installed as ``x.py``)."""
    for source in CORPUS.iterdir():
        if source.name.endswith(".py.txt"):
            shutil.copy(source, directory / source.name.removesuffix(".txt"))
        elif source.suffix == ".py":
            shutil.copy(source, directory / source.name)
    return directory


@pytest.fixture(scope="module")
def corpus_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return install_corpus(tmp_path_factory.mktemp("user_modules"))


@pytest.fixture
def scratch(corpus_dir: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    """A scratch working directory with the corpus importable; each test imports it afresh."""
    monkeypatch.syspath_prepend(str(corpus_dir))
    monkeypatch.chdir(tmp_path)
    yield tmp_path
    for name in MODULES:
        sys.modules.pop(name, None)


def run(*argv: str) -> tuple[int, str, str]:
    """``statecore ARGV`` in this process: (exit code, stdout, stderr)."""
    out, err = io.StringIO(), io.StringIO()
    saved = sys.stdout, sys.stderr
    sys.stdout, sys.stderr = out, err
    try:
        code = main(list(argv))
    finally:
        sys.stdout, sys.stderr = saved
    return code, out.getvalue(), err.getvalue()


# -- the table of bad inputs ------------------------------------------------------------


@pytest.mark.parametrize("case", CASES, ids=[c["id"] for c in CASES])
def test_case(case: dict[str, Any], scratch: Path) -> None:
    a_file = scratch / "a_file.txt"
    a_file.write_text("not a directory\n")

    def fill(text: str) -> str:
        return text.replace("{tmp}", str(scratch)).replace("{file}", str(a_file))

    code, out, err = run(*[fill(a) for a in case["argv"]])
    assert code == case["exit"], f"stdout:\n{out}\nstderr:\n{err}"
    assert "Traceback" not in err
    first = err.splitlines()[0] if err else ""
    for fragment in case.get("stderr", []):
        assert fill(fragment) in first, err
    for fragment in case.get("stdout", []):
        assert fill(fragment) in out, out
    if case["exit"] == 2:
        assert first.startswith("statecore: error: "), err
        if case.get("lines", "one") == "one":
            assert len(err.splitlines()) == 1, err


def test_the_table_covers_every_exit_code_a_command_line_can_set_up() -> None:
    assert {c["exit"] for c in CASES} == EXIT_CODES - {3, 130}  # those two: below
    assert len({c["id"] for c in CASES}) == len(CASES)


def test_docs_list_each_exit_code_once() -> None:
    section = (ROOT / "docs" / "cli.md").read_text().split("## Exit codes", 1)[1]
    section = section.split("\n## ", 1)[0]
    rows = [
        line.split("|")[1].strip(" `") for line in section.splitlines() if line.startswith("| `")
    ]
    assert sorted(int(code) for code in rows) == sorted(EXIT_CODES)


def test_help_is_success() -> None:
    code, out, _ = run("check", "--help")
    assert code == 0 and "--max-memory GB" in out and "130 interrupted" in out


# -- findings the table cannot set up ----------------------------------------------------


def as_variant(monkeypatch: pytest.MonkeyPatch, path: str, expected: str) -> None:
    """Make `path` the only bundled variant, declaring `expected`."""
    ids = tuple(expected.removeprefix("violates:").split(","))
    variant = Target("tiny_variant", path, violates=ids)
    monkeypatch.setattr(cli_check, "bundled", lambda: (variant,))
    monkeypatch.setattr("statecore.registry.bundled", lambda: (variant,))


def test_a_variant_not_caught_as_declared_is_a_finding(
    scratch: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    as_variant(monkeypatch, "tiny:SYSTEM", "violates:small")
    code, out, _ = run("check", "--variants")
    assert code == 1
    assert "FAIL tiny_variant" in out and "expected: violates:small" in out


def test_a_variant_caught_as_declared_passes(
    scratch: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    as_variant(monkeypatch, "tiny:BROKEN", "violates:below_two")
    code, out, _ = run("check", "--variants")
    assert code == 0 and "PASS tiny_variant" in out


def test_a_variant_cut_short_by_a_bound_is_incomplete(
    scratch: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    as_variant(monkeypatch, "big_space:SYSTEM", "violates:bounded")
    code, out, _ = run("check", "--variants", "--max-states", "500")
    assert code == 4 and "INCOMPLETE tiny_variant" in out


def test_a_replayed_trace_that_still_violates_is_a_finding(scratch: Path) -> None:
    assert run("check", "tiny:BROKEN", "--trace-out", "traces")[0] == 1
    (trace,) = (scratch / "traces").iterdir()
    code, out, _ = run("replay", str(trace), "--target", "tiny:BROKEN")
    assert code == 1 and "violated at step 2" in out


def test_replay_reports_a_broken_user_target_in_one_line(scratch: Path) -> None:
    run("check", "tiny:BROKEN", "--trace-out", "traces")
    (trace,) = (scratch / "traces").iterdir()
    itf = json.loads(trace.read_text())
    itf["#meta"]["target"] = "raises_on_import:SYSTEM"
    trace.write_text(json.dumps(itf))
    code, _, err = run("replay", str(trace), "--target", "raises_on_import:SYSTEM")
    assert code == 2
    assert err.startswith("statecore: error: ") and len(err.splitlines()) == 1
    assert "importing 'raises_on_import' raised KeyError: 'queue_sizes'" in err


# -- nothing computed is lost ------------------------------------------------------------


def refuse_to_explore(monkeypatch: pytest.MonkeyPatch) -> None:
    def explore_(*args: object, **kwargs: object) -> Report:
        raise AssertionError("explored although the command line was refused")

    monkeypatch.setattr(cli_check, "explore", explore_)


@pytest.mark.parametrize("flag", ["--trace-out", "--regression-out"])
def test_an_unusable_output_directory_is_refused_before_exploring(
    scratch: Path, monkeypatch: pytest.MonkeyPatch, flag: str
) -> None:
    (scratch / "taken").write_text("")
    refuse_to_explore(monkeypatch)
    code, _, err = run("check", "tiny:BROKEN", flag, "taken")
    assert code == 2 and f"{flag} taken: is a file" in err


def test_an_unwritable_output_directory_is_refused_before_exploring(
    scratch: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    locked = scratch / "locked"
    locked.mkdir()
    real_access = os.access

    # Root may write anywhere: say what a user without the permission would be told.
    def access(path: str, mode: int) -> bool:
        return Path(path).resolve() != locked and real_access(path, mode)

    monkeypatch.setattr(os, "access", access)
    refuse_to_explore(monkeypatch)
    code, _, err = run("check", "tiny:BROKEN", "--trace-out", "locked/traces")
    assert code == 2
    assert f"--trace-out locked/traces: {locked.name} is not writable" in err


@pytest.mark.skipif(not Path("/proc/self").is_dir(), reason="needs a /proc file system")
def test_a_directory_that_cannot_be_made_is_refused_before_exploring(
    scratch: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    refuse_to_explore(monkeypatch)  # /proc looks writable to root, yet takes no new entries
    code, _, err = run("check", "tiny:BROKEN", "--regression-out", "/proc/statecore-tests")
    assert code == 2 and "--regression-out /proc/statecore-tests: cannot write there" in err


def test_checking_an_output_directory_leaves_nothing_behind(scratch: Path) -> None:
    assert run("check", "tiny:SYSTEM", "--trace-out", "out/traces")[0] == 0
    assert not (scratch / "out").exists()


def test_fuzz_refuses_its_trace_directory_before_fuzzing(
    scratch: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    (scratch / "taken").write_text("")

    def fuzz(*args: object, **kwargs: object) -> None:
        raise AssertionError("fuzzed although the command line was refused")

    monkeypatch.setattr("statecore.fuzzing.fuzz.fuzz", fuzz)
    argv = ["fuzz", "chunk_transfer", "--adapter", "model:chunk_transfer_6670"]
    code, _, err = run(*argv, "--trace-out", "taken")
    assert code == 2 and "--trace-out taken: is a file" in err


def test_a_write_that_fails_after_exploring_keeps_the_report(
    scratch: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    def full_disk(*args: object) -> dict[str, str]:
        raise OSError(errno.ENOSPC, "No space left on device", "traces/x.itf.json")

    monkeypatch.setattr(cli_check, "_write_traces", full_disk)
    code, out, err = run("check", "tiny:BROKEN", "--trace-out", "traces")
    assert code == 2
    assert "FAIL tiny:BROKEN" in out and "count()" in out  # the trace table is still shown
    assert "cannot write traces/x.itf.json: No space left on device" in err


def test_json_keeps_the_reports_made_before_an_error(scratch: Path) -> None:
    code, out, err = run("check", "tiny:SYSTEM", "action_raises:SYSTEM", "tiny:BROKEN", "--json")
    assert code == 2 and err.startswith("statecore: error: ")
    doc = json.loads(out)
    assert doc["status"] == "error" and "ZeroDivisionError" in doc["error"]
    assert [t["name"] for t in doc["targets"]] == ["tiny:SYSTEM"]
    assert doc["not_checked"] == ["action_raises:SYSTEM", "tiny:BROKEN"]


def test_text_names_the_targets_an_error_left_unchecked(scratch: Path) -> None:
    code, out, _ = run("check", "tiny:SYSTEM", "syntax_error:SYSTEM", "tiny:BROKEN")
    assert code == 2
    assert "PASS tiny:SYSTEM" in out and "not checked: tiny:BROKEN" in out


# -- internal errors ---------------------------------------------------------------------


def crash_inside_statecore(monkeypatch: pytest.MonkeyPatch) -> None:
    def explore_(*args: object, **kwargs: object) -> Report:
        raise RuntimeError("a bug in the explorer")

    monkeypatch.setattr(cli_check, "explore", explore_)


def test_a_crash_inside_statecore_is_an_internal_error(
    scratch: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    crash_inside_statecore(monkeypatch)
    code, _, err = run("check", "tiny:SYSTEM")
    assert code == 3
    lines = err.splitlines()
    assert lines[0] == "statecore: internal error: RuntimeError: a bug in the explorer"
    assert "Traceback (most recent call last):" in err and "in explore_" in err
    assert "this is a bug in statecore, not in the code under test" in lines[-1]


def test_an_internal_error_under_json_still_prints_a_document(
    scratch: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    crash_inside_statecore(monkeypatch)
    code, out, _ = run("check", "tiny:SYSTEM", "--json")
    assert code == 3
    doc = json.loads(out)
    assert doc["status"] == "error" and "a bug in the explorer" in doc["error"]


def test_a_crash_inside_fuzz_is_an_internal_error(monkeypatch: pytest.MonkeyPatch) -> None:
    def fuzz(*args: object, **kwargs: object) -> None:
        raise KeyError("lost")

    monkeypatch.setattr("statecore.fuzzing.fuzz.fuzz", fuzz)
    code, _, err = run("fuzz", "chunk_transfer", "--adapter", "model:chunk_transfer_6670")
    assert code == 3 and err.startswith("statecore: internal error: KeyError: 'lost'")


# -- Ctrl-C ------------------------------------------------------------------------------


def interrupted_report(scratch: Path) -> Report:
    """A partial report as `explore` gives it on Ctrl-C."""
    from big_space import SYSTEM

    report = explore(SYSTEM, max_states=500, stop_on_violation=False)
    return replace(report, stop="interrupted", complete=False)


def interrupt_exploring(monkeypatch: pytest.MonkeyPatch, report: Report) -> None:
    def explore_(*args: object, **kwargs: object) -> Report:
        raise ExplorationInterrupted(report)

    monkeypatch.setattr(cli_check, "explore", explore_)


def test_ctrl_c_prints_the_partial_report(scratch: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    interrupt_exploring(monkeypatch, interrupted_report(scratch))
    code, out, err = run("check", "big_space:SYSTEM", "tiny:SYSTEM")
    assert code == 130
    head = out.splitlines()[0]
    assert head.startswith("INCOMPLETE big_space:SYSTEM: 500 states")
    assert "interrupted (Ctrl-C) before every property was decided" in head
    assert "unknown   bounded" in out and "not checked: tiny:SYSTEM" in out
    assert "statecore: interrupted" in err


def test_ctrl_c_under_json_prints_a_valid_document(
    scratch: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    interrupt_exploring(monkeypatch, interrupted_report(scratch))
    code, out, _ = run("check", "big_space:SYSTEM", "tiny:SYSTEM", "--json")
    assert code == 130
    doc = json.loads(out)
    assert doc["interrupted"] is True and doc["status"] == "interrupted"
    (entry,) = doc["targets"]
    assert entry["status"] == "interrupted" and entry["stop"] == "interrupted"
    assert [p["verdict"] for p in entry["properties"]] == ["unknown"]
    assert doc["not_checked"] == ["tiny:SYSTEM"]


def test_ctrl_c_while_loading_a_target_exits_130(
    scratch: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    def resolve(name: str) -> Any:
        raise KeyboardInterrupt

    monkeypatch.setattr(cli_check, "resolve_target", resolve)
    code, out, err = run("check", "tiny:SYSTEM", "--json")
    assert code == 130 and json.loads(out)["interrupted"] is True
    assert err.strip() == "statecore: interrupted"


def test_ctrl_c_on_a_running_check(corpus_dir: Path, tmp_path: Path) -> None:
    """A real SIGINT, sent once the first progress line shows the search is under way."""
    program = (
        "import sys, statecore.cli as cli\n"
        "cli.PROGRESS_INTERVAL = 0.0\n"
        "sys.exit(cli.main(sys.argv[1:]))\n"
    )
    path = os.pathsep.join(filter(None, [str(corpus_dir), os.environ.get("PYTHONPATH")]))
    proc = subprocess.Popen(
        [sys.executable, "-c", program, "check", "big_space:SYSTEM", "--json"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        cwd=tmp_path,
        env={**os.environ, "PYTHONPATH": path},
        # As from a terminal: a runner that ignores SIGINT (tox does) would pass that on.
        preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL),
    )
    watchdog = threading.Timer(120, proc.kill)
    watchdog.start()
    try:
        assert proc.stderr is not None
        first = proc.stderr.readline()
        assert first.startswith("statecore: checking big_space:SYSTEM: "), first
        proc.send_signal(signal.SIGINT)
        out, err = proc.communicate()
    finally:
        watchdog.cancel()
        proc.kill()
    assert proc.returncode == 130, err
    doc = json.loads(out)
    assert doc["interrupted"] is True
    (entry,) = doc["targets"]
    assert entry["states"] > 0 and entry["stop"] == "interrupted"
    assert [p["verdict"] for p in entry["properties"]] == ["unknown"]
    assert "statecore: interrupted" in err and "Traceback" not in err


# -- progress and the default bounds ---------------------------------------------------


def sample(seconds: float) -> Progress:
    return Progress(states=1000, transitions=3000, depth=7, queue=12, seconds=seconds)


def test_progress_off_a_terminal_is_one_plain_line_per_interval(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    clock = [100.0]
    monkeypatch.setattr(time, "monotonic", lambda: clock[0])
    stream = io.StringIO()
    show = cli._progress_printer("m", stream)
    for tick in range(1, 51):  # the explorer samples twice a second: 25 s
        clock[0] = 100.0 + tick / 2
        show(sample(tick / 2))
    lines = stream.getvalue().splitlines()
    assert len(lines) == int(25 // cli.PROGRESS_INTERVAL)
    assert lines[0] == ("statecore: checking m: 1,000 states, 100 states/s, depth 7, queue 12, 10s")


def test_progress_on_a_terminal_rewrites_one_line() -> None:
    class Terminal(io.StringIO):
        def isatty(self) -> bool:
            return True

    stream = Terminal()
    show = cli._progress_printer("m", stream)
    show(sample(1.0))
    show.clear()
    assert stream.getvalue().startswith("\r1,000 states  1,000 states/s")
    assert stream.getvalue().endswith("\r\033[K")


def test_check_shows_life_on_stderr_when_it_is_not_a_terminal(
    scratch: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(cli, "PROGRESS_INTERVAL", 0.0)
    code, _, err = run("check", "big_space:SYSTEM", "--max-states", "200000")
    assert code == 4
    assert err.startswith("statecore: checking big_space:SYSTEM: ")


def spy_on_explore(monkeypatch: pytest.MonkeyPatch) -> dict[str, Any]:
    seen: dict[str, Any] = {}

    def explore_(system: Any, **kwargs: Any) -> Report:
        seen.update(kwargs)
        return explore(system, **kwargs)

    monkeypatch.setattr(cli_check, "explore", explore_)
    return seen


def test_check_bounds_memory_by_default(scratch: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    pages = {"SC_PHYS_PAGES": 4 * 2**20, "SC_PAGE_SIZE": 4096}  # 16 GiB
    monkeypatch.setattr(os, "sysconf", lambda name: pages[name])
    seen = spy_on_explore(monkeypatch)
    assert run("check", "tiny:SYSTEM")[0] == 0
    assert seen["max_memory"] == int(16 * 2**30 * cli.MEMORY_FRACTION)
    assert seen["max_states"] is None


def test_without_a_known_memory_size_there_is_no_default_bound(
    scratch: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    def sysconf(name: str) -> int:
        raise ValueError(name)

    monkeypatch.setattr(os, "sysconf", sysconf)
    seen = spy_on_explore(monkeypatch)
    assert run("check", "tiny:SYSTEM")[0] == 0
    assert seen["max_memory"] is None


def test_max_memory_is_given_in_gigabytes(scratch: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    seen = spy_on_explore(monkeypatch)
    assert run("check", "tiny:SYSTEM", "--max-memory", "1.5", "--max-states", "10")[0] == 0
    assert seen["max_memory"] == int(1.5 * 2**30) and seen["max_states"] == 10


def test_notes_are_printed_under_the_verdict_line_and_in_json(
    scratch: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    note = "symmetry reduction was turned off: property 'x' tells ids apart"

    def explore_(system: Any, **kwargs: Any) -> Report:
        return replace(explore(system, **kwargs), notes=(note,))

    monkeypatch.setattr(cli_check, "explore", explore_)
    out = run("check", "tiny:SYSTEM")[1].splitlines()
    assert out[0].startswith("PASS tiny:SYSTEM") and out[1] == f"  note: {note}"
    (entry,) = json.loads(run("check", "tiny:SYSTEM", "--json")[1])["targets"]
    assert entry["notes"] == [note]


# -- the fuzz API checks its limits too ----------------------------------------------------


@pytest.mark.parametrize(
    ("limits", "message"),
    [
        ({"budget": math.nan}, "budget"),
        ({"budget": -1.0}, "budget"),
        ({"budget": math.inf}, "budget"),
        ({"max_examples": 0}, "max_examples"),
        ({"max_examples": -5}, "max_examples"),
    ],
)
def test_fuzz_refuses_limits_that_never_stop_or_never_start(
    limits: dict[str, Any], message: str
) -> None:
    from statecore.fuzzing.fuzz import fuzz
    from statecore.registry import resolve_adapter

    system, factory, _ = resolve_adapter("chunk_transfer", "model:chunk_transfer_6670")
    with pytest.raises(StatecoreError, match=message):
        fuzz(system, factory, **limits)


def test_parser_errors_are_one_line() -> None:
    parser = cli._parser()
    sub = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    assert all(isinstance(p, cli._Parser) for p in sub.choices.values())


# -- the command line itself ---------------------------------------------------------------


def test_version() -> None:
    import statecore

    code, out, _ = run("--version")
    assert code == 0 and out.startswith(f"statecore {statecore.__version__} (Python ")


def test_top_level_help_lists_every_command() -> None:
    code, out, _ = run("--help")
    assert code == 0
    commands = set(cli._subparsers(cli._parser()).choices)
    assert commands == {"list", "check", "replay", "diagram", "fuzz", "mutate"}
    listed = {line.split()[0] for line in out.splitlines() if line.startswith("    ")}
    assert commands <= listed
    for command in commands:
        assert f"statecore {command}" in out  # an example of each


@pytest.mark.parametrize("command", ["check", "diagram", "replay", "fuzz", "list"])
def test_an_unknown_option_is_reported_by_its_command(command: str) -> None:
    argv = {"check": [], "diagram": ["x"], "replay": ["t"], "fuzz": ["x", "--adapter", "a"]}
    code, _, err = run(command, *argv.get(command, []), "--bogus")
    assert code == 2
    assert err == (
        f"statecore: error: {command}: unrecognized arguments: --bogus "
        f"(see 'statecore {command} --help')\n"
    )


def blocked(module: str, *argv: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    """``statecore ARGV`` in a fresh process where `module` cannot be imported."""
    program = (
        f"import sys; sys.modules[{module!r}] = None\n"
        "from statecore.cli import main\n"
        "sys.exit(main(sys.argv[1:]))\n"
    )
    return subprocess.run(
        [sys.executable, "-c", program, *argv],
        capture_output=True,
        text=True,
        cwd=cwd,
        timeout=120,
        check=False,
    )


@pytest.mark.parametrize(
    ("module", "argv", "extra"),
    [
        (
            "hypothesis",
            ["fuzz", "stream_edge", "--adapter", "model:stream_edge_start_per_message"],
            "test",
        ),
        ("crosshair", ["check", "--symbolic", "stream_edge"], "check"),
    ],
    ids=["fuzz-without-hypothesis", "symbolic-without-crosshair"],
)
def test_a_missing_optional_dependency_is_a_usage_error_with_the_install_command(
    module: str, argv: list[str], extra: str, tmp_path: Path
) -> None:
    done = blocked(module, *argv, cwd=tmp_path)
    assert done.returncode == 2, done.stderr
    (line,) = done.stderr.splitlines()
    assert line.startswith(f"statecore: error: statecore {argv[0]} needs ")
    assert f"install the '{extra}' extra: pip install -e '.[{extra}]'" in line


def test_an_unrelated_import_error_is_still_an_internal_error(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    def explore_(*args: object, **kwargs: object) -> Report:
        raise ImportError("cannot import name 'gone' from 'statecore.check.explore'")

    monkeypatch.setattr(cli_check, "explore", explore_)
    code, _, err = run("check", "stream_edge")
    assert code == 3 and err.startswith("statecore: internal error: ImportError")


def test_trace_and_regression_files_of_a_module_target_have_no_colon(scratch: Path) -> None:
    code, out, _ = run(
        "check", "tiny:BROKEN", "--trace-out", "traces", "--regression-out", "regressions"
    )
    assert code == 1
    names = [p.name for p in (scratch / "traces").iterdir()]
    names += [p.name for p in (scratch / "regressions").iterdir()]
    assert names == ["tiny_BROKEN.below_two.itf.json", "test_tiny_BROKEN_below_two.py"]
    assert all(":" not in name for name in names)
    # The replay command printed names the target, which the registry does not know.
    command = "statecore replay traces/tiny_BROKEN.below_two.itf.json --target tiny:BROKEN"
    assert f"replay: {command}" in out
    code, out, _ = run(*command.split()[1:])
    assert code == 1 and "violated at step 2" in out


def test_diagram_refuses_a_trace_of_another_target(scratch: Path) -> None:
    run("check", "tiny:BROKEN", "--trace-out", "traces")
    (trace,) = (scratch / "traces").iterdir()
    for target in ("tiny:SYSTEM", "totally_bogus_target"):
        code, out, err = run("diagram", target, "--trace", str(trace))
        assert code == 2 and out == ""
        assert f"names target 'tiny:BROKEN' but TARGET is {target!r}" in err
    code, out, _ = run("diagram", "tiny:BROKEN", "--trace", str(trace))
    assert code == 0 and "Trace: `below_two` violated" in out


# -- the summary of a run of several targets ------------------------------------------------


def summary(out: str) -> list[str]:
    lines = out.splitlines()
    start = next(i for i, line in enumerate(lines) if line.startswith("target "))
    return lines[start:]


def test_several_targets_end_with_a_summary_table(scratch: Path) -> None:
    argv = ["tiny:SYSTEM", "tiny:BROKEN", "big_space:SYSTEM", "--max-states", "50"]
    code, out, _ = run("check", *argv, "-q")
    assert code == 1
    table = summary(out)
    assert table[0].split() == ["target", "states", "verdict", "time", "detail"]
    rows = [line.split() for line in table[1:-1]]
    assert [r[:3] for r in rows] == [
        ["tiny:SYSTEM", "4", "PASS"],
        ["tiny:BROKEN", "4", "FAIL"],
        ["big_space:SYSTEM", "50", "INCOMPLETE"],
    ]
    assert rows[1][4:] == ["below_two", "violated"] and rows[2][4:] == ["max_states"]
    assert table[-1].startswith("3 targets: 1 PASS, 1 FAIL, 1 INCOMPLETE; ")
    assert table[-1].endswith("; FAIL")


def test_quiet_keeps_the_detail_of_failures_only(scratch: Path) -> None:
    _, loud, _ = run("check", "tiny:SYSTEM", "tiny:BROKEN")
    _, quiet, _ = run("check", "tiny:SYSTEM", "tiny:BROKEN", "--quiet")
    assert "holds     small" in loud and "holds     small" not in quiet
    assert "PASS tiny:SYSTEM" not in quiet
    assert "violated  below_two" in quiet and "count()" in quiet
    assert summary(loud)[1:] == summary(quiet)[1:] or len(summary(quiet)) == 4


def test_one_target_has_no_summary_unless_quiet(scratch: Path) -> None:
    _, out, _ = run("check", "tiny:SYSTEM")
    assert "target " not in out
    code, out, _ = run("check", "tiny:SYSTEM", "-q")
    assert code == 0 and out.splitlines()[1].startswith("target ")
    assert out.splitlines()[-1].startswith("1 targets: 1 PASS; ")


def test_the_summary_of_the_variants_says_what_each_caught(
    scratch: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    as_variant(monkeypatch, "tiny:BROKEN", "violates:below_two")
    code, out, _ = run("check", "--variants", "-q")
    assert code == 0 and "PASS tiny_variant" not in out
    (row,) = summary(out)[1:-1]
    assert row.split()[2:] == ["PASS", row.split()[3], "caught:", "below_two"]
    assert summary(out)[-1].startswith("1 variants: 1 PASS; ")


def test_python_dash_m_statecore_is_the_command() -> None:
    done = subprocess.run(
        [sys.executable, "-m", "statecore", "--version"], capture_output=True, text=True
    )
    assert done.returncode == 0 and done.stdout.startswith("statecore ")


def test_replay_prints_the_trace_table_once() -> None:
    traces = Path(__file__).parent / "bad_inputs" / "traces"
    code, out, _ = run("replay", str(traces / "good.itf.json"))
    assert code == 1
    assert out.count("step   actor") == 1
    assert out.count("replayed 2 action(s)") == 1
    code, out, _ = run(
        "replay", str(traces / "fuzz.itf.json"), "--adapter", "model:stream_edge_start_per_message"
    )
    assert code == 1
    assert out.count("step   actor") == 1
    assert out.count("conformance violated") == 1
