"""The sender-side state of vLLM-Omni's chunk transfer, held by the checked machines.

vLLM-Omni 0.30.0 keeps each external id's sender lifecycle in flags and
dicts that a dozen code paths set and test (``_SenderGeneration``,
``_segment_generation``, ``requests_num_chunks_sent``, ``request_payload``).
Here each of those is the state of a machine that ``statecore check``
verified inside the ``chunk_transfer`` system:

* `SenderGeneration` - one ``_SenderGeneration``, and the
  ``sender_generation`` machine's instance itself: its flags (``cancelled``,
  ``terminal_pending``, ``cleanup_deferred``, ``in_flight``) are read off
  its state, and only that machine's events change them; it also records
  which request opened it (`SenderGeneration.owner`).
* `Watermarks` - ``_segment_generation[ext]`` and
  ``requests_num_chunks_sent[ext]`` are the counts of one
  ``segment_watermark`` per id, kept as its runtime form splits it
  (`statecore.models.segment_watermark_runtime`: presence in a machine run
  as a table, counts beside it); `Watermarks.generations` and `Watermarks.tokens` are
  read-only dict views for the code that reads those attributes.
* `GenerationPayloads` - ``request_payload``, a dict whose entry for an id
  can be written only while that id's ``request_state`` generation is live:
  a stale processor can never recreate state after cleanup, and a request
  reusing the id starts with none. It also holds the live sender
  generations by id (the adapter's ``_sender_tokens``): each sender
  generation carries its request-state generation, a row of the
  ``request_state`` machine's table (`REQUEST_STATES`, `statecore.table`),
  so an id's lifecycle is one object that a request opens and releases once.

`statecore.models.implementations.checked_chunk_transfer` builds the adapter
on these. Only the standard library and statecore are used here, so this
module is tested without vLLM.
"""

from __future__ import annotations

import functools
import logging
import threading
from collections.abc import Callable, Iterator, Mapping
from typing import Any

from statecore import ACCEPTED, Instance, Prepared, prepare
from statecore.runtime import SerialInstance
from statecore.table import Row, Table

from ..request_state_machines import request_state_machine
from ..segment_watermark_runtime import Counts, Step, WatermarkTable
from ..sender_generation import sender_generation_machine

__all__ = [
    "BEGIN",
    "CLEANUP",
    "END",
    "PAYLOAD_NAMESPACE",
    "SAVE_TERMINAL",
    "GenerationPayloads",
    "SenderGeneration",
    "Watermarks",
]

_LOG = logging.getLogger(__name__)

SENDER_GENERATION = sender_generation_machine()
WATERMARKS = WatermarkTable()
"""The ``segment_watermark`` machine every `Watermarks` runs, tabulated once."""
PAYLOAD_NAMESPACE = "request_payload"
"""The one namespace of the ``request_state`` generations: the id's ``request_payload`` entry."""
REQUEST_STATE = request_state_machine((PAYLOAD_NAMESPACE,))

# The events the adapter fires on every chunk, prepared once (`statecore.prepare`).
SAVE_TERMINAL = prepare(SENDER_GENERATION, "save_terminal")
BEGIN = {
    terminal: prepare(SENDER_GENERATION, "begin", terminal=terminal) for terminal in (False, True)
}
"""``begin`` by whether the task is the terminal."""
END = {t: prepare(SENDER_GENERATION, "end", terminal=t) for t in (False, True)}
"""``end`` by whether the task is the terminal."""
CLEANUP = prepare(SENDER_GENERATION, "cleanup")
_RELEASE = prepare(REQUEST_STATE, "release")
_GET_OR_CREATE = prepare(REQUEST_STATE, "get_or_create", namespace=PAYLOAD_NAMESPACE)
_PAYLOAD_EVENTS = {
    event: prepare(REQUEST_STATE, event) for event in ("complete_segment", "send_failed")
}
REQUEST_STATES = Table(REQUEST_STATE, (_GET_OR_CREATE, _RELEASE, *_PAYLOAD_EVENTS.values()))
"""The ``request_state`` machine tabulated for the events `GenerationPayloads` fires."""
_REQUEST_STATE_OPENED = REQUEST_STATES.initial

_CANCELLED = frozenset({"draining", "retiring"})
_TERMINAL_PENDING = frozenset({"terminal_pending", "draining"})


class SenderGeneration(SerialInstance):
    """One sender generation of an external id (0.30.0's ``_SenderGeneration``).

    It is the ``sender_generation`` machine's instance itself (a
    `SerialInstance`: the adapter fires it under its sender lock), so the
    flags 0.30.0 assigns by hand are properties of its state, and firing
    ``save_terminal``, ``begin``, ``end`` or ``cleanup`` (prepared:
    `SAVE_TERMINAL`, `BEGIN`, `END`, `CLEANUP`) is the only way to change
    them. ``num_puts`` and ``terminal_sent`` stay plain counters: they only
    size the shared-memory cleanup, which no property depends on.
    ``cleanup_owed`` says that a graceful finish asked for the cleanup while
    the terminal was queued: the terminal's ``finally`` fires it
    (``cleanup``), after the tasks queued before the terminal went out.
    ``request_state`` is the generation's ``request_state`` machine, as its
    row of `REQUEST_STATES`: `GenerationPayloads` fires it.
    """

    __slots__ = ("cleanup_owed", "num_puts", "owner", "request_state", "terminal_sent")

    def __init__(self, owner: str) -> None:
        Instance.__init__(self, SENDER_GENERATION)  # `SerialInstance.__init__` only narrows it
        self.owner = owner  # the internal id of the request whose save opened it
        self.num_puts = 0
        self.terminal_sent = False
        self.cleanup_owed = False
        self.request_state: Row = _REQUEST_STATE_OPENED

    # `cancelled` and `retired` are read on every save and every send: they read the
    # state off the current node as `state` does, without that property's call.

    @property
    def cancelled(self) -> bool:
        """``cleanup_sender`` retired it (0.30.0's ``cancelled``)."""
        return self._node.snapshot[0] in _CANCELLED

    @property
    def retired(self) -> bool:
        """No save joins it any more: cancelled, or its cleanup is owed to the terminal."""
        return self.cleanup_owed or self._node.snapshot[0] in _CANCELLED

    def refusal(self, request_id: str) -> str | None:
        """Why a save of `request_id` that meets this generation is refused, or None: the
        reuse rule (a retired generation, or one another request opened, takes no save)."""
        retired = self.cleanup_owed or self._node.snapshot[0] in _CANCELLED
        if not retired and self.owner == request_id:
            return None
        if retired:
            return "previous sender generation is still draining"
        return f"external id is held by request {self.owner}'s sender generation"

    @property
    def terminal_pending(self) -> bool:
        """A terminal is queued or in flight: cleanup must wait for it."""
        return self.state in _TERMINAL_PENDING

    @property
    def cleanup_deferred(self) -> bool:
        """The terminal owes the cleanup ``cleanup_sender`` asked for."""
        return self.state == "draining"

    @property
    def in_flight(self) -> bool:
        """The save thread runs one of its tasks."""
        return bool(self.snapshot.in_flight)

    def __repr__(self) -> str:
        return f"SenderGeneration(owner={self.owner!r}, {self.snapshot!r})"


class Watermarks:
    """``save_async``'s admission state per external id: one ``segment_watermark`` each.

    An id's watermark is its `Counts`, from its first save until ``clear``;
    `WATERMARKS`, the ``segment_watermark`` machine tabulated, takes each
    event on them (`statecore.models.segment_watermark_runtime` says why the
    machine runs as a table with the counts beside it). Absent, both
    watermarks read as absent, as 0.30.0's popped dict entries do. The
    adapter holds `lock` around ``save`` and ``clear``; ``rebuild_prompt``,
    which the scheduler reaches without it, takes it. So the events of one
    id are serialised.
    """

    __slots__ = ("_marks", "generations", "lock", "save", "tokens")

    def __init__(self, lock: threading.Lock | None = None) -> None:
        self.lock = lock or threading.Lock()
        self._marks: dict[str, Counts] = {}
        self.save: Callable[[str, str, int, int, bool], Step] = functools.partial(
            WATERMARKS.save, self._marks
        )
        """The ``save`` event: ``save(ext, kind, generation, confirmed, counter)``, a `Step`
        whose verdict (``[1]``) is "admitted" or why the save is skipped ("late", "replay").
        The table's own method bound to this adapter's counts: the hot path calls it direct."""
        self.generations: Mapping[str, int] = _WatermarkView(self._marks, 0)
        """``_segment_generation``: the next segment generation a save may carry."""
        self.tokens: Mapping[str, int] = _TokenView(self, self._marks)
        """``requests_num_chunks_sent``: the confirmed tokens already queued."""

    def rebuild_prompt(self, ext: str) -> None:
        """The scheduler rebuilt the prompt: ``requests_num_chunks_sent.pop(ext)``."""
        with self.lock:
            counts = self._marks.get(ext)
            if counts is not None:
                self._marks[ext] = WATERMARKS.fire(counts, "rebuild_prompt")[1]

    def clear(self, ext: str) -> None:
        """``_clear_sender_state_locked``: the ``clear`` event pops both watermarks.

        The id's entry goes with them; its counts after ``clear`` are absent
        whatever they were (``tests/test_checked_sender.py``).
        """
        WATERMARKS.clear(self._marks, ext)


class _WatermarkView(Mapping[str, int]):
    """One watermark of every id (`Counts` field `index`), as the read-only dict 0.30.0 reads."""

    __slots__ = ("_index", "_marks")

    def __init__(self, marks: dict[str, Counts], index: int) -> None:
        self._marks = marks
        self._index = index

    def __getitem__(self, ext: str) -> int:
        counts = self._marks.get(ext)
        value = None if counts is None else counts[self._index]
        if value is None:
            raise KeyError(ext)
        return value

    def __iter__(self) -> Iterator[str]:
        index = self._index
        return iter([e for e, c in list(self._marks.items()) if c[index] is not None])

    def __len__(self) -> int:
        return sum(1 for _ in self)


class _TokenView(_WatermarkView):
    """``requests_num_chunks_sent``: read-only, but the scheduler may pop an entry."""

    __slots__ = ("_owner",)

    def __init__(self, owner: Watermarks, marks: dict[str, Counts]) -> None:
        super().__init__(marks, 1)
        self._owner = owner

    def pop(self, ext: str, default: Any = None) -> Any:
        """The scheduler rebuilt a prompt (MIX:202, MIX:313, AR:903): ``rebuild_prompt``."""
        value = self.get(ext, default)
        self._owner.rebuild_prompt(ext)
        return value


class GenerationPayloads(dict[str, Any]):
    """``request_payload``: an id's entry exists only while its request-state generation lives.

    A plain ``dict`` to the processors that use it (they test ``isinstance(...,
    dict)``, read, pop and assign). Each sender generation opens one
    ``request_state`` generation (one namespace: the id's entry), carried by
    the `SenderGeneration` itself (``request_state``). `generations` holds
    the live sender generations by id (the adapter's ``_sender_tokens``): an
    id is opened and released here, with its entry, in one place. A write
    for an id with no live generation is dropped and logged: that is a
    stale processor after cleanup, and 0.30.0 would have recreated state
    nobody clears. Reads need no fence: ``release`` removes the entry with
    its generation. The lifecycle calls name the sender generation they come
    from, so a late call of a reclaimed generation never reaches its successor.

    A request-state generation is a row of `REQUEST_STATES`, the machine
    tabulated (`statecore.table`): one is opened per request, so an
    `Instance` each would cost an object and a lock per request for a
    machine of six snapshots. `lock` (the adapter's sender lock) serialises
    the fires: the adapter holds it around ``open`` and ``release``; a
    write, a segment end and a failure take it, so a write admitted by a
    live generation lands before a ``release`` can pop it.
    """

    def __init__(
        self,
        lock: threading.Lock | None = None,
        generations: dict[str, SenderGeneration] | None = None,
    ) -> None:
        super().__init__()
        self.lock = lock or threading.Lock()
        self.generations: dict[str, SenderGeneration] = {} if generations is None else generations
        """The live sender generations by external id (the adapter's ``_sender_tokens``)."""

    # -- the lifecycle (called by the adapter) ------------------------------------

    def open(self, ext: str, generation: SenderGeneration) -> None:
        """`generation` opened for `ext`: it is the id's live one, with no entry yet.

        The adapter holds `lock`. A generation the id still had is released first.
        """
        dict.pop(self, ext, None)  # `dict`'s own methods, named: cheaper than super()
        old = self.generations.setdefault(ext, generation)
        if old is not generation:
            old.request_state = old.request_state.edges[_RELEASE][1]
            self.generations[ext] = generation

    def complete_segment(self, ext: str, generation: SenderGeneration) -> None:
        """Segment-end post-processing: request-wide state is kept."""
        self._fire(ext, generation, _PAYLOAD_EVENTS["complete_segment"])

    def on_failure(self, ext: str, generation: SenderGeneration) -> None:
        """A send of the generation failed: the state is kept until cleanup."""
        self._fire(ext, generation, _PAYLOAD_EVENTS["send_failed"])

    def release(self, ext: str, generation: SenderGeneration | None) -> None:
        """``_clear_sender_state_locked`` (the adapter holds `lock`): the reclaimed
        `generation` (None: the id had none) is released; if it is the id's live one
        (or there is none), it is forgotten and the entry goes with it. A generation the
        id no longer has leaves the live one and its entry alone."""
        if generation is not None:
            generation.request_state = generation.request_state.edges[_RELEASE][1]
        generations = self.generations
        if generations.get(ext) is generation:  # the live one, or none lives
            generations.pop(ext, None)
            dict.pop(self, ext, None)

    def status(self, ext: str) -> str | None:
        """The request-state generation's state (``open``, ``failed``), None if none lives."""
        generation = self.generations.get(ext)
        return None if generation is None else generation.request_state.state

    def _fire(self, ext: str, generation: SenderGeneration, prepared: Prepared) -> None:
        with self.lock:
            if self.generations.get(ext) is generation:
                generation.request_state = generation.request_state.edges[prepared][1]

    # -- the dict the processors see --------------------------------------------------

    def _admits(self, ext: str) -> bool:
        """``get_or_create`` on the id's generation; the caller holds `lock`."""
        generation = self.generations.get(ext)
        if generation is not None:
            outcome, generation.request_state = generation.request_state.edges[_GET_OR_CREATE]
            if outcome.status is ACCEPTED:
                return True
        _LOG.debug("request_payload[%r] written with no live sender generation: dropped", ext)
        return False

    def __setitem__(self, ext: str, value: Any) -> None:
        with self.lock:
            if self._admits(ext):
                dict.__setitem__(self, ext, value)

    def setdefault(self, ext: str, default: Any = None) -> Any:
        if ext in self:  # a read needs no fence; a miss raises nothing (each request has one)
            return self[ext]
        lock = self.lock
        lock.acquire()  # not `with`: its protocol costs as much as the rest of a miss
        try:
            if ext in self:
                return self[ext]
            if self._admits(ext):
                dict.__setitem__(self, ext, default)
        finally:
            lock.release()
        return default

    def update(self, *args: Any, **kwargs: Any) -> None:
        for ext, value in dict(*args, **kwargs).items():
            self[ext] = value

    def __ior__(self, other: Any) -> GenerationPayloads:  # type: ignore[override,misc]
        self.update(other)
        return self
