"""The stage-pair system's configuration and the records its state is made of.

`StagePairConfig` selects the behaviour (the defaults are the reference
statecore's spec asks for; `RELEASED_0_30_0` is vLLM-Omni 0.30.0 as
released). `Shared` is the system's globals: stage N's save queue, the task
its save thread runs, its key counter and watermark, the connector's keyed
store, and the ghosts the properties judge.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Annotated, NamedTuple

from statecore.system import Handle, Keys

CHUNK = "chunk"
TERMINAL = "terminal"

PUT_OUTCOMES = ("ok", "false")

EXT = Keys("ext", 1)
"""The one external id; both stages key their request by it."""


@dataclass(frozen=True)
class StagePairConfig:
    """Bounds and behaviour switches; each switch names the code it comes from."""

    name: str = "stage_pair"
    generations: int = 2  # the external id is used this many times
    saves: int = 1  # chunks a request saves before its terminal
    put_outcomes: tuple[str, ...] = PUT_OUTCOMES
    # The scheduler's sweep of recorded send failures fails the request
    # visibly on both stages; 0.30.0's _log_failed_chunk_sends only logs
    # (omni_scheduler_mixin.py:482-521), so the receiver waits for its deadline.
    fail_on_send_failure: bool = True
    # A save of a request whose external id another request's sender
    # generation still holds is refused visibly; in 0.30.0 it joins that
    # generation and its key counter (CTA:447-469).
    isolate_reuse: bool = True
    # The receiver commits only a chunk its own upstream request put (the
    # payload names its producer) and drops another's; 0.30.0 commits
    # whatever is under the key it polls (CTA:494-544).
    check_producer: bool = True
    # A successful put advances put_req_chunk (CTA:853-860).
    advance_key: bool = True
    # Reclaiming a sender generation pops put_req_chunk (CTA:1029-1030), so
    # the id's next generation starts again at key 0.
    pop_key_counter: bool = True
    # A reclaim queues the unlink of the keys of a generation whose terminal
    # was not put; a put terminal's keys are left to the receiver (CTA:1018).
    keep_terminal_keys: bool = True

    @property
    def max_tokens(self) -> int:
        """The largest confirmed token count a save reports (one token per save)."""
        return self.saves + 1


RELEASED_0_30_0 = StagePairConfig(
    name="stage_pair_v0_30_0",
    fail_on_send_failure=False,
    isolate_reuse=False,
    check_producer=False,
)


class Task(NamedTuple):
    """A queued ``save_async`` task: its sender generation, request and kind."""

    sender: Handle
    request: Handle
    kind: str  # CHUNK or TERMINAL


class Cleanup(NamedTuple):
    """A shared-memory cleanup task (``_queue_shm_cleanup_locked``): unlink keys 0..keys-1."""

    keys: int


class Sending(NamedTuple):
    """The save thread parked in ``connector.put`` with `task`, under key `key`."""

    task: Task
    key: int  # put_req_chunk[ext] when the send started


class Chunk(NamedTuple):
    """What a key holds: the kind on the wire, and ghosts naming its producer.

    `producer` is the generation of the stage-N request that put it, `ordinal`
    how many successful puts that request made before it.
    """

    kind: str  # "data" or "finished" (meta.finished)
    producer: int
    ordinal: int


class Stored(NamedTuple):
    """One shared-memory segment: key ``{ext}_{stage}_{key}`` and its chunk."""

    key: int
    chunk: Chunk


class Shared(NamedTuple):
    """The stage pair's globals (field order is the state layout)."""

    queue: Annotated[
        tuple[Task | Cleanup, ...], "_pending_save_reqs: FIFO of save and SHM cleanup tasks"
    ] = ()
    sending: Annotated[Sending | None, "the task the save thread runs, parked in put"] = None
    put_chunk: Annotated[int, "put_req_chunk[ext]: the next key stage N puts (0: popped)"] = 0
    chunks_sent: Annotated[int | None, "requests_num_chunks_sent[ext] (None: popped)"] = None
    owner: Annotated[int, "the request generation that opened the current sender generation"] = 0
    num_puts: Annotated[int, "num_puts of the current sender generation"] = 0
    terminal_sent: Annotated[bool, "terminal_sent of the current sender generation"] = False
    store: Annotated[tuple[Stored, ...], "the connector's segments, by key"] = ()
    failures: Annotated[frozenset[int], "_send_failures: request generations, uncollected"] = (
        frozenset()
    )
    puts: Annotated[tuple[int, ...], "ghost: successful puts per request generation"] = ()
    owed: Annotated[
        frozenset[tuple[int, int]], "ghost: (request, ordinal) put and not yet committed"
    ] = frozenset()
    terminals_put: Annotated[frozenset[int], "ghost: requests whose terminal was put"] = frozenset()
    exhausted: Annotated[frozenset[int], "ghost: requests whose receiver committed finished"] = (
        frozenset()
    )
    released: Annotated[frozenset[int], "ghost: requests aborted or failed on both stages"] = (
        frozenset()
    )
    timed_out: Annotated[frozenset[int], "ghost: requests whose receiver met its deadline"] = (
        frozenset()
    )
    crossed: Annotated[bool, "ghost: a receiver committed another request's chunk"] = False
