"""The ``vllm-omni`` adapter: the chunk_transfer model bound to the real vLLM-Omni code.

`OmniChunkTransferAdapterBinding` drives the real ``OmniChunkTransferAdapter``
of vLLM-Omni 0.30.0
(``vllm_omni/distributed/omni_connectors/transfer_adapter/chunk_transfer_adapter.py``,
"CTA" below; ``transfer_adapter/base.py`` is "BASE") in lockstep with the model
`fuzz_system_0_30_0` builds, and reports where the two disagree.

How the real adapter is driven:

* Construction: a fake ``vllm_config`` (stage 0, ``async_chunk``, role
  ``sender``) and a subclass whose only change is ``create_connector``
  (CTA:289-313, a classmethod called in ``__init__``), which returns a fake
  ``OmniConnectorBase``. The constructor starts the save and receive threads
  (BASE:42-46); they are stopped and joined right away, and the binding runs
  the save loop's body itself, one task per model ``begin``.
* ``begin`` pops the FIFO head of ``_pending_save_reqs`` and runs
  ``_send_single_request(task)`` on a `Baton` worker inside the same
  ``try/except -> record_send_failure(request.request_id, ...)`` as
  ``save_loop`` (BASE:113-138). The processor callback parks the worker
  (``"processor"``), so does ``connector.put`` (``"put"``); ``process`` and
  ``put`` resume it with the outcome the model chose.
* Requests are real ``OmniRequest`` objects: model request ``ext0`` generation
  ``g`` is internal id ``"ext0-r{g}"`` with external id ``"ext0"``.
  ``save_terminal`` sets ``FINISHED_STOPPED`` (``save_async`` derives
  ``is_finished = request.is_finished() and not request.resumable``, CTA:409);
  ``abort`` is the scheduler's ``finish_requests(..., FINISHED_ABORTED)``
  (CTA:1577-1641), which calls ``cleanup_sender(external id)``.
* The scheduler's sweep of send failures (the model's ``collect_failures``)
  is the real ``OmniSchedulerMixin._log_failed_chunk_sends`` (MIX:482-521),
  run on a stand-in scheduler that holds the adapter and the live requests:
  it drains ``_send_failures`` and only logs.
* The consumer is a FIFO over the fake connector's successful puts; the
  consumer stage's ``finish_requests`` and its input deadline (the model's
  ``release`` and ``deadline``) happen on the next stage, outside the
  adapter, so they change nothing here.

What is compared after every step (`observe` against `expect`): the
connector's unread puts as (internal id, ``meta.finished``,
``meta.is_segment_finished``, empty payload), the internal ids with a
recorded send failure the scheduler has not collected yet
(``_send_failures``, peeked, not drained), every held
sender generation (``_sender_tokens``: external id, which token object it
is, ``cancelled``, ``terminal_pending``, ``in_flight``), the save queue
(internal id, token, ``is_finished``, ``is_segment_finished``), where the
save thread is parked, the watermarks ``_segment_generation`` and
``requests_num_chunks_sent`` per external id, and ``request_payload`` (the
processor records which request created each entry).

Saves carry what the scheduler would pass: the model request's confirmed
token count (one per save, from zero after a rebuilt prompt) and its
``_omni_segment_generation``; a segment end is ``save_async(...,
is_segment_finished=True)``. The save thread also parks between the send
and ``_send_single_request``'s ``finally`` once the connector was called
(the model's ``finish``).

Below the model's abstraction (it does not model connector keys), one
0.30.0 behaviour is not compared: a reused external id that joins a
generation its failed terminal left behind continues the old key counter
(its receiver polls key 0 first).

`MUTANTS` re-introduces bugs vLLM-Omni really had into the real class, for
the mutation check in ``tests/test_vllm_adapter.py``.

Every private vLLM-Omni name this project touches lives in this module, so a
new vLLM-Omni version means one file to change. ``vllm_omni`` is imported on
first use (15-50 s) and the classes are cached for the process.
"""

from __future__ import annotations

import logging
import threading
from collections import deque
from collections.abc import Callable, Hashable, Mapping
from dataclasses import dataclass, replace
from types import SimpleNamespace
from typing import Any

from statecore.adapter import Adapter, AdapterError, AdapterSpec, Baton
from statecore.system import Handle, StateView, System, SystemState, SystemStep

from .chunk_transfer import CHUNK, NAMESPACE, RELEASED_0_30_0, SEGMENT_END, TERMINAL, build

CTA_MODULE = "vllm_omni.distributed.omni_connectors.transfer_adapter.chunk_transfer_adapter"
BASE_MODULE = "vllm_omni.distributed.omni_connectors.transfer_adapter.base"
MIXIN_MODULE = "vllm_omni.core.sched.omni_scheduler_mixin"
CONNECTOR_BASE_MODULE = "vllm_omni.distributed.omni_connectors.connectors.base"
STAGE_ID = 0

KNOWN_0_30_0: Mapping[str, str] = {
    "chunk_delivered": (
        "a processor exception on a non-terminal chunk is only logged: nothing is put and no "
        "failure is recorded (CTA:801-806), so the consumer never gets that chunk and the "
        "request goes on as if it had been sent"
    ),
    "processor_failure_visible": (
        "a processor exception on a segment end or terminal is only logged; the boundary "
        "still goes out as an empty marker (CTA:801-809), which the consumer reads as a "
        "normal one and the seed 000 contract forbids"
    ),
    "terminal_delivered": (
        "a terminal that never goes out leaves the consumer to VLLM_OMNI_INPUT_WAIT_TIMEOUT_S: "
        "a failed terminal put (False or raising) is only recorded and "
        "_log_failed_chunk_sends only logs it (omni_scheduler_mixin.py:482-521), and a reused "
        "id's terminal is skipped as late while the old generation drains (CTA:412-430)"
    ),
    "failure_releases_consumer": (
        "recorded send failures are only logged by the scheduler, never turned into a "
        "request failure (omni_scheduler_mixin.py:482-521): the consumer is left to its "
        "input deadline"
    ),
    "no_current_save_dropped": (
        "a request that reuses an external id after a failed terminal is judged against "
        "the old request's watermarks: save_async skips its saves as late or as preemption "
        "replays, silently (CTA:412-463)"
    ),
    "reuse_isolation": (
        "a request that reuses an external id joins the old sender generation, and its "
        "processor reads the old request's request_payload (CTA:447-469)"
    ),
    "segment_order": (
        "a segment end whose put fails is only recorded; the next segment's chunks follow "
        "under the same connector key, so the consumer reads them as the old segment's"
    ),
    "no_sender_leak": (
        "a failed terminal (put False or raising) releases the fence but keeps the sender "
        "state until some finish_requests for the right external id (CTA:717-729, 883-900)"
    ),
}
"""Properties vLLM-Omni 0.30.0 is known to violate, with the reason."""


def fuzz_system_0_30_0() -> System:
    """vLLM-Omni 0.30.0 as released, at the bounds the real adapter is fuzzed at."""
    return build(
        replace(RELEASED_0_30_0, ids=2, generations=3, saves=3, segments=2, name="chunk_transfer")
    )


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

    class Harnessed(real_adapter):  # type: ignore[misc, valid-type]
        """The real adapter; only the connector factory is replaced (CTA:289-313)."""

        @classmethod
        def create_connector(cls, model_config: Any) -> Any:
            return model_config.statecore_connector

        def _send_single_request_for_generation(self, *args: Any, **kwargs: Any) -> Any:
            # The connector may hold the save thread between the send and
            # _send_single_request's finally (the model's ``finish`` step).
            after_send = getattr(self.connector, "after_send", None)
            try:
                return super()._send_single_request_for_generation(*args, **kwargs)
            finally:
                if after_send is not None:
                    after_send()

    class FakeConnector(connector_base):  # type: ignore[misc, valid-type]
        """A connector whose ``put`` parks on the baton; the consumer reads a FIFO."""

        put_called = False  # since the last after_send

        def __init__(self, binding: OmniChunkTransferAdapterBinding) -> None:
            self.binding = binding
            self.stage_id = STAGE_ID
            # (key, internal id, finished, segment finished, empty)
            self.sent: list[tuple[str, str, bool, bool, bool]] = []
            self.store: dict[str, Any] = {}
            self.unread: deque[tuple[str, str, bool, bool, bool]] = deque()
            self.closed = False

        def after_send(self) -> None:
            """Park between a send that reached ``put`` and its ``finally``."""
            if self.put_called:
                self.put_called = False
                self.binding.baton.park("finish")

        def put(
            self, from_stage: str, to_stage: str, put_key: str, data: Any
        ) -> tuple[bool, int, dict[str, Any] | None]:
            self.put_called = True
            outcome = self.binding.baton.park("put")
            if outcome == "raise":
                raise ConnectionError(f"statecore: connector put of {put_key} raised")
            if outcome == "false":
                return False, 0, None
            entry = (put_key, self.binding.flight_request_id(), *describe_payload(data))
            self.sent.append(entry)
            self.unread.append(entry)
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
        real_adapter, mixin._log_failed_chunk_sends, Harnessed, FakeConnector, payload,
        omni_request, sampling_params, request_status,
    )  # fmt: skip


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


def make_adapter(connector: Any, *, max_num_seqs: int = 8) -> Any:
    """A real adapter on `connector`, its background threads stopped and joined."""
    classes = real_classes()
    model_config = SimpleNamespace(
        stage_id=STAGE_ID,
        async_chunk=True,
        worker_type="ar",
        max_model_len=4096,
        stage_connector_config={"name": "StatecoreFakeConnector", "extra": {"role": "sender"}},
        custom_process_next_stage_input_func=None,
        statecore_connector=connector,
    )
    vllm_config = SimpleNamespace(
        model_config=model_config, scheduler_config=SimpleNamespace(max_num_seqs=max_num_seqs)
    )
    adapter = classes.harnessed(vllm_config)
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


class ProcessorFailure(RuntimeError):
    """What the processor raises when the model chooses ``process(outcome="raise")``."""


class _Unwind(BaseException):
    """Thrown into a parked worker at teardown so the real code unwinds."""


# -- model <-> implementation naming ---------------------------------------------------


def internal_id(request: Handle) -> str:
    """The internal (scheduler-side) request id of a model request handle."""
    return f"{request.key}-r{request.generation}"


def external_id(key: Hashable) -> str:
    """The external request id of a model key (``ext0``)."""
    return str(key)


PARKED_AT = {None: None, "begun": "processor", "putting": "put", "finishing": "finish"}
KIND_FLAGS = {"chunk": (False, False), "segment_end": (False, True), "terminal": (True, False)}
CANCELLED_STATES = frozenset({"draining", "retiring"})
TERMINAL_PENDING_STATES = frozenset({"terminal_pending", "draining"})


class OmniChunkTransferAdapterBinding(Adapter):
    """The chunk_transfer model's actions performed on the real 0.30.0 adapter."""

    name = "vllm-omni"
    known = KNOWN_0_30_0

    def __init__(self, *, timeout: float = 10.0) -> None:
        self.timeout = timeout
        self.baton = Baton(timeout)
        self.adapter: Any = None
        self.connector: Any = None
        self.requests: dict[Hashable, Any] = {}
        self.tokens: dict[str, list[object]] = {}
        self.flight: Mapping[str, Any] | None = None

    # -- lifecycle -----------------------------------------------------------------

    def setup(self, system: System) -> None:
        self.system = system
        self.classes = real_classes()
        self.baton = Baton(self.timeout)
        self.connector = self.classes.connector(self)
        self.adapter = make_adapter(self.connector)
        # Set the processor directly (the dotted-path config is CTA:179-184).
        self.adapter.custom_process_next_stage_input_func = self._processor
        self.requests = {}
        self.tokens = {}
        self.flight = None

    def teardown(self) -> None:
        for _ in range(8):  # a failing example may leave the worker parked
            if not self.baton.busy:
                break
            try:
                self.baton.resume(_Unwind())
            except Exception:
                break
        if self.adapter is not None:
            self.adapter.shutdown()

    # -- callbacks (run on the baton worker) ---------------------------------------

    def _processor(
        self,
        transfer_manager: Any,
        multimodal_output: Any,
        request: Any,
        is_finished: bool,
        new_token_ids: tuple[int, ...] = (),
    ) -> Any:
        outcome = self.baton.park("processor")
        # A producer keeps request-wide state in request_payload[ext], as the
        # bundled processors do (e.g. qwen3_omni.py:444-446).
        state = transfer_manager.request_payload.setdefault(request.external_req_id, {})
        state.setdefault(NAMESPACE, str(request.request_id))
        if outcome == "raise":
            raise ProcessorFailure(f"statecore: processor raised for {request.request_id}")
        if outcome == "none":
            return None
        return self.classes.payload(request_id=request.request_id, generated_len=1)

    def flight_request_id(self) -> str:
        """The internal id of the task the save thread runs (for the connector)."""
        if self.flight is None:
            raise AdapterError("vllm-omni: connector.put called with no task in flight")
        return str(self.flight["request"].request_id)

    # -- actions ---------------------------------------------------------------------

    def apply(self, step: SystemStep, before: SystemState) -> None:
        action = step.action
        handler: Callable[..., None] = getattr(self, f"_do_{action.name}")
        handler(step, **dict(action.args))

    def _do_new_request(self, step: SystemStep, ext: Hashable) -> None:
        generation = step.state.slots[self.system.slot_index("request", ext)].generation
        handle = Handle("request", ext, generation)
        request = self.classes.request(
            internal_id(handle),
            prompt_token_ids=[1, 2, 3],
            sampling_params=self.classes.sampling_params(max_tokens=16),
            pooling_params=None,
            external_req_id=external_id(ext),
        )
        request.status = self.classes.status.RUNNING
        self.requests[ext] = request

    def _request_snapshot(self, step: SystemStep, ext: Hashable) -> Any:
        snap = step.state.slots[self.system.slot_index("request", ext)].snapshot
        if snap is None:
            raise AdapterError(f"vllm-omni: no model request for {ext!r}")
        return snap

    def _save(self, step: SystemStep, ext: Hashable, kind: str) -> None:
        # The model's request says what the scheduler would pass: its confirmed
        # token count (one per save, from zero after a rebuilt prompt) and its
        # _omni_segment_generation (bumped by every streaming update).
        request = self.requests[ext]
        snap = self._request_snapshot(step, ext)
        request.num_computed_tokens = snap.tokens
        request._omni_segment_generation = snap.ends - (kind == SEGMENT_END)
        if kind == TERMINAL:
            request.status = self.classes.status.FINISHED_STOPPED
        self.adapter.save_async(None, request, is_segment_finished=kind == SEGMENT_END)

    def _do_save_chunk(self, step: SystemStep, ext: Hashable) -> None:
        self._save(step, ext, CHUNK)

    def _do_save_segment_end(self, step: SystemStep, ext: Hashable) -> None:
        self._save(step, ext, SEGMENT_END)

    def _do_save_terminal(self, step: SystemStep, ext: Hashable) -> None:
        self._save(step, ext, TERMINAL)

    def _do_next_segment(self, step: SystemStep, ext: Hashable) -> None:
        # A streaming update: _omni_segment_generation += 1 and a rebuilt prompt
        # (MIX:196-204). Nothing reaches the adapter until the next save.
        request = self.requests[ext]
        request._omni_segment_generation = self._request_snapshot(step, ext).ends
        request.num_computed_tokens = 0

    def _do_abort(self, step: SystemStep, ext: Hashable) -> None:
        # MIX.finish_requests -> adapter.finish_requests, before vLLM's own
        # Scheduler.finish_requests sets the status.
        request = self.requests[ext]
        status = self.classes.status.FINISHED_ABORTED
        self.adapter.finish_requests([request.request_id], status, {request.request_id: request})
        request.status = status

    def _do_collect_failures(self, step: SystemStep) -> None:
        # The scheduler's sweep, MIX._log_failed_chunk_sends, on a stand-in
        # scheduler: it drains _send_failures and logs each one.
        scheduler = SimpleNamespace(
            chunk_transfer_adapter=self.adapter,
            requests={r.request_id: r for r in self.requests.values() if not r.is_finished()},
        )
        self.classes.log_failed_chunk_sends(scheduler)

    def _do_release(self, step: SystemStep, ext: Hashable) -> None:
        pass  # the consumer stage's finish_requests: the next stage, not this adapter

    def _do_deadline(self, step: SystemStep, ext: Hashable) -> None:
        pass  # the consumer stage's input deadline: the next stage, not this adapter

    def _do_begin(self, step: SystemStep) -> None:
        self._expect_parked(None)
        if not self.adapter._pending_save_reqs:
            raise AdapterError("vllm-omni: begin with an empty save queue")
        task = self.adapter._pending_save_reqs.popleft()
        self.flight = task
        self.baton.start(lambda: run_save_task(self.adapter, task))
        self._settle()

    def _do_process(self, step: SystemStep, outcome: str) -> None:
        self._expect_parked("processor")
        self.baton.resume(outcome)
        self._settle()

    def _do_put(self, step: SystemStep, outcome: str) -> None:
        self._expect_parked("put")
        self.baton.resume(outcome)
        self._settle()

    def _do_finish(self, step: SystemStep) -> None:
        self._expect_parked("finish")
        self.baton.resume(None)
        self._settle()

    def _do_receive(self, step: SystemStep) -> None:
        if not self.connector.unread:
            raise AdapterError("vllm-omni: receive with nothing put")
        self.connector.unread.popleft()

    def _expect_parked(self, point: str | None) -> None:
        if self.baton.parked_at != point:
            raise AdapterError(
                f"vllm-omni: the save thread is parked at {self.baton.parked_at!r}, not {point!r}"
            )

    def _settle(self) -> None:
        if not self.baton.busy:
            self.flight = None
            self.baton.result()  # run_save_task catches what save_loop catches

    # -- observation ---------------------------------------------------------------

    def _token_generation(self, ext: str, token: object) -> int:
        seen = self.tokens.setdefault(ext, [])
        for i, known in enumerate(seen):
            if known is token:
                return i + 1
        seen.append(token)
        return len(seen)

    def observe(self) -> Hashable:
        adapter = self.adapter
        senders = tuple(
            sorted(
                (
                    ext,
                    self._token_generation(ext, token),
                    bool(token.cancelled),
                    bool(token.terminal_pending),
                    bool(token.in_flight),
                )
                for ext, token in adapter._sender_tokens.items()
            )
        )
        queue = tuple(
            (
                str(task["request"].request_id),
                self._token_generation(task["request"].external_req_id, task["sender_token"]),
                bool(task["is_finished"]),
                bool(task["is_segment_finished"]),
            )
            for task in adapter._pending_save_reqs
        )
        watermarks = tuple(
            sorted(
                (
                    ext,
                    adapter._segment_generation.get(ext),
                    adapter.requests_num_chunks_sent.get(ext),
                )
                for ext in {*adapter._segment_generation, *adapter.requests_num_chunks_sent}
            )
        )
        states = tuple(
            sorted(
                (ext, tuple(sorted(state.items())))
                for ext, state in adapter.request_payload.items()
            )
        )
        return (
            ("unread", tuple(entry[1:] for entry in self.connector.unread)),
            ("failures", frozenset(adapter._send_failures)),
            ("senders", senders),
            ("queue", queue),
            ("parked", self.baton.parked_at),
            ("watermarks", watermarks),
            ("request_payload", states),
        )

    def expect(self, view: StateView) -> Hashable:
        senders = tuple(
            sorted(
                (
                    external_id(handle.key),
                    handle.generation,
                    snap.state in CANCELLED_STATES,
                    snap.state in TERMINAL_PENDING_STATES,
                    bool(snap.in_flight),
                )
                for handle, snap in view.live("sender")
            )
        )
        queue = tuple(
            (internal_id(request), token.generation, *KIND_FLAGS[kind])
            for token, request, kind, _, _ in view.get("queue")
        )
        unread = tuple(
            (internal_id(request), *KIND_FLAGS[kind], empty)
            for request, kind, _, empty, _ in view.get("mailbox")
        )
        watermarks = tuple(
            sorted(
                (external_id(handle.key), snap.expected, snap.sent)
                for handle, snap in view.live("watermark")
                if (snap.expected, snap.sent) != (None, None)
            )
        )
        states = tuple(
            sorted(
                (external_id(state.key), ((NAMESPACE, internal_id(request)),))
                for state, request in view.get("made")
            )
        )
        flight = view.get("in_flight")
        return (
            ("unread", unread),
            ("failures", frozenset(internal_id(r) for r in view.get("send_failures"))),
            ("senders", senders),
            ("queue", queue),
            ("parked", PARKED_AT[None if flight is None else flight[1]]),
            ("watermarks", watermarks),
            ("request_payload", states),
        )


# -- mutants: bugs vLLM-Omni really had, re-introduced into the real class ----------------


@dataclass(frozen=True)
class Mutant:
    """A bug vLLM-Omni had, as replacement attributes for the real adapter class.

    ``mutant.patches(cls)`` returns ``{attribute: replacement}`` built from
    `cls`'s current attributes; set them (``monkeypatch.setattr``) to run the
    real adapter with the bug back in.
    """

    name: str
    doc: str
    patches: Callable[[type[Any]], dict[str, Any]]


def _pre_6670_cleanup_sender(cls: type[Any]) -> dict[str, Any]:
    # CTA:977-1012 without the terminal_pending branch (before vllm-omni #6670):
    # a queued terminal loses its generation and is discarded as stale.
    def cleanup_sender(self: Any, external_req_id: str) -> None:
        with self._sender_state_lock:
            sender_token = self._sender_tokens.get(external_req_id)
            if sender_token is None:
                self._clear_sender_state_locked(external_req_id)
                return
            sender_token.cancelled = True
            if sender_token.in_flight:
                return
            self._queue_shm_cleanup_locked(external_req_id, sender_token)
            self._sender_tokens.pop(external_req_id, None)
            self._clear_sender_state_locked(external_req_id)

    return {"cleanup_sender": cleanup_sender}


def _false_put_unrecorded(cls: type[Any]) -> dict[str, Any]:
    # CTA:883-900 before vllm-omni #4855 (R1.2): a put returning False is only logged.
    original = cls.record_send_failure

    def record_send_failure(self: Any, request_id: str | None, reason: str) -> None:
        if reason == "connector.put reported failure":
            return
        original(self, request_id, reason)

    return {"record_send_failure": record_send_failure}


def _fence_kept_on_raise(cls: type[Any]) -> dict[str, Any]:
    # CTA:717-722 releases the terminal fence on every exit path; here a raising
    # put skips it, so the deferred cleanup never runs and the state leaks.
    send = cls._send_single_request_for_generation
    release = cls._release_terminal_fence
    raised = threading.local()

    def _send_single_request_for_generation(self: Any, *args: Any, **kwargs: Any) -> Any:
        try:
            return send(self, *args, **kwargs)
        except Exception:
            raised.flag = True
            raise

    def _release_terminal_fence(self: Any, *args: Any, **kwargs: Any) -> None:
        if getattr(raised, "flag", False):
            raised.flag = False
            return
        release(self, *args, **kwargs)

    return {
        "_send_single_request_for_generation": _send_single_request_for_generation,
        "_release_terminal_fence": _release_terminal_fence,
    }


def _identity_dropped(cls: type[Any]) -> dict[str, Any]:
    # The fence keyed by external id instead of generation identity (CTA:698-709
    # compares ``_sender_tokens.get(ext) is sender_token``): a stale queued task
    # of a retired generation runs as the current generation after the id is reused.
    send = cls._send_single_request

    def _send_single_request(self: Any, task: dict[str, Any]) -> Any:
        if "sender_token" in task:
            current = self._sender_tokens.get(task["request"].external_req_id)
            if current is not None:
                task = {**task, "sender_token": current}
        return send(self, task)

    return {"_send_single_request": _send_single_request}


def _cancelled_vetoes_terminal(cls: type[Any]) -> dict[str, Any]:
    # CTA:751-762 without ``is_terminal or``: the pre-put check lets ``cancelled``
    # veto the terminal (seed 000 F1's fence), so cleanup while a terminal is
    # pending loses it.
    def _sender_generation_is_active(
        self: Any, external_req_id: str, sender_token: Any, *, is_terminal: bool = False
    ) -> bool:
        with self._sender_state_lock:
            current = self._sender_tokens.get(external_req_id) is sender_token
            return current and not sender_token.cancelled

    return {"_sender_generation_is_active": _sender_generation_is_active}


def _token_watermark_kept(cls: type[Any]) -> dict[str, Any]:
    # CTA:486 removed: a queued segment end keeps requests_num_chunks_sent at
    # its confirmed count, so the next segment's saves, whose counts restart
    # after the rebuilt prompt, are skipped silently as preemption replays.
    save_async = cls.save_async

    def save_async_keeping_watermark(self: Any, *args: Any, **kwargs: Any) -> Any:
        request = kwargs.get("request", args[1] if len(args) > 1 else None)
        queued = len(self._pending_save_reqs)
        result = save_async(self, *args, **kwargs)
        boundary = kwargs.get("is_segment_finished", False)
        if boundary and request is not None and len(self._pending_save_reqs) > queued:
            confirmed = self._confirmed_num_computed_tokens(request)
            self.requests_num_chunks_sent[request.external_req_id] = confirmed
        return result

    return {"save_async": save_async_keeping_watermark}


def _segment_end_pops_payload(cls: type[Any]) -> dict[str, Any]:
    # The segment-end post-processing (CTA:902-909) also pops request_payload:
    # the producer loses its request-wide state at every segment boundary.
    send = cls._send_single_request_for_generation

    def _send_single_request_for_generation(
        self: Any, task: dict[str, Any], *args: Any, **kwargs: Any
    ) -> Any:
        result = send(self, task, *args, **kwargs)
        if task.get("is_segment_finished"):
            with self._sender_state_lock:
                self.request_payload.pop(task["request"].external_req_id, None)
        return result

    return {"_send_single_request_for_generation": _send_single_request_for_generation}


MUTANTS: tuple[Mutant, ...] = (
    Mutant(
        "cleanup_drops_queued_terminal",
        "cleanup_sender reclaims a generation whose terminal is still queued (#6670)",
        _pre_6670_cleanup_sender,
    ),
    Mutant(
        "false_put_unrecorded",
        "a connector put that returns False is not recorded as a send failure (#4855)",
        _false_put_unrecorded,
    ),
    Mutant(
        "fence_kept_on_raising_put",
        "a raising terminal put does not release the fence: deferred cleanup never runs",
        _fence_kept_on_raise,
    ),
    Mutant(
        "identity_check_dropped",
        "the fence is keyed by external id: a retired generation's queued task runs after reuse",
        _identity_dropped,
    ),
    Mutant(
        "cancelled_vetoes_terminal",
        "cancelled vetoes the terminal before the put (seed 000 F1)",
        _cancelled_vetoes_terminal,
    ),
    Mutant(
        "token_watermark_kept_at_segment_end",
        "a segment end keeps requests_num_chunks_sent (CTA:486 removed)",
        _token_watermark_kept,
    ),
    Mutant(
        "segment_end_pops_request_payload",
        "segment-end post-processing pops request_payload (seed 000: segment completion "
        "must keep request-wide state)",
        _segment_end_pops_payload,
    ),
)
"""Bugs vLLM-Omni had, and regressions of the code that fixed them (the last two need a
segment boundary); the fuzzer must find each against the patched real code."""


ADAPTERS: tuple[AdapterSpec, ...] = (
    AdapterSpec(
        name="vllm-omni",
        target="chunk_transfer",
        factory=f"{__name__}:OmniChunkTransferAdapterBinding",
        system=f"{__name__}:fuzz_system_0_30_0",
        install="bash scripts/install-vllm-stack.sh  (or: tox -e vllm)",
        doc="the real OmniChunkTransferAdapter of vllm-omni 0.30.0",
    ),
)
"""The adapter as the CLI registers it (``statecore.models.ADAPTERS`` may gather it)."""

SYSTEM = f"{__name__}:fuzz_system_0_30_0"
"""Where the CLI finds the model configuration this adapter conforms to."""
