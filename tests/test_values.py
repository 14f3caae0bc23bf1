"""Equal values that are not interchangeable turn the memos off, so verdicts stay plain ones.

Each system below holds, at one location, two values that are equal but
behave differently (``0.0`` and ``-0.0``, ``(1,)`` and ``(True,)``,
``Decimal("1.0")`` and ``Decimal("1.00")``), in two states a tag keeps
apart. Searched plainly (every action run on every state, every predicate
judged on the state), the property is violated; a memo that answered one
value with what it learned on the other would say it holds.
"""

from __future__ import annotations

import dataclasses
import os
import subprocess
import sys
from collections.abc import Callable, Hashable, Iterator
from contextlib import contextmanager
from decimal import Decimal
from pathlib import Path
from typing import Any

import pytest

from statecore import Event, Machine, State, Transition
from statecore.check import explore as explore_module
from statecore.check.explore import VIOLATED, Report, explore
from statecore.check.plain import without_memos
from statecore.check.values import NotInterchangeable, ValueRegistry, strict
from statecore.fuzzing.interpreter import shared_successors
from statecore.properties import always
from statecore.system import Action, Component, Global, Keys, ModelValue, StateView, System, Tx

Predicate = Callable[[StateView[Any]], object]

# -- the registry ------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("first", "second"),
    [
        (1, True),
        (0, False),
        (1, 1.0),
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


def test_values_at_other_places_or_in_other_orders_do_not_conflict() -> None:
    registry = ValueRegistry()
    for place, value in enumerate((1, True, 1.0)):  # at three places: no state compares them
        registry.add(place, value)
    for value in (frozenset((0, 8)), frozenset((8, 0)), (1, "a"), (1, "a")):
        registry.add(3, value)  # a set's order is no part of its form
    made = [v for _, v in registry.fresh()]
    assert made == [1, True, 1.0, frozenset((0, 8)), (1, "a")]
    assert [type(v) for v in made[:3]] == [int, bool, float]
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


class _Plain(explore_module.Explorer):
    def __init__(self, system: System, properties: Any, symmetry: bool, *rest: Any) -> None:
        super().__init__(system, properties, False, *rest)
        without_memos(self)


@contextmanager
def plainly() -> Iterator[None]:
    """The explorer without memos: its own fallback (`statecore.check.plain`), from the start."""
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(explore_module, "Explorer", _Plain)
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
    "1 and True at the top, an action": tagged(
        1, True, lambda v: v.get("words") != "True", show=True
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
    system = tagged(1, 2, lambda v: v.get("words") != "2", show=True)
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

    def add(self, place: Hashable, value: Hashable) -> None:
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


# -- symmetry: the renaming cache -----------------------------------------------------------

IDS = Keys("w", 2)
ONCE = Machine(
    "once",
    states=[State("open", initial=True), State("done", final=True)],
    events=[Event("go")],
    transitions=[Transition("open", "go", "done")],
)


def _start(tx: Tx, w: Hashable) -> None:
    tx.require(tx.get("n") == 0)
    tx.set("n", 1)
    tx.spawn("w", w)


def _show(tx: Tx) -> None:
    tx.require(tx.get("n") == 1)
    tx.set("n", 2)
    tx.set("words", repr(tx.get("b")))


@pytest.mark.parametrize("ids", [False, True], ids=["without ids", "with an id"])
@pytest.mark.parametrize("seed", range(4))
def test_equal_tuples_at_two_places_under_symmetry(seed: int, ids: bool) -> None:
    """``a`` holds (1,) and ``b`` (True,). Renaming a state under symmetry reduction renames
    each tuple through one cache per renaming, looked up by equality wherever the tuple sits.
    A tuple without ids comes back as it is, so the memos stay on; with an id inside,
    ``(True, w0)`` would come back as ``(1, w1)``, so they go off. Whether a state is
    renamed at all depends on the hash seed (which id orders first), so each seed runs in a
    process of its own."""
    code = f"""
import sys
sys.path.insert(0, {str(Path(__file__).parent)!r})
from test_values import symmetric_pair_of_tuples, plain_results
from statecore.check.explore import explore
system = symmetric_pair_of_tuples({ids!r})
report = explore(system, stop_on_violation=False)
assert [(r.verdict, r.detail) for r in report.results] == plain_results(system), report
if {ids!r}:
    assert report.notes[0].startswith("memos off: the values "), report.notes
else:
    # before the start, after it (of w0 or of w1: one orbit), after the show
    assert report.notes == () and report.states == 3, report
"""
    env = {**os.environ, "PYTHONHASHSEED": str(seed)}
    done = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True)
    assert done.returncode == 0, done.stderr


def symmetric_pair_of_tuples(ids: bool) -> System:
    """With `ids`, the start of ``w`` puts it in both tuples."""

    def start(tx: Tx, w: Hashable) -> None:
        _start(tx, w)
        if ids:
            tx.set("a", (*tx.get("a"), w))
            tx.set("b", (*tx.get("b"), w))

    return System(
        "renamed_tuples",
        components=[Component("w", ONCE, IDS)],
        actions=[Action("start", "u", start, {"w": IDS}), Action("show", "u", _show)],
        globals=[Global("n", 0), Global("a", (1,)), Global("b", (True,)), Global("words", "")],
        properties=[
            always(
                "bools",
                "b starts with a bool once started",
                lambda v: v.get("n") == 0 or type(v.get("b")[0]) is bool,
            ),
            always("words", "words never spell a", lambda v: v.get("words") != repr(v.get("a"))),
        ],
    )


def plain_results(system: System) -> list[tuple[str, str]]:
    with plainly():
        report = explore(system, stop_on_violation=False)
    return [(r.verdict, r.detail) for r in report.results]


# -- no fallback where nothing can be confused -------------------------------------------------


@pytest.mark.parametrize(
    "value", [(0, False), (1, 1.0), ((0, 0), (False, False)), (frozenset({1}), 1)]
)
def test_a_tuple_global_of_mixed_items_keeps_the_memos(value: Hashable) -> None:
    """A tuple global whose items are equal across types (a counter and a flag) is no FIFO:
    no memo reads its items one by one."""

    def tick(tx: Tx) -> None:
        tx.require(tx.get("n") < 2)
        tx.set("n", tx.get("n") + 1)
        tx.set("x", tx.get("x") + (value[0],))

    system = System(
        "mixed",
        components=[],
        actions=[Action("tick", "u", tick)],
        globals=[Global("x", value), Global("n", 0)],
        properties=[always("p", "x is a tuple", lambda v: isinstance(v.get("x"), tuple))],
    )
    report = explore(system)
    assert report.states == 3 and report.notes == ()


@dataclasses.dataclass(frozen=True)
class _Job:
    name: str
    raw: dataclasses.InitVar[str]
    size: int = dataclasses.field(init=False)

    def __post_init__(self, raw: str) -> None:
        object.__setattr__(self, "size", len(raw))


def test_a_dataclass_value_with_an_init_only_field_is_noted_by_its_fields() -> None:
    assert strict(_Job("a", "xyz")) == (_Job, ((str, "a"), (int, 3)))
    system = System(
        "jobs",
        components=[],
        actions=[Action("make", "u", lambda tx: tx.set("job", _Job("a", "xyz")))],
        globals=[Global("job", None)],
        properties=[always("p", "small", lambda v: v.get("job") is None or v.get("job").size < 5)],
    )
    report = explore(system)
    assert [r.verdict for r in report.results] == ["holds"] and report.notes == ()


# -- the registry against its definition, on random values ------------------------------


class _Forms:
    """The registry's definition, computed plainly: per key the first value's `strict`
    form; a later equal value must have that form at its place and, under symmetry, for
    each tuple, set and other non-scalar value inside it (a slot without ids aside) where
    either of the two holds an id (the renaming cache gives a value without ids back as it
    is)."""

    def __init__(self, renamed: bool) -> None:
        self.renamed = renamed
        self.forms: dict[Hashable, tuple[Hashable, bool]] = {}

    def add(self, place: Hashable, value: Hashable) -> None:
        if self.renamed:
            self._parts(value)
        self._note((place, value), value, renaming=False)

    def _parts(self, value: Any) -> None:
        if type(value) in (int, bool, str, float, Decimal, ModelValue):
            return
        nested = type(value) in (tuple, frozenset)
        self._note(("renamed", None if nested else type(value), value), value, renaming=True)
        if nested:
            for item in value:
                self._parts(item)

    def _note(self, key: Hashable, value: Hashable, renaming: bool) -> None:
        ids = _ids(value)
        form, first_ids = self.forms.setdefault(key, (strict(value), ids))
        if form != strict(value) and (not renaming or ids or first_ids):
            raise NotInterchangeable("")


def _ids(value: Any) -> bool:
    """Whether an id is inside `value` where renaming reaches it (not inside a dataclass)."""
    if type(value) is ModelValue:
        return True
    return isinstance(value, (tuple, frozenset)) and any(_ids(item) for item in value)


def test_the_registry_raises_exactly_where_its_definition_does() -> None:
    """`ValueRegistry` compares a later value with the first one part by part (`alike`)
    and skips what it noted before; on random equal values of other forms, nested and
    reused, it raises at the same add as the definition computed plainly, with and
    without symmetry's renaming cache."""
    from equal_forms import equal_forms, twin
    from hypothesis import given, settings
    from hypothesis import strategies as st

    @settings(max_examples=300)
    @given(
        st.booleans(),
        st.lists(st.tuples(st.integers(0, 1), equal_forms()), min_size=1, max_size=8),
        st.data(),
    )
    def check(renamed: bool, adds: list[tuple[int, Hashable]], data: st.DataObject) -> None:
        registry, reference = ValueRegistry(), _Forms(renamed)
        registry.renamed = renamed
        made: list[Hashable] = []
        for place, drawn in adds:
            choice = data.draw(st.sampled_from(["new", "same", "twin"]) if made else st.just("new"))
            if choice == "same":  # the same object again, as a memo reuses its parts
                drawn = data.draw(st.sampled_from(made))
            elif choice == "twin":  # an equal value, built anew
                drawn = twin(data.draw(st.sampled_from(made)), data.draw)
            made.append(drawn)
            try:
                reference.add(place, drawn)
            except NotInterchangeable:
                with pytest.raises(NotInterchangeable):
                    registry.add(place, drawn)
                return
            registry.add(place, drawn)

    check()


def test_the_renaming_cache_renames_each_value_as_rename_does_unless_the_registry_refused() -> None:
    """The renaming cache answers a value with the entry of an equal one. On random values
    of every form, ids among them, met in any order at any place: either the registry
    refused two of them (the search turns the memos off), or every answer of the cache is
    alike `rename`'s, under every renaming of the ids."""
    from equal_forms import equal_forms, twin
    from hypothesis import given, settings
    from hypothesis import strategies as st

    from statecore.check.symmetry import Canonicalizer, rename, renamings
    from statecore.forms import alike

    system = System(
        "ids", components=[Component("ext", ONCE, Keys("ext", 2))], actions=[], globals=[]
    )

    @settings(max_examples=300)
    @given(st.lists(equal_forms(), min_size=1, max_size=8), st.data())
    def check(drawn: list[Hashable], data: st.DataObject) -> None:
        made = [twin(v, data.draw) if data.draw(st.booleans()) else v for v in drawn]
        registry = ValueRegistry()
        registry.renamed = True
        try:
            for place, value in enumerate(made):
                registry.add(place, value)
        except NotInterchangeable:
            return
        canonicalizer = Canonicalizer(system)
        for renaming in renamings(system):
            plan = canonicalizer.plan_of(renaming)
            for value in made:
                assert alike(plan.renamed(value), rename(value, renaming)), (value, renaming)

    check()


def test_the_renaming_cache_gives_a_value_without_ids_back_as_it_is() -> None:
    """(1,) and (True,) share an entry; neither holds an id, so each comes back as itself.
    With an id inside, (True, ext0) would come back as (1, ext1): the registry refuses the
    pair, and the search runs without memos."""
    from statecore.check.symmetry import Canonicalizer

    ext0, ext1 = Keys("ext", 2).values
    system = System(
        "ids", components=[Component("ext", ONCE, Keys("ext", 2))], actions=[], globals=[]
    )
    plan = Canonicalizer(system).plan_of({ext0: ext1, ext1: ext0})
    one = (1,)
    assert plan.renamed(one) is one and type(plan.renamed((True,))[0]) is bool
    assert plan.renamed((1, ext0)) == (1, ext1)
    assert type(plan.renamed((True, ext0))[0]) is int  # the entry of (1, ext0)
    registry = ValueRegistry()
    registry.renamed = True
    registry.add("a", (1,))
    registry.add("b", (True,))
    registry.add("a", (1, ext0))
    with pytest.raises(NotInterchangeable):
        registry.add("b", (True, ext0))


def test_two_equal_values_are_alike_exactly_where_their_strict_forms_are_one() -> None:
    """`alike` takes shortcuts (shared parts, a set's items paired by equality) where `strict`
    builds whole forms: on random equal values of every form, ids and sets of records among
    them, the two say the same."""
    from equal_forms import equal_forms, twin
    from hypothesis import given, settings
    from hypothesis import strategies as st

    from statecore.forms import alike, strict

    @settings(max_examples=500)
    @given(equal_forms(), st.data())
    def check(value: Hashable, data: st.DataObject) -> None:
        other = twin(value, data.draw)
        assert other == value
        assert alike(value, other) == (strict(value) == strict(other))
        assert alike(other, value) == alike(value, other)

    check()
