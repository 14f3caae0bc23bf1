"""The connector-key counter of the chunk-transfer system: ``put_req_chunk[ext]``.

``_send_single_request_for_generation`` puts each chunk under
``"{ext}_{stage}_{put_req_chunk[ext]}"`` (CTA:777-778); a successful put of a
generation that still owns the id advances the counter under the sender lock
(CTA:842-861: a completion the generation no longer owns, or a chunk of a
retiring generation, advances nothing), and ``_clear_sender_state_locked``
pops it (CTA:1031), so the next generation of the id starts again at 0.

The consumer reads by key, so a put under a key that still holds an unread
put replaces it (`statecore.models.chunk_transfer_save_thread.put`). Whether
a key also names the request instance is `ChunkTransferConfig.keys_per_instance`.
"""

from __future__ import annotations

from statecore import Event, Machine, State, Transition, Var
from statecore.definition import Payload, Snapshot


def put_key_machine(limit: int) -> Machine:
    """``put_req_chunk[ext]``: advanced by each counted put, popped with the sender state.

    `limit` bounds the puts counted before a clear: every save of every
    request generation that may join one sender generation.
    """

    def below_limit(s: Snapshot, p: Payload) -> bool:
        return bool(s.chunk < limit)

    def advance(s: Snapshot, p: Payload) -> dict[str, int]:
        return {"chunk": s.chunk + 1}

    def reset(s: Snapshot, p: Payload) -> dict[str, int]:
        return {"chunk": 0}

    return Machine(
        "put_req_chunk",
        doc="The next connector key's chunk number for an external id.",
        states=[State("open", initial=True, doc="the id's counter (0 when absent)")],
        variables=[Var("chunk", range(limit + 1), 0, doc="put_req_chunk[ext]")],
        events=[
            Event(
                "advance",
                policy="error",
                doc="a successful put the generation still owns (CTA:859)",
            ),
            Event("clear", doc="_clear_sender_state_locked pops it (CTA:1031)"),
        ],
        transitions=[
            Transition("open", "advance", None, guard=below_limit, effect=advance),
            Transition("open", "clear", None, effect=reset),
        ],
    )
