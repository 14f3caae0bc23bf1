"""The ``vllm-omni-checked`` adapter: the reference chunk_transfer model bound to
`CheckedChunkTransferAdapter`.

The same binding as ``vllm-omni`` (`statecore.models.bindings.vllm_omni`:
the same fake connector, processor, parks and observation), with two
changes:

* the adapter under test is
  `statecore.models.implementations.checked_chunk_transfer.checked_adapter_class`
  over the real 0.30.0 class, and it must conform to the *reference*
  ``chunk_transfer`` model (`fuzz_system_reference`), not to 0.30.0 as
  released, with one exception: its connector keys are 0.30.0's (`KNOWN`);
* the scheduler's sweep of send failures (the model's ``collect_failures``)
  is `fail_failed_chunk_sends`, the reference sweep the checked adapter
  ships with, on a stand-in scheduler whose ``finish_requests`` calls the
  adapter's and then sets the status, as vLLM's scheduler does.

The observation needs no change: the checked adapter's sender tokens,
watermarks and ``request_payload`` read like 0.30.0's.

`CheckedSegmentsBinding` binds it to the reference ``segments`` model
(`fuzz_system_segments`) with nothing known: a parked session ended while its
segment end is queued still sends that segment end.
"""

from __future__ import annotations

from collections.abc import Hashable, Mapping
from types import SimpleNamespace
from typing import Any

from statecore.system import System, SystemStep

from .. import segment
from ..chunk_transfer import build
from ..chunk_transfer_records import ChunkTransferConfig
from ..implementations.checked_chunk_transfer import (
    checked_adapter_class,
    fail_failed_chunk_sends,
)
from ..segment_actions import ACTIVE, RETIRED
from .vllm_omni import FUZZ_BOUNDS, OmniChunkTransferAdapterBinding
from .vllm_omni_harness import make_adapter
from .vllm_omni_receiver import STAGE, ReceiverBinding
from .vllm_omni_segments import SegmentsBinding

__all__ = [
    "KNOWN",
    "CheckedChunkTransferAdapterBinding",
    "CheckedReceiverBinding",
    "CheckedSegmentsBinding",
    "fuzz_system_reference",
    "fuzz_system_segments",
]


KNOWN: Mapping[str, str] = {
    "no_unread_overwrite": (
        "the checked adapter keeps 0.30.0's connector keys, '{ext}_{stage}_{chunk}' from "
        "chunk 0 for each request (CTA:778): the reference's keys also name the request "
        "instance, which the receiving stage's keys (CTA:505) must then name too, and the "
        "two stages' requests share no per-instance value to name it by (the orchestrator "
        "gives the next stage's request the user-facing id only); docs/vllm-omni.md says why"
    ),
}
"""The one reference behaviour the checked adapter leaves out, with the reason."""


def fuzz_system_reference() -> System:
    """The reference chunk_transfer model at the bounds the real adapter is fuzzed at,
    with 0.30.0's connector keys (`KNOWN`)."""
    return build(ChunkTransferConfig(name="chunk_transfer", keys_per_instance=False, **FUZZ_BOUNDS))


class CheckedChunkTransferAdapterBinding(OmniChunkTransferAdapterBinding):
    """The chunk_transfer reference model's actions performed on the checked adapter."""

    name = "vllm-omni-checked"
    known: Mapping[str, str] = KNOWN

    def make_adapter(self) -> Any:
        return make_adapter(self.connector, base=checked_adapter_class(self.classes.adapter))

    def _do_collect_failures(self, step: SystemStep) -> None:
        status = self.classes.status

        def finish_requests(request_id: str, finished_status: Any) -> None:
            request = self.by_id[request_id]
            self.adapter.finish_requests(request_id, finished_status, {request_id: request})
            request.status = finished_status

        scheduler = SimpleNamespace(
            chunk_transfer_adapter=self.adapter,
            requests={
                r.request_id: r for r in self.by_id.values() if r.status != status.FINISHED_ERROR
            },
            finish_requests=finish_requests,
        )
        fail_failed_chunk_sends(scheduler)


def fuzz_system_segments() -> System:
    """The reference ``segments`` model: a retired generation still sends what was
    queued before its terminal (no known finding)."""
    return segment.build()


class CheckedSegmentsBinding(SegmentsBinding):
    """The reference segments model's actions performed on the checked adapter.

    The one change to the observation: the id's generation reads as retired
    once no save joins it (`SenderGeneration.retired`), which after a graceful
    finish with the terminal queued is before the machine's ``cleanup`` (the
    terminal's ``finally`` fires it).
    """

    name = "vllm-omni-checked-segments"
    known: Mapping[str, str] = {}

    def make_adapter(self) -> Any:
        return make_adapter(self.connector, base=checked_adapter_class(self.classes.adapter))

    def observe(self) -> Hashable:
        observed = super().observe()
        assert isinstance(observed, tuple)
        ext = None if self.request is None else self.request.external_req_id
        token = self.adapter._sender_tokens.get(ext)
        sender = None if token is None else RETIRED if token.retired else ACTIVE
        return tuple(("sender", sender) if item[0] == "sender" else item for item in observed)


class CheckedReceiverBinding(ReceiverBinding):
    """The receiver_system model's actions performed on the checked adapter's receiving side."""

    name = "vllm-omni-checked-receiver"

    def make_adapter(self) -> Any:
        checked = checked_adapter_class(self.classes.adapter)
        return make_adapter(
            self.connector, stage_id=STAGE, role="receiver", base=checked, worker_type="ar"
        )
