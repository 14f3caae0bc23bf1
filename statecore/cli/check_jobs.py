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
from multiprocessing.connection import Connection, wait
from multiprocessing.process import BaseProcess
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

    Each name gets a process of its own, at most `jobs` at a time, which
    sends its result through a pipe. A process starts as soon as any other
    finishes, not only when the one whose turn it is to be reported does: a
    long first target must not leave the other cores idle behind it. Results
    that come early are kept until their turn. The processes still running
    when the iteration ends, however it ends (an error in the caller,
    Ctrl-C), are killed: a process pool's terminate can wait forever on a
    lock a worker holds while it waits for work, and nothing here is shared
    but the pipes.
    """
    global _WORK
    _WORK = work
    context = multiprocessing.get_context("fork")
    running: dict[Connection, tuple[int, BaseProcess]] = {}
    arrived: dict[int, tuple[bool, Any]] = {}
    started = 0
    try:
        for index, name in enumerate(names):
            while index not in arrived:
                while len(running) < jobs and started < len(names):
                    process, pipe = _start(context, names[started])
                    running[pipe] = started, process
                    started += 1
                for ready in wait(list(running)):
                    assert isinstance(ready, Connection)
                    number, process = running.pop(ready)
                    arrived[number] = _received(ready, names[number])
                    process.join()
            ok, result = arrived.pop(index)
            if not ok:
                raise result
            yield name, result
    finally:
        _WORK = None
        for pipe, (_, process) in running.items():
            process.kill()
            process.join()
            pipe.close()


_WORK: Work | None = None
"""The work a forked worker inherits."""


def _start(context: Any, name: str) -> tuple[BaseProcess, Connection]:
    """A forked process computing ``_WORK(name)``, and the pipe its result comes back on."""
    receiver, sender = context.Pipe(duplex=False)
    process = context.Process(target=_work_in_worker, args=(name, sender), daemon=True)
    process.start()
    sender.close()  # the child holds its end: the parent sees EOF if the child dies
    return process, receiver


def _work_in_worker(name: str, pipe: Connection) -> None:
    """Ctrl-C is the parent's to handle (it kills the workers); the result goes back whole."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    assert _WORK is not None
    try:
        pipe.send((True, _WORK(name)))
    except BaseException as exc:  # raised in the parent, as a pool would
        pipe.send((False, exc))
    finally:
        pipe.close()


def _received(pipe: Connection, name: str) -> tuple[bool, Any]:
    """What a worker sent for `name`: ``(True, result)``, or ``(False, the exception to raise)``."""
    try:
        sent: tuple[bool, Any] = pipe.recv()
    except EOFError:
        sent = False, RuntimeError(f"the process checking {name!r} died before it reported")
    finally:
        pipe.close()
    return sent


class Printed(io.StringIO):
    """A report's text, kept to print later, coloured as it would be on the parent's stdout."""

    def __init__(self, terminal: bool) -> None:
        super().__init__()
        self.terminal = terminal

    def isatty(self) -> bool:
        return self.terminal
