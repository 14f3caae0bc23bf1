"""``statecore check --jobs N``: targets checked side by side, reported as one process would.

Each target is checked in a forked process, which does everything the
one-process run does for it (`statecore.cli.check`): the exploration, its
traces and regression tests written, its report printed (into a buffer),
its JSON entry and its summary row. The parent reports them in target order
as they arrive, so the output, the files and the exit code are the
one-process run's; only the progress lines differ (one plain line per target
every few seconds: several searches cannot share one line rewritten in place).

A target whose check raises in its process (a model error, a target that
does not load, an unwritable ``--trace-out``) comes back as None and is
checked again in the parent when its turn comes, so the error is reported
exactly as without ``--jobs``: the reports before it, then the error and its
exit code. Ctrl-C stops every process; the summary names what was not checked.
"""

from __future__ import annotations

import argparse
import io
import multiprocessing
import os
import signal
from collections.abc import Callable, Iterator
from typing import Any

Work = Callable[[str], Any]
"""Check one target in a worker: what to report, or None if it raised."""


def jobs_for(args: argparse.Namespace, names: list[str]) -> int:
    """How many processes check `names` side by side (1: in this process, one by one).

    ``--jobs`` (default: one per core) where fork is available, there are
    two targets or more, and each target's own search is one process.
    """
    if len(names) < 2 or args.ray is not None or (args.workers or 1) > 1:
        return 1
    if "fork" not in multiprocessing.get_all_start_methods():
        return 1
    return max(1, min(args.jobs or os.cpu_count() or 1, len(names)))


def side_by_side(names: list[str], work: Work, jobs: int) -> Iterator[tuple[str, Any]]:
    """``(name, work(name))`` for each of `names` in order, computed on `jobs` forked processes.

    The workers are stopped when the iteration ends, however it ends (an
    error in the caller, Ctrl-C), so none is left running.
    """
    global _WORK
    _WORK = work
    try:
        context = multiprocessing.get_context("fork")
        with context.Pool(jobs, initializer=_ignore_interrupts) as pool:
            yield from zip(names, pool.imap(_work_in_worker, names))
    finally:
        _WORK = None


_WORK: Work | None = None
"""The work a forked worker inherits."""


def _ignore_interrupts() -> None:
    """Ctrl-C is the parent's to handle: it stops the workers."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)


def _work_in_worker(name: str) -> Any:
    assert _WORK is not None
    return _WORK(name)


class Printed(io.StringIO):
    """A report's text, kept to print later, coloured as it would be on the parent's stdout."""

    def __init__(self, terminal: bool) -> None:
        super().__init__()
        self.terminal = terminal

    def isatty(self) -> bool:
        return self.terminal
