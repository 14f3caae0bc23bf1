"""The search on several processes finds what one process finds.

Same distinct states, transitions, depth, coverage, verdicts and trace
lengths on random systems (symmetric ones and ones that tell ids apart
included), on every bundled target and variant (`golden_targets`), with
full states and with fingerprints; a model error reads as one process's;
bounds and unsupported combinations are handled as documented.
"""

from __future__ import annotations

import dataclasses
import multiprocessing
import re
import signal
from array import array
from typing import Any

import pytest
from golden_targets import systems
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from statecore.models.chunk_transfer import ChunkTransferConfig, build
from system_strategies import SystemSpec, build_system
from system_strategies import systems as random_systems
from test_fingerprints import GOLDEN_FIGURES, assert_golden_figures, bundled_names
from test_model_errors import jobs, running

from statecore.check import frontier, ownership, parallel, partition
from statecore.check.explore import explore
from statecore.check.fingerprints import Fingerprinter
from statecore.check.ownership import Partition
from statecore.check.predicates import PredicateCache
from statecore.check.results import Report
from statecore.errors import ActionRaisedError, PropertyRaisedError
from statecore.properties import always, eventually, sometimes
from statecore.system import Action, Global, System, SystemState, Tx
from statecore.traces.replay import replay


def summary(report: Report) -> tuple[Any, ...]:
    """What must not change: counts, coverage, and each verdict with its trace's length
    (`counterexamples`: and with its trace, where the workers are forked)."""
    verdicts = tuple(
        (r.property.id, r.verdict, None if r.trace is None else len(r.trace.steps))
        for r in report.results
    )
    counts = (report.states, report.transitions, report.depth, report.complete)
    notes = tuple(re.sub(r" \(\d+ bytes each\)", "", note) for note in report.notes)
    return (*counts, report.symmetry, report.coverage, notes, verdicts)


def counterexamples(report: Report) -> tuple[Any, ...]:
    """Each property's verdict and trace, step by step: of several equally short ones, the
    one one process reports (the first it meets), on forked workers too."""
    return tuple(
        (r.property.id, r.verdict, r.trace and tuple(str(s.action) for s in r.trace.steps))
        for r in report.results
    )


def assert_traces_real(system: Any, report: Report) -> None:
    for result in report.results:
        if result.trace is not None and result.verdict == "violated":
            assert replay(system, result.trace).verdict == "violated"


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(random_systems(), st.sampled_from([0, 64]))
def test_two_workers_find_what_one_finds_on_random_systems(spec: SystemSpec, bits: int) -> None:
    system = build_system(spec)
    one = explore(system, stop_on_violation=False, fingerprints=bits)
    two = explore(system, stop_on_violation=False, fingerprints=bits, workers=2)
    assert summary(two) == summary(one)
    assert counterexamples(two) == counterexamples(one)
    assert_traces_real(system, two)


@settings(max_examples=15, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(random_systems(symmetric_pair=True, naming=True))
def test_two_workers_under_symmetry_find_what_one_finds(spec: SystemSpec) -> None:
    """Symmetry kept where sound, and switched off (with its note) where the ids are told apart."""
    system = build_system(spec)
    one = explore(system, stop_on_violation=False)
    three = explore(system, stop_on_violation=False, workers=3)
    assert summary(three) == summary(one)
    assert counterexamples(three) == counterexamples(one)
    assert_traces_real(system, three)


@settings(max_examples=15, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(random_systems())
def test_stopping_at_a_violation_finds_each_of_one_process_violations(spec: SystemSpec) -> None:
    """Stopping at the end of the level, two workers find each violation one process stops
    at, with its trace."""
    system = build_system(spec)
    one = explore(system)
    two = explore(system, workers=2)
    assert two.ok == one.ok
    for result in one.results:
        if result.verdict == "violated":
            theirs = two.result(result.property.id)
            assert theirs.verdict == "violated"
            assert result.trace is not None and theirs.trace is not None
            assert theirs.trace.steps == result.trace.steps


@pytest.mark.parametrize("name", bundled_names())
def test_two_workers_on_every_bundled_target(name: str) -> None:
    golden = GOLDEN_FIGURES[name]["symmetry"]
    bits = 64 if len(name) % 2 else 0  # half of them with fingerprints
    report = explore(systems()[name](), stop_on_violation=False, workers=2, fingerprints=bits)
    assert_golden_figures(report, golden)
    one = explore(systems()[name](), stop_on_violation=False)
    assert counterexamples(report) == counterexamples(one)


# -- errors and bounds ---------------------------------------------------------------


def test_an_action_that_raises_on_a_worker_is_reported_as_one_process_reports_it() -> None:
    def audit(tx: Tx) -> None:
        if tx.get("ticks") == 2:
            raise ZeroDivisionError("audit divided by zero")
        tx.require(False)

    system = jobs(Action("audit", "auditor", audit))
    with pytest.raises(ActionRaisedError) as one:
        explore(system)
    with pytest.raises(ActionRaisedError) as two:
        explore(system, workers=2)
    assert str(two.value).splitlines()[0] == str(one.value).splitlines()[0]
    assert two.value.trace is not None and len(two.value.trace) == 2
    assert isinstance(two.value.__cause__, ZeroDivisionError)


@pytest.mark.parametrize("slack", [32, 0])
@pytest.mark.parametrize("depth", [1, 2, 3, 4])
def test_of_several_model_errors_at_one_depth_the_workers_report_one_process_one(
    depth: int, slack: int
) -> None:
    """Every state `depth` steps deep makes the audit raise: one process reports the first it
    expands, and so do the workers (`slack` 0: nodes move between them at every level)."""

    def audit(tx: Tx) -> None:
        if tx.get("x") + tx.get("y") + tx.get("z") == depth:
            raise ZeroDivisionError("audit divided by zero")
        tx.require(False)

    base = counters(3)
    audited = [*base.actions, Action("audit", "auditor", audit)]
    system = System("audited", components=[], globals=list(base.globals), actions=audited)
    with pytest.raises(ActionRaisedError) as one:
        explore(system)
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(partition, "_SLACK", slack)
        for bits in (0, 64):
            with pytest.raises(ActionRaisedError) as two:
                explore(system, workers=2, fingerprints=bits)
            assert str(two.value) == str(one.value)
            assert two.value.trace == one.value.trace


def test_a_model_error_one_process_stops_before_is_not_reported() -> None:
    """Stopping at a violation, one process stops after the node where it met one, before it
    expands a later node of the level whose action raises: it reports the violation, and so
    do the workers, which expand the whole level."""

    def audit(tx: Tx) -> None:
        if (tx.get("x"), tx.get("y"), tx.get("z")) == (0, 0, 1):
            raise ZeroDivisionError("audit divided by zero")
        tx.require(False)

    base = counters(3)
    audited = [*base.actions, Action("audit", "auditor", audit)]
    below = always("x_below_2", "x never reaches 2", lambda v: v.get("x") < 2)
    system = System(
        "audited", components=[], globals=list(base.globals), actions=audited, properties=[below]
    )
    one = explore(system)
    assert one.result("x_below_2").verdict == "violated"
    for workers in (2, 3):
        more = explore(system, workers=workers)
        assert counterexamples(more) == counterexamples(one)
    with pytest.raises(ActionRaisedError):  # (not stopping, one process meets the error)
        explore(system, stop_on_violation=False)
    with pytest.raises(ActionRaisedError):
        explore(system, stop_on_violation=False, workers=2)


@pytest.mark.parametrize("kind", [always, eventually])
def test_a_property_that_raises_on_a_worker_is_reported_with_its_trace(kind: Any) -> None:
    prop = kind("boom", "raises at two running", lambda v: 1 // (2 - running(v)) >= 0)
    with pytest.raises(PropertyRaisedError) as raised:
        explore(jobs(properties=(prop,)), stop_on_violation=False, workers=2)
    assert "property 'boom' raised ZeroDivisionError" in str(raised.value).splitlines()[0]
    last = raised.value.trace.steps[-1].state  # type: ignore[attr-defined]
    assert sum(1 for slot in last.slots if slot.snapshot.state == "running") == 2


def test_the_state_bound_is_kept_and_the_search_says_it_is_incomplete() -> None:
    system = systems()["segments"]()
    report = explore(system, stop_on_violation=False, workers=2, max_states=500)
    assert not report.complete and report.stop == "max_states"
    assert report.states <= 500
    assert all(r.verdict != "holds" or r.trace is not None for r in report.results)


@pytest.mark.parametrize("bits", [0, 64])
@pytest.mark.parametrize(("workers", "bound"), [(2, 1), (3, 1), (3, 2)])
def test_a_bound_below_the_workers_keeps_what_one_process_keeps(
    bits: int, workers: int, bound: int
) -> None:
    """A bound smaller than the workers: the initial state is kept, and no more than the bound
    (a worker whose share of the bound was nothing used to turn the initial state away, and
    the search reported no state at all)."""
    system = systems()["segments"]()
    one = explore(system, max_states=bound, fingerprints=bits)
    many = explore(system, workers=workers, max_states=bound, fingerprints=bits)
    assert bounded(many) == bounded(one) == (bound, False, "max_states", bound - 1)


def bounded(report: Report) -> tuple[int, bool, str, int]:
    """What a search bounded by `max_states` must report as one process does: the states kept,
    whether that was all of them, why it stopped, the depth (not which states it kept)."""
    return report.states, report.complete, report.stop, report.depth


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(random_systems(), st.sampled_from([0, 64]), st.integers(-3, 3), st.sampled_from([2, 3]))
def test_a_bound_near_the_space_keeps_as_many_states_as_one_process(
    spec: SystemSpec, bits: int, off: int, workers: int
) -> None:
    """Bounded at the space's size, or a few states off: as many states kept, and complete
    exactly where one process is (each worker used to keep its own share of the bound, so
    one that reached more than its share turned states away while the others had room). What
    the workers find on the states they drop past the bound is real: each trace replays."""
    system = build_system(spec)
    bound = max(1, explore(system, stop_on_violation=False, fingerprints=bits).states + off)
    one = explore(system, stop_on_violation=False, fingerprints=bits, max_states=bound)
    many = explore(
        system, stop_on_violation=False, fingerprints=bits, max_states=bound, workers=workers
    )
    assert bounded(many) == bounded(one)
    assert memo_notes(many) == memo_notes(one)
    assert_traces_real(system, many)
    for result in many.results:  # (a monitor refusal is a step out of the deepest level)
        if result.verdict == "violated" and result.trace is not None:
            assert len(result.trace) <= many.depth + 1


def test_partial_order_reduction_on_several_workers_is_refused_in_one_line() -> None:
    with pytest.raises(ValueError, match="partial-order reduction does not run on several"):
        explore(systems()["segments"](), por=True, workers=2)


def test_more_actions_than_a_discovery_key_holds_are_refused_in_one_line() -> None:
    """A node's place in one process's order holds the number of the action that reached it
    in `STEP_BITS` bits: a system with more actions is refused before a worker starts."""
    system = counters(2)  # three actions
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(parallel, "STEP_BITS", 1)
        with pytest.raises(ValueError) as refused:
            explore(system, workers=2)
    assert str(refused.value) == (
        "system 'counters_2' has 3 actions with their arguments; a search on several workers "
        "takes fewer than 2: search on one process"
    )


def test_a_worker_count_below_one_is_refused() -> None:
    with pytest.raises(ValueError, match="workers must be 1 or more"):
        explore(systems()["segments"](), workers=0)


def test_fingerprint_workers_keep_the_hints_of_their_unpacked_nodes(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A worker of a fingerprint search hands each node it reached from its own parent that
    parent's judgements, as one process does: with levels packed past a few nodes its workers
    judge the predicates more often, and find the same."""
    judged = multiprocessing.get_context("fork").Value("l", 0)  # counted by the forked workers
    original = PredicateCache.judge

    def judge(self: PredicateCache, predicate: Any, state: SystemState) -> Any:
        with judged.get_lock():
            judged.value += 1
        return original(self, predicate, state)

    monkeypatch.setattr(PredicateCache, "judge", judge)
    system = build(ChunkTransferConfig(ids=1, generations=1, saves=1, segments=0))
    hinted = explore(system, stop_on_violation=False, fingerprints=64, workers=2)
    judged_hinted, judged.value = judged.value, 0
    monkeypatch.setattr(frontier, "UNPACKED", 4)
    packed = explore(system, stop_on_violation=False, fingerprints=64, workers=2)
    assert judged.value > judged_hinted
    assert summary(packed) == summary(hinted)


def test_full_states_with_one_hash_are_told_apart() -> None:
    """``hash(-1) == hash(-2)``: two full states that differ only there share a hash, and so
    an owner; it keeps both (one process's three states)."""

    def set_x(value: int) -> Any:
        def run(tx: Tx) -> None:
            tx.require(tx.get("x") == 0)
            tx.set("x", value)
            tx.set("y", 1)

        return run

    system = System(
        "collide",
        components=[],
        globals=[Global("x", 0), Global("y", 0)],
        actions=[Action("minus_one", "a", set_x(-1)), Action("minus_two", "b", set_x(-2))],
    )
    one = explore(system, stop_on_violation=False)
    for workers in (2, 3):
        assert summary(explore(system, stop_on_violation=False, workers=workers)) == summary(one)
    assert one.states == 3


def memo_notes(report: Report) -> list[str]:
    """The notes of `report` but the fingerprints' line (with workers, it counts the states
    stored past a bound too)."""
    return [note for note in report.notes if not note.startswith("fingerprints:")]


# -- with fingerprints: a node stays with the worker that reached it ---------------------


@given(st.lists(st.integers(0, 10**4), min_size=1, max_size=6), st.data())
def test_the_workers_keep_the_bound_shared_in_proportion(counts: list[int], data: Any) -> None:
    """Past the bound, the workers keep exactly what is left of it, each at most the nodes it
    has and at least its proportional share rounded down."""
    total = sum(counts)
    if total < 1:
        return
    bound = data.draw(st.integers(0, total - 1))
    keep = partition.kept_shares(counts, bound)
    assert sum(keep) == bound
    for kept, count in zip(keep, counts):
        assert count * bound // total <= kept <= count


@given(st.lists(st.integers(0, 10**6), min_size=1, max_size=6))
def test_moves_share_the_nodes_to_expand_out_evenly(counts: list[int]) -> None:
    """Each move goes from a worker over its share to one under it; after them every worker
    has its share (within one node); none is made where no worker is more than the slack
    over its share."""
    plan = partition.moves(counts)
    after = list(counts)
    total, n = sum(counts), len(counts)
    for sender, receiver, nodes in plan:
        assert nodes > 0 and counts[sender] > total / n > counts[receiver]
        after[sender] -= nodes
        after[receiver] += nodes
    assert sum(after) == total
    if plan:
        assert max(after) - min(after) <= 1
    else:
        assert max(counts) - total // n - 1 <= max(partition._SLACK, total // n // 64)


def counting(counts: Any, index: int, method: Any) -> Any:
    """`method`, counting each call in `counts[index]` (shared with forked workers), or, for
    index -1, in the slot of the worker calling it."""

    def counted(self: Any, *args: Any) -> Any:
        with counts.get_lock():
            counts[self.me if index < 0 else index] += 1
        return method(self, *args)

    return counted


@pytest.mark.parametrize("bits", [0, 64])
def test_each_worker_expands_what_it_reached_and_about_half(bits: int) -> None:
    """On chunk_transfer at two ids, with full states or fingerprints: every state is
    expanded once, by one worker or the other, about half each; few nodes move to even the
    workers out, and the two find what one process finds."""
    system = build(ChunkTransferConfig(ids=2, generations=1, saves=1, segments=0))
    expanded = multiprocessing.get_context("fork").Array("l", 2)
    moved = multiprocessing.get_context("fork").Array("l", 1)
    even_out = partition.Share._even_out

    def even_out_counted(self: Any, deeper: Any, hints: Any, live: int) -> int:
        left = even_out(self, deeper, hints, live)
        with moved.get_lock():
            moved[0] += max(0, left - live)  # taken from another worker
        return left

    one = explore(system, stop_on_violation=False, fingerprints=bits)
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(Partition, "hold", counting(expanded, -1, Partition.hold))
        patch.setattr(partition.Share, "_even_out", even_out_counted)
        two = explore(system, stop_on_violation=False, fingerprints=bits, workers=2)
    assert summary(two) == summary(one)
    assert expanded[0] + expanded[1] == one.states
    assert min(expanded) > 0.4 * one.states
    assert 0 < moved[0] < 0.1 * one.states


def counters(cap: int) -> System:
    """Three counters counted up to `cap` one at a time: many paths to each state, so two
    workers often reach a new state each, and claim it, in one level."""

    def count(name: str) -> Any:
        def up(tx: Tx) -> None:
            tx.require(tx.get(name) < cap)
            tx.set(name, tx.get(name) + 1)

        return up

    def values(view: Any) -> list[int]:
        return [view.get(name) for name in "xyz"]

    return System(
        f"counters_{cap}",
        components=[],
        globals=[Global("x", 0), Global("y", 0), Global("z", 0)],
        actions=[Action(f"up_{name}", name, count(name)) for name in "xyz"],
        properties=[
            always("below", "not every counter at the cap", lambda v: min(values(v)) < cap),
            sometimes("middle", "x and y half way", lambda v: values(v)[:2] == [cap // 2] * 2),
            eventually("capped", "at rest, x is capped", lambda v: values(v)[0] == cap),
        ],
    )


def test_what_is_found_on_a_claim_turned_down_is_dropped() -> None:
    """A worker judges a node it claims at once; where the owner turns the claim down (the
    node was another claimant's first), what it found there is dropped and the node is never
    expanded: the finding the node's holder made stands, with its shortest trace. (Every
    uneven level is evened out here, so both workers hold nodes from the first levels on.)"""
    dropped = multiprocessing.get_context("fork").Array("l", 1)
    trade = partition.Share._trade_claims

    def trade_counted(self: Any, deeper: Any, hints: Any) -> int:
        before = len(self.findings)
        found = [f for f, _, _ in self.pending]
        live = trade(self, deeper, hints)
        with dropped.get_lock():
            dropped[0] += before - len(self.findings)
        assert all((f in self.findings) == (f.ref != ownership.DEAD) for f in found)
        return live

    for cap in (2, 3, 4):
        system = counters(cap)
        one = explore(system, stop_on_violation=False, fingerprints=64)
        with pytest.MonkeyPatch.context() as patch:
            patch.setattr(partition.Share, "_trade_claims", trade_counted)
            patch.setattr(partition, "_SLACK", 0)
            for workers in (2, 3):
                two = explore(system, stop_on_violation=False, fingerprints=64, workers=workers)
                assert summary(two) == summary(one)
                assert_traces_real(system, two)
        assert [r.verdict for r in one.results] == ["violated", "holds", "violated"]
    assert dropped[0] > 0


@pytest.mark.parametrize("bits", [0, 64])
def test_a_state_reached_by_several_workers_keeps_one_process_parent(bits: int) -> None:
    """Three counters: most states are reached by several workers in one level, and nodes
    move between them at every level (`_SLACK` 0). Whichever worker reached a state first,
    and whichever holds it then, the owner keeps the parent one process gives it (another
    worker's claim may beat its own, or a third's): every counterexample is one process's,
    step for step, on 2, 3 and 4 workers."""
    for cap in (2, 3, 5):
        system = counters(cap)
        one = explore(system, stop_on_violation=False, fingerprints=bits)
        with pytest.MonkeyPatch.context() as patch:
            patch.setattr(partition, "_SLACK", 0)
            for workers in (2, 3, 4):
                more = explore(system, stop_on_violation=False, fingerprints=bits, workers=workers)
                assert counterexamples(more) == counterexamples(one)
                assert summary(more) == summary(one)


@settings(max_examples=20, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(random_systems(), st.sampled_from([0, 64]))
def test_nodes_moved_at_every_level_change_no_counterexample(spec: SystemSpec, bits: int) -> None:
    """Evened out at every level, a worker expands nodes another reached, after its own: it
    still expands them in one process's order, and reports one process's counterexamples."""
    system = build_system(spec)
    one = explore(system, stop_on_violation=False, fingerprints=bits)
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(partition, "_SLACK", 0)
        three = explore(system, stop_on_violation=False, fingerprints=bits, workers=3)
    assert counterexamples(three) == counterexamples(one)


def test_a_worker_remembers_what_it_claimed_but_what_the_quota_turned_away() -> None:
    """A claim the owner added, or found it had, names a node the owner keeps: the worker
    claims it no more (its successor equal to it is seen). One the quota turned away is
    forgotten, to be claimed again at a later level; and past `_KNOWN` claims the worker
    starts remembering afresh."""
    system = counters(2)
    store = ownership.FingerprintStore(
        system, 64, lambda n: n, lambda m, o: (m, []), partition=0, partitions=2
    )
    part = Partition(store, exact=False)
    fps = [11 << 40, 13 << 40, 15 << 40]  # (worker 1's, by `partition_of`)
    assert {ownership.partition_of(fp, 2) for fp in fps} == {1}
    for place, fp in enumerate(fps):
        part.claims[1].extend((fp, 0, ownership.ROOT, 0))
        part.claimed_at[1].append(place)
        part.queued_refs.append(ownership.PENDING)
        part.sent.add(fp)
    answers = array("q", [5, ownership._SEEN, ownership._TURNED_AWAY])
    assert part.answered(1, answers.tobytes()) == 2
    assert list(part.queued_refs) == [5 * 2 + 1, ownership.DEAD, ownership.DEAD]
    part.next_level()
    assert part.sent == set(fps[:2])
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(ownership, "_KNOWN", 1)
        part.next_level()
    assert part.sent == set()


def crossing(w: str, z: str, spread: int = 80) -> System:
    """From ``r``, `spread` middle states; from the first half of them ``one`` goes to `z` and
    ``two`` to `w`, from the second half the other way round. Where `w` falls to the worker
    that holds ``r`` and `z` to the other, each worker, once the middle states are evened out
    between them, first meets a bad state as a claim its owner turns down: the owner reached
    it too."""

    def out(k: int) -> Any:
        def run(tx: Tx) -> None:
            tx.require(tx.get("s") == "r")
            tx.set("s", f"m{k}")

        return run

    def hop(first: bool) -> Any:
        def run(tx: Tx) -> None:
            s = tx.get("s")
            tx.require(s.startswith("m"))
            low = int(s[1:]) < spread // 2
            tx.set("s", (z if low else w) if first else (w if low else z))

        return run

    bad = (w, z)
    return System(
        f"crossing_{w}_{z}",
        components=[],
        globals=[Global("s", "r")],
        actions=[
            *(Action(f"out{k}", "a", out(k)) for k in range(spread)),
            Action("one", "a", hop(True)),
            Action("two", "a", hop(False)),
        ],
        properties=[
            always("never_bad", "s is never w or z", lambda v: v.get("s") not in bad),
            sometimes("bad_reached", "s is w or z", lambda v: v.get("s") in bad),
        ],
    )


def test_a_finding_on_a_claim_settles_nothing_until_the_claim_stands() -> None:
    """Each worker's first bad state is a claim turned down, its owner's own successor: were
    the property settled on the worker as the finding is noted, neither worker would judge
    it again, and the violation (and the witness) would go unreported."""
    fingerprint = Fingerprinter(64)

    def owner(s: str) -> int:  # of the state whose one global is `s`, on two workers
        return ownership.partition_of(fingerprint((SystemState((), (s,)),)), 2)

    names = [f"n{i}" for i in range(40)]
    w = next(n for n in names if owner(n) == owner("r"))
    z = next(n for n in names if owner(n) != owner("r"))
    system = crossing(w, z)
    one = explore(system, stop_on_violation=False, fingerprints=64)
    assert [r.verdict for r in one.results] == ["violated", "holds"]
    two = explore(system, stop_on_violation=False, fingerprints=64, workers=2)
    assert summary(two) == summary(one)
    assert_traces_real(system, two)


def test_a_worker_that_cannot_send_nodes_to_even_out_fails_the_search_and_none_waits() -> None:
    """Where the nodes moved to another worker cannot be pickled, that worker still gets its
    message (no worker waits for ever), and the search fails with a one-line error."""
    made = partition.Share.__init__

    def failing_moves(self: Any, *args: Any, **kwargs: Any) -> None:
        made(self, *args, **kwargs)
        plain = self.dumps

        def dumps(value: Any) -> bytes:
            if isinstance(value, list) and value and len(value[0]) == 4:  # (node, fp, ref, rank)
                raise TypeError("cannot pickle this node")
            return plain(value)

        self.dumps = dumps

    system = build(ChunkTransferConfig(ids=1, generations=1, saves=1, segments=1))
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(partition.Share, "__init__", failing_moves)
        with pytest.raises(RuntimeError) as failed:
            explore(system, stop_on_violation=False, fingerprints=64, workers=2)
    assert str(failed.value) == (
        "a worker failed to exchange states or claims: TypeError: cannot pickle this node"
    )


def test_a_value_that_cannot_be_pickled_is_named_in_one_line() -> None:
    """Workers send each other the values they make; one whose type pickle cannot find (a
    class defined in a function) stops the search with a one-line error naming it and the
    way out, not with a worker that dies."""

    @dataclasses.dataclass(frozen=True)
    class Box:
        k: int

    def spread(k: int) -> Any:
        def run(tx: Tx) -> None:
            tx.require(tx.get("s") == Box(-1))
            tx.set("s", Box(k))

        return run

    system = System(
        "boxes",
        components=[],
        globals=[Global("s", Box(-1))],
        actions=[Action(f"spread{k}", "a", spread(k)) for k in range(100)],
    )
    assert explore(system, fingerprints=64).states == 101
    with pytest.raises(parallel.UnpicklableValue) as failed:
        explore(system, fingerprints=64, workers=2)
    assert str(failed.value) == (
        "explore: a value in the states of 'boxes' cannot go from one worker to another "
        "(AttributeError: Can't pickle local object "
        "'test_a_value_that_cannot_be_pickled_is_named_in_one_line.<locals>.Box'); make it a "
        "value pickle writes and reads back (its type defined at a module's top level, say), "
        "or search on one worker"
    )


def _cannot_rebuild(value: int) -> Any:
    raise ValueError(f"cannot rebuild Unloadable({value})")


@dataclasses.dataclass(frozen=True)
class Unloadable:
    """A value that pickles, but cannot be unpickled."""

    value: int

    def __reduce__(self) -> Any:
        return (_cannot_rebuild, (self.value,))


@pytest.mark.parametrize("bits", [0, 64])
def test_a_state_that_cannot_be_unpickled_fails_the_search_and_none_waits(bits: int) -> None:
    """Where the states claimed from a worker cannot be read back there, it still answers the
    claims (the worker that sent them used to wait for ever), and the search fails with a
    one-line error; with fingerprints, where only the values made travel, it names the value
    and the way out."""

    def spread(k: int) -> Any:
        def run(tx: Tx) -> None:
            tx.require(tx.get("s") is None)
            tx.set("s", Unloadable(k))

        return run

    system = System(
        "unloadable",
        components=[],
        globals=[Global("s", None)],
        actions=[Action(f"spread{k}", "a", spread(k)) for k in range(50)],
    )
    assert explore(system, fingerprints=bits).states == 51

    def hung(*_: Any) -> None:
        raise TimeoutError("the search hung")

    previous = signal.signal(signal.SIGALRM, hung)
    signal.alarm(60)
    try:
        with pytest.raises((RuntimeError, parallel.UnpicklableValue)) as failed:
            explore(system, fingerprints=bits, workers=2)
    finally:
        signal.alarm(0)
        signal.signal(signal.SIGALRM, previous)
    error = r"ValueError: cannot rebuild Unloadable\(\d+\)"
    if not bits:
        expected = rf"a worker failed to exchange states or claims: {error}"
    else:
        expected = (
            rf"explore: a value in the states of 'unloadable' cannot go from one worker to "
            rf"another \({error}\); make it a value pickle writes and reads back .*"
        )
    assert re.fullmatch(expected, str(failed.value))
