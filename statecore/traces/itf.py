"""Counterexamples on disk: traces as ITF JSON, the Informal Trace Format.

ITF is the trace format of Apalache and Quint (Apalache ADR-015): a JSON
object with a ``"#meta"`` header, the list of state ``"vars"`` and the
``"states"``, each mapping every variable to a value. Writing statecore
traces in it means a counterexample found today can be kept next to the bug
report, replayed after the model changed (`statecore.traces.replay`), turned into a
regression test (`statecore.traces.regression`) and read by ITF tools.

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
a record            ``{"tag": "Record", "value": {"type": "Task", "fields":
(a ``NamedTuple``)  {"kind": "chunk", ...}}}``; read back as a named tuple of
                    that name and fields, equal to the model's record
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
`statecore.traces.targets.trace_target`).
"""

from __future__ import annotations

import json
import os
from collections.abc import Hashable, Iterable, Mapping, Sequence
from pathlib import Path
from typing import BinaryIO, TypeAlias

from ..definition import Machine, Output
from ..system import ActionLabel, Handle, Slot, System, SystemState
from .itf_json import Document, Members
from .itf_values import (
    _REGENERATE,
    MAX_DEPTH,
    MAX_DIGITS,
    Json,
    TraceFileError,
    Unserializable,
    _brief,
    _check_value,
    _decode,
    _DecodeError,
    _flatten,
    _kind,
    _machines,
    decode_value,
    encode_value,
    same_state,
    state_diff,
    variable_names,
)
from .trace import Trace, TraceStep
from .verify import Verifier, verify_trace

__all__ = [
    "FORMAT_DESCRIPTION",
    "MAX_DEPTH",
    "MAX_DIGITS",
    "Json",
    "PathLike",
    "TraceFileError",
    "Unserializable",
    "decode_value",
    "encode_value",
    "itf_text",
    "read_header",
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
PathLike: TypeAlias = str | os.PathLike[str]
_TOP_LEVEL = frozenset({"#meta", "params", "vars", "states", "loop"})


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
    from .. import __version__

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
        meta = Document(stream, where).header()
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
        document = Document(stream, where)
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
    return _read_trace(Members(obj), system, path, verify)


def _read_trace(members: Members, system: System, path: str | None, verify: bool) -> Trace:
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
    verifier = Verifier(system, path) if verify else None
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
