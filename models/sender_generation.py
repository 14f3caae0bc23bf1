"""The per-external-id sender generation of vLLM-Omni's chunk transfer adapter.

Mirrors vLLM-Omni 0.30.0,
``vllm_omni/distributed/omni_connectors/transfer_adapter/chunk_transfer_adapter.py``:
``_SenderGeneration`` (its flags ``in_flight``, ``cancelled``,
``terminal_pending``, ``cleanup_deferred``), ``save_async`` (a terminal sets
``terminal_pending``), ``_send_single_request`` (the identity fence: a task runs
only while its generation is current, and ``cancelled`` vetoes every task but
the terminal), ``_release_terminal_fence`` (runs a deferred cleanup) and
``cleanup_sender`` (defers while a terminal is pending; otherwise reclaims now,
or when the in-flight chunk finishes).

States name the flag combinations that matter:

======================  =========================================================
``open``                current, not cancelled, no terminal pending
``terminal_pending``    a terminal is queued or in flight (hot: it must be sent)
``draining``            cancelled while a terminal was pending (cleanup deferred)
``retiring``            cancelled while a non-terminal chunk was in flight
``reclaimed``           token popped and per-request state cleared (final)
======================  =========================================================

Simplifications: the token's identity is the generation of a statecore
`Handle` (a reused id gets a new generation, as a new ``_SenderGeneration``
object would); ``num_puts``/``terminal_sent`` only matter for shared-memory
cleanup and are left out; ``in_flight`` is a variable.

`sender_generation_machine(defer_cleanup=False)` builds the machine as it was
before vllm-omni #6670: ``cleanup_sender`` reclaims a generation whose
terminal is still queued, so the terminal is later discarded as stale.
"""

from __future__ import annotations

from collections.abc import Callable, Hashable
from typing import Any

from statecore import Event, Field, Machine, Outcome, State, Transition, Var
from statecore.definition import Payload, Snapshot
from statecore.system import Handle, Tx

BOOL = (False, True)


def not_in_flight(s: Snapshot, p: Payload) -> bool:
    """No task of the generation is running."""
    return not s.in_flight


def in_flight(s: Snapshot, p: Payload) -> bool:
    """A task of the generation is running."""
    return bool(s.in_flight)


def terminal_not_in_flight(s: Snapshot, p: Payload) -> bool:
    """The task is a terminal (``cancelled`` does not veto it) and nothing else runs."""
    return bool(p["terminal"] and not s.in_flight)


def chunk_in_flight(s: Snapshot, p: Payload) -> bool:
    """The running task is a chunk or a segment end."""
    return bool(s.in_flight and not p["terminal"])


def terminal_in_flight(s: Snapshot, p: Payload) -> bool:
    """The running task is the terminal."""
    return bool(s.in_flight and p["terminal"])


def take_task(s: Snapshot, p: Payload) -> dict[str, bool]:
    """The save thread runs the task."""
    return {"in_flight": True}


def release_task(s: Snapshot, p: Payload) -> dict[str, bool]:
    """The task's finally: nothing of the generation runs."""
    return {"in_flight": False}


def sender_generation_machine(*, defer_cleanup: bool = True, name: str = "") -> Machine:
    """The sender-generation machine; ``defer_cleanup=False`` is the pre-#6670 bug."""
    if defer_cleanup:
        # cancelled, cleanup deferred to the terminal's fence release
        cleanup_pending = [Transition("terminal_pending", "cleanup", "draining")]
    else:
        # reclaimed at once (token popped, state cleared) though the terminal is
        # still queued; or, while a task runs, cancelled for its finally to reclaim
        cleanup_pending = [
            Transition("terminal_pending", "cleanup", "reclaimed", guard=not_in_flight),
            Transition("terminal_pending", "cleanup", "retiring", guard=in_flight),
        ]
    states = [
        State("open", initial=True, doc="current, not cancelled"),
        State("terminal_pending", hot=True, doc="terminal queued or in flight"),
        State("draining", hot=True, doc="cancelled; the terminal still owes the cleanup"),
        State("retiring", doc="cancelled while a chunk was in flight"),
        State("reclaimed", final=True, doc="token popped, state cleared"),
    ]
    variables = [Var("in_flight", BOOL, False, doc="the save thread runs one of its tasks")]
    events = [
        Event("save_terminal", doc="save_async accepted a request-terminal chunk"),
        Event(
            "begin",
            [Field("terminal", BOOL)],
            policy="reject",
            doc="the save thread takes a task (rejected: the task is discarded as stale)",
        ),
        Event(
            "end",
            [Field("terminal", BOOL)],
            policy="error",
            doc="the task's finally (_release_terminal_fence for a terminal)",
        ),
        Event("cleanup", policy="ignore", doc="cleanup_sender(external id)"),
    ]
    transitions = [
        Transition(("open", "terminal_pending"), "save_terminal", "terminal_pending"),
        # begin: the fence in _send_single_request (the generation is current).
        Transition(
            ("open", "terminal_pending"), "begin", None, guard=not_in_flight, effect=take_task
        ),
        Transition("draining", "begin", None, guard=terminal_not_in_flight, effect=take_task),
        # end: the finally of _send_single_request and _release_terminal_fence.
        Transition(
            ("open", "terminal_pending"), "end", None, guard=chunk_in_flight, effect=release_task
        ),
        # A terminal's finally releases the fence. After a successful put the
        # post-put cleanup() has already moved the generation to 'draining'
        # (or 'retiring' before #6670); here the put failed, raised, or was
        # skipped, and the state is kept. From 'open' too: a second terminal
        # queued on the same generation (a reused id joined it) runs after the
        # first one's fence release cleared the single terminal_pending flag.
        # The fence is released and the state kept.
        Transition(
            ("open", "terminal_pending"),
            "end",
            "open",
            guard=terminal_in_flight,
            effect=release_task,
        ),
        # The terminal's fence release runs the deferred cleanup.
        Transition("draining", "end", "reclaimed", guard=terminal_in_flight, effect=release_task),
        # A chunk's finally: the terminal still owes the cleanup.
        Transition("draining", "end", None, guard=chunk_in_flight, effect=release_task),
        # The finally of the chunk that was in flight reclaims the generation.
        Transition("retiring", "end", "reclaimed", guard=in_flight, effect=release_task),
        # cleanup_sender: reclaim now (pop token, clear state), or cancel and
        # leave it to the in-flight task's finally.
        Transition("open", "cleanup", "reclaimed", guard=not_in_flight),
        Transition("open", "cleanup", "retiring", guard=in_flight),
        *cleanup_pending,
    ]
    if not defer_cleanup:  # before #6670 nothing ever reaches 'draining'
        states = [st for st in states if st.name != "draining"]
        transitions = [t for t in transitions if "draining" not in t.source]
    return Machine(
        name or ("sender_generation" if defer_cleanup else "sender_generation_pre6670"),
        doc=__doc__ or "",
        states=states,
        transitions=transitions,
        variables=variables,
        events=events,
    )


SENDER_GENERATION = sender_generation_machine()


ClearState = Callable[[Tx[Any], Hashable], None]
"""What ``_clear_sender_state_locked(ext)`` drops in a system: (tx, external id)."""


def fire_sender(
    tx: Tx[Any], token: Handle, event: str, clear: ClearState, **payload: Any
) -> Outcome:
    """Fire on a ``sender`` instance; reclaiming it pops the token and runs `clear`."""
    outcome = tx.fire(token, event, **payload)
    if outcome.accepted and outcome.snapshot.state == "reclaimed":
        tx.retire(token)
        clear(tx, token.key)
    return outcome


def cleanup_sender(tx: Tx[Any], ext: Hashable, clear: ClearState) -> None:
    """``cleanup_sender(ext)``: reclaim now, defer to the terminal, or leave to the finally.

    With no token the per-request state is cleared all the same (CTA:977-1012).
    """
    token = tx.handle("sender", ext)
    if token is None:
        clear(tx, ext)
        return
    fire_sender(tx, token, "cleanup", clear)
