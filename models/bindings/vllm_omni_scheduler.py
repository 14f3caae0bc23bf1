"""The scheduler side of the ``vllm-omni`` bindings: the real scheduler's finish path,
and ``save_async`` parked before the sender lock.

`SchedulerPart` is the part of `OmniChunkTransferAdapterBinding`
(`statecore.models.bindings.vllm_omni`) that plays the scheduler thread where
the model splits its step:

* 0.30.0's ``save_async`` runs its late check and stamps
  ``_segment_generation`` before it takes the sender lock (CTA:412-447). Where
  the model stops a save there (``save_*``, then ``save_locked``: a reused
  id's save meeting a generation the save thread may reclaim),
  ``save_async`` runs on a second `Baton`, the scheduler's, and parks in
  ``_confirmed_num_computed_tokens``, which it calls between the stamp and
  the lock (the harness's hook, ``ParkingPut.before_lock``); ``save_locked``
  resumes it. Where the scheduler is parked is compared after every step.
* `scheduler_stand_in` builds the real ``OmniARScheduler`` or
  ``OmniGenerationScheduler`` whose ``finish_requests`` the binding's
  ``abort`` runs.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from types import SimpleNamespace
from typing import Any

from statecore.adapter import AdapterError, Baton
from statecore.system import SystemStep

__all__ = ["SchedulerPart", "scheduler_stand_in"]


class SchedulerPart:
    """The scheduler thread of the ``vllm-omni`` bindings, where it can park."""

    def reset_scheduler(self, timeout: float) -> None:
        """A scheduler baton with nothing parked (a new example)."""
        self.scheduler_baton = Baton(timeout)
        self.park_before_lock = False  # read by the harness's hook in save_async

    def call_save_async(self, save_async: Callable[[], None], split: bool) -> None:
        """Run `save_async` to its end, or (`split`: the model stops the save at the
        sender lock) on the scheduler baton, up to the lock."""
        if not split:
            save_async()
            return
        self.park_before_lock = True
        try:
            self.scheduler_baton.start(save_async)
        finally:
            self.park_before_lock = False
        if self.scheduler_baton.parked_at != "save_lock":
            self.scheduler_baton.result()
            raise AdapterError("vllm-omni: save_async did not reach the sender lock")

    def _do_save_locked(self, step: SystemStep) -> None:
        """The rest of the parked ``save_async``, under the sender lock."""
        if self.scheduler_baton.parked_at != "save_lock":
            raise AdapterError("vllm-omni: save_locked with no save_async at the lock")
        self.scheduler_baton.resume(None)
        if self.scheduler_baton.busy:
            raise AdapterError(f"vllm-omni: save_async parked at {self.scheduler_baton.parked_at}")
        self.scheduler_baton.result()


AR_SCHEDULER_MODULE = "vllm_omni.core.sched.omni_ar_scheduler"
GENERATION_SCHEDULER_MODULE = "vllm_omni.core.sched.omni_generation_scheduler"


def scheduler_stand_in(adapter: Any, requests: Mapping[str, Any], *, generation: bool) -> Any:
    """A real ``OmniARScheduler`` (or, with `generation`, ``OmniGenerationScheduler``) over
    `adapter`, built without its constructor, which needs a model and a KV cache.

    It holds only the state its finish path reads: `requests` as its request map
    (the running ones in ``running``), empty waiting queues (vLLM's own
    ``RequestQueue``), and no KV connector, KV transfer, encoder cache or input
    coordinator work to do. ``finish_requests`` then runs the real code:
    ``OmniARScheduler.finish_requests`` (ARS:214-237), ``OmniSchedulerMixin.
    finish_requests`` (MIX:945-980: the adapter's ``finish_requests`` before
    vLLM's, then the queue realignment and purge) and vLLM's
    ``Scheduler.finish_requests`` with Omni's ``_free_request``.
    """
    import importlib

    queues = importlib.import_module("vllm.v1.core.sched.request_queue")
    module = GENERATION_SCHEDULER_MODULE if generation else AR_SCHEDULER_MODULE
    name = "OmniGenerationScheduler" if generation else "OmniARScheduler"
    scheduler = object.__new__(getattr(importlib.import_module(module), name))
    running = importlib.import_module("vllm.v1.request").RequestStatus.RUNNING
    scheduler.requests = dict(requests)
    scheduler.running = [r for r in requests.values() if r.status == running]
    fcfs = queues.SchedulingPolicy.FCFS
    scheduler.waiting = queues.create_request_queue(fcfs)
    scheduler.skipped_waiting = queues.create_request_queue(fcfs)
    scheduler.num_waiting_for_streaming_input = 0
    scheduler.chunk_transfer_adapter = adapter
    scheduler.finished_recving_kv_req_ids = set()
    scheduler.failed_recving_kv_req_ids = set()
    scheduler.finished_req_ids = set()
    scheduler.finished_req_ids_dict = None
    scheduler.connector = scheduler.ec_connector = scheduler.input_coordinator = None
    scheduler.defer_block_free = False
    scheduler.encoder_cache_manager = SimpleNamespace(free=lambda request: None)
    scheduler.kv_cache_manager = SimpleNamespace(
        free=lambda request: None, pop_blocks_for_free=lambda request: []
    )
    scheduler._inflight_prefills = set()
    scheduler._omits_kv_transfer_cache = {}
    scheduler._new_prompt_len_snapshot = {}
    scheduler._omni_kv_config = {}  # no KV transfer to the next stage
    scheduler.vllm_config = SimpleNamespace(
        kv_transfer_config=None, model_config=SimpleNamespace(omni_kv_config=None)
    )
    return scheduler
