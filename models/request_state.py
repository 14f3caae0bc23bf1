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
reference runtime (`statecore.models.implementations.request_state`) runs the same
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
each variant flips the switches of one review finding, and `build` turns each
switch into the named function that replaces the reference's: a fence
(`identity_fence` -> `identity_not_cancelled_fence`, `external_id_fence`,
`unfenced`), what the save thread does on a refusal (`fail_open` ->
`raise_and_skip_put`, `raise_then_put`), the view the test's late check calls
(`latest_retained_view` -> `installed_view`), and the state machine's
segment and failure effects.

The model is split by concept: `statecore.models.request_state_machines`
(the machines), `statecore.models.request_state_records` (the globals record
`Shared`, the records in it, the config), `statecore.models.request_state_access`
(fences, ``get_or_create``, canonical cleanup) and
`statecore.models.request_state_actions` (the actions); this module wires them.

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

from functools import partial

from statecore.spec.request_state import (
    EOS_DELIVERED,
    FLUSH_REACHES_STATE,
    GENERATION_FENCED,
    LATE_ACCESS_REFUSED,
    NO_LEAK_AFTER_CLEANUP,
    NO_RECREATE_AFTER_CLEANUP,
    STATE_RETAINED,
    properties,
)

from statecore import Machine
from statecore.registry import Target
from statecore.system import Action, Component, Keys, System

from .request_state_access import FENCES, release_request_state, release_state
from .request_state_actions import (
    PUT_OUTCOMES,
    LateView,
    OnRefusal,
    abort,
    begin,
    fail_open,
    finalize_failure,
    installed_view,
    late_check,
    latest_retained_view,
    new_request,
    process,
    put,
    raise_and_skip_put,
    raise_then_put,
    retained_get_or_create,
    save_segment_end,
    save_terminal,
)
from .request_state_machines import (
    BOOL,
    NAMESPACES,
    REQUEST_STATE,
    namespace_var,
    producer_request_machine,
    request_state_machine,
)
from .request_state_records import (
    CANCELLED,
    CREATED,
    REFUSED,
    REUSED,
    SEGMENT,
    TERMINAL,
    UNAVAILABLE,
    Fence,
    InFlight,
    LateCheck,
    Made,
    RequestStateConfig,
    Shared,
    Task,
    View,
)
from .sender_generation import sender_generation_machine

__all__ = [
    "BOOL",
    "CANCELLED",
    "CREATED",
    "EQUIVALENT_MUTANTS",
    "NAMESPACES",
    "REFUSED",
    "REQUEST_STATE",
    "REQUEST_STATE_SYSTEM",
    "REUSED",
    "SEGMENT",
    "TARGETS",
    "TERMINAL",
    "UNAVAILABLE",
    "Fence",
    "InFlight",
    "LateCheck",
    "Made",
    "RequestStateConfig",
    "Shared",
    "Task",
    "View",
    "build",
    "namespace_var",
    "producer_request_machine",
    "release_request_state",
    "release_state",
    "request_state_machine",
    "variant_failure_clears",
    "variant_p1_fail_open",
    "variant_retained_unfenced",
    "variant_seed000_p1",
    "variant_seed000_p2_vacuous",
    "variant_segment_clears",
    "variant_stale_handle",
]

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
    'skip-fire release_request_state: tx.fire(state, "release")': _RETIRED,
    'skip-fire put: tx.fire(task.state, "complete_segment")': "complete_segment keeps "
    "request-wide state: the transition changes nothing",
    "skip-require new_request: tx.require(current is None or current.state in "
    '("terminal_saved", "aborted"))': "a running request with no sender generation has "
    "saved nothing: replacing it reaches the state aborting it first does",
    "skip-put new_request: tx.put(failures=tx.g.failures - {old})": "finalize_failure looks "
    "up the current request only: a stale record is never read",
    'skip-require abort: tx.require(tx.fire(request, "abort").accepted)': "finish_requests "
    "on an aborted request: its generation is cancelled or gone, so cleanup_sender changes "
    "nothing",
    "skip-put finalize_failure: tx.put(failures=tx.g.failures - {request})": "finalizing "
    "again changes nothing: abort is ignored and cleanup_sender finds nothing left",
    "negate-require late_check: tx.require(tx.g.late_check is None and "
    'tx.handle("sender", ext) is None)': "the late check goes through a retired view, which "
    "refuses it whenever and however often it runs",
    "skip-require late_check: tx.require(tx.g.late_check is None and "
    'tx.handle("sender", ext) is None)': "the late check goes through a retired view, which "
    "refuses it whenever and however often it runs",
    "skip-put access: tx.put(made=tx.g.made | {made})": "a ghost write: made records what "
    "producers created for request_state_retained, and the system behaves the same without it",
    "skip-put release_request_state: tx.put(made=frozenset(m for m in tx.g.made if m.state "
    "!= state))": "request_state_retained reads only the live state generation's entries: "
    "keeping a retired one's changes no verdict",
    'skip-emit access: tx.emit(out("access", view=sender, namespace=namespace, '
    "retained=retained, result=result))": _OUTPUT_ONLY,
    'skip-emit _refuse: tx.emit(out("access", view=sender, namespace=namespace, '
    "retained=retained, result=REFUSED))": _OUTPUT_ONLY,
}
"""Mutants of `request_state_system` that behave like it, by id, with the reason."""

REFERENCE = RequestStateConfig()
"""The reference's configuration: every switch as the review's fix has it."""


def build(config: RequestStateConfig = REFERENCE) -> System:
    """The request-state system for `config`, with the spec's properties.

    Each switch of `config` selects the named function that replaces the
    reference's: the fence of every access, what the save thread does when
    the producer is refused, which view the test's late check calls, and
    the request-state machine.
    """
    ext = Keys("ext", config.ids)
    by_ext = {"ext": ext}
    fence = FENCES[config.fence]
    generations = config.generations
    return System(
        config.name,
        doc=__doc__ or "",
        equivalent_mutants=EQUIVALENT_MUTANTS,
        components=[
            Component("request", producer_request_machine(), ext, max_generations=generations),
            Component("sender", sender_generation_machine(), ext, max_generations=generations),
            Component("state", state_machine(config), ext, max_generations=2 * generations),
        ],
        globals=Shared,
        actions=[
            Action("new_request", "scheduler", new_request, by_ext),
            Action("save_segment_end", "scheduler", save_segment_end, by_ext),
            Action("save_terminal", "scheduler", save_terminal, by_ext),
            Action("abort", "scheduler", abort, by_ext),
            Action("finalize_failure", "scheduler", finalize_failure, by_ext, internal=True),
            Action("begin", "save_thread", begin, internal=True),
            Action(
                "process",
                "save_thread",
                partial(process, fence=fence, on_refusal=on_refusal(config)),
                {"namespace": NAMESPACES},
                internal=True,
            ),
            Action("put", "save_thread", put, {"outcome": PUT_OUTCOMES}, internal=True),
            Action(
                "retained_get_or_create",
                "producer_callback",
                partial(retained_get_or_create, fence=fence),
                {
                    "ext": ext,
                    "generation": tuple(range(1, generations + 1)),
                    "namespace": NAMESPACES,
                },
            ),
            Action(
                "late_check",
                "test",
                partial(late_check, fence=fence, late_view=LATE_VIEWS[config.late_check]),
                by_ext,
            ),
        ],
        properties=properties(),
    )


def state_machine(config: RequestStateConfig) -> Machine:
    """The request-state machine, named after the bugs it has."""
    return request_state_machine(
        segment_keeps_state=config.segment_keeps_state,
        failure_keeps_state=config.failure_keeps_state,
        name="request_state"
        + ("" if config.segment_keeps_state else "_segment_clears")
        + ("" if config.failure_keeps_state else "_failure_clears"),
    )


def on_refusal(config: RequestStateConfig) -> OnRefusal:
    """What the save thread does once the producer was refused its state."""
    if not config.refusal_raises:
        return fail_open
    return raise_and_skip_put if config.exception_skips_put else raise_then_put


LATE_VIEWS: dict[LateCheck, LateView] = {
    "retained": latest_retained_view,
    "context": installed_view,
}
"""The view the test's late check calls, per `RequestStateConfig.late_check`."""


REQUEST_STATE_SYSTEM = build()


def variant_seed000_p1() -> System:
    """Seed 000 P1, the PR as submitted: a refused flush raises and skips its put.

    ``is_active`` also requires ``not sender_token.cancelled``
    (`identity_not_cancelled_fence`), a refused ``get_or_create`` raises, and
    the except path's ``record_send_failure(...); return`` skips the put
    (`raise_and_skip_put`).
    """
    return build(
        RequestStateConfig(
            name="request_state_seed000_p1",
            fence="identity_not_cancelled",
            refusal_raises=True,
            exception_skips_put=True,
        )
    )


def variant_p1_fail_open() -> System:
    """The seed 000 P1 fence (`identity_not_cancelled_fence`) with a fail-open refusal."""
    return build(
        RequestStateConfig(name="request_state_p1_fail_open", fence="identity_not_cancelled")
    )


def variant_seed000_p2_vacuous() -> System:
    """Seed 000 P2: the late check calls ``adapter.request_state`` (`installed_view`)."""
    return build(RequestStateConfig(name="request_state_seed000_p2_vacuous", late_check="context"))


def variant_retained_unfenced() -> System:
    """A retained view resolves ``request_payload.setdefault(ext)`` (`unfenced`)."""
    return build(RequestStateConfig(name="request_state_retained_unfenced", fence="unfenced"))


def variant_stale_handle() -> System:
    """A view fenced by external id (`external_id_fence`), not generation identity."""
    return build(RequestStateConfig(name="request_state_stale_handle", fence="external_id"))


def variant_segment_clears() -> System:
    """Segment completion drops request-wide namespaces (``segment_keeps_state=False``)."""
    return build(RequestStateConfig(name="request_state_segment_clears", segment_keeps_state=False))


def variant_failure_clears() -> System:
    """A failed send drops the namespaces (``failure_keeps_state=False``)."""
    return build(RequestStateConfig(name="request_state_failure_clears", failure_keeps_state=False))


TARGETS: tuple[Target, ...] = (
    Target(
        "request_state_system",
        f"{__name__}:REQUEST_STATE_SYSTEM",
        doc="seed 000: namespaced producer state fenced by sender-generation identity",
    ),
    Target(
        "request_state_seed000_p1",
        variant_seed000_p1,
        family="request_state_system",
        violates=(EOS_DELIVERED, FLUSH_REACHES_STATE),
        doc="seed 000 P1: is_active treats cancelled as unavailable; the cancelled-but-"
        "current terminal flush raises, the put is skipped, EOS is dropped",
    ),
    Target(
        "request_state_p1_fail_open",
        variant_p1_fail_open,
        family="request_state_system",
        violates=(FLUSH_REACHES_STATE,),
        doc="seed 000 P1 fence with a fail-open refusal: EOS goes out, the flush loses its state",
    ),
    Target(
        "request_state_seed000_p2_vacuous",
        variant_seed000_p2_vacuous,
        family="request_state_system",
        violates=(LATE_ACCESS_REFUSED,),
        doc="seed 000 P2: the late check calls get_or_create on adapter.request_state, which "
        "the producer's finally emptied: it raises before any fence is exercised, so the "
        "test's assertion cannot fail",
    ),
    Target(
        "request_state_retained_unfenced",
        variant_retained_unfenced,
        family="request_state_system",
        violates=(
            GENERATION_FENCED,
            LATE_ACCESS_REFUSED,
            NO_LEAK_AFTER_CLEANUP,
            NO_RECREATE_AFTER_CLEANUP,
        ),
        doc="seed 000 P2, checked on the retained view: an unfenced view recreates state "
        "after cleanup and reaches its successor's",
    ),
    Target(
        "request_state_stale_handle",
        variant_stale_handle,
        family="request_state_system",
        violates=(GENERATION_FENCED,),
        doc="a view fenced by external id, not generation identity, reaches its successor's "
        "state after the id is reused",
    ),
    Target(
        "request_state_segment_clears",
        variant_segment_clears,
        family="request_state_system",
        violates=(STATE_RETAINED,),
        doc="segment completion drops request-wide namespaces",
    ),
    Target(
        "request_state_failure_clears",
        variant_failure_clears,
        family="request_state_system",
        violates=(STATE_RETAINED,),
        doc="a failed send drops the namespaces before failure finalization",
    ),
)
