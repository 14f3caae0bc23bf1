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
  schedulers' ways of ending a request's receiving (`CLEANUPS`:
  ``cleanup_receiver``, ``cleanup`` with and without an external id,
  ``finish_requests`` with the request and with it already freed; and, every
  other time the upstream is exhausted, the generation scheduler's real
  ``update_from_output`` finishing the request, GS:660-717); ``new_request``: a new request
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

from ..receiver import FINISHED, Shared
from .vllm_omni_harness import CONNECTOR_BASE_MODULE, make_adapter, new_request, real_classes
from .vllm_omni_receiver_payloads import (
    MISSING,
    expected_request,
    freeze,
    initial_info,
    observed_request,
    payload,
)
from .vllm_omni_receiver_scheduler import ChunkScheduler
from .vllm_omni_scheduler import generation_step, scheduler_stand_in

__all__ = ["GenerationReceiverBinding", "ReceiverBinding"]

STAGE = 1  # the receiving stage; its upstream is stage 0
REQUEST_ID = "req0"

EXHAUSTED = "exhausted"
"""The ``receiver_state`` machine's state once the upstream's terminal chunk is committed."""

MISSES = ("none", "raise", "empty")
"""How ``connector.get`` says a key holds nothing yet, taken in turn: None, an
exception (CTA:515-520), an empty payload (not committed, CTA:556-557, 682)."""

CLEANUPS = (
    "cleanup_receiver",
    "cleanup",
    "cleanup_no_external",
    "finish_requests",
    "finish_mid_step",
    "finish_all",
    "freed",
)
"""How the scheduler ends a request's receiving, by the incarnation and the chunks it
committed (so each is met), each followed by vLLM freeing the request:
``cleanup_receiver(id)`` (the AR scheduler's failed loads), ``cleanup(id, ext)`` (the
generation scheduler's for a failed KV load, GS:800-805; its finish of an exhausted
request is its real ``update_from_output``, `generation_step`, every other time the
model ends one), ``cleanup(id)`` for a request without an external id
(CTA:1045-1064: looked up in ``request_ids_mapping``), ``finish_requests(id,
FINISHED_ABORTED, requests)`` (the mixin's finish path, between steps),
``finish_requests({id}, FINISHED_ERROR, requests)`` between
``process_pending_chunks`` and ``restore_queues`` (a chunk timeout or receive failure,
MIX:386-392: the request is parked in the adapter's deque, and its status goes back to
the queue it was parked from, CTA:1610-1613), and ``finish_requests([id], ...)`` once
vLLM has freed the request (not in ``requests``: CTA:1601-1604); between the last two,
``finish_requests(None, ...)``, the mixin's "finish every request" (CTA:1585-1586)."""


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
                    miss = MISSES[self.misses % len(MISSES)]
                    self.misses += 1
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
    active_stream_window = 0  # model_config.active_stream_window: 0 is unbounded

    def __init__(self, *, timeout: float = 10.0) -> None:
        self.timeout = timeout
        self.baton = Baton(timeout)
        self.adapter: Any = None
        self.connector: Any = None
        self.request: Any = None
        self.entries: list[object] = []  # every _LoadEntry seen, in order: its generation
        self.polling: Any = None  # the entry whose poll is parked in connector.get
        self.incarnation = 1  # the request object's incarnation of REQUEST_ID
        self.exhausted_ends = 0  # cleanups of an exhausted request: every other one finishes
        self.cleaned = False  # its receiving was ended: its fields are no longer compared
        self.before: SystemState | None = None  # the model state the step started from
        self.scheduler: Any = None  # the stage's ChunkScheduler
        self.finish_status: tuple[str, str] | None = None  # mid-step finish: (real, expected)
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
        # What the constructor makes of model_config.active_stream_window (CTA:152-157).
        self.adapter._active_window = self.active_stream_window
        self.tensor = importlib.import_module("torch").tensor
        self.incarnation, self.cleaned, self.exhausted_ends = 1, False, 0
        self.scheduler = ChunkScheduler(
            self.adapter, self.classes.status, ships_cached_payloads=self.worker_type == "ar"
        )
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
        self.scheduler.add(request)
        return request

    # -- actions ---------------------------------------------------------------------

    def apply(self, step: SystemStep, before: SystemState) -> None:
        self.before = before
        self.finish_status = None
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
        self.scheduler.shipped.clear()
        self.request = self._new_request()
        self.connector.store.clear()  # the new incarnation's upstream starts its own stream

    def _do_load_async(self, step: SystemStep, req: Hashable) -> None:
        self.scheduler.tick()  # the chunk gate calls load_async, and parks the request

    def _do_resume_segment(self, step: SystemStep, req: Hashable) -> None:
        self.adapter.segment_finished_requests.discard(REQUEST_ID)

    def _do_cleanup(self, step: SystemStep, req: Hashable) -> None:
        assert self.before is not None
        state = self.system.view(self.before).snapshot("receiver", req)
        assert state is not None  # the model cleans a live incarnation up
        how = CLEANUPS[(3 * self.incarnation + state.chunk) % len(CLEANUPS)]
        if state.state == EXHAUSTED:
            self.exhausted_ends += 1
            if self.exhausted_ends % 2:
                how = "generation_finish"
        self.cleaned = True
        adapter, scheduler, status = self.adapter, self.scheduler, self.classes.status
        request, requests = self.request, scheduler.requests
        if how == "cleanup_receiver":
            adapter.cleanup_receiver(REQUEST_ID)
        elif how == "cleanup":
            adapter.cleanup(REQUEST_ID, request.external_req_id)
        elif how == "generation_finish":
            # The generation scheduler's own finish of a request whose upstream
            # is done: its update_from_output frees it and cleans it up.
            generation_step(scheduler_stand_in(adapter, requests, generation=True), request)
        elif how == "cleanup_no_external":
            adapter.cleanup(REQUEST_ID)
        elif how == "finish_requests":
            adapter.finish_requests(REQUEST_ID, status.FINISHED_ABORTED, requests)
        elif how == "finish_all":
            adapter.finish_requests(None, status.FINISHED_ABORTED, requests)
        elif how == "finish_mid_step":
            scheduler.gate()
            adapter.finish_requests({REQUEST_ID}, status.FINISHED_ERROR, requests)
            # The queue it was parked from (a chunk landed: running; else waiting).
            expected = "RUNNING" if state.chunk > 0 else "WAITING"
            self.finish_status = (request.status.name, expected)
            scheduler.free(request)
            scheduler.restore()
            return
        scheduler.free(request)
        if how == "freed":
            adapter.finish_requests([REQUEST_ID], status.FINISHED_ABORTED, requests)

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
        assert self.before is not None
        flight = self.system.view(self.before).g.in_flight
        self._return()
        if flight is not None and flight.result is not None:
            # A chunk committed: the next cycle hands it over, and vLLM schedules it
            # then, or (an odd chunk) a cycle later, for want of room; the cycle after
            # the finished chunk finds the request done receiving.
            self.scheduler.schedule(self.request, delayed=flight.chunk_id % 2 == 1)
            if flight.result == FINISHED:
                self.scheduler.tick()

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
            ("active", REQUEST_ID in adapter._active_streams),
            ("parked", self._parked()),
            ("request", None if self.cleaned else self._observed_request()),
            ("finish_status", None if self.finish_status is None else self.finish_status[0]),
        )

    def _parked(self) -> int:
        """Requests left in the adapter's parking deques (``restore_queues`` empties them)."""
        adapter = self.adapter
        deques = (
            adapter.waiting_for_chunk_waiting_requests,
            adapter.waiting_for_chunk_running_requests,
            adapter._held_non_active,
        )
        return sum(len(d) for d in deques)

    def _observed_request(self) -> Hashable:
        request, scheduler = self.request, self.scheduler
        in_waiting = any(queued is request for queued in scheduler.waiting)
        in_running = any(queued is request for queued in scheduler.running)
        queue = {(True, False): "waiting", (False, True): "running"}.get(
            (in_waiting, in_running), f"waiting={in_waiting} running={in_running}"
        )
        return (
            observed_request(request),
            request.status.name,
            queue,
            freeze(scheduler.shipped.get(REQUEST_ID)),
        )

    def expect(self, view: StateView[Shared]) -> Hashable:
        entries = [(handle.generation, snap.state) for handle, snap in view.live("entry")]
        states = [(handle, snap) for handle, snap in view.live("receiver")]
        handle, state = states[0] if states else (None, None)
        flight = view.g.in_flight
        request: Hashable = None
        if handle is not None and state is not None:
            chunks = view.g.connector
            fields, shipped = expected_request(
                handle.generation,
                state.waiting or state.chunk > 0,
                [(i, chunks[i]) for i in range(state.chunk)],
                generation_mode=self.worker_type == "generation",
                ships_cached_payloads=self.scheduler.ships_cached_payloads,
                tensor=self.tensor,
            )
            if state.waiting:
                status = "WAITING_FOR_CHUNK"
            else:
                status = "RUNNING" if state.chunk > 0 else "WAITING"
            queue = "running" if state.chunk > 0 else "waiting"
            request = (fields, status, queue, shipped)
        ticked = state is not None and (state.waiting or state.chunk > 0)
        return (
            ("registered", entries[0][0] if entries else None),
            ("entry", entries[0][1] if entries else None),
            ("chunk", 0 if state is None else state.chunk),
            ("exhausted", state is not None and state.state == "exhausted"),
            ("segment_done", state is not None and state.state == "segment_done"),
            ("done", state is not None and state.state in ("exhausted", "segment_done")),
            ("getting", None if flight is None else (flight.entry.generation, flight.chunk_id)),
            ("active", self.active_stream_window > 0 and ticked),
            ("parked", 0),
            ("request", request),
            ("finish_status", None if self.finish_status is None else self.finish_status[1]),
        )


class GenerationReceiverBinding(ReceiverBinding):
    """The same, for a generation-mode receiving stage (a codec decoder, say), with a
    bounded active-stream window (``active_stream_window=1``: the windowed chunk gate,
    CTA:1125-1135), under the generation scheduler (no cached payloads shipped)."""

    name = "vllm-omni-receiver-generation"
    worker_type = "generation"
    active_stream_window = 1
