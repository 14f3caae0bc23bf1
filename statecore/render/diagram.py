"""Diagrams for design reviews: machines and systems as Mermaid or Graphviz.

* `to_mermaid` (`statecore.render.mermaid`) / `to_dot` (`statecore.render.dot`) draw one
  `Machine`: an arrow into the initial state, final states (Mermaid
  ``--> [*]``, Graphviz double circles), hot states in orange, one edge per
  source state of each transition, labelled with `Transition.label()`
  (``event [guard] / effect``).
* `system_overview_mermaid` / `system_overview_dot` (`statecore.render.overview`)
  draw a `System`: each actor with its actions (internal ones dashed), and
  which components and globals each action changes (found by a bounded walk).
* `trace_overlay` (`statecore.render.overlay`) replays a `Trace` and returns, per
  component, what each step did to it; pass one component's steps as
  ``highlight=`` to draw the path in thick red with the step numbers on the
  edges (``1, 4: event``).
* `render` (`statecore.render.graphviz`) turns DOT source into SVG, PNG or PDF with
  Graphviz' ``dot``.
* `diagrams` and `markdown` (`statecore.render.diagram_doc`) put a system's
  diagrams together.

This module is the ``statecore diagram`` command (`add_parser`, `run`), and
the one import for all of the above.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from ..system import System
from ..traces.trace import Trace
from .diagram_doc import CAPTION_DETAIL, OVERVIEW, Diagram, _all_names, _choose, diagrams, markdown
from .dot import to_dot
from .graphviz import GRAPHVIZ_INSTALL, RENDER_FORMATS, GraphvizNotFoundError, render
from .mermaid import mermaid_escape, to_mermaid
from .overlay import DiagramError, PathStep, StepKind, trace_overlay
from .overview import system_overview_dot, system_overview_mermaid

__all__ = [
    "CAPTION_DETAIL",
    "GRAPHVIZ_INSTALL",
    "OVERVIEW",
    "RENDER_FORMATS",
    "Diagram",
    "DiagramError",
    "GraphvizNotFoundError",
    "PathStep",
    "StepKind",
    "add_parser",
    "diagrams",
    "markdown",
    "mermaid_escape",
    "read_trace",
    "render",
    "run",
    "system_overview_dot",
    "system_overview_mermaid",
    "to_dot",
    "to_mermaid",
    "trace_overlay",
]


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
    from ..traces.itf import read_itf

    return read_itf(path, system)


def run(args: argparse.Namespace) -> int:
    """Run ``statecore diagram``; return the exit code (errors raise `StatecoreError`)."""
    from ..registry import resolve
    from ..traces.targets import system_for_trace

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
    from ..registry import resolve
    from .diagram_diff import diff_dot, diff_markdown, diff_mermaid, diff_systems, diff_title

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
