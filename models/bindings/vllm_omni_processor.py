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

* ``segment_tables``: a segment end clears ext's segment-scoped entries
  (`SEGMENT_TABLES` and ``ramp_chunk_count``, CTA:902-909) once its send is
  through (the put returned, or reported failure), unless the send stopped
  early (its generation cancelled or replaced, the put raising): checked when
  the save thread is idle again. And the ``ramp_chunk_count`` a
  processor reads (qwen3_tts.py:253, the chunk's index in its segment) counts
  the generation's successful puts since its last cleared segment end.

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
SEGMENT_TABLES = (
    "code_prompt_token_ids",
    "_qwen3_tts_emitted_frames",
    "_adaptive_states",
    "_cached_ic",
)
"""The side tables a segment end clears (CTA:902-909), with ``ramp_chunk_count``."""
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
        # A segment end the processor flushed: (ext, internal id, sender token),
        # checked once the save thread is idle again (`segment_tables`).
        self.segment_end: tuple[str, str, Any] | None = None
        self.ramp_base: dict[int, int] = {}  # id(token) -> put_req_chunk at its last cleared end
        self.ramp_tokens: list[Any] = []  # the tokens `ramp_base` names, kept alive
        self.wrong: set[tuple[str, str]] = set()  # (what, ext) found wrong

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
        if self.processor_inputs:
            self._check_ramp(transfer_manager, request.external_req_id)
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
            if is_finished and not (request.is_finished() and not request.resumable):
                token = transfer_manager._sender_tokens.get(ext)
                self.segment_end = (ext, str(request.request_id), token)
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

    def _check_ramp(self, adapter: Any, ext: str) -> None:
        """The processor's ``ramp_chunk_count[ext]``: successful puts since the last end."""
        token = adapter._sender_tokens.get(ext)
        chunks = adapter.put_req_chunk.get(ext, 0)
        expected = chunks - self.ramp_base.get(id(token), 0)
        if token is not None and adapter.ramp_chunk_count.get(ext, 0) != expected:
            self.wrong.add(("ramp_chunk_count", ext))

    def segment_tables(self) -> tuple[tuple[str, str], ...]:
        """(table, ext) of a segment-scoped entry a segment end should have cleared.

        Checked once the save thread is idle again (the task's failure, if any, is
        recorded by then), and only if the send went through: the generation is
        still current and not cancelled, and no send failure is recorded for the
        request (a raising put skips the clear; a failed one is left out too).
        Where it cleared, the generation's puts so far are the base of the
        next segment's ``ramp_chunk_count``.
        """
        if self.segment_end is not None and self.baton.parked_at is None:
            ext, request_id, token = self.segment_end
            self.segment_end = None
            adapter = self.adapter
            current = token is not None and adapter._sender_tokens.get(ext) is token
            if current and not token.cancelled and request_id not in adapter._send_failures:
                for name in (*SEGMENT_TABLES, "ramp_chunk_count"):
                    if ext in (getattr(adapter, name, None) or {}):
                        self.wrong.add((name, ext))
            # Whether it cleared (a failed put clears too; a raising one, or a
            # send that stopped early, does not), the counter says.
            if current and ext not in adapter.ramp_chunk_count:
                self.ramp_tokens.append(token)
                self.ramp_base[id(token)] = adapter.put_req_chunk.get(ext, 0)
        return tuple(sorted(self.wrong))

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
        return tuple(sorted(outliving | self.stale)) + self.segment_tables()
