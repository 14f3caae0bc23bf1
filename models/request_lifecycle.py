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
suggests (``_drop_request_state``; `statecore.models.implementations.stream_edge`
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
nothing to reduce anyway). `RequestLifecycleConfig` holds the bounds and
`Behaviour` what the production code does where a seed 004 finding names it:
the defaults are the reference the review asks for; each variant replaces one
call (or one machine).

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

from collections.abc import Callable, Hashable, Sequence
from dataclasses import dataclass
from functools import partial

from statecore.spec.request_lifecycle import (
    CLOSED_OWNER_REJECTS,
    GAUGES,
    LATE_FAIL_OPEN,
    NO_LEAK,
    RECORD_FAIL_OPEN,
    RELEASES_RECORDER,
    REQUESTS_DRAIN,
    REUSE_ISOLATION,
    properties,
)

from statecore import Machine
from statecore.registry import Target
from statecore.system import Action, Component, Handle, Keys, System, Tx

from .request import TERMINAL, request_machine
from .request_lifecycle_recorder import (
    WriteTarget,
    answer,
    arrival,
    current,
    kind_of,
    observe,
    own,
    raised_into,
    recorder_of,
    route,
    start_per_message,
    start_segment,
)
from .request_lifecycle_records import (
    ABORT,
    CLEANUP,
    DROPPED,
    ELAPSED,
    EVENTS,
    KINDS,
    RAISED,
    RECORDED,
    Answer,
    Raised,
    RequestLifecycleConfig,
    Shared,
    StateObject,
)
from .request_lifecycle_removal import (
    RemovalCall,
    drop_request_state,
    drop_request_state_unguarded,
    pop,
    registered_count,
    remove,
)
from .stream_edge import MACHINE_EQUIVALENTS, edge_machine, recorder_machine, segment_machine

__all__ = [
    "DROPPED",
    "ELAPSED",
    "EQUIVALENT_MUTANTS",
    "EVENTS",
    "KINDS",
    "RAISED",
    "RECORDED",
    "REQUEST_LIFECYCLE",
    "TARGETS",
    "Behaviour",
    "Raised",
    "RequestLifecycleConfig",
    "Shared",
    "build",
]

Locate = Callable[[Tx[Shared], Handle, str, int], tuple[Handle | None, str]]
"""Where the transport handler writes an observation for (request, edge, segment), or why not."""
HandleTarget = Callable[[Handle], WriteTarget]
"""What a retained segment handle writes to."""
Admission = Callable[[Handle, Handle], bool]
"""Whether an envelope of the first request instance reaches the second, registered one."""


# -- what a retained handle and an envelope reach --------------------------------------


def own_instance(handle: Handle) -> WriteTarget:
    """A retained handle writes to its own segment instance (author's revision 3)."""
    return handle


def by_external_id(handle: Handle) -> WriteTarget:
    """A retained handle resolves by external id: to whichever instance holds its key."""
    return "segment", handle.key


def same_instance(observed: Handle, registered: Handle) -> bool:
    """An envelope carries the request instance: only that instance takes it."""
    return observed == registered


def any_instance(observed: Handle, registered: Handle) -> bool:
    """An envelope resolves by external id: the registered instance takes it."""
    return True


# -- the actions ---------------------------------------------------------------------


def register(tx: Tx[Shared], ext: Hashable, kind: str) -> None:
    """A request state is registered under `ext`; a reused id gets a new instance."""
    tx.require(tx.snapshot(("request", ext)) is None, "the previous instance is registered")
    request = tx.spawn("request", ext)
    tx.put(state_objects=tx.g.state_objects | {StateObject(request, kind)})
    if kind == "client":
        own(tx, tx.spawn("recorder", ext), request)


def output(tx: Tx[Shared], ext: Hashable) -> None:
    """An output message for the request arrives."""
    request = tx.handle("request", ext)
    tx.require(request is not None and tx.fire(request, "output").accepted)
    # _handle_output_message: the message's metrics are consumed once, its id
    # noted in the state's consumed_metric_message_ids.
    tx.put(consumed=tx.g.consumed | {ext})
    # _process_single_result publishes the gauges while the request is registered.
    tx.put(gauge=registered_count(tx))


def engine_event(tx: Tx[Shared], ext: Hashable, event: str) -> None:
    """The engine fires `event` at the request registered under `ext`."""
    request = tx.handle("request", ext)
    tx.require(request is not None and tx.fire(request, event).accepted)


def finish(tx: Tx[Shared], ext: Hashable) -> None:
    """The final stage's output is finished (``e2e_done``)."""
    engine_event(tx, ext, "finish")


def stage_error(tx: Tx[Shared], ext: Hashable) -> None:
    """A stage error fails the request (``_record_request_failure_once``)."""
    engine_event(tx, ext, "fail")


def cleanup(tx: Tx[Shared], ext: Hashable, *, removal: RemovalCall = drop_request_state) -> None:
    """``_log_summary_and_cleanup`` once the request is over: its ``finally`` calls `removal`."""
    request = tx.handle("request", ext)
    tx.require(request is not None and request not in tx.g.cleaned)
    assert request is not None
    snap = tx.snapshot(request)
    tx.require(snap is not None and snap.state in TERMINAL)
    tx.put(cleaned=tx.g.cleaned | {request})
    remove(tx, removal, request, CLEANUP)


def abort_sync(tx: Tx[Shared], ext: Hashable, *, removal: RemovalCall = drop_request_state) -> None:
    """``Omni.abort`` (from ``_run_generation``): the second removal path calls `removal`."""
    request = tx.handle("request", ext)
    tx.require(request is not None)
    assert request is not None
    tx.require(remove(tx, removal, request, ABORT))


def open_segment(tx: Tx[Shared], ext: Hashable, edge: str, segment: int) -> None:
    """The runtime starts or advances `edge`'s segment before dispatch, only forward."""
    request = tx.handle("request", ext)
    tx.require(request is not None)
    assert request is not None
    cur = current(tx, request, edge)
    tx.require(cur is None or segment >= cur.segment, "the runtime only moves forward")
    tx.require(start_segment(tx, request, edge, segment) is not None)


def record(
    tx: Tx[Shared],
    ext: Hashable,
    instance: int,
    edge: str,
    segment: int,
    event: str,
    elapsed: float,
    *,
    write_to: HandleTarget = own_instance,
) -> None:
    """A producer records through a segment handle it retained (``SegmentHandle.record``)."""
    # Producers may keep every segment handle the recorder handed out.
    key = (ext, edge, segment)
    retained = [
        o
        for o in tx.g.owner
        if o.part.component == "segment" and o.part.key == key and o.request.generation == instance
    ]
    tx.require(retained, "no such handle was handed out")
    held = retained[0]
    arrived = arrival(tx, held.request, edge, event)
    try:
        answered = observe(tx, held.request, write_to(held.part), event, elapsed)
    except Raised as exc:
        answered = raised_into(tx, held.request, exc)
    answer(tx, held.request, segment, arrived, True, elapsed, answered)


def deliver(
    tx: Tx[Shared],
    ext: Hashable,
    instance: int,
    edge: str,
    segment: int,
    event: str,
    elapsed: float,
    *,
    admits: Admission = same_instance,
    locate: Locate = route,
) -> None:
    """An observation arrives by key through the transport, from request `instance`."""
    observed = Handle("request", ext, instance)
    registered = tx.handle("request", ext)  # request_states.get(id)
    # Envelopes come from registered instances; one whose id is no longer
    # registered is dropped by the lookup without a trace. Left out
    # (tx.require): it would only add self-loops to the state graph.
    tx.require(
        registered is not None and kind_of(tx, observed) is not None,
        "a message after removal (dropped by the lookup), or of no registered instance",
    )
    assert registered is not None
    arrived = arrival(tx, registered, edge, event)
    try:
        if admits(observed, registered):
            answered = by_key(tx, observed, registered, locate, edge, segment, event, elapsed)
        else:
            answered = Answer(DROPPED, "stale_instance")
    except Raised as exc:
        answered = raised_into(tx, registered, exc)
    answer(tx, observed, segment, arrived, registered == observed, elapsed, answered)


def by_key(
    tx: Tx[Shared],
    observed: Handle,
    registered: Handle,
    locate: Locate,
    edge: str,
    segment: int,
    event: str,
    elapsed: float,
) -> Answer:
    """The transport handler: the observation of `observed` reaches `registered`'s recorder."""
    if recorder_of(tx, registered) is None:
        return Answer(DROPPED, "no_recorder")  # getattr(state, "stream_edge_events", None)
    handle, why = locate(tx, registered, edge, segment)
    if handle is None:
        return Answer(DROPPED, why)
    return observe(tx, observed, handle, event, elapsed)


# -- the system ------------------------------------------------------------------------


@dataclass(frozen=True)
class Behaviour:
    """What the production code does at each point a seed 004 finding names.

    The defaults are the review's fix (the reference); each variant replaces one.
    """

    # What _log_summary_and_cleanup's finally and Omni.abort call to remove the state.
    cleanup_removal: RemovalCall = drop_request_state
    abort_removal: RemovalCall = drop_request_state
    # Where the transport handler writes an observation arriving by key.
    locate: Locate = route
    # What a retained segment handle writes to, and which envelopes a
    # registered instance takes.
    write_to: HandleTarget = own_instance
    admits: Admission = same_instance
    # The recorder's edges and segments.
    edge: Callable[[], Machine] = edge_machine
    segment: Callable[[tuple[str, ...]], Machine] = segment_machine


REFERENCE = Behaviour()
BOUNDS = RequestLifecycleConfig()


def build(config: RequestLifecycleConfig = BOUNDS, behaviour: Behaviour = REFERENCE) -> System:
    """The request-lifecycle system for `config` and `behaviour`, with the spec's properties."""
    ext = Keys("ext", config.ids, symmetric=False)
    ids = ext.values
    segments = range(config.segments)
    EXT: dict[str, Keys | Sequence[Hashable]] = {"ext": ext}
    observation: dict[str, Keys | Sequence[Hashable]] = {
        "ext": ext,
        "instance": range(1, config.generations + 1),
        "edge": config.edges,
        "segment": segments,
        "event": config.events,
        "elapsed": config.elapsed,
    }

    def component(name: str, machine: Machine, keys: Keys | Sequence[Hashable]) -> Component:
        """A component with `config`'s instances per key (a reused id is a new generation)."""
        return Component(name, machine, keys, max_generations=config.generations)

    return System(
        config.name,
        doc=__doc__ or "",
        components=[
            component("request", request_machine(), ext),
            component("recorder", recorder_machine(), ext),
            component("edge", behaviour.edge(), [(x, e) for x in ids for e in config.edges]),
            component(
                "segment",
                behaviour.segment(config.events),
                [(x, e, s) for x in ids for e in config.edges for s in segments],
            ),
        ],
        globals=Shared,
        actions=[
            Action("register", "client", register, {"ext": ext, "kind": config.kinds}),
            Action("output", "engine", output, EXT, internal=True),
            Action("finish", "engine", finish, EXT, internal=True),
            Action("stage_error", "engine", stage_error, EXT, internal=True),
            Action(
                "cleanup",
                "entrypoint",
                partial(cleanup, removal=behaviour.cleanup_removal),
                EXT,
                internal=True,
            ),
            Action(
                "abort_sync", "client", partial(abort_sync, removal=behaviour.abort_removal), EXT
            ),
            Action(
                "open_segment",
                "runtime",
                open_segment,
                {"ext": ext, "edge": config.edges, "segment": segments},
            ),
            Action("record", "producer", partial(record, write_to=behaviour.write_to), observation),
            Action(
                "deliver",
                "orchestrator",
                partial(deliver, admits=behaviour.admits, locate=behaviour.locate),
                observation,
            ),
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
    "skip-require open_segment: tx.require(cur is None or segment >= cur.segment, "
    '"the runtime only moves forward")': "the edge refuses an older start and the "
    "next line requires a handle: the rule is stated twice",
    "skip-require open_segment: tx.require(start_segment(tx, request, edge, segment) "
    "is not None)": "a start the recorder refuses changes nothing, so the step it would "
    "allow is a self-loop",
    "skip-require engine_event: tx.require(request is not None and tx.fire(request, "
    "event).accepted)": "an engine event the request refuses changes nothing: the steps "
    "it would allow only stutter",
}
"""Mutants of this model that behave like it, each with the reason (see the module docstring)."""

REQUEST_LIFECYCLE = build()


def variant_sync_abort() -> System:
    """Seed 004 point 1: sync Omni.abort pops request_states directly, as in 0.30.0.

    No release and no gauge republish: the helper is replaced by the bare pop.
    """
    return build(
        RequestLifecycleConfig(name="request_lifecycle_sync_abort"), Behaviour(abort_removal=pop)
    )


def variant_telemetry_raises() -> System:
    """Seed 004 point 3: record() raises ValueError on a NaN or negative elapsed time.

    The segment machine is replaced by the PR head's; the raise reaches the
    producer stage, which fails the request.
    """
    return build(
        RequestLifecycleConfig(name="request_lifecycle_telemetry_raises"),
        Behaviour(segment=partial(segment_machine, raise_on_invalid=True)),
    )


def variant_unguarded_release() -> System:
    """Seed 004 bot P1: the removal calls a release hook a duck-typed state lacks.

    ``release_request_telemetry`` is replaced by the bare hook call on both
    removal paths; its AttributeError (or the hook's own error) leaves the
    removal before the pop.
    """
    return build(
        RequestLifecycleConfig(name="request_lifecycle_unguarded_release"),
        Behaviour(
            cleanup_removal=drop_request_state_unguarded,
            abort_removal=drop_request_state_unguarded,
        ),
    )


def variant_late_start_raises() -> System:
    """Seed 004 point 2: a late observation through start_segment(key) raises.

    The transport handler calls the PR's ``start_segment(key)`` per message
    instead of recording by key, and the PR's edge raises for an older segment.
    """
    return build(
        RequestLifecycleConfig(name="request_lifecycle_late_start_raises"),
        Behaviour(locate=start_per_message, edge=partial(edge_machine, late_raises=True)),
    )


def variant_reuse_joins() -> System:
    """Seed 004 revision 3: handles and envelopes resolve by external id only."""
    return build(
        RequestLifecycleConfig(name="request_lifecycle_reuse_joins"),
        Behaviour(write_to=by_external_id, admits=any_instance),
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
        variant_sync_abort,
        violates=(CLOSED_OWNER_REJECTS, RELEASES_RECORDER, GAUGES),
        doc="seed 004 point 1: Omni.abort pops the state; a retained recorder still accepts "
        "and the gauges still count the request",
        family="request_lifecycle",
    ),
    Target(
        "request_lifecycle_telemetry_raises",
        variant_telemetry_raises,
        violates=(RECORD_FAIL_OPEN,),
        doc="seed 004 point 3: record() raises on NaN or negative elapsed; the request fails",
        family="request_lifecycle",
    ),
    Target(
        "request_lifecycle_unguarded_release",
        variant_unguarded_release,
        violates=(NO_LEAK, REQUESTS_DRAIN),
        doc="seed 004 bot P1: AttributeError on a duck-typed state skips pop and gauges",
        family="request_lifecycle",
    ),
    Target(
        "request_lifecycle_late_start_raises",
        variant_late_start_raises,
        violates=(LATE_FAIL_OPEN,),
        doc="seed 004 point 2: a late older-segment observation raises via start_segment",
        family="request_lifecycle",
    ),
    Target(
        "request_lifecycle_reuse_joins",
        variant_reuse_joins,
        violates=(REUSE_ISOLATION,),
        doc="seed 004 revision 3: an old handle or envelope attaches to the reused id",
        family="request_lifecycle",
    ),
)
