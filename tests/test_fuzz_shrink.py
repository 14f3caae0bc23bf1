"""Shrinking: a finding's trace loses every step and every block of steps it does not need.

`minimise` runs ddmin and then tries every contiguous block, replaying after each
deletion; what is left still replays to a finding of the same kind and property,
and no single step and no contiguous block of it can be removed.
"""

from __future__ import annotations

from collections.abc import Callable

from hypothesis import given, settings
from hypothesis import strategies as st
from statecore.models.chunk_transfer import CHUNK_TRANSFER, variant_6670
from test_fuzz_guided import BUGGY, SHOP, OrderStates

from statecore.adapter import SystemAdapter
from statecore.fuzzing.fuzz import Finding, fuzz, minimise, replay_with_adapter
from statecore.fuzzing.shrink import ddmin, delete_blocks
from statecore.system import ActionLabel, System
from statecore.traces.trace import Trace, TraceStep


def shrink(items: list[int], fails: Callable[[list[int]], bool]) -> tuple[list[int], int]:
    """`ddmin` then `delete_blocks`, as `minimise` runs them; and how many tests they made."""
    tests = 0

    def reproduces(candidate: list[int]) -> list[int] | None:
        nonlocal tests
        tests += 1
        return candidate if fails(candidate) else None

    return delete_blocks(ddmin(items, reproduces), reproduces), tests


def removable(items: list[int], fails: Callable[[list[int]], bool]) -> list[tuple[int, int]]:
    """Every (start, size) block whose deletion still fails."""
    return [
        (start, size)
        for size in range(1, len(items) + 1)
        for start in range(len(items) - size + 1)
        if fails(items[:start] + items[start + size :])
    ]


@settings(max_examples=200, deadline=None)
@given(
    st.lists(st.integers(0, 5), min_size=1, max_size=30),
    st.lists(st.integers(0, 5), min_size=1, max_size=3),
)
def test_no_step_and_no_block_of_what_is_left_can_go(items: list[int], needed: list[int]) -> None:
    def fails(candidate: list[int]) -> bool:  # `needed` occurs in order, not necessarily adjacent
        rest = iter(candidate)
        return all(any(x == n for x in rest) for n in needed)

    if not fails(items):
        return
    smaller, _ = shrink(items, fails)
    assert fails(smaller)
    assert removable(smaller, fails) == []
    assert smaller == needed  # here the only 1-minimal answer is the pattern itself


def test_ddmin_halves_before_it_tries_single_steps() -> None:
    items = list(range(64))
    smaller, tests = shrink(items, lambda c: 17 in c and 40 in c)
    assert smaller == [17, 40]
    assert tests < 200  # single-step deletions alone would take 64 tests per pass


def trace_of(system: System, names: list[tuple[str, object]]) -> Trace:
    state = system.init_states()[0]
    steps = [TraceStep(None, "", state)]
    for name, arg in names:
        args = () if arg is None else (("order", arg),)
        step_ = system.next_step(state, ActionLabel(name, args))  # type: ignore[arg-type]
        state = step_.state
        steps.append(TraceStep(step_.action, step_.actor, state, step_.outputs))
    return Trace(system.name, tuple(steps), "", "violated", "")


def test_a_removable_pair_at_the_start_goes() -> None:
    # The seed-0 trace began with a create and a cancel that changed
    # nothing the finding needs: neither step alone can go, the pair can.
    order = SHOP.component("order").keys.values[0]  # type: ignore[union-attr]
    padded = [("place", order), ("cancel", order), ("place", order), ("ship", order),
              ("cancel", order)]  # fmt: skip
    found = replay_with_adapter(SHOP, trace_of(SHOP, padded), lambda: OrderStates(BUGGY))
    assert found is not None and found.kind == "conformance"
    smaller = minimise(SHOP, found, lambda: OrderStates(BUGGY))
    assert [a.name for a in smaller.trace.actions] == ["place", "ship", "cancel"]
    assert smaller.minimal and (smaller.kind, smaller.property_id) == (
        found.kind,
        found.property_id,
    )
    again = replay_with_adapter(SHOP, smaller.trace, lambda: OrderStates(BUGGY))
    assert again is not None and again.detail == smaller.detail


def test_a_replay_bound_leaves_the_trace_unproven() -> None:
    report = fuzz(CHUNK_TRANSFER, lambda: SystemAdapter(variant_6670()), guided=False, seed=0)
    finding = report.finding
    assert isinstance(finding, Finding) and finding.minimal
    unshrunk = replay_with_adapter(
        CHUNK_TRANSFER, finding.trace, lambda: SystemAdapter(variant_6670())
    )
    assert unshrunk is not None
    bounded = minimise(
        CHUNK_TRANSFER, unshrunk, lambda: SystemAdapter(variant_6670()), max_replays=1
    )
    assert bounded.minimal is False


def test_a_search_finding_is_shrunk_to_the_same_story() -> None:
    report = fuzz(SHOP, lambda: OrderStates(BUGGY), guided=False, seed=3)
    finding = report.finding
    assert finding is not None and report.found_in == "search" and finding.minimal
    assert [a.name for a in finding.trace.actions] == ["place", "ship", "cancel"]
    # Shrinking replays are counted apart from the search examples.
    assert report.shrink_replays > 0 and report.examples <= 100
