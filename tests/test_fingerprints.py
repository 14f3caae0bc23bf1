"""The fingerprint store: stable, canonical fingerprints and the same search as full states.

A fingerprint search must find what the exact one finds - the same distinct
states, transitions, verdicts and (shortest) traces - on random systems and
on every bundled target and variant (`golden_targets`), report its collision
bound, and keep at most 40 bytes a state.
"""

from __future__ import annotations

import json
import multiprocessing
import os
import re
import subprocess
import sys
from enum import Enum
from pathlib import Path
from typing import Any, NamedTuple
from unittest import mock

import pytest
from golden_targets import GOLDEN, systems
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from system_strategies import SystemSpec, build_system
from system_strategies import systems as random_systems

from statecore.check import fingerprints
from statecore.check.explore import explore
from statecore.check.fingerprints import (
    ROOT,
    Fingerprinter,
    FingerprintError,
    FingerprintStore,
    collision_bound,
)
from statecore.check.results import Report
from statecore.system import Slot, SystemState
from statecore.traces.replay import replay

GOLDEN_FIGURES: dict[str, Any] = json.loads(GOLDEN.read_text(encoding="utf-8"))
BIG = 20_000  # states: targets above this many are marked slow (-m 'not slow' skips them)


def bundled_names() -> list[Any]:
    """Every golden target by name, the ones above `BIG` states marked slow."""
    return [
        pytest.param(name, marks=pytest.mark.slow)
        if GOLDEN_FIGURES[name]["symmetry"]["states"] > BIG
        else name
        for name in sorted(systems())
    ]


def assert_golden_figures(report: Report, golden: dict[str, Any]) -> None:
    """`report` has `golden`'s counts and notes, and each property its verdict and trace length."""
    assert (report.states, report.transitions, report.depth, report.complete) == (
        golden["states"],
        golden["transitions"],
        golden["depth"],
        golden["complete"],
    )
    found = {
        r.property.id: (r.verdict, None if r.trace is None else len(r.trace.actions))
        for r in report.results
    }
    expected = {
        pid: (v["verdict"], None if v["trace"] is None else len(v["trace"]))
        for pid, v in golden["verdicts"].items()
    }
    assert found == expected
    assert list(report.notes[: len(golden["notes"])]) == golden["notes"]


class Pair(NamedTuple):
    a: Any
    b: Any


class Colour(Enum):
    RED = 1


def summary(report: Report) -> tuple[Any, ...]:
    """What must not change: counts, and each verdict with its trace's actions."""
    verdicts = tuple(
        (r.property.id, r.verdict, r.detail, None if r.trace is None else r.trace.actions)
        for r in report.results
    )
    return (report.states, report.transitions, report.depth, report.complete, verdicts)


# -- the encoding ----------------------------------------------------------------------


def test_equal_values_encode_equally() -> None:
    fp = Fingerprinter()
    assert fp((1, "a")) == fp(Pair(1, "a")) == fp((True, "a"))
    assert fp(frozenset({"x", "y", ("z", 1)})) == fp(frozenset({("z", 1), "y", "x"}))
    assert fp((2.0,)) == fp((2,))


_SCALARS = st.sampled_from([0, 1, False, True, 0.0, 1.0, 0.5, "a", "1", None, Colour.RED])
_NESTED = st.recursive(
    _SCALARS,
    lambda inner: st.one_of(
        st.tuples(inner), st.tuples(inner, inner), st.frozensets(inner, max_size=3)
    ),
    max_leaves=8,
)


@settings(max_examples=200)
@given(_NESTED, st.lists(_NESTED, max_size=6))
def test_a_fingerprint_does_not_depend_on_what_was_fingerprinted_before(
    value: Any, before: list[Any]
) -> None:
    """The encodings of values and of their items are remembered by equality, so a
    value met after others (equal ones of other types among them) fingerprints as in a
    fresh process: what the partitioned search routes by."""
    warm = Fingerprinter()
    for other in before:
        warm(other)
    assert warm(value) == Fingerprinter()(value) == Fingerprinter()(value)
    assert warm.encode(value) == Fingerprinter().encode(value)


@pytest.mark.parametrize(
    ("left", "right"),
    [
        (("ab",), ("a", "b")),
        ((("a",),), ("a",)),
        ((None,), ((),)),
        ((1,), ("1",)),
        (frozenset({1, 2}), (1, 2)),
        ((frozenset(),), ((),)),
        ((0.5,), ("0.5",)),
        ((Colour.RED,), (1,)),
    ],
)
def test_distinct_values_fingerprint_apart(left: Any, right: Any) -> None:
    fp = Fingerprinter()
    assert fp(left) != fp(right)
    assert Fingerprinter(128)(left) != Fingerprinter(128)(right)


def test_a_value_with_no_canonical_encoding_is_refused_in_one_line() -> None:
    with pytest.raises(FingerprintError, match=r"type object.*keep full states") as caught:
        Fingerprinter()((object(),))
    assert "\n" not in str(caught.value)


def test_fingerprint_sizes_other_than_64_and_128_are_refused() -> None:
    with pytest.raises(ValueError, match="64, 128"):
        Fingerprinter(32)


def test_fingerprints_do_not_depend_on_the_hash_seed() -> None:
    """Processes partition nodes by fingerprint: a salted string hash would scatter them."""
    code = (
        "from golden_targets import systems\n"
        "from statecore.check.fingerprints import Fingerprinter\n"
        "s = systems()['request_state_two_ids']()\n"
        "print(Fingerprinter()((s.init_states()[0], frozenset({('a', 'b'), 'c'}))))\n"
    )
    seen = set()
    for seed in ("1", "2"):
        env = {**os.environ, "PYTHONHASHSEED": seed}
        tests = os.path.dirname(__file__)
        env["PYTHONPATH"] = tests + os.pathsep + env.get("PYTHONPATH", "")
        out = subprocess.run(
            [sys.executable, "-c", code], env=env, capture_output=True, text=True, check=True
        )
        seen.add(out.stdout.strip())
    assert len(seen) == 1


# -- a successor's fingerprint from its parent's -----------------------------------------


def state_node(parts: list[Any], slots: int, globals_: int) -> tuple[Any, ...]:
    """A node of `parts`: `slots` slots, `globals_` globals, the rest monitor states."""
    state = SystemState(
        tuple(Slot(0, part) for part in parts[:slots]), tuple(parts[slots : slots + globals_])
    )
    return (state, *parts[slots + globals_ :])


@settings(max_examples=300, deadline=None)
@given(st.data(), st.sampled_from([64, 128]))
def test_a_successor_fingerprint_worked_out_from_its_parents_is_its_own(
    data: Any, bits: int
) -> None:
    """`Fingerprinter.moved` swaps the digests of the written positions (and of changed
    monitor states): the fingerprint of the node it gives is the one a fresh fingerprinter
    works out whole. Writes may put an equal value, an equal object of another type, or the
    same object back."""
    slots, globals_, monitors = (data.draw(st.integers(0, 3)) for _ in range(3))
    width = slots + globals_ + monitors
    parent = data.draw(st.lists(_NESTED, min_size=width, max_size=width))
    child = list(parent)
    writes = 0
    for position in data.draw(st.sets(st.integers(0, max(0, width - 1)), max_size=width)):
        if position >= width:
            continue
        choice = data.draw(st.sampled_from(["new", "same", "copy"]))
        if choice == "new":
            child[position] = data.draw(_NESTED)
        elif choice == "copy" and isinstance(parent[position], tuple):
            child[position] = tuple(parent[position])  # equal, another object
        if position < slots + globals_:
            writes |= 1 << position
    first = state_node(parent, slots, globals_)
    second = state_node(child, slots, globals_)
    warm = Fingerprinter(bits)
    for other in data.draw(st.lists(_NESTED, max_size=4)):
        warm((SystemState((), (other,)),))
    if slots != globals_ and data.draw(st.booleans()):  # the same mask met in another layout
        elsewhere = state_node(parent, globals_, slots), state_node(child, globals_, slots)
        warm.moved(warm.raw(elsewhere[0]), *elsewhere, writes)
    raw = warm.raw(first)
    assert (warm.moved(raw, first, second, writes) or 1) == Fingerprinter(bits)(second)


@pytest.mark.parametrize("workers", [1, 2])
@pytest.mark.parametrize("name", sorted(systems()))
def test_the_search_works_out_each_successor_fingerprint_as_a_whole_one(
    name: str, workers: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    """On every bundled target, on one process and on two: each fingerprint a search worked
    out from the parent's is the successor's own, worked out whole by a fresh fingerprinter."""
    checked = check_each_successor_fingerprint(monkeypatch)
    report = explore(
        systems()[name](),
        stop_on_violation=False,
        fingerprints=64,
        max_states=2_000,
        workers=workers,
    )
    assert checked[0].value >= report.transitions // 2  # most (renamed ones are whole)


def check_each_successor_fingerprint(monkeypatch: pytest.MonkeyPatch) -> tuple[Any, Any]:
    """Make every `FingerprintStore.reached` check the fingerprint it works out against one
    worked out whole; the counts of checks, and of those whose change a step kept."""
    reached = FingerprintStore.reached
    whole = Fingerprinter(64)  # its own caches: nothing learned from the search's
    counts = [multiprocessing.get_context("fork").Value("l", 0) for _ in range(2)]  # forked too

    def checking(
        self: FingerprintStore, raw: int, node: Any, nxt: Any, writes: int, step: object = None
    ) -> None:
        reached(self, raw, node, nxt, writes, step)
        assert self._key is nxt and self._key_fp == whole(nxt)
        for count in counts[: 1 + (step is not None)]:
            with count.get_lock():
                count.value += 1

    monkeypatch.setattr(FingerprintStore, "reached", checking)
    return counts[0], counts[1]


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(random_systems(symmetric_pair=True))
def test_a_step_whose_path_fixes_what_it_replaces_changes_every_fingerprint_alike(
    spec: SystemSpec,
) -> None:
    """A memo leaf whose path read whole every slot and global it writes (`_Leaf.fixed`)
    replaces equal parts by equal ones wherever it is taken, so the search keeps its change
    of a fingerprint: on random systems (FIFOs taken from and appended to, writes that read
    first and that do not, symmetric ids), each fingerprint worked out so is the whole one."""
    with pytest.MonkeyPatch.context() as monkeypatch:
        checked, kept = check_each_successor_fingerprint(monkeypatch)
        explore(build_system(spec), stop_on_violation=False, fingerprints=64, max_states=3_000)
    assert kept.value <= checked.value


def test_the_search_keeps_a_fixed_steps_change_of_a_fingerprint_on_chunk_transfer(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """On chunk_transfer most successors come from steps whose change is kept, and every
    fingerprint worked out is the whole one."""
    checked, kept = check_each_successor_fingerprint(monkeypatch)
    report = explore(
        systems()["chunk_transfer"](), stop_on_violation=False, fingerprints=64, max_states=3_000
    )
    assert checked.value >= report.transitions // 2
    assert kept.value > checked.value // 2


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(random_systems(symmetric_pair=True), st.sampled_from([64, 128]), st.integers(1, 300))
def test_each_node_expanded_is_the_one_stored_where_its_sum_is_taken(
    spec: SystemSpec, bits: int, bound: int
) -> None:
    """A search takes a node's sum from the store, at its place in its level (the store
    holds a level in the order it was queued): checked whole on every node, under a state
    bound and with symmetry, the search is the one full states make."""
    system = build_system(spec)
    with mock.patch.object(fingerprints, "_RECHECK", 1):
        compact = explore(system, stop_on_violation=False, fingerprints=bits, max_states=bound)
    assert summary(compact) == summary(explore(system, stop_on_violation=False, max_states=bound))


def test_a_node_expanded_at_another_nodes_index_is_caught(monkeypatch: pytest.MonkeyPatch) -> None:
    """A level stored out of its order would give its successors wrong fingerprints: the
    nodes whose sum is checked whole stop the search."""
    monkeypatch.setattr(fingerprints, "_RECHECK", 1)
    store = FingerprintStore(systems()["segments"](), 64, lambda n: n, lambda m, o: (m, []))
    first, second = (SystemState((Slot(1, None),), (0,)),), (SystemState((Slot(1, None),), (1,)),)
    store.setdefault(first, None)
    store.setdefault(second, None)
    assert store.expanding(second, 1) == store.fingerprinter.raw(second)
    with pytest.raises(RuntimeError, match="is not that of the node expanded"):
        store.expanding(second, 0)


def test_equal_parts_of_unlike_objects_share_a_digest_at_a_position_and_no_other() -> None:
    """Digests are remembered by value as well as by object: an equal part made anew, or one
    of another type that encodes alike (``True`` for ``1``, a record for its tuple), gets the
    digest a fresh fingerprinter gives it; the same part at another position gets another."""
    seen = Fingerprinter(64)
    for position, parts in enumerate([(1, True, 1.0), ((1, "a"), Pair(1, "a")), (-0.0, 0.0, 0)]):
        digests = {seen.part(position, part) for part in parts}
        assert digests == {Fingerprinter(64).part(position, parts[0])}
        assert seen.part(position + 3, parts[0]) not in digests
    made = tuple([("queue", n) for n in range(3)])
    again = tuple([("queue", n) for n in range(3)])
    assert made is not again and seen.part(7, made) == seen.part(7, again)


def test_digests_remembered_by_value_are_bounded_at_every_position_together(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """However many positions meet new parts, the digests remembered by value stay within one
    bound (the encodings' and objects' bound), and forgetting them changes no digest."""
    monkeypatch.setattr(fingerprints, "_CACHE", 50)
    seen, fresh = Fingerprinter(64), Fingerprinter(64)
    for n in range(400):
        position, part = n % 7, ("queue", n // 7, n % 3)
        assert seen.part(position, part) == fresh.part(position, part)
        assert sum(map(len, seen._equal)) <= 50
    assert seen.part(3, ("queue", 0, 0)) == Fingerprinter(64).part(3, ("queue", 0, 0))


# -- the store ---------------------------------------------------------------------------


@pytest.mark.parametrize("bits", [64, 128])
@given(st.lists(st.integers(1, 2**128 - 1), unique=True, max_size=3000))
@settings(max_examples=20, deadline=None)
def test_the_store_finds_what_it_holds_across_growth(bits: int, fps: list[int]) -> None:
    store = FingerprintStore(systems()["segments"](), bits, lambda n: n, lambda m, o: (m, []))
    fps = [fp % 2**bits or 1 for fp in fps]
    fps = list(dict.fromkeys(fps))
    for index, fp in enumerate(fps):
        assert store.find(fp) == -1
        assert store.add(fp, index, index % 7) == index
    for index, fp in enumerate(fps):
        assert store.find(fp) == index
        assert store.entry(index) == (fp, index, index % 7)


@pytest.mark.parametrize("bits", [64, 128])
@given(st.lists(st.tuples(st.integers(1, 40), st.sampled_from(["find", "add", "in", "set"]))))
@settings(max_examples=200, deadline=None)
def test_the_store_adds_where_its_last_miss_probed(bits: int, ops: list[tuple[int, str]]) -> None:
    """A node `in` missed is added at the slot its probe ended on (no second probe), whatever
    was looked up in between: the store answers as a dict of the fingerprints added."""
    store = FingerprintStore(systems()["segments"](), bits, lambda n: n, lambda m, o: (m, []))
    store.fingerprint = lambda node: node  # type: ignore[assignment,return-value]  # fp = node
    held: dict[int, int] = {}
    for fp, op in ops:
        fp = fp * (2**bits // 64) or 1  # fingerprints that share the table's low bits
        if op == "find":
            assert store.find(fp) == held.get(fp, -1)
        elif op == "add" and fp not in held:
            held[fp] = store.add(fp, ROOT, 0)
        elif op == "in":
            assert (fp in store) == (fp in held)
        elif op == "set":
            before = len(store)
            store.setdefault(fp, None)  # type: ignore[arg-type]  # an initial node's entry
            assert len(store) == before + (fp not in held)
            held.setdefault(fp, before)
    assert all(store.find(fp) == index for fp, index in held.items())
    assert len(store) == len(held)


@pytest.mark.parametrize("workers", [1, 2])
def test_a_fingerprint_search_keeps_at_most_40_bytes_a_state(workers: int) -> None:
    system = systems()["chunk_transfer_seed000_p1"]()
    report = explore(
        system, stop_on_violation=False, fingerprints=64, max_states=20_000, workers=workers
    )
    line = next(note for note in report.notes if note.startswith("fingerprints:"))
    found = re.search(r"\(([\d.]+) bytes each\)", line)
    assert found is not None and float(found.group(1)) <= 40
    store = FingerprintStore(system, 64, lambda n: n, lambda m, o: (m, []))
    for fp in range(1, 20_001):
        store.add(fp * 0x9E3779B97F4A7C15 % 2**64 or 1, fp, 0)
    assert store.nbytes / len(store) <= 40


# -- the same search -------------------------------------------------------------------------


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(random_systems(), st.sampled_from([64, 128]), st.booleans())
def test_fingerprints_find_what_full_states_find_on_random_systems(
    spec: SystemSpec, bits: int, stop: bool
) -> None:
    system = build_system(spec)
    full = explore(system, stop_on_violation=stop)
    compact = explore(system, stop_on_violation=stop, fingerprints=bits)
    assert summary(compact) == summary(full)
    for result in compact.results:
        if result.trace is not None and result.verdict == "violated":
            assert replay(system, result.trace).verdict == "violated"


@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(random_systems(symmetric_pair=True, naming=True))
def test_fingerprints_under_symmetry_find_what_full_states_find(spec: SystemSpec) -> None:
    system = build_system(spec)
    full = explore(system, stop_on_violation=False)
    compact = explore(system, stop_on_violation=False, fingerprints=64)
    assert summary(compact) == summary(full)
    assert compact.notes[: len(full.notes)] == full.notes


@pytest.mark.parametrize("name", bundled_names())
def test_fingerprints_on_every_bundled_target(name: str) -> None:
    golden = GOLDEN_FIGURES[name]["symmetry"]
    report = explore(systems()[name](), stop_on_violation=False, fingerprints=64)
    assert (report.states, report.transitions, report.depth, report.complete) == (
        golden["states"],
        golden["transitions"],
        golden["depth"],
        golden["complete"],
    )
    found = {
        r.property.id: {
            "verdict": r.verdict,
            "trace": None if r.trace is None else [str(a) for a in r.trace.actions],
        }
        for r in report.results
    }
    assert found == golden["verdicts"]
    bound = collision_bound(64, report.states)
    assert list(report.notes[:-1]) == golden["notes"]
    assert re.fullmatch(
        rf"fingerprints: 64-bit, {report.states:,} states \(\d+ bytes each\), "
        rf"probability of a collision <= {bound:.1e}",
        report.notes[-1],
    )


def test_the_collision_bound_is_the_birthday_bound() -> None:
    assert collision_bound(64, 1) == 0
    assert collision_bound(64, 2**32) == pytest.approx(0.5, rel=1e-6)
    assert collision_bound(64, 2**40) == 1.0
    assert collision_bound(128, 10**9) < 1e-20


def test_the_cli_page_quotes_the_collision_bound_the_check_reports() -> None:
    page = (Path(__file__).resolve().parent.parent / "docs" / "cli.md").read_text()
    million, hundred_million = (f"{collision_bound(64, n):.1e}" for n in (10**6, 10**8))
    quoted = f"about {million} at a million\nstates, {hundred_million} at 100 million."
    assert quoted in page
