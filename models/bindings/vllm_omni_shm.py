"""The ``vllm-omni-shm`` adapter: chunk_transfer bound to the real adapter on shared memory.

`SharedMemoryBinding` is the ``vllm-omni`` binding
(`statecore.models.bindings.vllm_omni`: the same model, actions, parks and
comparisons) with the fake FIFO connector replaced by vLLM-Omni 0.30.0's real
``SharedMemoryConnector``, the one connector the adapter treats differently:
for it alone, retiring a sender generation that put chunks but no successful
terminal queues a cleanup task on the save thread
(``_queue_shm_cleanup_locked``, CTA:1014-1027: ``num_puts`` keys
``"{ext}_{stage}_{0..num_puts-1}"`` unlinked, unless ``terminal_sent``), and
``_send_single_request`` runs it (CTA:685-690).

How it differs from ``vllm-omni``:

* the connector is a subclass of the real ``SharedMemoryConnector`` whose
  ``put`` parks on the binding's `Baton` first; ``put(outcome="ok")`` then
  runs the real ``put`` (a POSIX shared-memory segment named by the key,
  under ``/dev/shm``), ``"false"`` and ``"raise"`` write nothing. Each binding
  instance uses a stage id of its own, so its keys never meet another run's;
  teardown unlinks whatever is left;
* the save thread runs a cleanup task as soon as it reaches the head of the
  save queue with the thread idle (the model has no such task: it runs
  between two model steps, a schedule the real save loop can take);
* ``receive`` reads the head put back with the real ``connector.get`` by its
  key, which unlinks the segment, as the receiving stage does; a put whose
  sender generation the model has retired without a successful terminal is
  not read (its consumer is gone: the request was aborted), so a segment the
  cleanup misses stays, and shows.

Compared after every step, besides what ``vllm-omni`` compares: which keys
still have a segment, and whose payload each holds (the internal id the
processor wrote in it, read from ``/dev/shm`` without consuming it; None for
an empty marker). The last put under a key must still be there, with its
payload, until the consumer reads it, unless the model has retired the
sender generation it was put under without a successful terminal of that
generation (the cleanup's business: then it must be gone). A put under a key
the consumer has not read yet replaces that put, in the model
(`statecore.models.chunk_transfer_keys`) as on shared memory: the old
request's consumer will never read its own payload there. Only a cleanup
task still queued behind the task in flight is left out of the comparison.

Its processor does not declare ``new_token_ids`` (the other shape the
adapter handles, CTA:343-359), so it must not be passed them.

0.30.0's ``no_unread_overwrite`` finding shows here first: after a successful
terminal, a request that reuses the external id starts again at key 0 and
overwrites the old request's segments the consumer has not read (a known
finding, `KNOWN_0_30_0`).
"""

from __future__ import annotations

import importlib
import itertools
import os
from collections import deque
from collections.abc import Hashable
from typing import Any, NamedTuple

from statecore.adapter import AdapterError, AdapterSpec
from statecore.system import Handle, StateView, System, SystemState, SystemStep

from ..chunk_transfer_records import TERMINAL, Shared
from .vllm_omni import KNOWN_0_30_0, OmniChunkTransferAdapterBinding, fuzz_system_0_30_0
from .vllm_omni_harness import (
    ConnectorOwner,
    ParkingPut,
    Sent,
    describe_payload,
    make_adapter,
    replace_unread,
    run_save_task,
)

__all__ = [
    "ADAPTERS",
    "SHM_MODULE",
    "SharedMemoryBinding",
    "ShmPut",
    "fuzz_system_0_30_0",
    "shm_connector_class",
]

SHM_MODULE = "vllm_omni.distributed.omni_connectors.connectors.shm_connector"
SHM_DIR = "/dev/shm"
_STAGES = itertools.count(1)
_CONNECTOR: type[Any] | None = None


class ShmPut(NamedTuple):
    """One successful put to shared memory, with the model's view of it."""

    key: str  # ``{ext}_{stage}_{chunk}``, the segment's name
    sender: Handle  # the model's sender generation whose task made it
    terminal: bool
    holder: str | None  # the internal id its payload names (None: an empty marker)


def new_stage() -> int:
    """A stage id no other binding instance (in this process or another) uses."""
    return (os.getpid() % 1_000_000) * 1000 + next(_STAGES) % 1000


def segment_exists(key: str) -> bool:
    """Whether the shared-memory segment `key` exists."""
    return os.path.exists(os.path.join(SHM_DIR, key))


def shm_connector_class() -> type[Any]:
    """The real ``SharedMemoryConnector`` with a ``put`` that parks the save thread first."""
    global _CONNECTOR
    if _CONNECTOR is None:
        try:
            base = importlib.import_module(SHM_MODULE).SharedMemoryConnector
        except ImportError as exc:
            raise AdapterError(
                f"the vllm-omni-shm adapter needs vllm-omni 0.30.0 ({exc}); install it with: "
                "bash scripts/install-vllm-stack.sh  (or: tox -e vllm)"
            ) from exc

        class ParkingSharedMemoryConnector(ParkingPut, base):  # type: ignore[misc, valid-type]
            """``SharedMemoryConnector`` whose ``put`` parks; the consumer reads a FIFO of keys."""

            def __init__(self, binding: ConnectorOwner, stage_id: int) -> None:
                super().__init__({"stage_id": stage_id})
                self.binding = binding
                self.sent: list[Sent] = []
                self.unread: deque[Sent] = deque()
                self.unread_index: deque[int] = deque()  # index in `sent` of each unread put

            def put(
                self, from_stage: str, to_stage: str, put_key: str, data: Any
            ) -> tuple[bool, int, dict[str, Any] | None]:
                if not self.parked_put(put_key):
                    return False, 0, None
                result: tuple[bool, int, dict[str, Any] | None] = super().put(
                    from_stage, to_stage, put_key, data
                )
                if result[0]:
                    entry = Sent(put_key, self.binding.flight_request_id(), *describe_payload(data))
                    for position in reversed(replace_unread(self.unread, entry)):
                        del self.unread_index[position]  # the segment holds the new put now
                    self.unread_index.append(len(self.sent))
                    self.sent.append(entry)
                return result

        _CONNECTOR = ParkingSharedMemoryConnector
    return _CONNECTOR


class SharedMemoryBinding(OmniChunkTransferAdapterBinding):
    """The chunk_transfer model's actions on the real 0.30.0 adapter over shared memory."""

    name = "vllm-omni-shm"
    known = KNOWN_0_30_0
    takes_step_tokens = False  # the other processor shape: no new_token_ids parameter

    def __init__(self, *, timeout: float = 10.0) -> None:
        super().__init__(timeout=timeout)
        self.stage = 0
        self.puts: list[ShmPut] = []
        self.read: set[int] = set()
        self.terminal_sent: set[Handle] = set()

    def setup(self, system: System) -> None:
        self.stage = new_stage()
        self.puts = []
        self.read = set()
        self.terminal_sent = set()
        super().setup(system)

    def make_connector(self) -> Any:
        return shm_connector_class()(self, self.stage)

    def make_adapter(self) -> Any:
        return make_adapter(self.connector, stage_id=self.stage)

    def teardown(self) -> None:
        try:
            super().teardown()
        finally:
            if self.connector is not None:
                for key in {put.key for put in self.puts}:
                    self.connector.cleanup(key)  # unlinks the segment and its lock file

    # -- actions ---------------------------------------------------------------------

    def apply(self, step: SystemStep, before: SystemState) -> None:
        super().apply(step, before)
        self._run_cleanups()

    def _run_cleanups(self) -> None:
        """The idle save thread runs the SHM cleanup tasks at the head of its queue."""
        queue = self.adapter._pending_save_reqs
        while not self.baton.busy and queue and "cleanup_shm" in queue[0]:
            run_save_task(self.adapter, queue.popleft())

    def _do_put(self, step: SystemStep, outcome: str) -> None:
        made = len(self.put_tasks)
        super()._do_put(step, outcome)
        for task, entry in zip(self.put_tasks[made:], self.connector.sent[made:]):
            holder = None if entry.empty else entry.request
            self.puts.append(ShmPut(entry.key, task.sender, task.kind == TERMINAL, holder))
            if task.kind == TERMINAL:
                self.terminal_sent.add(task.sender)

    def _do_receive(self, step: SystemStep) -> None:
        connector = self.connector
        if not connector.unread:
            raise AdapterError("vllm-omni-shm: receive with nothing put")
        connector.unread.popleft()
        index = connector.unread_index.popleft()
        put = self.puts[index]
        if not self._owed(put, self.system.view(step.state)):
            return  # its generation was retired without a terminal: nobody reads it
        self.read.add(index)
        if self._latest().get(put.key) == index and segment_exists(put.key):
            # The receiving stage's read (CTA:509-514): by key, unlinking the segment.
            connector.get(str(self.stage), str(self.stage + 1), put.key)

    def _owed(self, put: ShmPut, view: StateView[Shared]) -> bool:
        """Whether the consumer still reads `put`: its sender generation lives, or it
        sent its terminal (``terminal_sent``: the cleanup leaves every key to the reader)."""
        return put.sender in self.terminal_sent or any(
            handle == put.sender for handle, _ in view.live("sender")
        )

    # -- observation -------------------------------------------------------------------

    def _latest(self) -> dict[str, int]:
        """The index of the last put under each key (an earlier one was overwritten)."""
        return {put.key: index for index, put in enumerate(self.puts)}

    def _compared(self) -> list[int]:
        """The puts whose segment is compared: the last under each key, unless a queued
        cleanup is due to unlink it."""
        pending = {
            f"{prefix}_{chunk}"
            for task in self.adapter._pending_save_reqs
            if "cleanup_shm" in task
            for prefix, count in (task["cleanup_shm"],)
            for chunk in range(count)
        }
        latest = self._latest()
        return [
            index
            for index, put in enumerate(self.puts)
            if latest[put.key] == index and put.key not in pending
        ]

    def _holder(self, key: str) -> str | None:
        """The internal id the payload in segment `key` names, read without consuming it."""
        with open(os.path.join(SHM_DIR, key), "rb") as segment:
            payload = self.connector.deserialize_obj(segment.read())
        holder = payload.get("request_id") if isinstance(payload, dict) else None
        return None if holder is None else str(holder)

    def observe(self) -> Hashable:
        keys = (self.puts[i].key for i in self._compared())
        segments = tuple((key, self._holder(key)) for key in keys if segment_exists(key))
        return (*super().observe(), ("segments", segments))  # type: ignore[misc]

    def expect(self, view: StateView[Shared]) -> Hashable:
        segments = tuple(
            (self.puts[i].key, self.puts[i].holder)
            for i in self._compared()
            if i not in self.read and self._owed(self.puts[i], view)
        )
        return (*super().expect(view), ("segments", segments))  # type: ignore[misc]


_INSTALL = "pip install 'statecore[vllm]' && bash scripts/install-vllm-stack.sh (or: tox -e vllm)"

ADAPTERS: tuple[AdapterSpec, ...] = (
    AdapterSpec(
        name="vllm-omni-shm",
        target="chunk_transfer",
        factory=f"{__name__}:SharedMemoryBinding",
        system="statecore.models.bindings.vllm_omni:fuzz_system_0_30_0",
        install=_INSTALL,
        doc="the real OmniChunkTransferAdapter of vllm-omni 0.30.0 on its real "
        "SharedMemoryConnector (SHM cleanup tasks on the save thread, num_puts, terminal_sent)",
    ),
)
"""The adapter as the CLI registers it."""
