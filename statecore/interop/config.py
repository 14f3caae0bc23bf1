"""pytransitions -> statecore, the definition: states, transitions and options of a config.

`from_config` and `from_machine` read a ``transitions.Machine`` (or the dict
of its keyword arguments) into a `Definition`: plain states and transition
rows, refusing what statecore cannot express.

See `statecore.interop` for what maps one to one and what does not.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from enum import Enum
from types import ModuleType
from typing import Any, Final

from ..definition import (
    Effect,
    Emitter,
    Output,
)
from ..errors import (
    InitialStateError,
)
from .errors import InteropError, UnsupportedFeatureError
from .to_transitions import EffectCallback

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


# -- transitions -> statecore ----------------------------------------------


@dataclass
class _TState:
    name: str
    final: bool
    ignore: bool | None
    callbacks: list[Any]


@dataclass
class TTransition:
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
class Definition:
    name: str
    states: list[_TState]
    initial: str
    transitions: list[TTransition]
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


def _recover(t: TTransition, after: Iterable[Any], before: Iterable[Any]) -> None:
    """Take statecore effects back from `to_transitions` callbacks; keep the rest."""
    t.callbacks.extend(before)
    for callback in after:
        if isinstance(callback, EffectCallback):
            t.effect = callback.transition.effect
            t.emit = callback.transition.emit
            t.effect_label = callback.transition.effect_label
        else:
            t.callbacks.append(callback)


def from_config(config: Mapping[str, Any], module: ModuleType) -> Definition:
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
    transitions: list[TTransition] = []
    for row in _listify(config.get("transitions")):
        trigger, sources, wildcard, dest, data = _parse_transition_row(row, names, where)
        t = TTransition(
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
    return Definition(
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


def from_machine(machine: Any, module: ModuleType) -> Definition:
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
    transitions: list[TTransition] = []
    for trigger, event in machine.events.items():
        if trigger in auto:
            continue
        for source, rows in event.transitions.items():
            for row in rows:
                t = TTransition(
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
    return Definition(
        name=machine.name.rstrip(": ") if machine.name else "",
        states=states,
        initial=_state_name(machine.initial, where),
        transitions=transitions,
        send_event=bool(machine.send_event),
        ignore=bool(machine.ignore_invalid_triggers),
        machine_callbacks=[k for k in _CALLBACK_KEYS if getattr(machine, k)],
        model=models[0] if len(models) == 1 else None,
    )
