"""Properties of the chunk-transfer system (`statecore.models.chunk_transfer`).

Each property names the review finding or code comment it comes from. The
globals they read are documented on the system: ``terminals`` (requests whose
terminal was queued), ``received`` (whose consumer got ``finished=True``),
``received_empty`` (ended by an empty marker), ``failures`` (recorded send
failures), ``released`` (failed visibly: the consumer was released),
``raised`` (the processor raised).
"""

from __future__ import annotations

from statecore import Event, Machine, State, Transition
from statecore.properties import Property, always, eventually, monitor, sometimes
from statecore.system import Emitted, StateView

TERMINAL_DELIVERED = "terminal_delivered"
NOTHING_AFTER_TERMINAL = "nothing_after_terminal"
PROCESSOR_FAILURE_VISIBLE = "processor_failure_visible"
FAILURE_RELEASES_CONSUMER = "failure_releases_consumer"
NO_SENDER_LEAK = "no_sender_leak"


def _terminal_delivered(v: StateView) -> bool:
    settled = v.get("received") | v.get("released")
    return bool(v.get("terminals") <= settled)


def _no_empty_terminal_after_raise(v: StateView) -> bool:
    return not (v.get("raised") & v.get("received_empty")) - v.get("released")


def _failures_release(v: StateView) -> bool:
    return bool(v.get("failures") <= v.get("released"))


def _no_sender_leak(v: StateView) -> bool:
    """A sender generation is held only for a request that is still running."""
    for handle, _snap in v.live("sender"):
        request = v.snapshot("request", handle.key)
        if request is None or request.state != "running":
            return False
    return True


def _consumer_monitor() -> Machine:
    return Machine(
        "consumer_stream",
        doc="What one request's consumer may see: chunks, then one terminal, then nothing.",
        states=[State("streaming", initial=True), State("ended", final=True)],
        events=[Event("chunk", policy="reject"), Event("terminal", policy="reject")],
        transitions=[
            Transition("streaming", "chunk", "streaming"),
            Transition("streaming", "terminal", "ended"),
        ],
    )


def _route_received(emitted: Emitted) -> tuple[object, str, dict[str, object]] | None:
    output = emitted.output
    if output.name != "received":
        return None
    event = "terminal" if output.get("finished") else "chunk"
    return output.get("request"), event, {}


def properties() -> tuple[Property, ...]:
    """The chunk-transfer properties, in the order reports list them."""
    return (
        eventually(
            TERMINAL_DELIVERED,
            "Every queued terminal reaches the consumer, or the request fails visibly "
            "and its consumer is released (never parked until the 600 s input deadline).",
            _terminal_delivered,
            source="vllm-omni #6670 (terminal lost on cleanup); seed 000 P1; "
            "_log_failed_chunk_sends 'only reports'",
        ),
        monitor(
            NOTHING_AFTER_TERMINAL,
            "A consumer sees no chunk after its request's terminal, and at most one terminal.",
            _consumer_monitor(),
            _route_received,
            source="chunk_transfer_adapter.py: finished=True is the consumer's only EOS",
        ),
        always(
            PROCESSOR_FAILURE_VISIBLE,
            "A processor exception never silently becomes an empty terminal.",
            _no_empty_terminal_after_raise,
            when=lambda v: bool(v.get("raised")),
            source="seed 000 (RFC #6453): processor exceptions enter the failure path",
        ),
        always(
            FAILURE_RELEASES_CONSUMER,
            "A recorded send failure fails the request visibly and releases its consumer.",
            _failures_release,
            when=lambda v: bool(v.get("failures")),
            source="omni_scheduler_mixin._log_failed_chunk_sends only logs (0.30.0)",
        ),
        eventually(
            NO_SENDER_LEAK,
            "At rest, sender state is held only for a request that is still running.",
            _no_sender_leak,
            source="chunk_transfer_adapter.cleanup_sender; a failed terminal keeps state",
        ),
        sometimes(
            "terminal_reaches_consumer",
            "Some request's terminal reaches its consumer.",
            lambda v: bool(v.get("received")),
            source="vacuity guard",
        ),
        sometimes(
            "cleanup_while_terminal_pending",
            "cleanup_sender can run while a terminal is queued.",
            lambda v: any(s.state in ("draining", "retiring") for _, s in v.live("sender")),
            source="vacuity guard for #6670",
        ),
        sometimes(
            "external_id_reused",
            "A new request can reuse an external id.",
            lambda v: any(slot.generation >= 2 for _, slot in v.instances("request")),
            source="vacuity guard for reuse isolation",
        ),
    )
