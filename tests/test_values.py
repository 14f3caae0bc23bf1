"""Equal values that are not interchangeable turn the memos off, so verdicts stay plain ones.

Each system below holds, at one location, two values that are equal but
behave differently (``0.0`` and ``-0.0``, ``(1,)`` and ``(True,)``,
``Decimal("1.0")`` and ``Decimal("1.00")``), in two states a tag keeps
apart. Searched plainly (every action run on every state, every predicate
judged on the state), the property is violated; a memo that answered one
value with what it learned on the other would say it holds.
"""

from __future__ import annotations

from collections.abc import Callable, Hashable, Iterator
from contextlib import contextmanager
from decimal import Decimal
from typing import Any

import pytest

from statecore.check import explore as explore_module
from statecore.check.explore import VIOLATED, Report, explore
from statecore.check.plain import without_memos
from statecore.check.predicates import PredicateCache
from statecore.check.values import NotInterchangeable, ValueRegistry, strict
from statecore.fuzzing.interpreter import shared_successors
from statecore.properties import always
from statecore.system import Action, Global, StateView, System, SystemState, Tx

Predicate = Callable[[StateView[Any]], object]

# -- the registry ------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("first", "second"),
    [
        (0.0, -0.0),
        ((1,), (True,)),
        ((1,), (1.0,)),
        (frozenset({1}), frozenset({True})),
        (Decimal("1.0"), Decimal("1.00")),
        (((0.0,),), ((-0.0,),)),
    ],
)
def test_equal_values_that_differ_at_one_place_conflict(first: Hashable, second: Hashable) -> None:
    assert first == second and strict(first) != strict(second)
    registry = ValueRegistry()
    registry.add(0, first)
    registry.add(1, second)  # elsewhere: no memo reads both there
    with pytest.raises(NotInterchangeable, match="equal but not interchangeable"):
        registry.add(0, second)


def test_what_the_memos_tell_apart_or_cannot_see_does_not_conflict() -> None:
    registry = ValueRegistry()
    for value in (1, True, 1.0, frozenset((0, 8)), frozenset((8, 0)), (1, "a"), (1, "a")):
        registry.add(0, value)  # 1, True and 1.0 are keyed by type too; a set's order is no part
    assert [v for _, v in registry.fresh()] == [1, True, 1.0, frozenset((0, 8)), (1, "a")]
    assert registry.fresh() == []


# -- the explorer ------------------------------------------------------------------------


def tagged(first: Hashable, second: Hashable, prop: Predicate, show: bool = False) -> System:
    """``a`` or ``b`` sets ``x`` to `first` or `second` (and a tag); ``show`` copies what
    ``x`` holds in words; `prop` is the property."""

    def setter(value: Hashable, tag: int) -> Callable[[Tx], None]:
        def run(tx: Tx) -> None:
            tx.require(tx.get("tag") == 0)
            tx.set("x", value)
            tx.set("tag", tag)

        return run

    def shown(tx: Tx) -> None:
        tx.require(tx.get("tag") != 0 and tx.get("words") == "")
        tx.set("words", repr(tx.get("x")))

    actions = [Action("a", "u", setter(first, 1)), Action("b", "u", setter(second, 2))]
    return System(
        "equal_values",
        components=[],
        actions=[*actions, *([Action("show", "u", shown)] if show else [])],
        globals=[Global("x", None), Global("tag", 0), Global("words", "")],
        properties=[always("p", "the property", prop)],
    )


class _PlainJudge(PredicateCache):
    def judge(self, predicate: Predicate, state: SystemState) -> tuple[bool, bool]:
        return bool(predicate(StateView(self.system, state))), False


class _Plain(explore_module._Explorer):
    def __init__(self, system: System, properties: Any, symmetry: bool, *rest: Any) -> None:
        super().__init__(system, properties, False, *rest)
        without_memos(self)


@contextmanager
def plainly() -> Iterator[None]:
    """The explorer without memos: its own fallback (`statecore.check.plain`), from the start."""
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(explore_module, "_Explorer", _Plain)
        yield


def results(report: Report) -> list[tuple[str, str, tuple[str, ...] | None]]:
    return [
        (r.verdict, r.detail, None if r.trace is None else tuple(map(str, r.trace.actions)))
        for r in report.results
    ]


CASES: dict[str, System] = {
    "signed zero, a predicate": tagged(
        0.0, -0.0, lambda v: v.get("x") is None or str(v.get("x")) == "0.0"
    ),
    "signed zero, an action": tagged(0.0, -0.0, lambda v: v.get("words") != "-0.0", show=True),
    "1 and True in a tuple, a predicate": tagged(
        (1,), (True,), lambda v: v.get("x") is None or type(v.get("x")[0]) is int
    ),
    "1 and True in a tuple, an action": tagged(
        (1,), (True,), lambda v: v.get("words") != "(True,)", show=True
    ),
    "Decimal digits": tagged(
        Decimal("1.0"), Decimal("1.00"), lambda v: v.get("words") != "Decimal('1.00')", show=True
    ),
}


@pytest.mark.parametrize(
    "options", [{}, {"workers": 2}, {"por": True}, {"fingerprints": 64}, {"symmetry": False}]
)
@pytest.mark.parametrize("case", CASES)
def test_the_search_falls_back_to_no_memos_and_gives_the_plain_verdict(
    case: str, options: dict[str, Any]
) -> None:
    if "fingerprints" in options and case == "Decimal digits":
        pytest.skip("a fingerprint has no encoding for a Decimal: that search stops at once")
    system = CASES[case]
    with plainly():
        expected = explore(system, stop_on_violation=False)
    assert [r.verdict for r in expected.results] == [VIOLATED]
    report = explore(system, stop_on_violation=False, **options)
    assert results(report) == results(expected)
    assert (report.states, report.transitions) == (expected.states, expected.transitions)
    assert report.notes[0].startswith("memos off: the values ")


def test_a_fifo_front_equal_to_another_falls_back_too() -> None:
    """``popleft`` takes 0.0 in one state and -0.0 in the other: the memo keys a FIFO's front."""

    def put(value: float, tag: int) -> Callable[[Tx], None]:
        def run(tx: Tx) -> None:
            tx.require(tx.get("tag") == 0)
            tx.append("queue", value)
            tx.set("tag", tag)

        return run

    def take(tx: Tx) -> None:
        tx.set("taken", repr(tx.popleft("queue")))

    system = System(
        "fronts",
        components=[],
        actions=[Action("a", "u", put(0.0, 1)), Action("b", "u", put(-0.0, 2))]
        + [Action("take", "u", take)],
        globals=[Global("queue", ()), Global("tag", 0), Global("taken", "")],
        properties=[always("p", "never took -0.0", lambda v: v.get("taken") != "-0.0")],
    )
    report = explore(system, stop_on_violation=False)
    assert [r.verdict for r in report.results] == [VIOLATED]
    assert report.notes[0].startswith("memos off: the values 0.0 and -0.0")


def test_models_without_such_values_keep_their_memos() -> None:
    system = tagged(1, True, lambda v: v.get("words") != "True", show=True)
    report = explore(system, stop_on_violation=False)
    assert [r.verdict for r in report.results] == [VIOLATED]
    assert report.notes == ()


def test_fuzzing_steps_plainly_once_the_model_makes_such_values() -> None:
    system = CASES["1 and True in a tuple, an action"]
    steps = shared_successors(system)
    [start] = system.init_states()
    for first in steps(start):
        after = first.state
        plain = [(s.action, s.state) for s in system.successors(after)]
        assert [(s.action, s.state) for s in steps(after)] == plain
        for second in steps(after):  # a state holding (True,) after one holding (1,)
            words = [s.state.values[2] for s in steps(second.state)]
            assert words == [s.state.values[2] for s in system.successors(second.state)]


class _Blind(ValueRegistry):
    """A worker's registry that notes values but never compares them."""

    def add(self, place: Hashable, value: Hashable, typed: bool = True) -> None:
        self._fresh.append((place, value))


def test_values_two_workers_made_apart_are_compared_by_the_coordinator(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from statecore.check import partition

    made = partition.Share.__init__

    def blind(share: Any, *args: Any, **kwargs: Any) -> None:
        made(share, *args, **kwargs)
        share.explorer.values = share.explorer.successors.values = _Blind()

    monkeypatch.setattr(partition.Share, "__init__", blind)
    report = explore(CASES["1 and True in a tuple, an action"], stop_on_violation=False, workers=2)
    assert [r.verdict for r in report.results] == [VIOLATED]
    assert report.notes[0].startswith("memos off: the values (1,) and (True,)")
