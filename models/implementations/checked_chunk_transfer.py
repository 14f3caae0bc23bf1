"""A vLLM-Omni chunk-transfer adapter whose sender lifecycle is the checked machines.

`CheckedChunkTransferAdapter` is vLLM-Omni 0.30.0's ``OmniChunkTransferAdapter``
("CTA" below) with the per-external-id sender lifecycle taken out of the
flags and checks scattered over its methods and put into the machines
``statecore check`` verified in the ``chunk_transfer`` system
(`statecore.models.implementations.checked_sender`). Each override below
names the method it replaces and the machine event it fires; everything
else (payload construction, connector keys, the receiver) is 0.30.0's.

Where the spec's reference differs from 0.30.0, the override implements the
reference (docs/findings.md has the traces):

* a request that reuses an external id while the old generation lives
  (cancelled and draining, or opened by another request) is refused
  visibly: its save is recorded as a send failure, never joined to the old
  generation, its watermarks or its ``request_payload``;
* a processor exception is a recorded send failure (0.30.0 only logs it); a
  boundary still sends its finish marker;
* ``finish_requests`` for a request whose id another request's generation
  holds leaves that generation alone;
* a graceful finish (``_finish_parked_streaming_session``'s
  ``FINISHED_STOPPED``) while the terminal is queued still sends what was
  queued before it (0.30.0 discards the parked session's segment end): the
  terminal's ``finally`` fires the cleanup;
* `fail_failed_chunk_sends` replaces the scheduler's
  ``_log_failed_chunk_sends``: each recorded send failure finishes its
  request (``FINISHED_ERROR``) instead of leaving the consumer to its 600 s
  input deadline.

Use it in a running vLLM-Omni with `install` (before the engine starts) or by
constructing `checked_adapter_class()` yourself. Importing vLLM-Omni takes
15-50 s, so the class is built on first use and cached.
"""

from __future__ import annotations

import importlib
import logging
import threading
from collections import deque
from collections.abc import Callable, Iterable, Mapping
from typing import Any

from statecore import ACCEPTED

from .checked_sender import (
    BEGIN,
    CLEANUP,
    END,
    SAVE_TERMINAL,
    GenerationPayloads,
    SenderGeneration,
    Watermarks,
)

__all__ = [
    "CTA_MODULE",
    "CheckedSenderMixin",
    "checked_adapter_class",
    "fail_failed_chunk_sends",
    "install",
]

CTA_MODULE = "vllm_omni.distributed.omni_connectors.transfer_adapter.chunk_transfer_adapter"
MIXIN_MODULE = "vllm_omni.core.sched.omni_scheduler_mixin"

_LOG = logging.getLogger(CTA_MODULE)  # the adapter's own logger: same handlers, same levels

CHUNK, SEGMENT_END, TERMINAL = "chunk", "segment_end", "terminal"


class CheckedSenderMixin:
    """The overrides; `checked_adapter_class` puts them in front of the real adapter.

    Attributes typed ``Any`` are the real adapter's; the vLLM names the
    methods need (``torch``, ``MetaStruct``, ...) are class attributes set
    by `checked_adapter_class`.

    The hot path (``save_async`` and the save thread's send) takes its locks
    by ``acquire()`` and ``release()`` in a ``try``, not ``with``: a
    ``Condition``'s ``with`` runs two Python methods, and a lock's calls
    ``__enter__`` and ``__exit__`` where ``acquire`` and ``release`` do less.
    """

    _sender_state_lock: threading.Lock
    _sender_tokens: dict[str, SenderGeneration]
    _pending_save_reqs: deque[dict[str, Any]]
    _save_cond: threading.Condition
    connector: Any
    custom_process_next_stage_input_func: Callable[..., Any] | None
    put_req_chunk: dict[str, int]
    ramp_chunk_count: dict[str, int]
    code_prompt_token_ids: dict[str, Any]
    _adaptive_states: dict[str, Any]
    _pending_streaming_prefills: dict[str, Any]
    request_ids_mapping: dict[str, str]
    waiting_for_chunk_waiting_requests: deque[Any]
    waiting_for_chunk_running_requests: deque[Any]
    _held_non_active: deque[Any]
    requests_origin_status: dict[str, Any]
    _vllm: Any  # the vLLM-Omni names, see `_VllmNames`
    # The real adapter's methods the overrides call, unchanged:
    record_send_failure: Callable[[str, str], None]
    _confirmed_num_computed_tokens: Callable[[Any], int]
    _snapshot_processor_request: Callable[[Any], Any]
    _accepts_new_token_ids: Callable[[Callable[..., Any]], bool]
    _queue_shm_cleanup_locked: Callable[[str, SenderGeneration], None]
    cleanup: Callable[..., None]
    cleanup_receiver: Callable[[str], None]

    def __init__(self, vllm_config: Any) -> None:
        super().__init__(vllm_config)  # type: ignore[call-arg]
        self._watermarks = Watermarks(self._sender_state_lock)
        self._segment_generation = self._watermarks.generations
        self.requests_num_chunks_sent = self._watermarks.tokens
        self.request_payload = GenerationPayloads(self._sender_state_lock, self._sender_tokens)

    # -- save_async (CTA:370-492) -------------------------------------------------

    def save_async(
        self,
        multimodal_output: dict[str, Any] | None = None,
        request: Any = None,
        is_segment_finished: bool = False,
        new_token_ids: Iterable[int] | None = None,
        confirmed_num_computed_tokens: int | None = None,
        segment_generation: int | None = None,
        force_request_finished: bool = False,
    ) -> None:
        """CTA:370-492. ``segment_watermark.save`` admits or skips the save;
        ``sender_generation.save_terminal`` fences a terminal. A save while
        another request's generation holds the id is refused visibly."""
        if force_request_finished:
            is_finished = True
        else:  # a bool: the save thread's events are prepared by it (`BEGIN`, `END`)
            is_finished = bool(request.is_finished()) and not request.resumable
        ext = request.external_req_id
        counter = getattr(request, "_omni_segment_generation", None)
        if segment_generation is None and type(counter) is int:  # the streaming path's case
            generation = counter
        else:
            generation = _segment_generation(segment_generation, counter)
        if confirmed_num_computed_tokens is None:
            confirmed_num_computed_tokens = self._confirmed_num_computed_tokens(request)
        task = {
            "multimodal_output": multimodal_output,
            "request": self._snapshot_processor_request(request)
            if self.custom_process_next_stage_input_func
            else request,
            "is_finished": is_finished,
            "is_segment_finished": is_segment_finished,
            "new_token_ids": tuple(map(int, new_token_ids or ())),
            "segment_generation": generation,
        }
        kind = SEGMENT_END if is_segment_finished else TERMINAL if is_finished else CHUNK
        lock = self._sender_state_lock
        lock.acquire()  # the hot path's locks: see the class doc
        try:
            token = self._sender_tokens.get(ext)
            refusal = None if token is None else token.refusal(request.request_id)
            verdict = "refused"
            if refusal is None:
                verdict = self._watermarks.save(
                    ext, kind, generation, int(confirmed_num_computed_tokens), counter is not None
                )[1]
            if verdict == "admitted":
                if token is None:  # the id's live generation from now on (`_sender_tokens`)
                    token = SenderGeneration(request.request_id)
                    self.request_payload.open(ext, token)
                if is_finished:
                    token.fire_prepared(SAVE_TERMINAL)
                task["sender_token"] = token
                self._pending_save_reqs.append(task)
        finally:
            lock.release()
        if refusal is not None:
            _LOG.error("Cannot enqueue %s: %s", ext, refusal)
            self.record_send_failure(request.request_id, refusal)
            return
        if verdict != "admitted":
            _LOG.warning("Skip %s save_async for %s (generation %s)", verdict, ext, generation)
            return
        save_cond = self._save_cond
        save_cond.acquire()
        try:
            save_cond.notify()
        finally:
            save_cond.release()

    def has_active_sender(self, external_req_id: str) -> bool:
        """CTA:359-368: a generation that takes saves (not retired: cancelled, or its
        cleanup owed to the queued terminal by a graceful finish)."""
        with self._sender_state_lock:
            token = self._sender_tokens.get(external_req_id)
            return token is not None and not token.retired

    # -- the save thread (CTA:684-909) ------------------------------------------------

    def _send_single_request(self, task: dict[str, Any]) -> None:
        """CTA:684-729. The fence is ``sender_generation.begin``; the ``finally`` is
        ``end``, which reclaims the generation when the machine says so."""
        if "cleanup_shm" in task:
            super()._send_single_request(task)  # type: ignore[misc]
            return
        request = task["request"]
        ext = request.external_req_id
        token: SenderGeneration | None = task.get("sender_token")
        if token is None:
            self._send_single_request_for_generation(task)
            return
        terminal = task["is_finished"]  # a bool (`save_async`)
        lock = self._sender_state_lock
        lock.acquire()
        try:
            began = (
                self._sender_tokens.get(ext) is token
                and token.fire_prepared(BEGIN[terminal]).status is ACCEPTED
            )
        finally:
            lock.release()
        if not began:
            _LOG.debug("Discarding stale queued chunk for aborted request %s", ext)
            return
        try:
            self._send_single_request_for_generation(task, token)
        except BaseException:
            self.request_payload.on_failure(ext, token)  # save_loop records the failure
            raise
        finally:
            lock.acquire()
            try:
                if terminal and token.cleanup_owed:  # a graceful finish's cleanup (finish_requests)
                    token.fire_prepared(CLEANUP)
                if token.fire_prepared(END[terminal]).snapshot.state == "reclaimed":
                    self._reclaim_locked(ext, token)
            finally:
                lock.release()

    def _release_terminal_fence(self, external_req_id: str, sender_token: Any) -> None:
        """CTA:731-749, replaced: ``sender_generation.end`` releases the fence and runs
        the deferred cleanup in one step (`_send_single_request`)."""
        raise RuntimeError(
            "CheckedChunkTransferAdapter: the terminal fence is released by the sender "
            "machine's 'end' event in _send_single_request; nothing calls this"
        )

    def _send_single_request_for_generation(
        self, task: dict[str, Any], sender_token: SenderGeneration | None = None
    ) -> None:
        """CTA:764-909: build the payload, check the generation, put it. A processor
        exception is a recorded send failure; the request state hears of failures and
        segment ends (``request_state.send_failed``, ``complete_segment``)."""
        vllm = self._vllm
        raw_mm = task["multimodal_output"]
        is_mapping = isinstance(raw_mm, Mapping)
        multimodal_output = vllm.unflatten_payload(raw_mm) if is_mapping else raw_mm
        request = task["request"]
        is_finished = task["is_finished"]
        is_segment_finished = task["is_segment_finished"]
        stage_id = self.connector.stage_id
        ext = request.external_req_id
        put_key = f"{ext}_{stage_id}_{self.put_req_chunk[ext]}"
        payload_data = self._process_payload(task, multimodal_output, sender_token)
        if payload_data is None:
            if not (is_segment_finished or is_finished):
                return
            payload_data = vllm.OmniPayloadStruct()  # a boundary's marker still goes out
        self._stamp_meta(payload_data, is_finished, is_segment_finished)
        lock = self._sender_state_lock
        if sender_token is not None:  # CTA:751-762 `_sender_generation_is_active`, inlined
            lock.acquire()
            try:  # a terminal outlives cancellation: its fence is the machine's `begin`
                active = self._sender_tokens.get(ext) is sender_token and (
                    is_finished or not sender_token.cancelled
                )
            finally:
                lock.release()
            if not active:
                _LOG.debug("Skipping cancelled chunk for request %s before connector put", ext)
                return
            sender_token.num_puts = self.put_req_chunk[ext] + 1
        success, _size, _metadata = self.connector.put(
            from_stage=str(stage_id), to_stage=str(stage_id + 1), put_key=put_key, data=payload_data
        )
        lock.acquire()
        try:  # CTA:842-861: advance the key counters
            if sender_token is not None:
                if success and is_finished:
                    sender_token.terminal_sent = True
                current = self._sender_tokens.get(ext) is sender_token
                if not current or (not is_finished and sender_token.state == "retiring"):
                    _LOG.debug("Ignoring completed put for retired request %s", ext)
                    return
            if success:
                self.put_req_chunk[ext] += 1
                self.ramp_chunk_count[ext] += 1
        finally:
            lock.release()
        if success:
            if is_finished and _truthy(vllm, payload_data.meta.finished):
                self.cleanup(request.request_id, ext)
        else:
            _LOG.error("Chunk send failed for %s (stage %s -> %s)", ext, stage_id, stage_id + 1)
            self.record_send_failure(request.request_id, "connector.put reported failure")
            if sender_token is not None:
                self.request_payload.on_failure(ext, sender_token)
        if is_segment_finished:
            self._end_segment(ext, sender_token)

    def _process_payload(
        self, task: dict[str, Any], multimodal_output: Any, token: SenderGeneration | None
    ) -> Any:
        """The processor callback (CTA:778-806); an exception is recorded, not only logged."""
        processor = self.custom_process_next_stage_input_func
        if processor is None:
            return None
        request = task["request"]
        kwargs: dict[str, Any] = {
            "transfer_manager": self,
            "multimodal_output": multimodal_output,
            "request": request,
            "is_finished": task["is_segment_finished"] or task["is_finished"],
        }
        if self._accepts_new_token_ids(processor):
            kwargs["new_token_ids"] = task.get("new_token_ids", ())
        try:
            return processor(**kwargs)
        except Exception as exc:
            _LOG.error("Processor raised for %s: %s", request.request_id, exc)
            self.record_send_failure(request.request_id, f"processor raised {exc!r}")
            if token is not None:
                self.request_payload.on_failure(request.external_req_id, token)
            return None

    def _stamp_meta(self, payload: Any, is_finished: bool, is_segment_finished: bool) -> None:
        """``meta.finished`` and ``meta.is_segment_finished`` as 0.30.0 sets them (CTA:811-829)."""
        vllm = self._vllm
        meta = payload.meta
        if meta is None:
            meta = payload.meta = vllm.MetaStruct()
        codec_lifetime = meta.finished is not None and _truthy(vllm, meta.codec_streaming)
        if not codec_lifetime:
            meta.finished = vllm.tensor(is_finished, dtype=vllm.bool)
        if meta.is_segment_finished is None:
            meta.is_segment_finished = vllm.tensor(is_segment_finished, dtype=vllm.bool)

    def _end_segment(self, ext: str, token: SenderGeneration | None) -> None:
        """Segment-end post-processing (CTA:902-909): request-wide state is kept."""
        self.code_prompt_token_ids.pop(ext, None)
        getattr(self, "_qwen3_tts_emitted_frames", {}).pop(ext, None)
        self.ramp_chunk_count.pop(ext, None)
        self._adaptive_states.pop(ext, None)
        cached_ic = getattr(self, "_cached_ic", None)
        if cached_ic is not None:
            cached_ic.pop(ext, None)
        if token is not None:
            self.request_payload.complete_segment(ext, token)

    # -- cleanup (CTA:977-1043) ------------------------------------------------------------

    def cleanup_sender(self, external_req_id: str) -> None:
        """CTA:977-1012: ``sender_generation.cleanup`` reclaims now, defers to the
        terminal (``draining``) or leaves it to the running task (``retiring``)."""
        with self._sender_state_lock:
            token = self._sender_tokens.get(external_req_id)
            if token is None:
                self._clear_sender_state_locked(external_req_id, None)
            elif token.fire_prepared(CLEANUP).snapshot.state == "reclaimed":
                self._reclaim_locked(external_req_id, token)

    def _reclaim_locked(self, ext: str, token: SenderGeneration) -> None:
        """The generation is ``reclaimed``: SHM keys queued, token popped, state cleared."""
        self._queue_shm_cleanup_locked(ext, token)
        self._clear_sender_state_locked(ext, token)

    def _clear_sender_state_locked(
        self, external_req_id: str, token: SenderGeneration | None
    ) -> None:
        """CTA:1029-1043: ``segment_watermark.clear`` and ``request_state.release`` (of
        `token`, popped from ``_sender_tokens``), then the side tables keyed by the id."""
        self._watermarks.clear(external_req_id)
        self.request_payload.release(external_req_id, token)
        self.put_req_chunk.pop(external_req_id, None)
        self.code_prompt_token_ids.pop(external_req_id, None)
        getattr(self, "_qwen3_tts_emitted_frames", {}).pop(external_req_id, None)
        self.ramp_chunk_count.pop(external_req_id, None)
        self._adaptive_states.pop(external_req_id, None)
        self._pending_streaming_prefills.pop(external_req_id, None)
        cached_ic = getattr(self, "_cached_ic", None)
        if cached_ic is not None:
            cached_ic.pop(external_req_id, None)

    # -- finish_requests (CTA:1577-1641) ----------------------------------------------------

    def finish_requests(
        self, request_ids: Any, finished_status: Any, requests: dict[str, Any] | None = None
    ) -> list[tuple[str, int]]:
        """CTA:1577-1641. ``cleanup_sender`` runs only for a generation the finished
        request opened (or none): one request's finish never cancels another's chunks.
        A graceful finish (stopped, length-capped) of a generation whose terminal is
        queued leaves the cleanup to that terminal's ``finally``, so what was queued
        before the terminal still goes out (``_finish_parked_streaming_session``'s
        segment end); an abort or a failure cancels the queued chunks at once."""
        ids = _request_ids(request_ids, requests)
        graceful = _graceful(self._vllm.RequestStatus, finished_status)
        self._restore_origin_status(ids, requests)
        for req_id in ids:
            request = requests.get(req_id) if requests else None
            ext = (
                getattr(request, "external_req_id", None)
                if request is not None
                else self.request_ids_mapping.get(req_id)
            ) or req_id
            self.cleanup_receiver(req_id)
            with self._sender_state_lock:
                token = self._sender_tokens.get(ext)
                foreign = token is not None and token.owner != req_id
                owed = False
                if graceful and not foreign and token and token.state == "terminal_pending":
                    owed = token.cleanup_owed = True
            if not (foreign or owed):
                self.cleanup_sender(ext)
        for name in (
            "waiting_for_chunk_waiting_requests",
            "waiting_for_chunk_running_requests",
            "_held_non_active",
        ):
            kept = (r for r in getattr(self, name) if r.request_id not in ids)
            setattr(self, name, deque(kept))
        for req_id in ids:
            self.cleanup_receiver(req_id)
        return []

    def _restore_origin_status(self, ids: set[str], requests: dict[str, Any] | None) -> None:
        """First pass of CTA:1591-1612: a parked request gets its origin status back."""
        owned = {
            request.request_id
            for queue in (
                self.waiting_for_chunk_waiting_requests,
                self.waiting_for_chunk_running_requests,
                self._held_non_active,
            )
            for request in queue
        }
        status = self._vllm.RequestStatus
        for req_id in ids:
            request = requests.get(req_id) if requests else None
            if request is None:
                continue
            resumable_stop = bool(
                getattr(request, "resumable", False) and request.status == status.FINISHED_STOPPED
            )
            if request.is_finished() and not resumable_stop:
                continue
            if req_id in self.requests_origin_status and req_id in owned:
                request.status = self.requests_origin_status.pop(req_id)


def _graceful(status: Any, finished_status: Any) -> bool:
    """The request ended normally (stopped or length-capped): what it queued is owed."""
    return finished_status in (status.FINISHED_STOPPED, status.FINISHED_LENGTH_CAPPED)


def _segment_generation(given: int | None, counter: Any) -> int:
    """The generation a save carries: the scheduler's, else the request's counter (CTA:412-418)."""
    if given is not None:
        return int(given)
    try:
        return int(counter if counter is not None else 0)
    except (TypeError, ValueError):
        return 0


def _request_ids(request_ids: Any, requests: dict[str, Any] | None) -> set[str]:
    """``finish_requests``' ids: a bare string, an iterable, or every request (CTA:1581-1586)."""
    if isinstance(request_ids, str):
        return {request_ids}
    if request_ids is not None:
        return set(request_ids)
    return set(requests or ())


def _truthy(vllm: Any, value: Any) -> bool:
    """A scalar flag that may be a one-element tensor (CTA:235-238)."""
    if isinstance(value, vllm.torch.Tensor):
        return value.numel() == 1 and bool(value.item())
    return bool(value) if value is not None else False


class _VllmNames:
    """The vLLM-Omni names the overrides use, imported once."""

    def __init__(self) -> None:
        keys = importlib.import_module("vllm_omni.data_entry_keys")
        self.torch = torch = importlib.import_module("torch")
        self.tensor, self.bool = torch.tensor, torch.bool  # the two the hot path calls
        self.unflatten_payload = keys.unflatten_payload
        self.OmniPayloadStruct = keys.OmniPayloadStruct
        self.MetaStruct = keys.MetaStruct
        self.RequestStatus = importlib.import_module("vllm.v1.request").RequestStatus


_CLASSES: dict[type, type] = {}
_CLASSES_LOCK = threading.Lock()


def checked_adapter_class(base: type | None = None) -> type:
    """``CheckedChunkTransferAdapter``: `CheckedSenderMixin` over `base` (default: the real
    ``OmniChunkTransferAdapter``). Built once per base and cached."""
    with _CLASSES_LOCK:
        if base is None:
            module: Any = importlib.import_module(CTA_MODULE)
            base = module.OmniChunkTransferAdapter
        assert base is not None
        cls = _CLASSES.get(base)
        if cls is None:
            namespace = {"_vllm": _VllmNames(), "__module__": __name__, "__doc__": __doc__}
            cls = _CLASSES[base] = type(
                "CheckedChunkTransferAdapter", (CheckedSenderMixin, base), namespace
            )
        return cls


def fail_failed_chunk_sends(scheduler: Any) -> None:
    """The scheduler's sweep of recorded send failures, as the spec asks (MIX:482-521).

    0.30.0's ``_log_failed_chunk_sends`` only logs each failure, so the
    consumer waits for its input deadline. Here each request still scheduled
    is finished with ``FINISHED_ERROR`` through the scheduler's own
    ``finish_requests`` (which reaches the adapter first): its sender state is
    reclaimed and no chunk of it is sent again.
    """
    adapter = getattr(scheduler, "chunk_transfer_adapter", None)
    if adapter is None:
        return
    status = importlib.import_module("vllm.v1.request").RequestStatus
    for request_id, reason in adapter.collect_failed_send_request_ids().items():
        request = scheduler.requests.get(request_id)
        if request is None or request.status == status.FINISHED_ERROR:
            _LOG.warning("req=%s: chunk send gave up (%s) after it left", request_id, reason)
            continue
        _LOG.error("req=%s: chunk send gave up (%s); failing the request", request_id, reason)
        scheduler.finish_requests(request_id, status.FINISHED_ERROR)


def install() -> type:
    """Make vLLM-Omni's schedulers build the checked adapter and fail failed sends.

    Call it before the engine creates its schedulers (for example at the top
    of the launcher, or in a ``sitecustomize``). It replaces the adapter class
    the scheduler mixin constructs (MIX:148) and the mixin's
    ``_log_failed_chunk_sends`` with `fail_failed_chunk_sends`. Returns the class.
    """
    cls = checked_adapter_class()
    mixin_module: Any = importlib.import_module(MIXIN_MODULE)
    mixin_module.OmniChunkTransferAdapter = cls
    mixin_module.OmniSchedulerMixin._log_failed_chunk_sends = fail_failed_chunk_sends
    return cls


def __getattr__(name: str) -> Any:
    if name == "CheckedChunkTransferAdapter":
        return checked_adapter_class()
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
