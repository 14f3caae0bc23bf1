"""The actions of the request-state system, function for function as vLLM-Omni runs them.

* scheduler - `new_request`, `save_segment_end` / `save_terminal`
  (``save_async``), `abort` and `finalize_failure` (``finish_requests`` ->
  ``cleanup_sender``);
* save thread - `begin` (the fence of ``_send_single_request``), `process`
  (the producer's ``get_or_create``), `put` (the connector put and what follows
  it), and the task's ``finally`` (`end`);
* producer callback - `retained_get_or_create`; test - `late_check`.

What a known-bug variant replaces is a keyword argument with the reference
as its default: the `fence` of every access (`statecore.models.request_state_access`),
what `process` does `on_refusal` (`fail_open`, `raise_then_put`,
`raise_and_skip_put`) and which view the test's `late_check` calls
(`latest_retained_view`, `installed_view`).
"""

from __future__ import annotations

from collections.abc import Callable, Hashable
from typing import Any, Literal

from statecore import Outcome
from statecore.system import Handle, Tx

from .request_state_access import ViewFence, access, identity_fence, release_request_state
from .request_state_machines import NAMESPACES, holds_namespace
from .request_state_records import (
    BEGUN,
    CANCELLED,
    READY,
    REFUSED,
    SEGMENT,
    TERMINAL,
    UNAVAILABLE,
    InFlight,
    Kind,
    Shared,
    Task,
    View,
)
from .sender_generation import cleanup_sender, fire_sender

PutOutcome = Literal["ok", "fail"]
"""The connector put succeeds, or returns False / raises."""
PUT_OUTCOMES: tuple[PutOutcome, ...] = ("ok", "fail")

OnRefusal = Callable[[Tx[Shared], Task], None]
"""What the save thread does once the producer's ``get_or_create`` was refused."""

LateView = Callable[[Tx[Shared], list[View]], View | None]
"""The view the test's late check calls, given the retained views of a retired id."""


# -- scheduler ---------------------------------------------------------------------


def new_request(tx: Tx[Shared], ext: Hashable) -> None:
    """A request takes the external id; reuse gives a new generation."""
    current = tx.snapshot(("request", ext))
    tx.require(current is None or current.state in ("terminal_saved", "aborted"))
    tx.require(tx.handle("sender", ext) is None, "previous generation still draining")
    old = tx.handle("request", ext)
    tx.spawn("request", ext)
    if old is not None:
        tx.put(failures=tx.g.failures - {old})


def save(tx: Tx[Shared], ext: Hashable, kind: Kind) -> None:
    """``save_async``: the first accepted task creates the sender token and the state."""
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
            tx.put(crossed=True)
    state = tx.handle("state", ext)
    assert state is not None
    if kind == TERMINAL:
        _fire_sender(tx, sender, "save_terminal")
        tx.put(terminals=tx.g.terminals | {request})
    tx.put(queue=(*tx.g.queue, Task(sender, state, request, kind)))


def save_segment_end(tx: Tx[Shared], ext: Hashable) -> None:
    save(tx, ext, SEGMENT)


def save_terminal(tx: Tx[Shared], ext: Hashable) -> None:
    save(tx, ext, TERMINAL)


def abort(tx: Tx[Shared], ext: Hashable) -> None:
    """``finish_requests`` -> ``cleanup_sender``."""
    request = tx.handle("request", ext)
    tx.require(request is not None)
    assert request is not None
    tx.require(tx.fire(request, "abort").accepted)
    _cleanup_sender(tx, ext)


def finalize_failure(tx: Tx[Shared], ext: Hashable) -> None:
    """The failure path's ``finish_requests`` -> ``cleanup_sender``."""
    request = tx.handle("request", ext)
    tx.require(request is not None and request in tx.g.failures)
    assert request is not None
    tx.put(failures=tx.g.failures - {request})
    tx.fire(request, "abort")
    _cleanup_sender(tx, ext)


# -- save thread -------------------------------------------------------------------


def begin(tx: Tx[Shared]) -> None:
    """Pop the next task; the fence of ``_send_single_request`` lets it run or discards it."""
    queue = tx.g.queue
    tx.require(queue and tx.g.in_flight is None)
    task = queue[0]
    tx.put(queue=queue[1:])
    if _fire_sender(tx, task.sender, "begin", terminal=task.terminal).accepted:
        tx.put(in_flight=InFlight(task, BEGUN))
    # else: discarded as stale (identity lost, or cancelled and not terminal)


def fail_open(tx: Tx[Shared], task: Task) -> None:
    """The RFC (reference): a refusal hands the producer a detached value; the put follows."""
    tx.put(in_flight=InFlight(task, READY))


def raise_then_put(tx: Tx[Shared], task: Task) -> None:
    """``RequestStateUnavailableError``: the except path records it, still puts the marker."""
    _record_failure(tx, task.request)
    tx.put(in_flight=InFlight(task, READY))


def raise_and_skip_put(tx: Tx[Shared], task: Task) -> None:
    """The PR: ``RequestStateUnavailableError``, then ``record_send_failure(...); return``."""
    _record_failure(tx, task.request)
    end(tx, task)


def process(
    tx: Tx[Shared],
    namespace: str,
    *,
    fence: ViewFence = identity_fence,
    on_refusal: OnRefusal = fail_open,
) -> None:
    """The producer runs with the accessor installed, calls ``get_or_create`` and keeps its view."""
    flight = tx.g.in_flight
    tx.require(flight is not None and flight.phase == BEGUN)
    assert flight is not None
    task = flight.task
    view = View(task.sender, task.state)
    tx.put(views=tx.g.views | {view})  # the producer keeps its view
    if access(tx, view, namespace, retained=False, fence=fence) != REFUSED:
        tx.put(in_flight=InFlight(task, READY))
        return
    token = tx.snapshot(task.sender)
    if token is not None and (task.terminal or token.state not in CANCELLED):
        tx.put(refused_in_producer=True)  # the send path still lets it put
    on_refusal(tx, task)


def put(tx: Tx[Shared], outcome: PutOutcome) -> None:
    """The connector put, then segment completion, canonical cleanup, or the failure record."""
    flight = tx.g.in_flight
    tx.require(flight is not None and flight.phase == READY)
    assert flight is not None
    task = flight.task
    token = tx.snapshot(task.sender)
    if token is None or (token.state == "retiring" and not task.terminal):
        end(tx, task)  # _sender_generation_is_active: no put
        return
    if task.terminal:
        tx.put(terminal_put=tx.g.terminal_put | {task.request})
    if outcome == "fail":  # put returned False or raised: record_send_failure
        _record_failure(tx, task.request)
        tx.fire(task.state, "send_failed")
    elif task.terminal:  # the post-put cleanup(): cleanup_sender defers to the finally
        tx.put(delivered=True)
        _fire_sender(tx, task.sender, "cleanup")
    if not task.terminal:  # segment-end post-processing, after a success or a False put
        held = tx.snapshot(task.state)
        if held is not None and holds_namespace(held):
            tx.put(segment_done=True)
        tx.fire(task.state, "complete_segment")
    end(tx, task)


def end(tx: Tx[Shared], task: Task) -> None:
    """The task's ``finally``: fence release and deferred cleanup, in the machine."""
    _fire_sender(tx, task.sender, "end", terminal=task.terminal)
    tx.put(in_flight=None)


def _record_failure(tx: Tx[Shared], request: Handle) -> None:
    """``record_send_failure``: finalized later unless finish_requests already ran."""
    snap = tx.snapshot(request)
    if snap is not None and snap.state != "aborted":
        tx.put(failures=tx.g.failures | {request})


# -- producer callback and test ----------------------------------------------------


def latest_retained_view(tx: Tx[Shared], views: list[View]) -> View | None:
    """The review's fix: the view the test captured inside the producer."""
    return max(views, key=lambda view: view.sender.generation)


def installed_view(tx: Tx[Shared], views: list[View]) -> View | None:
    """Seed 000 P2, the PR's test: ``adapter.request_state``, whatever views were retained."""
    return installed(tx)


def retained_get_or_create(
    tx: Tx[Shared],
    ext: Hashable,
    generation: int,
    namespace: str,
    *,
    fence: ViewFence = identity_fence,
) -> None:
    """A view captured inside the producer is used later (a factory, a callback)."""
    view = retained_view(tx, ext, generation)
    tx.require(view is not None)
    assert view is not None
    access(tx, view, namespace, retained=True, fence=fence)


def late_check(
    tx: Tx[Shared],
    ext: Hashable,
    *,
    fence: ViewFence = identity_fence,
    late_view: LateView = latest_retained_view,
) -> None:
    """Seed 000 P2's test: after cleanup, ``get_or_create`` must be refused."""
    tx.require(tx.g.late_check is None and tx.handle("sender", ext) is None)
    views = [v for v in tx.g.views if v.state.key == ext and not tx.live(v.sender)]
    tx.require(views)
    view = late_view(tx, views)
    result = UNAVAILABLE  # no accessor installed: raised before any view was exercised
    if view is not None:
        result = access(tx, view, NAMESPACES[0], retained=True, fence=fence)
    tx.put(late_check=result)


def retained_view(tx: Tx[Shared], ext: Hashable, generation: int) -> View | None:
    """The view a producer of `ext`'s `generation`-th sender generation retained."""
    for view in tx.g.views:
        if view.sender.key == ext and view.sender.generation == generation:
            return view
    return None


def installed(tx: Tx[Shared]) -> View | None:
    """``adapter.request_state``: the view the save thread installed for its task, if any."""
    flight = tx.g.in_flight
    if flight is None:
        return None  # the producer's finally reset the slot
    return View(flight.task.sender, flight.task.state)


# -- the sender generation ---------------------------------------------------------


def _cleanup_sender(tx: Tx[Shared], ext: Hashable) -> None:
    cleanup_sender(tx, ext, release_request_state)


def _fire_sender(tx: Tx[Shared], sender: Handle, event: str, **payload: Any) -> Outcome:
    """Fire on a sender generation; reclaiming it runs the canonical cleanup."""
    return fire_sender(tx, sender, event, release_request_state, **payload)
