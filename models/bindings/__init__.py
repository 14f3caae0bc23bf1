"""Adapter bindings: real code driven in lockstep with a model by the fuzzer.

`vllm_omni` binds vLLM-Omni 0.30.0's ``OmniChunkTransferAdapter`` (with its
harness and the re-introduced bugs of the mutation benchmark) to
``chunk_transfer``; `request_state` and `stream_edge` bind the reference
implementations of `statecore.models.implementations`.
"""
