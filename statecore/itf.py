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

A trace file may come from anywhere, so reading one is bounded: it is parsed
once, state by state, through a window of its text, and each state is
checked, decoded and replayed before the next is parsed - the first problem
stops the reading, so a bad step early in a large file costs what the steps
before it cost. Integers of more than `MAX_DIGITS` digits and values nested
more than `MAX_DEPTH` levels are refused, and the header fields statecore
reads must be text. Nothing in a file is imported or called: the names in
its header are looked up among the bundled targets and adapters only (see
`statecore.registry.trace_target`).
"""

from __future__ import annotations

import codecs
import json
import os
import re
from collections.abc import Hashable, Iterable, Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any, BinaryIO, NamedTuple, TypeAlias

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
# A file is data from anywhere: bound what reading it may cost. Python itself
# refuses to convert integers of more than 4,300 digits; statecore values nest
# about ten JSON levels deep, so a hundred leaves room for any model.
MAX_DIGITS = 4300
MAX_DEPTH = 100
# A file is read in chunks of this many bytes; what was parsed is dropped.
_CHUNK = 1 << 20


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
    raise _DecodeError(where, f"unknown variant tag {_brief(tag)}")


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

_HEADER_TEXT = ("format", "source", "target", "adapter", "property", "verdict", "detail")
_VERDICTS = ("violated", "witness")
_LASSO = "lasso traces ('loop') are not supported: statecore replays finite traces"
_REGENERATE = "the file is corrupt or not a statecore trace: regenerate it"


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


def _too_deep(obj: object, limit: int = MAX_DEPTH) -> bool:
    """Whether `obj` nests more than `limit` lists and objects deep (found without recursing)."""
    stack: list[tuple[object, int]] = [(obj, 1)]
    while stack:
        item, depth = stack.pop()
        children: Iterable[object]
        if isinstance(item, dict):
            children = item.values()
        elif isinstance(item, list):
            children = item
        else:
            continue
        if depth > limit:
            return True
        stack.extend((child, depth + 1) for child in children)
    return False


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


def _check_header(meta: object, path: str | None) -> dict[str, Json]:
    """`meta` as a trace header statecore can act on; raise naming the field and the fix.

    Only the fields statecore reads are checked for type (ITF tools add
    others), but the whole header is bounded in depth.
    """
    if not isinstance(meta, dict):
        raise TraceFileError(path, None, f"'#meta' must be a JSON object, not {_kind(meta)}")
    if _too_deep(meta):
        raise TraceFileError(
            path, None, f"'#meta' nests more than {MAX_DEPTH} levels deep ({_REGENERATE})"
        )
    for key in _HEADER_TEXT:
        if key in meta and not isinstance(meta[key], str):
            raise TraceFileError(
                path,
                None,
                f"'#meta.{key}' must be a string, not {_kind(meta[key])} "
                "(fix the header or regenerate the trace)",
            )
    if meta.get("format", "ITF") != "ITF":
        raise TraceFileError(path, None, f"'#meta.format' is {meta['format']!r}, not 'ITF'")
    if meta.get("verdict", "violated") not in _VERDICTS:
        raise TraceFileError(
            path,
            None,
            f"'#meta.verdict' is {_brief(meta['verdict'])}, not 'violated' or 'witness' "
            "(fix the header or regenerate the trace)",
        )
    return meta


def _check_members(fields: Mapping[str, Json], path: str | None) -> list[str]:
    """Check the top-level members other than ``"states"``; return the listed variables."""
    unknown = sorted(set(fields) - _TOP_LEVEL)
    if unknown:
        raise TraceFileError(
            path,
            None,
            f"unknown top-level field {unknown[0]!r} (an ITF trace has {sorted(_TOP_LEVEL)})",
        )
    _check_header(fields.get("#meta", {}), path)
    names: list[str] = []
    for field in ("params", "vars"):
        listed = fields.get(field, [])
        if not isinstance(listed, list) or not all(isinstance(n, str) for n in listed):
            raise TraceFileError(path, None, f"{field!r} must be a list of strings")
        names.extend(str(n) for n in listed)
    if "vars" not in fields:
        raise TraceFileError(path, None, "no 'vars' list")
    if len(set(names)) != len(names):
        dup = next(n for n in names if names.count(n) > 1)
        raise TraceFileError(path, None, f"variable {dup!r} is listed twice")
    return names


def _check_state(
    state: Json, index: int, names: Sequence[str], path: str | None
) -> dict[str, Json]:
    """`state` as a well-formed ITF state holding exactly the variables `names`."""
    if not isinstance(state, dict):
        raise TraceFileError(path, index, f"a state must be a JSON object, not {_kind(state)}")
    smeta = state.get("#meta", {})
    if not isinstance(smeta, dict):
        raise TraceFileError(path, index, "'#meta' must be an object")
    if "index" in smeta and smeta["index"] != index:
        raise TraceFileError(path, index, f"'#meta.index' is {_brief(smeta['index'])}")
    for name in names:
        if name not in state:
            raise TraceFileError(path, index, f"missing variable {name!r}")
    if len(state) - ("#meta" in state) != len(names):
        extra = next(n for n in state if n != "#meta" and n not in names)
        raise TraceFileError(path, index, f"unknown variable {extra!r} (not in 'vars')")
    for name in names:
        problem = _check_value(state[name], name)
        if problem:
            raise TraceFileError(path, index, problem)
    return state


def validate_itf_shape(obj: object, *, path: str | None = None) -> None:
    """Check that `obj` is an ITF trace; raise `TraceFileError` naming the problem.

    Structure only, no model: an object with ``"vars"`` (distinct strings)
    and ``"states"`` (objects holding every variable, and nothing else but
    ``"#meta"``), an optional ``"#meta"`` object (``format`` "ITF" if given,
    the fields statecore reads as text), optional ``"params"`` and
    ``"loop"``, and well-formed ITF values (JSON integers, which ITF wrote
    before its 2023 revision, are accepted; other JSON numbers and ``null``
    are not ITF values).
    """
    if not isinstance(obj, dict):
        raise TraceFileError(path, None, f"an ITF trace is a JSON object, not {_kind(obj)}")
    names = _check_members({k: v for k, v in obj.items() if k != "states"}, path)
    states = obj.get("states")
    if not isinstance(states, list):
        raise TraceFileError(path, None, "no 'states' list")
    if "loop" in obj:
        loop = obj["loop"]
        if not isinstance(loop, int) or isinstance(loop, bool) or not 0 <= loop < len(states):
            raise TraceFileError(path, None, f"'loop' {_brief(loop)} is not a state index")
    for index, state in enumerate(states):
        _check_state(state, index, names, path)


# -- parsing ---------------------------------------------------------------------------

_WHITESPACE = re.compile(r"[ \t\n\r]*")


class _DuplicateKey(Exception):
    pass


class _LongInteger(Exception):
    pass


def _no_duplicates(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    result: dict[str, Any] = {}
    for key, value in pairs:
        if key in result:
            raise _DuplicateKey(key)
        result[key] = value
    return result


def _parse_int(text: str) -> int:
    problem = _digits_problem(text)
    if problem is not None:
        raise _LongInteger(problem)
    return int(text)


class _Members:
    """The top-level members of an ITF object already in memory.

    `fields` holds the members read before the states, `rest` those after
    them; `states` gives the states in order.
    """

    def __init__(self, obj: Mapping[str, Json]) -> None:
        self.fields: dict[str, Json] = dict(obj)
        self.rest: dict[str, Json] = {}
        self.streamed = False

    def has_states(self) -> bool:
        """Whether there is a ``"states"`` list."""
        return self.streamed or isinstance(self.fields.get("states"), list)

    def states(self) -> Iterator[Json]:
        """The raw states, in order."""
        listed = self.fields.get("states")
        if isinstance(listed, list):
            yield from listed


class _Document(_Members):
    """An ITF file parsed once, front to back, as far as its reader asks.

    The members before ``"states"`` are parsed by `open`; the states one at
    a time by `states`, so a reader that stops at a bad state has parsed
    nothing after it; then the members after them. (A file whose ``"#meta"``
    or ``"vars"`` follows its states is parsed whole by `open`: statecore
    never writes one.) Only a window of the text is held - the file is read
    in chunks and what was parsed is dropped - so a large trace costs the
    memory of its decoded states, not of its text.
    """

    def __init__(self, stream: BinaryIO, path: str) -> None:
        super().__init__({})
        self.path = path
        self.decoder = json.JSONDecoder(object_pairs_hook=_no_duplicates, parse_int=_parse_int)
        self.text = ""  # the window: the file's text from character `base` on
        self.pos = 0
        self._stream = stream
        self._utf8 = codecs.getincrementaldecoder("utf-8")()
        self._bytes = 0  # bytes read so far
        self._eof = False
        self._lines = 0  # newlines before the window
        self._column = 0  # characters after the last of them
        self._states_at = 0
        self._members: Iterator[tuple[str, int]] = iter(())

    def open(self) -> None:
        """Parse the members before the states (all of them if the states cannot stream)."""
        self._members = self._each_member(self._start())
        for key, pos in self._members:
            if key == "states" and self._at(pos, "[") and {"#meta", "vars"} <= self.fields.keys():
                self.streamed, self._states_at = True, pos
                return
            self.fields[key], self.pos = self._value(pos, None)
        self._end()

    def states(self) -> Iterator[Json]:
        """The states, parsed as they are asked for; then the members after them."""
        if not self.streamed:
            yield from super().states()
            return
        yield from self._elements(self._states_at)
        for key, pos in self._members:
            self.rest[key], self.pos = self._value(pos, None)
        self._end()

    def header(self) -> Json:
        """The ``"#meta"`` member (``{}`` if none), reading no further than it takes to reach it."""
        for key, pos in self._each_member(self._start()):
            if key == "#meta":
                return self._value(pos, None)[0]
            if key == "states" and self._at(pos, "["):
                for _ in self._elements(pos):
                    pass
            else:
                self.pos = self._value(pos, None)[1]
        self._end()
        return {}

    # -- the JSON around the members ----------------------------------------------------

    def _start(self) -> int:
        pos = self._skip(1 if self._at(0, "\ufeff") else 0)
        if pos == len(self.text):
            raise TraceFileError(
                self.path, None, "the file is empty; an ITF trace is a JSON object"
            )
        if not self._at(pos, "{"):
            try:
                value = self._value(pos, None)[0]
            except TraceFileError as exc:
                problem = f"not JSON ({exc.problem}); an ITF trace is a JSON object"
                raise TraceFileError(self.path, None, problem) from None
            raise TraceFileError(
                self.path,
                None,
                f"the file holds {_kind(value)}, not an ITF trace "
                "(a JSON object with '#meta', 'vars' and 'states')",
            )
        return pos + 1

    def _each_member(self, pos: int) -> Iterator[tuple[str, int]]:
        """Each member's name and where its value starts; the reader sets `pos` past the value."""
        seen: set[str] = set()
        pos = self._skip(pos)
        if self._at(pos, "}"):
            self.pos = pos + 1
            return
        while True:
            if not self._at(pos, '"'):
                raise self._bad(pos, None, "expected a member name in double quotes")
            key, pos = self._value(pos, None)
            assert isinstance(key, str)
            if key in seen:
                raise TraceFileError(self.path, None, f"bad JSON: key {key!r} appears twice")
            seen.add(key)
            pos = self._skip(pos)
            if not self._at(pos, ":"):
                raise self._bad(pos, None, "expected ':' after a member name")
            yield key, self._skip(pos + 1)
            pos = self._skip(self.pos)
            if self._at(pos, ","):
                pos = self._skip(pos + 1)
            elif self._at(pos, "}"):
                self.pos = pos + 1
                return
            else:
                raise self._bad(pos, None, "expected ',' or '}' after a member")

    def _elements(self, pos: int) -> Iterator[Json]:
        """The items of the list at `pos`, parsed one by one; `pos` ends past the list."""
        pos = self._skip(pos + 1)
        if self._at(pos, "]"):
            self.pos = pos + 1
            return
        index = 0
        while True:
            value, pos = self._value(pos, index)
            yield value
            index += 1
            pos = self._skip(self._drop(pos))
            if self._at(pos, ","):
                pos = self._skip(pos + 1)
            elif self._at(pos, "]"):
                self.pos = pos + 1
                return
            else:
                raise self._bad(pos, index, "expected ',' or ']' after a state")

    def _end(self) -> None:
        pos = self._skip(self.pos)
        if pos != len(self.text):
            raise self._bad(pos, None, "extra data after the trace object")

    def _value(self, pos: int, step: int | None) -> tuple[Json, int]:
        """The JSON value at `pos` and where it ends, reading on while the window cuts it."""
        while True:
            try:
                value, end = self.decoder.raw_decode(self.text, pos)
            except json.JSONDecodeError as exc:
                cut = self._cut(exc)
                if cut and self._more(len(self.text) - pos):
                    continue
                raise self._bad(exc.pos, step, exc.msg, truncated=cut) from None
            except _DuplicateKey as exc:
                problem = f"bad JSON: key {exc.args[0]!r} appears twice"
                raise TraceFileError(self.path, step, problem) from None
            except _LongInteger as exc:
                raise TraceFileError(self.path, step, str(exc)) from None
            except RecursionError:
                problem = f"values nest too deeply to read: more than {MAX_DEPTH} levels"
                raise TraceFileError(self.path, step, f"{problem} ({_REGENERATE})") from None
            # A number the window cuts short parses: it is whole only if something follows.
            if end < len(self.text) or not self._more(len(self.text) - pos):
                return value, end

    def _cut(self, error: json.JSONDecodeError) -> bool:
        """Whether `error` may only be the end of the window cutting a value short.

        A cut value fails within a few characters of the end (``tru``, half
        a ``\\u`` escape) or as a string left open; an error further back is
        in the file, and is reported without reading the rest of it.
        """
        return error.pos >= len(self.text) - 8 or error.msg.startswith("Unterminated string")

    def _bad(
        self, pos: int, step: int | None, problem: str, truncated: bool = False
    ) -> TraceFileError:
        """A bad-JSON error at `pos`; `truncated` when the file ended inside a value."""
        before = self.text[:pos]
        newlines = before.count("\n")
        line = self._lines + newlines + 1
        column = pos - before.rfind("\n") if newlines else self._column + pos + 1
        ends = truncated or pos >= len(self.text)
        ending = " (the file ends early: is it truncated?)" if ends else ""
        return TraceFileError(
            self.path, step, f"bad JSON at line {line}, column {column}: {problem}{ending}"
        )

    # -- the window ------------------------------------------------------------------------

    def _more(self, at_least: int = 0) -> bool:
        """Read on (at least `at_least` more bytes, or a chunk); False at the end of the file."""
        if self._eof:
            return False
        try:
            data = self._stream.read(max(_CHUNK, at_least))
        except OSError as exc:
            problem = f"cannot read the file: {exc.strerror or exc}"
            raise TraceFileError(self.path, None, problem) from None
        self._eof = not data
        try:
            self.text += self._utf8.decode(data, final=self._eof)
        except UnicodeDecodeError as exc:
            where = self._bytes + exc.start
            raise TraceFileError(
                self.path,
                None,
                f"not UTF-8 text (byte {where} is {data[exc.start]:#04x}); an ITF trace is JSON "
                "text - is this the right file?",
            ) from None
        self._bytes += len(data)
        return bool(data)

    def _drop(self, pos: int) -> int:
        """Forget the text before `pos` once it is a chunk long; return `pos` in the new window."""
        if pos < _CHUNK:
            return pos
        gone = self.text[:pos]
        newlines = gone.count("\n")
        self._column = pos - gone.rfind("\n") - 1 if newlines else self._column + pos
        self._lines += newlines
        self.text = self.text[pos:]
        return 0

    def _skip(self, pos: int) -> int:
        while True:
            match = _WHITESPACE.match(self.text, pos)
            assert match is not None
            if match.end() < len(self.text) or not self._more():
                return match.end()
            pos = match.end()

    def _at(self, pos: int, char: str) -> bool:
        while pos >= len(self.text) and self._more():
            pass
        return self.text.startswith(char, pos)


# -- reading ---------------------------------------------------------------------------


def read_header(path: PathLike) -> dict[str, Json]:
    """The ``#meta`` header of an ITF file, checked (empty if it has none).

    Only as much of the file is read as it takes to reach the header - the
    first member in the files statecore writes - so looking at the header
    of a large trace costs nothing next to reading the trace. Raises
    `TraceFileError` for a file that is not a JSON object, or a header
    whose fields statecore reads are not text.
    """
    where = os.fspath(path)
    with _opened(path, where) as stream:
        meta = _Document(stream, where).header()
    return dict(_check_header(meta, where))


def read_itf(path: PathLike, system: System, *, verify: bool = True) -> Trace:
    """Read the ITF trace at `path` as a `Trace` of `system`.

    With `verify` (the default) the trace is replayed through `system`: the
    first state must be an initial state, every action must be enabled and
    lead to the recorded state, and the returned trace holds the model's own
    values (with the outputs each step emitted). Without it the states are
    only decoded, for looking at a trace the model no longer allows.

    The file is parsed once, state by state, and each state is checked as it
    is read: the first problem stops the reading, so a bad step early in a
    large file costs no more than the steps before it. Raises
    `TraceFileError` naming the file, the step and the problem.
    """
    where = os.fspath(path)
    with _opened(path, where) as stream:
        document = _Document(stream, where)
        document.open()
        return _read_trace(document, system, where, verify)


def _opened(path: PathLike, where: str) -> BinaryIO:
    try:
        return open(path, "rb")
    except OSError as exc:
        raise TraceFileError(where, None, f"cannot read the file: {exc.strerror or exc}") from None


def _meta_text(meta: Mapping[str, Json], key: str, default: str, path: str | None) -> str:
    value = meta.get(key, default)
    if not isinstance(value, str):
        raise TraceFileError(path, None, f"'#meta.{key}' must be a string")
    return value


def trace_from_itf(
    obj: object, system: System, *, path: str | None = None, verify: bool = True
) -> Trace:
    """The `Trace` an already parsed ITF object holds; see `read_itf`."""
    if not isinstance(obj, dict):
        raise TraceFileError(path, None, f"an ITF trace is a JSON object, not {_kind(obj)}")
    return _read_trace(_Members(obj), system, path, verify)


def _read_trace(members: _Members, system: System, path: str | None, verify: bool) -> Trace:
    """Check, decode and (with `verify`) replay each state in turn; stop at the first problem."""
    fields = {k: v for k, v in members.fields.items() if k != "states"}
    listed = _check_members(fields, path)
    if not members.has_states():
        raise TraceFileError(path, None, "no 'states' list")
    if "loop" in fields:
        raise TraceFileError(path, None, _LASSO)
    meta = _check_header(fields.get("#meta", {}), path)
    if meta.get("source") != system.name:
        raise TraceFileError(
            path,
            None,
            f"wrong model: the trace is of system {meta.get('source')!r}, not "
            f"{system.name!r}; replay it on the target of that system",
        )
    names = _expected_variables(system, listed, path)
    machines = _machines(system)
    verifier = _Verifier(system, path) if verify else None
    steps: list[TraceStep] = []
    for index, raw in enumerate(members.states()):
        state = _check_state(raw, index, listed, path)
        step = _decode_step(system, machines, names, index, state, path)
        steps.append(step if verifier is None else verifier.check(index, step))
    _check_rest(members.rest, path)
    if not steps:
        raise TraceFileError(path, None, "the trace has no states")
    return Trace(
        system.name,
        tuple(steps),
        _meta_text(meta, "property", "", path),
        _meta_text(meta, "verdict", "violated", path),
        _meta_text(meta, "detail", "", path),
    )


def _expected_variables(system: System, listed: Sequence[str], path: str | None) -> tuple[str, ...]:
    """The system's ITF variables, once the file is found to list exactly those."""
    names = variable_names(system)
    for name in listed:
        if name not in names:
            raise TraceFileError(
                path, 0, f"unknown variable {name!r}; system {system.name!r} has {list(names)}"
            )
    for name in names:
        if name not in listed:
            raise TraceFileError(path, 0, f"missing variable {name!r}")
    return names


def _check_rest(rest: Mapping[str, Json], path: str | None) -> None:
    """The members after the states: only an unsupported ``"loop"`` or nothing."""
    unknown = sorted(set(rest) - _TOP_LEVEL)
    if unknown:
        raise TraceFileError(
            path,
            None,
            f"unknown top-level field {unknown[0]!r} (an ITF trace has {sorted(_TOP_LEVEL)})",
        )
    if "loop" in rest:
        raise TraceFileError(path, None, _LASSO)
    if rest:
        raise TraceFileError(path, None, f"{sorted(rest)[0]!r} must come before 'states'")


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
            raise TraceFileError(path, index, f"{name} must hold a Slot, not {_brief(slot)}")
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
            path, index, f"unknown action {_brief(name)}; system {system.name!r} has {known}"
        )
    action = system.action(name)
    raw_args = meta.get("args", {})
    if not isinstance(raw_args, dict) or set(raw_args) != set(action.params):
        given = sorted(raw_args) if isinstance(raw_args, dict) else _kind(raw_args)
        raise TraceFileError(
            path,
            index,
            f"action {name!r} takes the arguments {list(action.params)}, the file gives {given}",
        )
    args: list[tuple[str, Hashable]] = []
    for param in action.params:
        where = f"argument {param}"
        problem = _check_value(raw_args[param], where)
        if problem:
            raise TraceFileError(path, index, problem)
        try:
            args.append((param, _decode(raw_args[param], machines, where)))
        except _DecodeError as exc:
            raise TraceFileError(path, index, f"{exc.where}: {exc.problem}") from None
    actor = meta.get("actor", action.actor)
    if actor != action.actor:
        raise TraceFileError(
            path, index, f"action {name!r} is taken by {action.actor!r}, not {_brief(actor)}"
        )
    return ActionLabel(name, tuple(args)), action.actor


# -- verifying against the model ----------------------------------------------------------


class _Verifier:
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
            step_ = system.next_step(self.state, item.action)
        except ActionError as exc:
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
        return TraceStep(step_.action, step_.actor, step_.state, step_.outputs)

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
    verifier = _Verifier(system, path)
    steps = tuple(verifier.check(index, item) for index, item in enumerate(trace.steps))
    return Trace(system.name, steps, trace.property_id, trace.verdict, trace.detail)
