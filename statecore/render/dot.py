"""Machines as Graphviz DOT text: states, transitions and a path drawn over them.

`statecore.render.graphviz` turns the text into SVG, PNG or PDF.
"""

from __future__ import annotations

import textwrap
from collections.abc import Iterable, Sequence
from typing import Literal

from ..definition import Machine, Transition
from .drawing import (
    _DIM,
    _DIM_TEXT,
    _FONT,
    _HOT_FILL,
    _HOT_LINE,
    _PATH,
    _PATH_TEXT,
    _edges,
    _Marks,
    _marks,
    _numbers,
    _steps_of,
    _with_steps,
)
from .overlay import PathStep

__all__ = ["to_dot"]


def _dot_quote(text: str) -> str:
    """A DOT double-quoted string; newlines become centred line breaks."""
    body = text.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n")
    return f'"{body}"'


def _html(text: str) -> str:
    return (
        text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;").replace('"', "&quot;")
    )


class _HTMLLabel(str):
    """A Graphviz HTML-like label, written as ``<...>`` rather than quoted."""

    __slots__ = ()


def _attrs(**attrs: str | float) -> str:
    return "[" + ", ".join(f"{k}={_dot_attr(v)}" for k, v in attrs.items()) + "]"


def _dot_attr(value: str | float) -> str:
    if isinstance(value, _HTMLLabel):
        return f"<{value}>"
    return _dot_quote(str(value))


def _dot_label_lines(transition: Transition, width: int) -> list[str]:
    """`Transition.label()` broken before ``[guard]`` and ``/ effect``, then wrapped."""
    parts = [transition.event]
    if transition.guard_label:
        parts.append(f"[{transition.guard_label}]")
    if transition.effect_label:
        parts.append(f"/ {transition.effect_label}")
    lines: list[str] = []
    for part in parts:
        lines.extend(textwrap.wrap(part, width) or [part])
    return lines


def _dot_header(name: str, label: str | _HTMLLabel | None, rankdir: str) -> list[str]:
    graph: dict[str, str | float] = {
        "rankdir": rankdir,
        "fontname": _FONT,
        "fontsize": 14,
        "nodesep": 0.45,
        "ranksep": 0.7,
        "pad": 0.3,
    }
    if label:
        graph.update(label=label, labelloc="t", labeljust="l")
    return [
        f"digraph {_dot_quote(name)} {{",
        f"    graph {_attrs(**graph)};",
        f"    node {_attrs(fontname=_FONT, fontsize=13, margin='0.15,0.06')};",
        f"    edge {_attrs(fontname=_FONT, fontsize=10, arrowsize=0.8)};",
    ]


def _dot_title(title: str, steps: Sequence[PathStep] | None) -> str | _HTMLLabel:
    """The graph label: the title, then (with a path) a table of its steps."""
    if not steps:
        return title
    heading = '<br align="left"/>'.join(_html(line) for line in title.splitlines())
    rows = [
        f'<tr><td colspan="4" border="0" align="left"><font point-size="14">{heading}'
        '<br align="left"/></font></td></tr>',
        '<tr><td align="left"><b>step</b></td><td align="left"><b>action</b></td>'
        '<td align="left"><b>instance</b></td><td align="left"><b>what happened</b></td></tr>',
    ]
    for item in steps:
        text = _html(item.describe())
        if item.kind != "refused":
            text = f'<font color="{_PATH_TEXT}">{text}</font>'
        rows.append(
            f'<tr><td align="right">{item.step}</td>'
            f'<td align="left">{_html(item.action)}</td>'
            f'<td align="left">{_html(item.instance)}</td>'
            f'<td align="left">{text}</td></tr>'
        )
    return _HTMLLabel(
        '<table border="0" cellborder="1" cellspacing="0" cellpadding="3" '
        f'color="{_DIM}"><tr><td border="0" colspan="4"></td></tr>' + "".join(rows) + "</table>"
    )


def to_dot(
    machine: Machine,
    *,
    highlight: Iterable[PathStep] | None = None,
    title: str | None = None,
    rankdir: str = "LR",
    wrap: int = 30,
    self_loops: Literal["inside", "edges"] = "inside",
) -> str:
    """The machine as a Graphviz digraph.

    An arrow from a point marks the initial state; final states are double
    circles; hot states are filled orange with a dashed border. Transitions
    that stay in their state are listed inside it, under a line (UML's
    internal transitions; Graphviz stacks loop labels on top of each other),
    or with ``self_loops="edges"`` drawn as one loop edge per state. With
    `highlight` (one component's steps from `trace_overlay`) the path is drawn
    in thick red with its step numbers on the edges, the rest greyed, and the
    steps listed under the title. Labels wrap at `wrap` characters.
    """
    marks = _marks(machine, highlight)
    heading = title if title is not None else machine.name
    lines = _dot_header(machine.name, _dot_title(heading, marks.steps if marks else None), rankdir)
    start = "[*]"  # not an identifier, so no state can be called that
    lines.append(f"    {_dot_quote(start)} {_attrs(shape='point', width=0.18, label='')};")
    edges = _edges(machine)
    inside: dict[str, list[tuple[Transition, list[int] | None]]] = {}
    if self_loops == "inside":
        for edge in edges:
            if edge.source == edge.target:
                inside[edge.source] = [
                    (t, _steps_of(marks, edge.source, i)) for t, i in edge.entries
                ]
        edges = [edge for edge in edges if edge.source != edge.target]
    for state in machine.states:
        attrs: dict[str, str | float] = {"label": state.name}
        styles: list[str] = []
        if state.final:
            attrs.update(shape="doublecircle", width=0.3, margin=0.01)
        else:
            attrs["shape"] = "box"
            styles.append("rounded")
        if state.hot:
            styles += ["filled", "dashed"]
            attrs.update(fillcolor=_HOT_FILL, color=_HOT_LINE, penwidth=2)
        if marks is not None:
            if state.name in marks.visited:
                attrs.update(color=_PATH, penwidth=3)
            else:
                attrs.update(color=_DIM, fontcolor=_DIM_TEXT)
        if styles:
            attrs["style"] = ",".join(styles)
        if state.name in inside:
            attrs.update(
                label=_dot_state_label(state.name, inside[state.name], marks is not None, wrap),
                margin="0.1,0.04",
            )
        lines.append(f"    {_dot_quote(state.name)} {_attrs(**attrs)};")
    spawns = marks.spawns if marks else None
    style = _dot_edge_style(marks, bool(spawns))
    if spawns:
        style["label"] = _numbers(spawns)
    lines.append(
        f"    {_dot_quote(start)} -> {_dot_quote(machine.initial.name)} {_attrs(**style)};"
    )
    for edge in edges:
        entries = [(t, _steps_of(marks, edge.source, i)) for t, i in edge.entries]
        style = _dot_edge_style(marks, any(steps for _, steps in entries))
        if len(entries) == 1:
            transition, steps = entries[0]
            label_lines = _dot_label_lines(transition, wrap)
            label_lines[0] = _with_steps(steps, label_lines[0])
            style["label"] = "\n".join(label_lines)
        else:
            style["label"] = _HTMLLabel(
                "<br/>".join(
                    _dot_loop_line(t, steps, marks is not None, wrap) for t, steps in entries
                )
            )
        lines.append(
            f"    {_dot_quote(edge.source)} -> {_dot_quote(edge.target)} {_attrs(**style)};"
        )
    lines.append("}")
    return "\n".join(lines) + "\n"


def _dot_loop_line(
    transition: Transition, steps: list[int] | None, dimmed: bool, wrap: int, left: bool = False
) -> str:
    """One transition that stays in its state, as HTML text (red and bold if taken)."""
    wrapped = textwrap.wrap(_with_steps(steps, transition.label()), wrap + 10)
    br = '<br align="left"/>' if left else "<br/>"
    text = br.join(_html(line) for line in wrapped) + (br if left else "")
    if steps:
        return f'<font color="{_PATH_TEXT}"><b>{text}</b></font>'
    if dimmed:
        return f'<font color="{_DIM_TEXT}">{text}</font>'
    return text


def _dot_state_label(
    name: str,
    loops: Sequence[tuple[Transition, list[int] | None]],
    dimmed: bool,
    wrap: int,
) -> _HTMLLabel:
    """A state's name over a line, then the transitions that stay in it."""
    rows = "".join(
        f'<tr><td align="left"><font point-size="10">'
        f"{_dot_loop_line(t, steps, dimmed, wrap, left=True)}</font></td></tr>"
        for t, steps in loops
    )
    return _HTMLLabel(
        '<table border="0" cellborder="0" cellspacing="0" cellpadding="1">'
        f"<tr><td>{_html(name)}</td></tr><hr/>{rows}</table>"
    )


def _dot_edge_style(marks: _Marks | None, on_path: bool) -> dict[str, str | float]:
    if on_path:
        return {
            "color": _PATH,
            "fontcolor": _PATH_TEXT,
            "penwidth": 3.5,
            "fontname": f"{_FONT}-Bold",
        }
    if marks is not None:
        return {"color": _DIM, "fontcolor": _DIM_TEXT}
    return {}
