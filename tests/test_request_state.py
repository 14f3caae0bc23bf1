"""Seed 000 (RFC #6453): request-scoped producer state, its model and its runtime.

* every bundled target of `statecore.models.request_state` is checked
  exhaustively: the reference holds with no vacuous property, each variant
  violates exactly its expected properties, with a shortest trace that tells
  the review's story;
* `RequestStateAccessor` (`statecore.models.implementations.request_state`) is
  unit-tested (fencing, retained views, cleanup, reuse, fail-open, threads),
  then run in lockstep with the reference system on random action sequences,
  and shown to diverge from the buggy variants.
"""

from __future__ import annotations

import logging
import threading
import time
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from model_checks import assert_story, in_order, names, report_of
from statecore.models import request_state as rs
from statecore.models.bindings.request_state import NS, AccessorBinding
from statecore.models.implementations import request_state as impl
from statecore.models.implementations.request_state import (
    MAX_NAMESPACES,
    Access,
    RequestStateAccessor,
    RequestStateView,
    UnknownNamespaceError,
)

from statecore.check.explore import HOLDS, VIOLATED, explore
from statecore.check.mutation import mutants
from statecore.fuzzing.fuzz import fuzz, replay_with_adapter
from statecore.registry import Target, resolve_adapter

TARGETS = {t.name: t for t in rs.TARGETS}
VARIANTS = [t for t in rs.TARGETS if t.kind == "variant"]
CODEC, FRAMES = NS


# -- the model -----------------------------------------------------------------------


def test_reference_holds_without_vacuity() -> None:
    report = report_of(TARGETS["request_state_system"])  # timed in benchmarks/explore.py
    assert report.complete and report.ok
    assert {r.verdict for r in report.results} == {HOLDS}
    for cov in report.coverage:
        assert not cov.never, (cov.component, cov.never)


@pytest.mark.parametrize("target", VARIANTS, ids=lambda t: t.name)
def test_variant_violates_exactly_its_expected_properties(target: Target) -> None:
    report = report_of(target)
    assert report.complete
    failing = {r.property.id for r in report.results if r.verdict != HOLDS}
    assert failing == target.expected_violations
    assert target.family == "request_state_system"


# (target, property) -> (shortest trace length, key actions in order)
STORIES: dict[tuple[str, str], tuple[int, list[str]]] = {
    # P1: terminal queued, cleanup_sender cancels (terminal_pending -> deferred),
    # the save thread still runs the terminal, the producer's get_or_create is
    # refused because of `cancelled`, the put is skipped.
    ("request_state_seed000_p1", "eos_delivered"): (
        5,
        ["new_request", "save_terminal", "abort", "begin", "process"],
    ),
    ("request_state_seed000_p1", "flush_reaches_state"): (
        5,
        ["new_request", "save_terminal", "abort", "begin", "process"],
    ),
    ("request_state_p1_fail_open", "flush_reaches_state"): (
        5,
        ["new_request", "save_terminal", "abort", "begin", "process"],
    ),
    # P2, checked on the retained view: the terminal's canonical cleanup, then
    # the view captured inside the producer recreates state.
    ("request_state_retained_unfenced", "no_recreate_after_cleanup"): (
        6,
        ["save_terminal", "begin", "process", "put", "retained_get_or_create"],
    ),
    ("request_state_retained_unfenced", "no_leak_after_cleanup"): (
        6,
        ["save_terminal", "begin", "process", "put", "retained_get_or_create"],
    ),
    ("request_state_retained_unfenced", "late_access_refused"): (
        6,
        ["save_terminal", "begin", "process", "put", "late_check"],
    ),
    ("request_state_retained_unfenced", "generation_fenced"): (
        8,
        ["process", "put", "new_request", "save_segment_end", "retained_get_or_create"],
    ),
    # A stale handle: generation 1's view, after the id was reused.
    ("request_state_stale_handle", "generation_fenced"): (
        8,
        [
            "save_terminal",
            "process",
            "put",
            "new_request",
            "save_segment_end",
            "retained_get_or_create",
        ],
    ),
    # P2 as the PR's test does it: after the terminal's cleanup the late check
    # calls adapter.request_state, which the producer's finally emptied.
    ("request_state_seed000_p2_vacuous", "late_access_refused"): (
        6,
        ["save_terminal", "begin", "process", "put", "late_check"],
    ),
    ("request_state_segment_clears", "request_state_retained"): (
        5,
        ["save_segment_end", "begin", "process", "put"],
    ),
    ("request_state_failure_clears", "request_state_retained"): (
        5,
        ["save_segment_end", "begin", "process", "put"],
    ),
}


@pytest.mark.parametrize("key", list(STORIES), ids=lambda k: f"{k[0]}:{k[1]}")
def test_shortest_trace_tells_the_review_story(key: tuple[str, str]) -> None:
    target_name, prop = key
    length, story = STORIES[key]
    assert_story(report_of(TARGETS[target_name]), prop, length, story)


def test_stories_cover_every_violation() -> None:
    for target in VARIANTS:
        for prop in target.expected_violations:
            if report_of(target).result(prop).verdict == VIOLATED:
                assert (target.name, prop) in STORIES


def test_p1_trace_details() -> None:
    trace = report_of(TARGETS["request_state_seed000_p1"]).result("eos_delivered").trace
    assert trace is not None
    last = trace.steps[-1]
    accesses = [e.output for e in last.outputs if e.output.name == "access"]
    assert [a.get("result") for a in accesses] == ["refused"]
    assert "put" not in names(trace)  # the put was skipped: EOS dropped
    abort_at = names(trace).index("abort") + 1  # steps[0] is the initial state
    system = rs.variant_seed000_p1()
    ext = system.component("sender").key_values[0]
    sender = system.view(trace.steps[abort_at].state).snapshot("sender", ext)
    assert sender is not None and sender.state == "draining"  # cancelled but current


def test_p2_assertion_exercises_no_fence_and_misses_the_bug_it_targets() -> None:
    p2 = report_of(TARGETS["request_state_seed000_p2_vacuous"]).result("late_access_refused")
    assert p2.verdict == VIOLATED and p2.trace is not None
    system = rs.variant_seed000_p2_vacuous()
    last = system.view(p2.trace.steps[-1].state)
    # The slot was empty: the call raised before any view was exercised.
    assert last.get("in_flight") is None and last.get("late_check") == rs.UNAVAILABLE
    assert not [e for e in p2.trace.steps[-1].outputs if e.output.name == "access"]
    # The post-exit read passes the PR's test even where retained views recreate state.
    both = explore(
        rs.build(
            rs.RequestStateConfig(name="p2_on_unfenced", fence="unfenced", late_check="context")
        ),
        stop_on_violation=False,
    )
    assert both.result("no_recreate_after_cleanup").verdict == VIOLATED
    late = both.result("late_access_refused")
    assert late.verdict == VIOLATED and late.trace is not None
    assert both.system.view(late.trace.steps[-1].state).get("late_check") == rs.UNAVAILABLE


def test_reference_witnesses_reach_the_interesting_states() -> None:
    report = report_of(TARGETS["request_state_system"])
    flush = report.result("cancelled_terminal_flush").trace
    assert flush is not None and in_order(names(flush), ["save_terminal", "abort", "begin"])
    late = report.result("late_access_refused")
    assert late.verdict == HOLDS


def test_declared_equivalent_mutants_are_mutants_of_the_reference() -> None:
    system = rs.REQUEST_STATE_SYSTEM
    ids = {m.id for m in mutants(system)}
    assert set(system.equivalent_mutants) <= ids, set(system.equivalent_mutants) - ids
    assert all(reason and "\n" not in reason for reason in system.equivalent_mutants.values())


def test_machine_declarations() -> None:
    machine = rs.REQUEST_STATE
    assert machine.name == "request_state"
    assert {s.name for s in machine.states} == {"open", "failed", "released"}
    assert machine.final_states == {"released"}
    with pytest.raises(ValueError):
        rs.request_state_machine(())
    with pytest.raises(ValueError):
        rs.request_state_machine(("a", "a"))
    assert rs.request_state_machine(NS) is rs.REQUEST_STATE


# -- the runtime: unit tests ---------------------------------------------------------------


def make() -> RequestStateAccessor:
    return RequestStateAccessor(NS)


def test_get_or_create_creates_once_then_reuses() -> None:
    acc = make()
    view = acc.open("E", owner="t1")
    calls: list[int] = []

    def factory() -> list[int]:
        calls.append(1)
        return []

    first = view.resolve(CODEC, factory)
    second = view.resolve(CODEC, factory)
    assert first.status == "created" and second.status == "reused"
    assert first.value is second.value and calls == [1]
    assert view.get_or_create(FRAMES, dict) == {}
    assert acc.held("E") == {CODEC, FRAMES}
    assert view.get(CODEC) is first.value and view.namespaces() == {CODEC, FRAMES}
    assert acc.status("E") == "open" and "E" in acc and len(acc) == 1
    assert acc.get_or_create("E", CODEC, list) is first.value


def test_requests_are_isolated() -> None:
    acc = make()
    a, b = acc.open("A"), acc.open("B")
    a.get_or_create(CODEC, list).append(1)
    assert b.get_or_create(CODEC, list) == []
    assert acc.cleanup("A") and acc.held("B") == {CODEC}


def test_cleanup_is_canonical_and_idempotent() -> None:
    acc = make()
    view = acc.open("E")
    view.get_or_create(CODEC, list)
    view.get_or_create(FRAMES, list)
    assert acc.cleanup("E") is True
    assert acc.cleanup("E") is False
    assert "E" not in acc and acc.held("E") == frozenset() and acc.status("E") is None
    assert not view.active and view.namespaces() == frozenset() and view.get(CODEC) is None


def test_retained_view_cannot_recreate_after_cleanup() -> None:
    """Seed 000 P2, as the review asks: capture the view inside the producer."""
    acc = make()
    captured: list[RequestStateView] = []

    def producer(view: RequestStateView) -> None:
        captured.append(view)
        view.get_or_create(CODEC, list).append("chunk")

    producer(acc.open("E", owner="token"))
    acc.cleanup("E")
    late = captured[0].resolve("frames", list)
    assert late.status == "detached" and not late.stored and late.value == []
    assert "E" not in acc and acc.held("E") == frozenset()


def test_stale_view_cannot_reach_the_successor() -> None:
    acc = make()
    old = acc.open("E", owner="t1")
    old.get_or_create(CODEC, lambda: ["old"])
    acc.cleanup("E")
    new = acc.open("E", owner="t2")
    assert new.generation == old.generation + 1
    assert new.get_or_create(CODEC, lambda: ["new"]) == ["new"]  # nothing inherited
    stale = old.resolve(FRAMES, lambda: ["stale"])
    assert stale.status == "detached"
    assert old.get(CODEC) is None and old.namespaces() == frozenset()
    assert acc.held("E") == {CODEC} and new.get(CODEC) == ["new"]


def test_open_supersedes_a_live_generation(caplog: pytest.LogCaptureFixture) -> None:
    acc = make()
    old = acc.open("E")
    old.get_or_create(CODEC, list)
    with caplog.at_level(logging.WARNING):
        new = acc.open("E")
    assert "still live" in caplog.text
    assert not old.active and new.active and acc.held("E") == frozenset()


def test_view_is_fenced_by_owner_identity() -> None:
    acc = make()
    token, other = object(), object()
    acc.open("E", owner=token)
    assert acc.view("E", owner=token).active
    foreign = acc.view("E", owner=other)
    assert not foreign.active and foreign.generation == 0
    assert foreign.resolve(CODEC, list).status == "detached"
    assert acc.held("E") == frozenset()
    assert not acc.view("missing").active


def test_cancelled_but_current_generation_stays_readable() -> None:
    """Seed 000 P1: cancellation is the sender's business; only identity fences."""
    acc = make()
    token = object()
    view = acc.open("E", owner=token)
    view.get_or_create(CODEC, list).append("frame")
    # cleanup_sender while the terminal is pending defers: nothing reaches the
    # accessor until the terminal task's fence release runs the cleanup.
    flush = acc.view("E", owner=token)
    assert flush.resolve(CODEC, list).status == "reused"
    assert flush.get_or_create(CODEC, list) == ["frame"]
    assert acc.cleanup("E")
    assert flush.resolve(CODEC, list).status == "detached"


def test_lifecycle_calls_are_fenced_by_owner() -> None:
    acc = make()
    old, new = object(), object()
    acc.open("E", owner=old)
    acc.cleanup("E")
    view = acc.open("E", owner=new)
    view.get_or_create(CODEC, list)
    # A late call from the retired generation's task touches nothing.
    assert acc.on_failure("E", owner=old) is False
    assert acc.complete_segment("E", owner=old) is False
    assert acc.cleanup("E", owner=old) is False
    assert acc.status("E") == "open" and acc.held("E") == {CODEC}
    assert acc.on_failure("E", owner=new) and acc.cleanup("E", owner=new)
    assert len(acc) == 0


def test_memory_is_bounded_by_live_requests() -> None:
    acc = make()
    for i in range(1000):
        acc.open(f"req-{i}").get_or_create(CODEC, list)
        acc.cleanup(f"req-{i}")
    assert len(acc) == 0 and not acc._generations


def test_segment_completion_keeps_request_wide_state() -> None:
    acc = make()
    view = acc.open("E")
    state = view.get_or_create(CODEC, list)
    assert acc.complete_segment("E") and acc.complete_segment("E")
    assert view.get_or_create(CODEC, list) is state and acc.status("E") == "open"


def test_failure_keeps_state_until_finalization() -> None:
    acc = make()
    view = acc.open("E")
    state = view.get_or_create(CODEC, list)
    assert acc.on_failure("E") and acc.status("E") == "failed"
    assert view.active and view.get_or_create(CODEC, list) is state
    assert view.resolve(FRAMES, list).status == "created"
    assert acc.complete_segment("E") and acc.status("E") == "failed"
    assert acc.cleanup("E") and not view.active


def test_runtime_conditions_fail_open() -> None:
    acc = make()
    assert acc.complete_segment("nope") is False
    assert acc.on_failure("nope") is False
    assert acc.cleanup("nope") is False
    value = acc.get_or_create("nope", CODEC, lambda: ["x"])
    assert value == ["x"] and "nope" not in acc


def test_factory_exception_propagates_and_leaves_no_state() -> None:
    acc = make()
    view = acc.open("E")

    def broken() -> list[int]:
        raise RuntimeError("producer bug")

    with pytest.raises(RuntimeError):
        view.get_or_create(CODEC, broken)
    assert acc.held("E") == frozenset()
    assert view.resolve(CODEC, list).status == "created"


def test_factory_may_use_other_namespaces() -> None:
    acc = make()
    view = acc.open("E")

    def factory() -> dict[str, Any]:
        return {"frames": view.get_or_create(FRAMES, list)}

    codec = view.get_or_create(CODEC, factory)
    assert codec["frames"] is view.get(FRAMES) and acc.held("E") == {CODEC, FRAMES}


@pytest.mark.parametrize(
    "call, error, on_view",
    [
        (lambda acc, v: v.get_or_create("undeclared", list), UnknownNamespaceError, True),
        (lambda acc, v: v.get("undeclared"), UnknownNamespaceError, True),
        (lambda acc, v: v.get_or_create(CODEC, 42), TypeError, True),
        (lambda acc, v: v.get_or_create(CODEC, lambda: None), ValueError, True),
        (lambda acc, v: acc.open(7), TypeError, False),
        (lambda acc, v: acc.cleanup(b"E"), TypeError, False),
        (lambda acc, v: acc.view(None), TypeError, False),
    ],
)
def test_programmer_errors_raise(call: Any, error: type[Exception], on_view: bool) -> None:
    acc = make()
    view = acc.open("E")
    with pytest.raises(error):
        call(acc, view)
    if on_view:  # ...even on a fenced view
        acc.cleanup("E")
        with pytest.raises(error):
            call(acc, view)


@pytest.mark.parametrize(
    "namespaces, error",
    [
        ((), ValueError),
        (("a", "a"), ValueError),
        (("a", ""), TypeError),
        (("a", 1), TypeError),
        (tuple(f"n{i}" for i in range(MAX_NAMESPACES + 1)), ValueError),
    ],
)
def test_bad_declarations_raise(namespaces: tuple[Any, ...], error: type[Exception]) -> None:
    with pytest.raises(error):
        RequestStateAccessor(namespaces)


def test_repr_and_access() -> None:
    acc = make()
    view = acc.open("E")
    assert "active" in repr(view) and "RequestStateAccessor" in repr(acc)
    assert acc.namespaces == NS and acc.machine is rs.REQUEST_STATE
    assert Access([], "reused").stored and not Access([], "detached").stored


# -- the runtime: threads --------------------------------------------------------------------


def test_threads_race_for_the_first_create() -> None:
    acc = make()
    view = acc.open("E")
    barrier = threading.Barrier(8)
    calls: list[int] = []
    results: list[object] = []
    lock = threading.Lock()

    def factory() -> list[int]:
        with lock:
            calls.append(1)
        time.sleep(0.001)
        return []

    def worker() -> None:
        barrier.wait()
        value = view.get_or_create(CODEC, factory)
        with lock:
            results.append(value)

    threads = [threading.Thread(target=worker) for _ in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert calls == [1]
    assert all(r is results[0] for r in results) and len(results) == 8


def test_threads_race_cleanup_and_reuse_without_crossing() -> None:
    """Retained views keep writing while the id is cleaned up and reused."""
    acc = make()
    rounds = 30
    stop = threading.Event()
    views: list[RequestStateView] = []
    views_lock = threading.Lock()
    errors: list[BaseException] = []

    def producer(index: int) -> None:
        try:
            while not stop.is_set():
                with views_lock:
                    snapshot = list(views)
                for view in snapshot:
                    generation = view.generation
                    namespace = NS[index % 2]
                    access = view.resolve(namespace, lambda g=generation: [g])
                    if access.stored:
                        # Whatever a view stores belongs to its own generation.
                        assert access.value[0] == generation
        except BaseException as exc:  # pragma: no cover - reported below
            errors.append(exc)

    threads = [threading.Thread(target=producer, args=(i,)) for i in range(4)]
    for t in threads:
        t.start()
    try:
        for _ in range(rounds):
            view = acc.open("E")
            with views_lock:
                views.append(view)
            time.sleep(0.0005)
            acc.complete_segment("E")
            acc.cleanup("E")
            assert "E" not in acc
    finally:
        stop.set()
        for t in threads:
            t.join()
    assert not errors, errors
    assert "E" not in acc and all(not v.active for v in views)
    # After the last cleanup nothing was recreated by any retained view.
    assert acc.held("E") == frozenset() and len(acc) == 0
    final = acc.open("E")
    assert final.namespaces() == frozenset()


# -- lockstep: the runtime against the model --------------------------------------------------


@settings(max_examples=120, deadline=None)
@given(st.data())
def test_lockstep_random_action_sequences(data: st.DataObject) -> None:
    system = rs.REQUEST_STATE_SYSTEM
    binding = AccessorBinding()
    binding.setup(system)
    state = system.init_states()[0]
    assert binding.observe() == binding.expect(system.view(state))
    for _ in range(data.draw(st.integers(0, 40), label="steps")):
        enabled = system.successors(state)
        if not enabled:
            break
        step = data.draw(st.sampled_from(enabled), label="step")
        binding.apply(step, state)
        state = step.state
        assert binding.observe() == binding.expect(system.view(state)), step.action


def test_fuzz_reference_conforms() -> None:
    report = fuzz(rs.REQUEST_STATE_SYSTEM, AccessorBinding, max_examples=30, seed=0)
    assert report.ok, report.finding and report.finding.trace.table(rs.REQUEST_STATE_SYSTEM)


def test_adapter_is_bundled() -> None:
    system, factory, spec = resolve_adapter("request_state_system", "request-state-accessor")
    assert system is rs.REQUEST_STATE_SYSTEM and factory is AccessorBinding
    assert spec.name == factory().name


def test_reference_witnesses_replay_on_the_runtime() -> None:
    report = report_of(TARGETS["request_state_system"])
    for result in report.results:
        if result.trace is not None:
            finding = replay_with_adapter(report.system, result.trace, AccessorBinding)
            assert finding is None, (result.property.id, finding)


@pytest.mark.parametrize(
    "variant, prop",
    [
        ("request_state_seed000_p1", "eos_delivered"),
        ("request_state_p1_fail_open", "flush_reaches_state"),
        ("request_state_stale_handle", "generation_fenced"),
        ("request_state_retained_unfenced", "no_recreate_after_cleanup"),
        ("request_state_segment_clears", "request_state_retained"),
        ("request_state_failure_clears", "request_state_retained"),
    ],
)
def test_runtime_diverges_from_each_variant_on_its_counterexample(variant: str, prop: str) -> None:
    """The runtime does not do what the buggy variant does, at the very step it goes wrong."""
    report = report_of(TARGETS[variant])
    trace = report.result(prop).trace
    assert trace is not None
    known = {p.id: "variant" for p in report.system.properties}
    finding = replay_with_adapter(report.system, trace, AccessorBinding, known=known)
    assert finding is not None and finding.kind == "conformance", finding
    assert len(finding.trace) == len(trace)  # at the last step, not before


def _release_does_not_fence(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(impl._Generation, "live", property(lambda self: True))


def _segment_end_drops_values(monkeypatch: pytest.MonkeyPatch) -> None:
    fire = impl._Generation.fire

    def dropping(self: Any, event: str) -> bool:
        accepted = bool(fire(self, event))
        if event == "complete_segment":
            self.values.clear()
        return accepted

    monkeypatch.setattr(impl._Generation, "fire", dropping)


@pytest.mark.parametrize(
    "mutate, witness",
    [
        (_release_does_not_fence, "retained_view_outlives_generation"),
        (_segment_end_drops_values, "segment_completed_with_state"),
    ],
)
def test_lockstep_is_not_vacuous(
    mutate: Any, witness: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A broken runtime is caught: the lockstep check itself can fail."""
    report = report_of(TARGETS["request_state_system"])
    trace = report.result(witness).trace
    assert trace is not None
    assert replay_with_adapter(report.system, trace, AccessorBinding) is None
    mutate(monkeypatch)
    finding = replay_with_adapter(report.system, trace, AccessorBinding)
    assert finding is not None and finding.kind == "conformance", finding
