"""The progress lines of ``statecore check`` and ``statecore fuzz`` on stderr.

On a terminal, one line rewritten in place; in a log, one plain line every
`PROGRESS_INTERVAL` seconds.
"""

from __future__ import annotations

import time
from typing import Any, TextIO

from ..check.explore import (
    Progress,
)

PROGRESS_INTERVAL = 10.0
"""Seconds between two progress lines when stderr is not a terminal (CI logs)."""


class FuzzTerminalProgress:
    """The fuzz progress line, rewritten in place on a terminal."""

    def __init__(self, stream: TextIO) -> None:
        self.stream = stream
        self.shown = False

    def __call__(self, p: Any) -> None:
        self.shown = True
        self.stream.write(f"\r{_fuzz_progress_text(p)}   ")
        self.stream.flush()

    def clear(self) -> None:
        if self.shown:
            self.stream.write("\r\033[K")
            self.stream.flush()
            self.shown = False


class FuzzLogProgress:
    """One plain fuzz progress line every `PROGRESS_INTERVAL` seconds, for a CI log."""

    def __init__(self, name: str, stream: TextIO) -> None:
        self.name = name
        self.stream = stream
        self.last = time.monotonic()

    def __call__(self, p: Any) -> None:
        now = time.monotonic()
        if now - self.last < PROGRESS_INTERVAL:
            return
        self.last = now
        self.stream.write(f"statecore: fuzzing {self.name}: {_fuzz_progress_text(p)}\n")
        self.stream.flush()

    def clear(self) -> None:
        """Nothing to clear: each line stands on its own."""


def _fuzz_progress_text(p: Any) -> str:
    taken, total = p.transitions
    met, goals = p.goals
    return (
        f"{p.phase}, {p.paths} paths, {p.examples} examples, {p.replays} replays, "
        f"{p.steps_per_second:,.0f} steps/s, transitions {taken}/{total}, goals {met}/{goals}, "
        f"findings {p.findings}, known {p.known}, {p.seconds:.0f}s"
    )


def fuzz_progress_printer(name: str, stream: TextIO) -> FuzzTerminalProgress | FuzzLogProgress:
    return FuzzTerminalProgress(stream) if stream.isatty() else FuzzLogProgress(name, stream)


class TerminalProgress:
    """A progress line rewritten in place on a terminal."""

    def __init__(self, stream: TextIO) -> None:
        self.stream = stream
        self.shown = False

    def __call__(self, p: Progress) -> None:
        self.shown = True
        self.stream.write(
            f"\r{p.states:,} states  {p.rate:,.0f} states/s  depth {p.depth}  queue {p.queue:,}   "
        )
        self.stream.flush()

    def clear(self) -> None:
        if self.shown:
            self.stream.write("\r\033[K")
            self.shown = False


class LogProgress:
    """One plain progress line every `PROGRESS_INTERVAL` seconds, so a CI log shows life."""

    def __init__(self, name: str, stream: TextIO) -> None:
        self.name = name
        self.stream = stream
        self.last = time.monotonic()

    def __call__(self, p: Progress) -> None:
        now = time.monotonic()
        if now - self.last < PROGRESS_INTERVAL:
            return
        self.last = now
        self.stream.write(
            f"statecore: checking {self.name}: {p.states:,} states, {p.rate:,.0f} states/s, "
            f"depth {p.depth}, queue {p.queue:,}, {p.seconds:.0f}s\n"
        )
        self.stream.flush()

    def clear(self) -> None:
        """Nothing to clear: each line stands on its own."""


def progress_printer(name: str, stream: TextIO) -> TerminalProgress | LogProgress:
    return TerminalProgress(stream) if stream.isatty() else LogProgress(name, stream)
