"""What the Mermaid and DOT drawings of a machine share: colours, edges, a path's marks.

`edges` lays out a machine's transitions as drawn edges (one per source
state, a state's self-loops merged); `marks` indexes a highlighted path
(`statecore.render.overlay.PathStep`) by edge, so each drawing can put the step
numbers on the transitions taken.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from ..definition import Machine, Transition
from .overlay import DiagramError, PathStep

# Colours: orange for hot states, red for a trace's path, grey for the rest of
# the machine when a path is drawn over it.
_HOT_FILL = "#ffc078"
_HOT_LINE = "#e8590c"
_PATH = "#e03131"
_PATH_TEXT = "#c92a2a"
_DIM = "#868e96"
_DIM_TEXT = "#495057"
_FONT = "Helvetica"


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
