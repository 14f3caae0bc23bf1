"""Two states equal but for a value's type are two states: the verdict must not depend on
which of them a search meets first.

``1 == True == 1.0`` and ``0.0 == -0.0``: a visited set keyed by equality
keeps one of two such states, the one met first, and an action that tells
the values apart then behaves as it does on that one. So the order of the
actions, or a second worker, could change the states counted and the
verdict. A model that makes such values at one place is searched without
memos, on a visited set that tells them apart (`statecore.check.plain`); every
search below must agree with a breadth-first search keyed by `strict` forms.
"""

from __future__ import annotations

import math
import random
from collections.abc import Callable, Hashable
from decimal import Decimal
from typing import Any, NamedTuple

import pytest

from statecore import Event, Field, Instance, Machine, State, Transition, Var, out
from statecore.check.explore import VIOLATED, explore
from statecore.check.fingerprints import Fingerprinter
from statecore.check.plain import StrictFingerprinter, StrictParents
from statecore.check.symmetry import rename_state, renamings
from statecore.check.values import strict
from statecore.errors import SystemDefinitionError
from statecore.memo import remembered_step
from statecore.properties import Property, always, monitor
from statecore.semantics import step
from statecore.system import Action, Component, Global, Keys, ModelValue, StateView, System, Tx

OPTIONS: list[dict[str, Any]] = [
    {},
    {"symmetry": False},
    {"fingerprints": 64},
    {"fingerprints": 128},
    {"por": True},
    {"workers": 2},
    {"workers": 2, "fingerprints": 64},
]


def set_to(value: Hashable) -> Callable[[Tx], None]:
    def run(tx: Tx) -> None:
        tx.require(tx.get("x") is None)
        tx.set("x", value)

    return run


def name_the_type(tx: Tx) -> None:
    tx.require(tx.get("x") is not None and tx.get("named") == "")
    tx.set("named", type(tx.get("x")).__name__)


def one_or_true(first: Hashable, second: Hashable) -> System:
    """``x`` set to `first` or `second` (equal, of two types), nothing else told apart; then
    ``name`` writes the type's name. The property: never ``bool``."""
    return System(
        "one_or_true",
        components=[],
        actions=[
            Action(f"set_{type(first).__name__}", "u", set_to(first)),
            Action(f"set_{type(second).__name__}", "u", set_to(second)),
            Action("name", "u", name_the_type),
        ],
        globals=[Global("x", None), Global("named", "")],
        properties=[always("no_bool", "never a bool", lambda v: v.get("named") != "bool")],
    )


@pytest.mark.parametrize("options", OPTIONS)
@pytest.mark.parametrize("order", ["1 first", "True first"])
def test_whichever_is_met_first_both_states_are_searched(
    order: str, options: dict[str, Any]
) -> None:
    """Keyed by equality, the search met (1, "") first or (True, "") first and kept it: the
    violation was found in one order and not the other."""
    system = one_or_true(1, True) if order == "1 first" else one_or_true(True, 1)
    report = explore(system, stop_on_violation=False, **options)
    assert [r.verdict for r in report.results] == [VIOLATED]
    assert report.results[0].trace is not None
    assert [str(a) for a in report.results[0].trace.actions] == ["set_bool()", "name()"]
    # None; 1; True; 1 named int; True named bool
    assert (report.states, report.transitions) == (5, 4)
    assert report.notes[0].startswith("memos off: the values ")


# -- the plain search's visited set ----------------------------------------------------------

EQUAL_BUT_NOT_ALIKE = [
    (1, True),
    (0, False),
    (1, 1.0),
    (0.0, -0.0),
    ((1,), (True,)),
    (frozenset({1}), frozenset({True})),
    (Decimal("1.0"), Decimal("1.00")),
    (((0, "a"),), ((False, "a"),)),
]


@pytest.mark.parametrize(("first", "second"), EQUAL_BUT_NOT_ALIKE)
def test_the_strict_visited_set_keeps_both(first: Hashable, second: Hashable) -> None:
    parents = StrictParents()
    assert parents.setdefault((first,), None) is None
    assert (second,) not in parents
    parents[(second,)] = ((first,), "step")  # type: ignore[assignment]
    assert len(parents) == 2 and parents[(second,)] == ((first,), "step")
    assert [type(node[0]) for node in parents] == [type(first), type(second)]
    again = tuple(list(first)) if isinstance(first, tuple) else first
    assert parents.setdefault((again,), ((second,), "other")) is None  # (an equal one made anew)


@pytest.mark.parametrize(("first", "second"), EQUAL_BUT_NOT_ALIKE)
def test_strict_fingerprints_tell_them_apart(first: Hashable, second: Hashable) -> None:
    strict_fp = StrictFingerprinter(64)
    assert strict_fp.part(0, first) != strict_fp.part(0, second)
    assert StrictFingerprinter(64).part(0, second) == strict_fp.part(0, second)  # stable
    if not isinstance(first, Decimal):  # (no encoding at all without the types)
        plain = Fingerprinter(64)
        assert plain.part(0, first) == plain.part(0, second)  # equal values, equal digests


def test_strict_fingerprints_ignore_a_sets_order() -> None:
    strict_fp = StrictFingerprinter(64)
    assert strict_fp.part(0, frozenset((0, 8))) == strict_fp.part(0, frozenset((8, 0)))


# -- random systems against a search keyed by strict forms ------------------------------------

VALUES: tuple[Hashable, ...] = (None, 0, 1, True, False, 0.0, -0.0, 1.0)
WORDS = ("int", "bool", "float", "0.0", "-0.0", "True", "1", "1.0")


def random_system(seed: int) -> System:
    """Three globals. Each action may require one global to be truthy or equal to a value,
    and writes a value, or the type name or spelling of another global, into one; the
    property: one global never reads as one of those words."""
    rnd = random.Random(seed)
    names = ["a", "b", "c"]
    initial = {name: rnd.choice(VALUES) for name in names}

    def action(index: int) -> Action:
        test, target, source = rnd.choice(names), rnd.choice(names), rnd.choice(names)
        guard, wanted = rnd.choice(("none", "truthy", "equal")), rnd.choice(VALUES + WORDS)
        how, written = rnd.choice(("value", "value", "type", "spelling")), rnd.choice(VALUES)

        def run(tx: Tx) -> None:
            tx.require(
                guard == "none"
                or (guard == "truthy" and bool(tx.get(test)))
                or (guard == "equal" and tx.get(test) == wanted)
            )
            value = tx.get(source)
            if how == "value":
                tx.set(target, written)
            elif how == "type":
                tx.set(target, type(value).__name__)
            else:  # (a string's spelling would grow without end)
                tx.set(target, value if isinstance(value, str) else repr(value))

        return Action(f"a{index}", "u", run)

    def never(watched: str, bad: str) -> Property:
        return always(
            f"{watched}_{bad}", f"{watched} never reads {bad}", lambda v: str(v.get(watched)) != bad
        )

    return System(
        f"typed_{seed}",
        components=[],
        actions=[action(i) for i in range(rnd.randint(3, 8))],
        globals=[Global(name, initial[name]) for name in names],
        properties=[never(name, rnd.choice(WORDS)) for name in names for _ in range(2)],
    )


def strict_search(system: System) -> tuple[int, list[bool]]:
    """The number of states told apart by `strict` form, and whether one violates each
    property: breadth-first over `System.successors`."""
    seen: set[Hashable] = set()
    level = []
    for state in system.init_states():
        if strict(state) not in seen:
            seen.add(strict(state))
            level.append(state)
    violated = [False for _ in system.properties]
    while level:
        deeper = []
        for state in level:
            view = StateView(system, state)
            violated = [v or not p.predicate(view) for v, p in zip(violated, system.properties)]
            for taken in system.successors(state):
                if strict(taken.state) not in seen:
                    seen.add(strict(taken.state))
                    deeper.append(taken.state)
        level = deeper
    return len(seen), violated


@pytest.mark.parametrize("seed", range(48))
def test_random_typed_systems_agree_with_a_strict_search(seed: int) -> None:
    system = random_system(seed)
    states, violated = strict_search(system)
    options = OPTIONS if seed % 8 == 0 else [o for o in OPTIONS if "workers" not in o]
    for option in options:
        report = explore(system, stop_on_violation=False, **option)
        verdicts = [r.verdict == VIOLATED for r in report.results]
        assert verdicts == violated, (option, report.notes)
        if "por" not in option:  # (which explores fewer states where that changes no verdict)
            assert report.states == states, (option, report.notes)


# -- under symmetry: ids beside such values, renamed through one cache -------------------------

IDS = Keys("w", 2)


def without_ids(value: Any) -> str:
    """`value` spelled with its ids left out: what a symmetric property may read."""
    if isinstance(value, tuple) and type(value) is not ModelValue:
        return repr(tuple(without_ids(item) for item in value))
    return "w" if type(value) is ModelValue else repr(value)


def random_symmetric_system(seed: int) -> System:
    """Three globals of tuples, and a set ``s`` of a pair ``(value, w)`` for each id (equal
    values of two types make it equal to its own renaming, not alike it). Each action, for
    either id ``w``, may require a global to hold ``w`` or a value, and writes into one a
    value, ``(value,)``, ``(value, w)`` or ``(w, value)``, the spelling of another (ids left
    out) or the type of ``w``'s value in ``s``; or pairs ``w`` with another value in ``s``.
    Values are drawn from `VALUES` and ``("w", 0)``, a tuple equal to an id."""
    rnd = random.Random(seed)
    names = ["a", "b", "c"]
    values = VALUES + (("w", 0),)
    initial: dict[str, Hashable] = {name: (rnd.choice(values),) for name in names}
    initial["s"] = frozenset((rnd.choice(values), w) for w in IDS.values)

    def action(index: int) -> Action:
        test, target, source = rnd.choice(names), rnd.choice(names), rnd.choice(names)
        guard, wanted = rnd.choice(("none", "holds w", "equal")), rnd.choice(values)
        how, written = (
            rnd.choice(("bare", "one", "with w", "w first", "spelling", "kind in s", "mark s")),
            rnd.choice(values),
        )

        def run(tx: Tx, w: ModelValue) -> None:
            held = tx.get(test)
            tx.require(
                guard == "none"
                or (guard == "holds w" and w in held)
                or (guard == "equal" and held[0] == wanted)
            )
            [marked] = [pair for pair in tx.get("s") if pair[1] == w]
            if how == "mark s":
                tx.set("s", tx.get("s") - {marked} | {(written, w)})
                return
            made = {
                "bare": (written,),
                "one": (written, written),
                "with w": (written, w),
                "w first": (w, written),
                "spelling": (without_ids(tx.get(source)),),
                "kind in s": (type(marked[0]).__name__,),
            }[how]
            if made != tx.get(target) or how == "spelling":  # (a spelling would grow without end)
                tx.require(len(repr(made)) < 80)
            tx.set(target, made)

        return Action(f"a{index}", "u", run, {"w": IDS})

    def never(watched: str, bad: str, number: int) -> Property:
        return always(
            f"{watched}_{number}",
            f"{watched} never reads {bad}",
            lambda v: without_ids(v.get(watched)) != bad,
        )

    bad_words = [without_ids(word) for v in values for word in ((v,), (v, IDS.values[0]))]
    bad_words += [without_ids((type(v).__name__,)) for v in values]
    return System(
        f"symmetric_typed_{seed}",
        components=[],
        actions=[action(i) for i in range(rnd.randint(3, 8))],
        globals=[Global(name, initial[name]) for name in [*names, "s"]],
        properties=[never(name, rnd.choice(bad_words), i) for name in names for i in range(2)],
    )


def strict_orbits(system: System) -> int:
    """The orbits of the states a breadth-first search keyed by `strict` forms reaches:
    states told apart by strict form, counted once per renaming of the ids."""
    group = renamings(system)
    seen: set[Hashable] = set()
    orbits: set[frozenset[Hashable]] = set()
    level = list(system.init_states())
    while level:
        deeper = []
        for state in level:
            if strict(state) in seen:
                continue
            seen.add(strict(state))
            orbits.add(frozenset(strict(rename_state(system, state, r)) for r in group))
            deeper.extend(taken.state for taken in system.successors(state))
        level = deeper
    return len(orbits)


def confusable(system: System) -> bool:
    """Whether two equal values of one global differ in form, or two equal parts (globals,
    and tuples inside them) of the states reached and their renamings, wherever they sit,
    while one holds an id: only then may a symmetric search run without memos."""
    first: dict[Hashable, tuple[Hashable, bool]] = {}
    at: dict[Hashable, Hashable] = {}  # the first form of each value of each global

    def ids(value: Any) -> bool:
        return type(value) is ModelValue or (
            type(value) in (tuple, frozenset) and any(ids(item) for item in value)
        )

    def note(value: Any) -> bool:
        if type(value) not in (tuple, frozenset):
            return False
        form, held = first.setdefault(value, (strict(value), ids(value)))
        return (form != strict(value) and (held or ids(value))) or any(map(note, value))

    seen: set[Hashable] = set()
    level = list(system.init_states())
    while level:
        deeper = []
        for state in level:
            if strict(state) not in seen:
                seen.add(strict(state))
                images = [rename_state(system, state, r) for r in renamings(system)]
                if any(note(value) for image in images for value in image.values):
                    return True
                for place, value in enumerate(state.values):
                    if at.setdefault((place, value), strict(value)) != strict(value):
                        return True
                deeper.extend(taken.state for taken in system.successors(state))
        level = deeper
    return False


@pytest.mark.parametrize("seed", range(200))
def test_random_symmetric_systems_agree_with_a_strict_search(seed: int) -> None:
    """Under symmetry reduction the verdicts are those of a search keyed by strict forms;
    the states are its orbits, or its states where the search ran without memos (two equal
    values holding an id differ) or without symmetry (the model tells the ids apart), as
    the report says."""
    system = random_symmetric_system(seed)
    states, violated = strict_search(system)
    options = [{}, {"fingerprints": 64}] + ([{"workers": 2}] if seed % 8 == 0 else [])
    for option in options:
        report = explore(system, stop_on_violation=False, **option)
        assert [r.verdict == VIOLATED for r in report.results] == violated, (option, report.notes)
        # (an id's equal ("w", 0) makes some of them asymmetric: the search says so)
        memos_off = any(note.startswith("memos off") for note in report.notes)
        assert confusable(system) or not memos_off, report.notes
        if memos_off or any(note.startswith("symmetry reduction off") for note in report.notes):
            assert report.states == states, (option, report.notes)
        else:
            assert report.states == strict_orbits(system), (option, report.notes)


def test_a_set_equal_to_its_own_renaming_but_unlike_it_is_searched_without_memos() -> None:
    """``{(True, w0), (1, w1)}`` equals its renaming ``{(True, w1), (1, w0)}``, but the id
    paired with a bool differs: picking ``w0`` and picking ``w1`` are two orbits, and
    ``look`` tells them apart. Its renaming is noted where a representative would hold it,
    so the search runs without memos and finds both violations (a search that merged the
    two orbits found one)."""
    w0, w1 = IDS.values

    def pick(tx: Tx, w: ModelValue) -> None:
        tx.require(tx.get("b") == ())
        tx.set("b", (w,))

    def look(tx: Tx) -> None:
        tx.require(tx.get("b") != () and tx.get("words") == "")
        [kind] = [type(x[0]).__name__ for x in tx.get("a") if x[1] == tx.get("b")[0]]
        tx.set("words", kind)

    system = System(
        "own_renaming",
        components=[],
        actions=[Action("pick", "u", pick, {"w": IDS}), Action("look", "u", look)],
        globals=[
            Global("a", frozenset({(True, w0), (1, w1)})),
            Global("b", ()),
            Global("words", ""),
        ],
        properties=[
            always("not_bool", "words never bool", lambda v: v.get("words") != "bool"),
            always("not_int", "words never int", lambda v: v.get("words") != "int"),
        ],
    )
    for option in OPTIONS:
        report = explore(system, stop_on_violation=False, **option)
        assert [r.verdict for r in report.results] == [VIOLATED, VIOLATED], option
        assert report.states == 5, (option, report.notes)


def test_ids_no_renaming_moves_beside_equal_values_keep_the_memos() -> None:
    """``(1, k0)`` and ``(True, k0)`` at two places, ``k0`` of a set that is not symmetric:
    no renaming moves it, so neither is confused with the other's renaming."""
    k0 = Keys("k", 2, symmetric=False).values[0]

    def start(tx: Tx, w: ModelValue) -> None:
        tx.require(tx.get("w") is None)
        tx.set("w", w)

    system = System(
        "fixed_ids",
        components=[],
        actions=[Action("start", "u", start, {"w": IDS})],
        globals=[Global("w", None), Global("a", (1, k0)), Global("b", (True, k0))],
        properties=[always("bool", "b's first is a bool", lambda v: type(v.get("b")[0]) is bool)],
    )
    report = explore(system)
    assert report.notes == () and report.symmetry and report.states == 2


class Record(NamedTuple):
    item: Any


def test_a_record_and_a_tuple_of_its_type_and_it_rename_apart() -> None:
    """The renaming cache keys a record by its type too; a global holding the tuple
    ``(Record, Record(w))`` does not share that key, so a record renamed stays a record and
    the model stays symmetric."""

    def set_b(tx: Tx, w: ModelValue) -> None:
        tx.require(tx.get("b") is None)
        tx.set("b", (Record, Record(w)))

    def set_a(tx: Tx, w: ModelValue) -> None:
        tx.require(tx.get("b") is not None and tx.get("a") is None)
        tx.set("a", Record(w))

    system = System(
        "typed_keys",
        components=[],
        actions=[Action("set_b", "u", set_b, {"w": IDS}), Action("set_a", "u", set_a, {"w": IDS})],
        globals=[Global("a", None), Global("b", None)],
        properties=[
            always(
                "record",
                "a is a record",
                lambda v: v.get("a") in (None,) or type(v.get("a")) is Record,
            )
        ],
    )
    report = explore(system)
    assert report.notes == () and report.symmetry and report.states == 4
    assert [r.verdict for r in report.results] == ["holds"]


@pytest.mark.parametrize("negated", [False, True])
def test_a_fifo_is_renamed_apart_from_an_equal_tuple_elsewhere(negated: bool) -> None:
    """``g`` is set whole to ``(1, w)``; then ``True`` and ``w`` are appended to the FIFO
    ``q``, whose tuple no run writes whole (only its items are noted). Renamed among
    another place's tuples, ``q``'s ``(True, w0)`` came back as ``g``'s ``(1, w1)``: a state
    no run makes. A global's tuples are renamed among its own: 4 orbits, and the verdict of
    the property and of its negation."""

    def set_g(tx: Tx, w: ModelValue) -> None:
        tx.require(tx.get("g") is None)
        tx.set("g", (1, w))

    def push(tx: Tx, w: ModelValue) -> None:
        tx.require(tx.get("g") is not None and tx.get("done") == 0)
        tx.set("done", 1)
        tx.append("q", True)
        tx.append("q", w)

    def first_is_bool(v: StateView[Any]) -> bool:
        return v.get("q") == () or (type(v.get("q")[0]) is bool) != negated

    system = System(
        "fifo_and_tuple",
        components=[],
        actions=[Action("set_g", "u", set_g, {"w": IDS}), Action("push", "u", push, {"w": IDS})],
        globals=[Global("done", 0), Global("q", ()), Global("g", None)],
        properties=[always("first", "q's first is a bool (or not)", first_is_bool)],
    )
    assert strict_search(system) == (7, [negated])
    for option in OPTIONS:
        report = explore(system, stop_on_violation=False, **option)
        assert [r.verdict == VIOLATED for r in report.results] == [negated], option
        if report.symmetry:
            assert report.states == 4 and report.notes[:1] != ("memos off",), option


@pytest.mark.parametrize("reads", ["the whole state", "in an order of the id's"])
def test_an_action_that_tells_ids_apart_by_a_type_only_turns_symmetry_off(reads: str) -> None:
    """``act(w)`` writes ``(1, w)`` for ``w0`` and ``(True, w)`` for ``w1``: equal to the
    renamed run, not alike it. The symmetry guard compares an image's run with the renamed
    run part by part, types and spellings included, so symmetry goes off and the violation
    ``act(w1)`` makes is found. Reading the whole state (a run no memo learns, nor notes)
    or in an order of the id's (the runs then compare as sets of reads and writes) changes
    nothing."""
    w0 = IDS.values[0]

    def pick(tx: Tx, w: ModelValue) -> None:
        tx.require(tx.get("owner") == "")
        tx.set("owner", w)

    def act(tx: Tx, w: ModelValue) -> None:
        if reads == "the whole state":
            tx.before  # noqa: B018
        if reads == "the whole state" or w == w0:
            owner, g = tx.get("owner"), tx.get("g")
        else:
            g, owner = tx.get("g"), tx.get("owner")
        tx.require(owner == w and g == "")
        tx.set("g", (1 if w == w0 else True, w))

    system = System(
        "typed_asymmetry",
        components=[],
        actions=[Action("pick", "u", pick, {"w": IDS}), Action("act", "u", act, {"w": IDS})],
        globals=[Global("owner", ""), Global("g", "")],
        properties=[
            always(
                "int",
                "g's first is an int",
                lambda v: v.get("g") == "" or type(v.get("g")[0]) is int,
            )
        ],
    )
    for option in OPTIONS:
        report = explore(system, stop_on_violation=False, **option)
        assert [r.verdict for r in report.results] == [VIOLATED], option
        assert report.states == 5, (option, report.notes)


def test_a_value_of_seven_ids_is_noted_under_each_renaming_once() -> None:
    """Each new value is noted under each of the 5,039 renamings of seven ids, each image
    once (the plans are the whole group): the search ends, where noting each image's own
    images in turn recursed past Python's limit."""
    ids = Keys("w", 7)

    def touch(tx: Tx, w: ModelValue) -> None:
        order = tx.get("order")
        tx.require(w not in order)
        tx.set("order", (*order, w))

    system = System(
        "all_ids",
        components=[],
        actions=[Action("touch", "u", touch, {"w": ids})],
        globals=[Global("order", ())],
        properties=[
            always("short", "order holds at most 7 ids", lambda v: len(v.get("order")) <= 7)
        ],
    )
    report = explore(system)
    assert report.symmetry and report.notes == () and report.states == 8


# -- where a definition holds them: a machine's payload, an action's parameters ---------------


def signed_go() -> Machine:
    """``go`` with ``x`` in (0.0,): -0.0 is equal, and the guard tells it apart."""
    return Machine(
        "signed",
        states=[State("idle", initial=True), State("positive")],
        events=[Event("go", [Field("x", (0.0,))], policy="reject")],
        transitions=[
            Transition("idle", "go", "positive", guard=lambda s, p: math.copysign(1, p["x"]) > 0)
        ],
    )


def kept_then_named() -> Machine:
    """``put`` keeps an unbounded field in ``d`` (so ``(1,)`` or ``(True,)``, outside its
    domain); ``look`` names the type of its first item."""
    return Machine(
        "kept",
        states=[State("idle", initial=True), State("busy")],
        variables=[Var("d", (None, (5,)), None), Var("e", ("", "int", "bool"), "")],
        events=[Event("put", [Field("x", sample=((5,),))]), Event("look")],
        transitions=[
            Transition("idle", "put", "busy", effect=lambda s, p: {"d": p["x"]}),
            Transition("busy", "look", "busy", effect=lambda s, p: {"e": type(s.d[0]).__name__}),
        ],
    )


@pytest.mark.parametrize("first", [(1,), (True,)])
def test_the_step_memo_steps_a_snapshot_unlike_its_own_for_itself(first: tuple[int]) -> None:
    """Snapshots holding ``(1,)`` and ``(True,)`` are equal: the memo keeps the one met
    first, and the other is stepped for itself (a variable written from an unbounded field
    may hold either); and a search through `Tx.fire` finds ``look`` naming both."""
    machine = kept_then_named()
    other = (True,) if type(first[0]) is int else (1,)
    for x in (first, other):
        held = step(machine, machine.initial_snapshot(), "put", {"x": x}).snapshot
        assert remembered_step(machine, held, "look", {}).snapshot.e == type(x[0]).__name__

    def put(x: tuple[int]) -> Callable[[Tx], None]:
        def run(tx: Tx) -> None:
            tx.require(tx.get("put") == 0)
            tx.set("put", 1)
            tx.fire(("m", "k"), "put", x=x)

        return run

    def look(tx: Tx) -> None:
        tx.require(tx.get("put") == 1)
        tx.fire(("m", "k"), "look")

    system = System(
        "kept",
        components=[Component("m", kept_then_named(), ("k",))],
        actions=[
            Action("put_first", "u", put(first)),
            Action("put_other", "u", put(other)),
            Action("look", "u", look),
        ],
        globals=[Global("put", 0)],
        init=lambda tx: tx.spawn("m", "k"),
        properties=[
            always(name, f"look never names {name}", lambda v, n=name: v.snapshot("m", "k").e != n)
            for name in ("int", "bool")
        ],
    )
    report = explore(system, stop_on_violation=False)
    assert [r.verdict for r in report.results] == [VIOLATED, VIOLATED], report.notes


@pytest.mark.parametrize("first", [0.0, -0.0])
def test_the_step_memo_answers_no_payload_with_an_equal_ones_step(first: float) -> None:
    """Fired with 0.0 then -0.0 (or the reverse), on one instance each of one machine: each
    outcome is `step`'s own, whichever the memo met first."""
    machine = signed_go()
    for x in (first, -first):
        expected = step(machine, machine.initial_snapshot(), "go", {"x": x}).status
        assert Instance(machine).fire("go", x=x).status == expected
        assert expected == ("accepted" if str(x) == "0.0" else "rejected")


@pytest.mark.parametrize("order", ["0.0 first", "-0.0 first"])
def test_a_search_fires_each_payload_for_itself(order: str) -> None:
    def fire(x: float) -> Callable[[Tx], None]:
        def run(tx: Tx) -> None:
            tx.require(tx.fire(("c", "k"), "go", x=x).accepted)

        return run

    actions = [Action("plus", "u", fire(0.0)), Action("minus", "u", fire(-0.0))]
    system = System(
        "signed_payloads",
        components=[Component("c", signed_go(), ["k"])],
        actions=actions if order == "0.0 first" else actions[::-1],
        init=lambda tx: tx.spawn("c", "k"),
        properties=[
            always("idle", "never positive", lambda v: v.snapshot("c", "k").state == "idle")
        ],
    )
    for option in OPTIONS:
        report = explore(system, stop_on_violation=False, **option)
        assert (report.states, report.transitions) == (2, 1), option
        assert [r.verdict for r in report.results] == [VIOLATED], option


@pytest.mark.parametrize(
    "domain", [(1, True), (0.0, -0.0), ((1,), (True,)), ("a", 1, True), (0.0, -0.0, "b")]
)
def test_an_action_parameter_with_equal_values_that_differ_is_refused(
    domain: tuple[Hashable, ...],
) -> None:
    """The action's labels (``set(v=1)``, ``set(v=True)``) would be one label."""
    with pytest.raises(SystemDefinitionError, match=r"parameter 'v' has both .* in its domain"):
        System(
            "labels",
            components=[],
            actions=[Action("set", "u", lambda tx, v: tx.set("x", v), {"v": domain})],
            globals=[Global("x", None)],
        )


PENDING = Machine(
    "pending",
    states=[State("idle", initial=True), State("pending", hot=True)],
    events=[Event("open")],
    transitions=[Transition("idle", "open", "pending")],
)


@pytest.mark.parametrize("order", ["1 first", "True first"])
def test_monitor_instances_keyed_by_1_and_by_true_are_two_states(order: str) -> None:
    """``a`` emits ``a(k=1)``, ``b`` emits ``b(k=True)``: the same system state after either,
    and a monitor instance keyed by 1 or by True, left pending. Keyed by equality the two
    nodes were one, the one met first."""

    def emitting(name: str, key: Hashable) -> Callable[[Tx], None]:
        def run(tx: Tx) -> None:
            tx.require(tx.get("done") == 0)
            tx.set("done", 1)
            tx.emit(out(name, k=key))

        return run

    actions = [Action("a", "u", emitting("a", 1)), Action("b", "u", emitting("b", True))]
    system = System(
        "monitor_keys",
        components=[],
        actions=actions if order == "1 first" else actions[::-1],
        globals=[Global("done", 0)],
        properties=[
            monitor(
                "left", "nothing left pending", PENDING, lambda e: (e.output.get("k"), "open", {})
            )
        ],
    )
    for option in OPTIONS:
        report = explore(system, stop_on_violation=False, **option)
        assert (report.states, report.transitions) == (3, 2), option
        assert [r.verdict for r in report.results] == [VIOLATED], option
        assert report.notes[0].startswith("memos off: the values frozenset("), option


@pytest.mark.parametrize(
    "domain",
    [
        lambda: (x for x in (0, 1, 2)),
        lambda: map(int, "012"),
        lambda: range(3),
        lambda: {0: "a", 1: "b", 2: "c"}.keys(),
        lambda: ([0], [1], [2]),  # (unhashable: searched, never looked up by value)
    ],
    ids=["generator", "map", "range", "keys", "lists"],
)
def test_an_action_parameter_of_any_finite_iterable_gives_a_label_each(
    domain: Callable[[], Any],
) -> None:
    """The check reads the labels made, not the domain: a generator is read once."""

    def count(tx: Tx, v: Any) -> None:
        tx.require(tx.get("n") == 0)
        tx.set("n", 1 + len(str(v)))

    system = System(
        "domains",
        components=[],
        actions=[Action("count", "u", count, {"v": domain()})],
        globals=[Global("n", 0)],
    )
    assert len(system.labels()) == 3
    assert explore(system).states == 2
