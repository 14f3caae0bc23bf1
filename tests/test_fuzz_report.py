"""One default for every entry point, a report per phase, progress and Ctrl-C.

`fuzz()`, ``statecore fuzz`` and `fuzz_test` run the same thing when given no
number of examples and no budget: the guided phase, then the profile's
``max_examples`` search examples. The report counts guided paths, search
examples and shrinking replays apart; long runs show their progress; Ctrl-C
keeps what was seen.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import pytest
from test_fuzz_guided import BUGGY, SHOP, OrderStates

from statecore import cli
from statecore.adapter import Baton, BatonReleased
from statecore.cli import main
from statecore.fuzzing.fuzz import (
    DEFAULT_MAX_EXAMPLES,
    PROFILES,
    FuzzInterrupted,
    FuzzProgress,
    fuzz,
)
from statecore.fuzzing.pytest_plugin import fuzz_test
from statecore.system import Handle, SystemState

# -- one default ----------------------------------------------------------------------------


def test_fuzz_runs_the_profiles_examples_by_default(monkeypatch: pytest.MonkeyPatch) -> None:
    assert DEFAULT_MAX_EXAMPLES == PROFILES["ci"]["max_examples"] == 100
    report = fuzz(SHOP, lambda: OrderStates(SHOP))
    assert report.ok and report.examples == 100
    assert report.guided is not None and not report.guided.missed
    asked: list[object] = []
    monkeypatch.setattr("statecore.fuzzing.fuzz._search", lambda *args: asked.append(args[5]))
    fuzz(SHOP, lambda: OrderStates(SHOP), profile="dev")
    assert asked == [PROFILES["dev"]["max_examples"]] == [200]


def test_the_cli_and_the_pytest_plugin_leave_the_default_to_fuzz(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    calls: list[dict[str, Any]] = []
    real = fuzz

    def spy(*args: Any, **kwargs: Any) -> Any:
        calls.append(kwargs)
        return real(*args, **kwargs)

    monkeypatch.setattr("statecore.fuzzing.fuzz.fuzz", spy)
    argv = ["fuzz", "segments", "--adapter", "model:segments_6816", "--trace-out", str(tmp_path)]
    assert main(argv) == 1
    test = fuzz_test(SHOP, lambda: OrderStates(SHOP))

    class Config:
        def getoption(self, name: str, default: object = None) -> object:
            return default

    class Request:
        config = Config()
        module = sys.modules[__name__]

    test(Request(), tmp_path)
    for kwargs in calls:
        assert kwargs["max_examples"] is None and kwargs["budget"] is None


# -- a report per phase ------------------------------------------------------------------------


def test_search_examples_are_counted_apart_from_shrinking() -> None:
    report = fuzz(SHOP, lambda: OrderStates(BUGGY), guided=False, seed=1, max_examples=50)
    assert report.finding is not None and report.found_in == "search"
    assert 1 <= report.examples <= 50
    assert report.shrink_replays > 0 and report.shrink_steps > 0
    assert report.found_after is not None and report.found_after <= report.seconds
    assert report.all_steps == report.steps + report.shrink_steps


def test_the_json_report_has_each_phase(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    argv = ["fuzz", "chunk_transfer", "--adapter", "model:chunk_transfer_6670", "--json"]
    assert main([*argv, "--trace-out", str(tmp_path)]) == 1
    report = json.loads(capsys.readouterr().out)
    assert report["found_in"] == "guided" and report["search"]["examples"] == 0
    guided = report["guided"]
    assert guided["stopped"] == "finding" and guided["paths"] >= 1
    assert set(guided["goals"]) == {"transition", "state", "property"}
    assert report["shrink"]["minimal"] is True and report["shrink"]["replays"] >= 1
    assert main([*argv, "--trace-out", str(tmp_path), "--no-guided"]) == 1
    report = json.loads(capsys.readouterr().out)
    assert report["guided"] is None and report["found_in"] == "search"


# -- progress -----------------------------------------------------------------------------------


def test_progress_is_reported_from_each_phase() -> None:
    seen: list[FuzzProgress] = []
    report = fuzz(SHOP, lambda: OrderStates(BUGGY), guided=False, seed=1, progress=seen.append)
    assert report.finding is not None
    assert {p.phase for p in seen} >= {"search", "shrink"}
    last = seen[-1]
    assert last.findings == 1 and last.examples == report.examples
    assert last.transitions[1] == len(SHOP.component("order").machine.transitions)
    guided: list[FuzzProgress] = []
    fuzz(SHOP, lambda: OrderStates(SHOP), max_examples=5, progress=guided.append)
    assert guided[-1].goals[0] == guided[-1].goals[1] > 0 and guided[-1].paths > 0


def test_the_cli_prints_a_progress_line_in_a_log(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    monkeypatch.setattr(cli, "PROGRESS_INTERVAL", 0.0)
    monkeypatch.setattr("statecore.fuzzing.interpreter.PROGRESS_INTERVAL", 0.0)
    argv = ["fuzz", "segments", "--adapter", "model:segments_6816", "--trace-out", str(tmp_path)]
    assert main(argv) == 1
    err = capsys.readouterr().err
    lines = [line for line in err.splitlines() if line.startswith("statecore: fuzzing")]
    assert lines, err
    assert lines[0].startswith("statecore: fuzzing segments / model:segments_6816: ")
    assert "steps/s" in lines[0] and "goals" in lines[0] and "findings" in lines[0]


def test_the_terminal_progress_line_is_rewritten_in_place() -> None:
    class Terminal:
        def __init__(self) -> None:
            self.text = ""

        def write(self, text: str) -> None:
            self.text += text

        def flush(self) -> None:
            pass

    stream = Terminal()
    line = cli._FuzzTerminalProgress(stream)  # type: ignore[arg-type]
    line(FuzzProgress("search", 2.0, 3, 40, 0, 800, (4, 5), (10, 12), 0, 1))
    line.clear()
    assert stream.text.startswith("\rsearch, 3 paths, 40 examples, 0 replays, 400 steps/s")
    assert stream.text.endswith("\r\033[K")


# -- Ctrl-C ----------------------------------------------------------------------------------------


class InterruptedLater(OrderStates):
    """An implementation whose tenth step is interrupted (Ctrl-C)."""

    applied = 0

    def apply(self, step: Any, before: SystemState) -> None:
        type(self).applied += 1
        if type(self).applied == 10:
            raise KeyboardInterrupt
        super().apply(step, before)


def test_ctrl_c_keeps_what_the_run_saw(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(InterruptedLater, "applied", 0)
    with pytest.raises(FuzzInterrupted) as caught:
        fuzz(SHOP, lambda: InterruptedLater(SHOP))
    report = caught.value.report
    assert report.interrupted and report.ok
    assert report.guided is not None and report.guided.stopped == "interrupted"
    assert report.guided.paths >= 1


def test_ctrl_c_in_the_cli_prints_the_partial_report_and_exits_130(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    monkeypatch.setattr(InterruptedLater, "applied", 0)
    module = tmp_path / "interrupted_shop.py"
    module.write_text(
        "from test_fuzz_report import InterruptedLater\n"
        "from test_fuzz_guided import SHOP\n\n"
        "def adapter():\n    return InterruptedLater(SHOP)\n"
    )
    monkeypatch.syspath_prepend(str(tmp_path))
    argv = ["fuzz", "test_fuzz_guided:SHOP", "--adapter", "interrupted_shop:adapter"]
    assert main([*argv, "--trace-out", str(tmp_path)]) == 130
    out, err = capsys.readouterr()
    assert out.startswith("INTERRUPTED mini_shop / interrupted_shop:adapter")
    assert "guided:" in out and "interrupted" in out
    assert "statecore: interrupted" in err


# -- generations, for adapters -------------------------------------------------------------------


def test_a_view_reads_by_handle_with_its_generation() -> None:
    state = SHOP.init_states()[0]
    key = SHOP.component("order").key_values[0]
    labels = [("place", key), ("cancel", key), ("place", key)]
    from statecore.system import ActionLabel

    for name, arg in labels:
        before, state = state, SHOP.next_state(state, ActionLabel(name, (("order", arg),)))
    assert SHOP.spawned(before, state) == (Handle("order", key, 2),)
    view = SHOP.view(state)
    assert view.handle("order", key) == Handle("order", key, 2)
    assert view.snapshot(Handle("order", key, 1)) is None
    current = view.snapshot(Handle("order", key, 2))
    assert current is not None and current == view.snapshot("order", key)


def test_a_released_baton_unwinds_the_parked_call() -> None:
    baton = Baton(timeout=5)
    seen: list[str] = []

    def call() -> None:
        try:
            baton.park("callback")
        except BatonReleased:
            seen.append("released")
            raise

    assert baton.start(call) == "callback"
    baton.release()
    assert seen == ["released"] and not baton.busy
    baton.release()  # nothing parked: nothing to do


def test_an_adapter_that_cannot_be_set_up_is_a_usage_error() -> None:
    from statecore.adapter import AdapterError

    class Broken(OrderStates):
        def setup(self, system: Any) -> None:
            raise OSError("no database")

    with pytest.raises(AdapterError, match="setting it up for system 'mini_shop' raised OSError"):
        fuzz(SHOP, lambda: Broken(SHOP))
    with pytest.raises(AdapterError, match="returned int"):
        fuzz(SHOP, lambda: 3)  # type: ignore[arg-type,return-value]
