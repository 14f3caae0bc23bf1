"""statecore -> pytransitions: `to_transitions` and the `TransitionsModel` it runs on.

See `statecore.interop` for what maps one to one and what does not.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable
from typing import Any

from ..definition import (
    Machine,
    Output,
    Snapshot,
    Transition,
)
from ..errors import (
    NameClashError,
    UnknownVariableError,
)
from .errors import require_transitions

# -- statecore -> transitions ----------------------------------------------


def _snapshot_of(machine: Machine, state: str, model: object) -> Snapshot:
    """The statecore snapshot a transitions model stands for, in `state`."""
    return machine.snapshot_class((state, *(getattr(model, v.name) for v in machine.variables)))


class GuardCondition:
    """A transitions condition that evaluates one statecore guard.

    It reads the source state from ``event_data.transition`` (not from the
    model, whose state attribute name is configurable) and the variables from
    the model, so the guard sees exactly the snapshot statecore would.
    `from_transitions` recognises it and takes the guard back unchanged.
    """

    def __init__(self, machine: Machine, transition: Transition) -> None:
        self.machine = machine
        self.transition = transition
        self.__name__ = transition.guard_label or "guard"

    def __call__(self, event_data: Any) -> bool:
        guard = self.transition.guard
        assert guard is not None
        snapshot = _snapshot_of(self.machine, event_data.transition.source, event_data.model)
        return bool(guard(snapshot, event_data.kwargs))

    def __repr__(self) -> str:
        return f"<statecore guard of {self.transition.name!r}>"


class EffectCallback:
    """A transitions ``after`` callback applying one statecore effect and emitter.

    It runs after the state change, so it rebuilds the *pre*-transition
    snapshot from ``event_data.transition.source``: the variables are still
    untouched then, because nothing else writes them.
    """

    def __init__(self, machine: Machine, transition: Transition) -> None:
        self.machine = machine
        self.transition = transition
        self.__name__ = transition.effect_label or "effect"

    def __call__(self, event_data: Any) -> None:
        model = event_data.model
        payload = event_data.kwargs
        before = _snapshot_of(self.machine, event_data.transition.source, model)
        emit = self.transition.emit
        outputs = tuple(emit(before, payload)) if callable(emit) else emit
        if outputs:
            emitted = getattr(model, "emitted", None)
            if isinstance(emitted, list):
                emitted.extend(outputs)
        effect = self.transition.effect
        if effect is not None:
            for name, value in (effect(before, payload) or {}).items():
                setattr(model, name, value)

    def __repr__(self) -> str:
        return f"<statecore effect of {self.transition.name!r}>"


def _transitions_owned_names(machine: Machine) -> set[str]:
    """Attribute names transitions puts on a model for `machine`."""
    names = {"trigger", "may_trigger"}
    names.update(f"is_{s.name}" for s in machine.states)
    names.update(f"may_{e.name}" for e in machine.events)
    return names


def _check_model_names(machine: Machine) -> None:
    """Refuse names transitions would silently fail to bind on the model.

    transitions only logs a warning when a trigger name is already taken on
    the model, so a variable called ``trigger`` would quietly break firing.
    """
    where = f"machine {machine.name!r}"
    owned = _transitions_owned_names(machine)
    events = {e.name for e in machine.events}
    for event in sorted(events):
        if event == "state":
            raise NameClashError(
                f"{where}: event 'state' is the attribute transitions keeps the "
                f"state in; rename the event"
            )
        if event in owned:
            raise NameClashError(
                f"{where}: event {event!r} clashes with the model method transitions "
                f"adds under that name; rename the event"
            )
    for var in machine.variables:
        if var.name in owned or var.name in events:
            raise NameClashError(
                f"{where}: variable {var.name!r} would be a model attribute clashing "
                f"with a trigger or helper transitions adds; rename the variable"
            )


def to_transitions(machine: Machine) -> dict[str, Any]:
    """Keyword arguments for ``transitions.Machine(model=..., **kwargs)``.

    Use a `TransitionsModel` (or any object holding the variables as
    attributes) as the model. The result contains ``name``, ``states``,
    ``initial``, ``transitions``, ``send_event=True`` (the conditions and
    callbacks read ``EventData``), ``auto_transitions=False`` (``to_<state>``
    triggers would leave final states) and ``ignore_invalid_triggers`` (see
    the module docstring for what per-event policies become). A new dict is
    built on every call: transitions mutates state dicts it is given.
    """
    module = require_transitions()
    _check_model_names(machine)
    state_params = inspect.signature(module.State.__init__).parameters
    final_supported = "final" in state_params
    states: list[Any] = [
        {"name": s.name, "final": True} if s.final and final_supported else s.name
        for s in machine.states
    ]
    rows: list[dict[str, Any]] = []
    for t in machine.transitions:
        row: dict[str, Any] = {
            "trigger": t.event,
            "source": t.source[0] if len(t.source) == 1 else list(t.source),
            "dest": t.target,
        }
        if t.guard is not None:
            row["conditions"] = [GuardCondition(machine, t)]
        if t.effect is not None or t.emit:
            row["after"] = [EffectCallback(machine, t)]
        rows.append(row)
    policies = {e.policy for e in machine.events}
    return {
        "name": machine.name,
        "states": states,
        "initial": machine.initial.name,
        "transitions": rows,
        "send_event": True,
        "auto_transitions": False,
        "ignore_invalid_triggers": policies != {"error"},
    }


class TransitionsModel:
    """A transitions model holding a statecore machine's variables as attributes.

    ``transitions.Machine(model=TransitionsModel(m), **to_transitions(m))``
    then runs `m` on transitions: the machine adds ``state``, ``trigger``
    and one method per event. Outputs of accepted transitions are appended to
    `emitted`. `snapshot` gives the statecore view, so a run can be compared
    with `statecore.step` value for value.
    """

    state: str
    trigger: Callable[..., bool]
    emitted: list[Output]

    def __init__(self, machine: Machine, **values: Any) -> None:
        unknown = set(values) - {v.name for v in machine.variables}
        if unknown:
            raise UnknownVariableError(
                f"machine {machine.name!r}: no variable(s) {sorted(unknown)}; "
                f"variables are {[v.name for v in machine.variables]}"
            )
        own = {"emitted", "snapshot", "values"}
        clash = own & ({v.name for v in machine.variables} | {e.name for e in machine.events})
        if clash:
            raise NameClashError(
                f"machine {machine.name!r}: {sorted(clash)[0]!r} clashes with a "
                f"TransitionsModel attribute; rename it or use a model class of your own"
            )
        self._machine = machine
        self.emitted = []
        for var in machine.variables:
            setattr(self, var.name, values.get(var.name, var.default))

    def values(self) -> dict[str, Any]:
        """The variables as a new dict (name -> value)."""
        return {v.name: getattr(self, v.name) for v in self._machine.variables}

    def snapshot(self) -> Snapshot:
        """The statecore snapshot of the current state and variables."""
        return _snapshot_of(self._machine, self.state, self)

    def __repr__(self) -> str:
        return f"TransitionsModel({self.snapshot()!r})"
