"""Properties of the request-state system (`statecore.models.request_state`).

Each property names the review finding or code comment it comes from. The
globals they read are documented on the system: ``crossed`` (an access
reached another generation's state), ``made`` (the namespaces a producer
created, per state generation), ``terminals`` / ``terminal_put`` (requests
whose terminal was queued / reached ``connector.put``), ``late_check`` (the
test's late ``get_or_create``), ``refused_in_producer`` (a producer the send
path let run was refused its state), and the witnesses ``segment_done`` and
``delivered``.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from statecore.properties import Property, always, eventually, sometimes
from statecore.system import StateView

if TYPE_CHECKING:  # the model imports this module: no import back at run time
    from statecore.models.request_state_records import Shared

GENERATION_FENCED = "generation_fenced"
NO_RECREATE_AFTER_CLEANUP = "no_recreate_after_cleanup"
LATE_ACCESS_REFUSED = "late_access_refused"
NO_LEAK_AFTER_CLEANUP = "no_leak_after_cleanup"
STATE_RETAINED = "request_state_retained"
FLUSH_REACHES_STATE = "flush_reaches_state"
EOS_DELIVERED = "eos_delivered"
ONE_SENDER_PER_REQUEST = "one_sender_per_request"
TASKS_MATCH_SAVES = "tasks_match_saves"


def _not_crossed(v: StateView[Shared]) -> bool:
    return not v.g.crossed


def _late_check_ran(v: StateView[Shared]) -> bool:
    return v.g.late_check is not None


def _late_check_refused(v: StateView[Shared]) -> bool:
    return v.g.late_check == "refused"


def _producer_not_refused(v: StateView[Shared]) -> bool:
    return not v.g.refused_in_producer


def _segment_done(v: StateView[Shared]) -> bool:
    return v.g.segment_done


def _delivered(v: StateView[Shared]) -> bool:
    return v.g.delivered


def _no_recreate(v: StateView[Shared]) -> bool:
    """Request state exists only while a sender generation of its id is current."""
    return all(v.snapshot("sender", handle.key) is not None for handle, _ in v.live("state"))


def _no_leak(v: StateView[Shared]) -> bool:
    """Request state is held only for a request that is still running."""
    for handle, _ in v.live("state"):
        request = v.snapshot("request", handle.key)
        if request is None or request.state != "running":
            return False
    return True


def _retained(v: StateView[Shared]) -> bool:
    """Every namespace created in a live state generation is still there."""
    for made in v.g.made:
        slot = v.slot("state", made.state.key)
        live = slot.snapshot is not None and slot.generation == made.state.generation
        if live and not getattr(slot.snapshot, made.var):
            return False
    return True


def _one_sender(v: StateView[Shared]) -> bool:
    """No external id has started more sender generations than requests."""
    return all(
        v.slot("sender", ext).generation <= v.slot("request", ext).generation
        for ext in v.system.component("request").key_values
    )


def _tasks_match_saves(v: StateView[Shared]) -> bool:
    """A live request's queued and running tasks are among the saves it made."""
    tasks = list(v.g.queue)
    flight = v.g.in_flight
    if flight is not None:
        tasks.append(flight.task)
    terminals = v.g.terminals
    for handle, snap in v.live("request"):
        kinds = [task.kind for task in tasks if task.request == handle]
        if kinds.count("segment_end") > snap.segments:
            return False
        if kinds.count("terminal") > (1 if handle in terminals else 0):
            return False
    return True


def _eos(v: StateView[Shared]) -> bool:
    return v.g.terminals <= v.g.terminal_put


def _retired_view(v: StateView[Shared]) -> bool:
    """A view retained from a generation whose sender and state are both gone."""
    return any(
        v.snapshot("sender", view.sender.key) is None
        and v.slot("state", view.state.key).snapshot is None
        for view in v.g.views
    )


def _reused_with_view(v: StateView[Shared]) -> bool:
    """A later generation is current while a view of an earlier one is retained."""
    for view in v.g.views:
        slot = v.slot("sender", view.sender.key)
        if slot.snapshot is not None and slot.generation > view.sender.generation:
            return True
    return False


def _cancelled_flush(v: StateView[Shared]) -> bool:
    flight = v.g.in_flight
    if flight is None or flight.phase != "begun" or flight.task.kind != "terminal":
        return False
    sender = v.snapshot("sender", flight.task.sender.key)
    return sender is not None and sender.state == "draining"


def _cancelled_chunk_in_flight(v: StateView[Shared]) -> bool:
    return any(snap.state == "retiring" for _, snap in v.live("sender"))


def _failed_keeps(v: StateView[Shared]) -> bool:
    return any(
        snap.state == "failed" and any(snap.values().values()) for _, snap in v.live("state")
    )


def properties() -> tuple[Property, ...]:
    """The request-state properties, in the order reports list them."""
    return (
        always(
            GENERATION_FENCED,
            "A retired generation, and every view retained from it, never creates, reads "
            "or changes its successor's state.",
            _not_crossed,
            source="seed 000 (RFC #6453): views fenced by sender-generation identity; "
            "_send_single_request: _sender_tokens.get(ext) is sender_token",
        ),
        always(
            NO_RECREATE_AFTER_CLEANUP,
            "Request state exists only while a sender generation of its id is current: "
            "a retained view cannot recreate state after cleanup.",
            _no_recreate,
            source="seed 000 PR: 'a retained view, including a factory overlapping "
            "cancellation, cannot recreate a retired request's state'",
        ),
        always(
            LATE_ACCESS_REFUSED,
            "After cleanup, the test's late get_or_create goes through a view of the "
            "cleaned-up generation and its fence refuses it: a call that raises because no "
            "accessor is installed exercises no fence.",
            _late_check_refused,
            when=_late_check_ran,
            source="seed 000 review P2: the post-exit adapter.request_state assert cannot "
            "fail; assert get_or_create on a view captured inside the producer",
        ),
        eventually(
            NO_LEAK_AFTER_CLEANUP,
            "At rest, namespaced state is held only for a request that is still running "
            "(canonical cleanup and failure finalization release every namespace).",
            _no_leak,
            source="seed 000 PR: successful terminal sends release every namespace through "
            "canonical cleanup (cleanup_sender -> _clear_sender_state_locked)",
        ),
        always(
            STATE_RETAINED,
            "While a request's state lives, every namespace its producer created is still "
            "there: segment completion and failed sends keep request-wide state.",
            _retained,
            source="seed 000 PR: 'segment completion retains request-wide state'; 'failed "
            "connector sends keep state until failure finalization'",
        ),
        always(
            FLUSH_REACHES_STATE,
            "A producer the send path lets run (a cancelled-but-current terminal flush "
            "included) always reaches its request's state.",
            _producer_not_refused,
            source="seed 000 review P1: is_active treats cancelled as unavailable; "
            "'cancelled does not veto a terminal chunk' (_send_single_request)",
        ),
        eventually(
            EOS_DELIVERED,
            "Every queued terminal reaches connector.put with finished=True (delivered, "
            "or the put itself fails visibly), even if cleanup_sender ran after it was queued.",
            _eos,
            source="seed 000 review P1: get_or_create raises, put skipped, EOS dropped; "
            "vllm-omni #6670 fence",
        ),
        always(
            ONE_SENDER_PER_REQUEST,
            "A request starts at most one sender generation: once its terminal went out, it "
            "was aborted or its failure was finalized, it never saves under a new token.",
            _one_sender,
            source="save_async: the first accepted task of a request creates its "
            "_SenderGeneration; finish_requests finishes the request on abort and on the "
            "failure path",
        ),
        always(
            TASKS_MATCH_SAVES,
            "Each save is queued once and taken by the save thread once: a request's queued "
            "and running tasks are among the segment ends and the terminal it saved.",
            _tasks_match_saves,
            source="save_async appends one task to _pending_save_reqs; save_loop pops it "
            "before _send_single_request",
        ),
        sometimes(
            "cancelled_terminal_flush",
            "A terminal flush runs on a cancelled-but-current sender generation.",
            _cancelled_flush,
            source="vacuity guard for seed 000 P1",
        ),
        sometimes(
            "cancelled_chunk_in_flight",
            "cleanup_sender cancels a generation while one of its non-terminal tasks is in "
            "flight, and leaves the cleanup to the task's finally.",
            _cancelled_chunk_in_flight,
            source="vacuity guard for the retiring path of cleanup_sender (the put is skipped)",
        ),
        sometimes(
            "retained_view_outlives_generation",
            "A view retained inside the producer outlives its generation's cleanup.",
            _retired_view,
            source="vacuity guard for seed 000 P2 and no_recreate_after_cleanup",
        ),
        sometimes(
            "external_id_reused_with_view",
            "A new request reuses the external id while an old view is retained.",
            _reused_with_view,
            source="vacuity guard for generation_fenced",
        ),
        sometimes(
            "segment_completed_with_state",
            "A segment completes while the request holds a namespace.",
            _segment_done,
            source="vacuity guard for request_state_retained",
        ),
        sometimes(
            "failed_send_keeps_state",
            "A request whose send failed still holds a namespace.",
            _failed_keeps,
            source="vacuity guard for request_state_retained",
        ),
        sometimes(
            "terminal_delivered",
            "A terminal put succeeds.",
            _delivered,
            source="vacuity guard for eos_delivered",
        ),
    )
