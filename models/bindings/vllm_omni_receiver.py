"""The ``vllm-omni-receiver`` adapter: the `receiver_system` model bound to the real code.

`ReceiverBinding` drives the receiving side of vLLM-Omni 0.30.0's
``OmniChunkTransferAdapter`` ("CTA"), built for stage 1 in the connector
role ``receiver``, in lockstep with `statecore.models.receiver`:

* ``put``: the upstream stage's put of the next chunk of the current
  incarnation's stream, stored under its key ``{ext}_0_{n}`` as the wire
  delivers it (a dict whose ``meta`` carries ``finished`` and
  ``is_segment_finished``);
* ``load_async``: the real ``load_async(request)``; ``resume_segment``: the
  scheduler's ``segment_finished_requests.discard`` when the next segment
  starts (MIX:825-838); ``cleanup``: the real ``cleanup_receiver``;
  ``new_request``: a new request object under the same id, whose upstream
  starts a fresh stream;
* ``get_start`` / ``get_start_empty``: one pass of ``recv_loop`` (BASE:52-82)
  over ``_pending_load_reqs``: each entry is polled with the real
  ``_poll_single_request`` on a `Baton` worker, a stale one returns at once,
  and the registered one parks inside ``connector.get`` (which has already
  looked the key up); ``get_return`` / ``get_return_stale`` let it return,
  and an entry whose poll returns False is queued again, as ``recv_loop``
  does. A cleanup can run while the worker is parked there.

The connector is a fake whose ``get`` parks; a real ``SharedMemoryConnector``
adds nothing the receiver's lifecycle reads (its ``get`` returns the same
``(payload, size)`` or None).

Compared after every step: the registered entry (which ``_LoadEntry`` object
it is), ``get_req_chunk``, the two done flags (``upstream_exhausted_requests``,
``segment_finished_requests``) and where the recv thread is parked, against
the ``receiver_state`` and ``load_entry`` machines.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable, Hashable, Mapping
from functools import partial
from typing import Any

from statecore.adapter import Adapter, AdapterError, Baton
from statecore.system import StateView, System, SystemState, SystemStep

from ..receiver import DATA, FINISHED, SEGMENT_END, Shared
from .vllm_omni_harness import CONNECTOR_BASE_MODULE, make_adapter, new_request, real_classes

__all__ = ["GenerationReceiverBinding", "ReceiverBinding"]

STAGE = 1  # the receiving stage; its upstream is stage 0
REQUEST_ID = "req0"


_CONNECTOR: type[Any] | None = None


def connector_class() -> type[Any]:
    """A connector whose ``get`` looks its key up, then parks the recv thread."""
    global _CONNECTOR
    if _CONNECTOR is None:
        base = importlib.import_module(CONNECTOR_BASE_MODULE).OmniConnectorBase

        class ParkingGet(base):  # type: ignore[misc, valid-type]
            stage_id = STAGE

            def __init__(self, baton: Baton) -> None:
                self.baton = baton
                self.store: dict[str, Any] = {}
                self.asked: str | None = None  # the key of the get in flight

            def put(self, *args: Any, **kwargs: Any) -> Any:
                raise AdapterError("vllm-omni-receiver: the receiving stage put a chunk")

            def get(
                self, from_stage: str, to_stage: str, get_key: str, metadata: Any = None
            ) -> Any:
                found = self.store.get(get_key)
                self.asked = get_key
                try:
                    self.baton.park("get")
                finally:
                    self.asked = None
                return None if found is None else (found, 1)

            def cleanup(self, request_id: str) -> None:
                self.store.pop(request_id, None)

            def health(self) -> dict[str, Any]:
                return {"status": "ok"}

            def close(self) -> None:
                pass

        _CONNECTOR = ParkingGet
    return _CONNECTOR


class ReceiverBinding(Adapter):
    """The receiver_system model's actions performed on the real 0.30.0 adapter.

    `worker_type` is the receiving model's (``ar``: the chunk's meta and a
    prompt update; ``generation``: codec frames become the prompt, so each
    data chunk carries one frame).
    """

    name = "vllm-omni-receiver"
    known: Mapping[str, str] = {}
    worker_type = "ar"

    def __init__(self, *, timeout: float = 10.0) -> None:
        self.timeout = timeout
        self.baton = Baton(timeout)
        self.adapter: Any = None
        self.connector: Any = None
        self.request: Any = None
        self.entries: list[object] = []  # every _LoadEntry seen, in order: its generation
        self.polling: Any = None  # the entry whose poll is parked in connector.get

    def make_adapter(self) -> Any:
        """The adapter under test, for the receiving stage, its threads stopped."""
        return make_adapter(
            self.connector, stage_id=STAGE, role="receiver", worker_type=self.worker_type
        )

    def setup(self, system: System) -> None:
        self.system = system
        self.classes = real_classes()
        self.baton = Baton(self.timeout)
        self.connector = connector_class()(self.baton)
        self.adapter = self.make_adapter()
        self.request = self._new_request()
        self.entries = []
        self.polling = None

    def teardown(self) -> None:
        self.baton.release()  # a failing example may leave the recv thread parked in get
        if self.adapter is not None:
            self.adapter.shutdown()

    def _new_request(self) -> Any:
        request = new_request(self.classes, REQUEST_ID, REQUEST_ID, "WAITING")
        request.resumable = True
        return request

    # -- actions ---------------------------------------------------------------------

    def apply(self, step: SystemStep, before: SystemState) -> None:
        action = step.action
        handler: Callable[..., None] = getattr(self, f"_do_{action.name}")
        handler(step, **dict(action.args))

    def _do_put(self, step: SystemStep, req: Hashable) -> None:
        chunks = self.system.view(step.state).g.connector
        kind = chunks[-1].kind
        meta = {"finished": kind == FINISHED, "is_segment_finished": kind == SEGMENT_END}
        payload: dict[str, Any] = {"meta": meta}
        if kind == DATA:
            payload["codes"] = {"audio": [len(chunks)]}  # one codec frame
        self.connector.store[f"{REQUEST_ID}_{STAGE - 1}_{len(chunks) - 1}"] = payload

    def _do_new_request(self, step: SystemStep, req: Hashable) -> None:
        self.request = self._new_request()
        self.connector.store.clear()  # the new incarnation's upstream starts its own stream

    def _do_load_async(self, step: SystemStep, req: Hashable) -> None:
        self.adapter.load_async(self.request)

    def _do_resume_segment(self, step: SystemStep, req: Hashable) -> None:
        self.adapter.segment_finished_requests.discard(REQUEST_ID)

    def _do_cleanup(self, step: SystemStep, req: Hashable) -> None:
        self.adapter.cleanup_receiver(REQUEST_ID)

    def _do_get_start(self, step: SystemStep, req: Hashable) -> None:
        self._poll_until_parked()

    def _do_get_start_empty(self, step: SystemStep, req: Hashable) -> None:
        self._poll_until_parked()

    def _poll_until_parked(self) -> None:
        """``recv_loop``'s pass: stale entries return at once; the live one parks in get."""
        pending = self.adapter._pending_load_reqs
        while pending:
            entry = pending.popleft()
            if self.baton.start(partial(self.adapter._poll_single_request, entry)) == "get":
                self.polling = entry
                return
            self._settle(entry)
        raise AdapterError("vllm-omni-receiver: no pending entry reached connector.get")

    def _do_get_return(self, step: SystemStep) -> None:
        self._return()

    def _do_get_return_stale(self, step: SystemStep) -> None:
        self._return()

    def _return(self) -> None:
        if self.baton.parked_at != "get":
            raise AdapterError("vllm-omni-receiver: the recv thread is not in connector.get")
        if self.baton.resume(None) is not None:
            raise AdapterError(f"vllm-omni-receiver: the poll parked at {self.baton.parked_at}")
        entry, self.polling = self.polling, None
        self._settle(entry)

    def _settle(self, entry: Any) -> None:
        """A poll returned: False queues the entry again (``recv_loop``)."""
        if not self.baton.result():
            self.adapter._pending_load_reqs.append(entry)

    # -- observation -------------------------------------------------------------------

    def _generation(self, entry: object | None) -> int | None:
        if entry is None:
            return None
        for i, known in enumerate(self.entries):
            if known is entry:
                return i + 1
        self.entries.append(entry)
        return len(self.entries)

    def observe(self) -> Hashable:
        adapter = self.adapter
        registered = adapter._registered_load_entries.get(REQUEST_ID)
        asked = self.connector.asked
        return (
            ("registered", self._generation(registered)),
            ("chunk", adapter.get_req_chunk.get(REQUEST_ID, 0)),
            ("exhausted", REQUEST_ID in adapter.upstream_exhausted_requests),
            ("segment_done", REQUEST_ID in adapter.segment_finished_requests),
            (
                "getting",
                None
                if asked is None
                else (self._generation(self.polling), int(asked.rsplit("_", 1)[1])),
            ),
        )

    def expect(self, view: StateView[Shared]) -> Hashable:
        entries = [handle.generation for handle, _ in view.live("entry")]
        states = [snap for _, snap in view.live("receiver")]
        state = states[0] if states else None
        flight = view.g.in_flight
        return (
            ("registered", entries[0] if entries else None),
            ("chunk", 0 if state is None else state.chunk),
            ("exhausted", state is not None and state.state == "exhausted"),
            ("segment_done", state is not None and state.state == "segment_done"),
            ("getting", None if flight is None else (flight.entry.generation, flight.chunk_id)),
        )


class GenerationReceiverBinding(ReceiverBinding):
    """The same, for a generation-mode receiving stage (a codec decoder, say)."""

    name = "vllm-omni-receiver-generation"
    worker_type = "generation"
