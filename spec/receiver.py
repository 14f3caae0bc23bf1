"""Properties of the receiver system (`statecore.models.receiver`).

Each property names the vLLM-Omni 0.30.0 code it comes from (``CTA`` is
``vllm_omni/distributed/omni_connectors/transfer_adapter/chunk_transfer_adapter.py``).
The globals they read are documented on the system: ``late_commit`` (a chunk
was committed after ``cleanup_receiver`` removed its registration),
``available`` (chunks the current incarnation's upstream has put),
``in_flight`` (the recv thread inside ``connector.get``). The commit's output
``committed(request, producer, chunk, kind)`` names the incarnation whose state
took the chunk and, as a ghost, the incarnation whose upstream produced it.
"""

from __future__ import annotations

from collections.abc import Hashable, Mapping

from statecore import Event, Field, Machine, State, Transition, Var
from statecore.properties import Predicate, Property, always, eventually, monitor, sometimes
from statecore.system import Emitted, Handle, StateView

COMMIT_BARRIER = "commit_barrier"
CHUNKS_IN_ORDER = "chunks_in_order"
FINISHED_ENDS_STREAM = "finished_ends_stream"

POLL = "_poll_single_request (CTA:494-544)"


def chunk_order_monitor(chunks: int = 3) -> Machine:
    """What one request incarnation may commit: its own chunks 0, 1, ... up to finished."""
    kinds = ("data", "segment_end", "finished")
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
            Transition(
                "streaming",
                "commit",
                None,
                guard=lambda s, p: (
                    p["own"]
                    and p["index"] == s.next
                    and p["kind"] != "finished"
                    and s.next < chunks
                ),
                guard_label="own chunk `next`",
                effect=lambda s, p: {"next": s.next + 1},
                effect_label="next += 1",
            ),
            Transition(
                "streaming",
                "commit",
                "ended",
                guard=lambda s, p: p["own"] and p["index"] == s.next and p["kind"] == "finished",
                guard_label="own finished chunk `next`",
            ),
        ],
    )


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


def _finished_ends_stream(chunks: int) -> Predicate:
    def pred(v: StateView) -> bool:
        if v.get("available") < chunks:
            return True
        for handle, snap in v.live("receiver"):
            if snap.state != "exhausted" or v.snapshot("entry", handle.key) is not None:
                return False
        return True

    return pred


def _late_chunk_in_flight(v: StateView) -> bool:
    flight = v.get("in_flight")
    if flight is None or flight[2] is None:
        return False
    entry: Handle = flight[0]
    slot = v.slot("entry", entry.key)
    return slot.snapshot is None or slot.generation != entry.generation


def _reused_to_end(v: StateView) -> bool:
    return any(
        handle.generation >= 2 and snap.state == "exhausted" for handle, snap in v.live("receiver")
    )


def properties(chunks: int = 3) -> tuple[Property, ...]:
    """The receiver properties, in the order reports list them."""
    return (
        always(
            COMMIT_BARRIER,
            "No chunk is committed after cleanup_receiver removed its registration: "
            "cleanup is a commit barrier.",
            lambda v: not v.get("late_commit"),
            source=f"{POLL}: 'Treat cleanup as a commit barrier' (CTA:528-533)",
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
