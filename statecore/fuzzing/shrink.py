"""Shrinking a fuzz finding: replays with steps deleted, until none can go.

`minimise` replays a finding's actions through fresh adapters with steps
deleted - ddmin (Zeller's delta debugging) first, then every contiguous
block from the largest to single steps - and keeps a deletion when the
replay shows a finding of the same kind and property in a shorter trace.
What is left is 1-minimal and more: no single step and no contiguous block
can be removed. `replay_with_adapter` is the replay itself, what ``statecore
replay TRACE --adapter NAME`` runs. `ddmin` and `delete_blocks` are the two
searches, over any list.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import TypeVar

from ..adapter import Adapter
from ..system import ActionLabel, System
from ..traces.path import follow
from ..traces.trace import Trace
from .interpreter import SHRINK, Finding, _Stats, run_steps, state_machine

MINIMISE_REPLAYS = 2000
"""At most this many replays when `minimise` deletes steps from a finding."""


T = TypeVar("T")


class _OutOfReplays(Exception):
    """`minimise` used up its replays."""


def minimise(
    system: System,
    finding: Finding,
    adapter_factory: Callable[[], Adapter],
    *,
    known: Mapping[str, str] | None = None,
    max_replays: int = MINIMISE_REPLAYS,
    _stats: _Stats | None = None,
) -> Finding:
    """Delete every step of `finding` it does not need, replaying after each deletion.

    A deletion is kept when a deterministic replay of the actions left (then
    draining and judging, as at the end of a fuzz example) shows a finding of
    the same kind and property in a shorter trace. First ddmin (Zeller's
    delta debugging: halves, quarters, ... of the trace, and their
    complements), then every contiguous block from the largest to single
    steps, again after each success. The result is 1-minimal and more: no
    single step and no contiguous block can be removed. (Internal steps the
    replay drains at the end come back by themselves, so they stay.)
    `Finding.minimal` says whether that was proven within `max_replays`.
    """
    replayer = _Replayer(system, adapter_factory, known, _stats)
    best = finding
    wanted = (finding.kind, finding.property_id)
    replays = 0

    def reproduces(actions: list[ActionLabel]) -> list[ActionLabel] | None:
        nonlocal best, replays
        if replays >= max_replays:
            raise _OutOfReplays
        replays += 1
        again = replayer.actions(actions)
        if again is None or (again.kind, again.property_id) != wanted:
            return None
        if len(again.trace) >= len(best.trace):
            return None
        best = again
        return list(again.trace.actions)

    actions = list(finding.trace.actions)
    try:
        actions = ddmin(actions, reproduces)
        delete_blocks(actions, reproduces)
        best.minimal = True
    except _OutOfReplays:
        best.minimal = False
    return best


def ddmin(items: list[T], reproduces: Callable[[list[T]], list[T] | None]) -> list[T]:
    """Zeller's ddmin over `items`: a shorter list that still reproduces, 1-minimal in chunks.

    Split the list into `n` chunks (2 first); keep any one chunk alone that
    reproduces, else any complement of a chunk (then `n` - 1 chunks), else
    split finer (2 `n`) until the chunks are single items. `reproduces(c)`
    returns the list to go on with - `c`, or what its replay kept of it - or
    None when `c` does not reproduce.
    """
    n = 2
    while len(items) >= 2:
        chunks = _split(items, n)
        kept = next((got for c in chunks if (got := reproduces(c)) is not None), None)
        if kept is not None:
            items, n = kept, 2
            continue
        if n > 2:
            complements = (
                [x for j, c in enumerate(chunks) if j != i for x in c] for i in range(len(chunks))
            )
            kept = next((got for c in complements if (got := reproduces(c)) is not None), None)
            if kept is not None:
                items, n = kept, max(n - 1, 2)
                continue
        if n >= len(items):
            break
        n = min(2 * n, len(items))
    return items


def _split(items: list[T], n: int) -> list[list[T]]:
    size, extra = divmod(len(items), n)
    chunks, start = [], 0
    for index in range(n):
        end = start + size + (1 if index < extra else 0)
        chunks.append(items[start:end])
        start = end
    return [c for c in chunks if c]


def delete_blocks(items: list[T], reproduces: Callable[[list[T]], list[T] | None]) -> list[T]:
    """Delete contiguous blocks, largest first, until none can go."""
    size = len(items)
    while size >= 1:
        kept = next(
            (
                got
                for start in range(len(items) - size + 1)
                if (got := reproduces(items[:start] + items[start + size :])) is not None
            ),
            None,
        )
        if kept is not None:
            items, size = kept, len(kept)
        else:
            size -= 1
    return items


class _Replayer:
    """Replays of action lists through fresh adapters, with one interpreter for all."""

    def __init__(
        self,
        system: System,
        adapter_factory: Callable[[], Adapter],
        known: Mapping[str, str] | None,
        stats: _Stats | None,
    ) -> None:
        self.system = system
        if stats is not None:
            stats.phase = SHRINK
        self.machine = state_machine(
            system, adapter_factory, known=known, swarm=False, stats=stats or _Stats(SHRINK)
        )
        self.stats = stats

    def actions(self, actions: Sequence[ActionLabel]) -> Finding | None:
        """The finding `actions` show, or None (also when one of them is not enabled)."""
        path = follow(self.system, actions, stop=True)
        if path.blocked is not None:
            return None
        found = run_steps(self.machine, path.steps)
        if self.stats is not None:
            self.stats.tick()
        return found


def replay_with_adapter(
    system: System,
    trace: Trace,
    adapter_factory: Callable[[], Adapter],
    *,
    known: Mapping[str, str] | None = None,
) -> Finding | None:
    """Drive a fresh adapter through `trace`'s actions; return the finding it shows, if any.

    The same checks as a fuzz step run after every action (conformance,
    invariants, monitors), then the internal actions are drained and the
    eventually-properties judged, exactly as at the end of a fuzz example.
    Deterministic: this is what ``statecore replay TRACE --adapter NAME`` runs.
    """
    machine = state_machine(system, adapter_factory, known=known, swarm=False)
    return run_steps(machine, follow(system, trace.actions).steps)
