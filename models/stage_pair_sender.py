"""Stage N of the stage pair: its scheduler, its save thread, and the client's abort.

The scheduler's ``save`` is ``save_async`` (the reuse check, the token
watermark, the queue), ``collect_failures`` the sweep of recorded send
failures; the save thread's ``begin`` pops a save task through the sender
generation's fence and parks in ``connector.put``, ``put`` returns from it
(post-put bookkeeping and the task's ``finally`` in one step), and
``run_cleanup`` runs a shared-memory cleanup task. The client's ``abort``
runs ``finish_requests`` on both stages.
"""

from __future__ import annotations

from collections.abc import Hashable
from functools import partial
from typing import Any

from statecore.system import Handle, Tx

from .receiver import DATA, FINISHED
from .sender_generation import ClearState, cleanup_sender, fire_sender
from .stage_pair_records import (
    EXT,
    TERMINAL,
    Chunk,
    Cleanup,
    Sending,
    Shared,
    StagePairConfig,
    Stored,
    Task,
)

CANCELLED = ("draining", "retiring")  # sender states with ``cancelled`` set


def clear_sender_state(
    tx: Tx[Any], ext: Hashable, *, pop_key_counter: bool, keep_terminal_keys: bool
) -> None:
    """A reclaim: ``_queue_shm_cleanup_locked`` then ``_clear_sender_state_locked``.

    A generation that put chunks but no successful terminal queues the
    unlink of its keys on the save thread (CTA:1014-1027); the key counter
    and the watermark are popped (CTA:1029-1043).
    """
    g = tx.g
    if g.num_puts and not (keep_terminal_keys and g.terminal_sent):
        tx.put(queue=(*g.queue, Cleanup(g.num_puts)))
    tx.put(num_puts=0, terminal_sent=False, owner=0, chunks_sent=None)
    if pop_key_counter:
        tx.put(put_chunk=0)


def clearer(config: StagePairConfig) -> ClearState:
    """What reclaiming a sender generation clears, for `config`."""
    return partial(
        clear_sender_state,
        pop_key_counter=config.pop_key_counter,
        keep_terminal_keys=config.keep_terminal_keys,
    )


# -- the client and the scheduler ------------------------------------------------------


def new_request(tx: Tx[Shared], ext: Hashable) -> None:
    """A request takes the external id on both stages, once both are done with the last."""
    current = tx.snapshot(("request", ext))
    tx.require(current is None or current.state in ("terminal_saved", "aborted"))
    tx.require(not tx.live(("receiver", ext)), "stage N+1 still serves the id")
    request = tx.spawn("request", ext)
    receiver = tx.spawn("receiver", ext)
    assert request.generation == receiver.generation


def save(tx: Tx[Shared], ext: Hashable, *, kind: str, config: StagePairConfig) -> None:
    """``save_async``: refused, skipped as a preemption replay, or queued."""
    request = tx.handle("request", ext)
    tx.require(request is not None)
    assert request is not None
    tx.require(tx.fire(request, kind).accepted)
    after = tx.snapshot(request)
    assert after is not None
    token = tx.handle("sender", ext)
    if token is not None:
        held = tx.snapshot(token)
        assert held is not None
        foreign = config.isolate_reuse and tx.g.owner != request.generation
        if held.state in CANCELLED or foreign:  # "previous sender generation is still draining"
            tx.put(failures=tx.g.failures | {request.generation})
            return
    sent = tx.g.chunks_sent
    if sent is not None and after.tokens < sent:
        return  # skipped silently as an already-saved step (CTA:452-463)
    tx.put(chunks_sent=after.tokens)
    if token is None:
        token = tx.spawn("sender", ext)
        tx.put(owner=request.generation)
    if kind == TERMINAL:
        fire_sender(tx, token, "save_terminal", clearer(config))
    tx.put(queue=(*tx.g.queue, Task(token, request, kind)))


def finish_requests(tx: Tx[Shared], request: Handle, config: StagePairConfig) -> None:
    """Stage N's ``finish_requests``: ``cleanup_sender`` for the id (the reference
    leaves a generation another request opened alone)."""
    token = tx.handle("sender", request.key)
    if config.isolate_reuse and token is not None and tx.g.owner != request.generation:
        return
    cleanup_sender(tx, request.key, clearer(config))


def release_receiver(tx: Tx[Shared], request: Handle) -> None:
    """Stage N+1's ``finish_requests`` for the request: ``cleanup_receiver``."""
    receiver = tx.handle("receiver", request.key)
    if receiver is not None and receiver.generation == request.generation:
        tx.retire(receiver)
    gen = request.generation
    tx.put(
        released=tx.g.released | {gen},
        owed=frozenset(o for o in tx.g.owed if o[0] != gen),
    )


def abort(tx: Tx[Shared], ext: Hashable, *, config: StagePairConfig) -> None:
    """The client aborts the request: ``finish_requests`` on both stages."""
    request = tx.handle("request", ext)
    tx.require(request is not None)
    assert request is not None
    tx.require(tx.fire(request, "abort").accepted)
    finish_requests(tx, request, config)
    release_receiver(tx, request)


def collect_failures(tx: Tx[Shared], *, config: StagePairConfig) -> None:
    """The sweep of ``_send_failures``: the reference fails each request visibly on
    both stages; 0.30.0's ``_log_failed_chunk_sends`` only logs."""
    drained = tx.g.failures
    tx.require(drained)
    tx.put(failures=frozenset())
    if not config.fail_on_send_failure:
        return
    for gen in sorted(drained - tx.g.released):
        request = next((h for h in _requests(tx) if h.generation == gen), None)
        if request is None:
            tx.put(released=tx.g.released | {gen})
            continue
        tx.fire(request, "abort")
        finish_requests(tx, request, config)
        release_receiver(tx, request)


def _requests(tx: Tx[Shared]) -> list[Handle]:
    """The current stage-N request of each external id."""
    handles = (tx.handle("request", ext) for ext in EXT.values)
    return [h for h in handles if h is not None]


# -- the save thread -------------------------------------------------------------------


def begin(tx: Tx[Shared], *, config: StagePairConfig) -> None:
    """Pop the head save task; the fence discards a stale or vetoed one; else the
    processor runs and the send parks in ``connector.put``."""
    queue = tx.g.queue
    tx.require(queue and tx.g.sending is None and isinstance(queue[0], Task))
    task = queue[0]
    assert isinstance(task, Task)
    tx.put(queue=queue[1:])
    terminal = task.kind == TERMINAL
    if fire_sender(tx, task.sender, "begin", clearer(config), terminal=terminal).accepted:
        key = tx.g.put_chunk  # chunk_id = put_req_chunk[ext]; num_puts includes it
        tx.put(sending=Sending(task, key), num_puts=key + 1)


def run_cleanup(tx: Tx[Shared]) -> None:
    """A shared-memory cleanup task: unlink keys 0..keys-1 (CTA:685-690)."""
    queue = tx.g.queue
    tx.require(queue and tx.g.sending is None and isinstance(queue[0], Cleanup))
    head = queue[0]
    assert isinstance(head, Cleanup)
    tx.put(queue=queue[1:], store=tuple(s for s in tx.g.store if s.key >= head.keys))


def put(tx: Tx[Shared], outcome: str, *, config: StagePairConfig) -> None:
    """``connector.put`` returns; the post-put bookkeeping; the task's ``finally``."""
    sending = tx.g.sending
    tx.require(sending is not None)
    assert sending is not None
    task, key = sending
    terminal = task.kind == TERMINAL
    clear = clearer(config)
    tx.put(sending=None)
    if outcome == "ok":
        store_put(tx, task, key)
    held = tx.snapshot(task.sender)
    if held is not None and not (held.state == "retiring" and not terminal):
        # still current and not retiring without a terminal
        if outcome == "ok":
            if config.advance_key:
                tx.put(put_chunk=tx.g.put_chunk + 1)
            if terminal:
                cleanup_sender(tx, task.sender.key, clear)  # cleanup(): deferred to the finally
        else:
            tx.put(failures=tx.g.failures | {task.request.generation})
    fire_sender(tx, task.sender, "end", clear, terminal=terminal)


def store_put(tx: Tx[Shared], task: Task, key: int) -> None:
    """A successful put: the segment under `key` is (over)written."""
    g = tx.g
    gen = task.request.generation
    ordinal = g.puts[gen - 1]
    chunk = Chunk(FINISHED if task.kind == TERMINAL else DATA, gen, ordinal)
    kept = tuple(s for s in g.store if s.key != key)
    tx.put(
        store=tuple(sorted((*kept, Stored(key, chunk)))),
        puts=(*g.puts[: gen - 1], ordinal + 1, *g.puts[gen:]),
    )
    if task.sender == tx.handle("sender", task.sender.key):
        tx.put(terminal_sent=g.terminal_sent or task.kind == TERMINAL)
    if gen not in g.released:
        tx.put(owed=g.owed | {(gen, ordinal)})
    if task.kind == TERMINAL:
        tx.put(terminals_put=g.terminals_put | {gen})
