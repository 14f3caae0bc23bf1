"""Conformance of the real vLLM-Omni 0.30.0 chunk-transfer adapter to the chunk_transfer model.

Needs the real stack (``bash scripts/install-vllm-stack.sh`` or ``tox -e vllm``);
skipped without it. Importing vLLM-Omni takes 15-50 s, once for the module.

(a) directed scenarios: the facts the chunk-transfer issue states, run on the
    real adapter and on the model in lockstep (observe == expect after every
    step), with the facts asserted on what the real adapter did and, where
    the scenario ends at rest, the 0.30.0 findings judged on the model's
    state; plus a 0.30.0 behaviour below the model's abstraction (connector
    keys), asserted on the real adapter alone;
(b) fuzzing: no conformance mismatch and no unknown finding, the known ones
    reported as known, and strict xfails that turn red the day vLLM-Omni
    stops dropping a chunk the processor raised on, or stops turning a
    processor exception into an empty marker;
(c) mutation check: bugs vLLM-Omni really had, patched back into the real
    class, are each found within a CI-sized budget.
"""

from __future__ import annotations

import os
import sys
import time
from collections import deque
from collections.abc import Callable, Hashable, Iterator, Mapping
from typing import Any

import pytest
from hypothesis import HealthCheck, Phase, settings
from hypothesis import seed as hypothesis_seed
from hypothesis.stateful import run_state_machine_as_test
from statecore.models.bindings.vllm_omni import (
    ADAPTERS,
    CTA_MODULE,
    KNOWN_0_30_0,
    MUTANTS,
    SYSTEM,
    Mutant,
    OmniChunkTransferAdapterBinding,
    fuzz_system_0_30_0,
    real_classes,
)
from statecore.models.bindings.vllm_omni_mutants import source_mutant
from statecore.models.bindings.vllm_omni_shm import SHM_DIR, SharedMemoryBinding, segment_exists

from statecore.adapter import Adapter
from statecore.fuzzing.fuzz import PROFILES, Finding, fuzz, state_machine
from statecore.fuzzing.mutate import module_file
from statecore.fuzzing.source_mutants import source_mutants
from statecore.properties import Property
from statecore.registry import load_path
from statecore.system import ActionLabel, Handle, Keys, System, SystemState

pytest.importorskip("vllm_omni")

REAL = real_classes()  # the 15-50 s import, once per process
CTA_FILE = module_file(CTA_MODULE)
MODEL = fuzz_system_0_30_0()
EXT0, EXT1 = Keys("ext", 2).values
R1 = "ext0-r1"  # internal id of ext0's first request
R2 = "ext0-r2"
CHUNK_DELIVERED = "chunk_delivered"
PROCESSOR_FAILURE_VISIBLE = "processor_failure_visible"
FUZZ_EXAMPLES = 300
MUTANT_EXAMPLES = 300


class Lockstep:
    """The model and the real adapter driven through the same actions."""

    def __init__(
        self,
        system: System = MODEL,
        binding: type[OmniChunkTransferAdapterBinding] = OmniChunkTransferAdapterBinding,
        **options: Any,
    ) -> None:
        self.system = system
        self.binding = binding(**options)
        self.binding.setup(system)
        self.state: SystemState = system.init_states()[0]
        self.check()

    def do(self, name: str, check: bool = True, **args: Hashable) -> Lockstep:
        step = self.system.next_step(self.state, ActionLabel(name, tuple(args.items())))
        self.binding.apply(step, self.state)
        self.state = step.state
        if check:
            self.check()
        return self

    def check(self) -> None:
        observed = self.binding.observe()
        expected = self.binding.expect(self.system.view(self.state))
        assert observed == expected, f"implementation {observed} != model {expected}"

    @property
    def seen(self) -> dict[str, Any]:
        """What the real adapter shows (`observe`), by name."""
        return dict(self.binding.observe())

    def model(self, name: str) -> Any:
        return self.system.view(self.state).get(name)

    @property
    def sent(self) -> list[tuple[str, str, bool, bool, bool]]:
        """Successful puts: (connector key, internal id, finished, segment finished, empty)."""
        return list(self.binding.connector.sent)

    def failures(self) -> dict[str, str]:
        """The send failures with reasons (public API; drains)."""
        failures: dict[str, str] = self.binding.adapter.collect_failed_send_request_ids()
        return failures

    def at_rest(self) -> bool:
        """Whether the model is quiescent: no internal action is left to take."""
        enabled = self.system.actions_in(self.state)
        return not any(self.system.action(label.name).internal for label in enabled)

    def holds(self, property_id: str) -> bool:
        """Whether the model's state satisfies the property `property_id` (not a monitor)."""
        prop: Property = next(p for p in self.system.properties if p.id == property_id)
        assert prop.predicate is not None
        return prop.predicate(self.system.view(self.state))

    def close(self) -> None:
        self.binding.teardown()


@pytest.fixture
def run() -> Iterator[Lockstep]:
    lockstep = Lockstep()
    yield lockstep
    lockstep.close()


# -- (a) directed scenarios ----------------------------------------------------------


def test_a_processor_exception_on_a_chunk_drops_it_silently(run: Lockstep) -> None:
    # The known chunk_delivered: the processor raises on a normal chunk; the
    # exception is logged, nothing is put and no failure is recorded, so
    # nothing will ever fail the request. At rest the chunk is lost.
    run.do("new_request", ext=EXT0).do("save_chunk", ext=EXT0).do("begin")
    run.do("process", outcome="raise")
    assert run.sent == []
    assert run.seen["failures"] == frozenset()
    assert run.seen["senders"] == (("ext0", 1, False, False, False),)  # the request goes on
    assert run.at_rest() and not run.holds(CHUNK_DELIVERED)
    # The request then ends normally: its consumer gets finished=True, one chunk short.
    run.do("save_terminal", ext=EXT0).do("begin").do("process", outcome="payload")
    run.do("put", outcome="ok").do("finish").do("receive")
    assert run.sent == [("ext0_0_0", R1, True, False, False)]
    assert run.at_rest() and not run.holds(CHUNK_DELIVERED)
    assert run.failures() == {}


def test_processor_raising_on_a_terminal_sends_an_empty_finished_marker(run: Lockstep) -> None:
    run.do("new_request", ext=EXT0).do("save_terminal", ext=EXT0).do("begin")
    run.do("process", outcome="raise").do("put", outcome="ok").do("finish")
    assert run.sent == [("ext0_0_0", R1, True, False, True)]  # empty payload, finished=True
    assert run.failures() == {}
    assert run.seen["senders"] == ()  # a successful terminal reclaims the sender state
    run.do("receive")  # the consumer reads the marker as a normal end of stream
    assert run.model("error_markers") == {Handle("request", EXT0, 1)}
    assert run.at_rest() and not run.holds(PROCESSOR_FAILURE_VISIBLE)  # what seed 000 forbids


def test_cleanup_with_a_chunk_and_a_terminal_queued_delivers_only_the_terminal(
    run: Lockstep,
) -> None:
    run.do("new_request", ext=EXT0).do("save_chunk", ext=EXT0).do("save_terminal", ext=EXT0)
    run.do("abort", ext=EXT0)  # finish_requests -> cleanup_sender with both queued
    # #6670: the fence defers the cleanup; the generation is cancelled, not reclaimed.
    assert run.seen["senders"] == (("ext0", 1, True, True, False),)
    assert run.seen["queue"] == ((R1, 1, False, False), (R1, 1, True, False))
    run.do("begin")  # the normal chunk is discarded as stale: it never parks
    assert run.seen["parked"] is None
    run.do("begin").do("process", outcome="payload").do("put", outcome="ok").do("finish")
    assert run.sent == [("ext0_0_0", R1, True, False, False)]  # the terminal, nothing else
    assert run.seen["senders"] == ()  # the deferred cleanup ran
    assert run.failures() == {}


def test_save_for_a_reused_id_while_the_old_generation_drains_is_rejected_and_recorded(
    run: Lockstep,
) -> None:
    run.do("new_request", ext=EXT0).do("save_chunk", ext=EXT0).do("save_terminal", ext=EXT0)
    run.do("abort", ext=EXT0).do("new_request", ext=EXT0)
    run.do("save_chunk", ext=EXT0)  # the old generation is cancelled but still draining
    assert run.seen["scheduler"] == "save_lock"  # the late check passed; now the lock
    run.do("save_locked")
    assert run.seen["failures"] == frozenset({R2})
    assert run.seen["queue"] == (
        (R1, 1, False, False),
        (R1, 1, True, False),
    )  # nothing of r2 queued
    run.do("begin").do("begin").do("process", outcome="payload").do("put", outcome="ok").do(
        "finish"
    )
    assert run.sent == [("ext0_0_0", R1, True, False, False)]  # the old terminal still goes out
    assert run.failures() == {R2: "previous sender generation is still draining"}
    assert run.seen["senders"] == ()


def test_a_terminal_put_returning_false_is_recorded_and_the_deferred_cleanup_runs(
    run: Lockstep,
) -> None:
    run.do("new_request", ext=EXT0).do("save_terminal", ext=EXT0).do("abort", ext=EXT0)
    run.do("begin").do("process", outcome="payload").do("put", outcome="false").do("finish")
    assert run.sent == []
    assert run.seen["senders"] == ()  # the fence release ran the deferred cleanup
    assert run.failures() == {R1: "connector.put reported failure"}


def test_a_failed_terminal_without_cleanup_keeps_the_sender_state(run: Lockstep) -> None:
    # The known no_sender_leak: nothing reclaims a failed terminal's generation.
    run.do("new_request", ext=EXT0).do("save_terminal", ext=EXT0)
    run.do("begin").do("process", outcome="payload").do("put", outcome="raise").do("finish")
    assert run.seen["senders"] == (("ext0", 1, False, False, False),)
    failures = run.failures()
    assert set(failures) == {R1} and failures[R1].startswith("ConnectionError: ")


def test_a_send_failure_is_only_logged_and_the_consumer_meets_its_deadline(
    run: Lockstep,
) -> None:
    # The known failure_releases_consumer and terminal_delivered: the
    # scheduler's sweep (the real _log_failed_chunk_sends) drains the failure
    # and logs it; nothing fails the request, nothing finishes it on the next
    # stage, and its consumer waits until the input deadline.
    run.do("new_request", ext=EXT0).do("save_terminal", ext=EXT0)
    run.do("begin").do("process", outcome="payload").do("put", outcome="false").do("finish")
    assert run.seen["failures"] == frozenset({R1})
    run.do("collect_failures")
    assert run.seen["failures"] == frozenset()  # drained, and only logged
    assert run.seen["senders"] == (("ext0", 1, False, False, False),)  # still held
    assert not run.at_rest()  # the consumer still waits: its deadline is the next step
    run.do("deadline", ext=EXT0)
    assert run.model("timed_out") == {Handle("request", EXT0, 1)}
    assert run.at_rest()
    for prop in ("terminal_delivered", "failure_releases_consumer", "no_sender_leak"):
        assert not run.holds(prop), prop


def test_a_reused_id_joins_the_old_generation_and_is_discarded_after_its_terminal(
    run: Lockstep,
) -> None:
    # 0.30.0 has no identity check on the request: r2's chunk joins r1's sender
    # generation and is dropped silently once r1's terminal reclaims it.
    run.do("new_request", ext=EXT0).do("save_terminal", ext=EXT0)
    run.do("new_request", ext=EXT0).do("save_chunk", ext=EXT0).do("save_locked")
    assert run.seen["queue"] == ((R1, 1, True, False), (R2, 1, False, False))
    run.do("begin").do("process", outcome="payload").do("put", outcome="ok").do("finish").do(
        "begin"
    )
    assert run.sent == [("ext0_0_0", R1, True, False, False)]
    assert run.seen["parked"] is None and run.failures() == {}


def test_a_reused_id_below_the_old_watermark_is_dropped_silently(run: Lockstep) -> None:
    # r1's terminal fails, so its generation and watermarks stay; r2's first
    # chunk (1 token, counted from zero) is below the 2 tokens r1 confirmed:
    # skipped as a preemption replay, no failure recorded (CTA:452-463).
    run.do("new_request", ext=EXT0).do("save_chunk", ext=EXT0).do("save_terminal", ext=EXT0)
    run.do("begin").do("process", outcome="payload").do("put", outcome="ok").do("finish")
    run.do("begin").do("process", outcome="payload").do("put", outcome="false").do("finish")
    assert run.seen["watermarks"] == (("ext0", 0, 2),)
    run.do("new_request", ext=EXT0).do("save_chunk", ext=EXT0).do("save_locked")
    assert run.seen["queue"] == () and run.seen["failures"] == frozenset({R1})
    assert run.model("lost") == {Handle("request", EXT0, 2)}


def test_a_reused_id_reads_the_old_requests_request_payload(run: Lockstep) -> None:
    # r1's processor made request_payload["ext0"]; its terminal fails; r2's
    # chunk joins the old generation and its processor finds r1's state.
    run.do("new_request", ext=EXT0).do("save_terminal", ext=EXT0)
    run.do("begin").do("process", outcome="payload").do("put", outcome="false").do("finish")
    run.do("new_request", ext=EXT0).do("save_chunk", ext=EXT0).do("save_locked").do("begin")
    run.do("process", outcome="payload")
    assert run.binding.adapter.request_payload == {"ext0": {"codec": R1}}
    assert run.model("crossed")


def test_a_reused_ids_save_is_judged_against_the_old_generation_and_queued_in_a_new_one(
    run: Lockstep,
) -> None:
    # save_async's lock-free window (CTA:412-447): the late check and the stamp
    # of _segment_generation run before the sender lock. r2's save parks there
    # (the model's save_chunk) while r1's terminal is in connector.put; the
    # terminal goes out and its finally reclaims r1's generation, popping the
    # stamp with the watermarks; under the lock (save_locked) r2 opens a new
    # generation, and _segment_generation stays absent.
    run.do("new_request", ext=EXT0).do("save_terminal", ext=EXT0).do("begin")
    run.do("process", outcome="payload").do("new_request", ext=EXT0).do("save_chunk", ext=EXT0)
    assert run.seen["scheduler"] == "save_lock" and run.seen["parked"] == "put"
    assert run.seen["watermarks"] == (("ext0", 0, 1),)
    run.do("put", outcome="ok").do("finish")
    assert run.seen["watermarks"] == () and run.seen["senders"] == ()
    run.do("save_locked")
    seen = run.seen
    assert seen["scheduler"] is None and seen["watermarks"] == (("ext0", None, 1),)
    assert seen["senders"] == (("ext0", 2, False, False, False),)
    assert seen["queue"] == ((R2, 2, False, False),)


@pytest.mark.parametrize("scheduler", ["OmniARScheduler", "OmniGenerationScheduler"])
def test_an_abort_runs_the_real_schedulers_finish_path_adapter_first(
    run: Lockstep, scheduler: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    # MIX.finish_requests calls the adapter's finish_requests before vLLM's
    # Scheduler.finish_requests sets the status (MIX:945-980): the adapter sees
    # the request still running, and the status is vLLM's to set.
    adapter = run.binding.adapter
    real = adapter.finish_requests
    calls: list[tuple[str, str, str]] = []

    def spy(ids: Any, status: Any, requests: Mapping[str, Any]) -> Any:
        caller = type(sys._getframe(1).f_locals["self"]).__name__  # MIX.finish_requests
        calls.extend((caller, rid, request.status.name) for rid, request in requests.items())
        return real(ids, status, requests)

    monkeypatch.setattr(adapter, "finish_requests", spy)
    run.binding.aborts = 0 if scheduler == "OmniARScheduler" else 4  # 4 id shapes each
    run.do("new_request", ext=EXT0).do("save_chunk", ext=EXT0).do("abort", ext=EXT0)
    assert calls == [(scheduler, R1, "RUNNING")]
    assert run.binding.requests[EXT0].status.name == "FINISHED_ABORTED"
    assert run.seen["senders"] == () and run.seen["queue"] == ((R1, 1, False, False),)


def test_a_segment_end_advances_the_watermark_and_goes_out_marked(run: Lockstep) -> None:
    run.do("new_request", ext=EXT0).do("save_segment_end", ext=EXT0)
    assert run.seen["watermarks"] == (("ext0", 1, None),)  # gen + 1, token watermark popped
    run.do("begin").do("process", outcome="none").do("put", outcome="ok").do("finish")
    assert run.sent == [("ext0_0_0", R1, False, True, True)]  # an empty segment-end marker
    run.do("next_segment", ext=EXT0).do("save_chunk", ext=EXT0)
    assert run.seen["watermarks"] == (("ext0", 1, 1),)


def test_a_failed_segment_end_lets_the_next_segment_run_into_the_old_one(
    run: Lockstep,
) -> None:
    # The segment end's put returns False: recorded, the key counter stays, and
    # the next segment's chunk goes out under the same key as the old segment's
    # data, with no segment-end marker before it (the known segment_order).
    run.do("new_request", ext=EXT0).do("save_segment_end", ext=EXT0)
    run.do("begin").do("process", outcome="payload").do("put", outcome="false").do("finish")
    run.do("next_segment", ext=EXT0).do("save_chunk", ext=EXT0)
    run.do("begin").do("process", outcome="payload").do("put", outcome="ok").do("finish")
    assert run.sent == [("ext0_0_0", R1, False, False, False)]
    assert run.failures() == {R1: "connector.put reported failure"}


# A behaviour of 0.30.0 below the model's abstraction (it does not model
# connector keys): a reused external id joins a generation its old request left.


def test_a_reused_id_after_a_failed_terminal_continues_the_old_key_counter(
    run: Lockstep,
) -> None:
    # The failed terminal keeps put_req_chunk (no_sender_leak); r2 joins the old
    # generation, so its first chunk goes to key 1 while r2's receiver, keyed by
    # its fresh internal id, polls key 0 first (harness B4). The model, whose
    # consumer reads one FIFO, delivers it. r2 opens its own segment first, so
    # its tokens are not below r1's watermark.
    run.do("new_request", ext=EXT0).do("save_chunk", ext=EXT0)
    run.do("begin").do("process", outcome="payload").do("put", outcome="ok").do("finish")
    run.do("save_terminal", ext=EXT0).do("begin").do("process", outcome="payload")
    run.do("put", outcome="false").do("finish").do("new_request", ext=EXT0)
    for _ in range(3):  # each meets r1's generation before the lock, then joins it
        run.do("save_chunk", ext=EXT0).do("save_locked")
    run.do("begin").do("process", outcome="payload").do("put", outcome="ok").do("finish")
    assert [entry[:2] for entry in run.sent] == [("ext0_0_0", R1), ("ext0_0_1", R2)]


def test_teardown_unwinds_a_parked_save_thread() -> None:
    lockstep = Lockstep()
    lockstep.do("new_request", ext=EXT1).do("save_terminal", ext=EXT1).do("begin")
    assert lockstep.seen["parked"] == "processor"
    lockstep.close()
    assert not lockstep.binding.baton.busy


def test_the_adapter_is_registered_with_its_system() -> None:
    (spec,) = ADAPTERS
    assert spec.name == OmniChunkTransferAdapterBinding.name == "vllm-omni"
    assert spec.load() is OmniChunkTransferAdapterBinding
    system = load_path(SYSTEM)
    assert [a.name for a in system.actions] == [a.name for a in MODEL.actions]


# -- searching without shrinking ------------------------------------------------------


def first_finding(
    system: System,
    factory: Callable[[], Adapter],
    *,
    max_examples: int,
    seed: int,
    known: Mapping[str, str] | None = None,
) -> tuple[Finding | None, int, float]:
    """The fuzz search without shrinking: (first finding, examples run, seconds).

    `fuzz` shrinks (and explains) every finding, which costs far more than
    finding it; a mutation check only needs to know it is found.
    """
    examples = 0

    def counted() -> Adapter:
        nonlocal examples
        examples += 1
        return factory()

    machine = state_machine(system, counted, known=known)
    config = settings(
        max_examples=max_examples,
        stateful_step_count=PROFILES["ci"]["stateful_step_count"],
        deadline=None,
        database=None,
        derandomize=False,
        phases=[Phase.generate],
        suppress_health_check=list(HealthCheck),
    )
    started = time.perf_counter()
    try:
        run_state_machine_as_test(hypothesis_seed(seed)(machine), settings=config)  # type: ignore[no-untyped-call]
    except Finding as finding:
        return finding, examples, time.perf_counter() - started
    return None, examples, time.perf_counter() - started


# -- (b) fuzzing ---------------------------------------------------------------------


def test_fuzzing_finds_no_mismatch_and_only_known_findings() -> None:
    report = fuzz(MODEL, OmniChunkTransferAdapterBinding, max_examples=FUZZ_EXAMPLES, seed=0)
    print(
        f"\nvllm-omni: {report.examples} examples, {report.steps} steps in "
        f"{report.seconds:.1f}s = {report.steps_per_second:.0f} steps/s against the real adapter"
    )
    if report.finding is not None:
        pytest.fail(f"{report.finding}\n{report.finding.trace}")
    assert PROCESSOR_FAILURE_VISIBLE in report.known
    assert set(report.known) <= set(KNOWN_0_30_0)
    never = [(comp, names) for comp, _, _, _, names in report.coverage() if names]
    assert never == [], f"model transitions never taken: {never}"


@pytest.mark.parametrize("property_id", [CHUNK_DELIVERED, PROCESSOR_FAILURE_VISIBLE])
@pytest.mark.xfail(strict=True, raises=Finding, reason="a known vLLM-Omni 0.30.0 finding")
def test_a_known_finding_is_still_found_on_its_own(property_id: str) -> None:
    # Every other known finding stays known, so the one raised is this property;
    # the day vLLM-Omni fixes it, the search finds nothing (or a conformance
    # mismatch) and this test turns red. No shrinking: it costs minutes here and
    # the first trace is enough to know the property.
    known = {k: v for k, v in KNOWN_0_30_0.items() if k != property_id}
    finding, examples, _ = first_finding(
        MODEL, OmniChunkTransferAdapterBinding, max_examples=FUZZ_EXAMPLES, seed=0, known=known
    )
    assert finding is not None, f"no longer violates {property_id} ({examples} ex.)"
    assert finding.property_id == property_id, str(finding)
    raise finding


# -- (c) mutation check ----------------------------------------------------------------


@pytest.mark.parametrize("mutant", MUTANTS, ids=[m.name for m in MUTANTS])
def test_a_reintroduced_bug_is_found(mutant: Mutant, monkeypatch: pytest.MonkeyPatch) -> None:
    for name, replacement in mutant.patches(REAL.adapter).items():
        monkeypatch.setattr(REAL.adapter, name, replacement)
    finding, examples, seconds = first_finding(
        MODEL, OmniChunkTransferAdapterBinding, max_examples=MUTANT_EXAMPLES, seed=0
    )
    assert finding is not None, f"{mutant.name} ({mutant.doc}) survived {examples} examples"
    print(
        f"\n{mutant.name}: {finding.kind} {finding.property_id} after {examples} examples, "
        f"{seconds:.1f}s ({len(finding.trace.steps) - 1} steps, unshrunk)"
    )


def test_a_mutant_finding_shrinks_to_the_issue_trace(monkeypatch: pytest.MonkeyPatch) -> None:
    # The full fuzz() run, shrinking included, on the #6670 mutant: the
    # shortest trace is the issue's - a terminal queued, then cleanup.
    (mutant,) = [m for m in MUTANTS if m.name == "cleanup_drops_queued_terminal"]
    for name, replacement in mutant.patches(REAL.adapter).items():
        monkeypatch.setattr(REAL.adapter, name, replacement)
    report = fuzz(MODEL, OmniChunkTransferAdapterBinding, max_examples=MUTANT_EXAMPLES, seed=0)
    assert report.finding is not None
    actions = [str(step.action) for step in report.finding.trace.steps[1:]]
    assert actions == ["new_request(ext=ext0)", "save_terminal(ext=ext0)", "abort(ext=ext0)"]


# -- (d) the real SharedMemoryConnector: cleanup tasks, num_puts, terminal_sent --------


@pytest.fixture
def shm() -> Iterator[Lockstep]:
    lockstep = Lockstep(binding=SharedMemoryBinding)
    yield lockstep
    lockstep.close()


def segments(run: Lockstep) -> list[bool]:
    """Whether each successful put's shared-memory segment exists, in put order."""
    binding = run.binding
    assert isinstance(binding, SharedMemoryBinding)
    return [segment_exists(put.key) for put in binding.puts]


def sent_chunk(run: Lockstep, ext: Hashable = EXT0, outcome: str = "ok") -> Lockstep:
    """Save a chunk and run it through the processor and the connector."""
    run.do("save_chunk", ext=ext).do("begin").do("process", outcome="payload")
    return run.do("put", outcome=outcome).do("finish")


def test_shm_an_abort_unlinks_the_retired_generations_unread_segments(shm: Lockstep) -> None:
    sent_chunk(shm.do("new_request", ext=EXT0))
    sent_chunk(shm)
    stage = shm.binding.stage
    assert [entry.key for entry in shm.sent] == [f"ext0_{stage}_0", f"ext0_{stage}_1"]
    shm.do("receive")  # the consumer reads (and unlinks) the first one
    assert segments(shm) == [False, True]
    shm.do("abort", ext=EXT0)  # cleanup_sender queues the cleanup task; the save thread runs it
    assert segments(shm) == [False, False]
    assert shm.binding.adapter._pending_save_reqs == deque()


def test_shm_a_put_in_flight_at_the_abort_is_unlinked_by_its_finally(shm: Lockstep) -> None:
    # num_puts counts the key of the put in flight (CTA:831-834): the abort
    # defers to the send's finally, which queues the cleanup of that key too.
    shm.do("new_request", ext=EXT0).do("save_chunk", ext=EXT0).do("begin")
    shm.do("process", outcome="payload").do("abort", ext=EXT0).do("put", outcome="ok")
    assert segments(shm) == [True]  # "Ignoring completed put for retired request"
    shm.do("finish")
    assert segments(shm) == [False]


def test_shm_a_successful_terminal_keeps_every_segment_for_the_consumer(shm: Lockstep) -> None:
    sent_chunk(shm.do("new_request", ext=EXT0))
    shm.do("save_terminal", ext=EXT0).do("begin").do("process", outcome="payload")
    shm.do("put", outcome="ok").do("finish")
    assert shm.seen["senders"] == () and segments(shm) == [True, True]  # terminal_sent
    shm.do("receive").do("receive")
    assert segments(shm) == [False, False]


def test_shm_a_failed_terminal_then_an_abort_unlinks_the_chunks(shm: Lockstep) -> None:
    sent_chunk(shm.do("new_request", ext=EXT0))
    shm.do("save_terminal", ext=EXT0).do("begin").do("process", outcome="payload")
    shm.do("put", outcome="false").do("finish")
    assert segments(shm) == [True]  # the generation is held (the known no_sender_leak)
    shm.do("abort", ext=EXT0)
    assert segments(shm) == [False]


def test_shm_a_reused_id_overwrites_the_old_requests_unread_segment(shm: Lockstep) -> None:
    # 0.30.0's no_unread_overwrite, in lockstep with the model: after a
    # successful terminal the sender state is cleared (put_req_chunk popped), so
    # the next request of the id starts again at key 0, while the old request's
    # chunk under that key is still unread. The put replaces it (shm_write_bytes
    # unlinks an existing name): the consumer of ext0 would read r2's chunk.
    sent_chunk(shm.do("new_request", ext=EXT0))
    shm.do("save_terminal", ext=EXT0).do("begin").do("process", outcome="payload")
    shm.do("put", outcome="ok").do("finish")
    assert shm.holds("no_unread_overwrite")
    sent_chunk(shm.do("new_request", ext=EXT0))
    keys = [entry.key for entry in shm.sent]
    assert keys[0] == keys[2] and [entry.request for entry in shm.sent] == [R1, R1, R2]
    assert not shm.holds("no_unread_overwrite")
    # key 0 holds r2's chunk now; key 1 still r1's terminal
    assert sorted(shm.seen["segments"]) == [(keys[0], R2), (keys[1], R1)]
    payload, _ = shm.binding.connector.get("0", "1", keys[0])
    assert payload["request_id"] == R2


# -- (e) single-point mutants of the adapter: SHM cleanup, side tables, processor inputs


SOURCE_MUTANTS: tuple[tuple[str, str, str], ...] = (
    # the SHM cleanup task: only the real SharedMemoryConnector reaches it
    ("shm", "_queue_shm_cleanup_locked", "drop-not {}: and not sender_token.terminal_sent"),
    ("shm", "_queue_shm_cleanup_locked", "swap-and-or {}: isinstance(self.connector, Sh"),
    ("shm", "_queue_shm_cleanup_locked", "delete-statement {}: self._pending_save_reqs.append("),
    ("shm", "_send_single_request", 'delete-statement {}: self.connector.cleanup(f"{key_prefix}'),
    ("shm", "_send_single_request", "delete-statement {}: self._queue_shm_cleanup_locked("),
    ("shm", "_send_single_request_for_generation", "one-to-zero {}: sender_token.num_puts = "),
    ("shm", "_send_single_request_for_generation", "swap-and-or {}: if success and is_finished:"),
    (
        "shm",
        "_send_single_request_for_generation",
        "delete-statement {}: sender_token.terminal_s",
    ),
    # connector keys: a generation's successful puts take chunks 0, 1, ...
    ("fifo", "_send_single_request_for_generation", "one-to-zero {}: self.put_req_chunk["),
    ("fifo", "_send_single_request_for_generation", "swap-and-or {}: retiring_without_terminal"),
    # the argument shapes real callers pass finish_requests: a bare id, a list, None
    ("fifo", "finish_requests", "delete-statement {}: request_ids = (request_ids,)"),
    ("fifo", "finish_requests", "swap-is {}: elif request_ids is not None:"),
    ("fifo", "finish_requests", "delete-statement {}: request_ids = requests.keys()"),
    # per-model side tables cleared with the sender state
    (
        "fifo",
        "_clear_sender_state_locked",
        'delete-statement {}: getattr(self, "_qwen3_tts',
    ),
    ("fifo", "_clear_sender_state_locked", "delete-statement {}: self._adaptive_states.pop("),
    ("fifo", "_clear_sender_state_locked", "delete-statement {}: self._pending_streaming_prefills"),
    ("fifo", "_clear_sender_state_locked", "delete-statement {}: cached_ic.pop("),
    ("fifo", "_clear_sender_state_locked", "delete-statement {}: self.put_req_chunk.pop("),
    ("fifo", "_clear_sender_state_locked", "delete-statement {}: self.code_prompt_token_ids"),
    # the processor's inputs: the flush signal, new_token_ids, a processor-set meta.finished
    ("fifo", "_send_single_request_for_generation", 'swap-and-or {}: "is_finished": is_segment_'),
    ("fifo", "_send_single_request_for_generation", 'delete-statement {}: processor_kwargs["new_'),
    ("fifo", "_send_single_request_for_generation", "drop-not {}: if not processor_controls_codec"),
    ("fifo", "_accepts_new_token_ids", 'swap-and-or {}: parameter.name == "new_token_ids" or'),
    ("shm", "_accepts_new_token_ids", 'swap-comparison {}: parameter.name == "new_token_ids" or'),
)
"""(binding, function, mutant id prefix with ``{}`` for ``OmniChunkTransferAdapter.<function>``):
single-point mutants (`statecore.fuzzing.source_mutants`) of the parts of the adapter only
the SHM binding, the side-table and the processor-input observations reach."""

BINDINGS: dict[str, type[OmniChunkTransferAdapterBinding]] = {
    "fifo": OmniChunkTransferAdapterBinding,
    "shm": SharedMemoryBinding,
}


def source_mutant_id(function: str, prefix: str) -> str:
    """The one mutant of `function` whose id starts with `prefix`."""
    (found,) = [
        m.id
        for m in source_mutants(CTA_FILE, [f"OmniChunkTransferAdapter.{function}"])
        if m.id.startswith(prefix.replace("{}", f"OmniChunkTransferAdapter.{function}"))
    ]
    return found


@pytest.mark.parametrize(
    ("binding", "function", "prefix"),
    SOURCE_MUTANTS,
    ids=[f"{b}-{p.split(':')[0].split()[0]}-{f}-{i}" for i, (b, f, p) in enumerate(SOURCE_MUTANTS)],
)
def test_a_single_point_mutant_is_found(
    binding: str, function: str, prefix: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    mutant_id = source_mutant_id(function, prefix)
    for name, replacement in source_mutant(REAL.adapter, function, mutant_id).items():
        monkeypatch.setattr(REAL.adapter, name, replacement)
    # The guided phase first: a cleanup with an unread put left is a model state
    # it walks to, where a random search takes hundreds of examples to meet it.
    report = fuzz(MODEL, BINDINGS[binding], max_examples=MUTANT_EXAMPLES, seed=0)
    finding = report.finding
    assert finding is not None, f"{mutant_id} survived {report.examples} examples ({binding})"
    steps = len(finding.trace.steps) - 1
    print(f"\n{mutant_id}: {finding.kind} {finding.property_id}, {steps} steps shrunk")


def test_fuzzing_on_shared_memory_finds_only_known_findings() -> None:
    report = fuzz(MODEL, SharedMemoryBinding, max_examples=FUZZ_EXAMPLES, seed=0)
    print(f"\nvllm-omni-shm: {report.examples} examples, {report.steps} steps")
    if report.finding is not None:
        pytest.fail(f"{report.finding}\n{report.finding.trace}")
    assert set(report.known) <= set(KNOWN_0_30_0)
    ours = os.getpid() % 1_000_000  # this process's stage ids (new_stage); others may run
    leftovers = [
        name
        for name in os.listdir(SHM_DIR)
        if name.startswith("ext") and int(name.split("_")[1]) // 1000 == ours
    ]
    assert leftovers == [], "teardown leaves no segment behind"


def test_the_key_overwrite_is_found_on_shared_memory_when_not_known() -> None:
    # What `statecore fuzz chunk_transfer --adapter vllm-omni-shm --no-known`
    # reports once the findings before it are fixed: every other known finding
    # stays known, so the one raised is no_unread_overwrite.
    known = {k: v for k, v in KNOWN_0_30_0.items() if k != "no_unread_overwrite"}
    finding, examples, _ = first_finding(
        MODEL, SharedMemoryBinding, max_examples=FUZZ_EXAMPLES, seed=0, known=known
    )
    assert finding is not None, f"no_unread_overwrite not found ({examples} examples)"
    assert finding.property_id == "no_unread_overwrite", str(finding)


def test_a_cleanup_that_queues_no_shm_task_is_found_in_lockstep(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # cleanup_sender's own call of _queue_shm_cleanup_locked (an abort with the
    # save thread idle, no terminal queued and a put unread) is a state the
    # 300-example search of seed 0 does not meet (a 20 s `statecore fuzz
    # chunk_transfer --adapter vllm-omni-shm` does): shown directly.
    prefix = "delete-statement {}: self._queue_shm_cleanup_locked("
    mutant_id = source_mutant_id("cleanup_sender", prefix)
    for name, replacement in source_mutant(REAL.adapter, "cleanup_sender", mutant_id).items():
        monkeypatch.setattr(REAL.adapter, name, replacement)
    run = Lockstep(binding=SharedMemoryBinding)
    try:
        sent_chunk(run.do("new_request", ext=EXT0))
        with pytest.raises(AssertionError, match="implementation"):
            run.do("abort", ext=EXT0)  # the segment stays: the model has it gone
        assert segments(run) == [True] and run.seen["senders"] == ()
    finally:
        run.close()
