"""The client-side request lifecycle of vLLM-Omni's entrypoints.

Mirrors vLLM-Omni 0.30.0, ``vllm_omni/entrypoints/``:

* ``ClientRequestState`` (``client_request_state.py``) is registered in
  ``OmniBase.request_states`` before the request is submitted
  (``async_omni.py:249-256``, ``omni.py:151``);
* outputs stream through ``_process_single_result`` until the final stage's
  output is ``finished`` (``e2e_done``), or a stage error, a client disconnect
  or an abort fails it (``_record_request_failure_once``);
* it leaves ``request_states`` on one of two removal paths:

  - canonical cleanup, ``OmniBase._log_summary_and_cleanup``
    (``omni_base.py:434-456``): logs the summary, then in a ``finally`` pops
    ``request_states`` and republishes the running/waiting gauges. AsyncOmni
    reaches it from the ``finally`` of ``generate()`` on every exit, sync Omni
    when a finished output arrives. RFC #6472 (seed 004) adds
    ``release_stream_edge_metrics()`` to that ``finally``;
  - ``Omni.abort`` (``omni.py:222-229``): ``_run_generation`` calls it on
    ``GeneratorExit`` and on exceptions; it records the failure and pops
    ``request_states`` directly, without going through the cleanup.

======================  ==========================================================
``registered``          in ``request_states``, submitted, no output yet
``streaming``           outputs are flowing to the client
``succeeded``           the final output arrived (``e2e_done``); still registered
``failed``              a stage error, disconnect or abort failed it; registered
``removed``             popped from ``request_states`` (final)
======================  ==========================================================

``succeeded`` and ``failed`` are hot: a request must not rest there, it still
owes its removal. Which removal path ran, whether the release hook exists and
what the gauges show are the composed system's business
(`statecore.models.request_lifecycle`); this machine only says which removal
is allowed from where:

* ``cleanup`` from ``succeeded`` or ``failed`` only: the entrypoints fail a
  request before they clean it up, so cleaning up a running request is a
  programmer error (policy ``error``);
* ``abort`` from any state but ``succeeded`` (sync Omni discards a finished
  request from ``active_reqs`` before its cleanup); aborting a finished or an
  already removed request is a no-op, like ``request_states.pop(id, None)``
  (policy ``ignore``).
"""

from __future__ import annotations

from statecore import Event, Machine, State, Transition

RUNNING = ("registered", "streaming")
TERMINAL = ("succeeded", "failed")


def request_machine(name: str = "client_request") -> Machine:
    """The client-side request lifecycle; see the module docstring."""
    return Machine(
        name,
        doc=__doc__ or "",
        states=[
            State("registered", initial=True, doc="in request_states, submitted"),
            State("streaming", doc="outputs are flowing"),
            State("succeeded", hot=True, doc="final output arrived; still registered"),
            State("failed", hot=True, doc="failed; still registered"),
            State("removed", final=True, doc="popped from request_states"),
        ],
        events=[
            Event("output", doc="_process_single_result delivered a first output"),
            Event("finish", doc="the final stage's output is finished (e2e_done)"),
            Event(
                "fail",
                policy="ignore",
                doc="stage error, client disconnect or abort; recorded once "
                "(_record_request_failure_once), a no-op once the request is over",
            ),
            Event(
                "cleanup",
                policy="error",
                doc="_log_summary_and_cleanup popped the state (canonical removal)",
            ),
            Event(
                "abort",
                policy="ignore",
                doc="Omni.abort recorded the failure and popped the state directly (sync removal)",
            ),
        ],
        transitions=[
            Transition("registered", "output", "streaming"),
            Transition("streaming", "finish", "succeeded"),
            Transition(RUNNING, "fail", "failed"),
            Transition(TERMINAL, "cleanup", "removed"),
            Transition((*RUNNING, "failed"), "abort", "removed"),
        ],
    )


REQUEST = request_machine()
