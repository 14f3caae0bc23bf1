"""The receiving stage's scheduler, as far as it calls the chunk-transfer adapter.

The ``vllm-omni-receiver`` bindings drive the adapter's receiving side
through the calls vLLM-Omni 0.30.0's schedulers make (``MIX`` is
``vllm_omni/core/sched/omni_scheduler_mixin.py``, ``CTA`` the adapter):

* `tick`: one ``schedule()`` cycle's chunk gate: ``process_pending_chunks``
  with the scheduler's live requests (MIX:380-385), then ``restore_queues``
  in its ``finally`` (MIX:410-416). A request not yet waiting is registered
  with ``load_async`` and parked ``WAITING_FOR_CHUNK``; one whose chunk
  arrived is made ready and keeps its queue (CTA:1380-1412);
* `schedule`: a `tick` that hands the arrived chunk over (and, if vLLM has
  no room for it in that cycle, another that finds it still ready), then vLLM
  scheduling the request (a new request moves from ``waiting`` to
  ``running``; a running one is a cached request) and the output's
  post-processing: ``postprocess_scheduler_output`` clears the ready marker
  and, for the AR scheduler (``include_cached_payloads``, MIX:634-648), moves
  a cached request's ``additional_information`` into the output (CTA:1483-1515);
* `free`: vLLM's ``_free_request``: the request leaves the queues and the
  request map.

vLLM's own queue (``FCFSRequestQueue``) holds the waiting requests, so the
adapter's ``add_request`` / ``remove`` / ``prepend_requests`` calls are the real ones.
"""

from __future__ import annotations

import importlib
from types import SimpleNamespace
from typing import Any

__all__ = ["ChunkScheduler"]


class ChunkScheduler:
    """The waiting queue, the running list and the request map of one receiving stage."""

    def __init__(self, adapter: Any, status: Any, *, ships_cached_payloads: bool) -> None:
        queues = importlib.import_module("vllm.v1.core.sched.request_queue")
        self.adapter = adapter
        self.status = status  # vllm.v1.request.RequestStatus
        self.ships_cached_payloads = ships_cached_payloads
        self.waiting: Any = queues.create_request_queue(queues.SchedulingPolicy.FCFS)
        self.running: list[Any] = []
        self.requests: dict[str, Any] = {}
        self.shipped: dict[str, Any] = {}  # the last additional_information shipped per id

    def add(self, request: Any) -> None:
        """A new request arrives: waiting, in the request map."""
        self.requests[request.request_id] = request
        self.waiting.add_request(request)

    def gate(self) -> None:
        """The first half of `tick`: ``process_pending_chunks`` (park, register, hand over)."""
        self.adapter.process_pending_chunks(
            self.waiting, self.running, scheduler_requests=self.requests
        )

    def restore(self) -> None:
        """The second half of `tick`: ``restore_queues``, in ``schedule()``'s ``finally``."""
        self.adapter.restore_queues(self.waiting, self.running, self.requests)

    def tick(self) -> None:
        self.gate()
        self.restore()

    def schedule(self, request: Any, *, delayed: bool = False) -> None:
        """A `tick` handing `request`'s chunk over, then `request` scheduled for one step;
        `delayed`: not in that cycle (no room), so the next cycle finds it still ready."""
        self.tick()
        if delayed:
            self.tick()
        new = any(queued is request for queued in self.waiting)
        if new:
            self.waiting.remove_request(request)
            self.running.append(request)
        request.status = self.status.RUNNING
        rid = request.request_id
        output = SimpleNamespace(
            scheduled_new_reqs=[SimpleNamespace(req_id=rid)] if new else [],
            scheduled_cached_reqs=None if new else SimpleNamespace(req_ids=[rid]),
        )
        if self.ships_cached_payloads:
            self.adapter.postprocess_scheduler_output(output, self.requests)
            cached = output.scheduled_cached_reqs
            if cached is not None:
                self.shipped[rid] = cached.additional_information.get(rid)
        else:
            self.adapter.postprocess_scheduler_output(output)

    def free(self, request: Any) -> None:
        """``_free_request``: `request` leaves the queues and the request map."""
        if any(queued is request for queued in self.waiting):
            self.waiting.remove_request(request)
        self.running[:] = [r for r in self.running if r is not request]
        rid = request.request_id
        if self.requests.get(rid) is request:
            del self.requests[rid]
