"""Replaying a list of actions on a system: the one place a path is rebuilt.

Every tool that follows actions through the model calls `take` (one step) or
`follow` (a list of them): the explorer rebuilding a counterexample,
`statecore.traces.replay`, checking a recorded trace (`statecore.traces.verify`), the
fuzzer's shrinking and adapter replays, a diagram's trace overlay. An action
the model does not enable raises the one `NotEnabledError`, which says at
which step and which action; `follow` can instead stop there and return the
path so far (`Path.blocked`), for replays that take "the path is gone" as an
answer.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from ..errors import ActionError, TransitionError
from ..system import ActionLabel, System, SystemState, SystemStep
from .trace import Trace, TraceStep

__all__ = ["NotEnabledError", "Path", "enabled_steps", "follow", "start", "take"]


class NotEnabledError(ActionError):
    """Action `label`, step `index` of a replayed path, is not enabled in `state`.

    The message is the model's own (`System.next_step`); `reason` says it in
    a replay's words: ``deliver(ext=ext0) is not enabled (...)``.
    """

    def __init__(
        self, index: int, label: ActionLabel, state: SystemState, cause: ActionError
    ) -> None:
        super().__init__(str(cause))
        self.index = index
        self.label = label
        self.state = state
        self.cause = cause

    @property
    def reason(self) -> str:
        """``LABEL is not enabled (MODEL'S MESSAGE)``."""
        return f"{self.label} is not enabled ({self.cause})"


def start(system: System, initial: SystemState | None = None) -> SystemState:
    """`initial`, or the system's first initial state."""
    return system.init_states()[0] if initial is None else initial


def take(system: System, state: SystemState, label: ActionLabel, index: int) -> SystemStep:
    """The step `label` takes from `state`, step `index` of a path; `NotEnabledError` if none."""
    try:
        return system.next_step(state, label)
    except NotEnabledError:
        raise
    except ActionError as exc:
        raise NotEnabledError(index, label, state, exc) from None


@dataclass(frozen=True)
class Path:
    """Actions replayed from a state: the model's steps, and where it stopped early.

    `steps` are the `SystemStep` values taken (one per action replayed);
    `blocked` is the error of the action that was not enabled, if one was.
    """

    system: System
    initial: SystemState
    steps: tuple[SystemStep, ...]
    blocked: NotEnabledError | None = None

    @property
    def trace_steps(self) -> tuple[TraceStep, ...]:
        """The path as trace steps, the initial state first."""
        return (TraceStep(None, "", self.initial), *(TraceStep.of(s) for s in self.steps))

    def trace(self, property_id: str = "", verdict: str = "violated", detail: str = "") -> Trace:
        """The path as a `Trace` of what it shows."""
        return Trace(self.system.name, self.trace_steps, property_id, verdict, detail)


def follow(
    system: System,
    actions: Iterable[ActionLabel],
    *,
    initial: SystemState | None = None,
    stop: bool = False,
) -> Path:
    """Apply `actions` in turn from `initial` (default: the first initial state).

    An action that is not enabled raises `NotEnabledError`, or with `stop`
    ends the path there (`Path.blocked`).
    """
    first = state = start(system, initial)
    taken: list[SystemStep] = []
    for index, label in enumerate(actions, 1):
        try:
            step_ = take(system, state, label, index)
        except NotEnabledError as exc:
            if not stop:
                raise
            return Path(system, first, tuple(taken), exc)
        taken.append(step_)
        state = step_.state
    return Path(system, first, tuple(taken))


def enabled_steps(system: System, state: SystemState) -> list[SystemStep]:
    """Every step the model takes from `state`, for a tool that draws rather than checks.

    `System.successors`, except that an action refused by its own event
    (fired where the event's policy is ``error``: an `ActionError` caused by
    a `TransitionError`) is taken as not enabled there instead of failing
    the state. Any other error - an undeclared event or a bad payload fired,
    an impure callback - is the model's and is raised.
    """
    try:
        return system.successors(state)
    except ActionError:
        pass
    steps: list[SystemStep] = []
    for label in system.labels():
        try:
            steps.append(take(system, state, label, 1))
        except NotEnabledError as exc:
            cause = exc.cause.__cause__
            if cause is not None and not isinstance(cause, TransitionError):
                raise exc.cause from cause
    return steps
