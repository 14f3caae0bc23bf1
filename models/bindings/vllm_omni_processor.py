"""The processor the ``vllm-omni`` bindings install in the real adapter, and what it checks.

`ProcessorPart` is the part of `OmniChunkTransferAdapterBinding` that plays the
model's producer (``custom_process_next_stage_input_func``): it parks the save
thread (``"processor"``), keeps request-wide state in ``request_payload[ext]``
as the bundled processors do, writes the per-model side tables, and answers
with a payload, None, or an exception, as the model's ``process`` chose. What
it records is compared after every step:

* ``processor_call``: the arguments it parked with. ``is_finished`` must be the
  flush signal (a segment end or the terminal, CTA:786-798) and
  ``new_token_ids`` what the save passed (`step_tokens`); a processor that
  does not declare ``new_token_ids`` (`takes_step_tokens` False) must not get
  them (CTA:343-359).
* ``side_tables``: the processor writes ext's entry of each of
  `PROCESSOR_TABLES`, tagged with the request that made
  ``request_payload[ext]`` (the state the model follows). No entry of those
  or of ``put_req_chunk`` / ``ramp_chunk_count`` may outlive
  ``request_payload[ext]`` (all are popped with the sender state,
  CTA:1029-1043), and a processor must never meet an entry another state
  generation left: a reused external id never sees the old request's entries.

Every request of an even generation is a model-native codec stream: its
processor sets ``meta.finished`` itself, a plain bool, with ``codec_streaming``
(the adapter keeps it, CTA:812-820), to the request's own end, and
``meta.is_segment_finished``, so its puts must read like any other's.
"""

from __future__ import annotations

import importlib
from typing import Any

from statecore.adapter import Baton

from ..chunk_transfer_records import CHUNK, NAMESPACE, Task
from .vllm_omni_harness import RealClasses

__all__ = [
    "PROCESSOR_TABLES",
    "SENDER_TABLES",
    "ProcessorFailure",
    "ProcessorPart",
    "step_tokens",
    "torch_bool",
]

PAYLOAD_MODULE = "vllm_omni.data_entry_keys"

PROCESSOR_TABLES = (
    "_qwen3_tts_emitted_frames",
    "_cached_ic",
    "_adaptive_states",
    "_pending_streaming_prefills",
    "code_prompt_token_ids",
)
"""Per-model side tables a processor writes per external id (``_qwen3_tts_emitted_frames``
and ``_cached_ic`` as qwen3_tts.py does; ``_adaptive_states`` and
``_pending_streaming_prefills`` stand for the adaptive chunk-size and streaming-prefill
state; ``code_prompt_token_ids`` for the codec codes a producer accumulates):
segment-scoped ones are popped at a segment end, all with the sender state."""
SENDER_TABLES = (*PROCESSOR_TABLES, "put_req_chunk", "ramp_chunk_count")
"""Every per-external-id sender table that must not outlive ``request_payload[ext]``."""


def torch_bool(value: bool) -> Any:
    """``torch.tensor(value, dtype=torch.bool)``, as the adapter stores meta flags."""
    torch = importlib.import_module("torch")
    return torch.tensor(value, dtype=torch.bool)


def step_tokens(task: Task) -> tuple[int, int]:
    """The ``new_token_ids`` a save of `task` passes: its segment and save number."""
    return (task.segment, task.save)


class ProcessorFailure(RuntimeError):
    """What the processor raises when the model chooses ``process(outcome="raise")``."""


class ProcessorPart:
    """The producer of the ``vllm-omni`` bindings: the processor and what it records."""

    baton: Baton
    classes: RealClasses
    adapter: Any
    takes_step_tokens = True
    """Whether the processor declares ``new_token_ids`` (CTA:345-359 passes them only then)."""
    processor_inputs = True
    """Whether every other request is a codec stream, the processor writes the side
    tables and aborts pass None as well (False: the first binding, no codec streams, no
    side tables, a bare id and a list only; for a before/after measurement)."""

    def reset_processor(self) -> None:
        """Forget what the processor recorded (a new example)."""
        self.call: tuple[bool, tuple[int, ...]] | None = None  # the arguments it parked with
        self.stale: set[tuple[str, str]] = set()  # (side table, ext) met with an old entry
        self.codec: set[str] = set()  # internal ids whose processor sets meta.finished itself
        self.meta_struct: Any = None

    def install_processor(self) -> None:
        """Set the processor on the adapter (directly: the dotted-path config is CTA:179-184)."""
        self.reset_processor()
        self.adapter.custom_process_next_stage_input_func = (
            self._processor if self.takes_step_tokens else self._processor_without_step_tokens
        )
        self.meta_struct = importlib.import_module(PAYLOAD_MODULE).MetaStruct

    def new_stream(self, request_id: str, generation: int) -> None:
        """A new request: every other one is a model-native codec stream."""
        if self.processor_inputs and generation % 2 == 0:
            self.codec.add(request_id)

    def expected_call(self, task: Task) -> tuple[bool, tuple[int, ...]]:
        """The arguments the processor must park with for `task`."""
        return (task.kind != CHUNK, step_tokens(task) if self.takes_step_tokens else ())

    def _processor(
        self,
        transfer_manager: Any,
        multimodal_output: Any,
        request: Any,
        is_finished: bool,
        new_token_ids: tuple[int, ...] = (),
    ) -> Any:
        self.call = (bool(is_finished), tuple(new_token_ids))
        try:
            outcome = self.baton.park("processor")
        finally:
            self.call = None
        # A producer keeps request-wide state in request_payload[ext], as the
        # bundled processors do (e.g. qwen3_omni.py:444-446).
        ext = request.external_req_id
        state = transfer_manager.request_payload.setdefault(ext, {})
        state.setdefault(NAMESPACE, str(request.request_id))
        if self.processor_inputs and ext in transfer_manager.request_payload:
            self._write_side_tables(transfer_manager, ext, state[NAMESPACE])
        if outcome == "raise":
            raise ProcessorFailure(f"statecore: processor raised for {request.request_id}")
        if outcome == "none":
            return None
        if request.request_id not in self.codec:
            return self.classes.payload(request_id=request.request_id, generated_len=1)
        # A model-native codec stream: the processor sets meta.finished itself
        # (CTA:817-820 keeps it), here to the request's own end, as the scheduler
        # would, as a plain bool (CTA:870-874 reads either); and the segment flag.
        finished = bool(request.is_finished() and not request.resumable)
        segment_end = torch_bool(bool(is_finished) and not finished)
        meta = self.meta_struct(
            finished=finished, is_segment_finished=segment_end, codec_streaming=True
        )
        return self.classes.payload(request_id=request.request_id, generated_len=1, meta=meta)

    def _processor_without_step_tokens(
        self, transfer_manager: Any, multimodal_output: Any, request: Any, is_finished: bool
    ) -> Any:
        """A processor that does not declare ``new_token_ids``: it must not be passed them."""
        return self._processor(transfer_manager, multimodal_output, request, is_finished)

    def _write_side_tables(self, transfer_manager: Any, ext: str, owner: str) -> None:
        """Write ext's entry of every per-model side table, as the bundled processors do.

        Each entry is tagged with the request that made ``request_payload[ext]``:
        an entry with another tag was left by an earlier state generation, which
        a reused external id must never meet.
        """
        for name in PROCESSOR_TABLES:
            table = getattr(transfer_manager, name, None)
            if table is None:  # created on first use (qwen3_tts.py:177-180, 210-213)
                table = {}
                setattr(transfer_manager, name, table)
            old = table.get(ext)
            if old is not None and old != owner:
                self.stale.add((name, ext))
            table[ext] = owner

    def side_tables(self) -> tuple[tuple[str, str], ...]:
        """(table, ext) of every side-table entry that outlives ``request_payload[ext]``,
        or that a processor found left by an earlier state generation."""
        adapter = self.adapter
        held = adapter.request_payload
        outliving = {
            (name, ext)
            for name in SENDER_TABLES
            for ext, value in (getattr(adapter, name, None) or {}).items()
            if ext not in held and value != 0  # a defaultdict read creates a 0
        }
        return tuple(sorted(outliving | self.stale))
