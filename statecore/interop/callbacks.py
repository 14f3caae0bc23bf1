"""pytransitions -> statecore, the code: conditions become guards, callbacks are checked.

A transitions condition (a callable, a model method or a dotted name) becomes
a statecore guard over the snapshot and the payload; event policies and
callbacks that statecore cannot derive are resolved or refused here.

See `statecore.interop` for what maps one to one and what does not.
"""

from __future__ import annotations

import importlib
import inspect
from collections.abc import Callable, Mapping, Sequence
from types import FunctionType, MethodType, SimpleNamespace
from typing import Any, Final

from ..definition import (
    POLICIES,
    Effect,
    Guard,
    Payload,
    Policy,
    Snapshot,
)
from ..errors import (
    PolicyError,
    UnknownEventError,
)
from .config import Definition, TTransition
from .errors import InteropError, UnresolvedCallbackError, UnsupportedFeatureError
from .to_transitions import GuardCondition

_MISSING: Final = object()


class _ModelView:
    """The model as a condition sees it: the snapshot's variables, else the model.

    A statecore guard must be a pure function of the snapshot, because the
    explorer evaluates it in every reachable snapshot, not only in the one the
    live model happens to be in. So attribute reads go to the snapshot first
    (``state`` and the variables), and only then to the given model object;
    the model's methods and properties are re-bound to this view, so a
    condition ``def ready(self, event): return self.count < 3`` written for
    transitions reads ``count`` from the snapshot. Assignments are refused.
    """

    __slots__ = ("_model", "_snapshot")

    def __init__(self, snapshot: Snapshot, model: object | None) -> None:
        object.__setattr__(self, "_snapshot", snapshot)
        object.__setattr__(self, "_model", model)

    def __getattr__(self, name: str) -> Any:
        snapshot: Snapshot = object.__getattribute__(self, "_snapshot")
        fields = snapshot._fields
        if name in fields:
            return snapshot[fields.index(name)]
        model = object.__getattribute__(self, "_model")
        if model is None:
            raise AttributeError(
                f"{name!r} is neither 'state' nor a variable ({list(fields[1:])}) and "
                f"no model was given to resolve it on; pass model= to from_transitions"
            )
        own = getattr(model, "__dict__", {})
        if name in own:
            return own[name]
        static = inspect.getattr_static(type(model), name, _MISSING)
        if isinstance(static, property) and static.fget is not None:
            return static.fget(self)
        if isinstance(static, FunctionType):
            return MethodType(static, self)
        return getattr(model, name)

    def __setattr__(self, name: str, value: Any) -> None:
        raise AttributeError(
            f"a condition tried to set {name!r}: conditions become statecore guards, "
            f"which must not change anything; give the update in effects= instead"
        )


class _EventShim:
    """What a ``send_event=True`` condition gets instead of transitions' EventData.

    Only the parts a pure condition can use: ``kwargs`` (the payload),
    ``args`` (always empty), ``model`` (a `_ModelView`), and the names in
    ``event.name``, ``state.name``, ``transition.source`` / ``.dest``.
    """

    __slots__ = ("args", "event", "kwargs", "model", "state", "transition")

    def __init__(
        self, trigger: str, dest: str | None, snapshot: Snapshot, payload: Payload, model: object
    ) -> None:
        source = snapshot.state
        self.kwargs = payload
        self.args: tuple[Any, ...] = ()
        self.model = _ModelView(snapshot, model)
        self.event = SimpleNamespace(name=trigger)
        self.state = SimpleNamespace(name=source)
        self.transition = SimpleNamespace(source=source, dest=source if dest is None else dest)

    def __getattr__(self, name: str) -> Any:
        raise AttributeError(
            f"conditions converted by statecore get a stand-in for EventData with only "
            f"kwargs, args, model, event, state and transition; {name!r} is not available"
        )


Predicate = Callable[[Snapshot, Payload], bool]


def _import_dotted(name: str) -> Any:
    module_name, _, attr = name.rpartition(".")
    if not module_name:
        return _MISSING
    try:
        return getattr(importlib.import_module(module_name), attr)
    except (ImportError, AttributeError):
        return _MISSING


def _label(func: Any) -> str:
    if isinstance(func, str):
        return func
    name = getattr(func, "__name__", "")
    return name if name and name != "<lambda>" else "condition"


def predicate(
    func: Any,
    target: bool,
    t: TTransition,
    definition: Definition,
    variables: frozenset[str],
    where: str,
) -> Predicate:
    """One transitions condition as a pure ``(snapshot, payload) -> bool``.

    The result is compared with ``==`` as transitions does (a condition
    returning ``1`` passes, ``2`` does not).
    """
    if isinstance(func, GuardCondition) and target:
        guard = func.transition.guard
        assert guard is not None
        return guard
    model, send_event, trigger, dest = definition.model, definition.send_event, t.trigger, t.dest
    if isinstance(func, str):
        name = func
        on_model = (
            model is not None and inspect.getattr_static(model, name, _MISSING) is not _MISSING
        )
        if not (name in variables or on_model):
            imported = _import_dotted(name)
            if imported is _MISSING:
                raise UnresolvedCallbackError(
                    f"{where}: condition {name!r} of trigger {trigger!r} is neither a "
                    f"variable ({sorted(variables)}), nor an attribute of the model "
                    f"({'none given: pass model=' if model is None else type(model).__name__})"
                    f", nor an importable dotted path"
                )
            func = imported
        else:

            def by_name(s: Snapshot, p: Payload) -> bool:
                value = getattr(_ModelView(s, model), name)
                if callable(value):
                    value = (
                        value(_EventShim(trigger, dest, s, p, model)) if send_event else value(**p)
                    )
                return bool(value == target)

            return by_name
    if not callable(func):
        raise InteropError(f"{where}: condition {func!r} of trigger {trigger!r} is not callable")
    call: Callable[..., Any] = func
    if send_event:

        def with_event(s: Snapshot, p: Payload) -> bool:
            return bool(call(_EventShim(trigger, dest, s, p, model)) == target)

        return with_event

    def with_kwargs(s: Snapshot, p: Payload) -> bool:
        return bool(call(**p) == target)

    return with_kwargs


def all_of(predicates: Sequence[Predicate]) -> Guard:
    if len(predicates) == 1:
        return predicates[0]
    preds = tuple(predicates)

    def guard(s: Snapshot, p: Payload) -> bool:
        return all(pred(s, p) for pred in preds)

    return guard


def guard_label_of(conditions: Sequence[tuple[Any, bool]]) -> str:
    parts = []
    for func, target in conditions:
        label = func.transition.guard_label if isinstance(func, GuardCondition) else _label(func)
        parts.append(label if target else f"not {label}")
    return " and ".join(parts)


def event_policies(
    definition: Definition, events: Sequence[str], policies: Policy | Mapping[str, Policy] | None
) -> dict[str, Policy]:
    where = f"machine {definition.name or 'transitions'!r}"
    if isinstance(policies, str):
        if policies not in POLICIES:
            raise PolicyError(f"{where}: policy {policies!r} is not one of {list(POLICIES)}")
        return {e: policies for e in events}
    given = dict(policies or {})
    unknown = set(given) - set(events)
    if unknown:
        raise UnknownEventError(
            f"{where}: policies= names unknown trigger(s) {sorted(unknown)}; triggers are {events}"
        )
    if set(given) == set(events):
        return given
    mixed = [
        s.name for s in definition.states if s.ignore is not None and s.ignore != definition.ignore
    ]
    if mixed:
        raise UnsupportedFeatureError(
            f"{where}: state(s) {mixed} override ignore_invalid_triggers; statecore "
            f"policies are per event, not per state, so pass policies= for every trigger"
        )
    default: Policy = "reject" if definition.ignore else "error"
    return {e: given.get(e, default) for e in events}


def check_callbacks(
    definition: Definition, effects: Mapping[str, Effect], ignore_callbacks: bool, where: str
) -> None:
    """Refuse side-effect callbacks nobody said how to express (see module docstring)."""
    if ignore_callbacks:
        return
    hint = (
        "statecore effects are pure and cannot be read out of callback code: give the "
        "variable updates as effects={trigger: fn} and pass ignore_callbacks=True if "
        "the callbacks do nothing else that matters"
    )
    if definition.machine_callbacks:
        raise UnsupportedFeatureError(
            f"{where}: machine callbacks {definition.machine_callbacks}; {hint}"
        )
    for s in definition.states:
        if s.callbacks:
            raise UnsupportedFeatureError(
                f"{where}: state {s.name!r} has on_enter/on_exit callbacks {s.callbacks!r}; {hint}"
            )
    for t in definition.transitions:
        if t.callbacks and t.trigger not in effects:
            raise UnsupportedFeatureError(
                f"{where}: trigger {t.trigger!r} has before/after callbacks {t.callbacks!r} "
                f"and no effect; {hint}"
            )
