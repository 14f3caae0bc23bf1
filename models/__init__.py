"""The vLLM-Omni lifecycle machines and composed systems (`statecore.models`).

`TARGETS` lists what ``statecore check`` and ``statecore list`` know by name:
the reference models, which must hold, and variants that reproduce bugs
vLLM-Omni really had, each expected to violate named properties.
"""

from __future__ import annotations

from statecore.registry import Target

_CT = "statecore.models.chunk_transfer"

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
    ),
    Target(
        "chunk_transfer_6670",
        f"{_CT}:variant_6670",
        "violates:terminal_delivered",
        doc="vllm-omni #6670: cleanup_sender reclaims a generation whose terminal is queued",
    ),
    Target(
        "chunk_transfer_4855",
        f"{_CT}:variant_4855",
        "violates:no_sender_leak,terminal_delivered",
        doc="vllm-omni #4855: a connector put that returns False is not recorded",
    ),
    Target(
        "chunk_transfer_seed000_p1",
        f"{_CT}:variant_seed000_p1",
        "violates:failure_releases_consumer,no_sender_leak,processor_failure_visible,"
        "terminal_delivered",
        doc="seed 000 P1: a processor exception skips the empty terminal; failure only logged",
    ),
    Target(
        "chunk_transfer_reuse_joins",
        f"{_CT}:variant_reuse_joins",
        "violates:terminal_delivered",
        doc="0.30.0: a reused external id joins the old sender generation",
    ),
)
