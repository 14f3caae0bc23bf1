"""A packed level gives back the nodes queued in it: equal parts share a number only if alike.

`statecore.check.frontier` keeps a node as one number per part; equal parts
at one position share one. Values that are equal but not alike (``1`` and
``True``, ``0.0`` and ``-0.0``, ``(1,)`` and ``(True,)``) must come back as
themselves, or a search would go on from a state it never reached. The
search-level checks (a packed fingerprint search finds what a full-state one
does) are in `tests/test_fingerprints.py` and `tests/test_parallel_explore.py`.
"""

from __future__ import annotations

import dataclasses
import os
from pathlib import Path
from typing import Any

import pytest
from equal_forms import equal_forms, twin
from file_limits import count_writes, run_with_file_limit, writers
from hypothesis import given, settings
from hypothesis import strategies as st
from statecore.models.chunk_transfer import ChunkTransferConfig, build

from statecore.check import frontier
from statecore.check.explore import explore
from statecore.check.frontier import Frontier, Parts
from statecore.check.predicates import PredicateCache
from statecore.check.values import strict
from statecore.system import Action, Slot, System, SystemState

SLOTS, GLOBALS, MONITORS = 2, 2, 1


def node(parts: list[Any]) -> tuple[Any, ...]:
    slots = tuple(Slot(0, part) for part in parts[:SLOTS])
    state = SystemState(slots, tuple(parts[SLOTS : SLOTS + GLOBALS]))
    return (state, *parts[SLOTS + GLOBALS :])


@settings(max_examples=300)
@given(st.lists(equal_forms(), min_size=1, max_size=6), st.data())
def test_a_level_gives_back_each_node_alike_in_every_part(pool: list[Any], data: Any) -> None:
    """Nodes made of one pool of objects (one object at several positions, as memos share
    them) and of equal twins of another form; read back in order and by index."""
    width = SLOTS + GLOBALS + MONITORS
    parts = Parts(SLOTS, GLOBALS, MONITORS)
    # Two levels share the numbering; the first keeps its first nodes as they are.
    levels = [Frontier(parts, data.draw(st.integers(0, 4))), Frontier(parts)]
    queued: list[tuple[int, tuple[Any, ...]]] = []
    for _ in range(data.draw(st.integers(1, 12))):
        row = []
        for _ in range(width):
            value = data.draw(st.sampled_from(pool))
            row.append(twin(value, data.draw) if data.draw(st.booleans()) else value)
        which = data.draw(st.integers(0, 1))
        levels[which].append(node(row))
        queued.append((which, node(row)))
    for which, level in enumerate(levels):
        expected = [n for w, n in queued if w == which]
        assert len(level) == len(expected) and bool(level) == bool(expected)
        got = list(level)
        assert [strict(n) for n in got] == [strict(n) for n in expected] and got == expected
        assert [strict(level[i]) for i in range(len(level))] == [strict(n) for n in expected]
        assert all(type(n[0]) is SystemState for n in got)


def test_a_level_packs_past_its_unpacked_nodes_and_keeps_their_order() -> None:
    level = Frontier(Parts(SLOTS, GLOBALS, MONITORS), 2)
    nodes = [node([i, i + 1, i + 2, i + 3, i + 4]) for i in range(5)]
    for number, each in enumerate(nodes):
        assert level.packing == (number >= 2)
        level.append(each)
    assert list(level) == nodes and [level[i] for i in range(5)] == nodes
    assert level[0] is nodes[0] and level[1] is nodes[1] and level[2] is not nodes[2]
    assert len(level._codes) == 3 * (SLOTS + GLOBALS + MONITORS)


def test_a_fingerprint_search_keeps_the_hints_of_its_unpacked_nodes(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A level of a moderate search is never packed: a fingerprint search judges the
    predicates no more often than a full-state one (each node carries what decided its
    parent's judgements). With levels packed past a few nodes it judges more, and finds the
    same."""
    judged: list[int] = []
    original = PredicateCache.judge

    def judge(self: PredicateCache, predicate: Any, state: SystemState) -> Any:
        judged.append(1)
        return original(self, predicate, state)

    monkeypatch.setattr(PredicateCache, "judge", judge)
    system = build(ChunkTransferConfig(ids=1, generations=1, saves=1, segments=0))
    full = explore(system, stop_on_violation=False)
    judged_full = len(judged)
    judged.clear()
    fp = explore(system, stop_on_violation=False, fingerprints=64)
    assert len(judged) == judged_full and fp.states == full.states
    monkeypatch.setattr(frontier, "UNPACKED", 4)
    judged.clear()
    packed = explore(system, stop_on_violation=False, fingerprints=64)
    assert len(judged) > judged_full
    assert (packed.states, packed.transitions) == (full.states, full.transitions)
    assert [r.verdict for r in packed.results] == [r.verdict for r in full.results]


def test_an_index_out_of_the_level_is_refused() -> None:
    level = Frontier(Parts(SLOTS, GLOBALS, MONITORS))
    level.append(node([0, 1, 2, 3, 4]))
    assert level[0] == node([0, 1, 2, 3, 4])
    with pytest.raises(IndexError):
        level[1]


def test_a_packed_level_costs_two_bytes_a_part() -> None:
    """What the packing is for: chunk_transfer at two ids, 31 parts a node."""
    system = build(ChunkTransferConfig(ids=2, generations=2, saves=1, segments=1))
    parts = Parts.of(system, 2)
    level = Frontier(parts)
    start = (system.init_states()[0], None, None)
    for _ in range(1000):
        level.append(start)
    assert parts.width == 31 and level._codes.itemsize * len(level._codes) == 2 * 31 * 1000
    assert len(parts.tables[0]) == 1  # one part, numbered once


def test_a_fingerprint_search_packs_its_levels_and_a_full_state_one_does_not(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    packed: list[int] = []
    original = Frontier.append

    def append(self: Frontier, node: tuple[Any, ...]) -> None:
        packed.append(1)
        original(self, node)

    monkeypatch.setattr(Frontier, "append", append)
    system = build(ChunkTransferConfig(ids=1, generations=1, saves=1, segments=0))
    full = explore(system, stop_on_violation=False)
    assert not packed
    fp = explore(system, stop_on_violation=False, fingerprints=64)
    assert len(packed) == fp.states - 1 and fp.states == full.states  # all but the initial one


def test_a_level_widens_to_four_bytes_once_a_position_has_met_65_536_parts() -> None:
    parts = Parts(SLOTS, GLOBALS, MONITORS)
    before = Frontier(parts)
    before.append(node([0, 0, 0, 0, 0]))
    assert before._codes.itemsize == 2
    rows = [[i, 0, i % 3, 0, i] for i in range(70_000)]
    for row in rows:
        before.append(node(row))
    assert parts.wide and before._codes.itemsize == 4
    assert list(before) == [node([0, 0, 0, 0, 0])] + [node(row) for row in rows]
    assert Frontier(parts)._codes.itemsize == 4


@dataclasses.dataclass(frozen=True, eq=False)
class Token:
    """Equal only to itself, but with one `strict` form for every token of one `n`."""

    n: int


@pytest.mark.parametrize(
    ("first", "second"),
    [(Token(0), Token(0)), (float("nan"), float("nan"))],
    ids=["identity-equal", "nan"],
)
def test_unequal_parts_of_one_strict_form_keep_their_numbers_apart(first: Any, second: Any) -> None:
    """``(True, first)`` is numbered apart from ``(1, first)`` (equal, not alike); then
    ``(True, second)``, unlike ``(1, second)`` too, must not take ``(True, first)``'s number:
    its strict form is the same, but it is not equal to it."""
    assert first != second and strict(first) == strict(second)
    parts = Parts(SLOTS, GLOBALS, MONITORS)
    level = Frontier(parts)
    rows = [[0, 0, (1, first), 0, 0], [0, 0, (True, first), 0, 0]]
    rows += [[0, 0, (1, second), 0, 0], [0, 0, (True, second), 0, 0]]
    for row in rows:
        level.append(node(row))
    got = list(level)
    assert [n[0].values[0][1] for n in got] == [first, first, second, second]
    assert [type(n[0].values[0][0]) for n in got] == [int, bool, int, bool]


def test_a_system_with_nothing_in_its_states_packs_its_levels_too() -> None:
    """No slot, global or monitor: zero numbers a node, and the level still counts them."""
    level = Frontier(Parts(0, 0, 0))
    assert not level and len(level) == 0
    level.append((SystemState((), ()),))
    level.append((SystemState((), ()),))
    assert len(level) == 2 and level and list(level) == [(SystemState((), ()),)] * 2
    system = System("empty", components=[], actions=[Action("tick", "u", lambda tx: None)])
    for workers in (1, 2):
        report = explore(system, fingerprints=64, workers=workers, progress=lambda p: None)
        assert (report.states, report.transitions, report.complete) == (1, 1, True)


def test_forgetting_objects_by_identity_forgets_their_ids_too(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Past its bound the identity memo starts afresh: an id freed then is not an old number's.
    Fresh equal parts of two forms, each dropped at once, so their ids are soon reused."""
    from statecore.check import frontier

    monkeypatch.setattr(frontier, "_KEPT", 3)
    parts = Parts(SLOTS, GLOBALS, MONITORS)
    level = Frontier(parts)
    forms = []
    for i in range(3000):
        form = (i % 2 == 0) if i % 3 else i % 2  # 1 / True / 0 / False, in a shifting order
        level.append(node([0, 0, (form,), 0, 0]))
        forms.append(type(form))
    assert [type(n[0].values[0][0]) for n in level] == forms


# -- a level past SPILL bytes: in a file of its own ---------------------------------------


def test_a_spilling_level_gives_back_every_node_in_order(monkeypatch: pytest.MonkeyPatch) -> None:
    """Chunks of 3 packed nodes to the file (10 bytes a node, spilled at 30), then the rest
    in memory; read back in order, by index, twice; and a chunk widens to four bytes midway
    (the file keeps each chunk's own width)."""
    monkeypatch.setattr(frontier, "SPILL", 30)
    parts = Parts(SLOTS, GLOBALS, MONITORS)
    level = Frontier(parts, 2, spill=True)
    rows = [[i % 5, True if i % 2 else 1, (i,), -0.0 if i % 3 else 0.0, i % 4] for i in range(20)]
    rows += [[i, 0, 0, 0, 0] for i in range(70_000)]  # position 0 meets 70,000 parts: wide
    for row in rows:
        level.append(node(row))
    expected = [node(row) for row in rows]
    assert level._chunks and level._chunks[0][1:] == (3, "H") and level._chunks[-1][2] == "I"
    assert level._spilled == sum(nodes for _, nodes, _ in level._chunks) > 60_000
    assert len(level) == len(expected)
    for _ in range(2):
        got = list(level)
        assert got == expected and [strict(n) for n in got[:30]] == [
            strict(n) for n in expected[:30]
        ]
    for index in (0, 1, 2, 3, 4, 5, 19, 20, 21, 50_000, len(rows) - 1):
        assert strict(level[index]) == strict(expected[index])


FULL_DISK = """
import sys
sys.path.insert(0, {tests!r})
from test_frontier import node
from statecore.check import frontier
from statecore.check.explore import explore
from statecore.check.frontier import Frontier, Parts
from statecore.registry import bundled

frontier.SPILL = 30  # three nodes of 5 two-byte numbers a chunk
level = Frontier(Parts(2, 2, 1), 0, spill=True)
rows = [[i, i + 1, i + 2, i + 3, i + 4] for i in range(12)]
for row in rows:
    level.append(node(row))
assert [n for _, n, _ in level._chunks] == [3, 3, 3] and not level._spill, level._chunks
assert list(level) == [node(row) for row in rows]
assert [level[i] for i in range(12)] == [node(row) for row in rows]
frontier.SPILL, frontier.UNPACKED = 64, 4
[target] = [t for t in bundled() if t.name == "segments"]
full = explore(target.load(), stop_on_violation=False)
for workers in (1, 2):
    spilled = explore(target.load(), stop_on_violation=False, fingerprints=64, workers=workers)
    assert (spilled.states, spilled.transitions) == (full.states, full.transitions)
    assert [r.verdict for r in spilled.results] == [r.verdict for r in full.results]
print("ok")
"""


def test_a_level_whose_file_is_full_keeps_its_nodes_in_memory() -> None:
    """A file size limit of 100 bytes (the disk full, for the level's file): three chunks of
    30 bytes go in, the fourth only in part, and the level keeps it and the rest in memory;
    every node comes back, in order. A search whose levels meet the limit (on one process
    and on two) finds what a full-state one does."""
    code = FULL_DISK.format(tests=str(Path(__file__).parent))
    done = run_with_file_limit(code, 100)
    assert done.returncode == 0 and done.stdout.strip() == "ok", done.stderr


@pytest.mark.parametrize("workers", [1, 2])
def test_a_search_whose_levels_spill_finds_what_a_full_state_one_does(
    workers: int, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """Levels packed past 4 nodes and spilled past 256 bytes: the same states,
    transitions and verdicts as full states, with shortest traces; and the levels (each
    worker's, in its own process) did spill."""
    monkeypatch.setattr(frontier, "UNPACKED", 4)
    monkeypatch.setattr(frontier, "SPILL", 256)
    count_writes(monkeypatch, Frontier, tmp_path)
    system = build(ChunkTransferConfig(ids=1, generations=1, saves=1, segments=1))
    full = explore(system, stop_on_violation=False)
    spilling = explore(system, stop_on_violation=False, fingerprints=64, workers=workers)
    assert (spilling.states, spilling.transitions) == (full.states, full.transitions)
    assert [(r.verdict, r.trace and len(r.trace)) for r in spilling.results] == [
        (r.verdict, r.trace and len(r.trace)) for r in full.results
    ]
    wrote = writers(tmp_path)
    assert len(wrote) == workers and (str(os.getpid()) in wrote) == (workers == 1)
