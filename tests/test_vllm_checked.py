"""`CheckedChunkTransferAdapter` against the reference chunk_transfer model.

Needs the real stack (``tox -e vllm``); skipped without it.

(a) directed scenarios on the checked adapter, in lockstep with the
    reference model: where 0.30.0 has a finding, the checked adapter does
    what the spec asks;
(b) fuzzing: no finding and no mismatch, with only the connector keys known
    (`vllm_omni_checked.KNOWN`: 0.30.0's key protocol, which needs an instance
    id both stages' requests carry); the same binding on the unmodified 0.30.0
    adapter fails at once (the binding can tell them apart);
(c) mutation check: each reference behaviour of the subclass, undone at one
    point, is found;
(d) the reference ``segments``: a graceful finish still sends what was queued
    before the terminal (fuzzed with nothing known; the rule undone is found);
(e) `install` and `fail_failed_chunk_sends`, the way to run vLLM-Omni with it;
(f) the overhead benchmark.
"""

from __future__ import annotations

from collections.abc import Hashable, Iterator
from types import SimpleNamespace
from typing import Any

import pytest
from statecore.models.bindings import vllm_omni_checked
from statecore.models.bindings.vllm_omni_checked import (
    CheckedChunkTransferAdapterBinding,
    CheckedSegmentsBinding,
    fuzz_system_reference,
    fuzz_system_segments,
)
from statecore.models.implementations import checked_chunk_transfer, checked_sender
from statecore.models.implementations.checked_chunk_transfer import (
    CheckedSenderMixin,
    checked_adapter_class,
    fail_failed_chunk_sends,
    install,
)

from statecore.fuzzing.fuzz import fuzz
from statecore.registry import adapter_system, bundled_adapters
from statecore.system import ActionLabel, Keys, System, SystemState

pytest.importorskip("vllm_omni")

from statecore.models.bindings.vllm_omni import real_classes
from statecore.models.bindings.vllm_omni_harness import make_adapter
from statecore.models.sender_generation import sender_generation_machine

REAL = real_classes()
MODEL = fuzz_system_reference()
FUZZ_EXAMPLES = 300
EXT0, EXT1 = Keys("ext", 2).values


class Lockstep:
    """A reference model and the checked adapter driven through the same actions."""

    def __init__(
        self, model: System = MODEL, binding: type[Any] = CheckedChunkTransferAdapterBinding
    ) -> None:
        self.model = model
        self.binding = binding()
        self.binding.setup(model)
        self.state: SystemState = model.init_states()[0]

    def do(self, name: str, **args: Hashable) -> Lockstep:
        step = self.model.next_step(self.state, ActionLabel(name, tuple(args.items())))
        self.binding.apply(step, self.state)
        self.state = step.state
        observed = self.binding.observe()
        assert observed == self.binding.expect(self.model.view(self.state))
        return self

    @property
    def adapter(self) -> Any:
        return self.binding.adapter

    def broken(self, property_id: str) -> bool:
        """Whether the model's state violates the ``always`` property `property_id`."""
        [prop] = [p for p in MODEL.properties if p.id == property_id]
        assert prop.predicate is not None
        return not prop.predicate(MODEL.view(self.state))

    def status(self, request_id: str) -> Any:
        return self.binding.by_id[request_id].status


@pytest.fixture
def run() -> Iterator[Lockstep]:
    lockstep = Lockstep()
    yield lockstep
    lockstep.binding.teardown()


# -- (a) directed scenarios ------------------------------------------------------------


def test_a_processor_exception_fails_the_request_and_reclaims_its_sender(run: Lockstep) -> None:
    run.do("new_request", ext=EXT0).do("save_chunk", ext=EXT0).do("begin")
    run.do("process", outcome="raise")
    assert run.adapter._send_failures == {
        "ext0-r1": "processor raised ProcessorFailure('statecore: processor raised for ext0-r1')"
    }
    run.do("collect_failures")
    assert run.status("ext0-r1") == REAL.status.FINISHED_ERROR
    assert run.adapter._sender_tokens == {}


def test_a_reused_id_is_refused_while_the_old_generation_holds_it(run: Lockstep) -> None:
    run.do("new_request", ext=EXT0).do("save_terminal", ext=EXT0)
    run.do("begin").do("process", outcome="payload").do("put", outcome="false").do("finish")
    old = run.adapter._sender_tokens["ext0"]
    assert (old.owner, old.state) == ("ext0-r1", "open")  # failed terminal: kept, fence down
    run.do("new_request", ext=EXT0).do("save_chunk", ext=EXT0)
    assert run.adapter._send_failures.keys() == {"ext0-r1", "ext0-r2"}
    assert list(run.adapter._pending_save_reqs) == []  # never joined the old generation
    run.do("collect_failures")  # both fail; each finish reclaims only its own generation
    assert run.adapter._sender_tokens == {}
    assert run.adapter.request_payload == {}


def test_a_finish_of_the_old_request_leaves_the_new_generation_alone(run: Lockstep) -> None:
    run.do("new_request", ext=EXT0).do("save_chunk", ext=EXT0).do("abort", ext=EXT0)
    run.do("new_request", ext=EXT0).do("save_chunk", ext=EXT0)
    token = run.adapter._sender_tokens["ext0"]
    run.adapter.finish_requests("ext0-r1", REAL.status.FINISHED_ABORTED, {})  # a bare string id
    assert run.adapter._sender_tokens["ext0"] is token and token.state == "open"


def test_the_side_tables_of_a_reclaimed_id_are_cleared(run: Lockstep) -> None:
    run.do("new_request", ext=EXT0).do("save_chunk", ext=EXT0)
    adapter = run.adapter
    adapter._qwen3_tts_emitted_frames = {"ext0": 3}
    adapter._cached_ic = {"ext0": 25}
    adapter._pending_streaming_prefills["ext0"] = {"p": 1}
    adapter._adaptive_states["ext0"] = object()
    run.do("abort", ext=EXT0)
    for table in ("_qwen3_tts_emitted_frames", "_cached_ic", "_pending_streaming_prefills"):
        assert "ext0" not in getattr(adapter, table), table
    assert "ext0" not in adapter._adaptive_states and "ext0" not in adapter.put_req_chunk


def test_a_stale_processor_cannot_recreate_request_payload(run: Lockstep) -> None:
    run.do("new_request", ext=EXT0).do("save_chunk", ext=EXT0).do("abort", ext=EXT0)
    run.adapter.request_payload.setdefault("ext0", {})["codec"] = "stale"
    run.adapter.request_payload["ext0"] = {"codec": "stale"}
    assert "ext0" not in run.adapter.request_payload


# -- (b) fuzzing -------------------------------------------------------------------------


def test_the_checked_adapter_conforms_to_the_reference_with_only_its_keys_known() -> None:
    known = vllm_omni_checked.KNOWN
    report = fuzz(
        MODEL, CheckedChunkTransferAdapterBinding, max_examples=FUZZ_EXAMPLES, seed=0, known=known
    )
    print(f"\nvllm-omni-checked: {report.examples} examples, {report.steps} steps, no finding")
    assert report.finding is None, f"{report.finding}\n{report.finding.trace}"
    assert (
        set(known) == {"no_unread_overwrite"} and CheckedChunkTransferAdapterBinding.known is known
    )
    [spec] = [a for a in bundled_adapters() if a.name == "vllm-omni-checked"]
    assert spec.system.endswith(":fuzz_system_reference")
    assert adapter_system("chunk_transfer", "vllm-omni-checked").name == MODEL.name


def test_the_known_finding_is_0_30_0s_key_reuse_and_the_checked_adapter_does_it_too(
    run: Lockstep,
) -> None:
    """The shortest trace of ``no_unread_overwrite`` (docs/findings.md), in lockstep."""
    run.do("new_request", ext=EXT0).do("save_terminal", ext=EXT0).do("new_request", ext=EXT0)
    run.do("begin").do("process", outcome="payload").do("put", outcome="ok").do("finish")
    assert not run.broken("no_unread_overwrite")
    run.do("save_chunk", ext=EXT0).do("begin").do("process", outcome="payload")
    run.do("put", outcome="ok")  # the new request's chunk 0 replaces the unread terminal
    assert run.broken("no_unread_overwrite")
    assert [sent.key for sent in run.binding.connector.sent][-2:] == ["ext0_0_0", "ext0_0_0"]


class Released(CheckedChunkTransferAdapterBinding):
    """The same binding on the unmodified 0.30.0 adapter."""

    def make_adapter(self) -> Any:
        return make_adapter(self.connector)


def test_the_released_adapter_fails_under_the_same_binding() -> None:
    report = fuzz(MODEL, Released, max_examples=FUZZ_EXAMPLES, seed=0)
    assert report.finding is not None


# -- (c) mutation check ------------------------------------------------------------------


def _joins(token: Any, request_id: str) -> str | None:
    return "draining" if token.cancelled else None


def _only_logs(self: Any, task: dict[str, Any], output: Any, token: Any) -> Any:
    try:
        return self.custom_process_next_stage_input_func(
            transfer_manager=self,
            multimodal_output=output,
            request=task["request"],
            is_finished=task["is_segment_finished"] or task["is_finished"],
        )
    except Exception:
        return None


def _log_only_sweep(scheduler: Any) -> None:
    scheduler.chunk_transfer_adapter.collect_failed_send_request_ids()


MUTANTS: dict[str, tuple[Any, str, Any]] = {
    "reuse_joins_a_live_generation": (checked_sender.SenderGeneration, "refusal", _joins),
    "processor_exception_only_logged": (CheckedSenderMixin, "_process_payload", _only_logs),
    "sweep_only_logs": (vllm_omni_checked, "fail_failed_chunk_sends", _log_only_sweep),
    "cleanup_reclaims_a_queued_terminal": (
        checked_sender,
        "SENDER_GENERATION",
        sender_generation_machine(defer_cleanup=False),
    ),
}


@pytest.mark.parametrize("name", sorted(MUTANTS))
def test_a_reference_behaviour_undone_is_found(name: str, monkeypatch: pytest.MonkeyPatch) -> None:
    owner, attribute, replacement = MUTANTS[name]
    monkeypatch.setattr(owner, attribute, replacement)
    report = fuzz(MODEL, CheckedChunkTransferAdapterBinding, max_examples=FUZZ_EXAMPLES, seed=0)
    assert report.finding is not None, f"{name} survived {report.examples} examples"
    print(f"\n{name}: {report.finding.kind} {report.finding.property_id}")


# -- (d) the segments reference: a graceful finish still sends what was queued before its terminal


SEGMENTS = fuzz_system_segments()
(SEGMENT_EXT,) = SEGMENTS.component("request").key_values


def test_ending_a_parked_session_sends_its_queued_segment_end() -> None:
    """0.30.0 discards it (tests/test_vllm_segments.py); the reference sends it."""
    run = Lockstep(SEGMENTS, CheckedSegmentsBinding)
    try:
        ext = SEGMENT_EXT
        run.do("arrive", ext=ext, counter=False).do("segment_end", ext=ext)
        run.do("end_parked", ext=ext)
        token = run.binding.adapter._sender_tokens["ext0"]
        assert token.retired and token.cleanup_owed and token.state == "terminal_pending"
        assert not run.binding.adapter.has_active_sender("ext0")  # no terminal owed any more
        run.do("send")
        assert token.state == "terminal_pending"  # the segment end went out
        run.do("send")  # the terminal's put, then its finally fires the owed cleanup
        assert token.state == "reclaimed" and run.binding.adapter._sender_tokens == {}
        flags = [(s.finished, s.segment_finished) for s in run.binding.connector.sent]
        assert flags == [(False, True), (True, False)]
        run.do("receive").do("receive")
    finally:
        run.binding.teardown()


class _FailingPut:
    busy = False

    def park(self, point: str) -> str:
        return "false"


def test_a_graceful_finish_whose_terminal_put_fails_still_reclaims_the_generation() -> None:
    """The owed cleanup is fired in the terminal's finally whatever its put did."""
    run = Lockstep(SEGMENTS, CheckedSegmentsBinding)
    try:
        ext = SEGMENT_EXT
        run.do("arrive", ext=ext, counter=False).do("segment_end", ext=ext)
        run.do("end_parked", ext=ext).do("send")
        adapter = run.binding.adapter
        token = adapter._sender_tokens["ext0"]
        run.binding.baton = _FailingPut()
        run.binding._do_send(None)  # the terminal, outside the model: its put fails
        assert token.state == "reclaimed" and adapter._sender_tokens == {}
        assert "ext0" not in adapter._segment_generation
        assert set(adapter._send_failures) == {"seg-r1"}  # recorded, as any failed put
    finally:
        run.binding.teardown()


def test_the_checked_adapter_conforms_to_the_reference_segments_with_nothing_known() -> None:
    assert CheckedSegmentsBinding.known == {}
    report = fuzz(SEGMENTS, CheckedSegmentsBinding, max_examples=FUZZ_EXAMPLES, seed=0)
    assert report.finding is None, f"{report.finding}\n{report.finding.trace}"
    never = [(comp, names) for comp, _, _, _, names in report.coverage() if names]
    assert never == [], f"model transitions never taken: {never}"
    [spec] = [a for a in bundled_adapters() if a.name == "vllm-omni-checked-segments"]
    assert spec.system.endswith(":fuzz_system_segments")


def test_a_graceful_finish_that_cancels_at_once_is_found(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(checked_chunk_transfer, "_graceful", lambda status, finished: False)
    report = fuzz(SEGMENTS, CheckedSegmentsBinding, max_examples=FUZZ_EXAMPLES, seed=0)
    assert report.finding is not None
    actions = [step.action.name for step in report.finding.trace.steps if step.action]
    assert "end_parked" in actions


def test_an_abort_still_cancels_the_queued_chunks(run: Lockstep) -> None:
    """Only a graceful finish owes the queued chunks; an abort's are discarded at once."""
    run.do("new_request", ext=EXT0).do("save_chunk", ext=EXT0).do("save_terminal", ext=EXT0)
    run.do("abort", ext=EXT0)
    token = run.adapter._sender_tokens["ext0"]
    assert token.state == "draining" and not token.cleanup_owed
    run.do("begin")  # the chunk: discarded by the machine's fence
    assert token.state == "draining" and len(run.adapter._pending_save_reqs) == 1


# -- (e) running vLLM-Omni with it ------------------------------------------------------------


def test_install_makes_the_scheduler_build_the_checked_adapter(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    import importlib

    mixin_module = importlib.import_module(checked_chunk_transfer.MIXIN_MODULE)
    monkeypatch.setattr(mixin_module, "OmniChunkTransferAdapter", REAL.adapter)
    mixin = mixin_module.OmniSchedulerMixin
    monkeypatch.setattr(mixin, "_log_failed_chunk_sends", mixin._log_failed_chunk_sends)
    cls = install()
    assert mixin_module.OmniChunkTransferAdapter is cls is checked_adapter_class()
    assert issubclass(cls, REAL.adapter) and cls.__name__ == "CheckedChunkTransferAdapter"
    assert mixin._log_failed_chunk_sends is fail_failed_chunk_sends
    assert checked_chunk_transfer.CheckedChunkTransferAdapter is cls


def test_the_sweep_fails_only_requests_still_scheduled(run: Lockstep) -> None:
    run.do("new_request", ext=EXT0).do("save_chunk", ext=EXT0).do("begin")
    run.do("process", outcome="payload").do("put", outcome="false").do("finish")
    finished: list[tuple[str, Any]] = []
    scheduler = SimpleNamespace(
        chunk_transfer_adapter=run.adapter,
        requests={},  # the request already left this scheduler: logged only
        finish_requests=lambda rid, status: finished.append((rid, status)),
    )
    fail_failed_chunk_sends(scheduler)
    assert finished == [] and run.adapter._send_failures == {}


# -- (f) the overhead benchmark -------------------------------------------------------------------


def benchmark(*arguments: str) -> str:
    import subprocess
    import sys
    from pathlib import Path

    script = Path(__file__).resolve().parent.parent / "benchmarks" / "checked_adapter.py"
    done = subprocess.run(
        [sys.executable, str(script), *arguments], capture_output=True, text=True, check=True
    )
    return done.stdout


def table(output: str) -> dict[str, list[float]]:
    """Workload -> the figures of its row."""
    rows = {}
    for line in output.splitlines():
        name = next((w for w in ("streaming chunk", "segment end + chunk", "whole request")
                     if line.startswith(w)), None)  # fmt: skip
        if name is not None:
            rows[name] = [float(x) for x in line[len(name) :].split()]
    return rows


def test_the_benchmark_counts_more_instructions_for_the_checked_adapter_on_every_workload() -> None:
    rows = table(benchmark("--instructions", "--cycles", "5"))
    assert set(rows) == {"streaming chunk", "segment end + chunk", "whole request"}
    for released, checked, ratio in rows.values():
        assert 0 < released < checked and ratio == pytest.approx(checked / released, abs=0.01)


def test_the_benchmark_on_shared_memory_leaves_no_segment_behind() -> None:
    import os

    before = set(os.listdir("/dev/shm"))
    rows = table(benchmark("--connector", "shm", "--repeat", "1", "--cycles", "3"))
    assert len(rows) == 3 and all(len(row) == 4 and min(row) > 0 for row in rows.values())
    assert set(os.listdir("/dev/shm")) <= before


def test_the_breakdown_puts_every_extra_instruction_of_the_checked_adapter_in_a_place() -> None:
    rows: dict[str, dict[str, tuple[float, float, float]]] = {}
    workload = ""
    for line in benchmark("--breakdown", "--cycles", "5").splitlines():
        if line in ("streaming chunk", "segment end + chunk", "whole request"):
            workload = line
            rows[workload] = {}
        elif line.startswith("  ") and workload:
            *place, released, checked, extra = line.split()
            rows[workload][" ".join(place)] = (float(released), float(checked), float(extra))
    assert set(rows) == {"streaming chunk", "segment end + chunk", "whole request"}
    for places in rows.values():
        total = places.pop("total")
        assert sum(r[0] for r in places.values()) == pytest.approx(total[0], abs=len(places))
        assert sum(r[1] for r in places.values()) == pytest.approx(total[1], abs=len(places))
        for place in ("watermark", "machine holders", "runtime: fires"):
            assert places[place][0] == 0 < places[place][1]  # only the checked adapter runs them


def test_the_soak_reports_each_seed_and_the_known_properties_it_met() -> None:
    out = benchmark("--soak", "--seeds", "1", "--budget", "5").splitlines()
    (row,) = [line for line in out if line.lstrip().startswith("0 ")]
    assert "no finding; known: " in row and row.endswith("(exit 0)"), row
    assert out[-1] == "RESULT seeds=1 findings=0"
