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
  ``abort`` runs, and `scheduler_step` runs the real
  ``OmniARScheduler.update_from_output`` for one scheduled step of a request:
  the call that stops the request (a segment end or its end) and queues its
  save (ARS:389-790).
"""

from __future__ import annotations

import importlib
from collections import deque
from collections.abc import Callable, Mapping
from types import SimpleNamespace
from typing import Any

from statecore.adapter import AdapterError, Baton
from statecore.system import SystemStep

from ..chunk_transfer_records import CHUNK, SEGMENT_END, TERMINAL

__all__ = [
    "SchedulerPart",
    "generation_step",
    "scheduler_stand_in",
    "scheduler_step",
    "streaming_update",
]


class SchedulerPart:
    """The scheduler thread of the ``vllm-omni`` bindings, where it can park."""

    adapter: Any
    classes: Any

    def reset_scheduler(self, timeout: float) -> None:
        """A scheduler baton with nothing parked (a new example)."""
        self.scheduler_baton = Baton(timeout)
        self.park_before_lock = False  # read by park_in_save, inside save_async
        self.segment_ends = 0  # every other one meets the next segment's update queued
        self.chunks = 0  # every other one follows a step with no inter-stage output
        self.lookahead: dict[str, int] = {}  # internal id -> steps async scheduling runs ahead

    def save_through_scheduler(
        self, request: Any, kind: str, tokens: tuple[int, ...], *, parked: bool, split: bool
    ) -> None:
        """The scheduler's call of ``save_async`` for a `kind` save of `request`.

        A `parked` session's end is ``_finish_parked_streaming_session``'s save
        (MIX:926-943; its ``finish_requests`` is the segments binding's). Any other
        save is a scheduled step of the running request through the real
        ``update_from_output`` (`scheduler_step`), which stops it for a segment end
        or its end and queues the save.
        """
        if parked:
            request.status = self.classes.status.FINISHED_STOPPED
            request.resumable = False
            self.call_save_async(
                lambda: self.adapter.save_async(
                    None, request, is_segment_finished=False, new_token_ids=tokens
                ),
                split,
            )
            return
        scheduler = scheduler_stand_in(
            self.adapter, {request.request_id: request}, generation=False
        )
        # Every other request is scheduled asynchronously: one step runs ahead, so
        # num_computed_tokens counts its placeholder (the adapter's confirmed count
        # leaves it out, CTA:241-247), and after a segment stop that step's output
        # arrives stale and is dropped (ARS:700-712, 494-525), carrying a payload.
        ahead = self.lookahead.setdefault(request.request_id, len(self.lookahead) % 2)
        if ahead and request.num_stale_output_tokens:
            _update_from_output(scheduler, request, [STOP_FILLER], {"stale": True})
        request.num_computed_tokens += ahead
        request.num_output_placeholders = ahead
        if kind == TERMINAL:
            # The session's final update is queued: the stop ends it, and
            # update_from_output clears resumable itself (ARS:670-673).
            request.streaming_queue = deque([None])
        elif kind == SEGMENT_END:
            self.segment_ends += 1
            if self.segment_ends % 2 == 0:
                # The next segment's update arrived before this stop: the stop
                # applies it (_update_request_as_session: the counter moves on
                # before save_async), so the save must carry the generation the
                # scheduler captured first (ARS:665-669, 775-776).
                request.streaming_queue = deque([streaming_update(request)])
        else:
            self.chunks += 1
            if self.chunks % 2 == 0:
                # A step with no inter-stage output first: nothing to save.
                scheduler_step(scheduler, request, (), stop=False, payload=False, ahead=ahead)
        self.call_save_async(
            lambda: scheduler_step(scheduler, request, tokens, stop=kind != CHUNK, ahead=ahead),
            split,
        )

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

    def park_in_save(self) -> None:
        """Park the scheduler baton at the sender lock, once, if the save is split (the
        harness's hook, called inside ``save_async`` before the lock)."""
        if self.park_before_lock:
            self.park_before_lock = False
            self.scheduler_baton.park("save_lock")

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

    It holds only the state its finish path and ``update_from_output`` read:
    `requests` as its request map (the running ones in ``running``), empty
    waiting queues (vLLM's own ``RequestQueue``), and no KV connector, KV
    transfer, encoder cache, structured output, pooling decoder, metrics or
    input coordinator work to do. ``finish_requests`` then runs the real code:
    ``OmniARScheduler.finish_requests`` (ARS:214-237), ``OmniSchedulerMixin.
    finish_requests`` (MIX:945-980: the adapter's ``finish_requests`` before
    vLLM's, then the queue realignment and purge) and vLLM's
    ``Scheduler.finish_requests`` with Omni's ``_free_request``.
    """
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
        kv_transfer_config=None, model_config=SimpleNamespace(omni_kv_config=None, stage_id=0)
    )
    # What update_from_output reads besides (ARS:389-850, MIX's helpers).
    scheduler.kv_cache_manager.estimate_cached_tokens = lambda request: 0
    scheduler.kv_cache_manager.take_events = lambda: []
    scheduler.max_model_len = UNBOUNDED
    scheduler.perf_metrics = scheduler.kv_event_publisher = scheduler.kv_transfer_criteria = None
    scheduler.log_stats = False
    scheduler.structured_output_manager = SimpleNamespace(accept_tokens=lambda request, ids: True)
    scheduler._pooling_output_decoder = scheduler._latest_omni_connector_output = None
    scheduler._native_data_plane = False
    scheduler._streaming_context_overflow = {}
    scheduler._kv_wait_start_ts = {}
    scheduler._pending_data_plane_terminal_req_ids = set()
    scheduler.active_kv_transfers = set()
    scheduler.transfer_triggered_requests = set()
    scheduler.waiting_for_transfer_free = set()
    scheduler.pending_stop_after_extraction = set()
    scheduler.requests_needing_kv_transfer = {}
    scheduler._pending_finish_reqs = []
    scheduler._retains_state_across_chunks = False
    return scheduler


UNBOUNDED = 1 << 30
"""A length limit no fuzzed request reaches: only `scheduler_step` stops a request."""


def scheduler_step(
    scheduler: Any,
    request: Any,
    tokens: tuple[int, ...],
    *,
    stop: bool,
    payload: bool = True,
    ahead: int = 0,
) -> None:
    """One scheduled step of `request` through the real ``update_from_output``.

    The step samples `tokens` and, unless it `stop`s the request or carries no
    `payload`, an inter-stage payload, so the scheduler calls ``save_async`` for
    a chunk. A `stop` makes the last token reach the request's ``max_tokens``,
    so vLLM's ``check_stop`` ends it and the scheduler calls ``save_async`` for
    a segment end (a ``resumable`` request with no final update queued parks,
    ``_handle_stopped_request``) or the terminal (it is freed first,
    ``_free_request``), with the confirmed token count and the boundary
    ``_omni_segment_generation`` it captured before the stop. A stop samples at
    least one token, as a real one does (EOS). `ahead`: steps scheduled after this
    one and still in flight (async scheduling).
    """
    sampled = list(tokens) if tokens or not stop else [STOP_FILLER]
    request.max_tokens = request.num_output_tokens + len(sampled) if stop else UNBOUNDED
    inter_stage = {"tokens": tuple(sampled)} if payload and not stop else None
    _update_from_output(scheduler, request, sampled, inter_stage, ahead)


def generation_step(scheduler: Any, request: Any) -> None:
    """One scheduled step of `request` through the real generation scheduler's
    ``update_from_output``, its prompt computed to the end.

    The generation scheduler stops a one-shot request once its upstream is done
    (the adapter's ``is_done_receiving_chunks``) and its prompt is computed
    (GS:660-676): it frees it and calls the adapter's ``cleanup(id, ext)``
    (GS:711-717). No tokens are sampled.
    """
    request.num_computed_tokens = len(request.prompt_token_ids)
    _update_from_output(scheduler, request, [], None)


def _update_from_output(
    scheduler: Any, request: Any, sampled: list[int], inter_stage: Any, ahead: int = 0
) -> None:
    """`scheduler`'s ``update_from_output`` for one step of `request` alone, which
    sampled `sampled` and made `inter_stage` (None: no inter-stage output).

    ``num_in_flight_tokens`` is what ``schedule`` left: this step's count and the
    `ahead` steps scheduled after it; the update settles this step's.
    """
    output_module = importlib.import_module("vllm.v1.core.sched.output")
    runner_output = importlib.import_module("vllm_omni.outputs").OmniModelRunnerOutput
    rid = request.request_id
    scheduled = max(1, len(sampled))
    request.num_in_flight_tokens = scheduled + ahead
    scheduler_output = output_module.SchedulerOutput.make_empty()
    scheduler_output.num_scheduled_tokens[rid] = scheduled
    scheduler_output.total_num_scheduled_tokens = scheduled
    model_output = runner_output(
        req_ids=[rid],
        req_id_to_index={rid: 0},
        sampled_token_ids=[sampled] if sampled else [],
        inter_stage_outputs=[inter_stage],
    )
    scheduler.update_from_output(scheduler_output, model_output)


def streaming_update(request: Any) -> Any:
    """vLLM's ``StreamingUpdate`` continuing `request` (one more prompt token)."""
    update = importlib.import_module("vllm.v1.request").StreamingUpdate
    return update(
        mm_features=None,
        prompt_token_ids=[0],
        max_tokens=UNBOUNDED,
        arrival_time=request.arrival_time,
        sampling_params=request.sampling_params,
    )


STOP_FILLER = -1
"""The token a stop samples when the model's save carries none (a save the adapter
skips, so no processor sees it)."""
