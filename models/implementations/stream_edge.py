"""`StreamEdgeRecorder`: the once-only stream-edge event recorder of RFC #6472, ready to adopt.

The runtime side of `statecore.models.stream_edge`: every decision - first
write wins, which segment is current, whether a handle is retired or its owner
closed, whether an elapsed time is usable - is taken by the checked machines
through statecore `Instance` objects; this module adds the bookkeeping around
them (segment indices, recorded values, snapshots) and the argument checks.

It follows the seed 004 review:

* **Fail open.** A runtime condition never raises into a request: a NaN,
  negative, infinite or missing elapsed time, a duplicate, a late observation
  for an older segment, an observation for a segment not started yet, a
  retired handle, a closed owner and an envelope from another request
  instance all make the call return ``False`` (or ``None`` for
  `StreamEdgeRecorder.start_segment`) and log at ``DEBUG``. Only programmer
  errors raise: a key that is not a `StreamEdgeKey`, an event that is not one
  of the recorder's events, a segment index that is not a non-negative int,
  an elapsed time that is not a real number.
* **Segments are the runtime's.** `start_segment` starts, advances or rebinds
  an edge's segment and returns its `SegmentHandle`; starting a newer segment
  retires the previous handle. Non-segmented edges use segment 0. Arriving
  telemetry routed by key (`StreamEdgeRecorder.record`) is accepted for the
  current segment only: it never advances segments and never opens an edge.
* **Owner closed at cleanup.** `StreamEdgeRecorder.close` is idempotent and
  never raises; afterwards every handle and key-based call returns ``False``.
  Use `drop_request_state` on *every* removal path (canonical cleanup and sync
  ``Omni.abort``): it calls the state's release hook if it has one, logs
  anything it raises, and always pops the state and republishes the gauges.
* **Reused ids distinguished.** Each recorder has an `instance` token; a
  key-based call must carry the token of the request instance that made the
  observation, so a late message for an old instance is dropped by the new
  one. A `SegmentHandle` is bound to its recorder object and cannot reach a
  successor.
* **Detached snapshots.** `StreamEdgeRecorder.snapshot` returns immutable
  values in elapsed milliseconds, with missing events as ``None``, each
  event's clock domain declared, and no request ids. Deltas are offered only
  between events of one clock domain.

Thread-safe: one lock per recorder serialises its calls (the machines'
instance locks nest inside it); handles share their recorder's lock. The
module uses the standard library and statecore only.

Typical use in vLLM-Omni::

    state.stream_edge_events = StreamEdgeRecorder()          # enable collection
    handle = state.stream_edge_events.start_segment(StreamEdgeKey(0, 1))
    handle.record(StreamEdgeEvent.PRODUCER_EMIT, elapsed_ms)  # True or False
    ...
    drop_request_state(self.request_states, request_id, self._publish_request_gauges)
"""

from __future__ import annotations

import enum
import functools
import logging
import math
import numbers
import threading
import uuid
from collections.abc import Callable, Iterable, Mapping, MutableMapping
from dataclasses import dataclass
from types import MappingProxyType
from typing import Any, Final

from statecore import Instance, Machine

from ..stream_edge import EVENTS, edge_machine, recorder_machine, segment_machine, segment_order

__all__ = [
    "ALL_EVENTS",
    "DEFAULT_CLOCK_DOMAINS",
    "RELEASE_HOOK",
    "SegmentHandle",
    "SegmentSnapshot",
    "StreamEdgeEvent",
    "StreamEdgeKey",
    "StreamEdgeRecorder",
    "StreamEdgeSnapshot",
    "drop_request_state",
    "release_request_telemetry",
]

logger = logging.getLogger(__name__)

RELEASE_HOOK: Final = "release_stream_edge_metrics"
"""The name of the release hook a request state object may define."""


class StreamEdgeEvent(str, enum.Enum):
    """The four first-payload boundaries of one directed edge, in stream order."""

    PRODUCER_EMIT = "producer_emit"
    SEND_COMPLETE = "send_complete"
    CONSUMER_ACCEPT = "consumer_accept"
    RESPONSE_EMIT = "response_emit"


DEFAULT_CLOCK_DOMAINS: Mapping[str, str] = MappingProxyType(
    {
        StreamEdgeEvent.PRODUCER_EMIT.value: "producer",
        StreamEdgeEvent.SEND_COMPLETE.value: "producer",
        StreamEdgeEvent.CONSUMER_ACCEPT.value: "consumer",
        StreamEdgeEvent.RESPONSE_EMIT.value: "entrypoint",
    }
)
"""Which clock (and origin) each event's elapsed time is measured on."""

ALL_EVENTS: tuple[StreamEdgeEvent, ...] = tuple(StreamEdgeEvent)
assert tuple(e.value for e in ALL_EVENTS) == EVENTS


@dataclass(frozen=True, order=True)
class StreamEdgeKey:
    """A directed edge between two pipeline stages, e.g. ``StreamEdgeKey(0, 1)``."""

    from_stage: int
    to_stage: int

    def __post_init__(self) -> None:
        for name in ("from_stage", "to_stage"):
            value = getattr(self, name)
            if type(value) is not int:
                raise TypeError(f"StreamEdgeKey.{name} must be an int, got {value!r}")
            if value < 0:
                raise ValueError(f"StreamEdgeKey.{name} must be >= 0, got {value}")
        if self.from_stage == self.to_stage:
            raise ValueError(f"StreamEdgeKey needs distinct stages, got {self.from_stage} twice")

    def __str__(self) -> str:
        return f"{self.from_stage}->{self.to_stage}"


@functools.lru_cache(maxsize=8)
def _machines(events: tuple[str, ...]) -> tuple[Machine, Machine, Machine]:
    """The recorder, edge and segment machines for one event set (built once)."""
    return recorder_machine(), edge_machine(), segment_machine(events)


# -- detached snapshots -------------------------------------------------------


@dataclass(frozen=True)
class SegmentSnapshot:
    """What one segment of one edge recorded: elapsed milliseconds, ``None`` if missing."""

    from_stage: int
    to_stage: int
    segment: int
    current: bool
    elapsed_ms: Mapping[str, float | None]
    clock_domains: Mapping[str, str]

    def delta_ms(self, start: StreamEdgeEvent | str, end: StreamEdgeEvent | str) -> float | None:
        """``end - start`` in ms, or ``None`` if either is missing or their clocks differ."""
        a, b = _name(start), _name(end)
        first, second = self.elapsed_ms.get(a), self.elapsed_ms.get(b)
        if first is None or second is None:
            return None
        if self.clock_domains.get(a) != self.clock_domains.get(b):
            return None
        return second - first

    def as_dict(self) -> dict[str, Any]:
        """A JSON-ready dict (missing events are ``None``)."""
        return {
            "from_stage": self.from_stage,
            "to_stage": self.to_stage,
            "segment": self.segment,
            "current": self.current,
            "elapsed_ms": dict(self.elapsed_ms),
        }


@dataclass(frozen=True)
class StreamEdgeSnapshot:
    """An immutable copy of a recorder's contents; it carries no request id."""

    closed: bool
    clock_domains: Mapping[str, str]
    segments: tuple[SegmentSnapshot, ...]

    def segment(self, key: StreamEdgeKey, segment: int = 0) -> SegmentSnapshot | None:
        """The snapshot of `segment` on edge `key`, or ``None`` if it was never started."""
        wanted = (key.from_stage, key.to_stage, segment)
        for row in self.segments:
            if (row.from_stage, row.to_stage, row.segment) == wanted:
                return row
        return None

    def as_dict(self) -> dict[str, Any]:
        """A JSON-ready dict for a response or a benchmark record."""
        return {
            "closed": self.closed,
            "clock_domains": dict(self.clock_domains),
            "segments": [row.as_dict() for row in self.segments],
        }


# -- handles and the recorder ---------------------------------------------------


class SegmentHandle:
    """One segment of one edge, as `StreamEdgeRecorder.start_segment` hands it out.

    ``record`` returns ``True`` for the first valid write of an event and
    ``False`` otherwise; once a later segment starts on the edge, or the
    owner closes, the handle is dead and every ``record`` returns ``False``.
    """

    __slots__ = ("_instance", "_recorder", "key", "segment")

    def __init__(self, recorder: StreamEdgeRecorder, key: StreamEdgeKey, segment: int) -> None:
        self._recorder = recorder
        self._instance = Instance(recorder._segment_machine)
        self.key = key
        self.segment = segment

    @property
    def state(self) -> str:
        """``live``, ``retired`` (a later segment started) or ``closed`` (owner closed)."""
        return self._instance.state

    @property
    def live(self) -> bool:
        """Whether the handle can still record."""
        return self._instance.state == "live"

    def record(self, event: StreamEdgeEvent | str, elapsed_ms: float | None) -> bool:
        """Record `event` at `elapsed_ms` once; ``False`` if dropped (never raises on data)."""
        name = self._recorder._check_event(event)
        value = _elapsed(elapsed_ms)
        with self._recorder._lock:
            return self._recorder._write(self, name, value)

    def __repr__(self) -> str:
        return f"SegmentHandle({self.key}, segment={self.segment}, {self.state})"


class _Edge:
    __slots__ = ("current", "instance")

    def __init__(self, machine: Machine) -> None:
        self.instance = Instance(machine)
        self.current: SegmentHandle | None = None


class StreamEdgeRecorder:
    """Once-only stream-edge events for one request instance; see the module docstring.

    `instance` is the token that tells this request instance from another
    one reusing its id (a fresh random token by default); transports carry it
    with each observation. `events` are the events recorded (all four by
    default) and `clock_domains` the clock each is measured on.
    """

    def __init__(
        self,
        *,
        instance: str | None = None,
        events: Iterable[StreamEdgeEvent | str] = ALL_EVENTS,
        clock_domains: Mapping[str, str] | None = None,
    ) -> None:
        names = tuple(_name(e) for e in events)
        if not names or len(set(names)) != len(names):
            raise ValueError(f"events must be distinct and non-empty, got {names!r}")
        domains = dict(DEFAULT_CLOCK_DOMAINS if clock_domains is None else clock_domains)
        missing = [n for n in names if not domains.get(n)]
        if missing:
            raise ValueError(f"no clock domain declared for event(s) {missing}")
        if instance is not None and not isinstance(instance, str):
            raise TypeError(f"instance must be a str token, got {instance!r}")
        owner, edge, segment = _machines(names)
        self.instance: str = uuid.uuid4().hex if instance is None else instance
        self._events = frozenset(names)
        self._order = names
        self._clock_domains: Mapping[str, str] = MappingProxyType({n: domains[n] for n in names})
        self._edge_machine = edge
        self._segment_machine = segment
        self._lock = threading.Lock()
        self._owner = Instance(owner)
        self._edges: dict[StreamEdgeKey, _Edge] = {}
        self._values: dict[tuple[StreamEdgeKey, int], dict[str, float]] = {}

    # -- the runtime's API --------------------------------------------------------

    @property
    def closed(self) -> bool:
        """Whether the owner released the recorder."""
        return self._owner.state == "closed"

    @property
    def events(self) -> tuple[str, ...]:
        """The events this recorder records, in stream order."""
        return self._order

    def start_segment(self, key: StreamEdgeKey, segment: int = 0) -> SegmentHandle | None:
        """Start (or rebind to) `segment` of edge `key` and return its handle.

        A newer segment than the current one retires the current handle; the
        current segment returns the same handle; an older segment, or a closed
        owner, returns ``None``.
        """
        _check_key(key)
        segment = _check_segment(segment)
        with self._lock:
            edge = self._edges.get(key)
            if edge is None:
                if not self._owner.fire("open_edge"):
                    _dropped("start_segment", key, segment, "owner closed")
                    return None
                edge = self._edges[key] = _Edge(self._edge_machine)
            current = edge.current
            order = segment_order(segment, None if current is None else current.segment)
            if not edge.instance.fire("start_segment", order=order):
                why = "owner closed" if edge.instance.state == "closed" else "older segment"
                _dropped("start_segment", key, segment, why)
                return None
            if order == "same":
                return current
            if current is not None:
                current._instance.fire("retire")  # policy 'error': a bookkeeping bug raises
            handle = SegmentHandle(self, key, segment)
            edge.current = handle
            self._values[(key, segment)] = {}
            return handle

    def record(
        self,
        key: StreamEdgeKey,
        segment: int,
        event: StreamEdgeEvent | str,
        elapsed_ms: float | None,
        *,
        instance: str,
    ) -> bool:
        """Record an observation that arrived by key (a transport handler's entry point).

        `instance` is the token of the request instance that made the
        observation. Accepted only for this instance and the edge's current
        segment: a late, not yet started or foreign observation returns
        ``False``; it never advances segments or opens an edge.
        """
        _check_key(key)
        segment = _check_segment(segment)
        name = self._check_event(event)
        value = _elapsed(elapsed_ms)
        if not isinstance(instance, str):
            raise TypeError(f"instance must be the recorder's token (a str), got {instance!r}")
        with self._lock:
            if instance != self.instance:
                _dropped(name, key, segment, "another request instance")
                return False
            edge = self._edges.get(key)
            if edge is None:
                _dropped(name, key, segment, "edge not started")
                return False
            current = edge.current
            order = segment_order(segment, None if current is None else current.segment)
            if not edge.instance.fire("observe", order=order):
                why = "owner closed" if edge.instance.state == "closed" else f"{order} segment"
                _dropped(name, key, segment, why)
                return False
            assert current is not None
            return self._write(current, name, value)

    def close(self) -> None:
        """Release the recorder: every handle and key-based call returns ``False`` after.

        Idempotent; never raises on a runtime condition.
        """
        with self._lock:
            if not self._owner.fire("close"):
                return  # already closed
            for edge in self._edges.values():
                edge.instance.fire("close")
                if edge.current is not None:
                    edge.current._instance.fire("close")

    release = close

    def snapshot(self) -> StreamEdgeSnapshot:
        """A detached, immutable copy of everything recorded so far."""
        with self._lock:
            currents = {
                (key, edge.current.segment)
                for key, edge in self._edges.items()
                if edge.current is not None and edge.current.live
            }
            rows = tuple(
                SegmentSnapshot(
                    key.from_stage,
                    key.to_stage,
                    segment,
                    (key, segment) in currents,
                    MappingProxyType({n: self._values[key, segment].get(n) for n in self._order}),
                    self._clock_domains,
                )
                for key, segment in sorted(self._values)
            )
            return StreamEdgeSnapshot(self.closed, self._clock_domains, rows)

    def __repr__(self) -> str:
        state = "closed" if self.closed else "open"
        return f"StreamEdgeRecorder({state}, {len(self._edges)} edge(s))"

    # -- internals (called with the lock held unless noted) -------------------------

    def _check_event(self, event: StreamEdgeEvent | str) -> str:
        """The event's name; raises on a programmer error (no lock needed)."""
        name = _name(event)
        if name not in self._events:
            raise ValueError(f"event {name!r} is not recorded here; events are {list(self._order)}")
        return name

    def _write(self, handle: SegmentHandle, name: str, value: float) -> bool:
        if not handle._instance.fire("record", event=name, elapsed_ms=value):
            why = handle.state if not handle.live else "duplicate or invalid elapsed_ms"
            _dropped(name, handle.key, handle.segment, why)
            return False
        self._values[(handle.key, handle.segment)][name] = value
        return True


def _dropped(what: str, key: StreamEdgeKey, segment: int, why: str) -> None:
    logger.debug("stream-edge %s dropped on edge %s segment %d: %s", what, key, segment, why)


# -- argument checks (programmer errors raise) ------------------------------------


def _name(event: StreamEdgeEvent | str) -> str:
    if isinstance(event, StreamEdgeEvent):
        return event.value
    if isinstance(event, str):
        return event
    raise TypeError(f"event must be a StreamEdgeEvent or its name, got {event!r}")


def _check_key(key: object) -> None:
    if not isinstance(key, StreamEdgeKey):
        raise TypeError(f"key must be a StreamEdgeKey, got {key!r}")


def _check_segment(segment: object) -> int:
    if isinstance(segment, bool) or not isinstance(segment, numbers.Integral):
        raise TypeError(f"segment must be an int, got {segment!r}")
    index = int(segment)
    if index < 0:
        raise ValueError(f"segment must be >= 0, got {index}")
    return index


def _elapsed(value: object) -> float:
    """A float for the machine: NaN for a missing or unrepresentable reading.

    ``None`` (no clock reading) is a runtime condition, so it becomes NaN and
    is dropped; anything that is not a real number is a programmer error.
    """
    if value is None:
        return math.nan
    if isinstance(value, bool) or not isinstance(value, numbers.Real):
        raise TypeError(f"elapsed_ms must be a real number or None, got {value!r}")
    try:
        return float(value)
    except (OverflowError, ValueError):
        return math.nan


# -- removal from request_states (both paths) ---------------------------------------


def release_request_telemetry(state: object) -> bool:
    """Call ``state.release_stream_edge_metrics()`` if it exists; never raise.

    A state without the hook (a duck-typed ``SimpleNamespace`` in tests) is
    skipped; an exception from the hook is logged. Returns whether the hook ran
    to completion.
    """
    try:
        release = getattr(state, RELEASE_HOOK, None)
        if release is None:
            return False
        release()
    except Exception:
        logger.exception("stream-edge telemetry release failed; the request is removed anyway")
        return False
    return True


def drop_request_state(
    request_states: MutableMapping[str, Any],
    request_id: str,
    publish_gauges: Callable[[int], None] | None = None,
) -> Any:
    """Remove `request_id` from `request_states` on any removal path; return its state.

    Releases the state's telemetry (`release_request_telemetry`), then - in a
    ``finally``, so nothing the release does can skip it - pops the state and
    republishes the gauges with the new count. Use it from both
    ``_log_summary_and_cleanup`` and ``Omni.abort`` (0.30.0's pops without
    republishing).
    """
    state = request_states.get(request_id)
    try:
        if state is not None:
            release_request_telemetry(state)
    finally:
        request_states.pop(request_id, None)
        if publish_gauges is not None:
            publish_gauges(len(request_states))
    return state
