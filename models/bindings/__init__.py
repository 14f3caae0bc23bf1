"""Adapter bindings: real code driven in lockstep with a model by the fuzzer.

`vllm_omni` binds vLLM-Omni 0.30.0's ``OmniChunkTransferAdapter`` (with its
harness, its processor, its scheduler side, its known findings and the
re-introduced bugs of the mutation benchmark)
to ``chunk_transfer``, and `vllm_omni_shm` does the same on its real
``SharedMemoryConnector``; `vllm_omni_segments` and `vllm_omni_receiver` bind
it to ``segments`` and ``receiver_system``; `vllm_omni_stage_pair` binds two of
them, stage N's sender and stage N+1's receiver over one shared-memory
connector, to ``stage_pair``; `request_state` and `stream_edge`
bind the reference implementations of `statecore.models.implementations`.
"""
