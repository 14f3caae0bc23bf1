"""A stage pair: stage N's sender -> the connector's keys -> stage N+1's receiver, as one system.

Mirrors vLLM-Omni 0.30.0 (``CTA`` is
``vllm_omni/distributed/omni_connectors/transfer_adapter/chunk_transfer_adapter.py``)
with its ``SharedMemoryConnector``: stage N's adapter puts each chunk of an
external id under key ``{ext}_{N}_{put_req_chunk[ext]}``; stage N+1's
adapter, for its own request of the same external id, polls key
``{ext}_{N}_{get_req_chunk[req]}``. The two counters are kept apart, each
stage's own: nothing but the key ties a chunk to the request that put it.

It composes the lifecycles the other models hold, per external id:

* stage N's request (`chunk_transfer_request`'s ``request`` machine: saves
  and abort) and its sender generation (`sender_generation`: the fence,
  ``cleanup_sender``, the deferred reclaim), with ``save_async``'s reuse
  check and token watermark (`stage_pair_sender`);
* stage N+1's receiver state (`receiver`'s ``receiver_state`` machine:
  ``get_req_chunk``, the registration, upstream-exhausted), polled, finished
  or timed out (`stage_pair_receiver`);
* the connector between them: a store of segments by key. A put writes (or
  overwrites) a key, a get unlinks what it reads, and a shared-memory cleanup
  task, queued on stage N's save thread when a generation that put chunks but
  no successful terminal is reclaimed (CTA:1014-1027), unlinks keys
  ``0..num_puts-1``.

Actors: the client (``new_request`` on both stages, once both are done with
the last use of the id; ``abort``, ``finish_requests`` on both stages);
stage N's scheduler (``save_chunk``, ``save_terminal``, ``collect_failures``)
and save thread (``begin``, ``put``, ``run_cleanup``); stage N+1 (``poll``,
in the reference ``drop_foreign``, ``finish_downstream``, ``deadline``).

Simplifications: one external id; no segments, no processor failure (the
processor always returns a payload), a put returns True or False; the
receiver's poll is one step (the interleavings inside it are
`receiver_system`'s); the scheduler's hand-over of a committed chunk is
merged into the commit; an abort reaches both stages at once.

`StagePairConfig` selects the behaviour: the defaults are the reference
(the properties hold), `RELEASED_0_30_0` is vLLM-Omni 0.30.0 as released,
and each other variant replaces one part of the reference.
"""

from __future__ import annotations

from dataclasses import replace
from functools import partial

from statecore.spec.stage_pair import (
    FAILURE_RELEASES_RECEIVER,
    PAIR_DELIVERED,
    PAIR_IN_ORDER,
    PAIR_OWN_CHUNKS,
    TERMINAL_RELEASES_RECEIVER,
    properties,
)

from statecore.registry import Target
from statecore.system import Action, Component, System, Tx

from .chunk_transfer_request import request_machine
from .receiver import receiver_state_machine
from .sender_generation import sender_generation_machine
from .stage_pair_receiver import deadline, drop_foreign, finish_downstream, poll
from .stage_pair_records import (
    CHUNK,
    EXT,
    RELEASED_0_30_0,
    TERMINAL,
    Shared,
    StagePairConfig,
)
from .stage_pair_sender import abort, begin, collect_failures, new_request, put, run_cleanup, save

__all__ = [
    "FUZZ_CONFIG",
    "RELEASED_0_30_0",
    "SINGLE_SWITCH",
    "STAGE_PAIR",
    "TARGETS",
    "StagePairConfig",
    "build",
    "fuzz_system",
    "released_0_30_0",
]

REFERENCE = StagePairConfig()

_NO_SEGMENTS = "the stage pair has no segments: stage N saves chunks and a terminal"
UNTAKEN_BY_DESIGN: dict[str, str] = {
    "streaming--commit(segment_end)-->segment_done": _NO_SEGMENTS,
    "segment_done--resume-->streaming": _NO_SEGMENTS,
}
"""Receiver transitions the stage pair never takes, with the reason."""


def build(config: StagePairConfig = REFERENCE) -> System:
    """The stage-pair system for `config`, with the spec's properties."""
    ext = {"ext": EXT}
    chunks = config.generations * (config.saves + 1)  # every key a receiver may commit

    def init(tx: Tx[Shared]) -> None:
        tx.put(puts=(0,) * config.generations)

    return System(
        config.name,
        doc=__doc__ or "",
        components=[
            Component(
                "request",
                request_machine(config.saves, 0),
                EXT,
                max_generations=config.generations,
            ),
            Component(
                "sender",
                sender_generation_machine(),
                EXT,
                max_generations=config.generations,
            ),
            Component(
                "receiver",
                receiver_state_machine(chunks),
                EXT,
                max_generations=config.generations,
                untaken=UNTAKEN_BY_DESIGN,
            ),
        ],
        globals=Shared,
        init=init,
        actions=[
            Action("new_request", "client", new_request, ext),
            Action("save_chunk", "scheduler", partial(save, kind=CHUNK, config=config), ext),
            Action("save_terminal", "scheduler", partial(save, kind=TERMINAL, config=config), ext),
            Action("abort", "client", partial(abort, config=config), ext),
            Action(
                "collect_failures",
                "scheduler",
                partial(collect_failures, config=config),
                internal=True,
            ),
            Action("begin", "save_thread", partial(begin, config=config), internal=True),
            Action(
                "put",
                "save_thread",
                partial(put, config=config),
                {"outcome": config.put_outcomes},
                internal=True,
            ),
            Action("run_cleanup", "save_thread", run_cleanup, internal=True),
            Action("poll", "receiver", partial(poll, config=config), ext, internal=True),
            *(
                [Action("drop_foreign", "receiver", drop_foreign, ext, internal=True)]
                if config.check_producer
                else []
            ),
            Action("finish_downstream", "receiver", finish_downstream, ext, internal=True),
            Action("deadline", "receiver", deadline, ext, internal=True),
        ],
        properties=properties(chunks),
    )


STAGE_PAIR = build()


def released_0_30_0() -> System:
    """vLLM-Omni 0.30.0 as released."""
    return build(RELEASED_0_30_0)


SINGLE_SWITCH: dict[str, StagePairConfig] = {
    config.name: config
    for config in (
        StagePairConfig(name="stage_pair_stale_read", check_producer=False),
        StagePairConfig(name="stage_pair_key_not_advanced", advance_key=False),
        StagePairConfig(name="stage_pair_key_counter_kept", pop_key_counter=False),
        StagePairConfig(name="stage_pair_terminal_keys_unlinked", keep_terminal_keys=False),
        StagePairConfig(name="stage_pair_failures_logged", fail_on_send_failure=False),
    )
}
"""The variants that replace one part of the reference, by name."""


def variant_stale_read() -> System:
    """The receiver commits whatever is under its key (0.30.0's receiver)."""
    return build(SINGLE_SWITCH["stage_pair_stale_read"])


def variant_key_not_advanced() -> System:
    """A successful put leaves put_req_chunk where it was (CTA:857 removed)."""
    return build(SINGLE_SWITCH["stage_pair_key_not_advanced"])


def variant_key_counter_kept() -> System:
    """Reclaiming a sender generation keeps put_req_chunk (CTA:1030 removed)."""
    return build(SINGLE_SWITCH["stage_pair_key_counter_kept"])


def variant_terminal_keys_unlinked() -> System:
    """A reclaim unlinks a put terminal's keys too (``not terminal_sent`` dropped, CTA:1018)."""
    return build(SINGLE_SWITCH["stage_pair_terminal_keys_unlinked"])


def variant_failures_logged() -> System:
    """Recorded send failures are only logged (0.30.0's _log_failed_chunk_sends)."""
    return build(SINGLE_SWITCH["stage_pair_failures_logged"])


_SP = __name__

EVERY_PAIR_PROPERTY = (
    FAILURE_RELEASES_RECEIVER,
    PAIR_DELIVERED,
    PAIR_IN_ORDER,
    PAIR_OWN_CHUNKS,
    TERMINAL_RELEASES_RECEIVER,
)

TARGETS: tuple[Target, ...] = (
    Target(
        "stage_pair",
        f"{_SP}:STAGE_PAIR",
        doc="stage N's sender, the connector's keys and stage N+1's receiver as one system",
    ),
    Target(
        "stage_pair_0_30_0",
        released_0_30_0,
        violates=EVERY_PAIR_PROPERTY,
        doc="vLLM-Omni 0.30.0 as released (see docs/findings.md)",
        family="stage_pair",
    ),
    Target(
        "stage_pair_stale_read",
        variant_stale_read,
        violates=EVERY_PAIR_PROPERTY,
        doc="the receiver commits whatever is under its key: a reused id reads the keys an "
        "earlier request left",
        family="stage_pair",
    ),
    Target(
        "stage_pair_key_not_advanced",
        variant_key_not_advanced,
        violates=(
            FAILURE_RELEASES_RECEIVER,
            PAIR_DELIVERED,
            PAIR_IN_ORDER,
            TERMINAL_RELEASES_RECEIVER,
        ),
        doc="a successful put does not advance put_req_chunk: the next put overwrites a key "
        "the receiver has not read",
        family="stage_pair",
    ),
    Target(
        "stage_pair_key_counter_kept",
        variant_key_counter_kept,
        violates=(FAILURE_RELEASES_RECEIVER, PAIR_DELIVERED, TERMINAL_RELEASES_RECEIVER),
        doc="a reclaim keeps put_req_chunk: a reused id's sender starts past the key its "
        "receiver polls first",
        family="stage_pair",
    ),
    Target(
        "stage_pair_terminal_keys_unlinked",
        variant_terminal_keys_unlinked,
        violates=(FAILURE_RELEASES_RECEIVER, PAIR_DELIVERED, TERMINAL_RELEASES_RECEIVER),
        doc="a reclaim unlinks a put terminal's keys too: the save thread's cleanup can "
        "remove the finished chunk before the receiver reads it",
        family="stage_pair",
    ),
    Target(
        "stage_pair_failures_logged",
        variant_failures_logged,
        violates=(FAILURE_RELEASES_RECEIVER,),
        doc="recorded send failures are only logged: a failed terminal leaves the receiver "
        "to its input deadline",
        family="stage_pair",
    ),
)


FUZZ_CONFIG = replace(REFERENCE, generations=3, saves=2)
"""Wider bounds for fuzzing."""


def fuzz_system(config: StagePairConfig = FUZZ_CONFIG) -> System:
    """The stage pair at fuzzing bounds (same behaviour, longer runs)."""
    return build(config)
