"""pytransitions -> statecore: `from_transitions`.

See `statecore.interop` for what maps one to one and what does not.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from ..definition import (
    Effect,
    Event,
    Field,
    Machine,
    Policy,
    State,
    Transition,
    Var,
)
from ..errors import (
    FinalStateTransitionError,
    UnknownEventError,
    UnknownStateError,
)
from .callbacks import all_of, check_callbacks, event_policies, guard_label_of, predicate
from .config import from_config, from_machine
from .errors import UnsupportedFeatureError, require_transitions


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
    module = require_transitions()
    if isinstance(machine_or_config, module.Machine):
        definition = from_machine(machine_or_config, module)
    elif isinstance(machine_or_config, Mapping):
        definition = from_config(machine_or_config, module)
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
    check_callbacks(definition, effects, ignore_callbacks, where)
    policy_of = event_policies(definition, triggers, policies)

    transitions: list[Transition] = []
    for t in definition.transitions:
        predicates = [
            predicate(func, target, t, definition, var_names, where)
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
                guard=all_of(predicates) if predicates else None,
                guard_label=guard_label_of(t.conditions),
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
