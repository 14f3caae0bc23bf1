"""Diagrams for design reviews: machines and systems as Mermaid or Graphviz.

* `to_mermaid` / `to_dot` draw one `Machine`: an arrow into the initial state,
  final states (Mermaid ``--> [*]``, Graphviz double circles), hot states in
  orange, one edge per source state of each transition, labelled with
  `Transition.label()` (``event [guard] / effect``).
* `system_overview_mermaid` / `system_overview_dot` draw a `System`: each
  actor with its actions (internal ones dashed), and which components and
  globals each action changes (found by a bounded exploration).
* `trace_overlay` replays a `Trace` and returns, per component, what each
  step did to it; pass one component's steps as ``highlight=`` to draw the
  path in thick red with the step numbers on the edges (``1, 4: event``).
* `render` turns DOT source into SVG, PNG or PDF with Graphviz' ``dot``.

The ``statecore diagram`` command (`add_parser`, `run`) puts these together.
"""

from __future__ import annotations

import argparse
import json
import shutil
import subprocess
import sys
import textwrap
from collections import deque
from collections.abc import Hashable, Iterable, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any, Literal

from .definition import Machine, Transition
from .errors import StatecoreError
from .semantics import Outcome
from .system import ActionLabel, Handle, System, SystemState, SystemStep, Tx
from .trace import Trace

__all__ = [
    "Diagram",
    "DiagramError",
    "GraphvizNotFoundError",
    "PathStep",
    "add_parser",
    "diagrams",
    "markdown",
    "mermaid_escape",
    "render",
    "run",
    "system_overview_dot",
    "system_overview_mermaid",
    "to_dot",
    "to_mermaid",
    "trace_overlay",
]

GRAPHVIZ_INSTALL = "apt-get install -y graphviz"
RENDER_FORMATS = ("svg", "png", "pdf")
OVERVIEW = "overview"

# Colours: orange for hot states, red for a trace's path, grey for the rest of
# the machine when a path is drawn over it.
_HOT_FILL = "#ffc078"
_HOT_LINE = "#e8590c"
_PATH = "#e03131"
_PATH_TEXT = "#c92a2a"
_DIM = "#868e96"
_DIM_TEXT = "#495057"
_FONT = "Helvetica"


class DiagramError(StatecoreError):
    """A diagram cannot be drawn or rendered; the message says why."""


class GraphvizNotFoundError(DiagramError):
    """Graphviz' ``dot`` program is not installed."""


# -- trace overlays ---------------------------------------------------------------

StepKind = Literal["transition", "spawn", "retire", "refused"]


@dataclass(frozen=True)
class PathStep:
    """What one trace step did to one instance of a component's machine.

    `kind` is ``transition`` (`transition` taken from `source` to `target`),
    ``spawn`` (a new instance in the initial state `target`), ``retire`` (the
    instance in `source` was removed) or ``refused`` (`event` took no
    transition; `note` says why). `step` is the trace step, 1 for the first
    action; `action` the action's label, e.g. ``abort(ext=ext0)``.
    """

    step: int
    action: str
    instance: str
    kind: StepKind
    event: str = ""
    source: str | None = None
    target: str | None = None
    transition: Transition | None = None
    note: str = ""

    def describe(self) -> str:
        """One line for a legend, e.g. ``open -> terminal_pending (save_terminal)``."""
        if self.kind == "transition":
            return f"{self.source} -> {self.target} ({self.event})"
        if self.kind == "spawn":
            return f"spawned in {self.target}"
        if self.kind == "retire":
            return f"retired from {self.source}"
        return f"{self.event}: {self.note}"


class _RecordingTx(Tx[Any]):
    """A `Tx` that also records the source state and instance of every change.

    The records are `PathStep` values without a step number or action yet.
    """

    __slots__ = ("fired",)

    def __init__(self, system: System, state: SystemState) -> None:
        super().__init__(system, state)
        self.fired: list[tuple[str, PathStep]] = []  # (component, what happened)

    def _record(self, component: str, instance: str, kind: StepKind, **what: Any) -> None:
        self.fired.append((component, PathStep(0, "", instance, kind, **what)))

    def _state_of(self, component: str, key: Hashable) -> tuple[int, str | None]:
        slot = self.result()[0].slots[self.system.slot_index(component, key)]
        return slot.generation, None if slot.snapshot is None else slot.snapshot.state

    def fire(self, target: Handle | tuple[str, Hashable], event: str, /, **payload: Any) -> Outcome:
        component, key = target[0], target[1]
        generation, before = self._state_of(component, key)
        if isinstance(target, Handle):
            generation = target.generation
        outcome = super().fire(target, event, **payload)
        instance = f"{component}[{key}]#{generation}"
        if outcome.accepted:
            self._record(
                component,
                instance,
                "transition",
                event=event,
                source=before,
                target=outcome.snapshot.state,
                transition=outcome.transition,
            )
        else:
            note = f"{outcome.status} ({outcome.reason})" if outcome.reason else outcome.status
            self._record(component, instance, "refused", event=event, source=before, note=note)
        return outcome

    def spawn(self, component: str, key: Hashable) -> Handle:
        generation, before = self._state_of(component, key)
        handle = super().spawn(component, key)
        if before is not None:  # the previous generation is retired first
            self._record(component, f"{component}[{key}]#{generation}", "retire", source=before)
        initial = self.system.component(component).machine.initial.name
        self._record(component, repr(handle), "spawn", target=initial)
        return handle

    def retire(self, target: Handle | tuple[str, Hashable]) -> bool:
        component, key = target[0], target[1]
        generation, before = self._state_of(component, key)
        done = super().retire(target)
        if done:
            self._record(component, f"{component}[{key}]#{generation}", "retire", source=before)
        return done


def trace_overlay(system: System, trace: Trace) -> dict[str, tuple[PathStep, ...]]:
    """Replay `trace` on `system`; per component name, what each step did to it.

    Each action is replayed with `System.next_step` from the trace's first
    state; the transitions it reports (`SystemStep.taken`) are matched with
    the source state and instance each was taken from. Every component of
    the system has an entry (empty if the trace never touched it).
    """
    result: dict[str, list[PathStep]] = {c.name: [] for c in system.components}
    if not trace.steps:
        return {name: () for name in result}
    state = trace.steps[0].state
    for number, item in enumerate(trace.steps[1:], start=1):
        label = item.action
        if label is None:
            raise DiagramError(f"trace of {trace.system!r}: step {number} has no action")
        try:
            step_ = system.next_step(state, label)
        except StatecoreError as exc:
            raise DiagramError(
                f"trace of {trace.system!r} does not replay on system {system.name!r} "
                f"at step {number} ({label}): {exc}"
            ) from None
        tx = _RecordingTx(system, state)
        problem = ""
        try:
            system.action(label.name).run(tx, **dict(label.args))
        except Exception as exc:
            problem = f" ({exc!r})"
        recorded = [(c, p.transition.name) for c, p in tx.fired if p.transition is not None]
        reported = [(t.component, t.transition) for t in step_.taken]
        if problem or recorded != reported or tx.result()[0] != step_.state:
            raise DiagramError(
                f"system {system.name!r}: action {label} did not replay the same way "
                f"twice at step {number}{problem}; actions must be deterministic"
            )
        for component, what in tx.fired:
            result[component].append(replace(what, step=number, action=str(label)))
        state = step_.state
    return {name: tuple(steps) for name, steps in result.items()}


@dataclass(frozen=True)
class _Edge:
    """One drawn edge: a transition from one source, or every self-loop of a state.

    `entries` holds ``(transition, its position in the machine)``; a state's
    self-loops are merged into one edge (one label line each), since layout
    engines draw several loops on one state on top of each other.
    """

    source: str
    target: str
    entries: tuple[tuple[Transition, int], ...]


def _edges(machine: Machine) -> list[_Edge]:
    """One edge per source state of each transition, self-loops merged per state."""
    edges: list[_Edge] = []
    loops: dict[str, int] = {}
    for index, t in enumerate(machine.transitions):
        for source in t.source:
            target = t.target or source
            if target != source:
                edges.append(_Edge(source, target, ((t, index),)))
            elif source in loops:
                at = loops[source]
                edges[at] = _Edge(source, source, (*edges[at].entries, (t, index)))
            else:
                loops[source] = len(edges)
                edges.append(_Edge(source, source, ((t, index),)))
    return edges


@dataclass
class _Marks:
    """A highlighted path, indexed for drawing."""

    edges: dict[tuple[str, int], list[int]]
    spawns: list[int]
    retires: dict[str, list[int]]
    visited: set[str]
    steps: tuple[PathStep, ...]


def _marks(machine: Machine, highlight: Iterable[PathStep] | None) -> _Marks | None:
    if highlight is None:
        return None
    marks = _Marks({}, [], {}, set(), tuple(highlight))
    for item in marks.steps:
        if item.kind == "transition":
            index = _transition_index(machine, item)
            assert item.source is not None
            marks.edges.setdefault((item.source, index), []).append(item.step)
            marks.visited.add(item.source)
        elif item.kind == "spawn":
            marks.spawns.append(item.step)
        elif item.kind == "retire" and item.source is not None:
            marks.retires.setdefault(item.source, []).append(item.step)
        for name in (item.source, item.target):
            if name is not None:
                if name not in machine.state_index:
                    raise DiagramError(
                        f"highlight step {item.step}: machine {machine.name!r} has no "
                        f"state {name!r}; was the path taken on another machine?"
                    )
                marks.visited.add(name)
    return marks


def _transition_index(machine: Machine, item: PathStep) -> int:
    for i, t in enumerate(machine.transitions):
        if t is item.transition:
            return i
    for i, t in enumerate(machine.transitions):
        if item.transition is not None and t.name == item.transition.name:
            return i
    name = item.transition.name if item.transition is not None else "?"
    raise DiagramError(
        f"highlight step {item.step}: transition {name!r} is not a transition of "
        f"machine {machine.name!r}; was the path taken on another machine?"
    )


def _steps_of(marks: _Marks | None, source: str, index: int) -> list[int] | None:
    return marks.edges.get((source, index)) if marks is not None else None


def _numbers(steps: Sequence[int]) -> str:
    return ", ".join(str(n) for n in sorted(dict.fromkeys(steps)))


def _with_steps(steps: Sequence[int] | None, text: str) -> str:
    return f"{_numbers(steps)}: {text}" if steps else text


# -- Mermaid -------------------------------------------------------------------------

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


# -- Graphviz -------------------------------------------------------------------------


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


# -- system overviews -----------------------------------------------------------------


def _touches(system: System, limit: int) -> dict[str, set[tuple[str, str]]]:
    """Per action, the ``("component"|"global", name)`` it changed in some state.

    Found by a breadth-first exploration of at most `limit` states (0: none).
    """
    touched: dict[str, set[tuple[str, str]]] = {a.name: set() for a in system.actions}
    if limit <= 0:
        return touched
    slot_components = [component for component, _ in system.slot_keys()]
    global_names = [g.name for g in system.globals]
    initial = system.init_states()
    seen = set(initial)
    queue = deque(initial)
    while queue:
        state = queue.popleft()
        for step_ in _successors(system, state):
            marks = touched[step_.action.name]
            for name, before, after in zip(slot_components, state.slots, step_.state.slots):
                if before != after:
                    marks.add(("component", name))
            for t in step_.taken:
                marks.add(("component", t.component))
            for name, old, new in zip(global_names, state.values, step_.state.values):
                if old != new:
                    marks.add(("global", name))
            if step_.state not in seen and len(seen) < limit:
                seen.add(step_.state)
                queue.append(step_.state)
    return touched


def _successors(system: System, state: SystemState) -> list[SystemStep]:
    """`System.successors`, skipping the actions that raise (e.g. an event fired
    where its policy is ``error``) instead of giving up on the state."""
    try:
        return system.successors(state)
    except StatecoreError:
        pass
    steps: list[SystemStep] = []
    for action in system.actions:
        for args in action.arguments():
            try:
                steps.append(system.next_step(state, ActionLabel(action.name, args)))
            except StatecoreError:
                continue
    return steps


def _actors(system: System) -> dict[str, list[Any]]:
    actors: dict[str, list[Any]] = {}
    for action in system.actions:
        actors.setdefault(action.actor, []).append(action)
    return actors


def _action_text(action: Any) -> str:
    return f"{action.name}({', '.join(action.params)})"


def system_overview_mermaid(system: System, *, explore_limit: int = 5000) -> str:
    """The system as a Mermaid flowchart: actors, their actions, what each changes.

    Internal actions are dashed. What an action changes is found by exploring
    at most `explore_limit` states (0 draws actors and actions only).
    """
    return _overview_mermaid(system, _touches(system, explore_limit))


def _overview_mermaid(system: System, touched: dict[str, set[tuple[str, str]]]) -> str:
    lines = [
        *_mermaid_header(f"{system.name}: actors, actions and what they change"),
        "flowchart LR",
    ]
    for number, (actor, actions) in enumerate(_actors(system).items()):
        lines.append(f'    subgraph actor{number}["{mermaid_escape(actor)}"]')
        for action in actions:
            text = _action_text(action) + (" · internal" if action.internal else "")
            lines.append(f'        a_{action.name}["{mermaid_escape(text)}"]')
        lines.append("    end")
    for comp in system.components:
        text = f"{comp.name}: {comp.machine.name} ×{len(comp.key_values)}"
        lines.append(f'    c_{comp.name}[["{mermaid_escape(text)}"]]')
    for g in system.globals:
        lines.append(f'    g_{g.name}[("{mermaid_escape(g.name)}")]')
    links: dict[str, list[str]] = {"component": [], "global": []}
    for action in system.actions:
        for kind, name in sorted(touched[action.name]):
            links[kind].append(str(sum(len(v) for v in links.values())))
            lines.append(f"    a_{action.name} --> {kind[0]}_{name}")
    for kind, colour in (("component", "#1c7ed6"), ("global", "#f08c00")):
        if links[kind]:
            lines.append(f"    linkStyle {','.join(links[kind])} stroke:{colour}")
    lines.append("    classDef internal stroke-dasharray:5 5,fill:#f8f9fa")
    lines.append("    classDef component fill:#e7f5ff,stroke:#1c7ed6")
    lines.append("    classDef global fill:#fff9db,stroke:#f08c00")
    internal = [f"a_{a.name}" for a in system.actions if a.internal]
    if internal:
        lines.append(f"    class {','.join(internal)} internal")
    if system.components:
        lines.append(f"    class {','.join('c_' + c.name for c in system.components)} component")
    if system.globals:
        lines.append(f"    class {','.join('g_' + g.name for g in system.globals)} global")
    return "\n".join(lines) + "\n"


def system_overview_dot(system: System, *, explore_limit: int = 5000) -> str:
    """The system as a Graphviz digraph: actors, their actions, what each changes.

    Each actor is a cluster of its actions (internal ones dashed); components
    are blue, globals yellow cylinders. See `system_overview_mermaid`.
    """
    return _overview_dot(system, _touches(system, explore_limit))


def _overview_dot(system: System, touched: dict[str, set[tuple[str, str]]]) -> str:
    title = f"{system.name}: actors, actions and what they change (dashed: internal)"
    lines = _dot_header(f"{system.name}_overview", title, "LR")
    for number, (actor, actions) in enumerate(_actors(system).items()):
        lines.append(f"    subgraph cluster_{number} {{")
        lines.append(
            f"        graph {_attrs(label=actor, style='rounded', color=_DIM, fontsize=13)};"
        )
        for action in actions:
            attrs: dict[str, str | float] = {"label": _action_text(action), "shape": "box"}
            attrs["style"] = "rounded,dashed" if action.internal else "rounded"
            lines.append(f"        {_dot_quote('action:' + action.name)} {_attrs(**attrs)};")
        lines.append("    }")
    for comp in system.components:
        label = f"{comp.name}\n{comp.machine.name} ×{len(comp.key_values)}"
        attrs = {"label": label, "shape": "box3d", "style": "filled", "fillcolor": "#e7f5ff"}
        lines.append(f"    {_dot_quote('component:' + comp.name)} {_attrs(**attrs)};")
    for g in system.globals:
        attrs = {"label": g.name, "shape": "cylinder", "style": "filled", "fillcolor": "#fff9db"}
        lines.append(f"    {_dot_quote('global:' + g.name)} {_attrs(**attrs)};")
    for action in system.actions:
        for kind, name in sorted(touched[action.name]):
            colour = "#1c7ed6" if kind == "component" else "#f08c00"
            lines.append(
                f"    {_dot_quote('action:' + action.name)} -> {_dot_quote(f'{kind}:{name}')} "
                f"{_attrs(color=colour)};"
            )
    lines.append("}")
    return "\n".join(lines) + "\n"


# -- rendering ------------------------------------------------------------------------


def render(dot_source: str, fmt: str) -> bytes:
    """Render DOT source to `fmt` (``svg``, ``png`` or ``pdf``) with Graphviz' ``dot``.

    Raises `GraphvizNotFoundError` (naming the install command) if ``dot`` is
    missing, and `DiagramError` with Graphviz' message if it fails.
    """
    if fmt not in RENDER_FORMATS:
        raise DiagramError(f"cannot render {fmt!r}; formats are {list(RENDER_FORMATS)}")
    program = shutil.which("dot")
    if program is None:
        raise GraphvizNotFoundError(
            f"rendering {fmt} needs Graphviz' 'dot' program, which is not installed; "
            f"install it with '{GRAPHVIZ_INSTALL}' (Debian/Ubuntu) or 'brew install "
            f"graphviz' (macOS), or use --format mermaid or dot"
        )
    try:
        done = subprocess.run(
            [program, f"-T{fmt}"],
            input=dot_source.encode("utf-8"),
            capture_output=True,
            timeout=120,
            check=False,
        )
    except subprocess.TimeoutExpired:
        raise DiagramError("Graphviz' dot took more than 120 s; the graph is too big") from None
    if done.returncode != 0:
        message = done.stderr.decode("utf-8", "replace").strip()
        raise DiagramError(f"Graphviz' dot failed (exit {done.returncode}): {message}")
    return done.stdout


# -- all the diagrams of a system -------------------------------------------------------


@dataclass(frozen=True)
class Diagram:
    """One diagram of a system: a component's machine, or the overview."""

    name: str  # component name, or "overview"
    title: str
    mermaid: str
    dot: str
    steps: tuple[PathStep, ...] = ()  # the trace's steps on this component


def diagrams(
    system: System,
    *,
    trace: Trace | None = None,
    only: str | None = None,
    explore_limit: int = 5000,
) -> list[Diagram]:
    """One diagram per component (with `trace` drawn over it), then the overview.

    `only` picks one: a component name, a machine name, or ``overview``.
    """
    chosen = _choose(system, only) if only is not None else _all_names(system)
    overlay = trace_overlay(system, trace) if trace is not None else None
    result: list[Diagram] = []
    for comp in system.components:
        if comp.name not in chosen:
            continue
        title = f"{system.name}: {comp.name} (machine {comp.machine.name})"
        short = title
        highlight = overlay[comp.name] if overlay is not None else None
        if trace is not None:
            title += "\n" + _trace_caption(trace)
            short = f"{system.name}: {comp.name} - {_trace_caption(trace, detail=False)}"
        result.append(
            Diagram(
                comp.name,
                title,
                to_mermaid(comp.machine, highlight=highlight, title=short),
                to_dot(comp.machine, highlight=highlight, title=title),
                highlight or (),
            )
        )
    if OVERVIEW in chosen:
        touched = _touches(system, explore_limit)
        title = f"{system.name}: overview"
        result.append(
            Diagram(
                OVERVIEW, title, _overview_mermaid(system, touched), _overview_dot(system, touched)
            )
        )
    return result


CAPTION_DETAIL = 100
"""Characters of a trace's detail kept in an image's caption (Markdown keeps it whole)."""


def _trace_caption(trace: Trace, *, detail: bool = True) -> str:
    """``trace: PROPERTY VERDICT (DETAIL), N steps``; a Mermaid title drops the detail."""
    what = f"{trace.property_id} {trace.verdict}" if trace.property_id else "a path"
    text = trace.detail if detail else ""
    if len(text) > CAPTION_DETAIL:
        text = text[: CAPTION_DETAIL - 3].rstrip() + "..."
    return f"trace: {what}{f' ({text})' if text else ''}, {len(trace)} steps"


def _all_names(system: System) -> list[str]:
    return [c.name for c in system.components] + [OVERVIEW]


def _choose(system: System, only: str) -> list[str]:
    if only == OVERVIEW or any(c.name == only for c in system.components):
        return [only]
    by_machine = [c.name for c in system.components if c.machine.name == only]
    if by_machine:
        return by_machine
    choices = _all_names(system)
    machines = sorted({c.machine.name for c in system.components} - set(choices))
    also = f" (or a machine: {', '.join(machines)})" if machines else ""
    raise DiagramError(
        f"system {system.name!r} has no component or machine {only!r}; "
        f"choose one of: {', '.join(choices)}{also}"
    )


def markdown(system: System, drawn: Sequence[Diagram], trace: Trace | None = None) -> str:
    """A Markdown document: one ```mermaid block per diagram, each with its trace steps."""
    parts = [f"# {system.name}\n"]
    if system.doc:
        first = system.doc.strip().split("\n\n")[0]
        parts.append(first + "\n")
    for diagram in drawn:
        parts.append(f"## {diagram.title.splitlines()[0]}\n")
        parts.append("```mermaid\n" + diagram.mermaid + "```\n")
        steps = diagram.steps
        if steps:
            parts.append("| step | action | instance | what happened |")
            parts.append("| ---: | --- | --- | --- |")
            for item in steps:
                cells = (item.action, item.instance, item.describe())
                row = " | ".join(c.replace("|", "\\|") for c in cells)
                parts.append(f"| {item.step} | {row} |")
            parts.append("")
    if trace is not None and trace.detail:
        parts.append(f"Trace: `{trace.property_id}` {trace.verdict}: {trace.detail}\n")
    return "\n".join(parts)


# -- the command ----------------------------------------------------------------------

FORMATS = ("mermaid", "dot", "svg", "png")

EPILOG = """\
examples:
  statecore diagram chunk_transfer > chunk_transfer.md
  statecore diagram chunk_transfer --machine sender --format png -o sender.png
  statecore diagram chunk_transfer --format svg -o out/ct.svg    (ct.sender.svg, ...)
  statecore diagram chunk_transfer_6670 --machine sender --format png -o path.png \\
      --trace traces/chunk_transfer_6670.terminal_delivered.itf.json
  statecore diagram chunk_transfer --diff chunk_transfer_6670 > change.md

Mermaid output is a Markdown document with one ```mermaid block per diagram,
or the bare diagram with --machine. svg and png need Graphviz' dot
(apt-get install -y graphviz).
"""


def add_parser(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Add the ``diagram`` subcommand to the CLI's subparsers."""
    p = subparsers.add_parser(
        "diagram",
        help="draw the machines and an actor overview (Mermaid, DOT, SVG, PNG)",
        description="Draw the state machines of a target and an overview of its actors.",
        epilog=EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument("target", metavar="TARGET", help="name or module:object")
    p.add_argument("--format", "-f", choices=FORMATS, default="mermaid", help="default: mermaid")
    p.add_argument("--trace", type=Path, default=None, metavar="FILE", help="ITF trace to overlay")
    p.add_argument("-o", "--output", type=Path, default=None, metavar="FILE")
    p.add_argument(
        "--machine",
        default=None,
        metavar="NAME",
        help="one diagram: a component, a machine or 'overview'",
    )
    p.add_argument(
        "--diff",
        default=None,
        metavar="OTHER",
        help="draw what changes from TARGET to OTHER (a variant, another target): transitions "
        "added, removed, retargeted, guards and effects changed, actions and verdicts changed",
    )
    p.add_argument(
        "--no-verdicts",
        action="store_true",
        help="with --diff: do not explore both systems to compare property verdicts",
    )
    p.set_defaults(func=run)


def read_trace(path: Path, system: System) -> Trace:
    """Read the ITF trace at `path` for `system` (replayed, so it must still fit)."""
    from .itf import read_itf

    return read_itf(path, system)


def run(args: argparse.Namespace) -> int:
    """Run ``statecore diagram``; return the exit code (errors raise `StatecoreError`)."""
    from .registry import resolve, system_for_trace

    if getattr(args, "diff", None) is not None:
        return _run_diff(args)
    if args.trace is not None:
        # The trace's own target (a variant of TARGET, say) is the system it runs on;
        # a name the file gives is only looked up among the bundled ones.
        _, system = system_for_trace(args.trace, args.target, drawing=True)
    else:
        _, system, _ = resolve(args.target)
    fmt: str = args.format
    output: Path | None = args.output
    names = _choose(system, args.machine) if args.machine else _all_names(system)
    if fmt in RENDER_FORMATS and output is None and (len(names) > 1 or fmt == "png"):
        # Several images, or a binary one: files in the current directory.
        output = Path(f"{system.name}.{fmt}")
    trace = read_trace(args.trace, system) if args.trace is not None else None
    drawn = diagrams(system, trace=trace, only=args.machine)
    if fmt == "mermaid":
        bare = args.machine and len(drawn) == 1
        return _emit_text(drawn[0].mermaid if bare else markdown(system, drawn, trace), output)
    if fmt == "dot":
        return _emit_text("\n".join(d.dot for d in drawn), output)
    if output is None:
        sys.stdout.write(render(drawn[0].dot, fmt).decode("utf-8"))
        return 0
    if len(drawn) == 1 and not output.is_dir():
        return _write(output, render(drawn[0].dot, fmt))
    if output.is_dir():
        output = output / f"{system.name}.{fmt}"
    for diagram in drawn:
        path = output.with_name(f"{output.stem}.{diagram.name}.{fmt}")
        _write(path, render(diagram.dot, fmt))
    return 0


def _run_diff(args: argparse.Namespace) -> int:
    """``statecore diagram TARGET --diff OTHER``: the picture of the change."""
    from .diagram_diff import diff_dot, diff_markdown, diff_mermaid, diff_systems, diff_title
    from .registry import resolve

    if args.trace is not None:
        raise DiagramError("--diff draws a change and --trace a path: give one of them")
    _, before, _ = resolve(args.target)
    _, after, _ = resolve(args.diff)
    found = diff_systems(before, after, verdicts=not args.no_verdicts)
    drawn = [c for c in found.components if c.changed and c.before and c.after]
    if args.machine:
        drawn = [
            c
            for c in drawn
            if args.machine in (c.component, c.before and c.before.name, c.after and c.after.name)
        ]
    fmt: str = args.format
    output: Path | None = args.output
    if fmt == "mermaid":
        if args.machine and len(drawn) == 1:
            return _emit_text(diff_mermaid(drawn[0], title=diff_title(found, drawn[0])), output)
        return _emit_text(diff_markdown(found), output)
    sources = [(c.component, diff_dot(c, title=diff_title(found, c))) for c in drawn]
    if not sources:
        raise DiagramError(
            f"{args.target} and {args.diff} have the same machines; nothing to draw as {fmt} "
            "(the Markdown output lists the action and verdict changes)"
        )
    if fmt == "dot":
        return _emit_text("\n".join(text for _, text in sources), output)
    if output is None:
        output = Path(f"{before.name}-{after.name}.{fmt}")
    if len(sources) == 1:
        return _write(output, render(sources[0][1], fmt))
    for name, text in sources:
        _write(output.with_name(f"{output.stem}.{name}.{fmt}"), render(text, fmt))
    return 0


def _emit_text(text: str, output: Path | None) -> int:
    if output is None:
        sys.stdout.write(text)
        return 0
    return _write(output, text.encode("utf-8"))


def _write(path: Path, data: bytes) -> int:
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(data)
    except OSError as exc:
        raise DiagramError(f"cannot write {path}: {exc}") from None
    print(f"wrote {path}", file=sys.stderr)
    return 0
