"""The explorer against a brute-force oracle, symmetry reduction, and known answers.

The oracle enumerates every action sequence level by level with nothing but
`System.successors` (the states reachable in exactly d steps are the
successors of those reachable in d - 1), until a level adds nothing new, and
judges each property straight from its definition:

* an ``always`` is violated iff some reachable state (where ``when`` holds)
  falsifies it, with a shortest trace as long as the first level holding such
  a state; vacuous iff ``when`` never holds;
* an ``eventually`` is violated iff some quiescent state (no internal
  successor that changes the state or emits) falsifies it; vacuous iff there
  is no quiescent state;
* a ``sometimes`` holds iff some state satisfies it, vacuous otherwise;
* a monitor is violated iff some path emits an output it refuses, or rests in
  a hot monitor state at a quiescent state.

The oracle carries its own monitor stepping (on `statecore.step`), so the
explorer's monitor bookkeeping is checked, not reused.
"""

from __future__ import annotations

from collections.abc import Hashable, Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from system_strategies import SystemSpec, build_system, systems

from statecore import ACCEPTED, REJECTED, Event, Machine, State, Transition, out, step
from statecore.check.explore import (
    HOLDS,
    UNKNOWN,
    VACUOUS,
    VIOLATED,
    PropertyResult,
    Report,
    explore,
)
from statecore.check.reachable import reachable
from statecore.check.symmetry import Canonicalizer, canonical, rename_state, renamings
from statecore.errors import TransitionError
from statecore.properties import Property, always, eventually, monitor, sometimes
from statecore.system import (
    Action,
    ActionLabel,
    Component,
    Emitted,
    Global,
    Keys,
    StateView,
    System,
    SystemState,
    Tx,
)
from statecore.traces.trace import Trace

# -- the oracle -------------------------------------------------------------------

DEAD = "dead"  # a monitor that refused an output: it has said all it will say
MonState = Any  # frozenset of (key, snapshot), or DEAD
OracleNode = tuple[SystemState, tuple[MonState, ...]]


def monitor_feed(prop: Property, state: MonState, outputs: Iterable[Emitted]) -> MonState:
    """Feed `outputs` to monitor `prop`: the new monitor state, or DEAD on a refusal."""
    assert prop.machine is not None and prop.route is not None
    if state == DEAD:
        return DEAD
    current = dict(state)
    for emitted in outputs:
        routed = prop.route(emitted)
        if routed is None:
            continue
        key, event, payload = routed
        snap = current.get(key, prop.machine.initial_snapshot())
        try:
            outcome = step(prop.machine, snap, event, payload)
        except TransitionError:
            return DEAD
        if outcome.status == REJECTED:
            return DEAD
        if outcome.status == ACCEPTED:
            current[key] = outcome.snapshot
    return frozenset(current.items())


def monitor_hot(prop: Property, state: MonState) -> bool:
    assert prop.machine is not None
    return state != DEAD and any(s.state in prop.machine.hot_states for _, s in state)


@dataclass
class Oracle:
    """What the brute-force enumeration found."""

    depth: dict[SystemState, int] = field(default_factory=dict)  # first level of each state
    quiescent: set[SystemState] = field(default_factory=set)
    monitor_length: dict[str, int] = field(default_factory=dict)  # shortest violation
    nodes: int = 0

    def expected(self, system: System, prop: Property) -> tuple[str, int | None]:
        """The verdict `prop` must get, and the length of its trace (if it has one)."""
        view = system.view
        if prop.kind == "monitor":
            if prop.id in self.monitor_length:
                return VIOLATED, self.monitor_length[prop.id]
            return (HOLDS if self.quiescent else VACUOUS), None
        assert prop.predicate is not None
        pred = prop.predicate
        if prop.kind == "always":
            when = prop.when
            scope = [s for s in self.depth if when is None or when(view(s))]
            bad = [self.depth[s] for s in scope if not pred(view(s))]
            if bad:
                return VIOLATED, min(bad)
            return (VACUOUS if when is not None and not scope else HOLDS), None
        if prop.kind == "eventually":
            bad = [self.depth[s] for s in self.quiescent if not pred(view(s))]
            if bad:
                return VIOLATED, min(bad)
            return (HOLDS if self.quiescent else VACUOUS), None
        good = [self.depth[s] for s in self.depth if pred(view(s))]
        return (HOLDS, min(good)) if good else (VACUOUS, None)


def brute_force(system: System, limit: int = 200_000) -> Oracle:
    """Enumerate all action sequences level by level until no level adds a node."""
    monitors = [p for p in system.properties if p.kind == "monitor"]
    oracle = Oracle()
    empty: tuple[MonState, ...] = tuple(frozenset() for _ in monitors)
    level: set[OracleNode] = {(s, empty) for s in system.init_states()}
    seen: set[OracleNode] = set(level)
    succ_cache: dict[SystemState, list[Any]] = {}
    d = 0
    while level:
        nxt: set[OracleNode] = set()
        for state, mons in level:
            oracle.depth.setdefault(state, d)
            steps = succ_cache.get(state)
            if steps is None:
                steps = succ_cache[state] = system.successors(state)
            if not any(progress(state, s) for s in steps):
                oracle.quiescent.add(state)
                for prop, mon in zip(monitors, mons):
                    if monitor_hot(prop, mon):
                        best = oracle.monitor_length.get(prop.id, d)
                        oracle.monitor_length[prop.id] = min(best, d)
            for s in steps:
                new_mons = tuple(monitor_feed(p, m, s.outputs) for p, m in zip(monitors, mons))
                for prop, old, new in zip(monitors, mons, new_mons):
                    if new == DEAD and old != DEAD:
                        best = oracle.monitor_length.get(prop.id, d + 1)
                        oracle.monitor_length[prop.id] = min(best, d + 1)
                node = (s.state, new_mons)
                if node not in seen:
                    seen.add(node)
                    nxt.add(node)
        assert len(seen) <= limit, "the random system is too large for the oracle"
        level = nxt
        d += 1
    oracle.nodes = len(seen)
    return oracle


def literal_prefix(
    system: System, budget: int = 1500, longest: int = 12
) -> tuple[int, dict[SystemState, int]]:
    """Every action sequence, literally, up to the deepest length D <= `longest`
    within `budget` sequences: ``(D, first length of each state reached in at
    most D steps)``."""
    cache: dict[SystemState, list[SystemState]] = {}
    sequences: list[SystemState] = list(system.init_states())
    first = {s: 0 for s in sequences}
    length = 0
    while True:
        extended: list[SystemState] = []
        for state in sequences:
            if state not in cache:
                cache[state] = [s.state for s in system.successors(state)]
            extended.extend(cache[state])
            if len(extended) > budget:
                return length, first
        if not extended or length == longest:
            return length, first
        length += 1
        for state in extended:
            first.setdefault(state, length)
        sequences = extended


# -- checking a report against the oracle -------------------------------------------


def replay(system: System, trace: Trace) -> None:
    """Every step of `trace`, applied with `System.next_step`, gives the recorded state."""
    (init,) = system.init_states()
    assert trace.steps[0].action is None
    assert trace.steps[0].state == init
    state = init
    for item in trace.steps[1:]:
        assert item.action is not None
        done = system.next_step(state, item.action)
        assert done.state == item.state, f"step {item.action} does not replay"
        assert done.outputs == item.outputs
        assert done.actor == item.actor
        state = done.state


def progress(state: SystemState, step: Any) -> bool:
    """Whether `step` is internal and does something: a stutter is no progress."""
    return bool(step.internal and (step.outputs or step.state != state))


def quiescent(system: System, state: SystemState) -> bool:
    return not any(progress(state, s) for s in system.successors(state))


def check_trace_shows(system: System, result: PropertyResult) -> None:
    """The trace of `result` replays and its last state shows what the verdict says."""
    prop, trace = result.property, result.trace
    assert trace is not None
    replay(system, trace)
    last = system.view(trace.steps[-1].state)
    if prop.kind == "always":
        assert prop.predicate is not None
        assert prop.when is None or prop.when(last)
        assert not prop.predicate(last)
    elif prop.kind == "eventually":
        assert prop.predicate is not None
        assert quiescent(system, last.state)
        assert not prop.predicate(last)
    elif prop.kind == "sometimes":
        assert prop.predicate is not None
        assert prop.predicate(last)
    else:
        mon: MonState = frozenset()
        for index, item in enumerate(trace.steps[1:], start=1):
            before, mon = mon, monitor_feed(prop, mon, item.outputs)
            assert before != DEAD
            if mon == DEAD:
                assert index == len(trace), "the refusal must end the trace"
        assert mon == DEAD or (quiescent(system, last.state) and monitor_hot(prop, mon))


def check_report(system: System, oracle: Oracle, report: Report) -> dict[str, tuple[str, int]]:
    """Verdicts and trace lengths of a complete `report` equal the oracle's."""
    assert report.complete
    summary: dict[str, tuple[str, int]] = {}
    for result in report.results:
        verdict, length = oracle.expected(system, result.property)
        assert result.verdict == verdict, (result.property.id, result.detail)
        if length is None:
            assert result.trace is None
        else:
            assert result.trace is not None
            assert len(result.trace) == length, result.property.id
            check_trace_shows(system, result)
        summary[result.property.id] = (result.verdict, -1 if length is None else length)
    return summary


def orbits(system: System, states: Iterable[Hashable]) -> set[frozenset[SystemState]]:
    group = renamings(system)
    return {frozenset(rename_state(system, s, r) for r in group) for s in states}


# -- the differential test -----------------------------------------------------------


@settings(
    max_examples=1000,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)
@given(systems())
def test_explorer_matches_brute_force(spec: SystemSpec) -> None:
    system = build_system(spec)
    oracle = brute_force(system)

    # The oracle itself: literal sequences agree with it as far as they go.
    horizon, literal = literal_prefix(system)
    assert literal == {s: d for s, d in oracle.depth.items() if d <= horizon}

    # Exactly the same reachable states.
    full = reachable(system)
    assert full == set(oracle.depth)

    # Every property judged as the oracle judges it, with shortest traces.
    report = explore(system, symmetry=False, stop_on_violation=False)
    if any(p.kind == "monitor" for p in system.properties):
        # Nodes carry monitor states too: at least as many, at least as deep.
        assert report.states >= len(oracle.depth)
        assert report.depth >= max(oracle.depth.values())
    else:
        assert report.states == len(oracle.depth)
        assert report.depth == max(oracle.depth.values())
    plain = check_report(system, oracle, report)

    # Symmetry reduction: same verdicts and lengths, one state per orbit at most.
    reduced_report = explore(system, symmetry=True, stop_on_violation=False)
    assert check_report(system, oracle, reduced_report) == plain
    reduced = reachable(system, symmetry=True)
    assert reduced <= full
    assert orbits(system, reduced) == orbits(system, full)
    assert len(orbits(system, full)) <= len(reduced) <= len(full)
    assert reduced_report.states <= report.states

    # Stopping at the first violation: what is reported is right, the rest unknown.
    first = explore(system, symmetry=True)
    violated = {k for k, (v, _) in plain.items() if v == VIOLATED}
    found = {r.property.id for r in first.results if r.verdict == VIOLATED}
    assert bool(found) == bool(violated)
    assert found <= violated
    for result in first.results:
        if result.verdict == VIOLATED:
            assert result.trace is not None
            assert len(result.trace) == plain[result.property.id][1]
        elif not first.complete:
            assert result.verdict in (UNKNOWN, plain[result.property.id][0])
        else:
            assert result.verdict == plain[result.property.id][0]


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(systems(symmetric_pair=True))
def test_symmetry_keeps_verdicts_on_symmetric_systems(spec: SystemSpec) -> None:
    system = build_system(spec)
    full = explore(system, symmetry=False, stop_on_violation=False)
    reduced = explore(system, symmetry=True, stop_on_violation=False)
    assert reduced.states <= full.states
    assert len(reachable(system, symmetry=True)) <= len(reachable(system))
    for a, b in zip(full.results, reduced.results):
        assert a.property.id == b.property.id
        assert a.verdict == b.verdict
        assert (a.trace is None) == (b.trace is None)
        if a.trace is not None and b.trace is not None:
            assert len(a.trace) == len(b.trace)
            replay(system, b.trace)


# -- known answers --------------------------------------------------------------------

EXT = Keys("ext", 2)

GEN = Machine(
    "gen",
    states=[
        State("open", initial=True),
        State("queued", hot=True),
        State("done", final=True),
    ],
    events=[Event("queue_terminal"), Event("sent"), Event("sent_dup"), Event("abandon")],
    transitions=[
        Transition("open", "queue_terminal", "queued", emit=[out("queued")], name="queue"),
        Transition("queued", "sent", "done", emit=[out("put", finished=True)], name="send"),
        Transition("queued", "sent_dup", emit=[out("put", finished=True)], name="send_dup"),
        Transition("open", "abandon", "done", name="abandon"),
    ],
)


def route_for(*names: str) -> Any:
    """Route the outputs called `names` of each instance to that generation's monitor."""

    def route(emitted: Emitted) -> tuple[Hashable, str, dict[str, Any]] | None:
        if emitted.source is not None and emitted.output.name in names:
            return emitted.source, emitted.output.name, {}
        return None

    return route


put_route = route_for("put")
lifecycle_route = route_for("queued", "put")


ONE_TERMINAL = Machine(
    "one_terminal",
    states=[State("open", initial=True), State("closed", final=True)],
    events=[Event("put")],
    transitions=[Transition("open", "put", "closed")],
)

DELIVERED = Machine(
    "delivered",
    states=[State("open", initial=True), State("pending", hot=True), State("closed", final=True)],
    events=[Event("queued"), Event("put")],
    transitions=[Transition("open", "queued", "pending"), Transition("pending", "put", "closed")],
)


def live_in(view: StateView, state: str) -> int:
    return sum(1 for _, snap in view.live("gen") if snap.state == state)


def lifecycle(
    properties: Sequence[Property] = (),
    *,
    drop: bool = False,
    dup: bool = False,
    keys: Keys = EXT,
    generations: int = 2,
) -> System:
    """A request lifecycle: new request, queue its terminal, the save thread sends
    it, cleanup. `drop` adds a buggy save-thread step that loses the queued
    terminal; `dup` one that sends it without dequeuing it."""

    def new_request(tx: Tx, ext: Hashable) -> None:
        tx.require(not tx.live(("gen", ext)))
        tx.spawn("gen", ext)

    def save_terminal(tx: Tx, ext: Hashable) -> None:
        handle = tx.handle("gen", ext)
        tx.require(handle is not None)
        assert handle is not None
        tx.require(tx.fire(handle, "queue_terminal").accepted)
        tx.set("queue", (*tx.get("queue"), handle))

    def drain(tx: Tx) -> None:
        queue = tx.get("queue")
        tx.require(queue)
        tx.set("queue", queue[1:])
        tx.fire(queue[0], "sent")

    def drop_head(tx: Tx) -> None:
        queue = tx.get("queue")
        tx.require(queue)
        tx.set("queue", queue[1:])

    def send_twice(tx: Tx) -> None:
        queue = tx.get("queue")
        tx.require(queue)
        tx.require(tx.fire(queue[0], "sent_dup").accepted)

    def cleanup(tx: Tx, ext: Hashable) -> None:
        snap = tx.snapshot(("gen", ext))
        tx.require(snap is not None and snap.state == "done")
        tx.retire(("gen", ext))

    actions = [
        Action("new_request", "scheduler", new_request, {"ext": keys}),
        Action("save_terminal", "scheduler", save_terminal, {"ext": keys}),
        Action("drain", "save_thread", drain, internal=True),
        Action("cleanup", "scheduler", cleanup, {"ext": keys}),
    ]
    if drop:
        actions.append(Action("drop", "save_thread", drop_head, internal=True))
    if dup:
        actions.append(Action("send_twice", "save_thread", send_twice, internal=True))
    return System(
        "lifecycle",
        components=[Component("gen", GEN, keys, max_generations=generations)],
        globals=[Global("queue", ())],
        actions=actions,
        properties=properties,
    )


def chain_system(k: int, properties: Sequence[Property]) -> System:
    """A counter per id that steps c0 -> c1 -> ... -> c5, plus noise (reset, the
    other id). The initial state already holds an instance of ``ext0``."""
    states = [State(f"c{i}", initial=i == 0) for i in range(6)]
    counter = Machine(
        "counter",
        states=states,
        events=[Event("next")],
        transitions=[Transition(f"c{i}", "next", f"c{i + 1}") for i in range(5)],
    )

    def start(tx: Tx) -> None:
        tx.spawn("ctr", EXT.values[0])

    def new(tx: Tx, ext: Hashable) -> None:
        tx.require(not tx.live(("ctr", ext)))
        tx.spawn("ctr", ext)

    def advance(tx: Tx, ext: Hashable) -> None:
        tx.require(tx.fire(("ctr", ext), "next").accepted)

    def reset(tx: Tx, ext: Hashable) -> None:
        tx.require(tx.retire(("ctr", ext)))

    return System(
        "chain",
        components=[Component("ctr", counter, EXT, max_generations=2)],
        actions=[
            Action("new", "scheduler", new, {"ext": EXT}),
            Action("advance", "worker", advance, {"ext": EXT}),
            Action("reset", "scheduler", reset, {"ext": EXT}),
        ],
        init=start,
        properties=properties,
    )


@pytest.mark.parametrize("k", [1, 2, 3, 5])
@pytest.mark.parametrize("symmetry", [True, False])
def test_planted_safety_violation_has_a_trace_of_exactly_k_steps(k: int, symmetry: bool) -> None:
    target = f"c{k}"
    prop = always(
        "below",
        f"no counter reaches {target}",
        lambda v: all(snap.state != target for _, snap in v.live("ctr")),
    )
    system = chain_system(k, [prop])
    report = explore(system, symmetry=symmetry)
    result = report.result("below")
    assert result.verdict == VIOLATED
    assert result.trace is not None
    assert len(result.trace) == k
    replay(system, result.trace)
    assert [a.name for a in result.trace.actions] == ["advance"] * k
    assert result.trace.actions[0].arg("ext") == EXT.values[0]
    assert not report.complete


def test_vacuous_always_is_reported_vacuous() -> None:
    props = [
        always(
            "vac", "guarded by a condition that never holds", lambda v: False, when=lambda v: False
        )
    ]
    report = explore(lifecycle(props))
    assert report.complete
    assert report.result("vac").verdict == VACUOUS
    assert report.result("vac").trace is None
    assert not report.ok


def test_sometimes_never_hit_is_vacuous_and_a_hit_has_a_shortest_witness() -> None:
    props = [
        sometimes(
            "third_gen",
            "a third generation",
            lambda v: any(slot.generation == 3 for _, slot in v.instances("gen")),
        ),
        sometimes(
            "reuse",
            "an id is reused",
            lambda v: any(slot.generation == 2 for _, slot in v.instances("gen")),
        ),
    ]
    system = lifecycle(props)
    report = explore(system)
    assert report.result("third_gen").verdict == VACUOUS
    reuse = report.result("reuse")
    assert reuse.verdict == HOLDS
    assert reuse.trace is not None and reuse.trace.verdict == "witness"
    # new, save, drain, cleanup, new
    assert len(reuse.trace) == 5
    replay(system, reuse.trace)


def test_eventually_without_a_quiescent_state_is_vacuous() -> None:
    def tick(tx: Tx) -> None:
        tx.set("clock", not tx.get("clock"))

    def spawn(tx: Tx, ext: Hashable) -> None:
        tx.require(not tx.live(("gen", ext)))
        tx.spawn("gen", ext)

    system = System(
        "busy",
        components=[Component("gen", GEN, EXT)],
        globals=[Global("clock", False)],
        actions=[
            Action("tick", "clock", tick, internal=True),
            Action("spawn", "scheduler", spawn, {"ext": EXT}),
        ],
        properties=[
            eventually("never_true", "an unsatisfiable goal", lambda v: False),
            monitor("hot", "every queued terminal is put", DELIVERED, lifecycle_route),
        ],
    )
    report = explore(system)
    assert report.complete
    assert report.result("never_true").verdict == VACUOUS
    assert report.result("hot").verdict == VACUOUS
    # Truncated, the same search cannot call it vacuous: it might meet one later.
    truncated = explore(system, max_states=3)
    assert not truncated.complete
    assert truncated.result("never_true").verdict == UNKNOWN
    assert truncated.result("hot").verdict == UNKNOWN


@pytest.mark.parametrize("symmetry", [True, False])
def test_liveness_violation_at_a_quiescent_state_has_a_shortest_trace(symmetry: bool) -> None:
    props = [
        eventually(
            "delivered",
            "no terminal stays queued once the save thread is idle",
            lambda v: live_in(v, "queued") == 0,
        )
    ]
    system = lifecycle(props, drop=True)
    report = explore(system, symmetry=symmetry)
    result = report.result("delivered")
    assert result.verdict == VIOLATED
    assert result.trace is not None
    assert [a.name for a in result.trace.actions] == ["new_request", "save_terminal", "drop"]
    assert "quiescent" in result.detail
    check_trace_shows(system, result)
    # Without the bug the property holds.
    assert explore(lifecycle(props), symmetry=symmetry).result("delivered").verdict == HOLDS


@pytest.mark.parametrize("symmetry", [True, False])
def test_monitor_refusing_a_second_terminal_put(symmetry: bool) -> None:
    props = [monitor("one_terminal", "one terminal put per generation", ONE_TERMINAL, put_route)]
    system = lifecycle(props, dup=True)
    report = explore(system, symmetry=symmetry)
    result = report.result("one_terminal")
    assert result.verdict == VIOLATED
    assert result.trace is not None
    assert len(result.trace) == 4  # new, save, send_twice, then send_twice or drain
    assert [a.name for a in result.trace.actions][:3] == [
        "new_request",
        "save_terminal",
        "send_twice",
    ]
    assert "not allowed" in result.detail
    last = result.trace.steps[-1]
    assert any(e.output.name == "put" for e in last.outputs)
    check_trace_shows(system, result)
    assert explore(lifecycle(props), symmetry=symmetry).result("one_terminal").verdict == HOLDS


@pytest.mark.parametrize("symmetry", [True, False])
def test_monitor_left_hot_at_quiescence(symmetry: bool) -> None:
    props = [monitor("delivered", "every queued terminal is put", DELIVERED, lifecycle_route)]
    system = lifecycle(props, drop=True)
    result = explore(system, symmetry=symmetry).result("delivered")
    assert result.verdict == VIOLATED
    assert result.trace is not None
    assert [a.name for a in result.trace.actions] == ["new_request", "save_terminal", "drop"]
    assert "hot state 'pending'" in result.detail
    check_trace_shows(system, result)
    assert explore(lifecycle(props), symmetry=symmetry).result("delivered").verdict == HOLDS


PINGER = Machine(
    "pinger",
    states=[State("idle", initial=True)],
    events=[Event("ping")],
    transitions=[Transition("idle", "ping", emit=[out("pong")])],
)
ONCE = Machine(
    "once",
    states=[State("open", initial=True), State("used", final=True)],
    events=[Event("pong")],
    transitions=[Transition("open", "pong", "used")],
)


@pytest.mark.parametrize("group", ["ext", "id", "req", "k", "sender", "x", "client", "job"])
def test_monitor_trace_on_a_state_with_its_own_symmetry(group: str) -> None:
    """After ``ping(a)`` both ids are idle, so the system state cannot tell them
    apart, but the monitor can: a trace must ping the same id twice, whichever
    id the representative happened to keep. (The key names vary the hashes,
    hence the representatives chosen.)"""
    keys = Keys(group, 2)

    def init(tx: Tx) -> None:
        for key in keys.values:
            tx.spawn("p", key)

    def ping(tx: Tx, key: Hashable) -> None:
        tx.require(tx.fire(("p", key), "ping").accepted)

    system = System(
        "pings",
        components=[Component("p", PINGER, keys)],
        actions=[Action("ping", "client", ping, {"key": keys})],
        init=init,
        properties=[monitor("once", "one pong per generation", ONCE, route_for("pong"))],
    )
    for symmetry in (True, False):
        result = explore(system, symmetry=symmetry).result("once")
        assert result.verdict == VIOLATED
        assert result.trace is not None
        first, second = result.trace.actions
        assert first == second
        check_trace_shows(system, result)


def everything() -> list[Property]:
    return [
        always("no_two_live", "at most one live request", lambda v: len(list(v.live("gen"))) < 2),
        eventually("delivered", "nothing stays queued", lambda v: live_in(v, "queued") == 0),
        monitor("hot", "every queued terminal is put", DELIVERED, lifecycle_route),
        sometimes(
            "reuse",
            "an id is reused",
            lambda v: any(slot.generation == 2 for _, slot in v.instances("gen")),
        ),
        always("vac", "vacuous", lambda v: True, when=lambda v: False),
        always("bounded", "the queue holds at most two", lambda v: len(v.get("queue")) <= 2),
    ]


def test_stop_on_violation_false_reports_every_property() -> None:
    system = lifecycle(everything(), drop=True)
    report = explore(system, stop_on_violation=False)
    assert report.complete
    verdicts = {r.property.id: r.verdict for r in report.results}
    assert verdicts == {
        "no_two_live": VIOLATED,
        "delivered": VIOLATED,
        "hot": VIOLATED,
        "reuse": HOLDS,
        "vac": VACUOUS,
        "bounded": HOLDS,
    }
    lengths = {r.property.id: len(r.trace) for r in report.results if r.trace is not None}
    assert lengths == {"no_two_live": 2, "delivered": 3, "hot": 3, "reuse": 5}

    first = explore(system)
    assert not first.complete
    verdicts = {r.property.id: r.verdict for r in first.results}
    assert verdicts["no_two_live"] == VIOLATED
    assert {v for k, v in verdicts.items() if k != "no_two_live"} <= {UNKNOWN, HOLDS}
    assert verdicts["bounded"] == UNKNOWN


def test_max_states_truncation_is_incomplete_and_undecided_verdicts_unknown() -> None:
    props = [p for p in everything() if p.id != "no_two_live"]
    system = lifecycle(props, drop=True)
    full = explore(system, stop_on_violation=False)
    report = explore(system, max_states=4, stop_on_violation=False)
    assert not report.complete
    assert report.states == 4 < full.states
    verdicts = {r.property.id: r.verdict for r in report.results}
    # Within four states nothing is violated, nothing reused, and "vacuous" or
    # "holds" would be claims about states never seen.
    assert verdicts == {
        "delivered": UNKNOWN,
        "hot": UNKNOWN,
        "reuse": UNKNOWN,
        "vac": UNKNOWN,
        "bounded": UNKNOWN,
    }
    assert not report.ok


def test_coverage_lists_a_transition_no_action_can_take() -> None:
    report = explore(lifecycle(), symmetry=False)
    (cov,) = report.coverage
    assert cov.component == "gen" and cov.machine == "gen"
    assert cov.never == ("send_dup", "abandon")
    assert set(cov.taken) == {"queue", "send"}
    assert all(n > 0 for n in cov.taken.values())
    assert cov.total == 4
    (dup,) = explore(lifecycle(dup=True)).coverage
    assert dup.never == ("abandon",)


def test_symmetry_strictly_reduces_two_interchangeable_ids() -> None:
    system = lifecycle(everything(), drop=True)
    full = explore(system, symmetry=False, stop_on_violation=False)
    reduced = explore(system, symmetry=True, stop_on_violation=False)
    assert reduced.states < full.states
    assert len(reachable(system, symmetry=True)) < len(reachable(system))
    assert [(r.verdict, r.trace and len(r.trace)) for r in full.results] == [
        (r.verdict, r.trace and len(r.trace)) for r in reduced.results
    ]
    # Non-symmetric ids are never merged.
    plain = lifecycle(keys=Keys("ext", 2, symmetric=False))
    assert len(reachable(plain, symmetry=True)) == len(reachable(plain))


def test_trace_table_shows_only_changed_variables() -> None:
    system = lifecycle(everything(), drop=True)
    trace = explore(system, stop_on_violation=False).result("delivered").trace
    assert trace is not None
    table = trace.table(system)
    lines = table.splitlines()
    assert lines[0].split() == ["step", "actor", "action", "changed"]
    rows = lines[2 : 2 + len(trace.steps)]
    names = list(system.view(trace.steps[0].state).as_dict())
    before: dict[str, Any] | None = None
    for row, item in zip(rows, trace.steps):
        now = system.view(item.state).as_dict()
        changed = [n for n in names if before is not None and before[n] != now[n]]
        if before is not None:
            assert changed, "every step of this trace changes something"
        for name in names:
            assert (f"{name}=" in row) == (name in changed), (name, row)
        before = now
    assert lines[-1].startswith("delivered violated:")
    assert "=> gen[" in table  # outputs are shown with their source


def test_reachable_matches_successor_closure_on_the_lifecycle() -> None:
    system = lifecycle(drop=True, dup=True)
    oracle = brute_force(system)
    assert reachable(system) == set(oracle.depth)
    assert explore(system, symmetry=False).states == len(oracle.depth)


def test_next_state_agrees_with_successors() -> None:
    """`next_state` agrees with `successors` on every reachable state."""
    system = lifecycle(dup=True)
    for state in reachable(system):
        assert isinstance(state, SystemState)
        for s in system.successors(state):
            assert system.next_state(state, s.action) == s.state
            assert s.action in system.actions_in(state)
    with pytest.raises(Exception, match="not enabled"):
        system.next_step(system.init_states()[0], ActionLabel("drain"))


def test_spec_strategy_builds_varied_systems() -> None:
    """A sanity check on the generator: over a few examples, spaces differ in size."""
    sizes: set[int] = set()

    @settings(max_examples=30, deadline=None, database=None)
    @given(systems())
    def collect(spec: SystemSpec) -> None:
        sizes.add(len(reachable(build_system(spec))))

    collect()
    assert len(sizes) > 3
    assert all(n >= 1 for n in sizes)


@settings(max_examples=100, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(systems(symmetric_pair=True))
def test_the_fast_canonical_form_is_a_renaming_and_reduces_like_brute_force(
    spec: SystemSpec,
) -> None:
    """Every representative lies in its state's orbit; each orbit keeps one representative
    whenever the brute-force minimum-hash form keeps one."""
    system = build_system(spec)
    fast = Canonicalizer(system)
    group = renamings(system)
    states = reachable(system)
    for state in states:
        node = (state,)
        rep = fast(node)
        assert rep[0] in {rename_state(system, state, r) for r in group}
        assert fast(rep) == rep or hash(fast(rep)) <= hash(rep)
    fast_reps = {fast((s,))[0] for s in states}
    brute_reps = {canonical(system, (s,), group)[0] for s in states}
    assert len(fast_reps) == len(brute_reps) == len(orbits(system, states))


def test_a_finished_search_leaves_nothing_alive() -> None:
    """Once its report is dropped, nothing of a search stays: no explorer, no visited set.

    A disabled attempt raises `Disabled`; an exception object kept between
    raises would keep its last traceback, whose frames hold the explorer and
    its visited set until the process ends (and freeing them there cost
    seconds at exit).
    """
    import gc

    def explorers() -> int:
        gc.collect()
        return sum(type(o).__name__ == "Explorer" for o in gc.get_objects())

    system = lifecycle(everything(), drop=True)
    before = explorers()
    report = explore(system, stop_on_violation=False)
    assert report.states > 1 and any(r.verdict == VIOLATED for r in report.results)
    del report
    assert explorers() == before
