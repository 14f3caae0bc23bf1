"""Client requests and their stream-edge recorders: both removal paths (seed 004).

Composes the client-side request lifecycle (`statecore.models.request`) with
the once-only stream-edge recorder of RFC #6472 (`statecore.models.stream_edge`)
as the seed 004 review describes the code around it: vLLM-Omni 0.30.0's
``OmniBase._log_summary_and_cleanup`` and sync ``Omni.abort``, the PR's
``ClientRequestState`` owning a recorder, and the candidate transport the
reviewer assumes (``StageMetricsMessage`` applied by
``OmniBase._process_stage_metrics_message``, which looks the request up with
``request_states.get(id)``).

Actors and their actions:

* client - ``register`` (a request state is registered under an external id;
  a reused id gets a new request instance; the state object is a real
  ``ClientRequestState`` owning a recorder, a duck-typed ``SimpleNamespace``
  without the release hook, as the existing CPU tests put there, or a state
  whose release hook raises), ``abort_sync`` (``Omni._run_generation`` calls
  ``Omni.abort`` on ``GeneratorExit`` or an exception: the second removal
  path);
* engine (internal) - ``output``, ``finish``, ``stage_error``;
* entrypoint (internal) - ``cleanup``: ``_log_summary_and_cleanup`` once the
  request is over (AsyncOmni's ``finally``, sync Omni's finished output);
* runtime - ``open_segment``: the runtime establishes identity and starts or
  advances an edge's segment before dispatch (``start_segment``);
* producer - ``record``: an observation through a segment handle the
  recorder handed out, which a producer may retain long after its segment
  retired or its request was removed;
* orchestrator - ``deliver``: an observation arriving by key through the
  transport, carrying the request instance that made it.

In the reference both removal paths go through one helper, as the review
suggests (``_drop_request_state``; `statecore.models.stream_edge_impl`
provides it as ``drop_request_state``): look the release hook up with
``getattr``, log what it raises, then pop and republish the gauges in a
``finally``. A raise in production code is modelled as a step that adds
``(request, site)`` to the ``crashed`` global (and fails the request if it is
still running); the spec's fail-open properties say that never happens. Why
an observation was dropped is the output ``refused(request, reason)``, not a
global, so that it does not multiply the state space.

Bounds: one external id reused once (two instances), one edge, two segments,
one of the four events, and elapsed values ``12.5``, NaN, ``-1.0`` and
infinity. Segment keys are tuples that contain the id, which symmetry
reduction cannot move, so the ids are not symmetric (with one id there is
nothing to reduce anyway). `RequestLifecycleConfig` selects the behaviour: the
defaults are the reference the review asks for; each seed 004 finding flips
one switch.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Hashable, Sequence
from dataclasses import dataclass

from statecore import TransitionError, out
from statecore.errors import ActionError
from statecore.registry import Target
from statecore.system import Action, Component, Global, Handle, Keys, System, Tx

from .request import RUNNING, TERMINAL, request_machine
from .stream_edge import (
    edge_machine,
    recorder_machine,
    segment_machine,
    segment_order,
)

KINDS: tuple[str, ...] = ("client", "duck", "raising")
# One event is enough for the lifecycle; `statecore.models.stream_edge` checks
# first-write-wins across events, edges and segments on a recorder alone.
EVENTS: tuple[str, ...] = ("producer_emit",)
ELAPSED: tuple[float, ...] = (12.5, math.nan, -1.0, math.inf)


@dataclass(frozen=True)
class RequestLifecycleConfig:
    """Behaviour switches; each names the seed 004 review point it comes from."""

    name: str = "request_lifecycle"
    ids: int = 1
    generations: int = 2
    edges: tuple[str, ...] = ("e0",)
    segments: int = 2
    events: tuple[str, ...] = EVENTS
    elapsed: tuple[float, ...] = ELAPSED
    kinds: tuple[str, ...] = KINDS
    # Omni.abort releases the recorder through the helper canonical cleanup
    # uses (review point 1); at the PR head it pops request_states directly.
    abort_releases: bool = True
    # record() drops a bad elapsed_ms (review point 3); the PR head raises
    # ValueError on a live handle.
    raise_on_invalid: bool = False
    # The release hook is looked up with getattr, its errors are logged, and
    # pop + gauges run in an inner finally (bot P1); the PR head calls
    # req_state.release_stream_edge_metrics() first in the finally.
    guarded_release: bool = True
    # The transport handler records by key and drops late or not-yet-started
    # segments (review point 2); with the PR's API it calls start_segment(key)
    # per message, which raises for an older segment.
    late_start_raises: bool = False
    # Handles and transport envelopes carry the request instance, so a
    # reused id cannot reach its successor (author's revision 3); otherwise
    # they resolve by external id.
    isolate_instances: bool = True


def build(config: RequestLifecycleConfig = RequestLifecycleConfig()) -> System:
    """The request-lifecycle system for `config`, with the spec's properties."""
    from statecore.spec.request_lifecycle import properties

    ext = Keys("ext", config.ids, symmetric=False)
    ids = ext.values
    edge_keys = [(x, e) for x in ids for e in config.edges]
    segment_keys = [(x, e, s) for x in ids for e in config.edges for s in range(config.segments)]
    instances = range(1, config.generations + 1)
    segments = range(config.segments)

    def register(tx: Tx, ext: Hashable, kind: str) -> None:
        tx.require(tx.snapshot(("request", ext)) is None, "the previous instance is registered")
        request = tx.spawn("request", ext)
        tx.set("state_objects", tx.get("state_objects") | {(request, kind)})
        if kind == "client":
            _own(tx, tx.spawn("recorder", ext), request)

    def lifecycle(event: str) -> Callable[[Tx, Hashable], None]:
        def run(tx: Tx, ext: Hashable) -> None:
            request = tx.handle("request", ext)
            tx.require(request is not None and tx.fire(request, event).accepted)

        return run

    def cleanup(tx: Tx, ext: Hashable) -> None:
        request = tx.handle("request", ext)
        tx.require(request is not None and request not in tx.get("cleaned"))
        assert request is not None
        snap = tx.snapshot(request)
        tx.require(snap is not None and snap.state in TERMINAL)
        tx.set("cleaned", tx.get("cleaned") | {request})
        kind = _kind(tx, request)
        if not config.guarded_release and kind != "client":
            # req_state.release_stream_edge_metrics() raises (AttributeError on a
            # duck-typed state, or the hook's own error): the rest of the
            # finally - pop and gauge republish - never runs.
            _crash(tx, request, "cleanup")
            return
        _release(tx, request)  # duck: no hook; raising: logged and dropped
        _pop(tx, request, "cleanup")
        tx.set("republished", tx.get("republished") | {request})

    def abort_sync(tx: Tx, ext: Hashable) -> None:
        request = tx.handle("request", ext)
        tx.require(request is not None)
        assert request is not None
        if config.abort_releases:
            _release(tx, request)
        tx.require(_pop(tx, request, "abort"))

    def open_segment(tx: Tx, ext: Hashable, edge: str, segment: int) -> None:
        request = tx.handle("request", ext)
        tx.require(request is not None)
        assert request is not None
        snap = tx.snapshot(request)
        tx.require(snap is not None and snap.state in RUNNING)
        cur = _current(tx, request, edge)
        tx.require(cur is None or segment >= cur[0], "the runtime only moves forward")
        tx.require(_start_segment(tx, request, edge, segment) is not None)

    def record(
        tx: Tx, ext: Hashable, instance: int, edge: str, segment: int, event: str, elapsed: float
    ) -> None:
        # Producers may keep every segment handle the recorder handed out.
        key = (ext, edge, segment)
        found = [
            (h, r)
            for h, r in tx.get("owner")
            if h.component == "segment" and h.key == key and r.generation == instance
        ]
        tx.require(found, "no such handle was handed out")
        handle, request = found[0]
        target: Handle | tuple[str, Hashable] = (
            handle if config.isolate_instances else ("segment", handle.key)
        )
        _observe(tx, request, target, event, elapsed)

    def deliver(
        tx: Tx, ext: Hashable, instance: int, edge: str, segment: int, event: str, elapsed: float
    ) -> None:
        observed = Handle("request", ext, instance)
        tx.require(_kind(tx, observed) is not None, "no such request instance")
        # A message dropped without a trace is left out (tx.require): it would
        # only add self-loops to the state graph.
        current = tx.handle("request", ext)  # request_states.get(id)
        tx.require(current is not None, "a late message after removal: dropped by the lookup")
        assert current is not None
        if config.isolate_instances and current != observed:
            _refuse(tx, observed, "stale_instance")
            return
        tx.require(_recorder(tx, current) is not None, "no recorder on this state object")
        if config.late_start_raises:
            try:
                handle = _start_segment(tx, current, edge, segment)
            except ActionError as exc:
                if not isinstance(exc.__cause__, TransitionError):
                    raise
                _refuse(tx, observed, "late")
                _crash(tx, current, "start_segment")
                return
            if handle is None:
                _refuse(tx, observed, "closed")
                return
            _observe(tx, observed, handle, event, elapsed)
            return
        edge_handle = _owned(tx, "edge", (ext, edge), current)
        tx.require(edge_handle is not None, "telemetry never opens an edge")
        assert edge_handle is not None
        cur = _current(tx, current, edge)
        order = segment_order(segment, None if cur is None else cur[0])
        if not tx.fire(edge_handle, "observe", order=order).accepted:
            edge_snap = tx.snapshot(edge_handle)
            closed = edge_snap is not None and edge_snap.state == "closed"
            tx.require(closed or order == "older", "telemetry never advances segments")
            _refuse(tx, observed, "closed" if closed else "late")
            return
        assert cur is not None
        _observe(tx, observed, cur[1], event, elapsed)

    # -- helpers over the transaction -------------------------------------------

    def _own(tx: Tx, handle: Handle, request: Handle) -> None:
        tx.set("owner", tx.get("owner") | {(handle, request)})

    def _owned(tx: Tx, component: str, key: Hashable, request: Handle) -> Handle | None:
        handle = tx.handle(component, key)
        if handle is not None and (handle, request) in tx.get("owner"):
            return handle
        return None

    def _recorder(tx: Tx, request: Handle) -> Handle | None:
        return _owned(tx, "recorder", request.key, request)

    def _kind(tx: Tx, request: Handle) -> str | None:
        for handle, kind in tx.get("state_objects"):
            if handle == request:
                return str(kind)
        return None

    def _current(tx: Tx, request: Handle, edge: str) -> tuple[int, Handle] | None:
        """The current segment of `request`'s `edge`: its live segment handle."""
        for segment in segments:
            handle = _owned(tx, "segment", (request.key, edge, segment), request)
            snap = tx.snapshot(handle) if handle is not None else None
            if handle is not None and snap is not None and snap.state == "live":
                return segment, handle
        return None

    def _start_segment(tx: Tx, request: Handle, edge: str, segment: int) -> Handle | None:
        """``recorder.start_segment(edge, segment)``: a handle, or None (dropped)."""
        recorder = _recorder(tx, request)
        if recorder is None:
            return None
        edge_handle = _owned(tx, "edge", (request.key, edge), request)
        if edge_handle is None:
            if not tx.fire(recorder, "open_edge").accepted:
                return None
            edge_handle = tx.spawn("edge", (request.key, edge))
            _own(tx, edge_handle, request)
        cur = _current(tx, request, edge)
        order = segment_order(segment, None if cur is None else cur[0])
        if not tx.fire(edge_handle, "start_segment", order=order).accepted:
            return None
        if order == "same":
            assert cur is not None
            return cur[1]
        if cur is not None:
            tx.fire(cur[1], "retire")
        handle = tx.spawn("segment", (request.key, edge, segment))
        _own(tx, handle, request)
        return handle

    def _release(tx: Tx, request: Handle) -> None:
        """``release_stream_edge_metrics()``: close the recorder, its edges and segments."""
        recorder = _recorder(tx, request)
        if recorder is None or not tx.fire(recorder, "close").accepted:
            return
        for edge in config.edges:
            edge_handle = _owned(tx, "edge", (request.key, edge), request)
            if edge_handle is not None:
                tx.fire(edge_handle, "close")
            for segment in segments:
                handle = _owned(tx, "segment", (request.key, edge, segment), request)
                if handle is not None:
                    tx.fire(handle, "close")

    def _pop(tx: Tx, request: Handle, path: str) -> bool:
        """``request_states.pop(id)`` on `path`; False if the request cannot take it."""
        if not tx.fire(request, path).accepted:
            return False
        tx.retire(request)
        tx.set("removed", tx.get("removed") | {(request, path)})
        return True

    def _crash(tx: Tx, request: Handle, site: str) -> None:
        tx.set("crashed", tx.get("crashed") | {(request, site)})
        if tx.live(request):
            tx.fire(request, "fail")

    def _refuse(tx: Tx, observed: Handle, reason: str) -> None:
        # An output, not a global: the reason would multiply the state space.
        tx.emit(out("refused", request=observed, reason=reason))

    def _observe(
        tx: Tx,
        observed: Handle,
        target: Handle | tuple[str, Hashable],
        event: str,
        elapsed: float,
    ) -> None:
        """``handle.record(event, elapsed)`` for an observation of `observed`."""
        snap = tx.snapshot(target)
        try:
            outcome = tx.fire(target, "record", event=event, elapsed_ms=elapsed)
        except ValueError:  # the PR head validates by raising
            _refuse(tx, observed, "bad_elapsed")
            _crash(tx, observed, "record")
            return
        if outcome.accepted:
            accepting = target if isinstance(target, Handle) else tx.handle(*target)
            assert accepting is not None
            owner = next(r for h, r in tx.get("owner") if h == accepting)
            if owner != observed:
                tx.set("misattributed", tx.get("misattributed") | {(observed, owner)})
            if not tx.live(owner):
                tx.set("late_accepts", tx.get("late_accepts") | {owner})
            return
        if snap is None:
            reason = "stale_instance"
        elif snap.state != "live":
            reason = snap.state  # retired or closed
        else:
            reason = "duplicate" if getattr(snap, event) else "bad_elapsed"
        _refuse(tx, observed, reason)

    observation: dict[str, Keys | Sequence[Hashable]] = {
        "ext": ext,
        "instance": instances,
        "edge": config.edges,
        "segment": segments,
        "event": config.events,
        "elapsed": config.elapsed,
    }
    EXT: dict[str, Keys | Sequence[Hashable]] = {"ext": ext}
    return System(
        config.name,
        doc=__doc__ or "",
        components=[
            Component("request", request_machine(), ext, max_generations=config.generations),
            Component("recorder", recorder_machine(), ext, max_generations=config.generations),
            Component(
                "edge",
                edge_machine(late_raises=config.late_start_raises),
                edge_keys,
                max_generations=config.generations,
            ),
            Component(
                "segment",
                segment_machine(config.events, raise_on_invalid=config.raise_on_invalid),
                segment_keys,
                max_generations=config.generations,
            ),
        ],
        globals=[
            Global("state_objects", frozenset(), doc="(request, kind of state object)"),
            Global("owner", frozenset(), doc="(recorder/edge/segment handle, its request)"),
            Global("removed", frozenset(), doc="(request, removal path)"),
            Global("cleaned", frozenset(), doc="requests canonical cleanup ran for"),
            Global("republished", frozenset(), doc="cleanups that popped and republished"),
            Global("crashed", frozenset(), doc="(request, site): telemetry raised into it"),
            Global("late_accepts", frozenset(), doc="removed requests that still recorded"),
            Global("misattributed", frozenset(), doc="(observed, recording instance)"),
        ],
        actions=[
            Action("register", "client", register, {"ext": ext, "kind": config.kinds}),
            Action("output", "engine", lifecycle("output"), EXT, internal=True),
            Action("finish", "engine", lifecycle("finish"), EXT, internal=True),
            Action("stage_error", "engine", lifecycle("fail"), EXT, internal=True),
            Action("cleanup", "entrypoint", cleanup, EXT, internal=True),
            Action("abort_sync", "client", abort_sync, EXT),
            Action(
                "open_segment",
                "runtime",
                open_segment,
                {"ext": ext, "edge": config.edges, "segment": segments},
            ),
            Action("record", "producer", record, observation),
            Action("deliver", "orchestrator", deliver, observation),
        ],
        properties=properties(),
    )


REQUEST_LIFECYCLE = build()


def variant_sync_abort() -> System:
    """Seed 004 point 1: sync Omni.abort pops request_states without releasing."""
    return build(RequestLifecycleConfig(name="request_lifecycle_sync_abort", abort_releases=False))


def variant_telemetry_raises() -> System:
    """Seed 004 point 3: record() raises ValueError on a NaN or negative elapsed time."""
    return build(
        RequestLifecycleConfig(name="request_lifecycle_telemetry_raises", raise_on_invalid=True)
    )


def variant_unguarded_release() -> System:
    """Seed 004 bot P1: cleanup calls a release hook a duck-typed state lacks."""
    return build(
        RequestLifecycleConfig(name="request_lifecycle_unguarded_release", guarded_release=False)
    )


def variant_late_start_raises() -> System:
    """Seed 004 point 2: a late observation through start_segment(key) raises."""
    return build(
        RequestLifecycleConfig(name="request_lifecycle_late_start_raises", late_start_raises=True)
    )


def variant_reuse_joins() -> System:
    """Seed 004 revision 3: handles and envelopes resolve by external id only."""
    return build(
        RequestLifecycleConfig(name="request_lifecycle_reuse_joins", isolate_instances=False)
    )


_RL = __name__

TARGETS: tuple[Target, ...] = (
    Target(
        "request_lifecycle",
        f"{_RL}:REQUEST_LIFECYCLE",
        doc="client requests with stream-edge recorders, both removal paths; the reference",
    ),
    Target(
        "request_lifecycle_sync_abort",
        f"{_RL}:variant_sync_abort",
        "violates:closed_owner_rejects,removal_releases_recorder",
        doc="seed 004 point 1: Omni.abort pops the state; a retained recorder still accepts",
        family="request_lifecycle",
    ),
    Target(
        "request_lifecycle_telemetry_raises",
        f"{_RL}:variant_telemetry_raises",
        "violates:record_fail_open",
        doc="seed 004 point 3: record() raises on NaN or negative elapsed; the request fails",
        family="request_lifecycle",
    ),
    Target(
        "request_lifecycle_unguarded_release",
        f"{_RL}:variant_unguarded_release",
        "violates:no_leak_after_cleanup,requests_drain",
        doc="seed 004 bot P1: AttributeError on a duck-typed state skips pop and gauges",
        family="request_lifecycle",
    ),
    Target(
        "request_lifecycle_late_start_raises",
        f"{_RL}:variant_late_start_raises",
        "violates:late_observation_fail_open",
        doc="seed 004 point 2: a late older-segment observation raises via start_segment",
        family="request_lifecycle",
    ),
    Target(
        "request_lifecycle_reuse_joins",
        f"{_RL}:variant_reuse_joins",
        "violates:reuse_isolation",
        doc="seed 004 revision 3: an old handle or envelope attaches to the reused id",
        family="request_lifecycle",
    ),
)
