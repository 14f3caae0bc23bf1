"""The ``vllm-omni-segments`` adapter: the `segments` model bound to the real vLLM-Omni code.

`SegmentsBinding` drives vLLM-Omni 0.30.0's ``OmniChunkTransferAdapter``
("CTA") through one resumable realtime request, in lockstep with the
`statecore.models.segment` system: requests that carry
``_omni_segment_generation`` and requests that do not (the #6816 path),
streaming updates and native-duplex resumes, late frames of a parked
segment, preemption re-runs, a natural finish and
``_finish_parked_streaming_session``'s forced terminal. Each scheduler
action is the ``save_async`` call the scheduler makes for it:

* ``chunk``, ``late_save``, ``preempted_rerun``: ``save_async(None, request,
  False, confirmed_num_computed_tokens=...)`` with the request's
  ``_omni_segment_generation`` set from the model (absent for a request
  without the counter);
* ``segment_end``: the resumable stop of ARS:656-782,
  ``save_async(..., True, segment_generation=<boundary generation>)``;
* ``finish``: a natural finish (``FINISHED_STOPPED``, ``resumable`` cleared,
  ARS:674);
* ``end_parked``: the real ``OmniSchedulerMixin.add_request`` (MIX:883-910)
  of a real ``OmniARScheduler`` built without its constructor
  (`statecore.models.bindings.vllm_omni_scheduler.scheduler_stand_in`),
  holding the request parked in ``WAITING_FOR_STREAMING_REQ``, given the
  session's final update (``resumable=False``): ``_adapter_owing_terminal``
  finds the active sender and the real ``_finish_parked_streaming_session``
  (MIX:926-943) clears ``resumable``, bumps the counter, calls ``save_async(...,
  force_request_finished=True)`` (its confirmed count read off the request) and
  ``finish_requests(FINISHED_STOPPED)``: the adapter's (``cleanup_sender``)
  before vLLM's;
* ``next_segment(update)`` bumps the counter (creating it, MIX:198);
  ``next_segment(resume)`` changes nothing the adapter reads.

The save thread's ``send`` runs ``_send_single_request`` on the head of
``_pending_save_reqs`` with a processor that always returns a payload and a
connector whose put succeeds at once (the fake connector of
`statecore.models.bindings.vllm_omni_harness` with a baton that never
parks): failures and cancellation are the ``chunk_transfer`` binding's
business, and a real ``SharedMemoryConnector`` would behave the same here.
``receive`` reads the connector's puts in key order.

Compared after every step: ``_segment_generation[ext]`` and
``requests_num_chunks_sent[ext]`` against the watermark machine, the id's
sender generation (none, active, or retired: ``cancelled``), the request's
``_omni_segment_generation``, the save queue's (``is_finished``,
``is_segment_finished``) flags, and the unread puts' ``meta.finished`` /
``meta.is_segment_finished``.

0.30.0 is bound to ``segments_0_30_0`` (`fuzz_system`), whose two properties
it violates are `known`: a parked session ended while its last segment is
still queued loses that segment (docs/findings.md).
"""

from __future__ import annotations

from collections.abc import Callable, Hashable, Mapping
from typing import Any

from statecore.spec.segment import REQUEST_END_AFTER_SEGMENTS, SEGMENT_ORDER

from statecore.adapter import Adapter, AdapterError
from statecore.system import StateView, System, SystemState, SystemStep

from ..segment import released_0_30_0
from ..segment_actions import ACTIVE, RETIRED
from ..segment_records import Shared
from ..segment_watermark import CHUNK, SEGMENT_END, TERMINAL
from .vllm_omni_harness import make_adapter, new_request, real_classes, run_save_task
from .vllm_omni_scheduler import scheduler_stand_in

__all__ = ["KIND_FLAGS", "KNOWN", "SegmentsBinding", "fuzz_system"]

KNOWN: Mapping[str, str] = {
    REQUEST_END_AFTER_SEGMENTS: "a parked session ended while its last segment end is "
    "queued: cleanup_sender's cancelled vetoes it and only the terminal goes out "
    "(docs/findings.md)",
    SEGMENT_ORDER: "the same discard: the consumer reads the request end before the last "
    "segment's end",
}
"""The properties 0.30.0 violates here, by id, with the reason."""


def fuzz_system() -> System:
    """The model configuration 0.30.0 is fuzzed against: `segments` as released."""
    return released_0_30_0()


KIND_FLAGS: Mapping[str, tuple[bool, bool]] = {
    CHUNK: (False, False),
    SEGMENT_END: (False, True),
    TERMINAL: (True, False),
}
"""(``is_finished``, ``is_segment_finished``) of a task or put, by the model's kind."""


class _NeverParks:
    """A baton for the fake connector that lets every put succeed at once."""

    busy = False

    def park(self, point: str) -> str:
        return "ok"


class SegmentsBinding(Adapter):
    """The segments model's actions performed on the real 0.30.0 adapter."""

    name = "vllm-omni-segments"
    known: Mapping[str, str] = KNOWN

    def __init__(self) -> None:
        self.baton: Any = _NeverParks()
        self.adapter: Any = None
        self.connector: Any = None
        self.request: Any = None
        self.flight: Mapping[str, Any] | None = None

    def make_adapter(self) -> Any:
        """The adapter under test, on the fake connector, its threads stopped."""
        return make_adapter(self.connector)

    def setup(self, system: System) -> None:
        self.system = system
        self.classes = real_classes()
        self.connector = self.classes.connector(self)
        self.adapter = self.make_adapter()
        self.adapter.custom_process_next_stage_input_func = self._processor
        self.request = None
        self.flight = None

    def teardown(self) -> None:
        if self.adapter is not None:
            self.adapter.shutdown()

    def _processor(self, transfer_manager: Any, request: Any, **kwargs: Any) -> Any:
        return self.classes.payload(request_id=request.request_id, generated_len=1)

    def flight_request_id(self) -> str:
        """The internal id of the task the save thread runs (for the connector)."""
        if self.flight is None:
            raise AdapterError("vllm-omni-segments: connector.put called with no task in flight")
        return str(self.flight["request"].request_id)

    # -- actions ---------------------------------------------------------------------

    def apply(self, step: SystemStep, before: SystemState) -> None:
        action = step.action
        handler: Callable[..., None] = getattr(self, f"_do_{action.name}")
        handler(step, **dict(action.args))

    def _snapshot(self, step: SystemStep, ext: Hashable) -> Any:
        return step.state.slots[self.system.slot_index("request", ext)].snapshot

    def _carry(self, snap: Any) -> None:
        """The request's ``_omni_segment_generation`` as the model says (absent without it)."""
        if snap.counter:
            self.request._omni_segment_generation = snap.gen
        elif hasattr(self.request, "_omni_segment_generation"):
            raise AdapterError("vllm-omni-segments: a request without the counter has one")

    def _save(
        self, snap: Any, kind: str, *, tokens: int | None = None, forced: bool = False
    ) -> None:
        self._carry(snap)
        confirmed = snap.tokens if tokens is None else tokens
        extra: dict[str, Any] = {"confirmed_num_computed_tokens": confirmed}
        if kind == SEGMENT_END:
            extra["segment_generation"] = snap.gen  # captured before the stop (ARS:667)
        self.adapter.save_async(
            None, self.request, kind == SEGMENT_END, force_request_finished=forced, **extra
        )

    def _do_arrive(self, step: SystemStep, ext: Hashable, counter: bool) -> None:
        classes = self.classes
        request = new_request(classes, "seg-r1", str(ext), "RUNNING")
        request.resumable = True
        self.request = request
        self._carry(self._snapshot(step, ext))

    def _do_chunk(self, step: SystemStep, ext: Hashable) -> None:
        self._save(self._snapshot(step, ext), CHUNK)

    def _do_segment_end(self, step: SystemStep, ext: Hashable) -> None:
        self._save(self._snapshot(step, ext), SEGMENT_END)

    def _do_next_segment(self, step: SystemStep, ext: Hashable, mode: str) -> None:
        self._carry(self._snapshot(step, ext))  # an update bumps (and creates) the counter

    def _do_finish(self, step: SystemStep, ext: Hashable) -> None:
        self.request.status = self.classes.status.FINISHED_STOPPED
        self.request.resumable = False  # ARS:674: the stop finished the request
        self._save(self._snapshot(step, ext), TERMINAL)

    def _do_end_parked(self, step: SystemStep, ext: Hashable) -> None:
        """The session's final update reaches the real scheduler's ``add_request``."""
        request, status = self.request, self.classes.status
        request.status = status.WAITING_FOR_STREAMING_REQ  # parked after its segment end
        request.num_computed_tokens = self._snapshot(step, ext).tokens  # the terminal commits none
        scheduler = scheduler_stand_in(
            self.adapter, {request.request_id: request}, generation=False
        )
        update = new_request(self.classes, request.request_id, str(ext), "WAITING")
        update.resumable = False  # the final update
        scheduler.add_request(update)
        if request.status != status.FINISHED_STOPPED or request.resumable:
            raise AdapterError(
                f"vllm-omni-segments: the parked session was not finished ({request.status})"
            )

    def _do_late_save(self, step: SystemStep, ext: Hashable) -> None:
        self._save(self._snapshot(step, ext), CHUNK)

    def _do_preempted_rerun(self, step: SystemStep, ext: Hashable) -> None:
        snap = self._snapshot(step, ext)
        self._save(snap, CHUNK, tokens=snap.tokens - 1)

    def _do_send(self, step: SystemStep) -> None:
        if not self.adapter._pending_save_reqs:
            raise AdapterError("vllm-omni-segments: send with an empty save queue")
        self.flight = self.adapter._pending_save_reqs.popleft()
        try:
            run_save_task(self.adapter, self.flight)
        finally:
            self.flight = None

    def _do_receive(self, step: SystemStep) -> None:
        if not self.connector.unread:
            raise AdapterError("vllm-omni-segments: receive with nothing put")
        self.connector.unread.popleft()

    # -- observation -------------------------------------------------------------------

    def observe(self) -> Hashable:
        adapter = self.adapter
        ext = None if self.request is None else self.request.external_req_id
        token = adapter._sender_tokens.get(ext)
        return (
            (
                "watermark",
                adapter._segment_generation.get(ext),
                adapter.requests_num_chunks_sent.get(ext),
            ),
            ("sender", None if token is None else RETIRED if token.cancelled else ACTIVE),
            ("counter", getattr(self.request, "_omni_segment_generation", None)),
            (
                "queue",
                tuple(
                    (bool(t["is_finished"]), bool(t["is_segment_finished"]))
                    for t in adapter._pending_save_reqs
                ),
            ),
            ("unread", tuple((s.finished, s.segment_finished) for s in self.connector.unread)),
            ("failures", frozenset(adapter._send_failures)),
        )

    def expect(self, view: StateView[Shared]) -> Hashable:
        [(_, mark)] = view.live("watermark")
        [(_, request)] = view.live("request")
        return (
            ("watermark", mark.expected, mark.sent),
            ("sender", view.g.sender),
            ("counter", request.gen if request.counter else None),
            ("queue", tuple(KIND_FLAGS[task.kind] for task in view.g.queue)),
            ("unread", tuple(KIND_FLAGS[task.kind] for task in view.g.mailbox)),
            ("failures", frozenset()),
        )
