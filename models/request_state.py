"""Request-scoped, namespaced producer state fenced by the sender generation.

Mirrors the request-state proposal of seed 000 (vllm-omni RFC #6453, PR
"[Core] Add request-scoped producer state and fail processor exceptions") on
top of vLLM-Omni 0.30.0,
``vllm_omni/distributed/omni_connectors/transfer_adapter/chunk_transfer_adapter.py``:

* ``request_payload`` - the processor-owned, untyped per-external-id dict
  that the PR's accessor is backed by; it is kept across segments (the
  segment-end post-processing of ``_send_single_request_for_generation``
  pops only segment-scoped state) and popped by ``_clear_sender_state_locked``;
* ``_SenderGeneration`` and its identity fence in ``_send_single_request``
  (``self._sender_tokens.get(ext) is sender_token``; ``cancelled`` does not
  veto a terminal task), ``cleanup_sender`` (defers while a terminal is
  pending), ``_release_terminal_fence`` - all reused from
  `statecore.models.sender_generation`;
* ``_send_single_request_for_generation`` - the processor call
  (``custom_process_next_stage_input_func``), the put, the post-put
  ``cleanup()`` on a successful terminal, ``record_send_failure`` on a failed
  put, and the segment-end post-processing.

``RequestStateAccessor`` (``request_state.py``, ``get_or_create``, the
``is_active`` fence, ``adapter.request_state`` and its execution-local
``_processor_state_context``) is the PR's proposal: it is **not** in 0.30.0.
The reference behaviour here is the review's fix: fence on generation
identity only, so a cancelled-but-current terminal flush can still read its
state, while a retired generation - and every view retained from it - can
neither create, read nor change its successor's state.

The `request_state` machine is one generation of one request's state; the
reference runtime (`statecore.models.request_state_impl`) runs the same
machine in production:

==============  ==============================================================
``open``        the generation is current; ``get_or_create`` creates or reads
``failed``      a send failed: the state is kept until failure finalization
``released``    canonical cleanup dropped every namespace (final); views of
                this generation are refused for good
==============  ==============================================================

Its variables ``ns0``, ``ns1``, ... say which declared namespace exists. It has
no notion of ``cancelled``: cancellation is the sender's business, and the
accessor must stay available for the terminal flush that cancellation still
lets run. Generation identity is a statecore `Handle`: a view holds the handle
of its generation's instance, and a handle never reaches a later generation.

The system `request_state_system` composes it with the sender generation:

* scheduler - ``new_request`` (a request takes the external id; reuse gives a
  new generation), ``save_segment_end`` / ``save_terminal`` (``save_async``:
  the first accepted task creates the sender token and the request's state),
  ``abort`` (``finish_requests`` -> ``cleanup_sender``), ``finalize_failure``
  (internal: the failure path's ``finish_requests`` -> ``cleanup_sender``);
* save thread (internal) - ``begin`` (the fence of ``_send_single_request``;
  installs the accessor for the producer), ``process`` (the producer calls
  ``get_or_create`` through it and retains the view), ``put`` (the connector
  put succeeds or fails; then segment completion, the canonical cleanup of a
  successful terminal, or the failure record);
* producer callback - ``retained_get_or_create`` (a view captured inside the
  producer is used later: a factory overlapping cancellation, a callback);
* test - ``late_check`` (seed 000 P2: after cleanup the test calls
  ``get_or_create`` through the accessor and expects a refusal). Which
  accessor it calls is `RequestStateConfig.late_check`: the view it captured
  inside the producer (the review's fix), or ``adapter.request_state`` (the
  PR's test), the execution-local slot the save thread fills for the task in
  flight, which the producer's ``finally`` has emptied by then: the call
  raises ``RequestStateUnavailableError`` before any view is exercised (the
  model records ``unavailable``), so the test's ``pytest.raises`` passes
  whatever the fence does.

Simplifications: one external id, two request generations, two namespaces;
each request saves at most one segment end and one terminal (plain chunks
add nothing the accessor can tell apart from a segment end); the producer
always asks for exactly one namespace per task; a processor raising on its
own is `statecore.models.chunk_transfer`'s business (seed 000 P1 there), so
here the only producer exception is an accessor refusal; whether the
consumer is released after a failed put is chunk_transfer's business too,
so "failed visibly" means the connector put itself reported the failure;
connector keys, ``put_req_chunk`` and the preemption and segment watermarks
are left out; a new request reuses the id only once the previous sender
generation has been reclaimed (reuse while it drains is chunk_transfer's
``isolate_reuse``); the PR's execution-local accessor slot holds the view of
the task in flight and nothing otherwise, so it is not a variable of its own:
it is read off ``in_flight``.

`RequestStateConfig` selects the behaviour: the defaults are the reference;
each variant flips the switches of one review finding.

Mutants no property can tell from the reference (``statecore check
--adequacy``), declared in `EQUIVALENT_MUTANTS` with their reasons: guards the
system already implies (``begin`` waits for the save thread to be idle; a
generation is ``retiring`` only with a task in flight); what a generation or a
state holds once it is retired in the same step (the ``in_flight`` flag of a
reclaimed sender, the namespaces of a released state, the ``release`` fire
itself); a segment end begun on a cancelled generation, which reaches exactly
the state of the same task begun just before the cancellation (the veto itself
is `statecore.models.chunk_transfer`'s business); ``complete_segment``, which
keeps request-wide state; idempotent repeats (``finish_requests`` on an
aborted request, finalizing a failure again, the test's late check run again
or while a later generation is current); a new request replacing one that has
no sender generation yet; a stale failure record nothing reads; and the ghost
``made`` and the ``access`` outputs, which observe and change nothing.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable, Hashable, Mapping
from dataclasses import dataclass
from functools import lru_cache
from typing import Any, Literal

from statecore import Event, Field, Machine, Outcome, Snapshot, State, Transition, Var, out
from statecore.registry import Target
from statecore.system import Action, Component, Global, Handle, Keys, System, Tx

from .sender_generation import cleanup_sender, fire_sender, sender_generation_machine

NAMESPACES: tuple[str, ...] = ("codec", "frames")
"""The two namespaces of the bounded model (a producer's codec and frame buffers)."""

BOOL = (False, True)

Fence = Literal["identity", "identity_not_cancelled", "external_id", "unfenced"]
LateCheck = Literal["retained", "context"]


def namespace_var(index: int) -> str:
    """The machine variable that says whether the `index`-th namespace exists."""
    return f"ns{index}"


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

    def access(s: Snapshot, p: Mapping[str, Any]) -> dict[str, bool]:
        return {var_of[p["namespace"]]: True}

    def report(s: Snapshot, p: Mapping[str, Any]) -> tuple[Any, ...]:
        namespace = p["namespace"]
        return (out("state", namespace=namespace, created=not getattr(s, var_of[namespace])),)

    def clear(s: Snapshot, p: Mapping[str, Any]) -> dict[str, bool]:
        return dict.fromkeys(names, False)

    live = ("open", "failed")
    segment = (
        Transition(live, "complete_segment", None, effect_label="keep request-wide state")
        if segment_keeps_state
        else Transition(
            live, "complete_segment", None, effect=clear, effect_label="drop namespaces"
        )
    )
    failure = (
        Transition(live, "send_failed", "failed", effect_label="keep state until finalization")
        if failure_keeps_state
        else Transition(live, "send_failed", "failed", effect=clear, effect_label="drop namespaces")
    )
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
            Transition(
                live,
                "get_or_create",
                None,
                effect=access,
                effect_label="namespace exists",
                emit=report,
            ),
            segment,
            failure,
            Transition(live, "release", "released", effect=clear, effect_label="drop namespaces"),
        ],
    )


REQUEST_STATE = request_state_machine()


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
                guard=lambda s, p: s.segments < 1,
                guard_label="segments < 1",
                effect=lambda s, p: {"segments": s.segments + 1},
                effect_label="segments += 1",
            ),
            Transition("running", "terminal", "terminal_saved"),
            Transition(("running", "terminal_saved"), "abort", "aborted"),
        ],
    )


@dataclass(frozen=True)
class RequestStateConfig:
    """Behaviour switches; each names the review finding or code it comes from."""

    name: str = "request_state_system"
    ids: int = 1
    generations: int = 2
    # How an accessor decides it may touch state (the PR's is_active lambda):
    # "identity" - the review's fix, `_sender_tokens.get(ext) is sender_token`;
    # "identity_not_cancelled" - the PR as submitted (seed 000 P1): also
    #   `and not sender_token.cancelled`;
    # "external_id" - a view that resolves request_payload[ext] while any
    #   generation of ext is current (`ext in _sender_tokens`);
    # "unfenced" - only the execution-local `adapter.request_state` slot is
    #   checked; a retained accessor resolves `request_payload.setdefault(ext)`.
    fence: Fence = "identity"
    # A refused get_or_create raises RequestStateUnavailableError (the PR) or
    # fails open with a detached value (the RFC: never raise into a request).
    refusal_raises: bool = False
    # A producer exception on a boundary task: the PR's
    # `record_send_failure(...); return` skips the put; the review's fix
    # records the failure and still puts the boundary marker.
    exception_skips_put: bool = False
    # Seed 000 P2: the test's late check reads `adapter.request_state` (the
    # execution-local slot, always cleared by the producer's finally) instead
    # of the view it retained inside the producer.
    late_check: LateCheck = "retained"
    # Segment completion and a failed send keep request-wide state.
    segment_keeps_state: bool = True
    failure_keeps_state: bool = True


# A queued task: (sender handle, state handle, request handle, kind).
Task = tuple[Handle, Handle, Handle, str]
# A retained accessor view: (sender handle, state handle) of its generation.
View = tuple[Handle, Handle]

SEGMENT = "segment_end"
TERMINAL = "terminal"

CANCELLED = ("draining", "retiring")  # sender states with `cancelled` set

REFUSED = "refused"
CREATED = "created"
REUSED = "reused"
UNAVAILABLE = "unavailable"  # no accessor installed: raised before any view was exercised


_RETIRED = "retired in the same step: what it holds is never read again"
_OUTPUT_ONLY = "an output only: the action changes the same state without it"

EQUIVALENT_MUTANTS: dict[str, str] = {
    "drop-guard sender_generation.open|terminal_pending--begin-->(same)": "begin requires "
    "the save thread to be idle, so the generation is never in flight when a task begins",
    "drop-guard sender_generation.draining--begin-->(same)": "a segment end begun on a "
    "cancelled generation reaches exactly the state of the same task begun just before the "
    "cancellation",
    "drop-effect sender_generation.draining--end-->reclaimed": _RETIRED,
    "drop-guard sender_generation.retiring--end-->reclaimed": "a generation is retiring only "
    "with a task in flight, so the guard always holds",
    "drop-effect sender_generation.retiring--end-->reclaimed": _RETIRED,
    "drop-effect request_state.open|failed--release-->released": _RETIRED,
    'skip-fire release_state: tx.fire(state, "release")': _RETIRED,
    'skip-fire build.<locals>.put: tx.fire(state, "complete_segment")': "complete_segment "
    "keeps request-wide state: the transition changes nothing",
    "skip-require build.<locals>.new_request: tx.require(current is None or current.state "
    'in ("terminal_saved", "aborted"))': "a running request with no sender generation has "
    "saved nothing: replacing it reaches the state aborting it first does",
    'skip-set build.<locals>.new_request: tx.set("failures", tx.get("failures") - {old})': (
        "finalize_failure looks up the current request only: a stale record is never read"
    ),
    'skip-require build.<locals>.abort: tx.require(tx.fire(request, "abort").accepted)': (
        "finish_requests on an aborted request: its generation is cancelled or gone, so "
        "cleanup_sender changes nothing"
    ),
    'skip-set build.<locals>.finalize_failure: tx.set("failures", tx.get("failures") '
    "- {request})": "finalizing again changes nothing: abort is ignored and cleanup_sender "
    "finds nothing left",
    'negate-require build.<locals>.late_check: tx.require(tx.get("late_check") is None and '
    'tx.handle("sender", ext) is None)': "the late check goes through a retired view, which "
    "refuses it whenever and however often it runs",
    'skip-require build.<locals>.late_check: tx.require(tx.get("late_check") is None and '
    'tx.handle("sender", ext) is None)': "the late check goes through a retired view, which "
    "refuses it whenever and however often it runs",
    'skip-set build.<locals>.access: tx.set("made", tx.get("made") | {(reached, '
    "namespace_var(index))})": "a ghost write: made records what producers created for "
    "request_state_retained, and the system behaves the same without it",
    'skip-set release_state: tx.set("made", frozenset(m for m in tx.get("made") if '
    "m[0] != state))": "request_state_retained reads only the live state generation's "
    "entries: keeping a retired one's changes no verdict",
    'skip-emit build.<locals>.access: tx.emit(out("access", view=sender, '
    "namespace=namespace, retained=retained, result=result))": _OUTPUT_ONLY,
    'skip-emit _refuse: tx.emit(out("access", view=view[0], namespace=namespace, '
    "retained=retained, result=REFUSED))": _OUTPUT_ONLY,
}
"""Mutants of `request_state_system` that behave like it, by id, with the reason."""


def build(config: RequestStateConfig = RequestStateConfig()) -> System:
    """The request-state system for `config`, with the spec's properties."""
    properties = importlib.import_module("statecore.spec.request_state").properties
    ext_keys = Keys("ext", config.ids)
    state_machine = request_state_machine(
        segment_keeps_state=config.segment_keeps_state,
        failure_keeps_state=config.failure_keeps_state,
        name="request_state"
        + ("" if config.segment_keeps_state else "_segment_clears")
        + ("" if config.failure_keeps_state else "_failure_clears"),
    )

    # -- the accessor ----------------------------------------------------------

    def access(tx: Tx, view: View, namespace: str, *, retained: bool) -> str:
        """get_or_create(namespace) through `view`: CREATED, REUSED or REFUSED."""
        sender, state = view
        ext = state.key
        target: Handle | tuple[str, Hashable]
        if config.fence in ("identity", "identity_not_cancelled"):
            if config.fence == "identity_not_cancelled":
                token = tx.snapshot(sender)
                if token is None or token.state in CANCELLED:
                    return _refuse(tx, view, namespace, retained)
            target = state
        elif config.fence == "external_id":
            if tx.handle("sender", ext) is None:
                return _refuse(tx, view, namespace, retained)
            target = ("state", ext)
        else:  # unfenced: request_payload.setdefault(ext, {})
            if tx.handle("state", ext) is None:
                tx.spawn("state", ext)  # recreated after cleanup
            target = ("state", ext)
        outcome = tx.fire(target, "get_or_create", namespace=namespace)
        if not outcome.accepted:
            return _refuse(tx, view, namespace, retained)
        reached = tx.handle("state", ext)
        assert reached is not None
        current = tx.handle("sender", ext)
        if current is not None and current != sender:
            tx.set("crossed", True)  # the successor's state
        created = bool(outcome.outputs[0].get("created"))
        if created:
            index = NAMESPACES.index(namespace)
            tx.set("made", tx.get("made") | {(reached, namespace_var(index))})
        result = CREATED if created else REUSED
        tx.emit(out("access", view=sender, namespace=namespace, retained=retained, result=result))
        return result

    # -- scheduler ---------------------------------------------------------------

    def new_request(tx: Tx, ext: Hashable) -> None:
        current = tx.snapshot(("request", ext))
        tx.require(current is None or current.state in ("terminal_saved", "aborted"))
        tx.require(tx.handle("sender", ext) is None, "previous generation still draining")
        old = tx.handle("request", ext)
        tx.spawn("request", ext)
        if old is not None:
            tx.set("failures", tx.get("failures") - {old})

    def save(tx: Tx, ext: Hashable, kind: str) -> None:
        request = tx.handle("request", ext)
        tx.require(request is not None)
        assert request is not None
        tx.require(tx.fire(request, kind).accepted)
        sender = tx.handle("sender", ext)
        if sender is None:  # the first accepted task creates the token
            sender = tx.spawn("sender", ext)
            if tx.handle("state", ext) is None:
                tx.spawn("state", ext)
            else:  # request_payload[ext] left over: the new generation inherits it
                tx.set("crossed", True)
        state = tx.handle("state", ext)
        assert state is not None
        if kind == TERMINAL:
            _fire_sender(tx, sender, "save_terminal")
            tx.set("terminals", tx.get("terminals") | {request})
        tx.set("queue", (*tx.get("queue"), (sender, state, request, kind)))

    def save_segment_end(tx: Tx, ext: Hashable) -> None:
        save(tx, ext, SEGMENT)

    def save_terminal(tx: Tx, ext: Hashable) -> None:
        save(tx, ext, TERMINAL)

    def abort(tx: Tx, ext: Hashable) -> None:
        request = tx.handle("request", ext)
        tx.require(request is not None)
        assert request is not None
        tx.require(tx.fire(request, "abort").accepted)
        _cleanup_sender(tx, ext)

    def finalize_failure(tx: Tx, ext: Hashable) -> None:
        request = tx.handle("request", ext)
        tx.require(request is not None and request in tx.get("failures"))
        assert request is not None
        tx.set("failures", tx.get("failures") - {request})
        tx.fire(request, "abort")
        _cleanup_sender(tx, ext)

    # -- save thread ---------------------------------------------------------------

    def begin(tx: Tx) -> None:
        queue = tx.get("queue")
        tx.require(queue and tx.get("in_flight") is None)
        task: Task = queue[0]
        tx.set("queue", queue[1:])
        if _fire_sender(tx, task[0], "begin", terminal=task[3] == TERMINAL).accepted:
            tx.set("in_flight", (task, "begun"))
        # else: discarded as stale (identity lost, or cancelled and not terminal)

    def process(tx: Tx, namespace: str) -> None:
        flight = tx.get("in_flight")
        tx.require(flight is not None and flight[1] == "begun")
        task: Task = flight[0]
        sender, state, request, kind = task
        view: View = (sender, state)
        tx.set("views", tx.get("views") | {view})  # the producer keeps its view
        if access(tx, view, namespace, retained=False) != REFUSED:
            tx.set("in_flight", (task, "ready"))
            return
        token = tx.snapshot(sender)
        if token is not None and (kind == TERMINAL or token.state not in CANCELLED):
            tx.set("refused_in_producer", True)  # the send path still lets it put
        if not config.refusal_raises:
            tx.set("in_flight", (task, "ready"))  # fail open: a detached value
            return
        # RequestStateUnavailableError: the processor's except path.
        _record_failure(tx, request)
        if config.exception_skips_put:
            _end(tx, task)  # record_send_failure(...); return
        else:
            tx.set("in_flight", (task, "ready"))  # still put the boundary marker

    def put(tx: Tx, outcome: str) -> None:
        flight = tx.get("in_flight")
        tx.require(flight is not None and flight[1] == "ready")
        task: Task = flight[0]
        sender, state, request, kind = task
        terminal = kind == TERMINAL
        token = tx.snapshot(sender)
        if token is None or (token.state == "retiring" and not terminal):
            _end(tx, task)  # _sender_generation_is_active: no put
            return
        if terminal:
            tx.set("terminal_put", tx.get("terminal_put") | {request})
        if outcome == "fail":  # put returned False or raised: record_send_failure
            _record_failure(tx, request)
            tx.fire(state, "send_failed")
        elif terminal:  # the post-put cleanup(): cleanup_sender defers to the finally
            tx.set("delivered", True)
            _fire_sender(tx, sender, "cleanup")
        if not terminal:  # segment-end post-processing, after a success or a False put
            held = tx.snapshot(state)
            if held is not None and any(held[1:]):
                tx.set("segment_done", True)
            tx.fire(state, "complete_segment")
        _end(tx, task)

    # -- producer callback and test ------------------------------------------------

    def retained_get_or_create(tx: Tx, ext: Hashable, generation: int, namespace: str) -> None:
        view = _view(tx, ext, generation)
        tx.require(view is not None)
        assert view is not None
        access(tx, view, namespace, retained=True)

    def late_check(tx: Tx, ext: Hashable) -> None:
        tx.require(tx.get("late_check") is None and tx.handle("sender", ext) is None)
        views = [v for v in tx.get("views") if v[1].key == ext and not tx.live(v[0])]
        tx.require(views)
        view: View | None
        if config.late_check == "context":
            view = _installed(tx)  # adapter.request_state
        else:
            view = max(views, key=lambda v: v[0].generation)
        result = UNAVAILABLE if view is None else access(tx, view, NAMESPACES[0], retained=True)
        tx.set("late_check", result)

    ext_param = {"ext": ext_keys}
    return System(
        config.name,
        doc=__doc__ or "",
        equivalent_mutants=EQUIVALENT_MUTANTS,
        components=[
            Component(
                "request",
                producer_request_machine(),
                ext_keys,
                max_generations=config.generations,
            ),
            Component(
                "sender",
                sender_generation_machine(),
                ext_keys,
                max_generations=config.generations,
            ),
            Component("state", state_machine, ext_keys, max_generations=2 * config.generations),
        ],
        globals=[
            Global("queue", (), "_pending_save_reqs: FIFO of (sender, state, request, kind)"),
            Global("in_flight", None, "the task the save thread runs: (task, phase)"),
            Global("views", frozenset(), "accessor views retained by producers"),
            Global("made", frozenset(), "ghost: (state handle, ns var) created by a producer"),
            Global("terminals", frozenset(), "requests whose terminal was queued"),
            Global("terminal_put", frozenset(), "requests whose terminal reached connector.put"),
            Global("failures", frozenset(), "requests with a recorded, unfinalized send failure"),
            Global("crossed", False, "ghost: an access reached another generation's state"),
            Global("refused_in_producer", False, "ghost: a running producer was refused"),
            Global(
                "late_check",
                None,
                "the result of the test's late get_or_create (refused, created, reused or "
                "unavailable)",
            ),
            Global("segment_done", False, "ghost: a segment completed while state was held"),
            Global("delivered", False, "ghost: a terminal put succeeded"),
        ],
        actions=[
            Action("new_request", "scheduler", new_request, ext_param),
            Action("save_segment_end", "scheduler", save_segment_end, ext_param),
            Action("save_terminal", "scheduler", save_terminal, ext_param),
            Action("abort", "scheduler", abort, ext_param),
            Action("finalize_failure", "scheduler", finalize_failure, ext_param, internal=True),
            Action("begin", "save_thread", begin, internal=True),
            Action("process", "save_thread", process, {"namespace": NAMESPACES}, internal=True),
            Action("put", "save_thread", put, {"outcome": ("ok", "fail")}, internal=True),
            Action(
                "retained_get_or_create",
                "producer_callback",
                retained_get_or_create,
                {
                    "ext": ext_keys,
                    "generation": tuple(range(1, config.generations + 1)),
                    "namespace": NAMESPACES,
                },
            ),
            Action("late_check", "test", late_check, ext_param),
        ],
        properties=properties(),
    )


def _view(tx: Tx, ext: Hashable, generation: int) -> View | None:
    """The view a producer of `ext`'s `generation`-th sender generation retained."""
    views: frozenset[View] = tx.get("views")
    for view in views:
        if view[0].key == ext and view[0].generation == generation:
            return view
    return None


def _installed(tx: Tx) -> View | None:
    """``adapter.request_state``: the view the save thread installed for its task, if any."""
    flight = tx.get("in_flight")
    if flight is None:
        return None  # the producer's finally reset the slot
    task: Task = flight[0]
    return (task[0], task[1])


def _refuse(tx: Tx, view: View, namespace: str, retained: bool) -> str:
    tx.emit(out("access", view=view[0], namespace=namespace, retained=retained, result=REFUSED))
    return REFUSED


def _record_failure(tx: Tx, request: Handle) -> None:
    """``record_send_failure``: finalized later unless finish_requests already ran."""
    snap = tx.snapshot(request)
    if snap is not None and snap.state != "aborted":
        tx.set("failures", tx.get("failures") | {request})


def _end(tx: Tx, task: Task) -> None:
    """The task's ``finally``: fence release and deferred cleanup, in the machine."""
    _fire_sender(tx, task[0], "end", terminal=task[3] == TERMINAL)
    tx.set("in_flight", None)


def _cleanup_sender(tx: Tx, ext: Hashable) -> None:
    cleanup_sender(tx, ext, release_state)


def _fire_sender(tx: Tx, sender: Handle, event: str, **payload: Any) -> Outcome:
    """Fire on a sender generation; reclaiming it runs the canonical cleanup."""
    return fire_sender(tx, sender, event, release_state, **payload)


def release_state(tx: Tx, ext: Hashable) -> None:
    """Canonical cleanup: release every namespace and pop the request's ``state``.

    Also forgets the ghost ``made`` entries of that state generation.
    """
    state = tx.handle("state", ext)
    if state is None:
        return
    tx.fire(state, "release")
    tx.retire(state)
    tx.set("made", frozenset(m for m in tx.get("made") if m[0] != state))


REQUEST_STATE_SYSTEM = build()

Builder = Callable[[], System]


def _variant(**changes: Any) -> Builder:
    config = RequestStateConfig(**changes)

    def make() -> System:
        return build(config)

    make.__doc__ = f"The request-state system with {changes}."
    return make


variant_seed000_p1 = _variant(
    name="request_state_seed000_p1",
    fence="identity_not_cancelled",
    refusal_raises=True,
    exception_skips_put=True,
)
variant_p1_fail_open = _variant(name="request_state_p1_fail_open", fence="identity_not_cancelled")
variant_seed000_p2_vacuous = _variant(name="request_state_seed000_p2_vacuous", late_check="context")
variant_retained_unfenced = _variant(name="request_state_retained_unfenced", fence="unfenced")
variant_stale_handle = _variant(name="request_state_stale_handle", fence="external_id")
variant_segment_clears = _variant(name="request_state_segment_clears", segment_keeps_state=False)
variant_failure_clears = _variant(name="request_state_failure_clears", failure_keeps_state=False)

_RS = __name__

TARGETS: tuple[Target, ...] = (
    Target(
        "request_state_system",
        f"{_RS}:REQUEST_STATE_SYSTEM",
        doc="seed 000: namespaced producer state fenced by sender-generation identity",
    ),
    Target(
        "request_state_seed000_p1",
        f"{_RS}:variant_seed000_p1",
        family="request_state_system",
        expected="violates:eos_delivered,flush_reaches_state",
        doc="seed 000 P1: is_active treats cancelled as unavailable; the cancelled-but-"
        "current terminal flush raises, the put is skipped, EOS is dropped",
    ),
    Target(
        "request_state_p1_fail_open",
        f"{_RS}:variant_p1_fail_open",
        family="request_state_system",
        expected="violates:flush_reaches_state",
        doc="seed 000 P1 fence with a fail-open refusal: EOS goes out, the flush loses its state",
    ),
    Target(
        "request_state_seed000_p2_vacuous",
        f"{_RS}:variant_seed000_p2_vacuous",
        family="request_state_system",
        expected="violates:late_access_refused",
        doc="seed 000 P2: the late check calls get_or_create on adapter.request_state, which "
        "the producer's finally emptied: it raises before any fence is exercised, so the "
        "test's assertion cannot fail",
    ),
    Target(
        "request_state_retained_unfenced",
        f"{_RS}:variant_retained_unfenced",
        family="request_state_system",
        expected="violates:generation_fenced,late_access_refused,no_leak_after_cleanup,"
        "no_recreate_after_cleanup",
        doc="seed 000 P2, checked on the retained view: an unfenced view recreates state "
        "after cleanup and reaches its successor's",
    ),
    Target(
        "request_state_stale_handle",
        f"{_RS}:variant_stale_handle",
        family="request_state_system",
        expected="violates:generation_fenced",
        doc="a view fenced by external id, not generation identity, reaches its successor's "
        "state after the id is reused",
    ),
    Target(
        "request_state_segment_clears",
        f"{_RS}:variant_segment_clears",
        family="request_state_system",
        expected="violates:request_state_retained",
        doc="segment completion drops request-wide namespaces",
    ),
    Target(
        "request_state_failure_clears",
        f"{_RS}:variant_failure_clears",
        family="request_state_system",
        expected="violates:request_state_retained",
        doc="a failed send drops the namespaces before failure finalization",
    ),
)
