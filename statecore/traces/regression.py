"""Regression tests from counterexamples: a trace becomes a pytest module.

A counterexample in a bug report is a claim; a failing test is a fact that
stays checked. `regression_test_source(trace, target)` writes the source of a
test module that loads the system named by `target`, replays the trace's
actions (written out literally, so the test reads as the scenario it is) with
`statecore.traces.replay.replay_actions`, and asserts what the trace showed:

* by default, that the property is still violated along the path - the test
  documents the bug and passes while it is there;
* with ``must_hold=True``, that it is no longer violated - the form to commit
  with the fix (a path the fixed model no longer allows passes too).

(For a ``sometimes`` witness both forms assert the state is still reached.)

`target` is ``"package.module:object"`` - the `System`, or a function
returning one (called with no arguments) - or the name of a bundled target
(``"chunk_transfer_6670"``, see `statecore.registry`). With ``resolver=
"package.module:function"`` (or the function itself, if importable) the
generated test calls ``function(target)`` instead, for systems known by a
name in a registry of one's own.

The source is formatted as ``ruff format`` (and Black) would format it, for
the given line length, so it can be committed as it is.
"""

from __future__ import annotations

import importlib
import inspect
import math
import re
import textwrap
from collections.abc import Callable, Hashable
from dataclasses import dataclass

from ..definition import Output, Snapshot
from ..registry import TargetError, call_factory
from ..system import ActionLabel, Handle, ModelValue, Slot, System
from .trace import Trace

__all__ = [
    "MIN_LINE_LENGTH",
    "TargetError",
    "load_system",
    "python_literal",
    "regression_test_source",
]


# The fixed lines of a generated module (imports, the assertion) fit in this.
MIN_LINE_LENGTH = 70


_DOTTED = r"[A-Za-z_][A-Za-z0-9_]*(?:\.[A-Za-z_][A-Za-z0-9_]*)*"
_OBJECT_PATH = re.compile(f"{_DOTTED}:{_DOTTED}")


def _resolve(spec: str, what: str) -> object:
    """The object ``package.module:object`` names (a dotted path inside the module is allowed)."""
    module_name, sep, attribute = spec.partition(":")
    if not sep or not module_name or not attribute:
        raise TargetError(f"{what} {spec!r} must look like 'package.module:object'")
    try:
        found: object = importlib.import_module(module_name)
    except ImportError as exc:
        raise TargetError(f"{what} {spec!r}: cannot import {module_name!r} ({exc})") from exc
    for part in attribute.split("."):
        try:
            found = getattr(found, part)
        except AttributeError:
            raise TargetError(f"{what} {spec!r}: no attribute {part!r}") from None
    return found


def load_system(target: str, resolver: str | None = None) -> System:
    """The `System` `target` names (see the module docstring).

    ``"package.module:object"`` imports the module and takes the object (a
    dotted path inside the module is allowed); a callable that is not a
    `System` is called with no arguments (one that needs arguments is
    refused). A bare name is a bundled target (`statecore.registry.resolve`).
    With `resolver`, the function it names is called with `target` instead.
    Raises `statecore.registry.TargetError`.
    """
    if resolver is not None:
        function = _resolve(resolver, "resolver")
        if not callable(function):
            raise TargetError(f"resolver {resolver!r} is not callable")
        _check_takes_one(function, resolver)
        found: object = function(target)
    elif ":" not in target:
        from ..registry import resolve

        found = resolve(target)[1]
    else:
        found = _resolve(target, "target")
        if not isinstance(found, System) and callable(found):
            found = call_factory(found, f"target {target!r}")
    if not isinstance(found, System):
        raise TargetError(f"target {target!r} gives {type(found).__name__}, not a System")
    return found


def _check_takes_one(function: Callable[..., object], resolver: str) -> None:
    try:
        inspect.signature(function).bind("name")
    except TypeError:
        raise TargetError(
            f"resolver {resolver!r} must take one argument, the target name"
        ) from None
    except ValueError:  # no signature to check: the call decides
        pass


def _check_names(target: str, resolver: str | None) -> None:
    """Refuse a `target` or `resolver` the generated test could not load by that name.

    The generated module imports exactly these names when it runs, so they
    are checked when it is written: ``package.module:object`` of Python
    names, or (without a resolver) a bundled target name.
    """
    if resolver is not None and not _OBJECT_PATH.fullmatch(resolver):
        raise TargetError(f"resolver {resolver!r} must look like 'package.module:function'")
    if _OBJECT_PATH.fullmatch(target):
        return
    if ":" in target or not target:
        raise TargetError(f"target {target!r} must look like 'package.module:object'")
    if resolver is None and target not in _bundled_names():
        raise TargetError(
            f"target {target!r} is neither a bundled target ('statecore list') nor "
            "'package.module:object'"
        )


def _bundled_names() -> list[str]:
    from ..registry import bundled

    return [t.name for t in bundled()]


def _importable_name(function: Callable[[str], System]) -> str:
    """``"module:qualname"`` of `function`, which a generated test can import again."""
    module = getattr(function, "__module__", None)
    qualname = getattr(function, "__qualname__", "")
    if not module or module == "__main__" or "<" in qualname:
        raise TargetError(
            f"resolver {function!r} cannot be imported by name; define it at the top "
            "level of an importable module, or pass 'package.module:function'"
        )
    return f"{module}:{qualname}"


# -- literals ------------------------------------------------------------------------


@dataclass(frozen=True)
class _Group:
    """A bracketed literal: ``head item, item tail`` (a call or a collection)."""

    head: str
    items: tuple[_Node, ...]
    tail: str
    call: bool  # call arguments stay on one line when they fit; collections explode
    one_tuple: bool = False


_Node = str | _Group


def _str_literal(text: str) -> str:
    """`text` quoted the way ruff normalises it: double quotes unless that costs escapes."""
    body = repr(text)[1:-1]
    if repr(text)[0] == '"':  # repr chose double quotes: text has ' and no "
        return repr(text)
    if '"' in text and text.count('"') > text.count("'"):
        return repr(text)
    return '"' + body.replace("\\'", "'").replace('"', '\\"') + '"'


def _call(name: str, *items: _Node) -> _Group:
    return _Group(f"{name}(", items, ")", call=True)


def _node(value: object, names: set[str]) -> _Node:
    kind = type(value)
    if value is None or kind is bool or kind is int:
        return repr(value)
    if kind is str:
        assert isinstance(value, str)
        return _str_literal(value)
    if kind is float:
        assert isinstance(value, float)
        if math.isnan(value) or math.isinf(value):
            return _call("float", f'"{value!r}"')
        return repr(value)
    if kind is ModelValue:
        assert isinstance(value, ModelValue)
        names.add("ModelValue")
        return _call("ModelValue", _str_literal(value.group), repr(value[1]))
    if kind is Handle:
        assert isinstance(value, Handle)
        names.add("Handle")
        return _call(
            "Handle",
            _str_literal(value.component),
            _node(value.key, names),
            repr(value.generation),
        )
    if kind is Output:
        assert isinstance(value, Output)
        names.add("Output")
        return _call("Output", _str_literal(value.name), _node(value.fields, names))
    if kind is ActionLabel:
        assert isinstance(value, ActionLabel)
        names.add("ActionLabel")
        if not value.args:
            return _call("ActionLabel", _str_literal(value.name))
        return _call("ActionLabel", _str_literal(value.name), _node(value.args, names))
    if kind is tuple:
        assert isinstance(value, tuple)
        items = tuple(_node(item, names) for item in value)
        return _Group("(", items, ")", call=False, one_tuple=len(items) == 1)
    if kind is frozenset:
        assert isinstance(value, frozenset)
        if not value:
            return "frozenset()"
        items = tuple(sorted((_node(item, names) for item in value), key=_flat))
        return _call("frozenset", _Group("{", items, "}", call=False))
    if isinstance(value, (Slot, Snapshot)):
        raise TargetError(
            f"{value!r} cannot be written as a literal: snapshots need their machine; "
            "give actions arguments that are ids, handles or plain values"
        )
    raise TargetError(f"{value!r} ({kind.__name__}) cannot be written as a Python literal")


def _flat(node: _Node) -> str:
    if isinstance(node, str):
        return node
    inner = ", ".join(_flat(item) for item in node.items)
    return node.head + inner + ("," if node.one_tuple else "") + node.tail


def _lines(node: _Node, indent: int, suffix: str, width: int) -> list[str]:
    """`node` laid out as ruff (and Black) lay out a too-long bracketed literal.

    It stays on one line if it fits. Otherwise the brackets split: call
    arguments go on one indented line if they fit there, else one per line;
    a collection of several items goes one per line at once. A trailing
    comma is added exactly when items go one per line and there are several.
    """
    pad = " " * indent
    flat = pad + _flat(node) + suffix
    if isinstance(node, str) or not node.items or len(flat) <= width:
        return [flat]
    inner = indent + 4
    body = " " * inner + _flat(_Group("", node.items, "", node.call, node.one_tuple))
    several = len(node.items) > 1
    if (node.call or not several) and len(body) <= width:
        middle = [body]
    elif several or node.one_tuple:
        middle = [line for item in node.items for line in _lines(item, inner, ",", width)]
    else:
        middle = _lines(node.items[0], inner, "", width)
    return [pad + node.head, *middle, pad + node.tail + suffix]


def python_literal(value: Hashable, width: int = 88) -> str:
    """Python source that rebuilds `value`, formatted to `width` columns.

    Covers what action arguments hold: None, bools, ints, floats (``nan`` and
    ``inf`` as ``float("nan")``), strings, tuples, frozensets and statecore's
    `ModelValue`, `Handle`, `Output` and `ActionLabel`.
    """
    return "\n".join(_lines(_node(value, set()), 0, "", width))


# -- the test module -----------------------------------------------------------------


def _test_name(property_id: str, must_hold: bool, witness: bool, width: int) -> str:
    """A test function name for the property, short enough for its ``def`` line."""
    base = "".join(ch if ch.isascii() and ch.isalnum() else "_" for ch in property_id)
    base = base.strip("_") or "trace"
    if witness:
        suffix = "_is_reached"
    else:
        suffix = "_holds_on_counterexample" if must_hold else "_is_violated"
    room = width - len("def test_() -> None:") - len(suffix)
    return f"test_{base[:room].rstrip('_')}{suffix}"


def _docstring_text(text: str) -> str:
    """`text` safe inside a triple-quoted docstring, whatever it holds (it may come from a file)."""
    text = text.replace("\\", "\\\\").replace('"""', '\\"\\"\\"')
    return "".join(ch if ch.isprintable() else _escape(ch) for ch in text)


def _escape(ch: str) -> str:
    return ch.encode("unicode_escape").decode("ascii")


def _docstring(trace: Trace, target: str, must_hold: bool, width: int) -> list[str]:
    """The generated module's docstring: the scenario, step by step, and what is asserted."""

    def wrap(text: str, first: str = "", rest: str = "") -> list[str]:
        lines = textwrap.wrap(text, width - 4, initial_indent=first, subsequent_indent=rest)
        return [_docstring_text(line) for line in lines]

    kind = "witness" if trace.verdict == "witness" else "counterexample"
    lines = [f'"""Regression test: a {kind} for property {_docstring_text(trace.property_id)}.']
    lines.append("")
    lines.extend(
        wrap(
            f"Generated by statecore from a {len(trace)}-step trace of system "
            f"{trace.system!r} (target {target!r}):"
        )
    )
    lines.append("")
    for index, item in enumerate(trace.steps[1:], 1):
        first = f"    {index}. "
        lines.extend(wrap(f"{item.actor}: {item.action}", first, " " * len(first)))
    if len(trace) == 0:
        lines.append("    (the initial state alone)")
    if trace.detail:
        lines.append("")
        lines.extend(wrap(f"Result: {trace.verdict}: {trace.detail}"))
    lines.append("")
    if trace.verdict == "witness":
        note = "The test asserts that the replayed path still reaches the witness state."
    elif must_hold:
        note = (
            "The test asserts that the property holds along this path now (the fix); "
            "a path the model no longer allows passes too."
        )
    else:
        note = (
            "The test asserts that the property is still violated along this path: "
            "it documents the bug. After the fix, regenerate it with must_hold=True."
        )
    lines.extend(wrap(note))
    lines.append('"""')
    return lines


def regression_test_source(
    trace: Trace,
    target: str,
    *,
    must_hold: bool = False,
    resolver: str | Callable[[str], System] | None = None,
    line_length: int = 88,
) -> str:
    """The source of a pytest module that replays `trace` against `target`.

    See the module docstring for `target`, `resolver` and `must_hold`. The
    source is valid Python, formatted as ``ruff format --line-length
    <line_length>`` would, and needs only statecore and the target to run.

    The test imports only `target` and `resolver`, as given here: the trace
    (which may have been read from a file) supplies data - actions, a
    property id, text for the docstring - written as escaped literals.
    """
    if not trace.property_id:
        raise TargetError("the trace names no property; a regression test needs one")
    if line_length < MIN_LINE_LENGTH:
        raise ValueError(f"line_length must be at least {MIN_LINE_LENGTH}, not {line_length}")
    if callable(resolver):
        resolver = _importable_name(resolver)
    _check_names(target, resolver)
    names: set[str] = {"ActionLabel"}
    actions = [_node(label, names) for label in trace.actions]
    witness = trace.verdict == "witness"
    out = _docstring(trace, target, must_hold, line_length)
    out.append("")
    out.append("from statecore.traces.regression import load_system")
    out.append("from statecore.traces.replay import replay_actions")
    out.append(f"from statecore.system import {', '.join(sorted(names))}")
    out.append("")
    out.append(f"TARGET = {_str_literal(target)}")
    if resolver is not None:
        out.append(f"RESOLVER = {_str_literal(resolver)}")
    out.append(f"PROPERTY = {_str_literal(trace.property_id)}")
    if actions:
        out.append("ACTIONS = [")
        for node in actions:
            out.extend(_lines(node, 4, ",", line_length))
        out.append("]")
    else:
        out.append("ACTIONS: list[ActionLabel] = []")
    out.extend(["", ""])
    out.append(f"def {_test_name(trace.property_id, must_hold, witness, line_length)}() -> None:")
    load = "load_system(TARGET, RESOLVER)" if resolver is not None else "load_system(TARGET)"
    out.append(f"    system = {load}")
    out.append("    result = replay_actions(system, ACTIONS, PROPERTY)")
    if witness:
        out.append('    assert result.verdict == "holds", result.explain(system)')
    elif must_hold:
        out.append('    assert result.verdict != "violated", result.explain(system)')
    else:
        out.append('    assert result.verdict == "violated", result.explain(system)')
    return "\n".join(out) + "\n"
