"""Rendering DOT text to SVG, PNG or PDF with Graphviz' ``dot`` program."""

from __future__ import annotations

import shutil
import subprocess

from .overlay import DiagramError

__all__ = ["GRAPHVIZ_INSTALL", "RENDER_FORMATS", "GraphvizNotFoundError", "render"]

GRAPHVIZ_INSTALL = "apt-get install -y graphviz"
RENDER_FORMATS = ("svg", "png", "pdf")


class GraphvizNotFoundError(DiagramError):
    """Graphviz' ``dot`` program is not installed."""


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
