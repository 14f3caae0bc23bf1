"""Symmetry reduction never changes a verdict, even when the model tells its ids apart.

Each concrete case below is a system where one part names a single id of a
symmetric `Keys` set. Reduction alone (the guard switched off) gives a false
verdict on it - the tests show that too, so the cases really are adversarial -
and `explore` must give the verdicts of the full search, with a note saying
symmetry was turned off and why. The differential test then does the same on
random systems against the brute-force oracle of `test_explore`.
"""

from __future__ import annotations

from collections.abc import Hashable, Mapping
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from system_strategies import SystemSpec, build_system, systems
from test_explore import brute_force, check_report, check_trace_shows

from statecore import Event, Machine, State, Transition, out
from statecore.check import explorer as explorer_module
from statecore.check.explore import HOLDS, UNKNOWN, VIOLATED, Report, explore
from statecore.check.values import ValueRegistry
from statecore.properties import always, monitor, sometimes
from statecore.system import Action, Component, Emitted, Global, Keys, ModelValue, System, Tx

WORKERS = Keys("worker", 2)
W0, W1 = WORKERS.values

WORKER = Machine(
    "worker",
    states=[State("idle", initial=True), State("busy"), State("done", final=True)],
    events=[Event("acquire"), Event("finish")],
    transitions=[
        Transition("idle", "acquire", "busy", emit=[out("acquired")]),
        Transition("busy", "finish", "done", emit=[out("finished")]),
    ],
)


def acquire_first(tx: Tx, w: Hashable) -> None:
    tx.require(tx.get("first") is None)
    tx.require(tx.fire(("worker", w), "acquire").accepted)
    tx.set("first", w)


def finish(tx: Tx, w: Hashable) -> None:
    tx.require(tx.fire(("worker", w), "finish").accepted)


def spawn_all(tx: Tx) -> None:
    for w in WORKERS.values:
        tx.spawn("worker", w)


def workers(
    *properties: Any,
    init: Any = spawn_all,
    acquire: Any = acquire_first,
    domain: Keys | tuple[Hashable, ...] = WORKERS,
    machine: Machine | None = None,
    more: tuple[Action, ...] = (),
) -> System:
    """Two interchangeable workers (of `machine`, default `WORKER`); the first to acquire
    is recorded; `more` actions besides acquire and finish."""
    return System(
        "workers",
        components=[Component("worker", machine or WORKER, WORKERS)],
        globals=[Global("first", None)],
        actions=[
            Action("acquire", "scheduler", acquire, {"w": domain}),
            Action("finish", "scheduler", finish, {"w": WORKERS}),
            *more,
        ],
        init=init,
        properties=properties,
    )


def unguarded(monkeypatch: pytest.MonkeyPatch) -> None:
    """Reduction as it was before the guard: every check passes."""

    def no_guard(*args: Any, **kwargs: Any) -> None:
        return None

    monkeypatch.setattr(explorer_module, "SymmetryGuard", no_guard)


def same_verdicts(system: System) -> Report:
    """The reduced report, after checking it against the full search."""
    full = explore(system, symmetry=False, stop_on_violation=False)
    reduced = explore(system, symmetry=True, stop_on_violation=False)
    for a, b in zip(full.results, reduced.results):
        assert (a.property.id, a.verdict) == (b.property.id, b.verdict)
        if b.trace is not None:
            assert a.trace is not None and len(a.trace) == len(b.trace)
        if b.verdict == VIOLATED:
            check_trace_shows(system, b)
    return reduced


# -- the cases of the report --------------------------------------------------------


W1_NEVER_FIRST = always(
    "w1_never_first", "worker1 never acquires first", lambda v: v.get("first") != W1
)


def test_a_property_naming_one_id_is_not_passed_by_reduction(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    system = workers(W1_NEVER_FIRST)
    report = same_verdicts(system)
    assert report.result("w1_never_first").verdict == VIOLATED
    assert not report.symmetry
    (note,) = report.notes
    assert "symmetry reduction off" in note and "w1_never_first" in note
    assert "worker0 and worker1 swapped" in note
    # Without the guard, reduction alone reports a false PASS or a bogus trace.
    unguarded(monkeypatch)
    bare = explore(system, symmetry=True, stop_on_violation=False)
    result = bare.result("w1_never_first")
    assert (
        result.verdict == HOLDS
        or result.trace is None
        or result.trace.actions
        != (
            report.result("w1_never_first").trace.actions  # type: ignore[union-attr]
        )
    )


@pytest.mark.parametrize("victim", [W0, W1])
def test_a_counterexample_always_violates_its_property(victim: ModelValue) -> None:
    never = always(
        "never_starts",
        f"{victim} never acquires",
        lambda v: v.snapshot("worker", victim).state == "idle",
    )
    report = same_verdicts(workers(never))
    result = report.result("never_starts")
    assert result.verdict == VIOLATED and result.trace is not None
    assert result.trace.actions[0].arg("w") == victim


def test_an_initial_state_that_names_one_id_turns_symmetry_off() -> None:
    only_w0 = workers(
        sometimes("w1_busy", "worker1 gets busy", lambda v: _state(v, W1) == "busy"),
        init=lambda tx: tx.spawn("worker", W0),
    )
    report = same_verdicts(only_w0)
    assert report.result("w1_busy").verdict != HOLDS
    assert "initial state" in report.notes[0]


def test_an_action_enabled_for_one_id_in_its_code_turns_symmetry_off() -> None:
    report = same_verdicts(W0_ONLY)
    assert report.result("w1_first").verdict != HOLDS
    assert "action acquire(w=worker1)" in report.notes[0] or "acquire(w=worker0)" in report.notes[0]


def test_a_parameter_domain_with_one_id_turns_symmetry_off() -> None:
    system = workers(
        sometimes("w1_first", "worker1 can acquire first", lambda v: v.get("first") == W1),
        domain=(W0,),
    )
    report = same_verdicts(system)
    assert report.result("w1_first").verdict != HOLDS
    assert "not every id" in report.notes[0]


def only_w1(emitted: Emitted) -> tuple[Hashable, str, Mapping[str, Any]] | None:
    if emitted.source is None or emitted.source.key != W1:
        return None
    return emitted.source, emitted.output.name, {}


W1_WATCH = Machine(
    "w1_watch",
    states=[State("waiting", initial=True), State("seen")],
    events=[Event("acquired"), Event("finished")],
    transitions=[
        Transition("waiting", "acquired", "seen"),
        Transition("waiting", "finished", "waiting"),
    ],
)
# Refuses `finished` from worker1: only a monitor step on worker1's outputs fails.
W1_NO_FINISH = workers(monitor("w1_no_finish", "worker1 never finishes", W1_WATCH, only_w1))


def w0_only(tx: Tx, w: Hashable) -> None:
    tx.require(w == W0)
    acquire_first(tx, w)


W0_ONLY = workers(
    sometimes("w1_first", "worker1 can acquire first", lambda v: v.get("first") == W1),
    acquire=w0_only,
)


LAMPS = Keys("lamp", 2)
LAMP = Machine(
    "lamp",
    states=[State("off", initial=True), State("on")],
    events=[Event("switch")],
    transitions=[Transition("off", "switch", "on", emit=[out("lit")])],
)
SEEN = Machine(
    "seen",
    states=[State("dark", initial=True), State("seen", final=True)],
    events=[Event("lit")],
    transitions=[Transition("dark", "lit", "seen")],
)


def plug(tx: Tx, lamp: Hashable) -> None:
    tx.require(tx.snapshot(("lamp", lamp)) is None)
    tx.spawn("lamp", lamp)


def switch(tx: Tx, lamp: Hashable) -> None:
    tx.require(tx.fire(("lamp", lamp), "switch").accepted)


def first_lamp(emitted: Emitted) -> tuple[Hashable, str, Mapping[str, Any]] | None:
    if emitted.source is None or emitted.source.key != LAMPS.values[0]:
        return None
    return "watch", "lit", {}


# A monitor stepping on the outputs of lamp0 only: the guard meets lamp0's or lamp1's
# output first, as the hash decides which of the two successors stands for both.
FIRST_LAMP_WATCHED = System(
    "lamps",
    components=[Component("lamp", LAMP, LAMPS)],
    actions=[
        Action("plug", "user", plug, {"lamp": LAMPS}),
        Action("switch", "user", switch, {"lamp": LAMPS}),
    ],
    properties=[monitor("watch", "lamp0 is seen lit", SEEN, first_lamp)],
)


def test_a_monitor_watching_one_id_turns_symmetry_off() -> None:
    system = W1_NO_FINISH
    report = same_verdicts(system)
    assert report.result("w1_no_finish").verdict == VIOLATED
    assert report.notes and "w1_no_finish" in report.notes[0]


def test_a_symmetric_system_keeps_its_reduction() -> None:
    anyone = sometimes(
        "someone_first", "some worker acquires first", lambda v: v.get("first") is not None
    )
    report = same_verdicts(workers(anyone))
    assert report.symmetry and report.notes == ()
    full = explore(workers(anyone), symmetry=False, stop_on_violation=False)
    assert report.states < full.states


def step_every_worker(tx: Tx) -> None:
    """Each worker in id order: an idle one acquires, a busy one finishes."""
    fired = False
    for w in WORKERS.values:
        snapshot = tx.snapshot(("worker", w))
        if snapshot is not None and snapshot.state != "done":
            event = "acquire" if snapshot.state == "idle" else "finish"
            fired = tx.fire(("worker", w), event).accepted or fired
    tx.require(fired)


QUIET_WORKER = Machine(
    "worker",
    states=WORKER.states,
    events=WORKER.events,
    transitions=[Transition(t.source, t.event, t.target) for t in WORKER.transitions],
)
"""`WORKER` without outputs."""


def stepping_workers(*properties: Any, machine: Machine | None = None) -> System:
    """`workers`, with one more action that steps both workers at once, in id order."""
    step_all = Action("step_all", "scheduler", step_every_worker)
    return workers(*properties, machine=machine, more=(step_all,))


def test_transitions_taken_in_id_order_keep_the_reduction() -> None:
    """The transitions taken only count toward coverage: their order is no asymmetry."""
    both_done = sometimes(
        "both_done",
        "both workers finish",
        lambda v: _state(v, W0) == "done" and _state(v, W1) == "done",
    )
    system = stepping_workers(both_done, machine=QUIET_WORKER)
    report = same_verdicts(system)
    assert report.symmetry and report.notes == ()
    assert report.result("both_done").verdict == HOLDS
    full = explore(system, symmetry=False, stop_on_violation=False)
    assert report.states < full.states


def test_outputs_in_id_order_turn_symmetry_off_for_a_monitor_that_reads_their_order() -> None:
    """One step emits ``finished`` then ``acquired`` or the reverse, by which id is busy."""

    def everything(emitted: Emitted) -> tuple[Hashable, str, Mapping[str, Any]] | None:
        return "all", emitted.output.name, {}

    no_acquire_after_finish = Machine(
        "order_watch",
        states=[State("quiet", initial=True), State("after_finish")],
        events=[Event("acquired"), Event("finished")],
        transitions=[
            Transition("quiet", "acquired", "quiet"),
            Transition("quiet", "finished", "after_finish"),
            Transition("after_finish", "finished", "after_finish"),
        ],
    )
    watch = monitor("ordered", "no acquire after a finish", no_acquire_after_finish, everything)
    report = same_verdicts(stepping_workers(watch))
    assert report.result("ordered").verdict == VIOLATED
    assert not report.symmetry and "the outputs differ" in report.notes[0]


def test_stop_on_violation_with_an_id_naming_property_reports_a_real_trace() -> None:
    report = explore(workers(W1_NEVER_FIRST))
    result = report.result("w1_never_first")
    assert result.verdict == VIOLATED
    check_trace_shows(report.system, result)


@pytest.mark.parametrize("registry", ["checking", "blind"])
@pytest.mark.parametrize("special", WORKERS.values)
def test_a_run_after_true_is_checked_apart_from_one_after_1(
    special: ModelValue, registry: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``flag`` is set to 1 or to True (equal values; ``tag`` keeps the two states apart);
    ``finish`` treats one id apart only after True. The values registry turns the memos
    off (1 and True at one place). Were it blind, the successor memo would learn the two
    runs apart, and so must the guard: a run after True is not the run after 1 it checked."""
    if registry == "blind":
        monkeypatch.setattr(ValueRegistry, "add", lambda self, place, value: None)

    def set_flag(value: int) -> Any:
        def run(tx: Tx) -> None:
            tx.require(tx.get("flag") == 0)
            tx.set("flag", value)
            tx.set("tag", str(value))

        return run

    def finish_after(tx: Tx, w: Hashable) -> None:
        flag = tx.get("flag")
        tx.require(flag != 0 and tx.fire(("worker", w), "finish").accepted)
        if flag is True and w == special:
            tx.set("x", 1)

    def acquire_after(tx: Tx, w: Hashable) -> None:
        tx.require(tx.get("flag") != 0 and tx.fire(("worker", w), "acquire").accepted)

    system = System(
        "flags",
        components=[Component("worker", WORKER, WORKERS)],
        globals=[Global("flag", 0), Global("tag", ""), Global("x", 0)],
        actions=[
            Action("one", "u", set_flag(1)),
            Action("true", "u", set_flag(True)),
            Action("acquire", "u", acquire_after, {"w": WORKERS}),
            Action("finish", "u", finish_after, {"w": WORKERS}),
        ],
        init=spawn_all,
        properties=[always("x_zero", "x stays 0", lambda v: v.get("x") == 0)],
    )
    report = same_verdicts(system)
    assert report.result("x_zero").verdict == VIOLATED
    if registry == "blind":
        assert not report.symmetry and "does not do what" in report.notes[0]
    else:
        assert report.notes[0].startswith("memos off: the values 1 and True")


def _state(view: Any, w: ModelValue) -> str | None:
    snap = view.snapshot("worker", w)
    return None if snap is None else str(snap.state)


# -- the differential test -------------------------------------------------------------


@settings(
    max_examples=400,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)
@given(systems(symmetric_pair=True, naming=True))
def test_reduction_matches_brute_force_when_ids_are_named(spec: SystemSpec) -> None:
    system = build_system(spec)
    oracle = brute_force(system)
    plain = check_report(system, oracle, explore(system, symmetry=False, stop_on_violation=False))
    reduced = explore(system, symmetry=True, stop_on_violation=False)
    assert check_report(system, oracle, reduced) == plain
    assert reduced.symmetry or reduced.notes
    first = explore(system, symmetry=True)
    for result in first.results:
        expected, length = plain[result.property.id]
        if result.verdict == VIOLATED:
            assert expected == VIOLATED and result.trace is not None
            assert len(result.trace) == length
            check_trace_shows(system, result)
        elif first.complete:
            assert result.verdict == expected
        else:
            assert result.verdict in (UNKNOWN, expected)


# -- the same verdict whatever the hash seed ---------------------------------------------------

W1_SYSTEM = workers(W1_NEVER_FIRST)
JOB1_NEVER = workers(
    always(
        "w1_never_acquires",
        "worker1 never acquires",
        lambda v: v.snapshot("worker", W1).state == "idle",
    )
)


@pytest.mark.parametrize("target", ["W1_SYSTEM", "JOB1_NEVER"])
def test_the_cli_verdict_does_not_depend_on_the_hash_seed(target: str) -> None:
    import json
    import os
    import subprocess
    import sys
    from pathlib import Path

    tests = str(Path(__file__).resolve().parent)
    seen = set()
    for seed in ("0", "1", "2", "3"):
        env = {**os.environ, "PYTHONHASHSEED": seed, "PYTHONPATH": tests}
        done = subprocess.run(
            [sys.executable, "-m", "statecore.cli", "check", f"test_symmetry_soundness:{target}"]
            + ["--json"],
            env=env,
            capture_output=True,
            text=True,
            timeout=120,
        )
        assert done.returncode == 1, done.stderr
        (entry,) = json.loads(done.stdout)["targets"]
        (prop,) = entry["properties"]
        assert prop["verdict"] == VIOLATED and not entry["symmetry"]
        assert all("worker1" in action for action in prop["trace_actions"][:1])
        seen.add((prop["verdict"], prop["trace_length"], tuple(prop["trace_actions"])))
    assert len(seen) == 1


@pytest.mark.parametrize("target", ["W1_NO_FINISH", "W0_ONLY", "FIRST_LAMP_WATCHED"])
def test_the_note_naming_an_asymmetry_does_not_depend_on_the_hash_seed(target: str) -> None:
    """Which member of an orbit the explorer meets follows the string hash; a swap tells the
    ids apart on either, and the note names what it found in one order whichever it met."""
    import os
    import subprocess
    import sys
    from pathlib import Path

    code = (
        "from statecore.check.explore import explore\n"
        f"from test_symmetry_soundness import {target}\n"
        f"print(explore({target}, stop_on_violation=False).notes)\n"
    )
    tests = str(Path(__file__).resolve().parent)
    notes = set()
    for seed in ("1", "2", "3", "4", "5", "6"):
        env = {**os.environ, "PYTHONHASHSEED": seed, "PYTHONPATH": tests}
        done = subprocess.run(
            [sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=120
        )
        assert done.returncode == 0, done.stderr[-2000:]
        notes.add(done.stdout.strip())
    assert len(notes) == 1, notes
    assert "symmetry reduction off" in notes.pop()


def test_a_renaming_is_named_in_one_order() -> None:
    """Two pairs swapped are named in sorted order (a set of pairs iterates in hash order);
    a renaming that is not its own inverse is named as it maps."""
    from statecore.check.symmetry_guard import _names

    a, b, c, d = Keys("job", 4).values
    assert _names({d: c, c: d, b: a, a: b}) == "job0 and job1 swapped, job2 and job3 swapped"
    assert _names({a: b, b: c, c: a}) == "the ids renamed job0->job1, job1->job2, job2->job0"
