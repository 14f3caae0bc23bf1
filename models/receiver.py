"""The receiving side of vLLM-Omni's chunk transfer: registration, polling, commit, cleanup.

Mirrors vLLM-Omni 0.30.0. Paths are relative to ``vllm_omni/``; ``CTA`` is
``distributed/omni_connectors/transfer_adapter/chunk_transfer_adapter.py``,
``BASE`` its ``base.py``:

* ``load_async(request)`` (CTA:315-341): under ``_receiver_state_lock``, a
  request id already in ``_registered_load_entries`` returns; otherwise a new
  ``_LoadEntry`` (CTA:52-76) is registered there and appended to
  ``_pending_load_reqs``. The scheduler calls it for a request that is not
  yet ``WAITING_FOR_CHUNK``, has no ready chunk and is not done receiving,
  and then parks it in ``WAITING_FOR_CHUNK`` (``_process_chunk_queue``,
  CTA:1536-1547);
* ``recv_loop`` (BASE:52-82) polls each pending entry with
  ``_poll_single_request(entry)`` (CTA:494-544), one at a time:

  1. under the lock, ``_registered_load_entries.get(req_id) is not entry``
     returns True (the entry is dropped); otherwise ``chunk_id =
     get_req_chunk[req_id]`` (CTA:499-504);
  2. ``connector.get`` for key ``{ext}_{stage-1}_{chunk_id}`` runs **outside**
     the lock (CTA:508-514); an exception or ``None`` re-checks identity (True
     if stale, else False: retry) (CTA:515-526);
  3. under the lock, the identity re-check again - "Treat cleanup as a commit
     barrier: a late chunk must not recreate prompt/window state for the
     removed request" (CTA:528-533) - then ``_commit_received_chunk``; on
     success the registration is popped (CTA:534-544), so the next chunk needs
     a new ``load_async``;
* ``_commit_received_chunk`` (CTA:546-682): ``get_req_chunk[req_id] += 1``
  (CTA:561); ``meta.finished`` -> ``upstream_exhausted_requests`` and
  ``request.resumable = False``; ``meta.is_segment_finished`` ->
  ``segment_finished_requests`` (CTA:597-607); then ``_finished_load_reqs``
  (CTA:678), which the scheduler turns into a ready chunk
  (CTA:1548-1555). ``is_done_receiving_chunks`` (CTA:911-919) is either flag;
  the scheduler discards the segment flag when the next segment starts
  (``_resume_downstream_chunk_receiver``, ``omni_scheduler_mixin.py:825-838``;
  ``omni_ar_scheduler.py:908``; ``omni_generation_scheduler.py:710``);
* ``cleanup_receiver(request_id)`` (CTA:925-945, ``_clear_receiver_state_locked``
  CTA:947-966): under the lock, pops ``get_req_chunk`` (the next registration
  of the id polls chunk 0 again), both flags, ``_registered_load_entries``
  (which makes a queued or in-flight poll of the entry stale) and the rest.
  It is idempotent; a request id can be registered again afterwards.

Machines:

* ``receiver_state`` - the adapter's receiver state for one incarnation of a
  request id: ``streaming`` (polling), ``segment_done``
  (``segment_finished_requests``), ``exhausted`` (``upstream_exhausted``,
  final). Variables ``chunk`` (``get_req_chunk``) and ``waiting``
  (``WAITING_FOR_CHUNK``: a registration is out for the next chunk);
* ``load_entry`` - one ``_LoadEntry``: ``queued`` in ``_pending_load_reqs``, or
  ``getting`` (the recv thread is inside ``connector.get`` with it). Its
  identity is a statecore `Handle`: a new entry of the same id is a new
  generation, and cleanup or a commit retires it.

The system `receiver_system` (one request id, reused once after cleanup):

* producer (external) - ``put``: the upstream stage puts the next chunk of the
  current incarnation's stream (``data``, ``segment_end``, ``finished``);
* scheduler - ``load_async`` and ``resume_segment`` (internal: the scheduler's
  own ``_process_chunk_queue`` and segment restart), ``cleanup``
  (``cleanup_receiver``: finish, abort or purge), ``new_request`` (the id is
  used again after cleanup, by a new incarnation);
* recv thread - ``get_start`` (internal: step 1, and a non-blocking
  ``connector.get`` that finds the chunk) or ``get_start_empty`` (the same
  poll finding nothing yet, so the result is ``None``; not internal: the loop
  then only backs off and retries, BASE:77-82, which is idling, not
  progress), then, so that a cleanup can run in between, steps 2-3 as one of
  two internal actions: ``get_return`` while the entry is still the
  registered one (a ``None`` requeues it; a chunk is committed and the
  registration popped) or ``get_return_stale`` once ``cleanup_receiver``
  removed it (the poll is dropped: the commit barrier). The identity
  re-check is the precondition that tells them apart.

Simplifications: the chunks of one incarnation are ``data``, ``segment_end``,
``finished`` (`ReceiverConfig.stream`); a connector exception behaves like
``None`` and is folded into it; the scheduler's hand-over of a committed chunk
(``_finished_load_reqs`` -> ready -> scheduled -> ``load_async`` again) is
merged into the commit clearing ``waiting``; an empty non-boundary chunk
(generation mode: consumed but not made ready, CTA:669-674), the AR prompt
updates (``_pending_ar_prompt_updates``), timeouts and receive failures are
left out; the global ``connector`` holds the current incarnation's stream as
its upstream put it, key by key, and a new incarnation's producer starts a
fresh one (connector keys of the old incarnation are not read again: the
connector's key lifecycle is not modelled); every chunk carries the
incarnation that produced it as a ghost, so a chunk committed into the wrong
incarnation can be seen. Without the re-check (the variant), a late commit
into an id with no live state recreates it in the real code
(``get_req_chunk`` is a ``defaultdict``); the model keeps no state for it, but
the commit's output names the removed registration, which the
``commit_barrier`` monitor refuses; a late commit into a successor that is
done receiving is ignored. Every transition of both machines is taken in the
reference, which holds with no vacuous property.

Mutants no property can tell from the reference (``statecore check
--adequacy``), each declared in `EQUIVALENT_MUTANTS` with its reason: the
scheduler's ``not waiting`` guard and ``load_async``'s registered-entry check
refuse the same states (``waiting`` holds exactly while an entry is
registered), so dropping either changes nothing; without the initial spawn
``new_request`` starts the first incarnation instead; a ``resume`` the machine
rejects is a step that changes nothing; and the outputs ``cleaned``,
``committed`` and ``dropped`` are observations whose removal changes no state.

The variant ``receiver_no_recheck`` replaces the recv thread's return steps
(`ReceiverConfig.returns`) with `WITHOUT_RECHECK`: the identity re-check
before the commit (CTA:532-533) removed, so a chunk whose
``get`` was in flight when ``cleanup_receiver`` ran is committed anyway - into
nothing, or into the id's next incarnation (whose chunk index then skips its
own chunk 0), and the successor's registration is popped with it.
"""

from __future__ import annotations

from collections.abc import Callable, Hashable, Mapping
from dataclasses import dataclass
from functools import partial
from typing import Annotated, Any, NamedTuple

from statecore.spec.receiver import CHUNKS_IN_ORDER, COMMIT_BARRIER, properties

from statecore import Event, Field, Machine, Snapshot, State, Transition, Var, out
from statecore.registry import Target
from statecore.system import Action, Component, Handle, Keys, RunFn, System, Tx

BOOL = (False, True)

DATA = "data"
SEGMENT_END = "segment_end"
FINISHED = "finished"
KINDS: tuple[str, ...] = (DATA, SEGMENT_END, FINISHED)

REQ = Keys("req", 1)
"""The one request id."""


# -- records ---------------------------------------------------------------------------


class Chunk(NamedTuple):
    """A chunk the upstream put under the next key.

    `producer` is the generation of the request incarnation whose stream it
    belongs to (a ghost: the wire carries only the key and the chunk).
    """

    kind: str
    producer: int


class InFlight(NamedTuple):
    """The recv thread inside ``connector.get`` for `entry`, reading key `chunk_id`.

    `result` is the kind of the chunk read, or None (`producer` 0) if none was there.
    """

    entry: Handle
    chunk_id: int
    result: str | None
    producer: int


class Shared(NamedTuple):
    """The receiver system's globals."""

    connector: Annotated[
        tuple[Chunk, ...], "the current incarnation's stream put so far: see Chunk"
    ] = ()
    in_flight: Annotated[InFlight | None, "the recv thread in connector.get: see InFlight"] = None


# -- machines --------------------------------------------------------------------------

Payload = Mapping[str, Any]
Guard = Callable[[Snapshot, Payload], bool]


def not_waiting(s: Snapshot, p: Payload) -> bool:
    """No registration is out for the next chunk yet."""
    return not s.waiting


def wait_for_chunk(s: Snapshot, p: Payload) -> dict[str, Any]:
    """``WAITING_FOR_CHUNK``: the scheduler parks the request (CTA:1536-1547)."""
    return {"waiting": True}


def next_chunk_ready(s: Snapshot, p: Payload) -> dict[str, Any]:
    """``get_req_chunk += 1`` (CTA:561); the chunk is handed to the scheduler as ready."""
    return {"chunk": s.chunk + 1, "waiting": False}


def receiver_state_machine(chunks: int = 3) -> Machine:
    """The adapter's receiver state for one incarnation of a request id."""
    # A late commit in the variant can push one foreign chunk into a successor.
    cap = chunks + 1

    def data(s: Snapshot, p: Payload) -> bool:
        return bool(p["kind"] == DATA and s.chunk < cap)

    def segment_end(s: Snapshot, p: Payload) -> bool:
        return bool(p["kind"] == SEGMENT_END and s.chunk < cap)

    def finished(s: Snapshot, p: Payload) -> bool:
        return bool(p["kind"] == FINISHED and s.chunk < cap)

    def commit(kind: str, guard: Guard, target: str | None) -> Transition:
        name = f"streaming--commit({kind})-->{target or 'streaming'}"
        return Transition(
            "streaming", "commit", target, guard=guard, effect=next_chunk_ready, name=name
        )

    return Machine(
        "receiver_state",
        doc="Receiver-side state of one request incarnation (see the module doc).",
        states=[
            State("streaming", initial=True, doc="polling its upstream chunks"),
            State("segment_done", doc="segment_finished_requests: done until resumed"),
            State("exhausted", final=True, doc="upstream_exhausted_requests: done"),
        ],
        variables=[
            Var("chunk", range(cap + 1), 0, doc="get_req_chunk[req_id]: the next key to poll"),
            Var("waiting", BOOL, False, doc="WAITING_FOR_CHUNK: a registration is out"),
        ],
        events=[
            Event("register", doc="load_async: the scheduler parks it for the next chunk"),
            Event(
                "commit",
                [Field("kind", KINDS)],
                policy="ignore",
                doc="_commit_received_chunk (ignored when done receiving: variant only)",
            ),
            Event("resume", doc="the next segment starts: segment_finished_requests.discard"),
        ],
        transitions=[
            Transition("streaming", "register", None, guard=not_waiting, effect=wait_for_chunk),
            commit(DATA, data, None),
            commit(SEGMENT_END, segment_end, "segment_done"),
            commit(FINISHED, finished, "exhausted"),
            Transition("segment_done", "resume", "streaming"),
        ],
    )


def load_entry_machine() -> Machine:
    """One ``_LoadEntry``: queued for the recv thread, or inside ``connector.get``."""
    return Machine(
        "load_entry",
        doc="One _LoadEntry registration (identity: its handle's generation).",
        states=[
            State("queued", initial=True, doc="in _pending_load_reqs"),
            State("getting", doc="the recv thread is in connector.get with it"),
        ],
        events=[
            Event(
                "get_start",
                policy="error",
                doc="step 1 passed: identity holds, chunk_id read (only a queued entry)",
            ),
            Event(
                "get_miss",
                policy="error",
                doc="connector.get returned None (or raised): retry later (only while getting)",
            ),
        ],
        transitions=[
            Transition("queued", "get_start", "getting"),
            Transition("getting", "get_miss", "queued"),
        ],
    )


# -- producer and client ---------------------------------------------------------------


def init(tx: Tx[Shared]) -> None:
    for req in REQ.values:
        tx.spawn("receiver", req)


def put(tx: Tx[Shared], req: Hashable, *, stream: tuple[str, ...]) -> None:
    """The upstream puts the next chunk of the current incarnation's `stream`."""
    state = tx.handle("receiver", req)
    tx.require(state is not None)
    assert state is not None
    chunks = tx.g.connector
    tx.require(len(chunks) < len(stream))
    tx.put(connector=(*chunks, Chunk(stream[len(chunks)], state.generation)))


def new_request(tx: Tx[Shared], req: Hashable) -> None:
    tx.require(not tx.live(("receiver", req)), "the id is still in use")
    tx.spawn("receiver", req)
    tx.put(connector=())  # the new incarnation's upstream starts its own stream


# -- scheduler -------------------------------------------------------------------------


def load_async(tx: Tx[Shared], req: Hashable) -> None:
    state = tx.handle("receiver", req)
    tx.require(state is not None)
    assert state is not None
    tx.require(tx.handle("entry", req) is None)  # already registered: return
    tx.require(tx.fire(state, "register").accepted)
    tx.spawn("entry", req)


def resume_segment(tx: Tx[Shared], req: Hashable) -> None:
    state = tx.handle("receiver", req)
    tx.require(state is not None)
    assert state is not None
    tx.require(tx.fire(state, "resume").accepted)


def cleanup(tx: Tx[Shared], req: Hashable) -> None:
    state = tx.handle("receiver", req)
    tx.require(state is not None)  # a second cleanup changes nothing
    assert state is not None
    entry = tx.handle("entry", req)
    if entry is not None:
        tx.retire(entry)  # _registered_load_entries.pop: in-flight polls go stale
    tx.retire(state)  # get_req_chunk and both flags popped
    tx.emit(out("cleaned", request=state, entry=entry))


# -- recv thread -----------------------------------------------------------------------


def start(tx: Tx[Shared], req: Hashable, *, found: bool) -> None:
    """Step 1 of ``_poll_single_request``, and ``connector.get`` finding a chunk or not."""
    tx.require(tx.g.in_flight is None)
    entry = tx.handle("entry", req)
    tx.require(entry is not None)
    assert entry is not None
    snap = tx.snapshot(("receiver", req))
    assert snap is not None  # an entry implies receiver state
    chunk_id = snap.chunk
    chunks = tx.g.connector
    tx.require((chunk_id < len(chunks)) == found)
    tx.fire(entry, "get_start")
    if found:
        read = chunks[chunk_id]
        flight = InFlight(entry, chunk_id, read.kind, read.producer)
    else:
        flight = InFlight(entry, chunk_id, None, 0)
    tx.put(in_flight=flight)


def get_start(tx: Tx[Shared], req: Hashable) -> None:
    start(tx, req, found=True)


def get_start_empty(tx: Tx[Shared], req: Hashable) -> None:
    start(tx, req, found=False)


def take_flight(tx: Tx[Shared]) -> InFlight:
    """connector.get returned: the poll the recv thread was running, now over."""
    flight = tx.g.in_flight
    tx.require(flight is not None)
    assert flight is not None
    tx.put(in_flight=None)
    return flight


def commit_or_requeue(tx: Tx[Shared], flight: InFlight) -> None:
    """A None requeues the entry (False: polled again); a chunk is committed (CTA:534-544)."""
    entry = flight.entry
    if flight.result is None:
        tx.fire(entry, "get_miss")
        return
    req = entry.key
    state = tx.handle("receiver", req)
    if state is not None:
        tx.fire(state, "commit", kind=flight.result)
    what = {"producer": flight.producer, "chunk": flight.chunk_id, "kind": flight.result}
    tx.emit(out("committed", request=state, entry=entry, **what))
    registered = tx.handle("entry", req)
    if registered is not None:
        tx.retire(registered)  # _registered_load_entries.pop(req_id, None)


def get_return(tx: Tx[Shared]) -> None:
    """connector.get returned while the entry is still the registered one."""
    flight = take_flight(tx)
    # _registered_load_entries.get(req_id) is entry: after a None (CTA:515-526)
    # and, before the commit, after a chunk (CTA:528-533).
    tx.require(tx.live(flight.entry))
    commit_or_requeue(tx, flight)


def get_return_stale(tx: Tx[Shared]) -> None:
    """cleanup_receiver popped the registration while connector.get ran: the poll is dropped."""
    flight = take_flight(tx)
    tx.require(not tx.live(flight.entry))
    if flight.result is not None:
        tx.emit(out("dropped", entry=flight.entry, chunk=flight.chunk_id))  # the commit barrier


def get_return_without_recheck(tx: Tx[Shared]) -> None:
    """`get_return` without the re-check before the commit (CTA:532-533 removed)."""
    flight = take_flight(tx)
    # Only a None re-checks the entry's identity (CTA:515-526); a chunk is committed.
    tx.require(tx.live(flight.entry) or flight.result is not None)
    commit_or_requeue(tx, flight)


def get_return_stale_without_recheck(tx: Tx[Shared]) -> None:
    """`get_return_stale` without the re-check: only a None is dropped."""
    flight = take_flight(tx)
    tx.require(not tx.live(flight.entry) and flight.result is None)


class Returns(NamedTuple):
    """The recv thread's two steps after ``connector.get`` returns."""

    live: RunFn
    stale: RunFn


WITH_RECHECK = Returns(get_return, get_return_stale)
"""0.30.0: cleanup_receiver is a commit barrier (CTA:528-533)."""
WITHOUT_RECHECK = Returns(get_return_without_recheck, get_return_stale_without_recheck)
"""The identity re-check before the commit removed."""


# -- the system ------------------------------------------------------------------------


@dataclass(frozen=True)
class ReceiverConfig:
    """Bounds, and the part a known-bug variant replaces."""

    name: str = "receiver_system"
    incarnations: int = 2  # the request id is used this many times
    stream: tuple[str, ...] = (DATA, SEGMENT_END, FINISHED)
    # What _poll_single_request does once connector.get returns (CTA:515-544).
    returns: Returns = WITH_RECHECK


_OUTPUT_ONLY = "an output only: the action changes the same state without it"

EQUIVALENT_MUTANTS: dict[str, str] = {
    "drop-guard receiver_state.streaming--register-->(same)": "load_async refuses a "
    "registered id first, and waiting holds exactly while an entry is registered",
    'skip-spawn init: tx.spawn("receiver", req)': "new_request spawns "
    "the first incarnation instead, with the same generation and an empty stream",
    'skip-require load_async: tx.require(tx.handle("entry", req) is None)'
    "  # already registered: return": "the register guard (not waiting) refuses the same "
    "states: waiting holds exactly while an entry is registered",
    'skip-require resume_segment: tx.require(tx.fire(state, "resume").accepted)': "a resume "
    "the machine rejects changes no state",
    'skip-emit cleanup: tx.emit(out("cleaned", request=state, entry=entry))': _OUTPUT_ONLY,
    'skip-emit commit_or_requeue: tx.emit(out("committed", request=state, entry=entry, '
    "**what))": _OUTPUT_ONLY,
    'skip-emit get_return_stale: tx.emit(out("dropped", entry=flight.entry, '
    "chunk=flight.chunk_id))  # the commit barrier": _OUTPUT_ONLY,
}
"""Mutants of `receiver_system` that behave like it, by id, with the reason."""


def build(config: ReceiverConfig = ReceiverConfig()) -> System:
    """The receiver system for `config`, with the spec's properties."""
    stream = config.stream
    entries = config.incarnations * (len(stream) + 2)
    req = {"req": REQ}
    return System(
        config.name,
        doc=__doc__ or "",
        equivalent_mutants=EQUIVALENT_MUTANTS,
        components=[
            Component(
                "receiver",
                receiver_state_machine(len(stream)),
                REQ,
                max_generations=config.incarnations,
            ),
            Component("entry", load_entry_machine(), REQ, max_generations=entries),
        ],
        globals=Shared,
        init=init,
        actions=[
            Action("put", "producer", partial(put, stream=stream), req),
            Action("new_request", "client", new_request, req),
            Action("load_async", "scheduler", load_async, req, internal=True),
            Action("resume_segment", "scheduler", resume_segment, req, internal=True),
            Action("cleanup", "scheduler", cleanup, req),
            Action("get_start", "recv_thread", get_start, req, internal=True),
            Action("get_start_empty", "recv_thread", get_start_empty, req),
            Action("get_return", "recv_thread", config.returns.live, internal=True),
            Action("get_return_stale", "recv_thread", config.returns.stale, internal=True),
        ],
        properties=properties(len(stream)),
    )


RECEIVER_SYSTEM = build()


def variant_no_recheck() -> System:
    """The identity re-check before the commit (CTA:532-533) removed."""
    return build(ReceiverConfig(name="receiver_no_recheck", returns=WITHOUT_RECHECK))


_RX = __name__

TARGETS: tuple[Target, ...] = (
    Target(
        "receiver_system",
        f"{_RX}:RECEIVER_SYSTEM",
        doc="load_async, _poll_single_request, commit and cleanup_receiver as a commit "
        "barrier, with request id reuse",
    ),
    Target(
        "receiver_no_recheck",
        variant_no_recheck,
        violates=(CHUNKS_IN_ORDER, COMMIT_BARRIER),
        doc="no identity re-check before the commit: a chunk whose get was in flight "
        "during cleanup_receiver is committed, into nothing or into the id's successor",
        family="receiver_system",
    ),
)
