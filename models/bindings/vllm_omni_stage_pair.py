"""The ``vllm-omni-stage-pair`` adapter: `stage_pair` bound to two real adapters over shared memory.

`StagePairBinding` drives, in lockstep with `statecore.models.stage_pair` as
vLLM-Omni 0.30.0 released it (`fuzz_system_0_30_0`):

* stage N's real ``OmniChunkTransferAdapter`` (connector role ``sender``), and
* stage N+1's real ``OmniChunkTransferAdapter`` (role ``receiver``, AR mode),

over one real ``SharedMemoryConnector``: the subclass of
`statecore.models.bindings.vllm_omni_shm` whose ``put`` parks the save thread
(``"put"``, then ``"finish"`` before the task's ``finally``). Stage N+1 reads
it through a view that only gives it its own stage id (the adapter derives
the key ``{ext}_{N}_{chunk}`` from it); every put, get and unlink is the real
connector's on ``/dev/shm``. Each binding instance uses stage ids of its own,
so its keys never meet another run's; teardown unlinks what is left.

What is real: both adapters (``save_async``, the save thread's
``_send_single_request`` run one task per model ``begin`` on a `Baton`
worker, ``finish_requests``, ``cleanup_sender`` and its SHM cleanup tasks,
``load_async``, ``_poll_single_request``, ``cleanup_receiver``), the
connector, ``OmniRequest`` objects (stage N: ``ext0-r{g}``, stage N+1:
``ext0-d{g}``, both of external id ``ext0``) and the scheduler's sweep of send
failures (``OmniSchedulerMixin._log_failed_chunk_sends`` on a stand-in
scheduler). What is fake: the schedulers that call them (each model action
calls the adapter method its scheduler would), the processor (it returns a
payload naming the request that made it), the threads (stopped at
construction; the binding runs the loops' bodies), and stage N+1's input
deadline (the model's ``deadline`` is its ``finish_requests`` with
``FINISHED_ERROR``, as ``_process_pending_chunk_timeouts`` ends the request).

Per model action: ``new_request`` makes both requests; ``save_chunk`` /
``save_terminal`` are ``save_async`` (the model's confirmed token count;
``FINISHED_STOPPED`` for the terminal); ``abort`` is ``finish_requests`` on
both stages; ``begin`` pops the save queue's head and runs it until it parks
in ``connector.put``; ``put`` lets the put return its outcome (``ok`` writes
the segment) and the task finish; ``run_cleanup`` runs the SHM cleanup task at
the head; ``poll`` is ``load_async`` (when no registration is out) and one
``_poll_single_request`` of the registered entry, requeued if it returns
False; ``finish_downstream`` is stage N+1's ``finish_requests`` after its
upstream is exhausted.

Compared after every step: stage N's sender generation (which token object,
``cancelled``, ``terminal_pending``, ``in_flight``, ``num_puts``,
``terminal_sent``), ``put_req_chunk`` and ``requests_num_chunks_sent`` of the
id, the save queue (save tasks by internal id and ``is_finished``, cleanup
tasks by key count), ``_send_failures`` (peeked), where the save thread is
parked; which keys have a segment on ``/dev/shm`` and which request's put
wrote it; stage N+1's registration, ``get_req_chunk`` and
``upstream_exhausted_requests`` for the id's current request, and every chunk
its receivers committed (the request named in the payload, ``meta.finished``)
against the model's ``committed`` outputs.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable, Hashable, Mapping
from dataclasses import replace
from functools import partial
from types import SimpleNamespace
from typing import Any

from statecore.adapter import Adapter, AdapterError, AdapterSpec, Baton
from statecore.system import StateView, System, SystemState, SystemStep

from ..receiver import FINISHED
from ..stage_pair import build
from ..stage_pair_records import RELEASED_0_30_0, TERMINAL, Cleanup, Shared
from .vllm_omni_harness import (
    CONNECTOR_BASE_MODULE,
    make_adapter,
    new_request,
    real_classes,
    run_save_task,
)
from .vllm_omni_shm import new_stage, segment_exists, shm_connector_class

__all__ = ["ADAPTERS", "KNOWN_0_30_0", "StagePairBinding", "fuzz_system_0_30_0"]

EXT_ID = "ext0"

KNOWN_0_30_0: Mapping[str, str] = {
    "pair_own_chunks": (
        "a request that reuses the external id polls key 0 at once: a chunk an aborted "
        "request left there (its put landed after the abort, or its SHM cleanup task has not "
        "run yet, or it was put with a terminal the receiver never read) is committed as its own"
    ),
    "pair_in_order": (
        "the reused id's receiver commits the old request's chunk first, then its own keys "
        "are one off"
    ),
    "pair_delivered": (
        "a reused id joins the generation a failed terminal left behind and puts past key 0 "
        "(CTA:447-469), or its receiver ended on the old request's finished chunk: its own "
        "chunks are never read"
    ),
    "terminal_releases_receiver": (
        "a terminal put under a key the receiver does not poll, or after it ended on another "
        "request's finished chunk, never releases it"
    ),
    "failure_releases_receiver": (
        "a failed terminal put is only recorded and _log_failed_chunk_sends only logs it "
        "(omni_scheduler_mixin.py:482-521): stage N+1 waits for VLLM_OMNI_INPUT_WAIT_TIMEOUT_S"
    ),
}
"""The stage-pair properties vLLM-Omni 0.30.0 is known to violate, with the reason."""

FUZZ_BOUNDS: Mapping[str, Any] = {"generations": 3, "saves": 2}


def fuzz_system_0_30_0() -> System:
    """vLLM-Omni 0.30.0's stage pair at the bounds the real adapters are fuzzed at."""
    return build(replace(RELEASED_0_30_0, name="stage_pair", **FUZZ_BOUNDS))


_VIEW: type[Any] | None = None


def stage_view_class() -> type[Any]:
    """A connector for stage N+1 that is stage N's connector seen with its own stage id."""
    global _VIEW
    if _VIEW is None:
        base = importlib.import_module(CONNECTOR_BASE_MODULE).OmniConnectorBase

        class StageView(base):  # type: ignore[misc, valid-type]
            def __init__(self, connector: Any, stage_id: int) -> None:
                self.connector = connector
                self.stage_id = stage_id

            def put(self, *args: Any, **kwargs: Any) -> Any:
                raise AdapterError("vllm-omni-stage-pair: the receiving stage put a chunk")

            def get(
                self, from_stage: str, to_stage: str, get_key: str, metadata: Any = None
            ) -> Any:
                return self.connector.get(from_stage, to_stage, get_key, metadata)

            def cleanup(self, request_id: str) -> None:
                self.connector.cleanup(request_id)

            def health(self) -> dict[str, Any]:
                return dict(self.connector.health())

            def close(self) -> None:
                pass

        _VIEW = StageView
    return _VIEW


class _Unwind(BaseException):
    """Thrown into a parked worker at teardown so the real code unwinds."""


def sender_id(generation: int) -> str:
    """Stage N's internal id of the request of generation `generation`."""
    return f"{EXT_ID}-r{generation}"


def receiver_id(generation: int) -> str:
    """Stage N+1's internal id of the request of generation `generation`."""
    return f"{EXT_ID}-d{generation}"


class StagePairBinding(Adapter):
    """The stage_pair model's actions on two real 0.30.0 adapters and one SHM connector."""

    name = "vllm-omni-stage-pair"
    known = KNOWN_0_30_0

    def __init__(self, *, timeout: float = 10.0) -> None:
        self.timeout = timeout
        self.baton = Baton(timeout)
        self.sender: Any = None
        self.receiver: Any = None
        self.connector: Any = None
        self.stage = 0
        self.requests: dict[int, Any] = {}  # stage N's requests, by generation
        self.downstream: dict[int, Any] = {}  # stage N+1's requests, by generation
        self.tokens: list[object] = []
        self.flight: Any = None
        self.writer: dict[str, str] = {}  # key -> the internal id whose put wrote it last
        self.committed: list[tuple[str, bool]] = []
        self.expected_commits: list[tuple[str, bool]] = []

    # -- lifecycle -----------------------------------------------------------------

    def setup(self, system: System) -> None:
        self.system = system
        self.classes = real_classes()
        self.baton = Baton(self.timeout)
        self.stage = new_stage()
        self.connector = shm_connector_class()(self, self.stage)
        self.sender = make_adapter(self.connector, stage_id=self.stage)
        self.sender.custom_process_next_stage_input_func = self._processor
        view = stage_view_class()(self.connector, self.stage + 1)
        self.receiver = make_adapter(view, stage_id=self.stage + 1, role="receiver")
        self.requests, self.downstream = {}, {}
        self.tokens, self.flight, self.writer = [], None, {}
        self.committed, self.expected_commits = [], []

    def teardown(self) -> None:
        for _ in range(8):  # a failing example may leave the worker parked
            if not self.baton.busy:
                break
            try:
                self.baton.resume(_Unwind())
            except Exception:
                break
        for adapter in (self.sender, self.receiver):
            if adapter is not None:
                adapter.shutdown()
        if self.connector is not None:
            for key in self.writer:
                self.connector.cleanup(key)  # unlinks the segment and its lock file

    def _processor(
        self, transfer_manager: Any, multimodal_output: Any, request: Any, is_finished: bool
    ) -> Any:
        """Stage N's processor: a payload naming the request that made it."""
        return self.classes.payload(request_id=request.request_id, generated_len=1)

    def flight_request_id(self) -> str:
        """The internal id of the task the save thread runs (for the connector)."""
        if self.flight is None:
            raise AdapterError("vllm-omni-stage-pair: connector.put with no task in flight")
        return str(self.flight["request"].request_id)

    # -- actions ---------------------------------------------------------------------

    def apply(self, step: SystemStep, before: SystemState) -> None:
        action = step.action
        handler: Callable[..., None] = getattr(self, f"_do_{action.name}")
        handler(step, **dict(action.args))
        for emitted in step.outputs:
            output = emitted.output
            if output.name == "committed":
                producer = sender_id(int(output.get("producer")))
                self.expected_commits.append((producer, output.get("kind") == FINISHED))

    def _generation(self, step: SystemStep, component: str) -> int:
        return step.state.slots[self.system.slot_index(component, _key(self.system))].generation

    def _do_new_request(self, step: SystemStep, ext: Hashable) -> None:
        gen = self._generation(step, "request")
        self.requests[gen] = new_request(self.classes, sender_id(gen), EXT_ID, "RUNNING")
        downstream = new_request(self.classes, receiver_id(gen), EXT_ID, "WAITING")
        downstream.resumable = True
        self.downstream[gen] = downstream

    def _save(self, step: SystemStep, kind: str) -> None:
        gen = self._generation(step, "request")
        request = self.requests[gen]
        snap = step.state.slots[self.system.slot_index("request", _key(self.system))].snapshot
        if snap is None:
            raise AdapterError("vllm-omni-stage-pair: a save with no model request")
        request.num_computed_tokens = snap.tokens
        if kind == TERMINAL:
            request.status = self.classes.status.FINISHED_STOPPED
        self.sender.save_async(None, request)

    def _do_save_chunk(self, step: SystemStep, ext: Hashable) -> None:
        self._save(step, "chunk")

    def _do_save_terminal(self, step: SystemStep, ext: Hashable) -> None:
        self._save(step, TERMINAL)

    def _do_abort(self, step: SystemStep, ext: Hashable) -> None:
        gen = self._generation(step, "request")
        status = self.classes.status.FINISHED_ABORTED
        request = self.requests[gen]
        self.sender.finish_requests(request.request_id, status, {request.request_id: request})
        request.status = status
        self._finish_downstream(gen, status)

    def _finish_downstream(self, gen: int, status: Any) -> None:
        downstream = self.downstream[gen]
        rid = downstream.request_id
        self.receiver.finish_requests(rid, status, {rid: downstream})
        downstream.status = status

    def _do_collect_failures(self, step: SystemStep) -> None:
        scheduler = SimpleNamespace(
            chunk_transfer_adapter=self.sender,
            requests={r.request_id: r for r in self.requests.values() if not r.is_finished()},
        )
        self.classes.log_failed_chunk_sends(scheduler)

    def _do_begin(self, step: SystemStep) -> None:
        self._expect_parked(None)
        queue = self.sender._pending_save_reqs
        if not queue or "request" not in queue[0]:
            raise AdapterError("vllm-omni-stage-pair: begin without a save task at the head")
        task = queue.popleft()
        self.flight = task
        self.baton.start(partial(run_save_task, self.sender, task))
        self._settle()

    def _do_put(self, step: SystemStep, outcome: str) -> None:
        self._expect_parked("put")
        made = len(self.connector.sent)
        self.baton.resume(outcome)
        if self.baton.parked_at == "finish":
            self.baton.resume(None)
        self._settle()
        for sent in self.connector.sent[made:]:
            self.writer[sent.key] = sent.request

    def _do_run_cleanup(self, step: SystemStep) -> None:
        self._expect_parked(None)
        queue = self.sender._pending_save_reqs
        if not queue or "cleanup_shm" not in queue[0]:
            raise AdapterError("vllm-omni-stage-pair: run_cleanup without a cleanup task")
        run_save_task(self.sender, queue.popleft())

    def _do_poll(self, step: SystemStep, ext: Hashable) -> None:
        gen = self._generation(step, "receiver")
        request = self.downstream[gen]
        rid = request.request_id
        adapter = self.receiver
        if rid not in adapter._registered_load_entries:
            adapter.load_async(request)
        entry = adapter._registered_load_entries.get(rid)
        if entry is None:
            raise AdapterError("vllm-omni-stage-pair: load_async registered nothing")
        adapter._pending_load_reqs.remove(entry)
        if not adapter._poll_single_request(entry):
            adapter._pending_load_reqs.append(entry)  # recv_loop: polled again later
            return
        payload = adapter._pending_ar_prompt_updates[rid][1]
        self.committed.append(
            (str(payload.get("request_id")), rid in adapter.upstream_exhausted_requests)
        )

    def _do_finish_downstream(self, step: SystemStep, ext: Hashable) -> None:
        self._finish_downstream(
            self._generation(step, "receiver"), self.classes.status.FINISHED_STOPPED
        )

    def _do_deadline(self, step: SystemStep, ext: Hashable) -> None:
        self._finish_downstream(
            self._generation(step, "receiver"), self.classes.status.FINISHED_ERROR
        )

    def _expect_parked(self, point: str | None) -> None:
        if self.baton.parked_at != point:
            raise AdapterError(
                f"vllm-omni-stage-pair: the save thread is parked at {self.baton.parked_at!r}, "
                f"not {point!r}"
            )

    def _settle(self) -> None:
        if not self.baton.busy:
            self.flight = None
            self.baton.result()  # run_save_task catches what save_loop catches

    # -- observation ---------------------------------------------------------------

    def _token_generation(self, token: object) -> int:
        for i, known in enumerate(self.tokens):
            if known is token:
                return i + 1
        self.tokens.append(token)
        return len(self.tokens)

    def _key(self, chunk: int) -> str:
        return f"{EXT_ID}_{self.stage}_{chunk}"

    def observe(self) -> Hashable:
        sender = self.sender
        token = sender._sender_tokens.get(EXT_ID)
        generation = None
        if token is not None:
            generation = (
                self._token_generation(token),
                bool(token.cancelled),
                bool(token.terminal_pending),
                bool(token.in_flight),
                token.num_puts,
                bool(token.terminal_sent),
            )
        queue = tuple(
            ("cleanup", task["cleanup_shm"][1])
            if "cleanup_shm" in task
            else (str(task["request"].request_id), bool(task["is_finished"]))
            for task in sender._pending_save_reqs
        )
        keys = {int(key.rsplit("_", 1)[1]) for key in self.writer}
        stored = tuple(
            (chunk, self.writer[self._key(chunk)])
            for chunk in sorted(keys)
            if segment_exists(self._key(chunk))
        )
        receiver = self.receiver
        rid = receiver_id(max(self.downstream, default=0))
        return (
            ("sender", generation),
            ("put_req_chunk", sender.put_req_chunk.get(EXT_ID, 0)),
            ("chunks_sent", sender.requests_num_chunks_sent.get(EXT_ID)),
            ("queue", queue),
            ("failures", frozenset(sender._send_failures)),
            ("parked", self.baton.parked_at),
            ("store", stored),
            ("registered", rid in receiver._registered_load_entries),
            ("get_req_chunk", receiver.get_req_chunk.get(rid, 0)),
            ("exhausted", rid in receiver.upstream_exhausted_requests),
            ("committed", tuple(self.committed)),
        )

    def expect(self, view: StateView[Shared]) -> Hashable:
        g = view.g
        generation = None
        for handle, snap in view.live("sender"):
            generation = (
                handle.generation,
                snap.state in ("draining", "retiring"),
                snap.state in ("terminal_pending", "draining"),
                bool(snap.in_flight),
                g.num_puts,
                g.terminal_sent,
            )
        queue = tuple(
            ("cleanup", task.keys)
            if isinstance(task, Cleanup)
            else (sender_id(task.request.generation), task.kind == TERMINAL)
            for task in g.queue
        )
        stored = tuple((s.key, sender_id(s.chunk.producer)) for s in g.store)
        receiver = view.slot("receiver", _key(self.system)).snapshot
        return (
            ("sender", generation),
            ("put_req_chunk", g.put_chunk),
            ("chunks_sent", g.chunks_sent),
            ("queue", queue),
            ("failures", frozenset(sender_id(gen) for gen in g.failures)),
            ("parked", None if g.sending is None else "put"),
            ("store", stored),
            ("registered", receiver is not None and bool(receiver.waiting)),
            ("get_req_chunk", 0 if receiver is None else receiver.chunk),
            ("exhausted", receiver is not None and receiver.state == "exhausted"),
            ("committed", tuple(self.expected_commits)),
        )


def _key(system: System) -> Hashable:
    """The model's one external id."""
    return system.component("request").key_values[0]


_INSTALL = "pip install 'statecore[vllm]' && bash scripts/install-vllm-stack.sh (or: tox -e vllm)"

ADAPTERS: tuple[AdapterSpec, ...] = (
    AdapterSpec(
        name="vllm-omni-stage-pair",
        target="stage_pair",
        factory=f"{__name__}:StagePairBinding",
        system=f"{__name__}:fuzz_system_0_30_0",
        install=_INSTALL,
        doc="two real OmniChunkTransferAdapters of vllm-omni 0.30.0 (stage N sender, stage "
        "N+1 receiver) over one real SharedMemoryConnector",
    ),
)
"""The adapter as the CLI registers it."""
