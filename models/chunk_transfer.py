"""The chunk-transfer system: scheduler, save thread, connector and consumer.

Mirrors vLLM-Omni 0.30.0,
``vllm_omni/distributed/omni_connectors/transfer_adapter/chunk_transfer_adapter.py``
("CTA": ``save_async``, the save loop in ``base.py``, ``_send_single_request``
and ``_send_single_request_for_generation``, ``cleanup_sender``,
``finish_requests``, ``record_send_failure``) and
``vllm_omni/core/sched/omni_scheduler_mixin.py`` ("MIX":
``_log_failed_chunk_sends`` only logs a send failure, so the consumer waits
for its input deadline, ``_process_pending_chunk_timeouts``).

It composes four lifecycles per external id:

* the sender generation (`statecore.models.sender_generation`):
  ``_SenderGeneration`` and its identity fence;
* the segment watermarks (`statecore.models.segment`'s ``segment_watermark``):
  ``_segment_generation`` and ``requests_num_chunks_sent``, the admission state
  ``save_async`` consults before it queues a chunk;
* the producer's request-scoped state (`statecore.models.request_state`):
  ``request_payload[ext]``, which the processor reads and writes through the
  adapter, kept across segments and popped by ``_clear_sender_state_locked``.
* the connector-key counter (`statecore.models.chunk_transfer_keys`):
  ``put_req_chunk[ext]``, the chunk number of the next put's key, popped
  with the sender state.

Actors and their actions:

* scheduler - ``new_request`` (a request takes an external id; a reused id
  gets a new request generation), ``save_chunk`` / ``save_segment_end`` /
  ``save_terminal`` (``save_async``: a late or replayed save is skipped
  silently; a save is rejected and recorded as a send failure while the old
  sender generation is cancelled but still draining), ``next_segment`` (a
  streaming update opens the next segment: ``_omni_segment_generation += 1``
  and a rebuilt prompt, so confirmed token counts restart), ``abort``
  (``finish_requests`` -> ``cleanup_sender``), ``collect_failures``
  (internal: the sweep of recorded send failures each scheduler step; the
  reference fails each request visibly and runs ``finish_requests`` for it,
  0.30.0's ``_log_failed_chunk_sends`` only logs);
* save thread (internal) - ``begin`` (pop the FIFO head; a stale or vetoed
  task is discarded), ``process`` (the processor reads the request's state,
  then returns a payload, returns None or raises), ``put`` (the connector put
  succeeds, returns False or raises; then the post-put bookkeeping, the
  segment-end post-processing and, after a terminal, ``cleanup()``),
  ``finish`` (the task's ``finally``: fence release and deferred reclaim);
* consumer stage (internal) - ``receive`` (takes the next put from the
  connector), ``release`` (its ``finish_requests`` for a request the
  scheduler failed: the consumer stops waiting), ``deadline`` (its
  ``_process_pending_chunk_timeouts``: a consumer still waiting for input
  after ``VLLM_OMNI_INPUT_WAIT_TIMEOUT_S`` is failed).

A send failure thus takes three steps to reach the consumer (recorded by the
save thread, swept by the scheduler, finished on the consumer stage), and
the save thread and the consumer run on in between.

Simplifications: a bounded number of non-terminal saves per request
(`saves`: chunks and segment ends together), of segment ends among them
(`segments`), and one terminal per request; every save commits
one token (the parked terminal of ``_finish_parked_streaming_session``
commits none); a request always carries ``_omni_segment_generation`` and
every next segment comes from a streaming update (the request without the
counter, native-duplex resume and late saves are the `segment` model's
business); connector keys are modelled as far as the consumer reading by
key needs (``put_req_chunk[ext]``, `chunk_transfer_keys`: a put under a key
that holds an unread put replaces it); ``num_puts`` and shared-memory
cleanup are left out; the processor uses one namespace of ``request_payload``; a processor
that raises does so after it read its state. The consumer waits for a
request's input until its terminal; a client abort before the terminal ends
the request on every stage, so its consumer is not modelled past it. The
600 s input deadline outlasts every other step: it passes only for a
consumer whose producer saved its terminal and for which nothing is left to
run (no task, no unread put, no failure the scheduler or the consumer stage
has yet to act on).

`ChunkTransferConfig` selects the behaviour: the defaults are the reference
behaviour statecore's spec asks for; `RELEASED_0_30_0` is vLLM-Omni 0.30.0 as
released; the seed-finding variants flip one switch each, and `build` puts
the known bug's action or rule in place of the reference's.

The parts live in modules of their own: the configuration and the records
of the state (`chunk_transfer_records`), the request machine
(`chunk_transfer_request`), the connector-key counter
(`chunk_transfer_keys`), the actions of the scheduler
(`chunk_transfer_scheduler`), the save thread (`chunk_transfer_save_thread`)
and the consumer stage (`chunk_transfer_consumer`), the bookkeeping they
share (`chunk_transfer_sender`), and why the reference leaves some
transitions and mutants alone (`chunk_transfer_equivalents`).
"""

from __future__ import annotations

from dataclasses import replace
from functools import partial

from statecore.spec.chunk_transfer import (
    CHUNK_DELIVERED,
    FAILURE_RELEASES_CONSUMER,
    NO_SENDER_LEAK,
    NO_UNREAD_OVERWRITE,
    PROCESSOR_FAILURE_VISIBLE,
    REUSE_ISOLATION,
    TERMINAL_DELIVERED,
    properties,
)
from statecore.spec.request_state import STATE_RETAINED
from statecore.spec.segment import NO_CURRENT_SAVE_DROPPED, SEGMENT_ORDER

from statecore.registry import Target
from statecore.system import Action, Component, Keys, System, Tx

from .chunk_transfer_consumer import deadline, receive, release
from .chunk_transfer_equivalents import EQUIVALENT_MUTANTS, UNTAKEN_IN_REFERENCE
from .chunk_transfer_keys import put_key_machine
from .chunk_transfer_records import (
    CANCELLED,
    CHUNK,
    DATA,
    EMPTY,
    ERROR,
    NAMESPACE,
    PROCESSOR_OUTCOMES,
    PUT_OUTCOMES,
    RELEASED_0_30_0,
    SEGMENT_END,
    TERMINAL,
    ChunkTransferConfig,
    InFlight,
    Key,
    Made,
    Owed,
    Owner,
    ProcessorRaise,
    Put,
    Shared,
    Task,
)
from .chunk_transfer_request import request_machine
from .chunk_transfer_save_thread import ON_PROCESSOR_RAISE, begin, finish, process, put
from .chunk_transfer_scheduler import (
    abort,
    collect_failures,
    collect_failures_and_log,
    join_old_generation,
    new_request,
    next_segment,
    refuse_while_old_generation_lives,
    save,
    save_locked,
)
from .request_state import request_state_machine
from .segment import segment_watermark_machine
from .sender_generation import sender_generation_machine

__all__ = [
    "CANCELLED",
    "CHUNK",
    "CHUNK_TRANSFER",
    "DATA",
    "EMPTY",
    "EQUIVALENT_MUTANTS",
    "ERROR",
    "FUZZ_CONFIG",
    "NAMESPACE",
    "PROCESSOR_OUTCOMES",
    "PUT_OUTCOMES",
    "RELEASED_0_30_0",
    "SEGMENT_END",
    "TARGETS",
    "TERMINAL",
    "UNTAKEN_IN_REFERENCE",
    "ChunkTransferConfig",
    "InFlight",
    "Key",
    "Made",
    "Owed",
    "Owner",
    "ProcessorRaise",
    "Put",
    "Shared",
    "Task",
    "build",
    "components",
    "fuzz_system",
    "reference_two_saves",
    "released_0_30_0",
    "released_0_30_0_segments",
    "request_machine",
    "variant_4855",
    "variant_6670",
    "variant_no_token_reset",
    "variant_reuse_joins",
    "variant_seed000_p1",
    "variant_segment_clears",
]


REFERENCE = ChunkTransferConfig()
"""The reference behaviour statecore's spec asks for."""


def build(config: ChunkTransferConfig = REFERENCE) -> System:
    """The chunk-transfer system for `config`, with the spec's properties.

    Each switch of `config` picks one action, rule or flag: the reference's,
    or the known bug's in its place.
    """
    ext = Keys("ext", config.ids)
    ext_param = {"ext": ext}
    isolate = config.isolate_reuse
    # The known-bug switches, each choosing what stands in for the reference's part.
    reuse = refuse_while_old_generation_lives if isolate else join_old_generation
    sweep = (
        partial(collect_failures, isolate=isolate)
        if config.fail_on_send_failure
        else collect_failures_and_log
    )
    on_raise = ON_PROCESSOR_RAISE[config.processor_raise]

    def save_action(name: str, kind: str) -> Action:
        saves = partial(save, kind=kind, reuse=reuse, before_lock=config.stamp_before_lock)
        return Action(name, "scheduler", saves, ext_param)

    return System(
        config.name,
        doc=__doc__ or "",
        components=components(config, ext),
        globals=Shared,
        init=partial(_spawn_per_id, ext=ext),
        actions=[
            Action("new_request", "scheduler", new_request, ext_param),
            save_action("save_chunk", CHUNK),
            *(
                [
                    save_action("save_segment_end", SEGMENT_END),
                    Action("next_segment", "scheduler", next_segment, ext_param),
                ]
                if config.segments
                else []
            ),
            save_action("save_terminal", TERMINAL),
            *(
                [Action("save_locked", "scheduler", save_locked, internal=True)]
                if config.stamp_before_lock
                else []
            ),
            Action("abort", "scheduler", partial(abort, isolate=isolate), ext_param),
            Action("collect_failures", "scheduler", sweep, internal=True),
            Action("begin", "save_thread", begin, internal=True),
            Action(
                "process",
                "save_thread",
                partial(process, on_raise=on_raise),
                {"outcome": config.processor_outcomes},
                internal=True,
            ),
            Action(
                "put",
                "save_thread",
                partial(
                    put,
                    record_false_put=config.record_false_put,
                    per_instance=config.keys_per_instance,
                ),
                {"outcome": config.put_outcomes},
                internal=True,
            ),
            Action("finish", "save_thread", finish, internal=True),
            Action("receive", "consumer", receive, internal=True),
            Action("release", "consumer", release, ext_param, internal=True),
            Action("deadline", "consumer", deadline, ext_param, internal=True),
        ],
        properties=properties(config.segments, reuse=config.generations > 1),
        equivalent_mutants=EQUIVALENT_MUTANTS,
    )


def components(config: ChunkTransferConfig, ext: Keys) -> list[Component]:
    """Per external id: the request, its sender generation, watermarks and producer state."""
    # Every request here carries _omni_segment_generation, so a segment end
    # always advances the watermark: advance="always" is the counter branch.
    watermark = segment_watermark_machine(
        config.segments,
        config.max_tokens,
        advance="always",
        reset_tokens=config.reset_tokens,
        stamp=True,
    )
    producer_state = request_state_machine(
        (NAMESPACE,),
        segment_keeps_state=config.segment_keeps_state,
        name="request_state" + ("" if config.segment_keeps_state else "_segment_clears"),
    )
    return [
        Component(
            "request",
            request_machine(config.saves, config.segments),
            ext,
            max_generations=config.generations,
        ),
        Component(
            "sender",
            sender_generation_machine(defer_cleanup=config.defer_cleanup),
            ext,
            max_generations=config.generations,
        ),
        Component(
            "watermark",
            watermark,
            ext,
            untaken=UNTAKEN_IN_REFERENCE if config.isolate_reuse and config.reset_tokens else {},
        ),
        Component("state", producer_state, ext, max_generations=config.generations),
        # Every save of every request that may join one sender generation.
        Component("put_req_chunk", put_key_machine(config.generations * (config.saves + 1)), ext),
    ]


def _spawn_per_id(tx: Tx[Shared], ext: Keys) -> None:
    """The per-external-id tables that outlive requests: watermarks and the key counter."""
    for key in ext.values:
        tx.spawn("watermark", key)
        tx.spawn("put_req_chunk", key)


CHUNK_TRANSFER = build()


def released_0_30_0() -> System:
    """vLLM-Omni 0.30.0 as released."""
    return build(RELEASED_0_30_0)


def released_0_30_0_segments() -> System:
    """vLLM-Omni 0.30.0 with two saves per request and no reuse: segment boundaries."""
    return build(
        replace(RELEASED_0_30_0, name="chunk_transfer_v0_30_0_segments", saves=2, generations=1)
    )


def reference_two_saves() -> System:
    """The reference at the bounds of the segment variants: two saves, no reuse."""
    return build(ChunkTransferConfig(name="chunk_transfer_two_saves", saves=2, generations=1))


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
            processor_raise="record_and_skip",
            fail_on_send_failure=False,
        )
    )


def variant_reuse_joins() -> System:
    """0.30.0's reuse behaviour alone: a new request joins the old generation."""
    return build(ChunkTransferConfig(name="chunk_transfer_reuse_joins", isolate_reuse=False))


def variant_no_token_reset() -> System:
    """A segment end keeps requests_num_chunks_sent (CTA:486 removed).

    Checked with two saves per request and no reuse: the bug needs a chunk
    before the segment end, not a second request.
    """
    return build(
        ChunkTransferConfig(
            name="chunk_transfer_no_token_reset", saves=2, generations=1, reset_tokens=False
        )
    )


def variant_segment_clears() -> System:
    """Segment-end post-processing pops request_payload with the segment-scoped state."""
    return build(
        ChunkTransferConfig(name="chunk_transfer_segment_clears", segment_keeps_state=False)
    )


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
        violates=(
            CHUNK_DELIVERED,
            FAILURE_RELEASES_CONSUMER,
            NO_CURRENT_SAVE_DROPPED,
            NO_SENDER_LEAK,
            NO_UNREAD_OVERWRITE,
            PROCESSOR_FAILURE_VISIBLE,
            REUSE_ISOLATION,
            TERMINAL_DELIVERED,
        ),
        doc="vLLM-Omni 0.30.0 as released (see docs/findings.md)",
        family="chunk_transfer",
    ),
    Target(
        "chunk_transfer_0_30_0_segments",
        f"{_CT}:released_0_30_0_segments",
        violates=(
            CHUNK_DELIVERED,
            FAILURE_RELEASES_CONSUMER,
            NO_SENDER_LEAK,
            PROCESSOR_FAILURE_VISIBLE,
            SEGMENT_ORDER,
            TERMINAL_DELIVERED,
        ),
        doc="vLLM-Omni 0.30.0 with a chunk and a segment end per request: a failed "
        "segment-end put lets the next segment's chunks run into the old segment",
        family="chunk_transfer",
        reference=f"{_CT}:reference_two_saves",
    ),
    Target(
        "chunk_transfer_6670",
        f"{_CT}:variant_6670",
        violates=(TERMINAL_DELIVERED,),
        doc="vllm-omni #6670: cleanup_sender reclaims a generation whose terminal is queued",
        family="chunk_transfer",
    ),
    Target(
        "chunk_transfer_4855",
        f"{_CT}:variant_4855",
        violates=(CHUNK_DELIVERED, NO_SENDER_LEAK, TERMINAL_DELIVERED),
        doc="vllm-omni #4855: a connector put that returns False is not recorded",
        family="chunk_transfer",
    ),
    Target(
        "chunk_transfer_seed000_p1",
        f"{_CT}:variant_seed000_p1",
        violates=(CHUNK_DELIVERED, FAILURE_RELEASES_CONSUMER, NO_SENDER_LEAK, TERMINAL_DELIVERED),
        doc="seed 000 P1: a processor exception skips the empty terminal; failure only logged",
        family="chunk_transfer",
    ),
    Target(
        "chunk_transfer_reuse_joins",
        f"{_CT}:variant_reuse_joins",
        violates=(CHUNK_DELIVERED, NO_CURRENT_SAVE_DROPPED, REUSE_ISOLATION, TERMINAL_DELIVERED),
        doc="0.30.0: a reused external id joins the old sender generation, its watermarks "
        "and its request_payload",
        family="chunk_transfer",
    ),
    Target(
        "chunk_transfer_no_token_reset",
        f"{_CT}:variant_no_token_reset",
        violates=(NO_CURRENT_SAVE_DROPPED, NO_SENDER_LEAK, TERMINAL_DELIVERED),
        doc="a segment end keeps requests_num_chunks_sent (CTA:486 removed): the next "
        "segment's saves are skipped silently as preemption replays",
        family="chunk_transfer",
        reference=f"{_CT}:reference_two_saves",
    ),
    Target(
        "chunk_transfer_segment_clears",
        f"{_CT}:variant_segment_clears",
        violates=(STATE_RETAINED,),
        doc="segment-end post-processing pops request_payload: the producer loses its "
        "request-wide state at every segment boundary",
        family="chunk_transfer",
    ),
)


FUZZ_CONFIG = ChunkTransferConfig(name="chunk_transfer", ids=2, generations=4, saves=4, segments=2)
"""Wider bounds for fuzzing: exhaustive search stops being cheap here, sampling does not."""


def fuzz_system(config: ChunkTransferConfig = FUZZ_CONFIG) -> System:
    """The chunk-transfer system at fuzzing bounds (same behaviour, longer runs)."""
    return build(config)
