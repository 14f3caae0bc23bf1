"""Partial-order reduction keeps every verdict of the full search.

Differential: on random systems (the shared generator, and one of several
actors with private and shared globals, where there is something to
reduce), on systems built to break a careless reduction, and on every
bundled target and variant (against the pinned figures of the full search):
the same verdict for every property, the same counterexample lengths, the
same transitions never taken, and never more states. Each system built to
break the reduction is also shown to break it once its safeguard is taken
out, so the test has teeth.
"""

from __future__ import annotations

from collections.abc import Callable, Hashable, Mapping
from dataclasses import dataclass
from typing import Any

import pytest
from golden_targets import GOLDEN, systems
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from system_strategies import SystemSpec, build_system
from system_strategies import systems as shared_systems

from statecore import Event, Machine, State, Transition, out
from statecore.check import reduction
from statecore.check.explore import explore
from statecore.check.results import Report
from statecore.properties import Property, always, eventually, monitor, sometimes
from statecore.system import Action, Emitted, Global, StateView, System, Tx

# -- comparing a reduced search with the full one ------------------------------------


def verdicts(report: Report) -> dict[str, tuple[str, int | None]]:
    """Each property's verdict, with the length of its counterexample."""
    return {
        r.property.id: (
            r.verdict,
            len(r.trace.steps) if r.verdict == "violated" and r.trace else None,
        )
        for r in report.results
    }


def never_taken(report: Report) -> set[tuple[str, tuple[str, ...]]]:
    return {(c.component, c.never) for c in report.coverage}


def assert_same(system: System, **options: Any) -> tuple[Report, Report]:
    full = explore(system, symmetry=False, stop_on_violation=False, **options)
    reduced = explore(system, symmetry=False, stop_on_violation=False, por=True, **options)
    assert verdicts(reduced) == verdicts(full)
    assert reduced.complete == full.complete
    if full.complete:
        assert reduced.states <= full.states
        assert never_taken(reduced) == never_taken(full)
    for result in reduced.results:
        if result.trace is not None:  # a real path of the model, whatever it shows
            assert result.trace.steps[0].state in system.init_states()
    first = explore(system, symmetry=False, **options)
    assert verdicts(explore(system, symmetry=False, por=True, **options)) == verdicts(first)
    return full, reduced


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(shared_systems(naming=True))
def test_same_verdicts_on_random_systems(spec: SystemSpec) -> None:
    assert_same(build_system(spec))


# -- several actors, private and shared globals --------------------------------------

ORDER = Machine(
    "order",
    states=[State("idle", initial=True), State("begun", hot=True), State("over")],
    events=[Event("begin"), Event("end")],
    transitions=[Transition("idle", "begin", "begun"), Transition("begun", "end", "over")],
)


def order_route(emitted: Emitted) -> tuple[Hashable, str, Mapping[str, Any]] | None:
    name = emitted.output.name
    return ("system", name, {}) if name in ("begin", "end") else None


@dataclass(frozen=True)
class Op:
    """One action: ``kind`` on global ``target``, guarded by ``guard == value``."""

    actor: int
    kind: str  # "inc" (mod bound + 1), "set" (to value), "copy" (target := guard's value)
    target: str
    guard: str
    value: int
    internal: bool
    emit: str  # "" or an output name


@dataclass(frozen=True)
class ActorsSpec:
    actors: int
    bound: int
    ops: tuple[Op, ...]
    props: tuple[tuple[str, str, str, int], ...]  # (kind, global, op, threshold)
    watched: bool


def globals_of(spec: ActorsSpec) -> list[str]:
    return ["s0", "s1", *(f"p{a}" for a in range(spec.actors))]


def build_actors(spec: ActorsSpec) -> System:
    bound = spec.bound

    def action(i: int, op: Op) -> Action:
        def run(tx: Tx) -> None:
            tx.require(tx.get(op.guard) == op.value)
            if op.kind == "inc":
                tx.set(op.target, (tx.get(op.target) + 1) % (bound + 1))
            elif op.kind == "set":
                tx.require(tx.get(op.target) != op.value)
                tx.set(op.target, op.value)
            else:
                tx.set(op.target, tx.get(op.guard))
            if op.emit:
                tx.emit(out(op.emit))

        return Action(f"a{i}", f"actor{op.actor}", run, internal=op.internal)

    def predicate(name: str, op: str, threshold: int) -> Callable[[StateView[Any]], bool]:
        if op == "<=":
            return lambda view: bool(view.get(name) <= threshold)
        return lambda view: bool(view.get(name) >= threshold)

    props: list[Property] = []
    for k, (kind, name, op, threshold) in enumerate(spec.props):
        pred = predicate(name, op, threshold)
        build = {"always": always, "sometimes": sometimes, "eventually": eventually}[kind]
        props.append(build(f"p{k}", f"{kind} {name} {op} {threshold}", pred))
    if spec.watched:
        props.append(monitor("order", "begin before end", ORDER, order_route))
    return System(
        "actors",
        components=[],
        globals=[Global(name, 0) for name in globals_of(spec)],
        actions=[action(i, op) for i, op in enumerate(spec.ops)],
        properties=props,
    )


@st.composite
def actor_systems(draw: st.DrawFn) -> ActorsSpec:
    actors = draw(st.integers(2, 3))
    bound = draw(st.integers(1, 2))
    names = ["s0", "s1", *(f"p{a}" for a in range(actors))]
    ops: list[Op] = []
    for a in range(actors):
        mine = [f"p{a}", f"p{a}", f"p{a}", "s0", "s1"]  # mostly private
        for _ in range(draw(st.integers(1, 3))):
            ops.append(
                Op(
                    a,
                    draw(st.sampled_from(("inc", "inc", "set", "copy"))),
                    draw(st.sampled_from(mine)),
                    draw(st.sampled_from([*mine, *names])),
                    draw(st.integers(0, bound)),
                    draw(st.booleans()),
                    draw(st.sampled_from(("", "", "", "begin", "end"))),
                )
            )
    props = tuple(
        (
            draw(st.sampled_from(("always", "always", "sometimes", "eventually"))),
            draw(st.sampled_from(names)),
            draw(st.sampled_from(("<=", ">="))),
            draw(st.integers(0, bound)),
        )
        for _ in range(draw(st.integers(0, 3)))
    )
    return ActorsSpec(actors, bound, tuple(ops), props, draw(st.booleans()))


@settings(max_examples=120, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(actor_systems())
def test_same_verdicts_on_random_actor_systems(spec: ActorsSpec) -> None:
    assert_same(build_actors(spec))


def test_a_random_actor_system_is_reduced_on_the_whole() -> None:
    """The generator gives the reduction something to do: states saved in total."""
    full_states = reduced_states = 0

    @settings(max_examples=40, deadline=None, database=None, derandomize=True)
    @given(actor_systems())
    def tally(spec: ActorsSpec) -> None:
        nonlocal full_states, reduced_states
        full, reduced = assert_same(build_actors(spec))
        full_states += full.states
        reduced_states += reduced.states

    tally()
    assert reduced_states < full_states


def test_independent_counters_are_explored_in_one_order() -> None:
    """Three actors counting privately, nothing watching: one interleaving, not all."""
    spec = ActorsSpec(
        3,
        2,
        tuple(Op(a, "inc", f"p{a}", f"p{a}", v, True, "") for a in range(3) for v in (0, 1)),
        (("eventually", "p0", ">=", 0),),
        False,
    )
    full, reduced = assert_same(build_actors(spec))
    assert full.states == 3**3
    assert reduced.states < full.states / 2
    assert any("partial-order reduction on" in note for note in reduced.notes)


# -- systems built to break a careless reduction --------------------------------------


def flags(*names: str) -> list[Global]:
    return [Global(name, 0) for name in names]


def setter(name: str, value: int, guard: str = "", when: int = 0) -> Callable[[Tx], None]:
    def run(tx: Tx) -> None:
        if guard:
            tx.require(tx.get(guard) == when)
        tx.require(tx.get(name) != value)
        tx.set(name, value)

    return run


def toggler(name: str) -> Callable[[Tx], None]:
    def run(tx: Tx) -> None:
        tx.set(name, 1 - tx.get(name))

    return run


def emitter(name: str, output: str) -> Callable[[Tx], None]:
    def run(tx: Tx) -> None:
        tx.require(tx.get(name) == 0)
        tx.set(name, 1)
        tx.emit(out(output))

    return run


def invisible_enables_visible() -> System:
    """`prepare` touches only a private flag, but enables `fire`, which breaks the invariant."""
    return System(
        "enables",
        components=[],
        globals=flags("ready", "fired", "other"),
        actions=[
            Action("prepare", "a", setter("ready", 1)),
            Action("fire", "a", setter("fired", 1, guard="ready", when=1)),
            Action("spin", "b", toggler("other")),
        ],
        properties=[always("never_fired", "never fired", lambda v: v.get("fired") == 0)],
    )


def ignored_forever() -> System:
    """`spin` cycles on a private flag; `write`, of another actor, breaks the invariant."""
    return System(
        "ignoring",
        components=[],
        globals=flags("other", "written"),
        actions=[
            Action("spin", "a", toggler("other")),
            Action("write", "b", setter("written", 1)),
        ],
        properties=[always("unwritten", "never written", lambda v: v.get("written") == 0)],
    )


def watched_outputs() -> System:
    """Two actors each emit once, on private flags; the monitor wants `begin` first."""
    return System(
        "watched",
        components=[],
        globals=flags("x", "y"),
        actions=[
            Action("start", "a", emitter("x", "begin"), internal=True),
            Action("stop", "b", emitter("y", "end"), internal=True),
        ],
        properties=[monitor("order", "begin before end", ORDER, order_route)],
    )


def intermediate_state() -> System:
    """`left` then `right` passes a state the invariant forbids; the other order does not."""
    return System(
        "intermediate",
        components=[],
        globals=flags("x", "y"),
        actions=[
            Action("right", "b", setter("y", 1)),
            Action("left", "a", setter("x", 1)),
        ],
        properties=[
            always("not_left_only", "never x alone", lambda v: not (v.get("x") and not v.get("y")))
        ],
    )


def quiescent_only_one_way() -> System:
    """A quiescent state where `done` is false is reached by `tick` alone; `go` (external)
    first enables `work`, which sets it."""
    return System(
        "quiescent",
        components=[],
        globals=flags("a", "c", "done"),
        actions=[
            Action("go", "user", setter("a", 1)),
            Action("tick", "clock", setter("c", 1), internal=True),
            Action("work", "worker", setter("done", 1, guard="a", when=1), internal=True),
        ],
        properties=[eventually("done", "work is done at rest", lambda v: v.get("done") == 1)],
    )


def seen_at_rest() -> System:
    """No internal action: every state is at rest, and `eventually` judged in each;
    `noise` (first) writes what it reads, so `go` first must be tried too."""
    return System(
        "at_rest",
        components=[],
        globals=flags("flag", "n"),
        actions=[
            Action("noise", "user", setter("n", 1)),
            Action("go", "user", setter("flag", 1)),
        ],
        properties=[
            eventually("calm", "flag unset, or noise", lambda v: v.get("flag") == 0 or v.get("n"))
        ],
    )


Breaker = Callable[[pytest.MonkeyPatch], None]


def no_proviso(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(reduction.Reducer, "_proviso", lambda *args: True)


def no_monitor_visibility(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(reduction.Reducer, "_watched", lambda *args: False)


def no_property_visibility(monkeypatch: pytest.MonkeyPatch) -> None:
    original = reduction.Reducer.ample

    def ample(self: reduction.Reducer, *args: Any) -> Any:
        self.settled = len(args[-1])  # never recomputed: nothing is visible
        self.visible = self.resting = 0
        return original(self, *args)

    monkeypatch.setattr(reduction.Reducer, "ample", ample)


def no_rest_condition(monkeypatch: pytest.MonkeyPatch) -> None:
    original = reduction.Reducer.__init__

    def init(self: reduction.Reducer, *args: Any) -> None:
        original(self, *args)
        self.inner = 0

    monkeypatch.setattr(reduction.Reducer, "__init__", init)


BREAKERS: list[tuple[Callable[[], System], Breaker]] = [
    (ignored_forever, no_proviso),
    (watched_outputs, no_monitor_visibility),
    (intermediate_state, no_property_visibility),
    (quiescent_only_one_way, no_rest_condition),
    (seen_at_rest, no_property_visibility),
]


@pytest.mark.parametrize("build", [invisible_enables_visible] + [b for b, _ in BREAKERS])
def test_same_verdicts_on_systems_built_to_break_it(build: Callable[[], System]) -> None:
    full, _ = assert_same(build())
    assert any(r.verdict == "violated" for r in full.results)


@pytest.mark.parametrize(
    ("build", "breaker"), BREAKERS, ids=[f"{b.__name__}-{k.__name__}" for b, k in BREAKERS]
)
def test_each_safeguard_is_needed(
    build: Callable[[], System], breaker: Breaker, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Without its safeguard, the reduction misses the violation the system was built for."""
    system = build()
    full = explore(system, symmetry=False, stop_on_violation=False)
    breaker(monkeypatch)
    broken = explore(system, symmetry=False, stop_on_violation=False, por=True)
    assert verdicts(broken) != verdicts(full)


def late_footprint() -> System:
    """`probe` reads only `gate` while it is closed; once open it reads `prepared` too, and
    breaks the invariant if `prepare` has not run: a footprint met only deep in the search."""

    def probe(tx: Tx) -> None:
        tx.require(tx.get("gate") == 1 and tx.get("broken") == 0)
        tx.require(tx.get("prepared") == 0)
        tx.set("broken", 1)

    return System(
        "late",
        components=[],
        globals=flags("gate", "prepared", "broken"),
        actions=[
            Action("prepare", "a", setter("prepared", 1)),
            Action("open", "c", setter("gate", 1)),
            Action("probe", "b", probe),
        ],
        properties=[always("unbroken", "never broken", lambda v: v.get("broken") == 0)],
    )


@pytest.mark.parametrize(
    "build", [invisible_enables_visible, late_footprint] + [b for b, _ in BREAKERS]
)
def test_same_verdicts_with_fingerprints(build: Callable[[], System]) -> None:
    """The reduction works on the compact visited set as on full states."""
    system = build()
    full = explore(system, symmetry=False, stop_on_violation=False)
    reduced = explore(system, symmetry=False, stop_on_violation=False, por=True, fingerprints=64)
    assert verdicts(reduced) == verdicts(full) and reduced.states <= full.states


def test_a_search_that_meets_new_footprints_runs_again(monkeypatch: pytest.MonkeyPatch) -> None:
    system = late_footprint()
    full, reduced = assert_same(system)
    assert full.result("unbroken").verdict == "violated"
    searches = int(reduced.notes[0].split("learned in ")[1].split()[0])
    assert searches >= 3  # empty footprints, those of the initial state, then probe's late read
    # Had the second search not started again on meeting probe's late read, it
    # would have kept its reduction of the initial state to `prepare` alone.
    original = reduction.Reducer._check_growth

    def learn_once(self: reduction.Reducer, index: int) -> None:
        if self.known.restarts == 0:
            original(self, index)

    monkeypatch.setattr(reduction.Reducer, "_check_growth", learn_once)
    broken = explore(system, symmetry=False, stop_on_violation=False, por=True)
    assert broken.result("unbroken").verdict != "violated"


def test_a_violation_keeps_its_shortest_counterexample() -> None:
    """The reduced search may find a longer path; the report gives the shortest."""
    system = System(
        "late_write",
        components=[],
        globals=flags("x", "y", "z"),
        actions=[
            Action("step_x", "a", setter("x", 1)),
            Action("step_y", "a", setter("y", 1, guard="x", when=1)),
            Action("write", "b", setter("z", 1)),
        ],
        properties=[always("z_clear", "z stays 0", lambda v: v.get("z") == 0)],
    )
    _, reduced = assert_same(system)
    assert len(reduced.result("z_clear").trace.steps) == 2  # type: ignore[union-attr]


def test_por_leaves_symmetry_off_and_says_so() -> None:
    system = systems()["request_state_two_ids"]()
    report = explore(system, por=True, stop_on_violation=False, max_states=200)
    assert not report.symmetry
    assert any("not combined with partial-order reduction" in n for n in report.notes)


# -- every bundled target and variant ----------------------------------------------

GOLDEN_FIGURES: dict[str, Any] = __import__("json").loads(GOLDEN.read_text(encoding="utf-8"))
BIG = 20_000  # states: targets above this many are marked slow (-m 'not slow' skips them)


@pytest.mark.parametrize(
    "name",
    [
        pytest.param(name, marks=pytest.mark.slow)
        if GOLDEN_FIGURES[name]["plain"]["states"] > BIG
        else name
        for name in sorted(systems())
    ],
)
def test_same_verdicts_on_every_bundled_target(name: str) -> None:
    plain = GOLDEN_FIGURES[name]["plain"]
    report = explore(systems()[name](), symmetry=False, stop_on_violation=False, por=True)
    assert report.complete
    assert report.states <= plain["states"]
    expected = {
        pid: (v["verdict"], len(v["trace"]) + 1 if v["verdict"] == "violated" else None)
        for pid, v in plain["verdicts"].items()
    }
    assert verdicts(report) == expected
