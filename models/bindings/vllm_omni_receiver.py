"""The ``vllm-omni-receiver`` adapter: the `receiver_system` model bound to the real code.

`ReceiverBinding` drives the receiving side of vLLM-Omni 0.30.0's
``OmniChunkTransferAdapter`` ("CTA"), built for stage 1 in the connector
role ``receiver``, in lockstep with `statecore.models.receiver`:

* ``put``: the upstream stage's put of the next chunk of the current
  incarnation's stream, stored under its key ``{ext}_0_{n}`` as the wire
  delivers it, in one of the shapes of `vllm_omni_receiver_payloads` (``meta``
  missing or not a dict, tensor flags, codec frames as a list, a 1-D or 2-D
  tensor or a read-only mapping, a full snapshot), chosen by incarnation and kind;
* ``load_async``: the real ``load_async(request)`` (the second incarnation's
  request has no ``additional_information``, as a plain vLLM ``Request``);
  ``resume_segment``: the scheduler's ``segment_finished_requests.discard``
  when the next segment starts (MIX:825-838); ``cleanup``: one of the
  scheduler's four ways of ending a request's receiving (`CLEANUPS`:
  ``cleanup_receiver``, ``cleanup`` without an external id, ``finish_requests``
  with the request and with it already freed); ``new_request``: a new request
  object under the same id, whose upstream starts a fresh stream;
* ``get_start`` / ``get_start_empty``: one pass of ``recv_loop`` (BASE:52-82)
  over ``_pending_load_reqs``: each entry is polled with the real
  ``_poll_single_request`` on a `Baton` worker, a stale one returns at once,
  and the registered one parks inside ``connector.get`` (which has already
  looked the key up); ``get_return`` / ``get_return_stale`` let it return,
  and an entry whose poll returns False is queued again, as ``recv_loop``
  does. A cleanup can run while the worker is parked there. A get that finds
  nothing says so in turn as None, an exception or an empty payload
  (`MISSES`): the model folds all three into "nothing yet".

The connector is a fake whose ``get`` parks; a real ``SharedMemoryConnector``
adds nothing the receiver's lifecycle reads (its ``get`` returns the same
``(payload, size)`` or None).

Compared after every step: the registered entry (which ``_LoadEntry`` object
it is, and whether it is queued in ``_pending_load_reqs`` or in ``get``),
``get_req_chunk``, the two done flags (``upstream_exhausted_requests``,
``segment_finished_requests``) and ``is_done_receiving_chunks``, where the
recv thread is parked, and the request fields a commit writes (prompt,
``num_prompt_tokens``, ``additional_information``, ``model_intermediate_buffer``,
``resumable``: `vllm_omni_receiver_payloads.expected_request`), against the
``receiver_state`` and ``load_entry`` machines and the chunks they committed.

Not reached here: ``load_async`` on stage 0 or on a stage that receives no
chunks (CTA:329-330: the receiving stage is stage 1), a second ``load_async``
while a registration is out (CTA:335-336: the model's scheduler registers only
a request that is not waiting), and the generation-mode empty chunk between
frames (consumed, not made ready: CTA:669-674), which the model leaves out.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable, Hashable, Mapping
from functools import partial
from typing import Any

from statecore.adapter import Adapter, AdapterError, Baton
from statecore.system import StateView, System, SystemState, SystemStep

from ..receiver import Shared
from .vllm_omni_harness import CONNECTOR_BASE_MODULE, make_adapter, new_request, real_classes
from .vllm_omni_receiver_payloads import (
    MISSING,
    expected_request,
    initial_info,
    observed_request,
    payload,
)

__all__ = ["GenerationReceiverBinding", "ReceiverBinding"]

STAGE = 1  # the receiving stage; its upstream is stage 0
REQUEST_ID = "req0"

MISSES = ("none", "raise", "empty")
"""How ``connector.get`` says a key holds nothing yet, taken in turn: None, an
exception (CTA:515-520), an empty payload (not committed, CTA:556-557, 682)."""

CLEANUPS = ("cleanup_receiver", "cleanup", "finish_requests", "finish_requests_freed")
"""How the scheduler ends a request's receiving, by the incarnation and the chunks it
committed (so each is met at every point of the stream): ``cleanup_receiver(id)``
(the AR scheduler's failed loads), ``cleanup(id)`` with no external id (CTA:1045-1064:
looked up in ``request_ids_mapping``), ``finish_requests(id, FINISHED_ABORTED,
requests)`` (the mixin's finish path) and the same once the scheduler has already freed
the request (not in ``requests``: CTA:1601-1604)."""


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
                self.misses = 0  # gets that found nothing: each says so its own way

            def put(self, *args: Any, **kwargs: Any) -> Any:
                raise AdapterError("vllm-omni-receiver: the receiving stage put a chunk")

            def get(
                self, from_stage: str, to_stage: str, get_key: str, metadata: Any = None
            ) -> Any:
                found = self.store.get(get_key)
                miss = None
                if found is None:
                    self.misses += 1
                    miss = MISSES[self.misses % len(MISSES)]
                self.asked = get_key
                try:
                    self.baton.park("get")
                finally:
                    self.asked = None
                if miss == "raise":
                    raise ConnectionError(f"statecore: nothing under {get_key} yet")
                if miss == "empty":
                    return ({}, 0)
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
        self.incarnation = 1  # the request object's incarnation of REQUEST_ID
        self.cleaned = False  # its receiving was ended: its fields are no longer compared
        self.before: SystemState | None = None  # the model state the step started from
        self.tensor: Callable[[Any], Any] = list  # torch.tensor, from setup

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
        self.tensor = importlib.import_module("torch").tensor
        self.incarnation, self.cleaned = 1, False
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
        info = initial_info(self.incarnation)
        if info == MISSING:
            del request.additional_information
        else:
            request.additional_information = info
        return request

    # -- actions ---------------------------------------------------------------------

    def apply(self, step: SystemStep, before: SystemState) -> None:
        self.before = before
        action = step.action
        handler: Callable[..., None] = getattr(self, f"_do_{action.name}")
        handler(step, **dict(action.args))

    def _do_put(self, step: SystemStep, req: Hashable) -> None:
        chunks = self.system.view(step.state).g.connector
        index = len(chunks) - 1
        data = payload(chunks[index], index, self.tensor)
        self.connector.store[f"{REQUEST_ID}_{STAGE - 1}_{index}"] = data

    def _do_new_request(self, step: SystemStep, req: Hashable) -> None:
        self.incarnation += 1
        self.cleaned = False
        self.request = self._new_request()
        self.connector.store.clear()  # the new incarnation's upstream starts its own stream

    def _do_load_async(self, step: SystemStep, req: Hashable) -> None:
        self.adapter.load_async(self.request)

    def _do_resume_segment(self, step: SystemStep, req: Hashable) -> None:
        self.adapter.segment_finished_requests.discard(REQUEST_ID)

    def _do_cleanup(self, step: SystemStep, req: Hashable) -> None:
        assert self.before is not None
        state = self.system.view(self.before).snapshot("receiver", req)
        assert state is not None  # the model cleans a live incarnation up
        how = CLEANUPS[(2 * self.incarnation + state.chunk) % len(CLEANUPS)]
        self.cleaned = True
        adapter, aborted = self.adapter, self.classes.status.FINISHED_ABORTED
        if how == "cleanup_receiver":
            adapter.cleanup_receiver(REQUEST_ID)
        elif how == "cleanup":
            adapter.cleanup(REQUEST_ID)
        elif how == "finish_requests":
            adapter.finish_requests(REQUEST_ID, aborted, {REQUEST_ID: self.request})
        else:
            adapter.finish_requests([REQUEST_ID], aborted, {})

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
        if registered is None:
            entry = None
        elif any(queued is registered for queued in adapter._pending_load_reqs):
            entry = "queued"
        else:
            entry = "getting" if registered is self.polling else "lost"
        return (
            ("registered", self._generation(registered)),
            ("entry", entry),
            ("chunk", adapter.get_req_chunk.get(REQUEST_ID, 0)),
            ("exhausted", REQUEST_ID in adapter.upstream_exhausted_requests),
            ("segment_done", REQUEST_ID in adapter.segment_finished_requests),
            ("done", adapter.is_done_receiving_chunks(REQUEST_ID)),
            (
                "getting",
                None
                if asked is None
                else (self._generation(self.polling), int(asked.rsplit("_", 1)[1])),
            ),
            ("request", None if self.cleaned else observed_request(self.request)),
        )

    def expect(self, view: StateView[Shared]) -> Hashable:
        entries = [(handle.generation, snap.state) for handle, snap in view.live("entry")]
        states = [(handle, snap) for handle, snap in view.live("receiver")]
        handle, state = states[0] if states else (None, None)
        flight = view.g.in_flight
        request = None
        if handle is not None and state is not None:
            chunks = view.g.connector
            request = expected_request(
                handle.generation,
                state.waiting or state.chunk > 0,
                [(i, chunks[i]) for i in range(state.chunk)],
                generation_mode=self.worker_type == "generation",
                tensor=self.tensor,
            )
        return (
            ("registered", entries[0][0] if entries else None),
            ("entry", entries[0][1] if entries else None),
            ("chunk", 0 if state is None else state.chunk),
            ("exhausted", state is not None and state.state == "exhausted"),
            ("segment_done", state is not None and state.state == "segment_done"),
            ("done", state is not None and state.state in ("exhausted", "segment_done")),
            ("getting", None if flight is None else (flight.entry.generation, flight.chunk_id)),
            ("request", request),
        )


class GenerationReceiverBinding(ReceiverBinding):
    """The same, for a generation-mode receiving stage (a codec decoder, say)."""

    name = "vllm-omni-receiver-generation"
    worker_type = "generation"
