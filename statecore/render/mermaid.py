"""Machines as Mermaid ``stateDiagram-v2`` text (renders in GitHub pull requests)."""

from __future__ import annotations

import json
from collections.abc import Iterable
from typing import Literal

from ..definition import Machine
from .drawing import (
    _HOT_FILL,
    _HOT_LINE,
    _PATH,
    _edges,
    _marks,
    _numbers,
    _steps_of,
    _with_steps,
)
from .overlay import PathStep

__all__ = ["mermaid_escape", "to_mermaid"]

# Characters Mermaid's parser cannot take in a label, as entity codes (which
# Mermaid decodes when it draws).
_MERMAID_ESCAPES = {
    "#": "#35;",
    ":": "#58;",
    ";": "#59;",
    '"': "#quot;",
    "[": "#91;",
    "]": "#93;",
    "{": "#123;",
    "}": "#125;",
    "<": "#lt;",
    ">": "#gt;",
    "%": "#37;",
    "\n": " ",
}
_MERMAID_RESERVED = frozenset(
    {
        "state",
        "note",
        "end",
        "class",
        "classDef",
        "style",
        "direction",
        "scale",
        "hide",
        "click",
        "default",
        "accTitle",
        "accDescr",
        "as",
    }
)
_MERMAID_CLASSES = {
    "hot": f"fill:{_HOT_FILL},stroke:{_HOT_LINE},stroke-width:2px,stroke-dasharray:5 5",
    "final": "fill:#e9ecef,stroke:#343a40,stroke-width:3px",
    "path": f"stroke:{_PATH},stroke-width:4px",
    "hot_path": f"fill:{_HOT_FILL},stroke:{_PATH},stroke-width:4px,stroke-dasharray:5 5",
    "final_path": f"fill:#e9ecef,stroke:{_PATH},stroke-width:4px",
}


def mermaid_escape(text: str) -> str:
    """`text` with the characters Mermaid cannot take in a label as entity codes."""
    return "".join(_MERMAID_ESCAPES.get(ch, ch) for ch in text)


def _mermaid_ids(machine: Machine) -> dict[str, str]:
    names = {s.name for s in machine.states}
    ids: dict[str, str] = {}
    for state in machine.states:
        ident = state.name
        while ident in _MERMAID_RESERVED or (ident != state.name and ident in names):
            ident += "_"
        ids[state.name] = ident
    return ids


def _mermaid_header(title: str | None) -> list[str]:
    return ["---", f"title: {json.dumps(title)}", "---"] if title else []


def to_mermaid(
    machine: Machine,
    *,
    highlight: Iterable[PathStep] | None = None,
    title: str | None = None,
    direction: str = "LR",
    self_loops: Literal["inside", "edges"] = "inside",
) -> str:
    """The machine as a Mermaid ``stateDiagram-v2``.

    Transitions that stay in their state are listed inside it, under its name
    (or, with ``self_loops="edges"``, drawn as one loop edge per state). With
    `highlight` (one component's steps from `trace_overlay`) the states on the
    path get a thick red border and each transition taken is labelled with its
    step numbers (Mermaid cannot colour one edge of a state diagram), and the
    steps are listed as ``%%`` comments.
    """
    marks = _marks(machine, highlight)
    ids = _mermaid_ids(machine)
    lines = [*_mermaid_header(title), "stateDiagram-v2", f"    direction {direction}"]
    for state in machine.states:
        if ids[state.name] != state.name:
            lines.append(f'    state "{mermaid_escape(state.name)}" as {ids[state.name]}')
    edges = _edges(machine)
    if self_loops == "inside":
        for edge in edges:
            if edge.source == edge.target:
                ident = ids[edge.source]
                lines.append(f"    {ident} : {mermaid_escape(edge.source)}")
                for t, i in edge.entries:
                    text = _with_steps(_steps_of(marks, edge.source, i), t.label())
                    lines.append(f"    {ident} : {mermaid_escape(text)}")
        edges = [edge for edge in edges if edge.source != edge.target]
    spawns = marks.spawns if marks else None
    start = f"    [*] --> {ids[machine.initial.name]}"
    lines.append(f"{start} : {mermaid_escape(_numbers(spawns))}" if spawns else start)
    for edge in edges:
        label = "<br/>".join(
            mermaid_escape(_with_steps(_steps_of(marks, edge.source, i), t.label()))
            for t, i in edge.entries
        )
        lines.append(f"    {ids[edge.source]} --> {ids[edge.target]} : {label}")
    for state in machine.states:
        if state.final:
            retired = marks.retires.get(state.name) if marks else None
            end = f"    {ids[state.name]} --> [*]"
            lines.append(f"{end} : {mermaid_escape(_numbers(retired))}" if retired else end)
    classes: dict[str, list[str]] = {}
    for state in machine.states:
        base = "hot" if state.hot else "final" if state.final else ""
        on_path = marks is not None and state.name in marks.visited
        name = "_".join(part for part in (base, "path" if on_path else "") if part)
        if name:
            classes.setdefault(name, []).append(ids[state.name])
    for name, style in _MERMAID_CLASSES.items():
        if name in classes:
            lines.append(f"    classDef {name} {style}")
    for name, members in classes.items():
        lines.append(f"    class {','.join(members)} {name}")
    if marks is not None:
        for item in marks.steps:
            text = f"{item.step} {item.action}: {item.instance} {item.describe()}"
            lines.append(f"    %% {text.replace('%', ' ')}")
    return "\n".join(lines) + "\n"
