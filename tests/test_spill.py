"""What a large search writes to disk: a fingerprint store's parents and actions past
`statecore.check.spill.PARENTS` bytes (`ParentLog`), read back for a trace; a level's packed
nodes are in ``tests/test_frontier.py``."""

from __future__ import annotations

import os
import random
from dataclasses import replace
from pathlib import Path

import pytest
from file_limits import count_writes, run_with_file_limit, writers
from statecore.models.chunk_transfer import RELEASED_0_30_0, build

from statecore.check import spill
from statecore.check.explore import explore
from statecore.check.spill import ParentLog


@pytest.mark.parametrize("wide", [False, True])
def test_a_parent_log_gives_back_every_entry(wide: bool) -> None:
    """Chunks of 3 entries (10 or 12 bytes each, written at 30 or 36) to the file, the
    rest in memory; every entry comes back, in any order, and only the tail is in memory."""
    rnd = random.Random(7)
    top = (1 << 32) - 1 if wide else (1 << 16) - 1
    entries = [(rnd.randrange(1 << 64), rnd.randint(0, top)) for _ in range(1000)]
    log = ParentLog(wide_actions=wide, limit=36 if wide else 30)
    for ref, action in entries:
        log.append(ref, action)
    assert len(log) == len(entries)
    assert log.nbytes == (12 if wide else 10) * (len(entries) % 3)
    order = list(range(len(entries)))
    rnd.shuffle(order)
    assert [log[i] for i in order] == [entries[i] for i in order]
    for index in (-1, len(entries)):
        with pytest.raises(IndexError):
            log[index]


@pytest.mark.parametrize("wide", [False, True])
def test_a_parent_log_entry_rewritten_reads_back_anew_in_memory_or_on_file(wide: bool) -> None:
    """A worker's claim that reached a node first gives it another parent: rewritten where the
    entry is, on file or in memory, it reads back new, and every other entry as it was."""
    rnd = random.Random(11)
    top = (1 << 32) - 1 if wide else (1 << 16) - 1
    entries = [(rnd.randrange(1 << 64), rnd.randint(0, top)) for _ in range(100)]
    log = ParentLog(wide_actions=wide, limit=36 if wide else 30)
    for ref, action in entries:
        log.append(ref, action)
    for index in rnd.sample(range(len(entries)), 40) + [0, len(entries) - 1]:
        entries[index] = (rnd.randrange(1 << 64), rnd.randint(0, top))
        log[index] = entries[index]
    assert [log[i] for i in range(len(entries))] == entries
    assert log.nbytes == (12 if wide else 10) * (len(entries) % 3)  # (the rest on file)
    with pytest.raises(IndexError):
        log[len(entries)] = (1, 1)


FULL_DISK = """
from statecore.check.spill import ParentLog

log = ParentLog(wide_actions=False, limit=30)
entries = [(i * 7919, i % 5) for i in range(40)]
for ref, action in entries:
    log.append(ref, action)
assert log._firsts == [0, 3, 6] and not log._spill, log._firsts
assert [log[i] for i in range(40)] == entries
print("ok")
"""


def test_a_parent_log_whose_file_is_full_keeps_the_rest_in_memory() -> None:
    """A file size limit of 100 bytes: three chunks of 30 bytes go in, the fourth only in
    part, and the log keeps it and the rest in memory; the chunks written are still read."""
    done = run_with_file_limit(FULL_DISK, 100)
    assert done.returncode == 0 and done.stdout.strip() == "ok", done.stderr


@pytest.mark.parametrize("workers", [1, 2])
def test_a_search_whose_parents_spill_gives_the_same_traces(
    workers: int, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """vLLM-Omni 0.30.0 without reuse (10 violated properties) with 64-bit fingerprints: a
    store that writes its parents past 6 entries rebuilds the very traces of one that keeps
    them in memory; and the stores (each worker's, in its own process) did write."""
    system = build(replace(RELEASED_0_30_0, generations=1))
    kept = explore(system, stop_on_violation=False, fingerprints=64, workers=workers)
    monkeypatch.setattr(spill, "PARENTS", 64)
    count_writes(monkeypatch, ParentLog, tmp_path)
    spilled = explore(system, stop_on_violation=False, fingerprints=64, workers=workers)
    assert (spilled.states, spilled.transitions) == (kept.states, kept.transitions)
    assert sum(r.trace is not None for r in kept.results) == 10
    assert [(r.verdict, r.trace) for r in spilled.results] == [
        (r.verdict, r.trace) for r in kept.results
    ]
    wrote = writers(tmp_path)
    assert len(wrote) == workers and (str(os.getpid()) in wrote) == (workers == 1)
