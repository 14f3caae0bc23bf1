"""The save thread of the chunk-transfer system: one queued task at a time.

``begin`` pops the FIFO head (``save_loop``, BASE:119-132), ``process`` runs
the processor callback of ``_send_single_request_for_generation``, ``put``
is ``connector.put`` with the post-put bookkeeping, ``finish`` is the task's
``finally`` (fence release and deferred reclaim).

What the reference does when the processor raises is one `RaiseRule`
(`ON_PROCESSOR_RAISE` maps `ChunkTransferConfig.processor_raise` to it):
the request fails visibly and a boundary still sends its marker
(`fail_visibly`); 0.30.0 only logs (`only_log`); seed 000 as submitted
records the failure and puts nothing (`record_and_skip_put`).
"""

from __future__ import annotations

from collections.abc import Callable

from statecore.system import Handle, Tx

from .chunk_transfer_records import (
    BEGUN,
    CANCELLED,
    CHUNK,
    DATA,
    EMPTY,
    ERROR,
    FINISHING,
    NAMESPACE,
    PUTTING,
    RAISED,
    SEGMENT_END,
    TERMINAL,
    InFlight,
    Key,
    Made,
    Owed,
    ProcessorRaise,
    Put,
    Shared,
    Task,
)
from .chunk_transfer_sender import fire_on_sender, record_send_failure

RaiseRule = Callable[[Tx[Shared], Task], bool]
"""What a processor exception does to `task`; whether its send goes on to the pre-put check."""


def begin(tx: Tx[Shared]) -> None:
    """Pop the FIFO head (``_pending_save_reqs.popleft()``); the fence discards a stale
    or vetoed task."""
    tx.require(tx.g.in_flight is None)
    task: Task = tx.popleft("queue")
    if fire_on_sender(tx, task.sender, "begin", terminal=task.kind == TERMINAL).accepted:
        tx.put(in_flight=InFlight(task, BEGUN, None))
    # else: discarded as stale (identity lost, or cancelled and not terminal)


def process(tx: Tx[Shared], outcome: str, *, on_raise: RaiseRule) -> None:
    """The processor reads ``request_payload[ext]``, then returns a payload, None, or raises.

    The send then runs on by itself to the cancel check and, if that
    passes, blocks inside ``connector.put``.
    """
    flight = tx.g.in_flight
    tx.require(flight is not None and flight.phase == BEGUN)
    assert flight is not None
    task = flight.task
    read_state(tx, task.sender, task.request)
    if outcome == "raise" and not on_raise(tx, task):
        return
    if outcome != "payload" and task.kind == CHUNK:
        if outcome == "none":  # the processor has nothing to send for this chunk
            tx.put(owed=tx.g.owed - {Owed(task.request, task.save)})
        end_task(tx, task)  # nothing is put (on a raise, 0.30.0 records nothing either)
        return
    snap = tx.snapshot(task.sender)
    if snap is None or (snap.state in CANCELLED and task.kind != TERMINAL):
        end_task(tx, task)  # _sender_generation_is_active fails: no put, no failure
        return
    # A boundary without a payload still sends an empty finish marker.
    payload = DATA if outcome == "payload" else ERROR if outcome == "raise" else EMPTY
    tx.put(in_flight=InFlight(task, PUTTING, payload))


def fail_visibly(tx: Tx[Shared], task: Task) -> bool:
    """The reference: the exception is recorded, so the request fails visibly."""
    record_send_failure(tx, task.request, state=True)
    return True


def only_log(tx: Tx[Shared], task: Task) -> bool:
    """0.30.0: the exception is only logged."""
    return True


def record_and_skip_put(tx: Tx[Shared], task: Task) -> bool:
    """Seed 000 as submitted: the exception is recorded and the task returns, no put."""
    record_send_failure(tx, task.request, state=True)
    end_task(tx, task)
    return False


ON_PROCESSOR_RAISE: dict[ProcessorRaise, RaiseRule] = {
    "record": fail_visibly,
    "log": only_log,
    "record_and_skip": record_and_skip_put,
}


def put(tx: Tx[Shared], outcome: str, *, record_false_put: bool, per_instance: bool) -> None:
    """``connector.put`` returns (or raises); then the post-put bookkeeping.

    `record_false_put`: a put that returns False is recorded as a send
    failure (vllm-omni #4855). `per_instance`: the connector key names the
    sender generation too (`ChunkTransferConfig.keys_per_instance`).
    """
    flight = tx.g.in_flight
    tx.require(flight is not None and flight.phase == PUTTING)
    assert flight is not None
    task = flight.task
    request, kind = task.request, task.kind
    counter = ("put_req_chunk", task.sender.key)
    if outcome == "ok":
        held = tx.snapshot(counter)
        assert held is not None  # spawned for every id at init
        key = Key(task.sender.key, task.sender.generation if per_instance else 0, held.chunk)
        item = Put(
            request, kind, task.segment, empty=flight.detail != DATA, save=task.save, key=key
        )
        store(tx, item)
        if flight.detail == ERROR and request not in tx.g.released:
            # a marker in place of a payload the processor raised on
            tx.put(error_markers=tx.g.error_markers | {request})
    if outcome == "raise":  # propagates through the finally to the save loop
        tx.put(in_flight=InFlight(task, FINISHING, RAISED))
        return
    tx.put(in_flight=InFlight(task, FINISHING, None))
    snap = tx.snapshot(task.sender)
    if snap is None or (snap.state == "retiring" and kind != TERMINAL):
        return  # "Ignoring completed put for retired request"
    if outcome == "ok":
        tx.fire(counter, "advance")  # put_req_chunk[ext] += 1 (CTA:859)
    if outcome == "false" and record_false_put:
        record_send_failure(tx, request, state=True)
    if kind == SEGMENT_END:  # segment-end post-processing (CTA:902-909)
        state = tx.handle("state", task.sender.key)
        if state is not None:
            held = tx.snapshot(state)
            if held is not None and held.ns0:
                tx.put(segment_done=True)
            tx.fire(state, "complete_segment")
    if kind == TERMINAL and outcome == "ok":
        fire_on_sender(tx, task.sender, "cleanup")  # cleanup(): deferred to the finally


def store(tx: Tx[Shared], item: Put) -> None:
    """The connector holds `item` under its key, replacing an unread put under that key.

    The replaced put's consumer can no longer read it; if that consumer still
    waits for it (a terminal, or a chunk it is owed), the loss is recorded.
    """
    mailbox = tx.g.mailbox
    replaced = [old for old in mailbox if old.key == item.key]
    if replaced:
        mailbox = tuple(old for old in mailbox if old.key != item.key)
        awaited = {
            old.request
            for old in replaced
            if old.kind == TERMINAL or Owed(old.request, old.save) in tx.g.owed
        }
        if awaited:
            tx.put(overwritten=tx.g.overwritten | awaited)
    tx.put(mailbox=(*mailbox, item))


def finish(tx: Tx[Shared]) -> None:
    """The task's ``finally``; a raised put is recorded by ``save_loop``."""
    flight = tx.g.in_flight
    tx.require(flight is not None and flight.phase == FINISHING)
    assert flight is not None
    end_task(tx, flight.task)
    if flight.detail == RAISED:  # save_loop: record_send_failure(request_id, ...)
        record_send_failure(tx, flight.task.request, state=True)


def end_task(tx: Tx[Shared], task: Task) -> None:
    """The task's ``finally``: fence release and deferred cleanup, in the machine."""
    fire_on_sender(tx, task.sender, "end", terminal=task.kind == TERMINAL)
    tx.put(in_flight=None)


def read_state(tx: Tx[Shared], token: Handle, request: Handle) -> None:
    """The processor reads ``request_payload[ext]`` (creating its namespace)."""
    state = tx.handle("state", token.key)
    if state is None:
        return
    outcome = tx.fire(state, "get_or_create", namespace=NAMESPACE)
    if not outcome.accepted:
        return
    made = tx.g.made
    if outcome.outputs[0].get("created"):
        tx.put(made=made | {Made(state, request)})
    elif Made(state, request) not in made:
        tx.put(crossed=True)  # another request's processor made it
