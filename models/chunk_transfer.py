"""The chunk-transfer system: scheduler, save thread, connector and consumer.

Mirrors vLLM-Omni 0.30.0,
``vllm_omni/distributed/omni_connectors/transfer_adapter/chunk_transfer_adapter.py``
(``save_async``, the save loop in ``base.py``, ``_send_single_request`` and
``_send_single_request_for_generation``, ``cleanup_sender``,
``finish_requests``, ``record_send_failure``) and
``vllm_omni/core/sched/omni_scheduler_mixin.py`` (``_log_failed_chunk_sends``
only logs a send failure, so the consumer waits for its input deadline).

Actors and their actions:

* scheduler - ``new_request`` (a request takes an external id; a reused id
  gets a new request generation), ``save_chunk`` / ``save_terminal``
  (``save_async``: rejected and recorded as a send failure while the old
  sender generation is cancelled but still draining), ``abort``
  (``finish_requests`` -> ``cleanup_sender``);
* save thread (internal) - ``begin`` (pop the FIFO head; a stale or vetoed
  task is discarded), ``process`` (the processor returns a payload, returns
  None or raises), ``put`` (the connector put succeeds, returns False or
  raises), after which the task's ``finally`` runs;
* consumer (internal) - ``receive`` (takes the next put from the connector).

Simplifications: a bounded number of normal chunks (`chunks`) and one
terminal per request; segments are
the `segment` model's business; connector keys are not modelled (each put is
tagged with the request generation that produced it); ``num_puts`` and
shared-memory cleanup are left out; the ``requests_num_chunks_sent``
watermark is left out (it drops re-runs after preemption, which this model
does not produce).

`ChunkTransferConfig` selects the behaviour: the defaults are the reference
behaviour statecore's spec asks for; `RELEASED_0_30_0` is vLLM-Omni 0.30.0 as
released; the seed-finding variants flip one switch each.
"""

from __future__ import annotations

from collections.abc import Hashable
from dataclasses import dataclass
from typing import Any

from statecore import Event, Machine, Outcome, State, Transition, Var, out
from statecore.registry import Target
from statecore.system import Action, Component, Global, Handle, Keys, System, Tx

from .sender_generation import sender_generation_machine

PROCESSOR_OUTCOMES = ("payload", "none", "raise")
PUT_OUTCOMES = ("ok", "false", "raise")


@dataclass(frozen=True)
class ChunkTransferConfig:
    """Behaviour switches; each names the vLLM-Omni code or review it comes from."""

    name: str = "chunk_transfer"
    ids: int = 1
    generations: int = 2
    chunks: int = 1  # normal chunks per request before its terminal
    # cleanup_sender defers while a terminal is queued (fixed by vllm-omni #6670).
    defer_cleanup: bool = True
    # A put that returns False is recorded with record_send_failure (vllm-omni #4855).
    record_false_put: bool = True
    # A processor exception on a terminal: "empty_terminal" (0.30.0: an empty
    # marker with finished=True still goes out), "fail" (seed 000: the request
    # fails visibly), "log_only" (seed 000 as submitted: logged, nothing sent).
    processor_raise: str = "fail"
    # A recorded send failure fails the request and releases the consumer; in
    # 0.30.0 _log_failed_chunk_sends only logs and the consumer parks.
    failure_releases_consumer: bool = True
    # A request reusing an external id gets its own sender generation, or is
    # refused visibly while the old one lives; in 0.30.0 its chunks join the
    # old generation (no identity check on the request) and are discarded as
    # stale once the old terminal reclaims it.
    isolate_reuse: bool = True
    processor_outcomes: tuple[str, ...] = PROCESSOR_OUTCOMES
    put_outcomes: tuple[str, ...] = PUT_OUTCOMES


RELEASED_0_30_0 = ChunkTransferConfig(
    name="chunk_transfer_v0_30_0",
    processor_raise="empty_terminal",
    failure_releases_consumer=False,
    isolate_reuse=False,
)


def request_machine(chunks: int = 1) -> Machine:
    """The scheduler-side request: what it has saved, and whether it is over."""
    return Machine(
        "request",
        doc="A producer request as the scheduler drives it (save_async calls, abort).",
        states=[
            State("running", initial=True),
            State("terminal_saved", doc="save_async accepted its terminal"),
            State("aborted", final=True, doc="finish_requests ran"),
        ],
        variables=[Var("chunks", range(chunks + 1), 0)],
        events=[Event("chunk"), Event("terminal"), Event("abort", policy="ignore")],
        transitions=[
            Transition(
                "running",
                "chunk",
                None,
                guard=lambda s, p: s.chunks < chunks,
                guard_label=f"chunks < {chunks}",
                effect=lambda s, p: {"chunks": s.chunks + 1},
                effect_label="chunks += 1",
            ),
            Transition("running", "terminal", "terminal_saved"),
            Transition(("running", "terminal_saved"), "abort", "aborted"),
        ],
    )


# A queued task: (sender handle, request handle, is terminal).
Task = tuple[Handle, Handle, bool]
# The task the save thread runs: (task, phase, payload) with phase "begun"
# (blocked in the processor callback) or "putting" (blocked in connector.put
# with payload "data" or "empty").
InFlight = tuple[Task, str, Any]


def build(config: ChunkTransferConfig = ChunkTransferConfig()) -> System:
    """The chunk-transfer system for `config`, with the spec's properties."""
    from statecore.spec.chunk_transfer import properties

    ext = Keys("ext", config.ids)
    sender = sender_generation_machine(defer_cleanup=config.defer_cleanup)

    def new_request(tx: Tx, ext: Hashable) -> None:
        current = tx.snapshot(("request", ext))
        tx.require(current is None or current.state == "aborted" or _request_done(tx, ext))
        tx.spawn("request", ext)

    def save(tx: Tx, ext: Hashable, terminal: bool) -> None:
        request = tx.handle("request", ext)
        tx.require(request is not None)
        assert request is not None
        tx.require(tx.fire(request, "terminal" if terminal else "chunk").accepted)
        token = tx.handle("sender", ext)
        token_state = tx.snapshot(("sender", ext))
        if token_state is not None and token_state.state in ("draining", "retiring"):
            _fail(tx, request, config)  # "previous sender generation is still draining"
            return
        if token is not None and config.isolate_reuse and (token, request) not in tx.get("owners"):
            _fail(tx, request, config)  # refused visibly: the old generation still drains
            return
        if token is None:
            token = tx.spawn("sender", ext)
            tx.set("owners", tx.get("owners") | {(token, request)})
        if terminal:
            _fire_sender(tx, token, "save_terminal")
            tx.set("terminals", tx.get("terminals") | {request})
        tx.set("queue", (*tx.get("queue"), (token, request, terminal)))

    def save_chunk(tx: Tx, ext: Hashable) -> None:
        save(tx, ext, False)

    def save_terminal(tx: Tx, ext: Hashable) -> None:
        save(tx, ext, True)

    def abort(tx: Tx, ext: Hashable) -> None:
        request = tx.handle("request", ext)
        tx.require(request is not None and tx.fire(request, "abort").accepted)
        token = tx.handle("sender", ext)
        if token is not None:
            _fire_sender(tx, token, "cleanup")

    def finalize_failure(tx: Tx, ext: Hashable) -> None:
        # The scheduler-visible failure path: fail the request, then
        # finish_requests -> cleanup_sender. 0.30.0 has no such path.
        request = tx.handle("request", ext)
        tx.require(request is not None and request in tx.get("failures"))
        tx.require(tx.fire(request, "abort").accepted)
        token = tx.handle("sender", ext)
        if token is not None:
            _fire_sender(tx, token, "cleanup")

    def begin(tx: Tx) -> None:
        queue = tx.get("queue")
        tx.require(queue and tx.get("in_flight") is None)
        task: Task = queue[0]
        tx.set("queue", queue[1:])
        token, _, terminal = task
        if _fire_sender(tx, token, "begin", terminal=terminal).accepted:
            tx.set("in_flight", (task, "begun", None))
        # else: discarded as stale (identity lost, or cancelled and not terminal)

    def process(tx: Tx, outcome: str) -> None:
        # The processor callback returns; the send then runs on by itself to
        # the cancel check and, if that passes, blocks inside connector.put.
        flight = tx.get("in_flight")
        tx.require(flight is not None and flight[1] == "begun")
        task, _, _ = flight
        token, request, terminal = task
        payload = "data" if outcome == "payload" else None
        if outcome == "raise":
            tx.set("raised", tx.get("raised") | {request})
            if config.processor_raise in ("fail", "log_only"):
                if config.processor_raise == "fail":
                    _fail(tx, request, config)
                _end(tx, task, sent=False)
                return
        if payload is None:
            if not terminal:  # nothing is put, nothing recorded (0.30.0)
                _end(tx, task, sent=False)
                return
            payload = "empty"  # a boundary still sends an empty finish marker
        snap = tx.snapshot(token)
        cancelled = snap is not None and snap.state in ("retiring", "draining")
        if snap is None or (cancelled and not terminal):
            # _sender_generation_is_active fails: no put, no failure recorded
            _end(tx, task, sent=False)
            return
        tx.set("in_flight", (task, "putting", payload))

    def put(tx: Tx, outcome: str) -> None:
        # connector.put returns (or raises); then the post-put bookkeeping.
        flight = tx.get("in_flight")
        tx.require(flight is not None and flight[1] == "putting")
        task, _, payload = flight
        token, request, terminal = task
        if outcome == "ok":
            tx.set("puts", (*tx.get("puts"), (request, terminal, payload == "empty")))
            tx.set("mailbox", (*tx.get("mailbox"), (request, terminal, payload == "empty")))
        if outcome == "raise":  # propagates to the save loop, which records it
            _fail(tx, request, config)
            _end(tx, task, sent=False)
            return
        snap = tx.snapshot(token)
        retiring = snap is not None and snap.state == "retiring" and not terminal
        if snap is None or retiring:  # "Ignoring completed put for retired request"
            _end(tx, task, sent=False)
            return
        if outcome == "false" and config.record_false_put:
            _fail(tx, request, config)
        _end(tx, task, sent=terminal and outcome == "ok")

    def receive(tx: Tx) -> None:
        mailbox = tx.get("mailbox")
        tx.require(mailbox)
        request, finished, empty = mailbox[0]
        tx.set("mailbox", mailbox[1:])
        tx.emit(out("received", request=request, finished=finished, empty=empty))
        if finished:
            tx.set("received", tx.get("received") | {request})
            if empty:
                tx.set("received_empty", tx.get("received_empty") | {request})

    EXT_AND = {"ext": ext}
    return System(
        config.name,
        doc=__doc__ or "",
        components=[
            Component(
                "request", request_machine(config.chunks), ext, max_generations=config.generations
            ),
            Component("sender", sender, ext, max_generations=config.generations),
        ],
        globals=[
            Global("queue", (), doc="_pending_save_reqs: FIFO of (token, request, terminal)"),
            Global("in_flight", None, doc="the task the save thread is running"),
            Global("mailbox", (), doc="puts the connector holds for the consumer"),
            Global("puts", (), doc="every successful put, in order: (request, finished, empty)"),
            Global("received", frozenset(), doc="requests whose consumer got finished=True"),
            Global("failures", frozenset(), doc="requests with a recorded send failure"),
            Global("released", frozenset(), doc="requests failed visibly (consumer released)"),
            Global("raised", frozenset(), doc="requests whose processor raised"),
            Global("terminals", frozenset(), doc="requests whose terminal was queued"),
            Global("received_empty", frozenset(), doc="requests ended by an empty marker"),
            Global("owners", frozenset(), doc="(sender generation, request that opened it)"),
        ],
        actions=[
            Action("new_request", "scheduler", new_request, EXT_AND),
            Action("save_chunk", "scheduler", save_chunk, EXT_AND),
            Action("save_terminal", "scheduler", save_terminal, EXT_AND),
            Action("abort", "scheduler", abort, EXT_AND),
            Action("begin", "save_thread", begin, internal=True),
            Action(
                "process",
                "save_thread",
                process,
                {"outcome": config.processor_outcomes},
                internal=True,
            ),
            Action("put", "save_thread", put, {"outcome": config.put_outcomes}, internal=True),
            Action("receive", "consumer", receive, internal=True),
            *(
                [Action("finalize_failure", "scheduler", finalize_failure, EXT_AND, internal=True)]
                if config.failure_releases_consumer
                else []
            ),
        ],
        properties=properties(),
    )


def _request_done(tx: Tx, ext: Hashable) -> bool:
    """A request whose terminal was saved may hand its id to a new request."""
    snap = tx.snapshot(("request", ext))
    return snap is not None and snap.state == "terminal_saved"


def _fail(tx: Tx, request: Handle, config: ChunkTransferConfig) -> None:
    tx.set("failures", tx.get("failures") | {request})
    if config.failure_releases_consumer:
        tx.set("released", tx.get("released") | {request})


def _end(tx: Tx, task: Task, *, sent: bool) -> None:
    """The task's ``finally``: fence release and deferred cleanup, in the machine."""
    token, _, terminal = task
    _fire_sender(tx, token, "end", terminal=terminal, sent=sent)
    tx.set("in_flight", None)


def _fire_sender(tx: Tx, token: Handle, event: str, **payload: Any) -> Outcome:
    """Fire on a sender generation; a reclaimed one gives its id back (token popped)."""
    outcome = tx.fire(token, event, **payload)
    if outcome.accepted and outcome.snapshot.state == "reclaimed":
        tx.retire(token)
    return outcome


CHUNK_TRANSFER = build()


def released_0_30_0() -> System:
    """vLLM-Omni 0.30.0 as released."""
    return build(RELEASED_0_30_0)


def variant_6670() -> System:
    """cleanup_sender reclaims a generation whose terminal is still queued (#6670)."""
    return build(ChunkTransferConfig(name="chunk_transfer_6670", defer_cleanup=False))


def variant_4855() -> System:
    """A connector put that returns False is not recorded as a failure (#4855)."""
    return build(ChunkTransferConfig(name="chunk_transfer_4855", record_false_put=False))


def variant_seed000_p1() -> System:
    """Seed 000 P1: a processor exception is recorded, no terminal is put, and the
    failure path only logs, so the consumer parks until its input deadline."""
    return build(
        ChunkTransferConfig(
            name="chunk_transfer_seed000_p1",
            processor_raise="fail",
            failure_releases_consumer=False,
        )
    )


def variant_reuse_joins() -> System:
    """0.30.0's reuse behaviour alone: a new request joins the old generation."""
    return build(ChunkTransferConfig(name="chunk_transfer_reuse_joins", isolate_reuse=False))


_CT = __name__

TARGETS: tuple[Target, ...] = (
    Target(
        "chunk_transfer",
        f"{_CT}:CHUNK_TRANSFER",
        doc="scheduler, save thread, connector and consumer; the reference behaviour",
    ),
    Target(
        "chunk_transfer_0_30_0",
        f"{_CT}:released_0_30_0",
        "violates:failure_releases_consumer,no_sender_leak,processor_failure_visible,"
        "terminal_delivered",
        doc="vLLM-Omni 0.30.0 as released (see docs/findings.md)",
        family="chunk_transfer",
    ),
    Target(
        "chunk_transfer_6670",
        f"{_CT}:variant_6670",
        "violates:terminal_delivered",
        doc="vllm-omni #6670: cleanup_sender reclaims a generation whose terminal is queued",
        family="chunk_transfer",
    ),
    Target(
        "chunk_transfer_4855",
        f"{_CT}:variant_4855",
        "violates:no_sender_leak,terminal_delivered",
        doc="vllm-omni #4855: a connector put that returns False is not recorded",
        family="chunk_transfer",
    ),
    Target(
        "chunk_transfer_seed000_p1",
        f"{_CT}:variant_seed000_p1",
        "violates:failure_releases_consumer,no_sender_leak,processor_failure_visible,"
        "terminal_delivered",
        doc="seed 000 P1: a processor exception skips the empty terminal; failure only logged",
        family="chunk_transfer",
    ),
    Target(
        "chunk_transfer_reuse_joins",
        f"{_CT}:variant_reuse_joins",
        "violates:terminal_delivered",
        doc="0.30.0: a reused external id joins the old sender generation",
        family="chunk_transfer",
    ),
)


FUZZ_CONFIG = ChunkTransferConfig(name="chunk_transfer", ids=2, generations=4, chunks=3)
"""Wider bounds for fuzzing: exhaustive search stops being cheap here, sampling does not."""


def fuzz_system(config: ChunkTransferConfig = FUZZ_CONFIG) -> System:
    """The chunk-transfer system at fuzzing bounds (same behaviour, longer runs)."""
    return build(config)
