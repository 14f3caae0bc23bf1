"""A trace drawn over the machines: what each step did to each instance.

`trace_overlay` replays a `Trace` (`statecore.traces.path.take`) and returns, per
component, a `PathStep` for every transition taken, instance spawned or
retired and event refused, found by running each action once more through a
recording `Tx`. `DiagramError` is the error of every drawing module.
"""

from __future__ import annotations

from collections.abc import Hashable
from dataclasses import dataclass, replace
from typing import Any, Literal

from ..definition import Transition
from ..errors import StatecoreError
from ..semantics import Outcome
from ..system import Handle, System, SystemState, Tx
from ..traces.path import NotEnabledError, take
from ..traces.trace import Trace

__all__ = ["DiagramError", "PathStep", "StepKind", "trace_overlay"]


class DiagramError(StatecoreError):
    """A diagram cannot be drawn or rendered; the message says why."""


StepKind = Literal["transition", "spawn", "retire", "refused"]


@dataclass(frozen=True)
class PathStep:
    """What one trace step did to one instance of a component's machine.

    `kind` is ``transition`` (`transition` taken from `source` to `target`),
    ``spawn`` (a new instance in the initial state `target`), ``retire`` (the
    instance in `source` was removed) or ``refused`` (`event` took no
    transition; `note` says why). `step` is the trace step, 1 for the first
    action; `action` the action's label, e.g. ``abort(ext=ext0)``.
    """

    step: int
    action: str
    instance: str
    kind: StepKind
    event: str = ""
    source: str | None = None
    target: str | None = None
    transition: Transition | None = None
    note: str = ""

    def describe(self) -> str:
        """One line for a legend, e.g. ``open -> terminal_pending (save_terminal)``."""
        if self.kind == "transition":
            return f"{self.source} -> {self.target} ({self.event})"
        if self.kind == "spawn":
            return f"spawned in {self.target}"
        if self.kind == "retire":
            return f"retired from {self.source}"
        return f"{self.event}: {self.note}"


class _RecordingTx(Tx[Any]):
    """A `Tx` that also records the source state and instance of every change.

    The records are `PathStep` values without a step number or action yet.
    """

    __slots__ = ("fired",)

    def __init__(self, system: System, state: SystemState) -> None:
        super().__init__(system, state)
        self.fired: list[tuple[str, PathStep]] = []  # (component, what happened)

    def _record(self, component: str, instance: str, kind: StepKind, **what: Any) -> None:
        self.fired.append((component, PathStep(0, "", instance, kind, **what)))

    def _state_of(self, component: str, key: Hashable) -> tuple[int, str | None]:
        slot = self.result()[0].slots[self.system.slot_index(component, key)]
        return slot.generation, None if slot.snapshot is None else slot.snapshot.state

    def fire(self, target: Handle | tuple[str, Hashable], event: str, /, **payload: Any) -> Outcome:
        component, key = target[0], target[1]
        generation, before = self._state_of(component, key)
        if isinstance(target, Handle):
            generation = target.generation
        outcome = super().fire(target, event, **payload)
        instance = f"{component}[{key}]#{generation}"
        if outcome.accepted:
            self._record(
                component,
                instance,
                "transition",
                event=event,
                source=before,
                target=outcome.snapshot.state,
                transition=outcome.transition,
            )
        else:
            note = f"{outcome.status} ({outcome.reason})" if outcome.reason else outcome.status
            self._record(component, instance, "refused", event=event, source=before, note=note)
        return outcome

    def spawn(self, component: str, key: Hashable) -> Handle:
        generation, before = self._state_of(component, key)
        handle = super().spawn(component, key)
        if before is not None:  # the previous generation is retired first
            self._record(component, f"{component}[{key}]#{generation}", "retire", source=before)
        initial = self.system.component(component).machine.initial.name
        self._record(component, repr(handle), "spawn", target=initial)
        return handle

    def retire(self, target: Handle | tuple[str, Hashable]) -> bool:
        component, key = target[0], target[1]
        generation, before = self._state_of(component, key)
        done = super().retire(target)
        if done:
            self._record(component, f"{component}[{key}]#{generation}", "retire", source=before)
        return done


def trace_overlay(system: System, trace: Trace) -> dict[str, tuple[PathStep, ...]]:
    """Replay `trace` on `system`; per component name, what each step did to it.

    Each action is replayed (`statecore.traces.path.take`) from the trace's first
    state; the transitions it reports (`SystemStep.taken`) are matched with
    the source state and instance each was taken from. Every component of
    the system has an entry (empty if the trace never touched it).
    """
    result: dict[str, list[PathStep]] = {c.name: [] for c in system.components}
    if not trace.steps:
        return {name: () for name in result}
    state = trace.steps[0].state
    for number, item in enumerate(trace.steps[1:], start=1):
        label = item.action
        if label is None:
            raise DiagramError(f"trace of {trace.system!r}: step {number} has no action")
        try:
            step_ = take(system, state, label, number)
        except NotEnabledError as exc:
            raise DiagramError(
                f"trace of {trace.system!r} does not replay on system {system.name!r} "
                f"at step {number} ({label}): {exc}"
            ) from None
        tx = _RecordingTx(system, state)
        problem = ""
        try:
            system.action(label.name).run(tx, **dict(label.args))
        except Exception as exc:
            problem = f" ({exc!r})"
        recorded = [(c, p.transition.name) for c, p in tx.fired if p.transition is not None]
        reported = [(t.component, t.transition) for t in step_.taken]
        if problem or recorded != reported or tx.result()[0] != step_.state:
            raise DiagramError(
                f"system {system.name!r}: action {label} did not replay the same way "
                f"twice at step {number}{problem}; actions must be deterministic"
            )
        for component, what in tx.fired:
            result[component].append(replace(what, step=number, action=str(label)))
        state = step_.state
    return {name: tuple(steps) for name, steps in result.items()}
