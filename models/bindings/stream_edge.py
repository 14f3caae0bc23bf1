"""The ``stream-edge-recorder`` adapters: `StreamEdgeRecorder` against its models (seed 004).

Two bindings make the reference runtime of RFC #6472
(`statecore.models.implementations.stream_edge`) fuzzable by name::

    statecore fuzz stream_edge --adapter stream-edge-recorder
    statecore fuzz request_lifecycle --adapter stream-edge-recorder-lifecycle

* `StreamEdgeRecorderBinding` (target ``stream_edge``) drives one recorder
  the way the runtime, a producer and the transport would:
  ``start_segment`` -> `StreamEdgeRecorder.start_segment` (its handle is
  kept, as a producer may keep it), ``record`` -> `SegmentHandle.record` on
  that retained handle, ``deliver`` -> `StreamEdgeRecorder.record` by key
  with the recorder's own instance token, ``close`` ->
  `StreamEdgeRecorder.close`.
* `StreamEdgeLifecycleBinding` (target ``request_lifecycle``) drives
  `Entrypoint`: ``OmniBase.request_states`` with the review's fix, where
  both removal paths go through `drop_request_state` (which republishes the
  gauges) and an observation arriving by key carries the token of the request
  instance that made it.

After every step both compare what the implementation shows with what the
model predicts: the result of the call the step made (a handle or none,
accepted or dropped), every recorded (edge, segment, event) with its elapsed
time, which segments are current, the state of every handle handed out
(``live``, ``retired``, ``closed``), whether each recorder is closed and, for
the lifecycle, which request instance is registered under each id, which
registered states hold consumed metric message ids, and the gauge last
published.

The fuzzer takes only the steps the model enables, so calls the model rules
out (an older ``start_segment``, a ``start_segment`` after ``close``) are
not tried here; the Hypothesis lockstep tests of
``tests/test_request_lifecycle.py`` cover those. Standard library and
statecore only.
"""

from __future__ import annotations

import logging
from collections.abc import Hashable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from types import SimpleNamespace
from typing import Any, cast

from statecore.adapter import Adapter, AdapterError
from statecore.system import ActionLabel, Handle, StateView, System, SystemState, SystemStep

from .. import request_lifecycle_records as lifecycle
from .. import stream_edge as recorder_system
from ..implementations import stream_edge as stream_edge_impl
from ..implementations.stream_edge import (
    SegmentHandle,
    StreamEdgeKey,
    StreamEdgeRecorder,
    drop_request_state,
)

__all__ = [
    "EDGE_KEYS",
    "Entrypoint",
    "StreamEdgeLifecycleBinding",
    "StreamEdgeRecorderBinding",
    "model_accepted",
]

E01 = StreamEdgeKey(0, 1)
E12 = StreamEdgeKey(1, 2)

EDGE_KEYS: dict[str, StreamEdgeKey] = {"e0": E01, "e01": E01, "e12": E12}
"""The runtime's edge key for each edge name the models use."""

# What an adapter reports for a call that had no handle to make it through.
NO_HANDLE = "no handle"


def model_accepted(model_step: SystemStep) -> bool:
    """Whether the model recorded the observation a ``record``/``deliver`` step made."""
    return any(e.output.name == "recorded" for e in model_step.outputs)


class _Kept(logging.Handler):
    def __init__(self) -> None:
        super().__init__()
        self.records: list[logging.LogRecord] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.records.append(record)


@contextmanager
def _release_errors_kept() -> Iterator[list[logging.LogRecord]]:
    """Collect what `drop_request_state` logs instead of printing it.

    A ``raising`` state object's release hook fails on purpose; the helper
    logs that with a traceback, which would flood a fuzz run's output.
    """
    logger = stream_edge_impl.logger
    handler = _Kept()
    propagate = logger.propagate
    logger.addHandler(handler)
    logger.propagate = False
    try:
        yield handler.records
    finally:
        logger.propagate = propagate
        logger.removeHandler(handler)


def _events(system: System) -> tuple[str, ...]:
    """The events the model's segments record (its boolean variables, in order)."""
    return tuple(v.name for v in system.component("segment").machine.variables)


def _edge_names(edges: tuple[Hashable, ...]) -> dict[StreamEdgeKey, str]:
    """The model's edge name for each runtime edge key; raises for an unknown edge."""
    names: dict[StreamEdgeKey, str] = {}
    for edge in edges:
        key = EDGE_KEYS.get(str(edge))
        if key is None:
            raise AdapterError(f"no runtime edge key for model edge {edge!r}")
        if key in names:
            raise AdapterError(f"model edges {names[key]!r} and {edge!r} share the key {key}")
        names[key] = str(edge)
    return names


def _recorded_rows(
    recorder: StreamEdgeRecorder, edges: dict[StreamEdgeKey, str]
) -> list[tuple[str, int, str, float]]:
    """(edge, segment, event, elapsed_ms) for every value `recorder` holds."""
    return [
        (edges[StreamEdgeKey(row.from_stage, row.to_stage)], row.segment, name, value)
        for row in recorder.snapshot().segments
        for name, value in row.elapsed_ms.items()
        if value is not None
    ]


# -- the recorder alone (target stream_edge) ---------------------------------------


class StreamEdgeRecorderBinding(Adapter):
    """Drive one `StreamEdgeRecorder` in lockstep with the ``stream_edge`` system."""

    name = "stream-edge-recorder"

    def setup(self, system: System) -> None:
        self.system = system
        self.recorder = StreamEdgeRecorder(events=_events(system))
        self.edges = _edge_names(system.component("edge").key_values)
        self.keys = {edge: key for key, edge in self.edges.items()}
        (self.owner_key,) = system.component("recorder").key_values
        self.handles: dict[tuple[str, int], SegmentHandle] = {}
        # (edge, segment, event) -> elapsed_ms of the step the model recorded it in.
        self.values: dict[tuple[str, int, str], float] = {}
        self.observed_call: tuple[str, object] = ("", None)
        self.expected_call: tuple[str, object] = ("", None)

    def apply(self, step: SystemStep, before: SystemState) -> None:
        label = step.action
        args: dict[str, Any] = dict(label.args)
        observed: object = None
        expected: object = None
        if label.name == "start_segment":
            edge, segment = args["edge"], args["segment"]
            handle = self.recorder.start_segment(self.keys[edge], segment)
            known = self.handles.get((edge, segment))
            if handle is None:
                observed = None
            elif known is not None and known is not handle:
                observed = "another handle"  # a rebind must return the same handle
            else:
                self.handles[(edge, segment)] = handle
                observed = "handle"
            expected = "handle"  # the model took the step: it handed out (or rebound) one
        elif label.name == "record":
            retained = self.handles.get((args["edge"], args["segment"]))
            observed = (
                NO_HANDLE if retained is None else retained.record(args["event"], args["elapsed"])
            )
            expected = model_accepted(step)
        elif label.name == "deliver":
            observed = self.recorder.record(
                self.keys[args["edge"]],
                args["segment"],
                args["event"],
                args["elapsed"],
                instance=self.recorder.instance,
            )
            expected = model_accepted(step)
        elif label.name == "close":
            self.recorder.close()
        else:
            raise AdapterError(f"{self.name}: no binding for action {label}")
        for emitted in step.outputs:
            if emitted.output.name == "recorded" and emitted.source is not None:
                edge, segment = cast("tuple[str, int]", emitted.source.key)
                self.values[(edge, segment, emitted.output.get("event"))] = args["elapsed"]
        self.observed_call = (label.name, observed)
        self.expected_call = (label.name, expected)

    def observe(self) -> Hashable:
        snapshot = self.recorder.snapshot()
        currents = tuple(
            sorted(
                (self.edges[StreamEdgeKey(row.from_stage, row.to_stage)], row.segment)
                for row in snapshot.segments
                if row.current
            )
        )
        return (
            ("call", self.observed_call),
            ("recorded", tuple(sorted(_recorded_rows(self.recorder, self.edges)))),
            ("current", currents),
            ("handles", tuple(sorted((*key, h.state) for key, h in self.handles.items()))),
            ("closed", snapshot.closed),
        )

    def expect(self, view: StateView[recorder_system.Shared]) -> Hashable:
        segments = [
            (cast("tuple[str, int]", key), slot.snapshot) for key, slot in view.instances("segment")
        ]
        recorder = view.snapshot("recorder", self.owner_key)
        return (
            ("call", self.expected_call),
            (
                "recorded",
                tuple(sorted((*key, self.values.get(key)) for key in view.g.recorded)),
            ),
            (
                "current",
                tuple(sorted(key for key, snap in segments if snap and snap.state == "live")),
            ),
            (
                "handles",
                tuple(sorted((*key, snap.state) for key, snap in segments if snap is not None)),
            ),
            ("closed", recorder is not None and recorder.state == "closed"),
        )


# -- the request lifecycle (target request_lifecycle) ---------------------------------


@dataclass
class Entrypoint:
    """``OmniBase.request_states`` with the review's fix: one removal helper for both paths.

    Request instances are numbered per id from 1, as the model's generations
    are: ``instances[(id, n)]`` is the state object the n-th ``register`` of
    the id put into ``request_states``; ``handles`` are every segment handle
    the runtime obtained, kept as a producer may keep them; ``gauges`` every
    request count published, in order. Each state object keeps the ids of the
    metric messages consumed for it (``consumed_metric_message_ids``, as
    vLLM-Omni 0.30.0's ``ClientRequestState`` does), so they go with it.
    """

    events: tuple[str, ...]
    request_states: dict[str, Any] = field(default_factory=dict)
    instances: dict[tuple[str, int], Any] = field(default_factory=dict)
    handles: dict[tuple[str, int, str, int], SegmentHandle] = field(default_factory=dict)
    gauges: list[int] = field(default_factory=list)
    release_errors: list[str] = field(default_factory=list)
    messages: int = 0

    def state_object(self, kind: str) -> Any:
        consumed: set[int] = set()
        if kind == "duck":
            return SimpleNamespace(metrics=None, consumed_metric_message_ids=consumed)
        if kind == "raising":

            def release() -> None:
                raise RuntimeError("release failed")

            return SimpleNamespace(
                metrics=None,
                consumed_metric_message_ids=consumed,
                release_stream_edge_metrics=release,
            )
        recorder = StreamEdgeRecorder(events=self.events)
        return SimpleNamespace(
            metrics=None,
            consumed_metric_message_ids=consumed,
            stream_edge_events=recorder,
            release_stream_edge_metrics=recorder.close,
        )

    def generation(self, rid: str) -> int:
        """How many instances of `rid` were registered (the latest one's number)."""
        return sum(1 for registered, _ in self.instances if registered == rid)

    def apply(self, label: ActionLabel) -> bool | str | None:
        """Make `label`'s calls; the result of ``open_segment``, ``record`` and ``deliver``.

        ``open_segment`` gives whether the recorder handed out the handle
        (the same one again for the current segment), ``record`` and
        ``deliver`` whether the observation was recorded (`NO_HANDLE` if no
        handle was ever handed out for it); other actions give ``None``.
        """
        args: dict[str, Any] = dict(label.args)
        rid = str(args.get("ext"))
        if label.name == "register":
            state = self.state_object(args["kind"])
            self.instances[(rid, self.generation(rid) + 1)] = state
            self.request_states[rid] = state
        elif label.name == "output":
            # _handle_output_message consumes the message's metrics once, then
            # _process_single_result publishes the gauges.
            self.messages += 1
            self.request_states[rid].consumed_metric_message_ids.add(self.messages)
            self.gauges.append(len(self.request_states))
        elif label.name in ("cleanup", "abort_sync"):
            with _release_errors_kept() as logged:
                drop_request_state(self.request_states, rid, self.gauges.append)
            self.release_errors.extend(record.getMessage() for record in logged)
        elif label.name == "open_segment":
            recorder = self.request_states[rid].stream_edge_events
            handle = recorder.start_segment(EDGE_KEYS[args["edge"]], args["segment"])
            if handle is None:
                return False
            key = (rid, self.generation(rid), args["edge"], args["segment"])
            return self.handles.setdefault(key, handle) is handle
        elif label.name == "record":
            retained = self.handles.get((rid, args["instance"], args["edge"], args["segment"]))
            if retained is None:
                return NO_HANDLE
            return bool(retained.record(args["event"], args["elapsed"]))
        elif label.name == "deliver":
            # OmniBase._process_stage_metrics_message: request_states.get(id), then
            # the envelope's instance token goes with the observation.
            state = self.request_states.get(rid)
            recorder = getattr(state, "stream_edge_events", None)
            if recorder is None:
                return False
            made_by = self.instances[(rid, args["instance"])]
            observed = getattr(made_by, "stream_edge_events", None)
            token = f"no-recorder-{args['instance']}" if observed is None else observed.instance
            return bool(
                recorder.record(
                    EDGE_KEYS[args["edge"]],
                    args["segment"],
                    args["event"],
                    args["elapsed"],
                    instance=token,
                )
            )
        return None


class StreamEdgeLifecycleBinding(Adapter):
    """Drive `Entrypoint` and its recorders in lockstep with the ``request_lifecycle`` system."""

    name = "stream-edge-recorder-lifecycle"

    def setup(self, system: System) -> None:
        self.system = system
        self.entry = Entrypoint(events=_events(system))
        keys = cast("tuple[tuple[Hashable, str], ...]", system.component("edge").key_values)
        edges = {edge for _, edge in keys}
        self.edges = _edge_names(tuple(sorted(edges)))
        # What the model said last about handles whose slot a later instance took:
        # (id, instance) -> recorder state; (id, instance, edge, segment) -> segment state.
        self.recorder_states: dict[tuple[str, int], str] = {}
        self.segment_states: dict[tuple[str, int, str, int], str] = {}
        # (id, instance, edge, segment, event) -> elapsed_ms, as the model recorded it.
        self.values: dict[tuple[str, int, str, int, str], float] = {}
        self.expected_release_errors = 0
        self.observed_call: tuple[str, object] = ("", None)
        self.expected_call: tuple[str, object] = ("", None)

    def apply(self, step: SystemStep, before: SystemState) -> None:
        label = step.action
        observed = self.entry.apply(label)
        expected: bool | None = None
        if label.name == "open_segment":
            expected = True  # the model took the step: the recorder handed out a handle
        elif label.name in ("record", "deliver"):
            expected = model_accepted(step)
        self.observed_call = (label.name, observed)
        self.expected_call = (label.name, expected)
        now: StateView[lifecycle.Shared] = self.system.view(step.state)
        owner = {owned.part: owned.request for owned in now.g.owner}
        args: dict[str, Any] = dict(label.args)
        for emitted in step.outputs:
            if emitted.output.name == "recorded" and emitted.source is not None:
                ext, edge, segment = cast("tuple[Hashable, str, int]", emitted.source.key)
                request = owner[emitted.source]
                key = (str(ext), request.generation, edge, segment, emitted.output.get("event"))
                self.values[key] = args["elapsed"]
        if label.name in ("cleanup", "abort_sync"):
            # The helper logs (never raises) what a raising release hook raises.
            was: StateView[lifecycle.Shared] = self.system.view(before)
            ext = args["ext"]
            removed = Handle("request", ext, was.slot("request", ext).generation)
            if lifecycle.StateObject(removed, "raising") in was.g.state_objects:
                self.expected_release_errors += 1
        for handle, snap in [*now.live("recorder"), *now.live("segment")]:
            made_by = owner.get(handle)
            if made_by is None:
                continue
            if handle.component == "recorder":
                self.recorder_states[(str(made_by.key), made_by.generation)] = snap.state
            else:
                _, edge, segment = cast("tuple[Hashable, str, int]", handle.key)
                where = (str(made_by.key), made_by.generation, edge, segment)
                self.segment_states[where] = snap.state

    def observe(self) -> Hashable:
        entry = self.entry
        registered = tuple(
            sorted(
                (rid, generation)
                for (rid, generation), obj in entry.instances.items()
                if entry.request_states.get(rid) is obj
            )
        )
        recorders = {
            key: obj.stream_edge_events
            for key, obj in entry.instances.items()
            if hasattr(obj, "stream_edge_events")
        }
        recorded = tuple(
            sorted(
                (rid, generation, *row)
                for (rid, generation), recorder in recorders.items()
                for row in _recorded_rows(recorder, self.edges)
            )
        )
        closed = tuple(
            sorted(
                (*key, "closed" if recorder.closed else "open")
                for key, recorder in recorders.items()
            )
        )
        handles = tuple(sorted((*key, h.state) for key, h in entry.handles.items()))
        return (
            ("call", self.observed_call),
            ("registered", registered),
            ("recorded", recorded),
            ("recorders", closed),
            ("handles", handles),
            (
                "consumed",
                tuple(
                    sorted(
                        rid
                        for rid, state in entry.request_states.items()
                        if state.consumed_metric_message_ids
                    )
                ),
            ),
            ("gauge", entry.gauges[-1] if entry.gauges else 0),
            ("release_errors", len(entry.release_errors)),
        )

    def expect(self, view: StateView[lifecycle.Shared]) -> Hashable:
        registered = tuple(sorted((str(h.key), h.generation) for h, _ in view.live("request")))
        return (
            ("call", self.expected_call),
            ("registered", registered),
            ("recorded", tuple(sorted((*key, value) for key, value in self.values.items()))),
            ("recorders", tuple(sorted((*key, s) for key, s in self.recorder_states.items()))),
            ("handles", tuple(sorted((*key, s) for key, s in self.segment_states.items()))),
            ("consumed", tuple(sorted(str(x) for x in view.g.consumed))),
            ("gauge", view.g.gauge),
            ("release_errors", self.expected_release_errors),
        )
