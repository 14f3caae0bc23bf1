"""Stage N+1 of the stage pair: its receiver polls stage N's keys, finishes, or times out.

``poll`` is one pass of the receiving side for the id's request:
``load_async`` if no registration is out, then ``_poll_single_request``
(``connector.get`` of key ``{ext}_{N}_{get_req_chunk}``, which unlinks the
segment, and the commit); in the reference, ``drop_foreign`` is the same
pass finding a chunk another request put, which it drops.
``finish_downstream`` is stage N+1 finishing a request whose upstream is
exhausted (``cleanup_receiver``); ``deadline`` is
its ``_process_pending_chunk_timeouts``, which fails a request still waiting
for input once nothing upstream can send it any more.
"""

from __future__ import annotations

from collections.abc import Hashable

from statecore import out
from statecore.system import Handle, Tx

from .receiver import FINISHED
from .stage_pair_records import Sending, Shared, StagePairConfig, Stored, Task


def poll(tx: Tx[Shared], ext: Hashable, *, config: StagePairConfig) -> None:
    """``load_async`` (if not registered) and one ``_poll_single_request``.

    The reference refuses to commit another request's chunk here: that is
    `drop_foreign`'s step.
    """
    receiver, registered, found = get(tx, ext)
    if found is None:
        tx.require(registered)  # get returned None: the entry stays registered
        return
    chunk = found.chunk
    gen = receiver.generation
    own = chunk.producer == gen
    tx.require(own or not config.check_producer, "another request's chunk: drop_foreign")
    tx.fire(receiver, "commit", kind=chunk.kind)
    what = {"producer": chunk.producer, "chunk": chunk.ordinal, "kind": chunk.kind}
    tx.emit(out("committed", request=receiver, **what))
    if not own:
        tx.put(crossed=True)
        return
    tx.put(owed=tx.g.owed - {(gen, chunk.ordinal)})
    if chunk.kind == FINISHED:
        tx.put(exhausted=tx.g.exhausted | {gen})


def drop_foreign(tx: Tx[Shared], ext: Hashable) -> None:
    """The reference's poll of a chunk another request put: read, and dropped.

    The registration stays; the key is polled again for the request's own chunk.
    """
    receiver, _, found = get(tx, ext)
    tx.require(found is not None and found.chunk.producer != receiver.generation)


def get(tx: Tx[Shared], ext: Hashable) -> tuple[Handle, bool, Stored | None]:
    """Register if needed, then ``connector.get`` of the receiver's next key (it unlinks).

    Returns the receiver, whether this step registered it, and what the key held.
    """
    receiver = tx.handle("receiver", ext)
    tx.require(receiver is not None)
    assert receiver is not None
    snap = tx.snapshot(receiver)
    assert snap is not None
    tx.require(snap.state == "streaming")
    registered = not snap.waiting
    if registered:
        tx.fire(receiver, "register")
    found = next((s for s in tx.g.store if s.key == snap.chunk), None)
    if found is not None:
        tx.put(store=tuple(s for s in tx.g.store if s is not found))
    return receiver, registered, found


def finish_downstream(tx: Tx[Shared], ext: Hashable) -> None:
    """Stage N+1 finishes a request whose upstream is exhausted: ``cleanup_receiver``."""
    snap = tx.snapshot(("receiver", ext))
    tx.require(snap is not None and snap.state == "exhausted")
    tx.retire(("receiver", ext))


def deadline(tx: Tx[Shared], ext: Hashable) -> None:
    """``VLLM_OMNI_INPUT_WAIT_TIMEOUT_S`` passes for a receiver nothing can feed.

    Its stage-N request saved its terminal, no task of it is queued or in
    flight, no failure of it awaits the sweep, and its key holds nothing.
    The 600 s outlast every other step, so only then.
    """
    receiver = tx.handle("receiver", ext)
    tx.require(receiver is not None)
    assert receiver is not None
    snap = tx.snapshot(receiver)
    assert snap is not None
    tx.require(snap.state == "streaming" and snap.waiting)
    tx.require(all(s.key != snap.chunk for s in tx.g.store))
    gen = receiver.generation
    request = tx.handle("request", ext)
    held = tx.snapshot(("request", ext))
    tx.require(request is not None and request.generation == gen)
    tx.require(held is not None and held.state == "terminal_saved")
    tx.require(gen not in tx.g.failures and not _sending_for(tx.g.queue, tx.g.sending, gen))
    tx.put(timed_out=tx.g.timed_out | {gen})
    tx.retire(receiver)


def _sending_for(queue: tuple[object, ...], sending: Sending | None, gen: int) -> bool:
    """Whether a save task of request generation `gen` is queued or in flight."""
    tasks = [t for t in queue if isinstance(t, Task)]
    if sending is not None:
        tasks.append(sending.task)
    return any(t.request.generation == gen for t in tasks)
