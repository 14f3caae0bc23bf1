"""The fuzz engine, the interpreter's baton, and the fuzz CLI."""

from __future__ import annotations

import json
import threading
import time
from pathlib import Path
from typing import Any

import pytest
from statecore.models.chunk_transfer import (
    CHUNK_TRANSFER,
    RELEASED_0_30_0,
    UNTAKEN_IN_REFERENCE,
    build,
    variant_6670,
)

from statecore.adapter import Baton, Deadlock, SystemAdapter
from statecore.cli import main
from statecore.fuzzing.fuzz import Finding, fuzz, minimise, replay_with_adapter, state_machine
from statecore.properties import always
from statecore.registry import bundled, bundled_adapters, resolve_adapter
from statecore.system import Action, Global, System, Tx
from statecore.traces.trace import Trace, TraceStep

# -- the baton -----------------------------------------------------------------


def test_baton_parks_at_callbacks_and_hands_back_replies() -> None:
    baton = Baton(timeout=5)
    seen: list[object] = []

    def call() -> str:
        seen.append(baton.park("processor"))
        seen.append(baton.park("put"))
        return "done"

    assert baton.start(call) == "processor"
    assert baton.busy and baton.parked_at == "processor"
    assert baton.resume("payload") == "put"
    assert baton.resume(True) is None
    assert not baton.busy
    assert baton.result() == "done"
    assert seen == ["payload", True]


def test_baton_raises_an_exception_reply_inside_the_callback() -> None:
    baton = Baton(timeout=5)

    def call() -> str:
        try:
            baton.park("put")
        except ConnectionError as exc:
            return f"caught {exc}"
        return "not raised"

    baton.start(call)
    baton.resume(ConnectionError("connector down"))
    assert baton.result() == "caught connector down"


def test_baton_passes_on_what_the_call_raised() -> None:
    baton = Baton(timeout=5)

    def call() -> None:
        raise ValueError("boom")

    assert baton.start(call) is None
    with pytest.raises(ValueError, match="boom"):
        baton.result()


def test_baton_runs_one_thread_at_a_time() -> None:
    baton = Baton(timeout=5)
    running = threading.Event()
    overlaps: list[bool] = []

    def call() -> None:
        for point in ("a", "b", "c"):
            running.set()
            time.sleep(0.01)
            running.clear()
            baton.park(point)

    baton.start(call)
    for _ in range(3):
        overlaps.append(running.is_set())  # the worker must be parked, not running
        baton.resume()
    assert overlaps == [False, False, False]


def test_baton_reports_a_call_that_never_hands_back_control() -> None:
    baton = Baton(timeout=0.2)
    release = threading.Event()
    with pytest.raises(Deadlock, match=r"within 0\.2s"):
        baton.start(lambda: release.wait(5))
    release.set()


# -- the engine ------------------------------------------------------------------


def test_the_model_conforms_to_itself_and_covers_every_transition() -> None:
    report = fuzz(CHUNK_TRANSFER, lambda: SystemAdapter(CHUNK_TRANSFER), seed=3)
    assert report.ok, report.finding
    assert report.steps > 0 and report.examples == 100  # the ci profile's default
    for _, _, _, _, never in report.coverage():
        assert set(never) <= set(UNTAKEN_IN_REFERENCE), never
    # The guided phase alone takes every transition the reference takes.
    assert report.guided is not None
    for _, _, _, _, never in report.guided.coverage():
        assert set(never) <= set(UNTAKEN_IN_REFERENCE), never


def test_a_variant_run_as_the_implementation_is_a_conformance_finding() -> None:
    report = fuzz(CHUNK_TRANSFER, lambda: SystemAdapter(variant_6670()), seed=0)
    finding = report.finding
    assert finding is not None and finding.kind == "conformance"
    # Shrunk to the review's story: the terminal is queued, the request aborted.
    actions = [a.name for a in finding.trace.actions]
    assert actions == ["new_request", "save_terminal", "abort"]
    # The pre-#6670 cleanup reclaims at once: the instances differ right there.
    assert "sender:" in finding.detail


def test_known_findings_are_reported_but_do_not_fail() -> None:
    system = build(RELEASED_0_30_0)
    expected = next(t for t in bundled() if t.name == "chunk_transfer_0_30_0")
    known = {pid: "0.30.0 as released" for pid in expected.expected_violations}
    report = fuzz(system, lambda: SystemAdapter(system), max_examples=20, seed=1, known=known)
    assert report.ok, report.finding
    assert report.known and set(report.known) <= set(known)
    strict = fuzz(system, lambda: SystemAdapter(system), seed=1, known={})
    assert strict.finding is not None
    assert strict.finding.property_id in known


def _two_bugs(independent: bool) -> System:
    """`no_y` fails only after `no_x` has (or, `independent`, on its own too)."""

    def set_x(tx: Tx[Any]) -> None:
        tx.require(not tx.get("x"))
        tx.set("x", True)

    def set_y(tx: Tx[Any]) -> None:
        tx.require((independent or tx.get("x")) and not tx.get("y"))
        tx.set("y", True)

    return System(
        "two_bugs",
        components=[],
        globals=[Global("x", False), Global("y", False)],
        actions=[Action("set_x", "a", set_x), Action("set_y", "a", set_y)],
        properties=[
            always("no_x", "x stays unset", lambda view: not view.get("x")),
            always("no_y", "y stays unset", lambda view: not view.get("y")),
        ],
    )


def test_a_violation_after_a_known_one_is_recorded_as_its_consequence() -> None:
    system = _two_bugs(independent=False)
    known = {"no_x": "the known bug"}
    report = fuzz(system, lambda: SystemAdapter(system), max_examples=30, seed=0, known=known)
    assert report.ok, report.finding
    assert set(report.known) == {"no_x", "no_y"}
    assert report.known_reasons["no_y"] == "follows the known no_x on the same path"
    assert [s.action.name for s in report.known["no_y"].steps[1:] if s.action] == [
        "set_x",
        "set_y",
    ]
    # Reached on its own, the same violation is a finding.
    alone = _two_bugs(independent=True)
    found = fuzz(alone, lambda: SystemAdapter(alone), max_examples=30, seed=0, known=known)
    assert found.finding is not None and found.finding.property_id == "no_y"


def test_a_finding_replays_deterministically_through_the_adapter() -> None:
    report = fuzz(CHUNK_TRANSFER, lambda: SystemAdapter(variant_6670()), seed=0)
    assert report.finding is not None
    trace = report.finding.trace
    for _ in range(2):
        again = replay_with_adapter(CHUNK_TRANSFER, trace, lambda: SystemAdapter(variant_6670()))
        assert again is not None and again.detail == report.finding.detail
    clean = replay_with_adapter(CHUNK_TRANSFER, trace, lambda: SystemAdapter(CHUNK_TRANSFER))
    assert clean is None


def test_swarm_never_switches_off_what_the_initial_state_needs() -> None:
    machine_cls = state_machine(CHUNK_TRANSFER, lambda: SystemAdapter(CHUNK_TRANSFER))
    machine = machine_cls()

    class Everything:
        def draw(self, strategy: object, label: str = "") -> set[object]:
            return set(CHUNK_TRANSFER.labels())

    machine.choose_swarm(Everything())
    initially = {s.action for s in CHUNK_TRANSFER.successors(CHUNK_TRANSFER.init_states()[0])}
    assert not initially & machine.disabled
    for action in CHUNK_TRANSFER.actions:
        own = {label for label in CHUNK_TRANSFER.labels() if label.name == action.name}
        assert own - machine.disabled, f"every label of {action.name} switched off"
    machine.teardown()


def test_a_crashing_implementation_is_a_finding() -> None:
    class Crashing(SystemAdapter):
        def apply(self, step: object, before: object) -> None:
            raise RuntimeError("implementation exploded")

    report = fuzz(CHUNK_TRANSFER, lambda: Crashing(CHUNK_TRANSFER), seed=0)
    assert report.finding is not None and report.finding.kind == "crash"
    assert "implementation exploded" in report.finding.detail
    assert len(report.finding.trace) == 1


def test_every_seed_finding_variant_is_found_by_fuzzing_its_implementation() -> None:
    names = [
        "model:chunk_transfer_6670",
        "model:chunk_transfer_4855",
        "model:chunk_transfer_seed000_p1",
        "model:request_state_seed000_p1",
        "model:request_lifecycle_sync_abort",
        "model:request_lifecycle_telemetry_raises",
        "model:request_lifecycle_unguarded_release",
        "model:request_lifecycle_late_start_raises",
        "model:request_lifecycle_reuse_joins",
    ]
    specs = {a.name: a for a in bundled_adapters()}
    for name in names:
        system, factory, _ = resolve_adapter(specs[name].target, name)
        report = fuzz(system, factory, seed=0)  # the default run, nothing tuned
        assert isinstance(report.finding, Finding), f"{name} not found"


def test_a_variant_that_only_drops_instance_data_is_found() -> None:
    # segment_clears differs from the reference in no global, only in the
    # producer state's namespace, which SystemAdapter compares per instance.
    name = "model:chunk_transfer_segment_clears"
    system, factory, _ = resolve_adapter("chunk_transfer", name)
    report = fuzz(system, factory, seed=0)
    assert report.finding is not None and report.finding.kind == "conformance"
    assert "state:" in report.finding.detail
    names = [a.name for a in report.finding.trace.actions]
    assert names[-1] == "put" and "save_segment_end" in names


# -- the CLI -----------------------------------------------------------------------


def test_cli_fuzz_exit_codes_trace_and_replay(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "traces"
    args = ["fuzz", "chunk_transfer", "--adapter", "model:chunk_transfer_6670"]
    assert main([*args, "--trace-out", str(out), "--json"]) == 1
    report = json.loads(capsys.readouterr().out)
    assert report["finding"]["kind"] == "conformance"
    trace_file = Path(report["finding"]["trace_file"])
    assert trace_file.exists()
    assert report["finding"]["replay"].endswith("--adapter model:chunk_transfer_6670")
    assert main(["replay", str(trace_file), "--adapter", "model:chunk_transfer_6670"]) == 1
    capsys.readouterr()
    # The trace records what one adapter did: replaying it through another is refused.
    assert main(["replay", str(trace_file), "--adapter", "model:chunk_transfer_0_30_0"]) == 2
    err = capsys.readouterr().err
    assert "model:chunk_transfer_6670" in err and "model:chunk_transfer_0_30_0" in err
    same = ["fuzz", "chunk_transfer", "--adapter", "model:chunk_transfer_reuse_joins"]
    assert main([*same[:3], "model:chunk_transfer", "--max-examples", "5"]) == 2
    assert "unknown adapter" in capsys.readouterr().err


def test_cli_fuzz_unknown_adapter_suggests_close_names(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["fuzz", "chunk_transfer", "--adapter", "vllm-omin"]) == 2
    err = capsys.readouterr().err
    assert "unknown adapter 'vllm-omin'" in err and "vllm-omni" in err


def test_a_variant_at_other_bounds_is_fuzzed_against_the_reference_at_its_bounds() -> None:
    system, factory, spec = resolve_adapter("chunk_transfer", "model:chunk_transfer_no_token_reset")
    assert (
        spec.system.endswith(":reference_two_saves") and system.name == "chunk_transfer_two_saves"
    )
    report = fuzz(system, factory, seed=0)
    assert report.finding is not None and report.finding.kind == "conformance"
    assert "watermark:" in report.finding.detail  # the kept token watermark, not the bounds
    assert [a.name for a in report.finding.trace.actions][-1] == "save_segment_end"


def test_minimise_drops_every_step_the_finding_does_not_need() -> None:
    # A padded 6670 trace: a first request that does nothing, a chunk, then
    # the story. Every padding step goes; the finding stays the same.
    implementation = variant_6670()
    padded = ["new_request", "abort", "new_request", "save_chunk", "save_terminal", "abort"]
    state = CHUNK_TRANSFER.init_states()[0]
    steps = [TraceStep(None, "", state)]
    for name in padded:
        (step_,) = [s for s in CHUNK_TRANSFER.successors(state) if s.action.name == name]
        state = step_.state
        steps.append(TraceStep(step_.action, step_.actor, state, step_.outputs))
    trace = Trace(CHUNK_TRANSFER.name, tuple(steps), "", "violated", "")
    found = replay_with_adapter(CHUNK_TRANSFER, trace, lambda: SystemAdapter(implementation))
    assert found is not None and found.kind == "conformance"
    smaller = minimise(CHUNK_TRANSFER, found, lambda: SystemAdapter(implementation))
    assert [a.name for a in smaller.trace.actions] == ["new_request", "save_terminal", "abort"]
    assert (smaller.kind, smaller.property_id) == (found.kind, found.property_id)


def test_minimise_keeps_a_finding_that_needs_every_step() -> None:
    report = fuzz(CHUNK_TRANSFER, lambda: SystemAdapter(variant_6670()), seed=0)
    assert report.finding is not None
    again = minimise(CHUNK_TRANSFER, report.finding, lambda: SystemAdapter(variant_6670()))
    assert again.trace.actions == report.finding.trace.actions
