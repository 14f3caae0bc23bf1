"""The vLLM-Omni lifecycle machines and composed systems (`statecore.models`).

`TARGETS` lists what ``statecore check`` and ``statecore list`` know by name:
the reference models, which must hold, and variants that reproduce bugs
vLLM-Omni really had, each expected to violate named properties. Each model
module declares its own ``TARGETS``; this package only gathers them.
"""

from __future__ import annotations

import importlib

from statecore.adapter import AdapterSpec
from statecore.registry import Target

MODEL_MODULES: tuple[str, ...] = (
    "chunk_transfer",
    "request_state",
    "stream_edge",
    "request_lifecycle",
    "segment",
    "receiver",
    "stage_pair",
)

ADAPTERS: tuple[AdapterSpec, ...] = (
    AdapterSpec(
        name="vllm-omni",
        target="chunk_transfer",
        factory="statecore.models.bindings.vllm_omni:OmniChunkTransferAdapterBinding",
        system="statecore.models.bindings.vllm_omni:fuzz_system_0_30_0",
        install="pip install 'statecore[vllm]' && bash scripts/install-vllm-stack.sh "
        "(or: tox -e vllm)",
        doc="the real OmniChunkTransferAdapter of vllm-omni 0.30.0",
    ),
    AdapterSpec(
        name="vllm-omni-shm",
        target="chunk_transfer",
        factory="statecore.models.bindings.vllm_omni_shm:SharedMemoryBinding",
        system="statecore.models.bindings.vllm_omni:fuzz_system_0_30_0",
        install="pip install 'statecore[vllm]' && bash scripts/install-vllm-stack.sh "
        "(or: tox -e vllm)",
        doc="the real OmniChunkTransferAdapter of vllm-omni 0.30.0 on its real "
        "SharedMemoryConnector (SHM cleanup tasks on the save thread, num_puts, terminal_sent)",
    ),
    AdapterSpec(
        name="vllm-omni-checked",
        target="chunk_transfer",
        factory="statecore.models.bindings.vllm_omni_checked:CheckedChunkTransferAdapterBinding",
        system="statecore.models.bindings.vllm_omni_checked:fuzz_system_reference",
        install="pip install 'statecore[vllm]' && bash scripts/install-vllm-stack.sh "
        "(or: tox -e vllm)",
        doc="CheckedChunkTransferAdapter (statecore.models.implementations."
        "checked_chunk_transfer): vllm-omni 0.30.0's adapter with the checked sender "
        "machines, against the reference model",
    ),
    AdapterSpec(
        name="vllm-omni-segments",
        target="segments",
        factory="statecore.models.bindings.vllm_omni_segments:SegmentsBinding",
        system="statecore.models.bindings.vllm_omni_segments:fuzz_system",
        install="pip install 'statecore[vllm]' && bash scripts/install-vllm-stack.sh "
        "(or: tox -e vllm)",
        doc="the real OmniChunkTransferAdapter of vllm-omni 0.30.0 through one resumable "
        "realtime request (save_async's segment and token watermarks)",
    ),
    AdapterSpec(
        name="vllm-omni-receiver",
        target="receiver_system",
        factory="statecore.models.bindings.vllm_omni_receiver:ReceiverBinding",
        install="pip install 'statecore[vllm]' && bash scripts/install-vllm-stack.sh "
        "(or: tox -e vllm)",
        doc="the receiving side of vllm-omni 0.30.0's OmniChunkTransferAdapter "
        "(load_async, _poll_single_request, cleanup_receiver)",
    ),
    AdapterSpec(
        name="vllm-omni-receiver-generation",
        target="receiver_system",
        factory="statecore.models.bindings.vllm_omni_receiver:GenerationReceiverBinding",
        install="pip install 'statecore[vllm]' && bash scripts/install-vllm-stack.sh "
        "(or: tox -e vllm)",
        doc="the receiving side of vllm-omni 0.30.0's OmniChunkTransferAdapter for a "
        "generation-mode stage (codec frames become the prompt)",
    ),
    AdapterSpec(
        name="vllm-omni-checked-receiver",
        target="receiver_system",
        factory="statecore.models.bindings.vllm_omni_checked:CheckedReceiverBinding",
        install="pip install 'statecore[vllm]' && bash scripts/install-vllm-stack.sh "
        "(or: tox -e vllm)",
        doc="CheckedChunkTransferAdapter's receiving side (0.30.0's, unchanged)",
    ),
    AdapterSpec(
        name="vllm-omni-checked-segments",
        target="segments",
        factory="statecore.models.bindings.vllm_omni_checked:CheckedSegmentsBinding",
        system="statecore.models.bindings.vllm_omni_checked:fuzz_system_segments",
        install="pip install 'statecore[vllm]' && bash scripts/install-vllm-stack.sh "
        "(or: tox -e vllm)",
        doc="CheckedChunkTransferAdapter through one resumable realtime request",
    ),
    AdapterSpec(
        name="vllm-omni-stage-pair",
        target="stage_pair",
        factory="statecore.models.bindings.vllm_omni_stage_pair:StagePairBinding",
        system="statecore.models.bindings.vllm_omni_stage_pair:fuzz_system_0_30_0",
        install="pip install 'statecore[vllm]' && bash scripts/install-vllm-stack.sh "
        "(or: tox -e vllm)",
        doc="two real OmniChunkTransferAdapters of vllm-omni 0.30.0 (stage N sender, stage "
        "N+1 receiver) over one real SharedMemoryConnector",
    ),
    AdapterSpec(
        name="request-state-accessor",
        target="request_state_system",
        factory="statecore.models.bindings.request_state:AccessorBinding",
        doc="the reference RequestStateAccessor (statecore.models.implementations.request_state)",
    ),
    AdapterSpec(
        name="stream-edge-recorder",
        target="stream_edge",
        factory="statecore.models.bindings.stream_edge:StreamEdgeRecorderBinding",
        doc="the reference StreamEdgeRecorder (statecore.models.implementations.stream_edge)",
    ),
    AdapterSpec(
        name="stream-edge-recorder-lifecycle",
        target="request_lifecycle",
        factory="statecore.models.bindings.stream_edge:StreamEdgeLifecycleBinding",
        doc="request_states with StreamEdgeRecorder and drop_request_state "
        "(statecore.models.implementations.stream_edge) on both removal paths",
    ),
)


PAGES: tuple[tuple[str, str], ...] = (
    ("checked-adapter.md", "statecore.models.implementations.checked_map:page"),
)
"""Generated pages besides the model pages: (path under docs/, ``module:function``)."""


def _gather() -> tuple[Target, ...]:
    found: list[Target] = []
    for name in MODEL_MODULES:
        found.extend(importlib.import_module(f"{__name__}.{name}").TARGETS)
    return tuple(found)


TARGETS: tuple[Target, ...] = _gather()
