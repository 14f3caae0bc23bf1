"""Properties of the receiver system (`statecore.models.receiver`).

Each property names the vLLM-Omni 0.30.0 code it comes from (``CTA`` is
``vllm_omni/distributed/omni_connectors/transfer_adapter/chunk_transfer_adapter.py``).
The globals they read are documented on the system: ``connector`` (the chunks
the current incarnation's upstream has put), ``in_flight`` (the recv thread
inside ``connector.get``). Two outputs carry what the monitors judge:
``committed(request, entry, producer, chunk, kind)`` names the incarnation
whose state took the chunk, the registration (`Handle` of the ``entry``) the
poll ran for and, as a ghost, the incarnation whose upstream produced it;
``cleaned(request, entry)`` names the registration ``cleanup_receiver``
removed (None if there was none).
"""

from __future__ import annotations

from collections.abc import Hashable, Mapping, Sized
from typing import Any, Protocol

from statecore import Event, Field, Machine, Snapshot, State, Transition, Var
from statecore.properties import Predicate, Property, always, eventually, monitor, sometimes
from statecore.system import Emitted, Handle, StateView

COMMIT_BARRIER = "commit_barrier"
CHUNKS_IN_ORDER = "chunks_in_order"
FINISHED_ENDS_STREAM = "finished_ends_stream"
WAITING_IFF_REGISTERED = "waiting_iff_registered"

POLL = "_poll_single_request (CTA:494-544)"

Payload = Mapping[str, Any]


class Poll(Protocol):
    """The recv thread's poll as the properties read it (`statecore.models.receiver.InFlight`)."""

    @property
    def entry(self) -> Handle: ...
    @property
    def result(self) -> str | None: ...


class Polled(Protocol):
    """The globals the properties read (fields of `statecore.models.receiver.Shared`)."""

    @property
    def connector(self) -> Sized: ...
    @property
    def in_flight(self) -> Poll | None: ...


View = StateView[Polled]


def chunk_order_monitor(chunks: int = 3) -> Machine:
    """What one request incarnation may commit: its own chunks 0, 1, ... up to finished."""
    kinds = ("data", "segment_end", "finished")

    def own_chunk_next(s: Snapshot, p: Payload) -> bool:
        """Its own upstream's chunk `next`, not the finished one, within the stream."""
        return bool(
            p["own"] and p["index"] == s.next and p["kind"] != "finished" and s.next < chunks
        )

    return Machine(
        "chunk_order",
        doc="An incarnation commits its own upstream's chunks in key order from 0, without "
        "gaps, and nothing after the finished one.",
        states=[
            State("streaming", initial=True, doc="the next chunk to commit is `next`"),
            State("ended", final=True, doc="the finished chunk was committed"),
        ],
        variables=[Var("next", range(chunks + 1), 0, doc="chunks committed so far")],
        events=[
            Event(
                "commit",
                [
                    Field("own", (False, True)),
                    Field("index", range(chunks + 2)),
                    Field("kind", kinds),
                ],
                policy="reject",
            )
        ],
        transitions=[
            Transition("streaming", "commit", None, guard=own_chunk_next, effect=count_commit),
            Transition("streaming", "commit", "ended", guard=own_finished_chunk_next),
        ],
    )


def own_finished_chunk_next(s: Snapshot, p: Payload) -> bool:
    """Its own upstream's finished chunk, as chunk `next`."""
    return bool(p["own"] and p["index"] == s.next and p["kind"] == "finished")


def count_commit(s: Snapshot, p: Payload) -> dict[str, Any]:
    """One more chunk committed."""
    return {"next": s.next + 1}


def route_committed(emitted: Emitted) -> tuple[Hashable, str, Mapping[str, object]] | None:
    """Route ``committed`` to the monitor of the incarnation whose state took it."""
    output = emitted.output
    request = output.get("request")
    if output.name != "committed" or not isinstance(request, Handle):
        return None  # no live state: the commit barrier's business
    payload = {
        "own": output.get("producer") == request.generation,
        "index": output.get("chunk"),
        "kind": output.get("kind"),
    }
    return request, "commit", payload


def registration_monitor() -> Machine:
    """One ``_LoadEntry`` registration: committed once, or removed by cleanup, then nothing."""
    return Machine(
        "registration",
        doc="A registration takes at most one commit, and none once cleanup_receiver removed it.",
        states=[
            State("registered", initial=True, doc="in _registered_load_entries"),
            State("committed", final=True, doc="its chunk was committed; it was popped"),
            State("removed", final=True, doc="cleanup_receiver popped it"),
        ],
        events=[
            Event("commit", policy="reject", doc="_commit_received_chunk for this poll"),
            Event("remove", policy="reject", doc="cleanup_receiver"),
        ],
        transitions=[
            Transition("registered", "commit", "committed"),
            Transition("registered", "remove", "removed"),
        ],
    )


def route_registration(emitted: Emitted) -> tuple[Hashable, str, Mapping[str, object]] | None:
    """Route ``cleaned`` and ``committed`` to the monitor of the registration they name."""
    output = emitted.output
    entry = output.get("entry")
    if not isinstance(entry, Handle):
        return None
    if output.name == "cleaned":
        return entry, "remove", {}
    if output.name == "committed":
        return entry, "commit", {}
    return None


def _finished_ends_stream(chunks: int) -> Predicate:
    def finished_ends_stream(v: View) -> bool:
        if len(v.g.connector) < chunks:
            return True
        for handle, snap in v.live("receiver"):
            if snap.state != "exhausted" or v.snapshot("entry", handle.key) is not None:
                return False
        return True

    return finished_ends_stream


def _late_chunk_in_flight(v: View) -> bool:
    flight = v.g.in_flight
    if flight is None or flight.result is None:
        return False
    slot = v.slot("entry", flight.entry.key)
    return slot.snapshot is None or slot.generation != flight.entry.generation


def _waiting_iff_registered(v: View) -> bool:
    """A live incarnation is WAITING_FOR_CHUNK exactly while a registration of it is out."""
    return all(
        snap.waiting == (v.snapshot("entry", handle.key) is not None)
        for handle, snap in v.live("receiver")
    )


def _reused_to_end(v: View) -> bool:
    return any(
        handle.generation >= 2 and snap.state == "exhausted" for handle, snap in v.live("receiver")
    )


def properties(chunks: int = 3) -> tuple[Property, ...]:
    """The receiver properties, in the order reports list them."""
    return (
        monitor(
            COMMIT_BARRIER,
            "No chunk is committed after cleanup_receiver removed its registration: "
            "cleanup is a commit barrier, and a registration takes one commit at most.",
            registration_monitor(),
            route_registration,
            source=f"{POLL}: 'Treat cleanup as a commit barrier' (CTA:528-533); "
            "cleanup_receiver pops _registered_load_entries (CTA:947-966)",
        ),
        monitor(
            CHUNKS_IN_ORDER,
            "Each request incarnation commits its own upstream's chunks in key order from "
            "chunk 0, without gaps, and nothing after the finished one.",
            chunk_order_monitor(chunks),
            route_committed,
            source="get_req_chunk (CTA:504, CTA:561); cleanup_receiver pops it "
            "(CTA:947-966); upstream_exhausted (CTA:597-605)",
        ),
        eventually(
            FINISHED_ENDS_STREAM,
            "At rest, a request whose upstream put its finished chunk has committed it: it is "
            "upstream-exhausted and registers no more.",
            _finished_ends_stream(chunks),
            source="meta.finished -> upstream_exhausted_requests (CTA:597-605); "
            "is_done_receiving_chunks (CTA:911-919)",
        ),
        always(
            WAITING_IFF_REGISTERED,
            "A request is parked in WAITING_FOR_CHUNK exactly while a load registration of it "
            "is out: none waits with nobody polling for it, none polled is left running.",
            _waiting_iff_registered,
            source="_process_chunk_queue: load_async, then WAITING_FOR_CHUNK (CTA:1536-1547); "
            "a committed chunk pops the registration and makes the request ready "
            "(CTA:534-544, CTA:1548-1555)",
        ),
        sometimes(
            "late_chunk_in_flight",
            "A chunk is inside connector.get when cleanup_receiver removes its registration.",
            _late_chunk_in_flight,
            source=f"vacuity guard for {COMMIT_BARRIER}",
        ),
        sometimes(
            "reused_id_finishes",
            "A request id used again after cleanup receives its stream up to the finished chunk.",
            _reused_to_end,
            source=f"vacuity guard for {CHUNKS_IN_ORDER} (the chunk index resets to 0)",
        ),
    )
