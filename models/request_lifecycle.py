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
* engine (internal) - ``output`` (``_handle_output_message`` consumes the
  message's metrics once, noting its id in the state's
  ``consumed_metric_message_ids``, and ``_process_single_result`` publishes
  the running/waiting gauges while the request is registered), ``finish``,
  ``stage_error``;
* entrypoint (internal) - ``cleanup``: ``_log_summary_and_cleanup`` once the
  request is over (AsyncOmni's ``finally``, sync Omni's finished output);
* runtime - ``open_segment``: the runtime establishes identity and starts or
  advances an edge's segment before dispatch (``start_segment``), only ever
  forward, at any time the request is registered (a start can race with the
  request's last output);
* producer - ``record``: an observation through a segment handle the
  recorder handed out, which a producer may retain long after its segment
  retired or its request was removed;
* orchestrator - ``deliver``: an observation arriving by key through the
  transport, carrying the request instance that made it.

In the reference both removal paths go through one helper, as the review
suggests (``_drop_request_state``; `statecore.models.stream_edge_impl`
provides it as ``drop_request_state``): call the release hook if the state
has one and log what it raises, then pop the state and republish the gauges
(``_log_summary_and_cleanup`` republishes them in its ``finally``; 0.30.0's
``Omni.abort`` does not). What the state object holds per request, such as
the consumed metric message ids (kept on the state since vLLM-Omni
#6462/#6561, so that they go with it), leaves with the pop on any path.

What each variant replaces is one call; its consequences follow from how the
model treats an exception production code raises (`Raised`): it propagates
to where production catches it. Out of a telemetry call it reaches the stage
serving the request, which fails the request; out of a removal it leaves the
removal function, skipping the rest of it. Nothing records that a raise
happened: the properties judge the request's state, the recorders, the
gauges, what is kept per request and the answers of the calls.

Every observation call ends with an ``observation`` output: the request
instance that made it, the segment it names, what the receiving request's
recorder showed when it arrived (the edge's current segment, whether the
event was already taken there, whether the receiving instance is the one
that made it), the elapsed time, and the answer: ``recorded``, ``dropped``
(with the reason: duplicate, bad_elapsed, retired, closed, late,
not_started, no_edge, no_recorder, stale_instance) or ``raised`` (with the
call that raised). A segment handle that stores a value emits
``recorded(event, elapsed_ms)``. Answers are outputs rather than globals, so
that they do not multiply the state space.

Bounds: one external id reused once (two instances), one edge, two segments,
one of the four events, and elapsed values ``12.5``, NaN, ``-1.0`` and
infinity. Segment keys are tuples that contain the id, which symmetry
reduction cannot move, so the ids are not symmetric (with one id there is
nothing to reduce anyway). `RequestLifecycleConfig` selects the behaviour:
the defaults are the reference the review asks for; each seed 004 finding
replaces one call.

Mutants that behave like the reference (declared in `EQUIVALENT_MUTANTS`,
each with its reason): the machines' own (`MACHINE_EQUIVALENTS`: an idle
edge only sees newer starts; a dead handle's flags are never read); the
request staying in place on ``cleanup`` or ``abort``, whose instance is
retired in the same step; the runtime's forward-only rule, which the edge's
refusal of an older start repeats; and requires whose removal only adds
steps that change nothing (a start the recorder refuses, an engine event the
request refuses).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Hashable, Sequence
from dataclasses import dataclass

from statecore import TransitionError, out
from statecore.errors import ActionError
from statecore.registry import Target
from statecore.system import Action, Component, Global, Handle, Keys, System, Tx

from .request import TERMINAL, request_machine
from .stream_edge import (
    MACHINE_EQUIVALENTS,
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

RECORDED, DROPPED, RAISED = "recorded", "dropped", "raised"


class Raised(Exception):
    """Production code raised: `call` is the call that raised (``record``, ...)."""

    def __init__(self, call: str) -> None:
        super().__init__(call)
        self.call = call


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
    # Omni.abort removes the state through the helper canonical cleanup uses
    # (review point 1); at the PR head, as in 0.30.0, it pops request_states
    # directly: no release, no side-table clear, no gauge republish.
    abort_releases: bool = True
    # record() drops a bad elapsed_ms (review point 3); the PR head's segment
    # raises ValueError on a live handle.
    raise_on_invalid: bool = False
    # The release hook is called through release_request_telemetry (getattr,
    # errors logged) (bot P1); the PR head calls req_state.release_stream_edge_metrics()
    # itself, first in the finally.
    guarded_release: bool = True
    # The transport handler records by key (review point 2); with the PR's API
    # it calls start_segment(key) per message, which raises for an older segment.
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

    def output(tx: Tx, ext: Hashable) -> None:
        request = tx.handle("request", ext)
        tx.require(request is not None and tx.fire(request, "output").accepted)
        # _handle_output_message: the message's metrics are consumed once, its id
        # noted in the state's consumed_metric_message_ids.
        tx.set("consumed", tx.get("consumed") | {ext})
        # _process_single_result publishes the gauges while the request is registered.
        tx.set("gauge", _registered(tx))

    def cleanup(tx: Tx, ext: Hashable) -> None:
        request = tx.handle("request", ext)
        tx.require(request is not None and request not in tx.get("cleaned"))
        assert request is not None
        snap = tx.snapshot(request)
        tx.require(snap is not None and snap.state in TERMINAL)
        tx.set("cleaned", tx.get("cleaned") | {request})
        _removal(tx, _drop_request_state, request, "cleanup")

    def abort_sync(tx: Tx, ext: Hashable) -> None:
        request = tx.handle("request", ext)
        tx.require(request is not None)
        assert request is not None
        remove = _drop_request_state if config.abort_releases else _pop
        tx.require(_removal(tx, remove, request, "abort"))

    def open_segment(tx: Tx, ext: Hashable, edge: str, segment: int) -> None:
        request = tx.handle("request", ext)
        tx.require(request is not None)
        assert request is not None
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
        arrival = _arrival(tx, request, edge, event)
        try:
            answer = _observe(tx, request, target, event, elapsed)
        except Raised as exc:
            answer = _raised_into(tx, request, exc)
        _answer(tx, request, segment, arrival, True, elapsed, answer)

    def deliver(
        tx: Tx, ext: Hashable, instance: int, edge: str, segment: int, event: str, elapsed: float
    ) -> None:
        observed = Handle("request", ext, instance)
        current = tx.handle("request", ext)  # request_states.get(id)
        # Envelopes come from registered instances; one whose id is no longer
        # registered is dropped by the lookup without a trace. Left out
        # (tx.require): it would only add self-loops to the state graph.
        tx.require(
            current is not None and _kind(tx, observed) is not None,
            "a message after removal (dropped by the lookup), or of no registered instance",
        )
        assert current is not None
        same = current == observed
        arrival = _arrival(tx, current, edge, event)
        try:
            if config.isolate_instances and not same:
                answer = (DROPPED, "stale_instance")
            else:
                answer = _by_key(tx, observed, current, edge, segment, event, elapsed)
        except Raised as exc:
            answer = _raised_into(tx, current, exc)
        _answer(tx, observed, segment, arrival, same, elapsed, answer)

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
        try:
            started = tx.fire(edge_handle, "start_segment", order=order).accepted
        except ActionError as exc:  # the PR's start_segment raises for an older segment
            if not isinstance(exc.__cause__, TransitionError):
                raise
            raise Raised("start_segment") from exc
        if not started:
            return None
        if order == "same":
            assert cur is not None
            return cur[1]
        if cur is not None:
            tx.fire(cur[1], "retire")
        handle = tx.spawn("segment", (request.key, edge, segment))
        _own(tx, handle, request)
        return handle

    def _route(tx: Tx, request: Handle, edge: str, segment: int) -> tuple[Handle | None, str]:
        """Where ``record(key, segment, ...)`` writes: the current segment, or why not."""
        edge_handle = _owned(tx, "edge", (request.key, edge), request)
        if edge_handle is None:
            return None, "no_edge"  # telemetry never opens an edge
        cur = _current(tx, request, edge)
        order = segment_order(segment, None if cur is None else cur[0])
        if tx.fire(edge_handle, "observe", order=order).accepted:
            assert cur is not None
            return cur[1], ""
        edge_snap = tx.snapshot(edge_handle)
        if edge_snap is not None and edge_snap.state == "closed":
            return None, "closed"
        return None, "late" if order == "older" else "not_started"

    def _by_key(
        tx: Tx,
        observed: Handle,
        current: Handle,
        edge: str,
        segment: int,
        event: str,
        elapsed: float,
    ) -> tuple[str, str]:
        """The transport handler: the observation of `observed` reaches `current`'s recorder."""
        if _recorder(tx, current) is None:
            return DROPPED, "no_recorder"  # getattr(state, "stream_edge_events", None)
        if config.late_start_raises:
            handle, why = _start_segment(tx, current, edge, segment), "closed"
        else:
            handle, why = _route(tx, current, edge, segment)
        if handle is None:
            return DROPPED, why
        return _observe(tx, observed, handle, event, elapsed)

    def _release_hook(tx: Tx, request: Handle) -> None:
        """``req_state.release_stream_edge_metrics()``: closes the recorder, or raises."""
        kind = _kind(tx, request)
        if kind != "client":
            # AttributeError on a duck-typed state; the hook's own error on a raising one.
            raise Raised("release_stream_edge_metrics")
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

    def _release_telemetry(tx: Tx, request: Handle) -> None:
        """``release_request_telemetry(state)``: the hook if the state has one; errors logged."""
        try:
            _release_hook(tx, request)
        except Raised:
            pass  # logged; the removal goes on

    def _drop_request_state(tx: Tx, request: Handle, path: str) -> bool:
        """``drop_request_state``: release, then pop and republish the gauges."""
        release = _release_telemetry if config.guarded_release else _release_hook
        release(tx, request)
        popped = _pop(tx, request, path)
        tx.set("gauge", _registered(tx))  # republished after the pop
        return popped

    def _pop(tx: Tx, request: Handle, path: str) -> bool:
        """``request_states.pop(id)`` on `path`; False if the request cannot take it."""
        if not tx.fire(request, path).accepted:
            return False
        tx.retire(request)
        # What the state object holds per request goes with it.
        tx.set("consumed", tx.get("consumed") - {request.key})
        tx.set("removed", tx.get("removed") | {(request, path)})
        return True

    def _removal(
        tx: Tx, remove: Callable[[Tx, Handle, str], bool], request: Handle, path: str
    ) -> bool:
        """Run a removal; an exception escaping it leaves what ran before it (and happened)."""
        try:
            return remove(tx, request, path)
        except Raised:
            return True

    def _registered(tx: Tx) -> int:
        """How many states request_states holds: what the running/waiting gauges publish."""
        return sum(1 for x in ids if tx.live(("request", x)))

    def _arrival(tx: Tx, request: Handle, edge: str, event: str) -> tuple[int, bool]:
        """What `request`'s recorder shows an arriving observation of `event` on `edge`.

        The current segment (-1 if none) and whether `event` is taken there.
        """
        cur = _current(tx, request, edge)
        if cur is None:
            return -1, False
        snap = tx.snapshot(cur[1])
        return cur[0], snap is not None and bool(getattr(snap, event))

    def _observe(
        tx: Tx,
        observed: Handle,
        target: Handle | tuple[str, Hashable],
        event: str,
        elapsed: float,
    ) -> tuple[str, str]:
        """``handle.record(event, elapsed)`` for an observation of `observed`: its answer."""
        snap = tx.snapshot(target)
        try:
            outcome = tx.fire(target, "record", event=event, elapsed_ms=elapsed)
        except ValueError as exc:  # the PR head validates by raising
            raise Raised("record") from exc
        if outcome.accepted:
            accepting = target if isinstance(target, Handle) else tx.handle(*target)
            assert accepting is not None
            owner = next(r for h, r in tx.get("owner") if h == accepting)
            if owner != observed:
                tx.set("misattributed", tx.get("misattributed") | {(observed, owner)})
            if not tx.live(owner):
                tx.set("late_accepts", tx.get("late_accepts") | {owner})
            return RECORDED, ""
        if snap is None:
            return DROPPED, "stale_instance"
        if snap.state != "live":
            return DROPPED, snap.state  # retired or closed
        return DROPPED, "duplicate" if getattr(snap, event) else "bad_elapsed"

    def _raised_into(tx: Tx, request: Handle, exc: Raised) -> tuple[str, str]:
        """A telemetry call raised into the stage serving `request`: the request fails."""
        tx.fire(request, "fail")
        return RAISED, exc.call

    def _answer(
        tx: Tx,
        observed: Handle,
        segment: int,
        arrival: tuple[int, bool],
        same: bool,
        elapsed: float,
        answer: tuple[str, str],
    ) -> None:
        current, taken = arrival
        result, reason = answer
        tx.emit(
            out(
                "observation",
                request=observed,
                segment=segment,
                current=current,
                taken=taken,
                same=same,
                elapsed_ms=elapsed,
                result=result,
                reason=reason,
            )
        )

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
            Global("gauge", 0, doc="the request count the gauges last published"),
            Global("consumed", frozenset(), doc="ids whose state holds consumed metric ids"),
            Global("late_accepts", frozenset(), doc="removed requests that still recorded"),
            Global("misattributed", frozenset(), doc="(observed, recording instance)"),
        ],
        actions=[
            Action("register", "client", register, {"ext": ext, "kind": config.kinds}),
            Action("output", "engine", output, EXT, internal=True),
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
        equivalent_mutants=EQUIVALENT_MUTANTS,
    )


EQUIVALENT_MUTANTS: dict[str, str] = {
    **MACHINE_EQUIVALENTS,
    "stay client_request.succeeded|failed--cleanup-->removed": "the pop retires the "
    "request instance in the same step: the state it is left in is never seen",
    "stay client_request.registered|streaming|failed--abort-->removed": "the pop retires "
    "the request instance in the same step: the state it is left in is never seen",
    "skip-require build.<locals>.open_segment: tx.require(cur is None or segment >= "
    'cur[0], "the runtime only moves forward")': "the edge refuses an older start and the "
    "next line requires a handle: the rule is stated twice",
    "skip-require build.<locals>.open_segment: tx.require(_start_segment(tx, request, "
    "edge, segment) is not None)": "a start the recorder refuses changes nothing, so "
    "the step it would allow is a self-loop",
    "skip-require build.<locals>.lifecycle.<locals>.run: tx.require(request is not None "
    "and tx.fire(request, event).accepted)": "an engine event the request refuses changes "
    "nothing: the steps it would allow only stutter",
}
"""Mutants of this model that behave like it, each with the reason (see the module docstring)."""

REQUEST_LIFECYCLE = build()


def variant_sync_abort() -> System:
    """Seed 004 point 1: sync Omni.abort pops request_states directly, as in 0.30.0.

    No release and no gauge republish: the helper is replaced by the bare pop.
    """
    return build(RequestLifecycleConfig(name="request_lifecycle_sync_abort", abort_releases=False))


def variant_telemetry_raises() -> System:
    """Seed 004 point 3: record() raises ValueError on a NaN or negative elapsed time.

    The segment machine is replaced by the PR head's; the raise reaches the
    producer stage, which fails the request.
    """
    return build(
        RequestLifecycleConfig(name="request_lifecycle_telemetry_raises", raise_on_invalid=True)
    )


def variant_unguarded_release() -> System:
    """Seed 004 bot P1: the removal calls a release hook a duck-typed state lacks.

    ``release_request_telemetry`` is replaced by the bare hook call; its
    AttributeError (or the hook's own error) leaves the removal before the pop.
    """
    return build(
        RequestLifecycleConfig(name="request_lifecycle_unguarded_release", guarded_release=False)
    )


def variant_late_start_raises() -> System:
    """Seed 004 point 2: a late observation through start_segment(key) raises.

    The transport handler calls the PR's ``start_segment(key)`` per message
    instead of recording by key; for an older segment it raises into the request.
    """
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
        "violates:closed_owner_rejects,removal_releases_recorder,gauges_republished",
        doc="seed 004 point 1: Omni.abort pops the state; a retained recorder still accepts "
        "and the gauges still count the request",
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
