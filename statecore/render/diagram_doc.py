"""All the diagrams of a system, with a trace drawn over them, and their Markdown document."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from ..system import System
from ..traces.trace import Trace
from .dot import to_dot
from .mermaid import to_mermaid
from .overlay import DiagramError, PathStep, trace_overlay
from .overview import _overview_dot, _overview_mermaid, _touches

__all__ = ["CAPTION_DETAIL", "OVERVIEW", "Diagram", "diagrams", "markdown"]

OVERVIEW = "overview"


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
