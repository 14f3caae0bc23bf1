"""Bring pytransitions machines in and out of statecore (the ``interop`` extra).

Teams that already run `transitions <https://github.com/pytransitions/transitions>`_
should not have to rewrite a lifecycle by hand to check it with statecore, and
teams that define it in statecore may still want to run it on transitions. So:

* `to_transitions(machine)` returns keyword arguments for
  ``transitions.Machine(model=TransitionsModel(machine), **kwargs)``. The
  model holds the statecore variables as plain attributes; each guard becomes
  a condition and each effect (and emitter) an ``after`` callback that reads
  those attributes as the snapshot and ``EventData.kwargs`` as the payload.
* `from_transitions(machine_or_config, ...)` turns a ``transitions.Machine``
  or the dict of its keyword arguments into a validated statecore `Machine`.

``transitions`` is imported lazily, inside the functions, so that
``import statecore`` stays standard-library only; without it they raise an
`ImportError` that names ``pip install 'statecore[interop]'``.

What maps one to one:

=====================================  =========================================
statecore                              transitions
=====================================  =========================================
`State` (``final=True``)               state name (``{"name": .., "final": True}``)
initial state                          ``initial``
`Transition` sources                   ``source`` (a name, a list, or ``'*'``)
target ``None`` (stay, no change)      ``dest=None`` (internal) or ``'='``
                                       (reflexive, i.e. exit and re-enter)
guard ``(snapshot, payload) -> bool``  ``conditions`` / ``unless``
effect ``-> {var: value}``             ``after`` callback setting attributes
payload fields                         trigger keyword arguments
=====================================  =========================================

What does not, and why:

* **Policies.** statecore decides per *event* what a missing transition
  means (``reject``, ``ignore`` or ``error``); transitions decides per machine
  or per *state* (``ignore_invalid_triggers``), and only when the state has
  no transition at all for the trigger: when every condition fails the
  trigger always returns ``False``. `to_transitions` therefore sets
  ``ignore_invalid_triggers=False`` only when every event's policy is
  ``error`` (and even then failing guards return ``False`` instead of
  raising); otherwise ``True``, so ``error`` events fail open in transitions.
  ``reject`` and ``ignore`` both become a ``False`` return. `from_transitions`
  maps ``ignore_invalid_triggers=True`` to ``reject`` and the default (raise)
  to ``error``, unless ``policies=`` says otherwise.
* **Internal vs reflexive.** statecore has no entry or exit actions, so
  ``dest=None`` and ``dest='='`` mean the same thing to it (target ``None``).
  `to_transitions` emits ``dest=None``: there is no state change, so no exit
  or entry callbacks a user might add would run, just as in statecore.
* **Final states.** In transitions ``final=True`` only fires ``on_final``; a
  final state may still have outgoing transitions. In statecore a final state
  has none, so such a definition is refused (`FinalStateTransitionError`).
* **Hot states** have no transitions counterpart: pass ``hot=`` on the way in.
* **Callbacks** (``before``, ``after``, ``on_enter``, ``on_exit`` and the
  machine-level ones) mutate a model; statecore effects are pure functions
  that return the variable updates, so they cannot be derived from code.
  Give them explicitly with ``effects={trigger: fn}``; a transition whose
  trigger has no effect but has callbacks is refused unless
  ``ignore_callbacks=True`` says the callbacks do not touch the variables.
* **Unsupported outright**, because they change what conditions see or what
  a trigger returns: ``prepare`` / ``prepare_event`` callbacks, nested
  (hierarchical) states, asynchronous machines, ``queued=True``, enum states
  and ``ordered_transitions``. Auto transitions (``to_<state>()``) are
  skipped: they leave every state, final ones included.
* **Payload checks and outputs.** transitions accepts any keyword arguments;
  statecore's `step` is what checks them against the event's fields.
  Outputs a statecore transition emits are appended to
  `TransitionsModel.emitted`.
"""

from __future__ import annotations

import importlib
import inspect
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from enum import Enum
from types import FunctionType, MethodType, ModuleType, SimpleNamespace
from typing import Any, Final

from .definition import (
    POLICIES,
    Effect,
    Emitter,
    Event,
    Field,
    Guard,
    Machine,
    Output,
    Payload,
    Policy,
    Snapshot,
    State,
    Transition,
    Var,
)
from .errors import (
    DefinitionError,
    FinalStateTransitionError,
    InitialStateError,
    NameClashError,
    PolicyError,
    UnknownEventError,
    UnknownStateError,
    UnknownVariableError,
)

__all__ = [
    "INSTALL_HINT",
    "InteropError",
    "TransitionsModel",
    "UnresolvedCallbackError",
    "UnsupportedFeatureError",
    "from_transitions",
    "to_transitions",
]

INSTALL_HINT: Final = "pip install 'statecore[interop]'"

WILDCARD_ALL: Final = "*"
WILDCARD_SAME: Final = "="

# transitions.Machine keyword arguments `from_transitions` understands; the
# values of the callback ones are side effects (see the module docstring).
_CALLBACK_KEYS: Final = (
    "before_state_change",
    "after_state_change",
    "finalize_event",
    "on_exception",
    "on_final",
)
_CONFIG_KEYS: Final = frozenset(
    {
        "states",
        "transitions",
        "initial",
        "name",
        "model",
        "send_event",
        "auto_transitions",
        "ignore_invalid_triggers",
        "model_attribute",
        "model_override",
        "prepare_event",
        "queued",
        "ordered_transitions",
        *_CALLBACK_KEYS,
    }
)
_STATE_KEYS: Final = frozenset({"name", "final", "ignore_invalid_triggers", "on_enter", "on_exit"})
_NESTED_STATE_KEYS: Final = frozenset({"children", "states", "parallel", "initial"})
_TRANSITION_KEYS: Final = (
    "trigger",
    "source",
    "dest",
    "conditions",
    "unless",
    "before",
    "after",
    "prepare",
)


class InteropError(DefinitionError):
    """A transitions definition cannot be turned into a statecore machine, or back."""


class UnsupportedFeatureError(InteropError):
    """The definition uses a transitions feature statecore cannot express."""


class UnresolvedCallbackError(InteropError):
    """A condition named by a string is neither a variable, a model attribute nor importable."""


def _require_transitions() -> ModuleType:
    """Import transitions, or say how to install it (it is an optional extra).

    `importlib` rather than an import statement, so that ``mypy --strict
    statecore`` also passes where the extra is not installed.
    """
    try:
        transitions = importlib.import_module("transitions")
    except ImportError as exc:
        raise ImportError(
            "statecore.interop needs the pytransitions package ('transitions'), "
            f"which is not installed; install it with: {INSTALL_HINT}"
        ) from exc
    return transitions


# -- statecore -> transitions ----------------------------------------------


def _snapshot_of(machine: Machine, state: str, model: object) -> Snapshot:
    """The statecore snapshot a transitions model stands for, in `state`."""
    return machine.snapshot_class((state, *(getattr(model, v.name) for v in machine.variables)))


class _GuardCondition:
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


class _EffectCallback:
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
    module = _require_transitions()
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
            row["conditions"] = [_GuardCondition(machine, t)]
        if t.effect is not None or t.emit:
            row["after"] = [_EffectCallback(machine, t)]
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


# -- transitions -> statecore ----------------------------------------------


@dataclass
class _TState:
    name: str
    final: bool
    ignore: bool | None
    callbacks: list[Any]


@dataclass
class _TTransition:
    trigger: str
    sources: tuple[str, ...]
    dest: str | None  # None: stay (internal, or reflexive '=')
    conditions: list[tuple[Any, bool]]  # (callable or name, required result)
    callbacks: list[Any]  # before + after, unrecognised
    prepare: list[Any]
    effect: Effect | None = None  # recovered from a to_transitions callback
    emit: tuple[Output, ...] | Emitter = ()
    effect_label: str = ""
    wildcard: bool = False


@dataclass
class _Definition:
    name: str
    states: list[_TState]
    initial: str
    transitions: list[_TTransition]
    send_event: bool
    ignore: bool
    machine_callbacks: list[str] = field(default_factory=list)
    model: object | None = None


def _listify(value: Any) -> list[Any]:
    if value is None:
        return []
    if isinstance(value, (list, tuple)):
        return list(value)
    return [value]


def _state_name(value: Any, where: str) -> str:
    """The name of a state given as a string or a transitions `State`; enums are refused."""
    if not isinstance(value, str):
        if isinstance(value, Enum) or isinstance(getattr(value, "value", None), Enum):
            raise UnsupportedFeatureError(
                f"{where}: enum state {value!r} is not supported; use state names (strings)"
            )
        value = getattr(value, "name", value)
    if not isinstance(value, str):
        raise InteropError(f"{where}: {value!r} is not a state name")
    return value


def _parse_state(value: Any, module: ModuleType, where: str) -> _TState:
    if isinstance(value, Mapping):
        nested = _NESTED_STATE_KEYS & set(value)
        if nested:
            raise UnsupportedFeatureError(
                f"{where}: state {value.get('name')!r} has {sorted(nested)}: nested "
                f"(hierarchical) states are not supported; flatten the machine"
            )
        extra = set(value) - _STATE_KEYS
        if extra:
            raise UnsupportedFeatureError(
                f"{where}: state {value.get('name')!r} uses option(s) {sorted(extra)}, "
                f"which statecore cannot express; supported are {sorted(_STATE_KEYS)}"
            )
        if "name" not in value:
            raise InteropError(f"{where}: state {dict(value)!r} has no 'name'")
        return _TState(
            _state_name(value["name"], where),
            bool(value.get("final", False)),
            value.get("ignore_invalid_triggers"),
            _listify(value.get("on_enter")) + _listify(value.get("on_exit")),
        )
    if isinstance(value, module.State):
        if getattr(value, "states", None):
            raise UnsupportedFeatureError(
                f"{where}: state {value.name!r} has children: nested (hierarchical) "
                f"states are not supported; flatten the machine"
            )
        return _TState(
            _state_name(value, where),
            bool(getattr(value, "final", False)),
            value.ignore_invalid_triggers,
            list(value.on_enter) + list(value.on_exit),
        )
    return _TState(_state_name(value, where), False, None, [])


def _parse_transition_row(
    row: Any, states: Sequence[str], where: str
) -> tuple[str, list[str], bool, Any, dict[str, Any]]:
    """Normalise one ``transitions=`` entry (a dict or a positional list)."""
    if isinstance(row, Mapping):
        data = dict(row)
    elif isinstance(row, (list, tuple)):
        if len(row) > len(_TRANSITION_KEYS):
            raise UnsupportedFeatureError(f"{where}: transition {row!r} has too many items")
        data = dict(zip(_TRANSITION_KEYS, row))
    else:
        raise InteropError(f"{where}: transition {row!r} is neither a dict nor a list")
    extra = set(data) - set(_TRANSITION_KEYS)
    if extra:
        raise UnsupportedFeatureError(
            f"{where}: transition {data!r} uses option(s) {sorted(extra)}, which "
            f"statecore cannot express"
        )
    for key in ("trigger", "source", "dest"):
        if key not in data:
            raise InteropError(f"{where}: transition {data!r} has no {key!r}")
    trigger = data["trigger"]
    if not isinstance(trigger, str):
        raise InteropError(f"{where}: trigger {trigger!r} is not a string")
    source = data["source"]
    wildcard = source == WILDCARD_ALL
    sources = list(states) if wildcard else [_state_name(s, where) for s in _listify(source)]
    dest = data["dest"]
    if dest is not None and dest != WILDCARD_SAME:
        dest = _state_name(dest, where)
    return trigger, sources, wildcard, dest, data


def _conditions(data: Mapping[str, Any]) -> list[tuple[Any, bool]]:
    return [(c, True) for c in _listify(data.get("conditions"))] + [
        (c, False) for c in _listify(data.get("unless"))
    ]


def _recover(t: _TTransition, after: Iterable[Any], before: Iterable[Any]) -> None:
    """Take statecore effects back from `to_transitions` callbacks; keep the rest."""
    t.callbacks.extend(before)
    for callback in after:
        if isinstance(callback, _EffectCallback):
            t.effect = callback.transition.effect
            t.emit = callback.transition.emit
            t.effect_label = callback.transition.effect_label
        else:
            t.callbacks.append(callback)


def _from_config(config: Mapping[str, Any], module: ModuleType) -> _Definition:
    where = f"transitions config {config.get('name')!r}" if config.get("name") else "config"
    extra = set(config) - _CONFIG_KEYS
    if extra:
        raise UnsupportedFeatureError(
            f"{where}: option(s) {sorted(extra)} cannot be expressed in statecore; "
            f"supported are {sorted(_CONFIG_KEYS)}"
        )
    _refuse_machine_options(
        where,
        prepare_event=_listify(config.get("prepare_event")),
        queued=bool(config.get("queued", False)),
        ordered=bool(config.get("ordered_transitions", False)),
    )
    raw_states = config.get("states")
    if raw_states is None:
        raise InteropError(f"{where}: no 'states'")
    if isinstance(raw_states, type) and issubclass(raw_states, Enum):
        raise UnsupportedFeatureError(
            f"{where}: enum states are not supported; use state names (strings)"
        )
    states = [_parse_state(s, module, where) for s in _listify(raw_states)]
    if "initial" not in config or config["initial"] is None:
        raise InitialStateError(
            f"{where}: no 'initial'; transitions would invent a state named "
            f"'initial', statecore needs it spelt out"
        )
    initial = _state_name(config["initial"], where)
    if initial not in {s.name for s in states}:  # transitions adds it, so do we
        states.append(_TState(initial, False, None, []))
    names = [s.name for s in states]
    transitions: list[_TTransition] = []
    for row in _listify(config.get("transitions")):
        trigger, sources, wildcard, dest, data = _parse_transition_row(row, names, where)
        t = _TTransition(
            trigger,
            tuple(sources),
            None if dest == WILDCARD_SAME else dest,
            _conditions(data),
            [],
            _listify(data.get("prepare")),
            wildcard=wildcard,
        )
        _recover(t, _listify(data.get("after")), _listify(data.get("before")))
        transitions.append(t)
    models = [m for m in _listify(config.get("model")) if not isinstance(m, str)]
    return _Definition(
        name=str(config.get("name") or ""),
        states=states,
        initial=initial,
        transitions=transitions,
        send_event=bool(config.get("send_event", False)),
        ignore=bool(config.get("ignore_invalid_triggers", False)),
        machine_callbacks=[k for k in _CALLBACK_KEYS if _listify(config.get(k))],
        model=models[0] if len(models) == 1 else None,
    )


def _refuse_machine_options(
    where: str, *, prepare_event: list[Any], queued: bool, ordered: bool
) -> None:
    if prepare_event:
        raise UnsupportedFeatureError(
            f"{where}: prepare_event callbacks run before the conditions and may change "
            f"what they see, which a pure statecore guard cannot express; remove them"
        )
    if queued:
        raise UnsupportedFeatureError(
            f"{where}: queued=True makes every trigger return True before its "
            f"conditions are checked; statecore steps are synchronous"
        )
    if ordered:
        raise UnsupportedFeatureError(
            f"{where}: ordered_transitions=True is not supported; list the "
            f"'next_state' transitions explicitly"
        )


def _from_machine(machine: Any, module: ModuleType) -> _Definition:
    where = f"transitions machine {machine.name.rstrip(': ')!r}" if machine.name else "machine"
    for cls in type(machine).__mro__:
        if cls.__name__ == "HierarchicalMachine":
            raise UnsupportedFeatureError(
                f"{where}: a {type(machine).__name__} has nested (hierarchical) states, "
                f"which statecore does not support; flatten the machine"
            )
        if cls.__name__ == "AsyncMachine":
            raise UnsupportedFeatureError(
                f"{where}: a {type(machine).__name__} runs asynchronous callbacks; "
                f"statecore guards are synchronous pure functions"
            )
    _refuse_machine_options(
        where,
        prepare_event=list(machine.prepare_event),
        queued=bool(machine.has_queue),
        ordered=False,
    )
    states = [_parse_state(s, module, where) for s in machine.states.values()]
    names = [s.name for s in states]
    auto: set[str] = set()
    if machine.auto_transitions:
        prefix = "to_" if machine.model_attribute == "state" else f"to_{machine.model_attribute}_"
        auto = {prefix + name for name in names}
    transitions: list[_TTransition] = []
    for trigger, event in machine.events.items():
        if trigger in auto:
            continue
        for source, rows in event.transitions.items():
            for row in rows:
                t = _TTransition(
                    trigger,
                    (source,),
                    row.dest,
                    [(c.func, c.target) for c in row.conditions],
                    [],
                    list(row.prepare),
                )
                _recover(t, row.after, row.before)
                transitions.append(t)
    models = list(machine.models)
    return _Definition(
        name=machine.name.rstrip(": ") if machine.name else "",
        states=states,
        initial=_state_name(machine.initial, where),
        transitions=transitions,
        send_event=bool(machine.send_event),
        ignore=bool(machine.ignore_invalid_triggers),
        machine_callbacks=[k for k in _CALLBACK_KEYS if getattr(machine, k)],
        model=models[0] if len(models) == 1 else None,
    )


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


def _predicate(
    func: Any,
    target: bool,
    t: _TTransition,
    definition: _Definition,
    variables: frozenset[str],
    where: str,
) -> Predicate:
    """One transitions condition as a pure ``(snapshot, payload) -> bool``.

    The result is compared with ``==`` as transitions does (a condition
    returning ``1`` passes, ``2`` does not).
    """
    if isinstance(func, _GuardCondition) and target:
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


def _all_of(predicates: Sequence[Predicate]) -> Guard:
    if len(predicates) == 1:
        return predicates[0]
    preds = tuple(predicates)

    def guard(s: Snapshot, p: Payload) -> bool:
        return all(pred(s, p) for pred in preds)

    return guard


def _guard_label(conditions: Sequence[tuple[Any, bool]]) -> str:
    parts = []
    for func, target in conditions:
        label = func.transition.guard_label if isinstance(func, _GuardCondition) else _label(func)
        parts.append(label if target else f"not {label}")
    return " and ".join(parts)


def _policies(
    definition: _Definition, events: Sequence[str], policies: Policy | Mapping[str, Policy] | None
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


def _check_callbacks(
    definition: _Definition, effects: Mapping[str, Effect], ignore_callbacks: bool, where: str
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


def from_transitions(
    machine_or_config: Any,
    *,
    name: str | None = None,
    variables: Iterable[Var] = (),
    event_fields: Mapping[str, Iterable[Field]] | None = None,
    effects: Mapping[str, Effect] | None = None,
    model: object | None = None,
    policies: Policy | Mapping[str, Policy] | None = None,
    final: Iterable[str] = (),
    hot: Iterable[str] = (),
    ignore_callbacks: bool = False,
    check_limit: int = 200_000,
) -> Machine:
    """Turn a ``transitions.Machine`` or its keyword-argument dict into a statecore `Machine`.

    transitions keeps its data in the model, statecore in the definition, so
    what transitions leaves implicit is given here: `variables` (the model
    attributes conditions read and effects write), `event_fields` (trigger ->
    payload `Field` s, i.e. the trigger's keyword arguments; none if absent),
    `effects` (trigger -> pure effect ``(snapshot, payload) -> {var: value}``
    standing for that trigger's ``before``/``after`` callbacks), `model` (the
    object string conditions are resolved on; defaults to the machine's only
    model or the config's ``model``), `policies` (one policy, or trigger ->
    policy; by default ``reject`` if ``ignore_invalid_triggers`` else
    ``error``), extra `final` states and `hot` states (transitions has no
    hot states). `name` defaults to the transitions machine's name.
    `ignore_callbacks=True` accepts callbacks no effect stands for, declaring
    that they do not change the variables; `check_limit` is passed on to
    `Machine`.

    Conditions and ``unless`` become the guard (all must hold). A string
    names a variable, an attribute of `model` (methods and properties are
    re-bound so that ``self.<variable>`` reads the snapshot being checked) or
    a dotted import path, as in transitions. A callable is called with an
    EventData stand-in exposing ``kwargs`` (``send_event=True``) or with the
    payload as keyword arguments (``send_event=False``). Guards and effects
    produced by `to_transitions` are recognised and taken back unchanged.

    Raises a `DefinitionError` subclass: `UnsupportedFeatureError` for what
    statecore cannot express, `UnresolvedCallbackError` for a condition name
    that resolves to nothing, and the usual validation errors (unknown or
    unreachable states, non-determinism, ...) from building the `Machine`.
    """
    module = _require_transitions()
    if isinstance(machine_or_config, module.Machine):
        definition = _from_machine(machine_or_config, module)
    elif isinstance(machine_or_config, Mapping):
        definition = _from_config(machine_or_config, module)
    else:
        raise TypeError(
            f"from_transitions expects a transitions.Machine or a dict of its keyword "
            f"arguments, not {type(machine_or_config).__name__}"
        )
    if model is not None:
        definition.model = model
    machine_name = name or definition.name or "machine"
    where = f"machine {machine_name!r}"
    variables = tuple(variables)
    var_names = frozenset(v.name for v in variables)
    effects = dict(effects or {})
    state_names = [s.name for s in definition.states]

    triggers: list[str] = []
    for t in definition.transitions:
        if t.trigger not in triggers:
            triggers.append(t.trigger)
    for label, keys in (("event_fields", event_fields or {}), ("effects", effects)):
        unknown = set(keys) - set(triggers)
        if unknown:
            raise UnknownEventError(
                f"{where}: {label}= names unknown trigger(s) {sorted(unknown)}; "
                f"triggers are {triggers}"
            )
    final_names, hot_names = set(final), set(hot)
    for label, names in (("final", final_names), ("hot", hot_names)):
        unknown = names - set(state_names)
        if unknown:
            raise UnknownStateError(
                f"{where}: {label}= names unknown state(s) {sorted(unknown)}; "
                f"states are {state_names}"
            )
    final_names.update(s.name for s in definition.states if s.final)
    for t in definition.transitions:
        for source in t.sources:
            if source in final_names:
                how = "its source '*' includes" if t.wildcard else "it leaves"
                raise FinalStateTransitionError(
                    f"{where}: trigger {t.trigger!r}: {how} final state {source!r}. In "
                    f"transitions 'final' only fires on_final; in statecore a final state "
                    f"has no outgoing transition, so list the sources explicitly or do "
                    f"not mark {source!r} final"
                )
        if t.prepare:
            raise UnsupportedFeatureError(
                f"{where}: trigger {t.trigger!r} has prepare callbacks {t.prepare!r}; they "
                f"run before the conditions and may change what they see, which a pure "
                f"statecore guard cannot express; fold them into the conditions"
            )
    _check_callbacks(definition, effects, ignore_callbacks, where)
    policy_of = _policies(definition, triggers, policies)

    transitions: list[Transition] = []
    for t in definition.transitions:
        predicates = [
            _predicate(func, target, t, definition, var_names, where)
            for func, target in t.conditions
        ]
        effect, effect_label = t.effect, t.effect_label
        if t.trigger in effects:
            effect, effect_label = effects[t.trigger], ""
        transitions.append(
            Transition(
                t.sources,
                t.trigger,
                t.dest,
                guard=_all_of(predicates) if predicates else None,
                guard_label=_guard_label(t.conditions),
                effect=effect,
                effect_label=effect_label,
                emit=t.emit,
            )
        )
    fields = event_fields or {}
    return Machine(
        machine_name,
        states=[
            State(
                s.name,
                initial=s.name == definition.initial,
                final=s.name in final_names,
                hot=s.name in hot_names,
            )
            for s in definition.states
        ],
        variables=variables,
        events=[Event(e, fields.get(e, ()), policy=policy_of[e]) for e in triggers],
        transitions=transitions,
        check_limit=check_limit,
    )
