"""The real vLLM-Omni 0.30.0 classes the ``vllm-omni`` adapter drives, and the harness around them.

`real_classes` imports vLLM-Omni once per process (15-50 s) and builds a
subclass of the real ``OmniChunkTransferAdapter`` whose only change is the
connector factory, and a fake connector whose ``put`` parks the save thread
on the binding's `Baton`. `make_adapter` builds one with its background
threads stopped; `run_save_task` is one iteration of ``save_loop``.
"""

from __future__ import annotations

import logging
import threading
from collections import deque
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from types import SimpleNamespace
from typing import Any, NamedTuple, Protocol

from statecore.adapter import AdapterError, Baton

CTA_MODULE = "vllm_omni.distributed.omni_connectors.transfer_adapter.chunk_transfer_adapter"
BASE_MODULE = "vllm_omni.distributed.omni_connectors.transfer_adapter.base"
MIXIN_MODULE = "vllm_omni.core.sched.omni_scheduler_mixin"
CONNECTOR_BASE_MODULE = "vllm_omni.distributed.omni_connectors.connectors.base"
STAGE_ID = 0


class Sent(NamedTuple):
    """One successful connector put, as the fake connector records it."""

    key: str  # the connector key, ``{ext}_{stage}_{chunk}``
    request: str  # the internal id of the request whose task made the put
    finished: bool  # ``meta.finished``
    segment_finished: bool  # ``meta.is_segment_finished``
    empty: bool  # a finish marker without payload


class ConnectorOwner(Protocol):
    """What the fake connector needs of the binding that drives it."""

    baton: Baton

    def flight_request_id(self) -> str: ...


class ParkingPut:
    """A connector mixin: ``put`` parks the save thread, and so does the end of its send;
    ``save_async`` parks the scheduler before the sender lock, when the binding asks."""

    put_called = False  # since the last after_send
    binding: ConnectorOwner

    def before_lock(self) -> None:
        """Park the scheduler inside ``save_async``, after its late check and stamp and
        before the sender lock (CTA:430-447), if the binding runs it on its scheduler
        baton; once per save."""
        park = getattr(self.binding, "park_in_save", None)
        if park is not None:
            park()

    def after_send(self) -> None:
        """Park between a send that reached ``put`` and its ``finally``."""
        if self.put_called:
            self.put_called = False
            self.binding.baton.park("finish")

    def parked_put(self, put_key: str) -> bool:
        """Park in ``put``; whether it goes on (False: it returns failure; it may raise)."""
        self.put_called = True
        outcome = self.binding.baton.park("put")
        if outcome == "raise":
            raise ConnectionError(f"statecore: connector put of {put_key} raised")
        return bool(outcome != "false")


# -- the real classes, imported once per process ---------------------------------------


@dataclass(frozen=True)
class RealClasses:
    """The vLLM-Omni / vLLM classes the binding uses (imported lazily, cached)."""

    adapter: type[Any]  # OmniChunkTransferAdapter (the real class; patch it for mutants)
    log_failed_chunk_sends: Callable[[Any], None]  # OmniSchedulerMixin._log_failed_chunk_sends
    harnessed: type[Any]  # its subclass whose create_connector returns our connector
    connector: type[Any]  # FakeConnector(OmniConnectorBase)
    payload: type[Any]  # OmniPayloadStruct
    request: type[Any]  # OmniRequest
    sampling_params: type[Any]
    status: Any  # vllm.v1.request.RequestStatus


_REAL: RealClasses | None = None
_REAL_LOCK = threading.Lock()


def real_classes(*, quiet: bool = True) -> RealClasses:
    """Import vLLM-Omni (once per process) and build the harness classes around it.

    `quiet` raises the adapter's loggers to CRITICAL: fuzzing makes it log an
    error for every failed send, which is expected and slow to format.
    """
    global _REAL
    with _REAL_LOCK:
        if _REAL is None:
            _REAL = _import_real()
        if quiet:  # setLevel clears every logger's cache: only when needed
            for name in (CTA_MODULE, BASE_MODULE, MIXIN_MODULE):
                logger = logging.getLogger(name)
                if logger.level != logging.CRITICAL:
                    logger.setLevel(logging.CRITICAL)
    return _REAL


def _import_real() -> RealClasses:
    import importlib

    try:
        cta = importlib.import_module(CTA_MODULE)
        connector_base = importlib.import_module(CONNECTOR_BASE_MODULE).OmniConnectorBase
        sampling_params = importlib.import_module("vllm").SamplingParams
        request_status = importlib.import_module("vllm.v1.request").RequestStatus
        payload = importlib.import_module("vllm_omni.data_entry_keys").OmniPayloadStruct
        omni_request = importlib.import_module("vllm_omni.request").OmniRequest
        mixin = importlib.import_module(MIXIN_MODULE).OmniSchedulerMixin
    except ImportError as exc:
        raise AdapterError(
            f"the vllm-omni adapter needs vllm-omni 0.30.0 and vllm ({exc}); install them with: "
            "bash scripts/install-vllm-stack.sh  (or: tox -e vllm)"
        ) from exc
    real_adapter = cta.OmniChunkTransferAdapter

    class FakeConnector(ParkingPut, connector_base):  # type: ignore[misc, valid-type]
        """A connector whose ``put`` parks on the baton; the consumer reads a FIFO of
        keys, and a put under a key it has not read yet replaces that put."""

        def __init__(self, binding: ConnectorOwner) -> None:
            self.binding = binding
            self.stage_id = STAGE_ID
            self.sent: list[Sent] = []
            self.store: dict[str, Any] = {}
            self.unread: deque[Sent] = deque()
            self.closed = False

        def put(
            self, from_stage: str, to_stage: str, put_key: str, data: Any
        ) -> tuple[bool, int, dict[str, Any] | None]:
            if not self.parked_put(put_key):
                return False, 0, None
            entry = Sent(put_key, self.binding.flight_request_id(), *describe_payload(data))
            self.sent.append(entry)
            replace_unread(self.unread, entry)
            self.store[put_key] = data
            return True, 1, None

        def get(
            self,
            from_stage: str,
            to_stage: str,
            get_key: str,
            metadata: dict[str, Any] | None = None,
        ) -> tuple[Any, int] | None:
            data = self.store.get(get_key)
            return None if data is None else (data, 1)

        def cleanup(self, request_id: str) -> None:
            self.store.pop(request_id, None)

        def health(self) -> dict[str, Any]:
            return {"status": "ok"}

        def close(self) -> None:
            self.closed = True

    return RealClasses(
        real_adapter, mixin._log_failed_chunk_sends, harnessed(real_adapter), FakeConnector,
        payload, omni_request, sampling_params, request_status,
    )  # fmt: skip


_HARNESSED: dict[type[Any], type[Any]] = {}


def harnessed(base: type[Any]) -> type[Any]:
    """`base` (the real adapter or a subclass of it) with only the connector factory
    replaced (CTA:289-313), a park between the send and its ``finally``, and one in
    ``save_async`` before the sender lock."""
    cls = _HARNESSED.get(base)
    if cls is not None:
        return cls

    class Harnessed(base):  # type: ignore[misc]
        @classmethod
        def create_connector(cls, model_config: Any) -> Any:
            return model_config.statecore_connector

        def save_async(self, *args: Any, **kwargs: Any) -> Any:
            self._statecore_saving = True
            try:
                return super().save_async(*args, **kwargs)
            finally:
                self._statecore_saving = False

        def _before_lock(self) -> None:
            # Inside save_async, between its stamp of _segment_generation and
            # the sender lock (CTA:430-447): the scheduler may park here.
            before_lock = getattr(self.connector, "before_lock", None)
            if before_lock is not None and getattr(self, "_statecore_saving", False):
                before_lock()

        def _confirmed_num_computed_tokens(self, request: Any) -> int:
            # save_async calls it when the scheduler passed no count (a chunk).
            self._before_lock()
            confirmed: int = base._confirmed_num_computed_tokens(request)
            return confirmed

        def _snapshot_processor_request(self, request: Any) -> Any:
            # save_async calls it for every save when a processor is set.
            self._before_lock()
            return base._snapshot_processor_request(request)

        def _send_single_request_for_generation(self, *args: Any, **kwargs: Any) -> Any:
            # The connector may hold the save thread between the send and
            # _send_single_request's finally (the model's ``finish`` step).
            after_send = getattr(self.connector, "after_send", None)
            try:
                return super()._send_single_request_for_generation(*args, **kwargs)
            finally:
                if after_send is not None:
                    after_send()

    Harnessed.__doc__ = f"{base.__name__}; only the connector factory is replaced."
    _HARNESSED[base] = Harnessed
    return Harnessed


def new_request(classes: RealClasses, request_id: str, external_id: str, status: str) -> Any:
    """A real ``OmniRequest`` with a three-token prompt, in `status` (a ``RequestStatus`` name)."""
    request = classes.request(
        request_id,
        prompt_token_ids=[1, 2, 3],
        sampling_params=classes.sampling_params(max_tokens=16),
        pooling_params=None,
        external_req_id=external_id,
    )
    request.status = getattr(classes.status, status)
    return request


def replace_unread(unread: deque[Sent], entry: Sent) -> list[int]:
    """Append `entry` to the consumer's `unread` puts; an unread put under the same key is
    gone, as in a key-addressed store (the consumer reads by key). Returns the positions
    of the puts it replaced."""
    replaced = [i for i, old in enumerate(unread) if old.key == entry.key]
    for i in reversed(replaced):
        del unread[i]
    unread.append(entry)
    return replaced


def describe_payload(data: Any) -> tuple[bool, bool, bool]:
    """(``meta.finished``, ``meta.is_segment_finished``, nothing but meta) of a put payload."""
    meta = getattr(data, "meta", None)
    fields = getattr(data, "__struct_fields__", ())
    empty = all(getattr(data, f) is None for f in fields if f != "meta")
    return _flag(meta, "finished"), _flag(meta, "is_segment_finished"), empty


def _flag(meta: Any, name: str) -> bool:
    """A boolean meta field, which the sender stores as a one-element tensor."""
    flag = getattr(meta, name, None)
    if flag is None:
        return False
    if hasattr(flag, "numel"):
        return flag.numel() == 1 and bool(flag.item())
    return bool(flag)


def make_adapter(
    connector: Any,
    *,
    max_num_seqs: int = 8,
    base: type[Any] | None = None,
    stage_id: int = STAGE_ID,
    role: str = "sender",
    worker_type: str = "ar",
) -> Any:
    """A real adapter (or `base`, a subclass of it) on `connector` for stage `stage_id`
    in connector role `role` with a `worker_type` ("ar" or "generation") model, its
    background threads stopped and joined."""
    classes = real_classes()
    adapter_class = classes.harnessed if base is None else harnessed(base)
    model_config = SimpleNamespace(
        stage_id=stage_id,
        async_chunk=True,
        worker_type=worker_type,
        max_model_len=4096,
        stage_connector_config={"name": "StatecoreFakeConnector", "extra": {"role": role}},
        custom_process_next_stage_input_func=None,
        statecore_connector=connector,
    )
    vllm_config = SimpleNamespace(
        model_config=model_config, scheduler_config=SimpleNamespace(max_num_seqs=max_num_seqs)
    )
    adapter = adapter_class(vllm_config)
    stop_threads(adapter)
    return adapter


def stop_threads(adapter: Any) -> None:
    """Stop the save and receive loops (BASE:113-138, 52-82) and wait for them."""
    adapter.stop_event.set()
    for cond in (adapter._save_cond, adapter._recv_cond):
        with cond:
            cond.notify_all()
    for thread in (adapter.save_thread, adapter.recv_thread):
        thread.join(timeout=5.0)
        if thread.is_alive():
            raise AdapterError(f"vllm-omni: {thread.name} did not stop")


def run_save_task(adapter: Any, task: Mapping[str, Any]) -> None:
    """One iteration of ``save_loop``'s inner loop (BASE:119-132), exactly."""
    try:
        adapter._send_single_request(task)
    except Exception as e:
        failed = getattr(task.get("request"), "request_id", None)
        adapter.record_send_failure(failed, f"{type(e).__name__}: {e}")
