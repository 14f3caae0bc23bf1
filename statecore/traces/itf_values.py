"""ITF values: statecore values to and from the JSON of an ITF trace.

The encoding is described in `statecore.traces.itf`: integers as ``#bigint``,
tuples as lists, frozensets as ``#set``, and the statecore types as ITF
variants (``{"tag": T, "value": V}``). `encode_value` and `decode_value` are
inverses; `same_state` compares two states as their files would; bounded
checks (`MAX_DIGITS`, `MAX_DEPTH`) keep a value from anywhere from costing
more than it should. `TraceFileError` is the error of every trace file
problem, here and in `statecore.traces.itf`.
"""

from __future__ import annotations

import collections
import functools
import json
import re
from collections.abc import Hashable, Mapping, Sequence
from typing import NamedTuple, TypeAlias

from ..definition import Machine, Output, Snapshot
from ..errors import StatecoreError
from ..system import Handle, ModelValue, Slot, System, SystemState

__all__ = [
    "MAX_DEPTH",
    "MAX_DIGITS",
    "Json",
    "TraceFileError",
    "Unserializable",
    "decode_value",
    "encode_value",
    "same_state",
    "state_diff",
    "variable_names",
]

Json: TypeAlias = bool | int | float | str | list["Json"] | dict[str, "Json"] | None

_BIGINT = re.compile(r"-?[0-9]+")
_SPECIAL = frozenset({"#bigint", "#tup", "#set", "#map", "#unserializable"})
# A file is data from anywhere: bound what reading it may cost. Python itself
# refuses to convert integers of more than 4,300 digits; statecore values nest
# about ten JSON levels deep, so a hundred leaves room for any model.
MAX_DIGITS = 4300
MAX_DEPTH = 100

_REGENERATE = "the file is corrupt or not a statecore trace: regenerate it"


class TraceFileError(StatecoreError):
    """A trace file (or an in-memory trace) that does not fit the model.

    The message names the file, the step (the index into ``"states"``; 0 is
    the initial state) and the problem, so that a stale counterexample in a
    bug report says exactly where it stopped matching. `path`, `step` and
    `problem` are kept as attributes for tools.
    """

    def __init__(self, path: str | None, step: int | None, problem: str) -> None:
        self.path = path
        self.step = step
        self.problem = problem
        where = path if path is not None else "trace"
        if step is not None:
            where += f": step {step}"
        super().__init__(f"{where}: {problem}")


class Unserializable(NamedTuple):
    """A value the file could only record as ``{"#unserializable": text}``.

    Reading without verification (``read_itf(..., verify=False)``) leaves it
    in the state; verification replaces it with the model's value whose
    ``repr`` is `text`.
    """

    text: str

    def __repr__(self) -> str:
        return f"<unserializable {self.text}>"


class _DecodeError(Exception):
    """A value that is not a statecore value; `where` is its path inside the variable."""

    def __init__(self, where: str, problem: str) -> None:
        super().__init__(problem)
        self.where = where
        self.problem = problem


# -- variables -------------------------------------------------------------------


def variable_names(system: System) -> tuple[str, ...]:
    """The ITF variables of `system`: ``component[key]`` per slot, then the globals.

    Raises `TraceFileError` if two keys of a component print the same (``1``
    and ``"1"``), because the file could not tell their slots apart.
    """
    names = [f"{component}[{key}]" for component, key in system.slot_keys()]
    names.extend(g.name for g in system.globals)
    if len(set(names)) != len(names):
        dup = next(n for n in names if names.count(n) > 1)
        raise TraceFileError(
            None, None, f"system {system.name!r}: two slots are both named {dup!r} in ITF"
        )
    return tuple(names)


def _flatten(state: SystemState) -> tuple[Hashable, ...]:
    return (*state.slots, *state.values)


# -- values ------------------------------------------------------------------------


def _variant(tag: str, value: Json) -> Json:
    return {"tag": tag, "value": value}


def _bigint(value: int) -> Json:
    return {"#bigint": str(value)}


def _set_order(item: Json) -> str:
    return json.dumps(item, sort_keys=True, ensure_ascii=False)


def encode_value(value: object) -> Json:
    """`value` as an ITF value (see the module docstring for the encoding).

    Types are matched exactly (``type(x) is int``), so an `IntEnum` or a
    tuple subclass the encoding does not know becomes ``#unserializable``
    rather than silently turning into something that reads back different.
    """
    kind = type(value)
    if value is None:
        return _variant("None", {})
    if kind is bool or kind is str:
        return value  # type: ignore[return-value]
    if kind is int:
        assert isinstance(value, int)
        return _bigint(value)
    if kind is float:
        return _variant("Float", repr(value))
    if kind is tuple:
        assert isinstance(value, tuple)
        return [encode_value(item) for item in value]
    if kind is frozenset:
        assert isinstance(value, frozenset)
        return {"#set": sorted((encode_value(item) for item in value), key=_set_order)}
    if kind is ModelValue:
        assert isinstance(value, ModelValue)
        return _variant("ModelValue", {"group": value.group, "index": _bigint(value[1])})
    if kind is Handle:
        assert isinstance(value, Handle)
        return _variant(
            "Handle",
            {
                "component": value.component,
                "key": encode_value(value.key),
                "generation": _bigint(value.generation),
            },
        )
    if kind is Slot:
        assert isinstance(value, Slot)
        return _variant(
            "Slot",
            {"generation": _bigint(value.generation), "snapshot": encode_value(value.snapshot)},
        )
    if isinstance(value, Snapshot):
        variables: dict[str, Json] = {k: encode_value(v) for k, v in value.values().items()}
        return _variant(
            "Snapshot",
            {"machine": value._machine_name, "state": value.state, "vars": variables},
        )
    if kind is Output:
        assert isinstance(value, Output)
        return _variant("Output", {"name": value.name, "fields": encode_value(value.fields)})
    if kind is Unserializable:
        assert isinstance(value, Unserializable)
        return {"#unserializable": value.text}
    fields = getattr(kind, "_fields", None)
    if isinstance(value, tuple) and isinstance(fields, tuple):
        # A model's record (a NamedTuple): its type name and its fields by name.
        named = {str(f): encode_value(v) for f, v in zip(fields, value)}
        return _variant("Record", {"type": kind.__name__, "fields": named})
    return {"#unserializable": repr(value)}


def _machines(system: System) -> dict[str, Machine]:
    """Every machine a snapshot in a trace of `system` can belong to, by name."""
    found: dict[str, Machine] = {}
    for comp in system.components:
        found.setdefault(comp.machine.name, comp.machine)
    for prop in system.properties:
        machine = getattr(prop, "machine", None)
        if isinstance(machine, Machine):
            found.setdefault(machine.name, machine)
    return found


def decode_value(obj: Json, machines: Mapping[str, Machine], where: str = "") -> Hashable:
    """The statecore value `obj` encodes; the inverse of `encode_value`.

    `machines` maps machine names to the machines whose snapshots may occur
    (a `Snapshot` is rebuilt as an instance of its machine's own class).
    Raises `TraceFileError` (without a file or step: the caller adds them)
    when `obj` is not a value `encode_value` could have written.
    """
    problem = _check_value(obj, where)
    try:
        if problem is not None:
            raise _DecodeError("", problem)
        return _decode(obj, machines, where)
    except _DecodeError as exc:
        at = f"at {exc.where}: " if exc.where else ""
        raise TraceFileError(None, None, at + exc.problem) from None


def _brief(obj: object) -> str:
    """`obj` for an error message: short, whatever the file put there."""
    if isinstance(obj, (dict, list)):
        return _kind(obj)
    try:
        text = repr(obj)
    except ValueError:  # an integer too long to print
        text = f"a {type(obj).__name__}"
    return text if len(text) <= 60 else text[:57] + "..."


def _digits_problem(text: str) -> str | None:
    """Why the integer written as `text` is refused, or None."""
    digits = len(text) - text.startswith("-")
    if digits <= MAX_DIGITS:
        return None
    return (
        f"an integer of {digits:,} digits; statecore reads at most {MAX_DIGITS:,} "
        "(no model value is that large: the file is corrupt or not a statecore trace)"
    )


def _record(obj: Json, fields: Sequence[str], where: str, what: str) -> dict[str, Json]:
    if not isinstance(obj, dict) or set(obj) != set(fields):
        raise _DecodeError(where, f"a {what} needs exactly the fields {list(fields)}")
    return obj


def _text(obj: Json, where: str, what: str) -> str:
    if not isinstance(obj, str):
        raise _DecodeError(where, f"{what} must be a string, not {_brief(obj)}")
    return obj


def _int(obj: Json, machines: Mapping[str, Machine], where: str, what: str) -> int:
    value = _decode(obj, machines, where)
    if type(value) is not int:
        raise _DecodeError(where, f"{what} must be an integer, not {value!r}")
    return value


def _decode(obj: Json, machines: Mapping[str, Machine], where: str) -> Hashable:
    if isinstance(obj, (bool, str)):
        return obj
    if isinstance(obj, int):  # ITF before 2023 wrote small integers as JSON numbers
        return obj
    if isinstance(obj, list):
        return tuple(_decode(item, machines, f"{where}[{i}]") for i, item in enumerate(obj))
    if isinstance(obj, dict):
        special = _SPECIAL.intersection(obj)
        if special:
            return _decode_special(obj, special, machines, where)
        if set(obj) == {"tag", "value"}:
            return _decode_variant(obj["tag"], obj["value"], machines, where)
        raise _DecodeError(
            where, "a record is not a statecore value (statecore types are written as variants)"
        )
    if obj is None:
        raise _DecodeError(where, "null is not an ITF value")
    raise _DecodeError(where, f"the JSON number {obj!r} is not an ITF value")


def _decode_special(
    obj: dict[str, Json], special: frozenset[str], machines: Mapping[str, Machine], where: str
) -> Hashable:
    if len(obj) != 1:
        raise _DecodeError(where, f"{sorted(special)[0]!r} must be the only field of its object")
    key, inner = next(iter(obj.items()))
    if key == "#bigint":
        if not isinstance(inner, str) or not _BIGINT.fullmatch(inner):
            raise _DecodeError(where, f"#bigint needs a string of digits, not {_brief(inner)}")
        problem = _digits_problem(inner)
        if problem is not None:
            raise _DecodeError(where, problem)
        try:
            return int(inner)
        except ValueError as exc:  # a lower limit set with sys.set_int_max_str_digits
            raise _DecodeError(where, str(exc)) from None
    if key == "#unserializable":
        return Unserializable(_text(inner, where, "#unserializable"))
    if not isinstance(inner, list):
        raise _DecodeError(where, f"{key} needs a JSON list")
    items = [_decode(item, machines, f"{where}[{i}]") for i, item in enumerate(inner)]
    if key == "#tup":
        return tuple(items)
    if key == "#set":
        return frozenset(items)
    raise _DecodeError(where, "#map is not a statecore value (states hold no mappings)")


def _decode_variant(
    tag: Json, value: Json, machines: Mapping[str, Machine], where: str
) -> Hashable:
    inner = f"{where}.value"
    if tag == "None":
        if value != {}:
            raise _DecodeError(where, "the None variant has the value {}")
        return None
    if tag == "Float":
        text = _text(value, inner, "a Float")
        try:
            return float(text)
        except ValueError:
            raise _DecodeError(where, f"{text!r} is not a float") from None
    if tag == "ModelValue":
        rec = _record(value, ("group", "index"), inner, "ModelValue")
        return ModelValue(
            _text(rec["group"], f"{inner}.group", "group"),
            _int(rec["index"], machines, f"{inner}.index", "index"),
        )
    if tag == "Handle":
        rec = _record(value, ("component", "key", "generation"), inner, "Handle")
        return Handle(
            _text(rec["component"], f"{inner}.component", "component"),
            _decode(rec["key"], machines, f"{inner}.key"),
            _int(rec["generation"], machines, f"{inner}.generation", "generation"),
        )
    if tag == "Slot":
        rec = _record(value, ("generation", "snapshot"), inner, "Slot")
        snapshot = _decode(rec["snapshot"], machines, f"{inner}.snapshot")
        if snapshot is not None and not isinstance(snapshot, Snapshot):
            raise _DecodeError(f"{inner}.snapshot", "a slot holds a Snapshot or None")
        return Slot(
            _int(rec["generation"], machines, f"{inner}.generation", "generation"), snapshot
        )
    if tag == "Snapshot":
        return _decode_snapshot(value, machines, inner)
    if tag == "Output":
        rec = _record(value, ("name", "fields"), inner, "Output")
        fields = _decode(rec["fields"], machines, f"{inner}.fields")
        if not isinstance(fields, tuple) or not all(
            isinstance(f, tuple) and len(f) == 2 and isinstance(f[0], str) for f in fields
        ):
            raise _DecodeError(f"{inner}.fields", "Output fields are [name, value] pairs")
        return Output(_text(rec["name"], f"{inner}.name", "name"), fields)
    if tag == "Record":
        rec = _record(value, ("type", "fields"), inner, "Record")
        name = _text(rec["type"], f"{inner}.type", "a record's type")
        raw = rec["fields"]
        if not isinstance(raw, dict):
            raise _DecodeError(f"{inner}.fields", "a record's fields are a JSON object")
        try:
            make = _record_type(name, tuple(raw))
        except ValueError as exc:
            raise _DecodeError(inner, f"not a record: {exc}") from None
        items = [_decode(raw[k], machines, f"{inner}.fields.{k}") for k in raw]
        return make._make(items)  # type: ignore[attr-defined,no-any-return]
    raise _DecodeError(where, f"unknown variant tag {_brief(tag)}")


@functools.cache
def _record_type(name: str, fields: tuple[str, ...]) -> type[tuple[Hashable, ...]]:
    """A named tuple type standing in for the model's record `name` (equal to it)."""
    made: type[tuple[Hashable, ...]] = collections.namedtuple(name, fields)  # type: ignore[misc]
    return made


def _decode_snapshot(value: Json, machines: Mapping[str, Machine], where: str) -> Snapshot:
    rec = _record(value, ("machine", "state", "vars"), where, "Snapshot")
    name = _text(rec["machine"], f"{where}.machine", "machine")
    machine = machines.get(name)
    if machine is None:
        raise _DecodeError(
            f"{where}.machine", f"the model has no machine {name!r}; it has {sorted(machines)}"
        )
    state = _text(rec["state"], f"{where}.state", "state")
    if state not in machine.state_index:
        raise _DecodeError(
            f"{where}.state",
            f"machine {name!r} has no state {state!r}; states are "
            f"{[s.name for s in machine.states]}",
        )
    raw = rec["vars"]
    expected = [v.name for v in machine.variables]
    if not isinstance(raw, dict) or set(raw) != set(expected):
        got = sorted(raw) if isinstance(raw, dict) else raw
        raise _DecodeError(
            f"{where}.vars", f"machine {name!r} has the variables {expected}, the file {got}"
        )
    values = {k: _decode(raw[k], machines, f"{where}.vars.{k}") for k in expected}
    return machine.snapshot(state, **values)


# -- comparing states ------------------------------------------------------------


def same_state(a: SystemState, b: SystemState) -> bool:
    """Whether `a` and `b` encode alike: equal, with types, NaNs and ``-0.0`` exact.

    Plain ``==`` would take ``True`` for ``1`` and lose a NaN; comparing
    encodings is what "the file records this state" means.
    """
    return a is b or encode_value(_flatten(a)) == encode_value(_flatten(b))


def state_diff(system: System, recorded: SystemState, actual: SystemState) -> str:
    """The first variable where `recorded` and `actual` differ, for an error message."""
    names = variable_names(system)
    for name, was, now in zip(names, _flatten(recorded), _flatten(actual)):
        if encode_value(was) != encode_value(now):
            return f"{name} is recorded as {was!r} but the model gives {now!r}"
    return "the states have different shapes"


def _kind(obj: object) -> str:
    """What JSON value `obj` is, for a message."""
    if isinstance(obj, dict):
        return "a JSON object"
    if isinstance(obj, list):
        return "a JSON list"
    if isinstance(obj, str):
        return "a JSON string"
    if isinstance(obj, bool) or obj is None:
        return f"JSON {json.dumps(obj)}"
    return "a JSON number"


_Problem: TypeAlias = tuple[list[str], str]  # the path to the culprit (innermost first), what


def _check_value(obj: Json, where: str) -> str | None:
    """The first problem with `obj` as an ITF value (at `where`), or None.

    Bounded: more than `MAX_DEPTH` levels of nesting or an integer of more
    than `MAX_DIGITS` digits is a problem, so decoding a checked value
    cannot exhaust the stack or stall in a conversion. The path to the
    culprit is only spelled out when there is one.
    """
    found = _value_problem(obj, 1)
    if found is None:
        return None
    path, problem = found
    at = where + "".join(reversed(path))
    return f"{at if len(at) <= 60 else at[:57] + '...'}: {problem}"


def _value_problem(obj: Json, depth: int) -> _Problem | None:
    if isinstance(obj, (bool, str, int)):
        return None
    if isinstance(obj, (list, dict)) and depth > MAX_DEPTH:
        return [], f"values nest more than {MAX_DEPTH} levels deep ({_REGENERATE})"
    if isinstance(obj, list):
        for i, item in enumerate(obj):
            found = _value_problem(item, depth + 1)
            if found is not None:
                found[0].append(f"[{i}]")
                return found
        return None
    if isinstance(obj, dict):
        special = _SPECIAL.intersection(obj)
        if special:
            return _special_problem(obj, sorted(special)[0], depth)
        for name, item in obj.items():
            if name.startswith("#"):
                return [], f"unknown special field {name!r}"
            found = _value_problem(item, depth + 1)
            if found is not None:
                found[0].append(f".{name}")
                return found
        return None
    if obj is None:
        return [], "null is not an ITF value"
    return [], f"the JSON number {obj!r} is not an ITF value (write integers as #bigint)"


def _special_problem(obj: dict[str, Json], key: str, depth: int) -> _Problem | None:
    """The first problem with a ``{"#bigint": ...}``-style value, or None."""
    if len(obj) != 1:
        return [], f"{key} must be the only field of its object"
    inner = obj[key]
    if key == "#bigint":
        if not isinstance(inner, str) or _BIGINT.fullmatch(inner) is None:
            return [], "#bigint needs a string of digits"
        problem = _digits_problem(inner)
        return None if problem is None else ([], problem)
    if key == "#unserializable":
        return None if isinstance(inner, str) else ([], "#unserializable needs text")
    if not isinstance(inner, list):
        return [], f"{key} needs a JSON list"
    if key == "#map" and not all(isinstance(p, list) and len(p) == 2 for p in inner):
        return [], "#map needs a list of [key, value] pairs"
    found = _value_problem(inner, depth + 1)
    if found is not None:
        found[0].append(f".{key}")
    return found
