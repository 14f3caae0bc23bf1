"""The receiving side of the real vLLM-Omni 0.30.0 adapter against `receiver_system`.

Needs the real stack (``tox -e vllm``); skipped without it.

(a) a directed scenario: ``cleanup_receiver`` while ``connector.get`` is in
    flight drops the late chunk (the commit barrier, CTA:528-533), in lockstep;
(b) fuzzing: no finding and every transition of both machines taken;
(c) mutation check: the commit barrier removed (the ``receiver_no_recheck``
    variant's bug, patched into the real class) is found.
"""

from __future__ import annotations

from collections.abc import Hashable, Iterator
from typing import Any

import pytest
from statecore.models.bindings.vllm_omni_checked import CheckedReceiverBinding
from statecore.models.bindings.vllm_omni_receiver import (
    GenerationReceiverBinding,
    ReceiverBinding,
)
from statecore.models.receiver import RECEIVER_SYSTEM, REQ

from statecore.fuzzing.fuzz import fuzz
from statecore.system import ActionLabel, SystemState

pytest.importorskip("vllm_omni")

from statecore.models.bindings.vllm_omni import real_classes

REAL = real_classes()
(R,) = REQ.values
FUZZ_EXAMPLES = 300


class Lockstep:
    def __init__(self) -> None:
        self.binding = ReceiverBinding()
        self.binding.setup(RECEIVER_SYSTEM)
        self.state: SystemState = RECEIVER_SYSTEM.init_states()[0]

    def do(self, name: str, **args: Hashable) -> Lockstep:
        step = RECEIVER_SYSTEM.next_step(self.state, ActionLabel(name, tuple(args.items())))
        self.binding.apply(step, self.state)
        self.state = step.state
        observed = self.binding.observe()
        assert observed == self.binding.expect(RECEIVER_SYSTEM.view(self.state))
        return self


@pytest.fixture
def run() -> Iterator[Lockstep]:
    lockstep = Lockstep()
    yield lockstep
    lockstep.binding.teardown()


def test_a_cleanup_during_get_drops_the_late_chunk(run: Lockstep) -> None:
    run.do("put", req=R).do("load_async", req=R).do("get_start", req=R)
    assert run.binding.baton.parked_at == "get"
    run.do("cleanup", req=R).do("get_return_stale")
    adapter = run.binding.adapter
    assert "req0" not in adapter.get_req_chunk  # not recreated by the late chunk
    assert "req0" not in adapter._finished_load_reqs
    run.do("new_request", req=R).do("put", req=R).do("load_async", req=R)
    run.do("get_start", req=R).do("get_return")
    assert adapter.get_req_chunk["req0"] == 1  # the new incarnation read its own chunk 0


@pytest.mark.parametrize(
    "binding", [ReceiverBinding, GenerationReceiverBinding, CheckedReceiverBinding]
)
def test_fuzzing_finds_nothing_and_takes_every_transition(binding: type[ReceiverBinding]) -> None:
    report = fuzz(RECEIVER_SYSTEM, binding, max_examples=FUZZ_EXAMPLES, seed=0)
    assert report.finding is None, f"{report.finding}\n{report.finding.trace}"
    never = [(comp, names) for comp, _, _, _, names in report.coverage() if names]
    assert never == [], f"model transitions never taken: {never}"


def _poll_without_recheck(self: Any, entry: Any) -> bool:
    """CTA:494-544 with the identity re-check before the commit (CTA:532-533) removed."""
    request = entry.request
    stage_id = self.connector.stage_id
    req_id = request.request_id
    with self._receiver_state_lock:
        if self._registered_load_entries.get(req_id) is not entry:
            return True
        self.request_ids_mapping[req_id] = entry.external_req_id
        chunk_id = self.get_req_chunk[req_id]
    key = f"{entry.external_req_id}_{stage_id - 1}_{chunk_id}"
    result = self.connector.get(str(stage_id - 1), str(stage_id), key, entry.source_metadata)
    if result is None:
        with self._receiver_state_lock:
            return self._registered_load_entries.get(req_id) is not entry
    with self._receiver_state_lock:
        committed: bool = self._commit_received_chunk(
            request, result, stage_id=stage_id, req_id=req_id, chunk_id=chunk_id,
            connector_get_key=key,
        )  # fmt: skip
        if committed:
            self._registered_load_entries.pop(req_id, None)
        return committed


def test_the_commit_barrier_removed_is_found(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(REAL.adapter, "_poll_single_request", _poll_without_recheck)
    report = fuzz(RECEIVER_SYSTEM, ReceiverBinding, max_examples=FUZZ_EXAMPLES, seed=0)
    assert report.finding is not None, f"survived {report.examples} examples"
