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
  ``g`` is internal id ``"ext0-r{g}"`` with external id ``"ext0"``, a
  resumable streaming session. A running request's saves are scheduler steps
  through the real ``OmniARScheduler.update_from_output`` (ARS:389-850, on
  `scheduler_stand_in`): a step with an inter-stage payload (a chunk), or one
  that stops the request (a segment end; its end, once its final update is
  queued), which captures the confirmed token count and the boundary
  ``_omni_segment_generation`` and calls ``save_async``
  (`statecore.models.bindings.vllm_omni_scheduler`). ``abort`` is the real
  scheduler's ``finish_requests(..., FINISHED_ABORTED)``
  (`scheduler_stand_in`: an ``OmniARScheduler`` and an
  ``OmniGenerationScheduler`` in turn, built without their constructors, whose
  request map holds the aborted request): ``OmniARScheduler.finish_requests``
  (ARS:214-237), ``OmniSchedulerMixin.finish_requests`` (MIX:945-980), which
  calls the adapter's ``finish_requests`` (CTA:1577-1641, ``cleanup_sender``
  for the external id) before vLLM's ``Scheduler.finish_requests`` sets the
  status and Omni's ``_free_request`` runs.
* The scheduler's sweep of send failures (the model's ``collect_failures``)
  is the real ``OmniSchedulerMixin._log_failed_chunk_sends`` (MIX:482-521),
  run on a stand-in scheduler that holds the adapter and the live requests:
  it drains ``_send_failures`` and only logs.
* A parked session's end is ``_finish_parked_streaming_session``'s
  ``save_async`` (MIX:926-943); its ``finish_requests(FINISHED_STOPPED)``,
  which cancels the generation, is the segments model's and binding's
  (``end_parked``), not this model's parked terminal.
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
``requests_num_chunks_sent`` per external id, ``request_payload`` (the
processor records which request created each entry), the arguments the
processor parked in was called with, the side tables, and each successful
put's connector key ``{ext}_{stage}_{chunk}``, the model's (its
``put_req_chunk``: a generation's counted puts take chunks 0, 1, ..., a
failed or retired completion advances nothing, and the sender state's clear
resets it). The consumer reads by key: a put under a key it has not read yet
replaces that put, in the fake connector as in the model.

The processor, its inputs (``is_finished`` as the flush signal,
``new_token_ids``, a codec stream's own ``meta.finished``) and the per-model
side tables are `statecore.models.bindings.vllm_omni_processor`'s.

Where the model stops a save at the sender lock, ``save_async`` parks there
too (`statecore.models.bindings.vllm_omni_scheduler`).

The model's request says what ``schedule`` would have left on the request:
its confirmed token count (one per save, from zero after a rebuilt prompt)
and its ``_omni_segment_generation``. The save thread also parks between the send
and ``_send_single_request``'s ``finally`` once the connector was called
(the model's ``finish``). Aborts pass ``finish_requests`` a bare id, a list
of ids, None (every request of the map) and a list that also names a request
the scheduler already freed, in turn, as real callers do.

Below the model's abstraction, one 0.30.0 behaviour is not judged: a reused
external id that joins a generation its failed terminal left behind
continues that generation's keys (its receiver, keyed by a fresh internal
id, polls key 0 first). The fake connector makes the shared-memory
cleanup a no-op: `statecore.models.bindings.vllm_omni_shm` is this binding
on the real ``SharedMemoryConnector``.

`MUTANTS` re-introduces bugs vLLM-Omni really had into the real class, for
the mutation check in ``tests/test_vllm_adapter.py``.

Every private vLLM-Omni name this project touches lives in this module and
the ``vllm_omni_*`` modules beside it (`statecore.models.bindings.vllm_omni_harness`:
the real classes and the harness around them; `statecore.models.bindings.vllm_omni_processor`:
the processor; `statecore.models.bindings.vllm_omni_mutants`: the bugs re-introduced;
the other bindings), so a new vLLM-Omni version means those files to change.
``vllm_omni`` is imported on first use (15-50 s) and the classes are cached
for the process.
"""

from __future__ import annotations

from collections.abc import Callable, Hashable, Mapping
from dataclasses import replace
from types import SimpleNamespace
from typing import Any

from statecore.adapter import Adapter, AdapterError, AdapterSpec, Baton
from statecore.system import Handle, StateView, System, SystemState, SystemStep

from ..chunk_transfer import build
from ..chunk_transfer_records import (
    BEGUN,
    CANCELLED,
    CHUNK,
    FINISHING,
    NAMESPACE,
    PUTTING,
    RELEASED_0_30_0,
    SEGMENT_END,
    TERMINAL,
    Key,
    Shared,
    Task,
)
from .vllm_omni_harness import (
    BASE_MODULE,
    CONNECTOR_BASE_MODULE,
    CTA_MODULE,
    MIXIN_MODULE,
    STAGE_ID,
    RealClasses,
    describe_payload,
    make_adapter,
    new_request,
    real_classes,
    run_save_task,
    stop_threads,
)
from .vllm_omni_known import KNOWN_0_30_0
from .vllm_omni_mutants import MUTANTS, Mutant
from .vllm_omni_processor import ProcessorFailure, ProcessorPart, step_tokens
from .vllm_omni_scheduler import SchedulerPart, scheduler_stand_in

__all__ = [
    "ADAPTERS",
    "BASE_MODULE",
    "CONNECTOR_BASE_MODULE",
    "CTA_MODULE",
    "FUZZ_BOUNDS",
    "KNOWN_0_30_0",
    "MIXIN_MODULE",
    "MUTANTS",
    "STAGE_ID",
    "SYSTEM",
    "Mutant",
    "OmniChunkTransferAdapterBinding",
    "ProcessorFailure",
    "RealClasses",
    "describe_payload",
    "external_id",
    "fuzz_system_0_30_0",
    "internal_id",
    "make_adapter",
    "real_classes",
    "run_save_task",
    "stop_threads",
]


FREED_REQUEST = "freed-request"
"""An internal id no scheduler map holds, which some aborts name (a request already freed)."""


FUZZ_BOUNDS: Mapping[str, Any] = {"ids": 2, "generations": 3, "saves": 3, "segments": 2}
"""The bounds the real adapter is fuzzed at."""


def fuzz_system_0_30_0() -> System:
    """vLLM-Omni 0.30.0 as released, at the bounds the real adapter is fuzzed at."""
    return build(replace(RELEASED_0_30_0, name="chunk_transfer", **FUZZ_BOUNDS))


class _Unwind(BaseException):
    """Thrown into a parked worker at teardown so the real code unwinds."""


# -- model <-> implementation naming ---------------------------------------------------


def internal_id(request: Handle) -> str:
    """The internal (scheduler-side) request id of a model request handle."""
    return f"{request.key}-r{request.generation}"


def external_id(key: Hashable) -> str:
    """The external request id of a model key (``ext0``)."""
    return str(key)


PARKED_AT: Mapping[str | None, str | None] = {
    None: None,
    BEGUN: "processor",
    PUTTING: "put",
    FINISHING: "finish",
}
"""Where the save thread is parked, by the model's `InFlight.phase` (None: idle)."""
KIND_FLAGS: Mapping[str, tuple[bool, bool]] = {
    CHUNK: (False, False),
    SEGMENT_END: (False, True),
    TERMINAL: (True, False),
}
"""(``is_finished``, ``is_segment_finished``) of a task or put, by the model's kind."""
CANCELLED_STATES = frozenset(CANCELLED)
TERMINAL_PENDING_STATES = frozenset({"terminal_pending", "draining"})


class OmniChunkTransferAdapterBinding(SchedulerPart, ProcessorPart, Adapter):
    """The chunk_transfer model's actions performed on the real 0.30.0 adapter."""

    name = "vllm-omni"
    known = KNOWN_0_30_0

    def __init__(self, *, timeout: float = 10.0) -> None:
        self.timeout = timeout
        self.baton = Baton(timeout)
        self.reset_scheduler(timeout)
        self.adapter: Any = None
        self.connector: Any = None
        self.requests: dict[Hashable, Any] = {}
        self.by_id: dict[str, Any] = {}  # every request made, by internal id
        self.aborts = 0
        self.tokens: dict[str, list[object]] = {}
        self.before: SystemState | None = None  # the model state the step started from
        self.flight: Mapping[str, Any] | None = None
        self.put_tasks: list[Task] = []  # the model's task of each successful put
        self.put_keys: list[Key] = []  # the model's connector key of each successful put
        self.reset_processor()

    # -- lifecycle -----------------------------------------------------------------

    def setup(self, system: System) -> None:
        self.system = system
        self.classes = real_classes()
        self.baton = Baton(self.timeout)
        self.reset_scheduler(self.timeout)
        self.connector = self.make_connector()
        self.adapter = self.make_adapter()
        self.install_processor()
        self.requests = {}
        self.by_id = {}
        self.aborts = 0
        self.tokens = {}
        self.flight = None
        self.put_tasks = []
        self.put_keys = []

    def make_connector(self) -> Any:
        """The connector the adapter puts to: the fake FIFO one of the harness."""
        return self.classes.connector(self)

    def make_adapter(self) -> Any:
        """The adapter under test, on the fake connector, its threads stopped."""
        return make_adapter(self.connector)

    def teardown(self) -> None:
        for baton in (self.scheduler_baton, self.baton):
            for _ in range(8):  # a failing example may leave a worker parked
                if not baton.busy:
                    break
                try:
                    baton.resume(_Unwind())
                except Exception:
                    break
        if self.adapter is not None:
            self.adapter.shutdown()

    # -- callbacks (run on the baton worker) ---------------------------------------

    def flight_request_id(self) -> str:
        """The internal id of the task the save thread runs (for the connector)."""
        if self.flight is None:
            raise AdapterError("vllm-omni: connector.put called with no task in flight")
        return str(self.flight["request"].request_id)

    # -- actions ---------------------------------------------------------------------

    def apply(self, step: SystemStep, before: SystemState) -> None:
        action = step.action
        self.before = before
        handler: Callable[..., None] = getattr(self, f"_do_{action.name}")
        handler(step, **dict(action.args))

    def _do_new_request(self, step: SystemStep, ext: Hashable) -> None:
        generation = step.state.slots[self.system.slot_index("request", ext)].generation
        handle = Handle("request", ext, generation)
        request = new_request(self.classes, internal_id(handle), external_id(ext), "RUNNING")
        request.resumable = True  # a streaming session: its final update ends it
        self.new_stream(request.request_id, handle.generation)
        self.requests[ext] = request
        self.by_id[request.request_id] = request

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
        tokens = self._step_tokens(step, ext)
        split = self.system.view(step.state).get("saving") is not None
        assert self.before is not None
        was = self.before.slots[self.system.slot_index("request", ext)].snapshot
        parked = kind == TERMINAL and was is not None and was.state == "parked"
        self.save_through_scheduler(request, kind, tokens, parked=parked, split=split)

    def _step_tokens(self, step: SystemStep, ext: Hashable) -> tuple[int, ...]:
        """The scheduler step's new tokens (the processor's ``new_token_ids``) of a save.

        A save the model queues carries its task's (segment, save number), so the
        processor's arguments can be told apart per task; one it skips carries none.
        """
        view = self.system.view(step.state)
        saving, queue = view.get("saving"), view.get("queue")
        if saving is not None:  # to be queued under the lock: the same (segment, save number)
            return (saving.segment, saving.number)
        if queue and queue[-1].request.key == ext:
            return step_tokens(queue[-1])
        return ()

    def _do_save_chunk(self, step: SystemStep, ext: Hashable) -> None:
        self._save(step, ext, CHUNK)

    def _do_save_segment_end(self, step: SystemStep, ext: Hashable) -> None:
        self._save(step, ext, SEGMENT_END)

    def _do_save_terminal(self, step: SystemStep, ext: Hashable) -> None:
        self._save(step, ext, TERMINAL)

    def _do_next_segment(self, step: SystemStep, ext: Hashable) -> None:
        # A streaming update: _omni_segment_generation += 1 and a rebuilt prompt
        # (MIX:196-204), and the session is scheduled again. Nothing reaches the
        # adapter until the next save.
        request = self.requests[ext]
        request.status = self.classes.status.RUNNING
        request._omni_segment_generation = self._request_snapshot(step, ext).ends
        request.num_computed_tokens = 0

    def _do_abort(self, step: SystemStep, ext: Hashable) -> None:
        # MIX.finish_requests -> adapter.finish_requests, before vLLM's own
        # Scheduler.finish_requests sets the status.
        # Real callers pass a bare id (MIX:943), a list of ids, or None for every
        # request of the map (MIX:951-972): in turn, so each shape runs. MIX passes
        # the ids it was given with its own map, so a list may name a request the
        # scheduler already freed (an abort racing its finish): CTA:1601-1604 skip it.
        # Through the real scheduler's finish path (`scheduler_stand_in`): the
        # AR scheduler's and the generation scheduler's in turn.
        request = self.requests[ext]
        status = self.classes.status.FINISHED_ABORTED
        rid = request.request_id
        freed = [FREED_REQUEST, rid]
        shapes = (rid, [rid], None, freed) if self.processor_inputs else (rid, [rid])
        ids: Any = shapes[self.aborts % len(shapes)]
        generation = (self.aborts // len(shapes)) % 2 == 1
        self.aborts += 1
        scheduler_stand_in(self.adapter, {rid: request}, generation=generation).finish_requests(
            ids, status
        )

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
        made = len(self.connector.sent)
        self.baton.resume(outcome)
        self._settle()
        if len(self.connector.sent) > made:  # the model's task it put, and its key
            view = self.system.view(step.state)
            flight, mailbox = view.get("in_flight"), view.get("mailbox")
            if flight is None or not mailbox:
                raise AdapterError("vllm-omni: a put the model did not make")
            self.put_tasks.append(flight.task)
            self.put_keys.append(mailbox[-1].key)

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
            if "request" in task  # a SHM cleanup task is not a save (see vllm_omni_shm)
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
            (
                "unread",
                tuple(
                    (sent.request, sent.finished, sent.segment_finished, sent.empty)
                    for sent in self.connector.unread
                ),
            ),
            ("failures", frozenset(adapter._send_failures)),
            ("senders", senders),
            ("queue", queue),
            ("parked", self.baton.parked_at),
            ("scheduler", self.scheduler_baton.parked_at),
            ("watermarks", watermarks),
            ("request_payload", states),
            ("keys", tuple(sent.key for sent in self.connector.sent)),
            ("processor_call", self.call),
            ("side_tables", self.side_tables()),
        )

    def _expected_keys(self) -> tuple[str, ...]:
        """Each successful put's connector key, ``{ext}_{stage}_{chunk}``, as the model
        made it (`statecore.models.chunk_transfer_keys`: ``put_req_chunk[ext]``); the
        model's request instance is not part of 0.30.0's key string."""
        stage = self.connector.stage_id
        return tuple(f"{external_id(key.ext)}_{stage}_{key.chunk}" for key in self.put_keys)

    def expect(self, view: StateView[Shared]) -> Hashable:
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
            (internal_id(task.request), task.sender.generation, *KIND_FLAGS[task.kind])
            for task in view.g.queue
        )
        unread = tuple(
            (internal_id(item.request), *KIND_FLAGS[item.kind], item.empty)
            for item in view.g.mailbox
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
                (external_id(made.state.key), ((NAMESPACE, internal_id(made.request)),))
                for made in view.g.made
            )
        )
        flight = view.g.in_flight
        call = None if flight is None or flight.phase != BEGUN else self.expected_call(flight.task)
        return (
            ("unread", unread),
            ("failures", frozenset(internal_id(r) for r in view.g.send_failures)),
            ("senders", senders),
            ("queue", queue),
            ("parked", PARKED_AT[None if flight is None else flight.phase]),
            ("scheduler", None if view.g.saving is None else "save_lock"),
            ("watermarks", watermarks),
            ("request_payload", states),
            ("keys", self._expected_keys()),
            ("processor_call", call),
            ("side_tables", ()),
        )


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
