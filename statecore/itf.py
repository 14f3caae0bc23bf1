"""Counterexamples on disk: traces as ITF JSON, the Informal Trace Format.

ITF is the trace format of Apalache and Quint (Apalache ADR-015): a JSON
object with a ``"#meta"`` header, the list of state ``"vars"`` and the
``"states"``, each mapping every variable to a value. Writing statecore
traces in it means a counterexample found today can be kept next to the bug
report, replayed after the model changed (`statecore.replay`), turned into a
regression test (`statecore.regression`) and read by ITF tools.

Variables: one per slot, named ``component[key]`` (``gen[ext0]``), then one
per global, in the order of `StateView.as_dict`.

Values use the ITF encodings - integers ``{"#bigint": "12"}``, booleans and
strings as JSON, tuples as JSON lists (ITF sequences; ``{"#tup": [...]}`` is
read too), frozensets ``{"#set": [...]}`` (items in a fixed order, so the
same trace always gives the same file) - and ITF *variants*
``{"tag": T, "value": V}`` for the statecore types, so that every value says
what it is and reads back as exactly the value written (``1``, ``True`` and
``1.0`` stay apart):

==================  ============================================================
``None``            ``{"tag": "None", "value": {}}`` (Quint's ``Option`` none)
float               ``{"tag": "Float", "value": "0.1"}``; Python's ``repr``, so
                    ``"nan"``, ``"inf"``, ``"-inf"`` and ``"-0.0"`` are exact
`ModelValue`        ``{"tag": "ModelValue", "value": {"group": "ext",
                    "index": {"#bigint": "0"}}}``
`Handle`            ``{"tag": "Handle", "value": {"component", "key",
                    "generation"}}``
`Slot`              ``{"tag": "Slot", "value": {"generation", "snapshot"}}``
`Snapshot`          ``{"tag": "Snapshot", "value": {"machine": "gen", "state":
                    "open", "vars": {"puts": {"#bigint": "1"}}}}``
`Output`            ``{"tag": "Output", "value": {"name": "put", "fields":
                    [["finished", true]]}}``
anything else       ``{"#unserializable": repr(value)}``
==================  ============================================================

An unserializable value cannot be rebuilt from the file, but it can still be
checked: reading a trace replays it through the model, and a recorded
``#unserializable`` matches a replayed value with the same ``repr``.

Each state carries a ``"#meta"`` with its ``index`` and, after the initial
state, the action that led to it: ``action`` (name), ``args`` (a record of
ITF values), ``actor``, plus ``label`` and ``outputs`` as text for people.
The trace header names the system (``source``), the property, the verdict and
its detail.

`read_itf` checks everything it can and raises `TraceFileError` naming the
file, the step and the problem: bad JSON, a trace of another system, an
unknown action or variable, a missing variable, and a step the model does not
allow (the action is not enabled, or leads somewhere other than the recorded
state).
"""

from __future__ import annotations

import json
import os
import re
from collections.abc import Hashable, Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any, NamedTuple, TypeAlias

from .definition import Machine, Output, Snapshot
from .errors import ActionError, StatecoreError
from .system import ActionLabel, Handle, ModelValue, Slot, System, SystemState
from .trace import Trace, TraceStep

__all__ = [
    "FORMAT_DESCRIPTION",
    "Json",
    "TraceFileError",
    "Unserializable",
    "decode_value",
    "encode_value",
    "itf_text",
    "read_itf",
    "same_state",
    "state_diff",
    "trace_from_itf",
    "trace_to_itf",
    "validate_itf_shape",
    "variable_names",
    "verify_trace",
    "write_itf",
]

FORMAT_DESCRIPTION = "https://apalache-mc.org/docs/adr/015adr-trace.html"

Json: TypeAlias = bool | int | float | str | list["Json"] | dict[str, "Json"] | None
PathLike: TypeAlias = str | os.PathLike[str]

_BIGINT = re.compile(r"-?[0-9]+")
_TOP_LEVEL = frozenset({"#meta", "params", "vars", "states", "loop"})
_SPECIAL = frozenset({"#bigint", "#tup", "#set", "#map", "#unserializable"})


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
    try:
        return _decode(obj, machines, where)
    except _DecodeError as exc:
        at = f"at {exc.where}: " if exc.where else ""
        raise TraceFileError(None, None, at + exc.problem) from None


def _record(obj: Json, fields: Sequence[str], where: str, what: str) -> dict[str, Json]:
    if not isinstance(obj, dict) or set(obj) != set(fields):
        raise _DecodeError(where, f"a {what} needs exactly the fields {list(fields)}")
    return obj


def _text(obj: Json, where: str, what: str) -> str:
    if not isinstance(obj, str):
        raise _DecodeError(where, f"{what} must be a string, not {json.dumps(obj)}")
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
            raise _DecodeError(where, f"#bigint needs a string of digits, not {json.dumps(inner)}")
        return int(inner)
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
    raise _DecodeError(where, f"unknown variant tag {json.dumps(tag)}")


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


# -- writing -----------------------------------------------------------------------


def _property_statement(system: System, property_id: str) -> str:
    for prop in system.properties:
        if getattr(prop, "id", None) == property_id:
            return str(getattr(prop, "statement", ""))
    return ""


def _output_text(source: Handle | None, output: Output) -> str:
    return ("" if source is None else f"{source!r}.") + str(output)


def trace_to_itf(trace: Trace, system: System) -> dict[str, Json]:
    """`trace` as an ITF object (a dict ready for `json.dump`)."""
    if trace.system != system.name:
        raise TraceFileError(
            None, None, f"the trace is of system {trace.system!r}, not {system.name!r}"
        )
    names = variable_names(system)
    states: list[Json] = []
    for index, item in enumerate(trace.steps):
        meta: dict[str, Json] = {"index": index}
        if item.action is None:
            meta["label"] = "(initial)"
        else:
            meta["action"] = item.action.name
            meta["args"] = {name: encode_value(value) for name, value in item.action.args}
            meta["actor"] = item.actor
            meta["label"] = str(item.action)
        if item.outputs:
            meta["outputs"] = [_output_text(e.source, e.output) for e in item.outputs]
        values = _flatten(item.state)
        if len(values) != len(names):
            raise TraceFileError(
                None,
                index,
                f"the state has {len(values)} variables, system {system.name!r} has {len(names)}",
            )
        state: dict[str, Json] = {"#meta": meta}
        state.update(zip(names, (encode_value(v) for v in values)))
        states.append(state)
    from . import __version__

    header: dict[str, Json] = {
        "format": "ITF",
        "format-description": FORMAT_DESCRIPTION,
        "source": system.name,
        "description": f"statecore {trace.verdict} trace of property {trace.property_id!r}"
        + (f": {trace.detail}" if trace.detail else ""),
        "generator": f"statecore {__version__}",
        "property": trace.property_id,
        "statement": _property_statement(system, trace.property_id),
        "verdict": trace.verdict,
        "detail": trace.detail,
    }
    return {"#meta": header, "vars": list(names), "states": states}


def write_itf(
    trace: Trace, system: System, path: PathLike, *, meta: Mapping[str, str] | None = None
) -> Path:
    """Write `trace` to `path` as ITF JSON (UTF-8, indented, stable); return the path.

    The same trace always gives the same bytes (no timestamp, sets in a fixed
    order), so a counterexample can be committed and diffed. `meta` adds
    header fields, such as the ``target`` and ``adapter`` a replay needs.
    """
    obj = trace_to_itf(trace, system)
    header = obj["#meta"]
    assert isinstance(header, dict)
    header.update(dict(meta or {}))
    target = Path(path)
    target.write_text(itf_text(obj), encoding="utf-8")
    return target


def read_header(path: PathLike) -> dict[str, Json]:
    """The ``#meta`` header of an ITF file (empty if it has none)."""
    try:
        obj = json.loads(Path(path).read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        raise TraceFileError(str(path), None, f"cannot read the trace: {exc}") from None
    header = obj.get("#meta", {}) if isinstance(obj, dict) else {}
    return dict(header) if isinstance(header, dict) else {}


def _compact(obj: Json) -> str:
    return json.dumps(obj, ensure_ascii=False, separators=(", ", ": "))


def itf_text(obj: Mapping[str, Json]) -> str:
    """`obj` as ITF JSON text laid out for people and diffs.

    The header, the variable list and each state's ``#meta`` and variables
    get a line each (values written compactly on their line), so a trace
    reads top to bottom and two versions of it diff line by line.
    """
    lines = ["{"]
    items = list(obj.items())
    for position, (key, value) in enumerate(items):
        comma = "," if position < len(items) - 1 else ""
        name = _compact(key)
        if key == "#meta" and isinstance(value, dict):
            lines.append(f"  {name}: {{")
            lines.extend(_members(value, "    "))
            lines.append(f"  }}{comma}")
        elif key == "states" and isinstance(value, list):
            lines.append(f"  {name}: [")
            for index, state in enumerate(value):
                end = "," if index < len(value) - 1 else ""
                if isinstance(state, dict):
                    lines.append("    {")
                    lines.extend(_members(state, "      "))
                    lines.append(f"    }}{end}")
                else:
                    lines.append(f"    {_compact(state)}{end}")
            lines.append(f"  ]{comma}")
        else:
            lines.append(f"  {name}: {_compact(value)}{comma}")
    lines.append("}")
    return "\n".join(lines) + "\n"


def _members(obj: Mapping[str, Json], indent: str) -> list[str]:
    last = len(obj) - 1
    return [
        f"{indent}{_compact(key)}: {_compact(value)}{',' if i < last else ''}"
        for i, (key, value) in enumerate(obj.items())
    ]


# -- checking the shape --------------------------------------------------------------


def _check_value(obj: Json, where: str) -> str | None:
    """The first problem with `obj` as an ITF value, or None."""
    if isinstance(obj, (bool, str, int)):
        return None
    if isinstance(obj, list):
        for i, item in enumerate(obj):
            problem = _check_value(item, f"{where}[{i}]")
            if problem:
                return problem
        return None
    if isinstance(obj, dict):
        special = _SPECIAL.intersection(obj)
        if special:
            key = sorted(special)[0]
            if len(obj) != 1:
                return f"{where}: {key} must be the only field of its object"
            inner = obj[key]
            if key == "#bigint":
                ok = isinstance(inner, str) and _BIGINT.fullmatch(inner) is not None
                return None if ok else f"{where}: #bigint needs a string of digits"
            if key == "#unserializable":
                return None if isinstance(inner, str) else f"{where}: #unserializable needs text"
            if not isinstance(inner, list):
                return f"{where}: {key} needs a JSON list"
            if key == "#map" and not all(isinstance(p, list) and len(p) == 2 for p in inner):
                return f"{where}: #map needs a list of [key, value] pairs"
            return _check_value(inner, f"{where}.{key}")
        for name, item in obj.items():
            if name.startswith("#"):
                return f"{where}: unknown special field {name!r}"
            problem = _check_value(item, f"{where}.{name}")
            if problem:
                return problem
        return None
    if obj is None:
        return f"{where}: null is not an ITF value"
    return f"{where}: the JSON number {obj!r} is not an ITF value (write integers as #bigint)"


def validate_itf_shape(obj: object, *, path: str | None = None) -> None:
    """Check that `obj` is an ITF trace; raise `TraceFileError` naming the problem.

    Structure only, no model: an object with ``"vars"`` (distinct strings)
    and ``"states"`` (objects holding every variable, and nothing else but
    ``"#meta"``), an optional ``"#meta"`` object (``format`` "ITF" if given),
    optional ``"params"`` and ``"loop"``, and well-formed ITF values (JSON
    integers, which ITF wrote before its 2023 revision, are accepted; other
    JSON numbers and ``null`` are not ITF values).
    """
    if not isinstance(obj, dict):
        raise TraceFileError(path, None, "an ITF trace is a JSON object")
    unknown = sorted(set(obj) - _TOP_LEVEL)
    if unknown:
        raise TraceFileError(path, None, f"unknown top-level field {unknown[0]!r}")
    meta = obj.get("#meta", {})
    if not isinstance(meta, dict):
        raise TraceFileError(path, None, "'#meta' must be an object")
    if "format" in meta and meta["format"] != "ITF":
        raise TraceFileError(path, None, f"'#meta.format' is {meta['format']!r}, not 'ITF'")
    names: list[str] = []
    for field in ("params", "vars"):
        listed = obj.get(field, [])
        if not isinstance(listed, list) or not all(isinstance(n, str) for n in listed):
            raise TraceFileError(path, None, f"{field!r} must be a list of strings")
        names.extend(listed)
    if "vars" not in obj:
        raise TraceFileError(path, None, "no 'vars' list")
    if len(set(names)) != len(names):
        dup = next(n for n in names if names.count(n) > 1)
        raise TraceFileError(path, None, f"variable {dup!r} is listed twice")
    states = obj.get("states")
    if not isinstance(states, list):
        raise TraceFileError(path, None, "no 'states' list")
    if "loop" in obj:
        loop = obj["loop"]
        if not isinstance(loop, int) or isinstance(loop, bool) or not 0 <= loop < len(states):
            raise TraceFileError(path, None, f"'loop' {loop!r} is not a state index")
    expected = set(names)
    for index, state in enumerate(states):
        if not isinstance(state, dict):
            raise TraceFileError(path, index, "a state must be a JSON object")
        smeta = state.get("#meta", {})
        if not isinstance(smeta, dict):
            raise TraceFileError(path, index, "'#meta' must be an object")
        if "index" in smeta and smeta["index"] != index:
            raise TraceFileError(path, index, f"'#meta.index' is {smeta['index']!r}")
        for name in names:
            if name not in state:
                raise TraceFileError(path, index, f"missing variable {name!r}")
        for name in state:
            if name != "#meta" and name not in expected:
                raise TraceFileError(path, index, f"unknown variable {name!r} (not in 'vars')")
        for name in names:
            problem = _check_value(state[name], name)
            if problem:
                raise TraceFileError(path, index, problem)


# -- reading ---------------------------------------------------------------------------


class _DuplicateKey(Exception):
    pass


def _no_duplicates(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    result: dict[str, Any] = {}
    for key, value in pairs:
        if key in result:
            raise _DuplicateKey(key)
        result[key] = value
    return result


def read_itf(path: PathLike, system: System, *, verify: bool = True) -> Trace:
    """Read the ITF trace at `path` as a `Trace` of `system`.

    With `verify` (the default) the trace is replayed through `system`: the
    first state must be an initial state, every action must be enabled and
    lead to the recorded state, and the returned trace holds the model's own
    values (with the outputs each step emitted). Without it the states are
    only decoded, for looking at a trace the model no longer allows.
    Raises `TraceFileError` naming the file, the step and the problem.
    """
    where = os.fspath(path)
    try:
        text = Path(path).read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise TraceFileError(where, None, f"cannot read the file: {exc}") from None
    try:
        obj = json.loads(text, object_pairs_hook=_no_duplicates)
    except json.JSONDecodeError as exc:
        raise TraceFileError(
            where, None, f"bad JSON at line {exc.lineno}, column {exc.colno}: {exc.msg}"
        ) from None
    except _DuplicateKey as exc:
        raise TraceFileError(where, None, f"bad JSON: key {exc.args[0]!r} appears twice") from None
    return trace_from_itf(obj, system, path=where, verify=verify)


def _meta_text(meta: Mapping[str, Json], key: str, default: str, path: str | None) -> str:
    value = meta.get(key, default)
    if not isinstance(value, str):
        raise TraceFileError(path, None, f"'#meta.{key}' must be a string")
    return value


def trace_from_itf(
    obj: object, system: System, *, path: str | None = None, verify: bool = True
) -> Trace:
    """The `Trace` an already parsed ITF object holds; see `read_itf`."""
    validate_itf_shape(obj, path=path)
    assert isinstance(obj, dict)
    meta: dict[str, Json] = obj.get("#meta", {})
    source = meta.get("source")
    if source != system.name:
        raise TraceFileError(
            path,
            None,
            f"wrong model: the trace is of system {source!r}, not {system.name!r}",
        )
    if "loop" in obj:
        raise TraceFileError(path, None, "lasso traces ('loop') are not supported")
    names = variable_names(system)
    listed: list[str] = [*obj.get("params", []), *obj["vars"]]
    for name in listed:
        if name not in names:
            raise TraceFileError(
                path, 0, f"unknown variable {name!r}; system {system.name!r} has {list(names)}"
            )
    for name in names:
        if name not in listed:
            raise TraceFileError(path, 0, f"missing variable {name!r}")
    raw_states: list[dict[str, Json]] = obj["states"]
    if not raw_states:
        raise TraceFileError(path, None, "the trace has no states")
    machines = _machines(system)
    steps = [
        _decode_step(system, machines, names, index, raw, path)
        for index, raw in enumerate(raw_states)
    ]
    trace = Trace(
        system.name,
        tuple(steps),
        _meta_text(meta, "property", "", path),
        _meta_text(meta, "verdict", "violated", path),
        _meta_text(meta, "detail", "", path),
    )
    return verify_trace(system, trace, path=path) if verify else trace


def _decode_step(
    system: System,
    machines: Mapping[str, Machine],
    names: Sequence[str],
    index: int,
    raw: Mapping[str, Json],
    path: str | None,
) -> TraceStep:
    values: list[Hashable] = []
    for name in names:
        try:
            values.append(_decode(raw[name], machines, name))
        except _DecodeError as exc:
            raise TraceFileError(path, index, f"{exc.where}: {exc.problem}") from None
    count = len(system.slot_keys())
    for name, slot in zip(names, values[:count]):
        if not isinstance(slot, Slot):
            raise TraceFileError(path, index, f"{name} must hold a Slot, not {slot!r}")
    state = SystemState(tuple(values[:count]), tuple(values[count:]))  # type: ignore[arg-type]
    meta = raw.get("#meta", {})
    assert isinstance(meta, dict)
    if "action" not in meta:
        if index > 0:
            raise TraceFileError(path, index, "no '#meta.action': which action led here?")
        return TraceStep(None, "", state)
    if index == 0:
        raise TraceFileError(path, index, "the initial state has an action")
    label, actor = _decode_action(system, machines, meta, index, path)
    return TraceStep(label, actor, state)


def _decode_action(
    system: System,
    machines: Mapping[str, Machine],
    meta: Mapping[str, Json],
    index: int,
    path: str | None,
) -> tuple[ActionLabel, str]:
    name = meta["action"]
    known = sorted(a.name for a in system.actions)
    if not isinstance(name, str) or name not in known:
        raise TraceFileError(
            path, index, f"unknown action {name!r}; system {system.name!r} has {known}"
        )
    action = system.action(name)
    raw_args = meta.get("args", {})
    if not isinstance(raw_args, dict) or set(raw_args) != set(action.params):
        given = sorted(raw_args) if isinstance(raw_args, dict) else raw_args
        raise TraceFileError(
            path,
            index,
            f"action {name!r} takes the arguments {list(action.params)}, the file gives {given}",
        )
    args: list[tuple[str, Hashable]] = []
    for param in action.params:
        try:
            args.append((param, _decode(raw_args[param], machines, f"argument {param}")))
        except _DecodeError as exc:
            raise TraceFileError(path, index, f"{exc.where}: {exc.problem}") from None
    actor = meta.get("actor", action.actor)
    if actor != action.actor:
        raise TraceFileError(
            path, index, f"action {name!r} is taken by {action.actor!r}, not {actor!r}"
        )
    return ActionLabel(name, tuple(args)), action.actor


# -- verifying against the model ----------------------------------------------------------


def _steps_of(
    system: System, trace: Trace, path: str | None
) -> Iterator[tuple[int, TraceStep, TraceStep]]:
    """(index, recorded step, model step) along `trace`, raising where they part."""
    if not trace.steps:
        raise TraceFileError(path, None, "the trace has no states")
    first = trace.steps[0].state
    inits = system.init_states()
    start = next((s for s in inits if same_state(s, first)), None)
    if start is None:
        raise TraceFileError(
            path,
            0,
            "the first state is not an initial state of the model: "
            + state_diff(system, first, inits[0]),
        )
    state = start
    yield 0, trace.steps[0], TraceStep(None, "", start)
    for index, item in enumerate(trace.steps[1:], 1):
        if item.action is None:
            raise TraceFileError(path, index, "no action leads to this state")
        try:
            step_ = system.next_step(state, item.action)
        except ActionError as exc:
            why = "it is not enabled" if "is not enabled" in str(exc) else str(exc)
            enabled = ", ".join(str(a) for a in system.actions_in(state)) or "none"
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
        state = step_.state
        yield index, item, TraceStep(step_.action, step_.actor, step_.state, step_.outputs)


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
    steps = tuple(model for _, _, model in _steps_of(system, trace, path))
    return Trace(system.name, steps, trace.property_id, trace.verdict, trace.detail)
