"""Verifying a recorded trace against the model, state for state.

A trace from a file or from an earlier run is only a claim: `Verifier`
follows the model along it (`statecore.traces.path.take`), one recorded step at a
time, and raises `statecore.traces.itf_values.TraceFileError` at the first step the
model does not allow - the action is not enabled, is taken by another actor,
or leads to another state than the one recorded. `verify_trace` does it for
a whole in-memory `Trace`; `statecore.traces.itf.read_itf` does it as it reads.
"""

from __future__ import annotations

from ..system import System, SystemState
from .itf_values import TraceFileError, same_state, state_diff
from .path import NotEnabledError, take
from .trace import Trace, TraceStep

__all__ = ["Verifier", "verify_trace"]


class Verifier:
    """Follows the model along a trace, one recorded step at a time."""

    def __init__(self, system: System, path: str | None) -> None:
        self.system = system
        self.path = path
        self.state: SystemState | None = None

    def check(self, index: int, item: TraceStep) -> TraceStep:
        """The model's step for recorded step `index`; raises where the two part."""
        if self.state is None:
            return self._start(item)
        system, path = self.system, self.path
        if item.action is None:
            raise TraceFileError(path, index, "no action leads to this state")
        try:
            step_ = take(system, self.state, item.action, index)
        except NotEnabledError as exc:
            why = "it is not enabled" if "is not enabled" in str(exc) else str(exc)
            enabled = ", ".join(str(a) for a in system.actions_in(self.state)) or "none"
            raise TraceFileError(
                path,
                index,
                f"the model does not allow {item.action} after step {index - 1}: {why}; "
                f"enabled there: {enabled}",
            ) from None
        if item.actor and item.actor != step_.actor:
            raise TraceFileError(
                path,
                index,
                f"action {item.action.name!r} is taken by {step_.actor!r}, not {item.actor!r}",
            )
        if not same_state(item.state, step_.state):
            raise TraceFileError(
                path,
                index,
                f"the model does not allow this step: {item.action} leads elsewhere - "
                + state_diff(system, item.state, step_.state),
            )
        self.state = step_.state
        return TraceStep.of(step_)

    def _start(self, item: TraceStep) -> TraceStep:
        inits = self.system.init_states()
        start = next((s for s in inits if same_state(s, item.state)), None)
        if start is None:
            raise TraceFileError(
                self.path,
                0,
                "the first state is not an initial state of the model: "
                + state_diff(self.system, item.state, inits[0]),
            )
        self.state = start
        return TraceStep(None, "", start)


def verify_trace(system: System, trace: Trace, *, path: str | None = None) -> Trace:
    """Replay `trace` through `system`, checking every state; return the model's trace.

    The result has the model's own values (exact objects, outputs included),
    so it compares equal to the trace the explorer produced. Raises
    `TraceFileError` at the first step the model does not allow.
    """
    if trace.system != system.name:
        raise TraceFileError(
            path, None, f"wrong model: the trace is of system {trace.system!r}, not {system.name!r}"
        )
    if not trace.steps:
        raise TraceFileError(path, None, "the trace has no states")
    verifier = Verifier(system, path)
    steps = tuple(verifier.check(index, item) for index, item in enumerate(trace.steps))
    return Trace(system.name, steps, trace.property_id, trace.verdict, trace.detail)
