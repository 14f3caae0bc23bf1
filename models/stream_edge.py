"""The once-only stream-edge event recorder of RFC #6472 (vLLM-Omni seed 004).

The PR under review (head 9323594) adds ``stream_edge.py``: typed, once-only
first-payload events per directed stage edge, owned by ``ClientRequestState``
and released by canonical cleanup. These machines are the recorder as the
review asks for it, so the composed model
(`statecore.models.request_lifecycle`) and the runtime implementation
(`statecore.models.implementations.stream_edge`) share one definition:

* **recorder** (one per request instance, the owner): ``open`` until its
  request is removed, then ``closed`` for good. ``open_edge`` admits a new
  edge while open; ``close`` is idempotent.
* **edge** (one per directed edge of a recorder): which segment is current.
  Segment indices are unbounded in production, so the edge machine does not
  store them: the caller fires with the *order* of the observed segment
  relative to the current one (``newer``, ``same`` or ``older``) and the
  machine decides. ``start_segment`` is the runtime's: a newer segment
  advances (the old handle retires), the same one rebinds (idempotent), an
  older one is late and dropped. ``observe`` is arriving telemetry routed by
  key: only the current segment is accepted, so telemetry never advances
  segments (the RFC clarification: "arriving telemetry never advances
  segments").
* **segment** (one per segment handle): ``live`` until the edge advances
  (``retired``) or the owner closes (``closed``). ``record(event,
  elapsed_ms)`` is first-write-wins per event; an elapsed time that is NaN,
  negative or infinite is dropped. A dead handle forgets its flags (the
  recorder keeps the values), which keeps the composed models small.

Policies follow the review (seed 004 point 3, "return False for runtime
conditions and raise only for programmer errors"): every event a runtime
condition can refuse (bad elapsed value, duplicate, late or not yet started
segment, retired handle, closed owner) has policy ``reject`` or ``ignore``.
The one ``error`` event is ``retire`` on a segment: only the recorder's own
bookkeeping fires it, from ``live``, so firing it anywhere else is a bug in
the recorder, not a runtime condition.

The PR-head behaviours the review found are variants of these machines:
``segment_machine(raise_on_invalid=True)`` raises ``ValueError`` on a bad
elapsed value (only on a live handle, as the PR's guard did);
``edge_machine(late_raises=True)`` gives ``start_segment`` policy ``error``,
so a late observation for an older segment raises ``TransitionError``.

`build` composes one recorder with two edges, two segments and two events
into a system (target ``stream_edge``): first write wins per (edge, segment,
event), only the current segment records, a closed recorder records nothing,
arriving telemetry never advances a segment, and a valid first observation
for the current segment is never dropped. Every observation call ends with an
``observation`` output, its answer (`statecore.spec.stream_edge`). Its
variant ``stream_edge_start_per_message`` routes telemetry through
``start_segment``.

Mutants that behave like the reference (`EQUIVALENT_MUTANTS`, each with its
reason): an idle edge's start guard (it only ever sees newer starts), the
flags a retired or closed segment forgets (a dead handle refuses every
record, and nothing else reads them), and the require that the recorder is
still open on ``close`` (closing is idempotent).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Hashable, Iterable, Mapping, Sequence
from typing import Annotated, Any, NamedTuple, cast

from statecore.spec.stream_edge import (
    DROPPED,
    OBSERVATION,
    RECORDED,
    TELEMETRY_NEVER_ADVANCES,
    properties,
)

from statecore import Event, Field, Machine, Output, State, Transition, Var, out
from statecore.registry import Target
from statecore.system import Action, Component, Handle, Keys, System, Tx

# The four first-payload boundaries of one directed edge, in stream order:
# the producer stage emits its first payload, the connector completes its
# send, the consumer stage accepts it, the entrypoint emits the response.
# (The names are this model's: the RFC's event schema still awaits
# maintainer alignment.)
EVENTS: tuple[str, ...] = ("producer_emit", "send_complete", "consumer_accept", "response_emit")
# The recorder system keeps two of them: enough to show first write wins per event.
MODEL_EVENTS: tuple[str, ...] = ("producer_emit", "consumer_accept")

# The order of an observed segment index relative to the edge's current one.
ORDERS: tuple[str, ...] = ("newer", "same", "older")

# What definition-time validation fires: valid values only. The symbolic
# check (statecore.check.symbolic) looks beyond them: NaN, infinities, negatives.
ELAPSED_SAMPLE: tuple[float, ...] = (0.0, 12.5)


def valid_elapsed(elapsed_ms: float) -> bool:
    """Whether an elapsed time is usable: finite and not negative (0.0 is valid)."""
    return math.isfinite(elapsed_ms) and elapsed_ms >= 0.0


def segment_order(segment: int, current: int | None) -> str:
    """``newer``, ``same`` or ``older``: `segment` relative to the `current` index."""
    if current is None or segment > current:
        return "newer"
    return "same" if segment == current else "older"


def recorder_machine(name: str = "stream_edge_recorder") -> Machine:
    """The owner: one per request instance, closed at its removal."""
    return Machine(
        name,
        doc="The stream-edge recorder a ClientRequestState owns; closed when the "
        "request leaves request_states, by any removal path.",
        states=[
            State("open", initial=True, doc="collecting"),
            State("closed", final=True, doc="released: accepts nothing, ever"),
        ],
        events=[
            Event("open_edge", policy="reject", doc="a first start_segment on a new edge"),
            Event("close", policy="ignore", doc="release_stream_edge_metrics(); idempotent"),
        ],
        transitions=[
            Transition("open", "open_edge", None),
            Transition("open", "close", "closed"),
        ],
    )


def newer(s: object, p: Mapping[str, Any]) -> bool:
    """The observed segment is newer than the edge's current one."""
    return bool(p["order"] == "newer")


def same(s: object, p: Mapping[str, Any]) -> bool:
    """The observed segment is the edge's current one."""
    return bool(p["order"] == "same")


def edge_machine(*, late_raises: bool = False, name: str = "") -> Machine:
    """One directed edge of a recorder; ``late_raises=True`` is the PR head.

    With ``late_raises`` ``start_segment`` has policy ``error``: a late
    observation for an older segment that reaches it (a key-based handler
    calling ``start_segment(key)`` per message) raises into the caller.
    """
    return Machine(
        name or ("stream_edge_late_raises" if late_raises else "stream_edge"),
        doc="One directed stage edge: which segment is current. Fired with the "
        "order of the observed segment index relative to the current one.",
        states=[
            State("idle", initial=True, doc="no segment started yet"),
            State("active", doc="a current segment"),
            State("closed", final=True, doc="the owner closed"),
        ],
        events=[
            Event(
                "start_segment",
                [Field("order", ORDERS)],
                policy="error" if late_raises else "reject",
                doc="the runtime starts (or rebinds to) a segment before dispatch",
            ),
            Event(
                "observe",
                [Field("order", ORDERS)],
                policy="reject",
                doc="key-based telemetry: accepted for the current segment only",
            ),
            Event("close", policy="ignore", doc="the owner closed"),
        ],
        transitions=[
            Transition(
                "idle",
                "start_segment",
                "active",
                guard=newer,
                name="first_segment",
            ),
            Transition(
                "active",
                "start_segment",
                None,
                guard=newer,
                name="advance",
            ),
            Transition(
                "active",
                "start_segment",
                None,
                guard=same,
                name="rebind",
            ),
            Transition(
                "active",
                "observe",
                None,
                guard=same,
                name="route",
            ),
            Transition(("idle", "active"), "close", "closed", name="close"),
        ],
    )


def valid_and_unset(s: Any, p: Mapping[str, Any]) -> bool:
    """The elapsed time is valid and the event is not recorded yet: the first valid write."""
    return valid_elapsed(p["elapsed_ms"]) and not getattr(s, p["event"])


def unset_or_raise(s: Any, p: Mapping[str, Any]) -> bool:
    """The PR head's guard: the event is not recorded yet; a bad elapsed time raises."""
    elapsed = p["elapsed_ms"]
    if math.isnan(elapsed) or elapsed < 0 or math.isinf(elapsed):
        raise ValueError(f"elapsed_ms must be finite and >= 0, got {elapsed!r}")
    return not getattr(s, p["event"])


def store_elapsed_ms(s: Any, p: Mapping[str, Any]) -> dict[str, bool]:
    """The event is recorded (the recorder keeps the value itself)."""
    return {p["event"]: True}


def recorded(s: Any, p: Mapping[str, Any]) -> tuple[Output, ...]:
    """``recorded(event, elapsed_ms)``: what a segment handle stored."""
    return (out("recorded", event=p["event"], elapsed_ms=p["elapsed_ms"]),)


def segment_machine(
    events: Iterable[str] = MODEL_EVENTS,
    *,
    raise_on_invalid: bool = False,
    name: str = "",
) -> Machine:
    """One segment handle: first write wins per event; ``raise_on_invalid`` is the PR head.

    With ``raise_on_invalid`` a live handle raises ``ValueError`` on a NaN,
    negative or infinite elapsed time instead of dropping it; a retired or
    closed handle still drops it silently (the PR's inconsistency).
    """
    names = tuple(events)

    def forget(s: Any, p: Mapping[str, Any]) -> dict[str, bool]:
        # A dead handle accepts nothing, so its flags no longer matter; the
        # recorder keeps the values. Clearing them keeps the models small.
        return dict.fromkeys(names, False)

    return Machine(
        name or ("stream_edge_segment_raises" if raise_on_invalid else "stream_edge_segment"),
        doc="One segment of one edge: once-only events, dropped when retired or closed.",
        states=[
            State("live", initial=True, doc="the edge's current segment"),
            State("retired", final=True, doc="a later segment started: a stale handle"),
            State("closed", final=True, doc="the owner closed"),
        ],
        variables=[Var(n, (False, True), False, doc=f"{n} recorded") for n in names],
        events=[
            Event(
                "record",
                [
                    Field("event", names),
                    Field("elapsed_ms", sample=ELAPSED_SAMPLE, type=float),
                ],
                policy="reject",
                doc="record(event, elapsed_ms): False unless this is its first valid write",
            ),
            Event("retire", policy="error", doc="the edge advanced (recorder bookkeeping)"),
            Event("close", policy="ignore", doc="the owner closed"),
        ],
        transitions=[
            Transition(
                "live",
                "record",
                None,
                guard=unset_or_raise if raise_on_invalid else valid_and_unset,
                effect=store_elapsed_ms,
                emit=recorded,
                name="record",
            ),
            Transition("live", "retire", "retired", effect=forget, name="retire"),
            Transition("live", "close", "closed", effect=forget, name="close"),
        ],
    )


RECORDER = recorder_machine()
EDGE = edge_machine()
SEGMENT = segment_machine()
EDGE_LATE_RAISES = edge_machine(late_raises=True)
SEGMENT_RAISES = segment_machine(raise_on_invalid=True)

STREAM_EDGE_MACHINES: tuple[Machine, ...] = (RECORDER, EDGE, SEGMENT)
"""The reference machines (the symbolic check must report nothing on them)."""


# -- the recorder alone, as a system ------------------------------------------

ELAPSED: tuple[float, ...] = (12.5, math.nan)

THE_RECORDER = ("recorder", "it")
"""The one recorder of the system, as ``(component, key)``."""


# The rows of the globals below stay plain tuples: trace files (ITF) record
# them as tuples, and tests/bad_inputs/traces/ pins such files for this system.
Recorded = tuple[str, int, str]
"""``(edge, segment, event)``: an event recorded on one segment of one edge."""
Started = tuple[str, int]
"""``(edge, segment)``: a segment the runtime started (and handed out a handle for)."""


class Shared(NamedTuple):
    """The recorder system's globals."""

    recorded: Annotated[frozenset[Recorded], "(edge, segment, event) recorded so far"] = frozenset()
    started: Annotated[frozenset[Started], "(edge, segment) the runtime started"] = frozenset()
    breaches: Annotated[frozenset[str], "fence or closed"] = frozenset()


class Current(NamedTuple):
    """An edge's current segment: its number and its live handle."""

    segment: int
    handle: Handle


def _segment_keys(tx: Tx[Shared]) -> tuple[tuple[str, int], ...]:
    return cast("tuple[tuple[str, int], ...]", tx.system.component("segment").key_values)


def current(tx: Tx[Shared], edge: str) -> Current | None:
    """The current segment of `edge`: its live segment handle."""
    for e, segment in _segment_keys(tx):
        if e != edge:
            continue
        handle = tx.handle("segment", (edge, segment))
        snap = tx.snapshot(handle) if handle is not None else None
        if handle is not None and snap is not None and snap.state == "live":
            return Current(segment, handle)
    return None


def start(tx: Tx[Shared], edge: str, segment: int) -> Handle | None:
    """``start_segment(key, segment)``: a handle, or None (dropped)."""
    edge_handle = tx.handle("edge", edge)
    if edge_handle is None:
        if not tx.fire(THE_RECORDER, "open_edge").accepted:
            return None
        edge_handle = tx.spawn("edge", edge)
    cur = current(tx, edge)
    order = segment_order(segment, None if cur is None else cur.segment)
    if not tx.fire(edge_handle, "start_segment", order=order).accepted:
        return None
    if order == "same":
        assert cur is not None
        return cur.handle
    if cur is not None:
        tx.fire(cur.handle, "retire")
    return tx.spawn("segment", (edge, segment))


def route(tx: Tx[Shared], edge: str, segment: int) -> Handle | None:
    """Where ``record(key, segment, ...)`` writes: the current segment's handle, or None."""
    edge_handle = tx.handle("edge", edge)
    if edge_handle is None:
        return None  # telemetry never opens an edge
    cur = current(tx, edge)
    order = segment_order(segment, None if cur is None else cur.segment)
    if not tx.fire(edge_handle, "observe", order=order).accepted:
        return None  # late, not started yet, or closed
    assert cur is not None
    return cur.handle


def write(
    tx: Tx[Shared], handle: Handle, edge: str, segment: int, event: str, value: float
) -> bool:
    """``handle.record(event, value)``: whether it was recorded; a breach is noted."""
    outcome = tx.fire(handle, "record", event=event, elapsed_ms=value)
    if not outcome.accepted:
        return False
    tx.put(recorded=tx.g.recorded | {(edge, segment, event)})
    cur = current(tx, edge)
    breaches = set()
    if cur is None or cur.segment != segment:
        breaches.add("fence")
    recorder = tx.snapshot(THE_RECORDER)
    if recorder is not None and recorder.state == "closed":
        breaches.add("closed")
    if breaches:
        tx.put(breaches=tx.g.breaches | breaches)
    return True


def observe(
    tx: Tx[Shared],
    edge: str,
    segment: int,
    event: str,
    value: float,
    find: Callable[[], Handle | None],
) -> None:
    """One observation call: `find` the handle it writes through, write, answer."""
    cur = current(tx, edge)
    taken = cur is not None and bool(getattr(tx.snapshot(cur.handle), event))
    handle = find()
    written = handle is not None and write(tx, handle, edge, segment, event, value)
    tx.emit(
        out(
            OBSERVATION,
            segment=segment,
            current=-1 if cur is None else cur.segment,
            taken=taken,
            same=True,
            elapsed_ms=value,
            result=RECORDED if written else DROPPED,
        )
    )


def start_segment(tx: Tx[Shared], edge: str, segment: int) -> None:
    """The runtime starts (or rebinds to) `segment` of `edge` before dispatch."""
    tx.require(start(tx, edge, segment) is not None)
    tx.put(started=tx.g.started | {(edge, segment)})


def record(tx: Tx[Shared], edge: str, segment: int, event: str, elapsed: float) -> None:
    """A producer records through a handle the runtime handed out."""
    tx.require((edge, segment) in tx.g.started, "no such handle was handed out")
    handle = tx.handle("segment", (edge, segment))
    assert handle is not None  # the runtime started it
    observe(tx, edge, segment, event, elapsed, lambda: handle)


def deliver(tx: Tx[Shared], edge: str, segment: int, event: str, elapsed: float) -> None:
    """Arriving telemetry, recorded by key: only the current segment takes it."""
    observe(tx, edge, segment, event, elapsed, lambda: route(tx, edge, segment))


def deliver_start_per_message(
    tx: Tx[Shared], edge: str, segment: int, event: str, elapsed: float
) -> None:
    """Arriving telemetry through ``start_segment(key)``, as the review supposed the PR's API
    would be used: a message for a newer segment starts it."""
    observe(tx, edge, segment, event, elapsed, lambda: start(tx, edge, segment))


def close(tx: Tx[Shared]) -> None:
    """Canonical cleanup closes the recorder, then its edges and segments."""
    tx.require(tx.fire(THE_RECORDER, "close").accepted)
    for edge in tx.system.component("edge").key_values:
        if tx.live(("edge", edge)):
            tx.fire(("edge", edge), "close")
    for key in _segment_keys(tx):
        if tx.live(("segment", key)):
            tx.fire(("segment", key), "close")


Deliver = Callable[[Tx[Shared], str, int, str, float], None]


def build(
    *,
    edges: tuple[str, ...] = ("e01", "e12"),
    segments: int = 2,
    events: tuple[str, ...] = MODEL_EVENTS,
    elapsed: tuple[float, ...] = ELAPSED,
    transport: Deliver = deliver,
    name: str = "stream_edge",
) -> System:
    """One recorder with its edges and segments, driven by runtime, producers and transport.

    Actions: ``start_segment`` (the runtime), ``record`` (a producer, through a
    handle the runtime handed out), ``deliver`` (arriving telemetry; `transport`
    says how the handler writes it) and ``close`` (canonical cleanup).

    Bounds: two edges, two segments, two of the four events, elapsed times
    12.5 and NaN (the request-lifecycle model also tries negative and
    infinite ones; the symbolic check looks at every float).
    """
    segment_keys = [(e, s) for e in edges for s in range(segments)]
    observation: dict[str, Keys | Sequence[Hashable]] = {
        "edge": edges,
        "segment": range(segments),
        "event": events,
        "elapsed": elapsed,
    }
    return System(
        name,
        doc=__doc__ or "",
        components=[
            Component("recorder", recorder_machine(), ("it",)),
            Component("edge", edge_machine(), edges),
            Component("segment", segment_machine(events), segment_keys),
        ],
        globals=Shared,
        init=_spawn_recorder,
        actions=[
            Action(
                "start_segment",
                "runtime",
                start_segment,
                {"edge": edges, "segment": range(segments)},
            ),
            Action("record", "producer", record, observation),
            Action("deliver", "orchestrator", transport, observation),
            Action("close", "entrypoint", close),
        ],
        properties=properties(),
        equivalent_mutants=EQUIVALENT_MUTANTS,
    )


MACHINE_EQUIVALENTS: dict[str, str] = {
    "drop-guard stream_edge.first_segment": "an idle edge has no current segment, so "
    "every start it sees is ordered newer: the guard never refuses",
    "drop-effect stream_edge_segment.retire": "a retired handle refuses every record "
    "whatever its flags hold, and nothing else reads them",
    "drop-effect stream_edge_segment.close": "a closed handle refuses every record "
    "whatever its flags hold, and nothing else reads them",
}
"""Mutants of the shared machines that behave like them, in every system composing them."""

EQUIVALENT_MUTANTS: dict[str, str] = {
    **MACHINE_EQUIVALENTS,
    'skip-require close: tx.require(tx.fire(THE_RECORDER, "close").accepted)': "close is "
    "idempotent: closing a closed recorder closes nothing more",
}


def _spawn_recorder(tx: Tx[Shared]) -> None:
    tx.spawn(*THE_RECORDER)


STREAM_EDGE = build()


def variant_start_per_message() -> System:
    """Seed 004 point 2: the transport handler calls start_segment(key) per message."""
    return build(transport=deliver_start_per_message, name="stream_edge_start_per_message")


_SE = __name__

TARGETS: tuple[Target, ...] = (
    Target(
        "stream_edge",
        f"{_SE}:STREAM_EDGE",
        doc="one recorder: first write wins per (edge, segment, event); the reference",
    ),
    Target(
        "stream_edge_start_per_message",
        variant_start_per_message,
        violates=(TELEMETRY_NEVER_ADVANCES,),
        doc="seed 004 point 2: arriving telemetry advances segments via start_segment(key)",
        family="stream_edge",
    ),
)
