"""Two real vLLM-Omni 0.30.0 adapters over one shared-memory connector against `stage_pair`.

Needs the real stack (``tox -e vllm``); skipped without it.

(a) directed scenarios in lockstep: a request delivered end to end through
    ``/dev/shm`` and its id reused; 0.30.0's known findings on the real code
    (an aborted request's late put committed by the reused id's receiver; a
    failed terminal leaving stage N+1 to its deadline); the SHM cleanup task
    of an aborted generation unlinking its keys;
(b) a short fuzz: only the known 0.30.0 findings, every one of them reported;
(c) single-point mutants of the real adapter patched in (nothing written to
    disk), each of them the real-code twin of a model variant: each is found.
"""

from __future__ import annotations

import os
from collections.abc import Iterator

import pytest
from statecore.models.stage_pair_records import EXT

from statecore.fuzzing.fuzz import fuzz
from statecore.system import ActionLabel, SystemState

pytest.importorskip("vllm_omni")

from statecore.models.bindings.vllm_omni import real_classes
from statecore.models.bindings.vllm_omni_mutants import source_mutant, source_mutant_id
from statecore.models.bindings.vllm_omni_stage_pair import (
    KNOWN_0_30_0,
    StagePairBinding,
    fuzz_system_0_30_0,
)

REAL = real_classes()
SYSTEM = fuzz_system_0_30_0()
(E,) = EXT.values
FUZZ_EXAMPLES = 300
MUTANT_EXAMPLES = 300


class Lockstep:
    """The model and the binding stepped together, compared after every step."""

    def __init__(self) -> None:
        self.binding = StagePairBinding()
        self.binding.setup(SYSTEM)
        self.state: SystemState = SYSTEM.init_states()[0]

    def do(self, *actions: str) -> Lockstep:
        for text in actions:
            name, _, outcome = text.partition(":")
            if outcome:
                args: tuple[tuple[str, object], ...] = (("outcome", outcome),)
            elif name in {"collect_failures", "begin", "run_cleanup"}:
                args = ()
            else:
                args = (("ext", E),)
            step = SYSTEM.next_step(self.state, ActionLabel(name, args))  # type: ignore[arg-type]
            self.binding.apply(step, self.state)
            self.state = step.state
            assert self.binding.observe() == self.binding.expect(SYSTEM.view(self.state)), text
        return self

    @property
    def g(self) -> object:
        return SYSTEM.view(self.state).g

    def segment(self, chunk: int) -> bool:
        return os.path.exists(f"/dev/shm/{E}_{self.binding.stage}_{chunk}")


@pytest.fixture
def pair() -> Iterator[Lockstep]:
    run = Lockstep()
    try:
        yield run
    finally:
        run.binding.teardown()


# -- (a) directed scenarios ------------------------------------------------------------------


def test_a_request_is_delivered_end_to_end_and_its_id_reused(pair: Lockstep) -> None:
    pair.do("new_request", "save_chunk", "begin", "put:ok")
    assert pair.segment(0)
    pair.do("poll")  # stage N+1 reads key 0 and unlinks it
    assert not pair.segment(0)
    pair.do("save_terminal", "begin", "put:ok", "poll")
    assert pair.binding.committed == [("ext0-r1", False), ("ext0-r1", True)]
    assert pair.binding.sender._sender_tokens == {}  # the terminal reclaimed the generation
    pair.do("finish_downstream", "new_request", "save_chunk", "begin", "put:ok", "poll")
    assert pair.binding.committed[-1] == ("ext0-r2", False)


def test_0_30_0_commits_an_aborted_requests_late_put_into_the_reused_id(pair: Lockstep) -> None:
    # The chunk is inside connector.put when the client aborts; the id is
    # reused; the put lands under key 0, which the new receiver polls first.
    pair.do("new_request", "save_chunk", "begin", "abort", "new_request", "put:ok")
    assert pair.segment(0)
    pair.do("poll")
    assert pair.binding.committed == [("ext0-r1", False)]  # stage N+1's ext0-d2 took it
    assert pair.g.crossed  # type: ignore[attr-defined]


def test_0_30_0_leaves_the_receiver_to_its_deadline_after_a_failed_terminal(
    pair: Lockstep,
) -> None:
    pair.do("new_request", "save_terminal", "begin", "put:false", "collect_failures", "poll")
    assert pair.binding.sender._send_failures == {}  # swept, and only logged
    pair.do("deadline")
    assert pair.g.timed_out == {1}  # type: ignore[attr-defined]


def test_0_30_0_a_reused_id_puts_past_the_key_its_receiver_polls(pair: Lockstep) -> None:
    pair.do("new_request", "save_chunk", "begin", "put:ok", "poll")  # key 0, read
    pair.do("save_terminal", "begin", "put:false", "collect_failures", "poll", "deadline")
    pair.do("new_request", "save_chunk", "save_terminal", "begin", "put:ok", "poll")
    # The chunk was skipped as a replay (the old watermark), the terminal joined the
    # old generation and went out under key 1; the receiver polls key 0.
    assert [k for k in range(3) if pair.segment(k)] == [1]
    assert pair.binding.receiver.get_req_chunk.get("ext0-d2", 0) == 0
    assert pair.g.owed == {(2, 0)}  # type: ignore[attr-defined]


def test_an_aborted_generations_keys_are_unlinked_by_the_save_thread(pair: Lockstep) -> None:
    pair.do("new_request", "save_chunk", "begin", "put:ok", "abort")
    assert pair.segment(0)  # the cleanup task is queued, not run
    pair.do("run_cleanup")
    assert not pair.segment(0)


# -- (b) a short fuzz ----------------------------------------------------------------------------


def test_fuzzing_finds_only_the_known_findings_and_all_of_them() -> None:
    report = fuzz(SYSTEM, StagePairBinding, max_examples=FUZZ_EXAMPLES, seed=0)
    assert report.finding is None, report.finding
    assert set(report.known) == set(KNOWN_0_30_0)


# -- (c) single-point mutants of the real code ---------------------------------------------------

SOURCE_MUTANTS: tuple[tuple[str, str], ...] = (
    # the stage_pair_terminal_keys_unlinked variant: a reclaim unlinks a put terminal's keys
    ("_queue_shm_cleanup_locked", "drop-not {}: and not sender_token.terminal_sent"),
    # the stage_pair_key_counter_kept variant: a reclaim keeps put_req_chunk
    ("_clear_sender_state_locked", "delete-statement {}: self.put_req_chunk.pop(external_req_id"),
    # the stage_pair_key_not_advanced variant: a successful put keeps put_req_chunk
    (
        "_send_single_request_for_generation",
        "delete-statement {}: self.put_req_chunk[external_req_id] += 1",
    ),
)


@pytest.mark.parametrize(("function", "prefix"), SOURCE_MUTANTS, ids=[m[1] for m in SOURCE_MUTANTS])
def test_a_single_point_mutant_is_found(
    function: str, prefix: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    mutant_id = source_mutant_id(REAL.adapter, function, prefix)
    for name, replacement in source_mutant(REAL.adapter, function, mutant_id).items():
        monkeypatch.setattr(REAL.adapter, name, replacement)
    report = fuzz(SYSTEM, StagePairBinding, max_examples=MUTANT_EXAMPLES, seed=0)
    assert report.finding is not None, f"{mutant_id} survived {report.examples} examples"
    assert report.finding.kind == "conformance", report.finding
