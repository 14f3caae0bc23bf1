"""The machines of the request-state system: one generation of a request's state, and the request.

`request_state_machine` is one generation of one request's namespaced
producer state (see `statecore.models.request_state`); the reference
runtime `statecore.models.implementations.request_state` runs it in production, and
`statecore.models.chunk_transfer` composes it as its producer state.
`producer_request_machine` is the request as the scheduler drives it.
"""

from __future__ import annotations

from collections.abc import Hashable, Mapping
from functools import lru_cache
from typing import Any

from statecore import Event, Field, Machine, Output, Snapshot, State, Transition, Var, out

NAMESPACES: tuple[str, ...] = ("codec", "frames")
"""The two namespaces of the bounded model (a producer's codec and frame buffers)."""

BOOL = (False, True)

LIVE = ("open", "failed")
"""The states in which a generation's namespaces can be read and created."""


def namespace_var(index: int) -> str:
    """The machine variable that says whether the `index`-th namespace exists."""
    return f"ns{index}"


def holds_namespace(snapshot: Snapshot) -> bool:
    """Whether a `request_state` snapshot holds any namespace."""
    return any(snapshot.values().values())


def request_state_machine(
    namespaces: tuple[Hashable, ...] = NAMESPACES,
    *,
    segment_keeps_state: bool = True,
    failure_keeps_state: bool = True,
    name: str = "request_state",
) -> Machine:
    """One generation of one request's namespaced producer state.

    `namespaces` are the declared namespaces (each gets a boolean variable
    ``ns<i>``). ``segment_keeps_state=False`` and ``failure_keeps_state=False``
    are the bugs where segment completion or a failed send drops request-wide
    state. Machines are cached per argument values, so a runtime building one
    per accessor pays the definition-time validation once per process.
    """
    return _request_state_machine(tuple(namespaces), segment_keeps_state, failure_keeps_state, name)


@lru_cache(maxsize=64)
def _request_state_machine(
    namespaces: tuple[Hashable, ...],
    segment_keeps_state: bool,
    failure_keeps_state: bool,
    name: str,
) -> Machine:
    if not namespaces:
        raise ValueError("request_state_machine needs at least one namespace")
    if len(set(namespaces)) != len(namespaces):
        raise ValueError(f"request_state_machine: duplicate namespace in {namespaces!r}")
    var_of: dict[Hashable, str] = {ns: namespace_var(i) for i, ns in enumerate(namespaces)}
    names = tuple(var_of.values())

    def create_namespace(s: Snapshot, p: Mapping[str, Any]) -> dict[str, bool]:
        return {var_of[p["namespace"]]: True}

    def report(s: Snapshot, p: Mapping[str, Any]) -> tuple[Output, ...]:
        namespace = p["namespace"]
        return (out("state", namespace=namespace, created=not getattr(s, var_of[namespace])),)

    def drop_namespaces(s: Snapshot, p: Mapping[str, Any]) -> dict[str, bool]:
        return dict.fromkeys(names, False)

    # The reference keeps request-wide state at a segment end and after a
    # failed send; each bug drops every namespace there instead.
    on_segment = None if segment_keeps_state else drop_namespaces
    on_failure = None if failure_keeps_state else drop_namespaces
    return Machine(
        name,
        doc="One generation of one request's namespaced producer state (see the module doc).",
        states=[
            State("open", initial=True, doc="current generation: namespaces readable"),
            State("failed", doc="a send failed; state kept until failure finalization"),
            State("released", final=True, doc="canonical cleanup ran; every view refused"),
        ],
        variables=[
            Var(var_of[ns], BOOL, False, doc=f"namespace {ns!r} exists") for ns in namespaces
        ],
        events=[
            Event(
                "get_or_create",
                [Field("namespace", namespaces)],
                policy="reject",
                doc="the producer asks for a namespace (rejected: fenced, fail open)",
            ),
            Event("complete_segment", policy="ignore", doc="segment-end post-processing"),
            Event("send_failed", policy="ignore", doc="record_send_failure for this request"),
            Event("release", policy="ignore", doc="canonical cleanup (_clear_sender_state_locked)"),
        ],
        transitions=[
            Transition(LIVE, "get_or_create", None, effect=create_namespace, emit=report),
            Transition(LIVE, "complete_segment", None, effect=on_segment),
            Transition(LIVE, "send_failed", "failed", effect=on_failure),
            Transition(LIVE, "release", "released", effect=drop_namespaces),
        ],
    )


REQUEST_STATE = request_state_machine()


def no_segment_end_yet(s: Snapshot, p: Mapping[str, Any]) -> bool:
    """The request has not saved its (one) segment end."""
    return bool(s.segments < 1)


def count_segment_end(s: Snapshot, p: Mapping[str, Any]) -> dict[str, int]:
    return {"segments": s.segments + 1}


def producer_request_machine() -> Machine:
    """The scheduler-side request: a segment end, a terminal, or an abort."""
    return Machine(
        "producer_request",
        doc="A producer request as the scheduler drives it (save_async calls, abort).",
        states=[
            State("running", initial=True),
            State("terminal_saved", doc="save_async accepted its terminal"),
            State("aborted", final=True, doc="finish_requests ran"),
        ],
        variables=[Var("segments", range(2), 0, doc="segment ends saved")],
        events=[Event("segment_end"), Event("terminal"), Event("abort", policy="ignore")],
        transitions=[
            Transition(
                "running",
                "segment_end",
                None,
                guard=no_segment_end_yet,
                effect=count_segment_end,
            ),
            Transition("running", "terminal", "terminal_saved"),
            Transition(("running", "terminal_saved"), "abort", "aborted"),
        ],
    )
