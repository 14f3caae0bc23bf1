"""The segment and receiver lifecycle models (`statecore.models.segment`, `.receiver`).

* every bundled target of both modules is checked exhaustively: each reference
  holds with no vacuous property and every transition taken, quickly; each
  variant violates exactly its expected properties, with a shortest trace
  whose length and key actions tell the bug's story;
* the ``save_async`` admission branches of the ``segment_watermark`` machine
  are replayed one by one against vLLM-Omni 0.30.0's behaviour (CTA:412-486);
* directed runs of both systems show the behaviour the properties rely on:
  a late save dropped, the #6816 "no speculative +1", the token watermark
  reset, and ``cleanup_receiver`` as a commit barrier followed by reuse from
  chunk 0.
"""

from __future__ import annotations

from collections.abc import Hashable, Mapping

import pytest
from model_checks import assert_story, in_order, names, report_of
from statecore.models import receiver as rx
from statecore.models import segment as sg
from statecore.models.segment_actions import ACTIVE

from statecore.check.adequacy import adequacy
from statecore.check.explore import HOLDS, VIOLATED, explore
from statecore.check.mutation import mutants
from statecore.check.reachable import reachable
from statecore.definition import Snapshot
from statecore.registry import Target
from statecore.semantics import step
from statecore.system import ActionLabel, Keys, System, SystemState
from statecore.traces.trace import Trace

ALL_TARGETS: tuple[Target, ...] = (*sg.TARGETS, *rx.TARGETS)
TARGETS = {t.name: t for t in ALL_TARGETS}
MODELS = [t for t in ALL_TARGETS if t.kind == "model"]
VARIANTS = [t for t in ALL_TARGETS if t.kind == "variant"]

EXT = Keys("ext", 1).values[0]
REQ = Keys("req", 1).values[0]


def outputs(trace: Trace) -> list[str]:
    return [str(e.output) for s in trace.steps for e in s.outputs]


# -- the registry ----------------------------------------------------------------------


def test_targets_are_well_formed() -> None:
    assert [t.name for t in MODELS] == ["segments", "receiver_system"]
    assert len(TARGETS) == len(ALL_TARGETS)
    for target in VARIANTS:
        violated = target.expected.split(":", 1)[1].split(",")
        assert violated == sorted(violated), target.name
        assert target.family in {m.name for m in MODELS}
        assert target.load().name == target.name
    for target in MODELS:
        assert target.load().name == target.name


# -- exhaustive checks -------------------------------------------------------------------


@pytest.mark.parametrize("target", MODELS, ids=lambda t: t.name)
def test_reference_holds_without_vacuity_and_covers_every_transition(target: Target) -> None:
    system = target.load()
    report = explore(system, stop_on_violation=False)  # timed in benchmarks/explore.py
    assert report.complete and report.ok
    assert {r.verdict for r in report.results} == {HOLDS}
    for cov in report.coverage:
        assert not cov.never, (cov.component, cov.never)


@pytest.mark.parametrize("name", ["segments", "segments_0_30_0"])
def test_a_parked_session_always_has_an_active_sender(name: str) -> None:
    # So a final update always finds the adapter owing a terminal
    # (_adapter_owing_terminal, MIX:912-924) and end_parked is the whole of
    # add_request here: its other path, vLLM's abort of a session no adapter owes a
    # terminal (MIX:905-910), is left to stages that send nothing.
    system = TARGETS[name].load()
    parked = 0
    for state in reachable(system):
        assert isinstance(state, SystemState)
        view = system.view(state)
        request = view.snapshot("request", EXT)
        if request is not None and request.state == "parked":
            parked += 1
            assert view.g.sender == ACTIVE, state
    assert parked > 0


@pytest.mark.parametrize("target", VARIANTS, ids=lambda t: t.name)
def test_variant_violates_exactly_its_expected_properties(target: Target) -> None:
    report = report_of(target)
    assert report.complete
    failing = {r.property.id for r in report.results if r.verdict != HOLDS}
    assert failing == target.expected_violations
    assert all(report.result(p).verdict == VIOLATED for p in failing)


# (target, property) -> (shortest trace length, key actions in order)
STORIES: dict[tuple[str, str], tuple[int, list[str]]] = {
    # #6816: no counter, the segment end still advances to gen + 1, the next
    # segment resumes without a bump and its saves are all "late".
    ("segments_6816", "no_current_save_dropped"): (
        4,
        ["arrive", "segment_end", "next_segment", "chunk"],
    ),
    ("segments_6816", "request_end_delivered"): (
        6,
        ["arrive", "segment_end", "next_segment", "finish", "send", "receive"],
    ),
    # The resumed segment's end is dropped; the parked end's bump creates the
    # counter, so the terminal gets through - after one segment end of two.
    ("segments_6816", "request_end_after_segments"): (
        9,
        ["segment_end", "next_segment", "segment_end", "end_parked", "receive", "receive"],
    ),
    ("segments_6816", "segment_order"): (
        9,
        ["segment_end", "next_segment", "segment_end", "end_parked", "receive", "receive"],
    ),
    # 0.30.0: the finish retires the generation with the terminal queued, and
    # the save thread discards the segment end queued before it.
    ("segments_0_30_0", "request_end_after_segments"): (
        6,
        ["arrive", "segment_end", "end_parked", "send", "send", "receive"],
    ),
    ("segments_0_30_0", "segment_order"): (
        6,
        ["arrive", "segment_end", "end_parked", "send", "send", "receive"],
    ),
    # MIX:929-933: without the bump the parked session's terminal is "late".
    ("segments_parked_unbumped", "no_current_save_dropped"): (
        3,
        ["arrive", "segment_end", "end_parked"],
    ),
    # The dropped terminal leaves nothing pending, so the finish's cleanup_sender
    # reclaims the generation at once and the queued segment end is discarded.
    ("segments_parked_unbumped", "request_end_delivered"): (
        4,
        ["arrive", "segment_end", "end_parked", "send"],
    ),
    # CTA:486 removed: the rebuilt segment restarts its token count below the
    # old watermark; a chunk, or the terminal (not exempt), is a "replay".
    ("segments_no_token_reset", "no_current_save_dropped"): (
        5,
        ["arrive", "chunk", "segment_end", "next_segment", "chunk"],
    ),
    ("segments_no_token_reset", "request_end_delivered"): (
        9,
        ["chunk", "segment_end", "next_segment", "finish", "send", "send", "receive", "receive"],
    ),
    # No +1 at all: the late save is queued behind its segment's end.
    ("segments_no_dedup", "late_save_dropped"): (
        3,
        ["arrive", "segment_end", "late_save"],
    ),
    ("segments_no_dedup", "segment_order"): (
        7,
        ["arrive", "segment_end", "late_save", "send", "send", "receive", "receive"],
    ),
    ("segments_no_dedup", "no_current_save_dropped"): (
        6,
        ["chunk", "segment_end", "late_save", "next_segment", "chunk"],
    ),
    ("segments_no_dedup", "request_end_delivered"): (
        12,
        ["chunk", "segment_end", "late_save", "next_segment", "finish", "send", "receive"],
    ),
    # The receiver without the re-check: cleanup while connector.get is in flight.
    ("receiver_no_recheck", "commit_barrier"): (
        5,
        ["put", "load_async", "get_start", "cleanup", "get_return"],
    ),
    ("receiver_no_recheck", "chunks_in_order"): (
        6,
        ["put", "load_async", "get_start", "cleanup", "new_request", "get_return"],
    ),
}


@pytest.mark.parametrize("key", list(STORIES), ids=lambda k: f"{k[0]}:{k[1]}")
def test_shortest_trace_tells_the_story(key: tuple[str, str]) -> None:
    target_name, prop = key
    length, story = STORIES[key]
    assert_story(report_of(TARGETS[target_name]), prop, length, story)


def test_stories_cover_every_violation() -> None:
    for target in VARIANTS:
        for prop in target.expected_violations:
            assert (target.name, prop) in STORIES


def test_6816_trace_details() -> None:
    trace = report_of(TARGETS["segments_6816"]).result("no_current_save_dropped").trace
    assert trace is not None
    assert trace.actions[0] == ActionLabel("arrive", (("ext", EXT), ("counter", False)))
    assert trace.actions[2].arg("mode") == sg.RESUME
    assert outputs(trace)[-1] == "skipped(reason='late')"
    system = sg.variant_6816()
    watermark = system.view(trace.steps[2].state).snapshot("watermark", EXT)
    assert watermark is not None and watermark.expected == 1  # the speculative +1


def test_parked_and_token_traces_name_the_dropping_branch() -> None:
    parked = report_of(TARGETS["segments_parked_unbumped"]).result("no_current_save_dropped")
    assert parked.trace is not None
    assert parked.trace.actions[0].arg("counter") is True
    assert outputs(parked.trace)[-1] == "skipped(reason='late')"
    token = report_of(TARGETS["segments_no_token_reset"]).result("no_current_save_dropped")
    assert token.trace is not None
    assert token.trace.actions[3].arg("mode") == sg.UPDATE
    assert outputs(token.trace)[-1] == "skipped(reason='replay')"
    ended = report_of(TARGETS["segments_no_token_reset"]).result("request_end_delivered")
    assert ended.trace is not None
    finish = names(ended.trace).index("finish") + 1  # steps[0] is the initial state
    assert [str(e.output) for e in ended.trace.steps[finish].outputs] == [
        "skipped(reason='replay')"
    ]


def test_no_recheck_trace_commits_into_the_successor() -> None:
    barrier = report_of(TARGETS["receiver_no_recheck"]).result("commit_barrier")
    assert barrier.trace is not None
    (cleaned,) = [e.output for e in barrier.trace.steps[-2].outputs]
    (late,) = [e.output for e in barrier.trace.steps[-1].outputs]
    assert cleaned.name == "cleaned" and late.name == "committed"
    assert late.get("entry") == cleaned.get("entry") and late.get("request") is None
    result = report_of(TARGETS["receiver_no_recheck"]).result("chunks_in_order")
    assert result.trace is not None
    last = result.trace.steps[-1]
    (committed,) = [e.output for e in last.outputs if e.output.name == "committed"]
    successor = committed.get("request")
    assert successor.generation == 2 and committed.get("producer") == 1
    assert committed.get("chunk") == 0 and committed.get("entry").generation == 1
    system = rx.variant_no_recheck()
    state = system.view(last.state).snapshot("receiver", REQ)
    assert state is not None and state.chunk == 1  # its own chunk 0 will never be read


def test_reference_witnesses() -> None:
    segments = report_of(TARGETS["segments"])
    every = segments.result("every_segment_then_end").trace
    assert every is not None
    assert names(every).count("segment_end") == 3
    receiver = report_of(TARGETS["receiver_system"])
    late = receiver.result("late_chunk_in_flight").trace
    assert late is not None and in_order(names(late), ["get_start", "cleanup"])
    reused = receiver.result("reused_id_finishes").trace
    assert reused is not None and in_order(names(reused), ["cleanup", "new_request", "get_return"])


@pytest.mark.parametrize("target", MODELS, ids=lambda t: t.name)
def test_declared_equivalent_mutants_are_mutants_of_the_reference(target: Target) -> None:
    system = target.load()
    ids = {m.id for m in mutants(system)}
    assert set(system.equivalent_mutants) <= ids, set(system.equivalent_mutants) - ids
    assert all(reason and "\n" not in reason for reason in system.equivalent_mutants.values())


def test_receiver_adequacy_is_complete() -> None:
    report = adequacy(rx.RECEIVER_SYSTEM)
    assert report.ok and report.score == 1.0
    assert not report.tautological and not report.survivors


# -- save_async's admission branches ------------------------------------------------------


def save(
    snap: Snapshot, kind: str, generation: int, confirmed: int, counter: bool
) -> tuple[Snapshot, str]:
    """Fire ``save`` on the reference watermark machine: (next snapshot, what it said)."""
    machine = sg.segment_watermark_machine()
    outcome = step(
        machine,
        snap,
        "save",
        {"kind": kind, "generation": generation, "confirmed": confirmed, "counter": counter},
    )
    assert outcome.accepted
    return outcome.snapshot, str(outcome.outputs[0])


def test_watermark_branches_mirror_save_async() -> None:
    machine = sg.segment_watermark_machine()
    fresh = machine.initial_snapshot()
    # First save: expected = .get(ext, generation); no late skip; both set.
    snap, said = save(fresh, sg.CHUNK, 0, 1, True)
    assert said == "admitted()" and (snap.expected, snap.sent) == (0, 1)
    # A re-run below the token watermark: skipped, but the generation is stored first.
    snap2, said = save(snap, sg.CHUNK, 0, 0, True)
    assert said == "skipped(reason='replay')" and (snap2.expected, snap2.sent) == (0, 1)
    # A terminal is not exempt from the token watermark.
    _, said = save(snap, sg.TERMINAL, 0, 0, True)
    assert said == "skipped(reason='replay')"
    # A segment end is exempt, advances to gen + 1 with the counter and pops `sent`.
    advanced, said = save(snap, sg.SEGMENT_END, 0, 0, True)
    assert said == "admitted()" and (advanced.expected, advanced.sent) == (1, None)
    # Without the counter it stays at gen (#6816).
    stayed, _ = save(snap, sg.SEGMENT_END, 0, 0, False)
    assert (stayed.expected, stayed.sent) == (0, None)
    # A late save for the old generation: dropped silently, nothing changes.
    late, said = save(advanced, sg.CHUNK, 0, 5, True)
    assert said == "skipped(reason='late')" and late == advanced
    # The next generation goes through.
    _, said = save(advanced, sg.CHUNK, 1, 1, True)
    assert said == "admitted()"
    # The terminal's cleanup pops both.
    cleared = step(machine, advanced, "clear").snapshot
    assert (cleared.expected, cleared.sent) == (None, None)


def test_variant_watermark_machines() -> None:
    always = sg.segment_watermark_machine(advance="always")
    snap, _ = save(always.initial_snapshot(), sg.CHUNK, 0, 1, False)
    nxt = step(
        always,
        snap,
        "save",
        {"kind": sg.SEGMENT_END, "generation": 0, "confirmed": 2, "counter": False},
    ).snapshot
    assert nxt.expected == 1  # the speculative +1 of #6816
    kept = sg.segment_watermark_machine(reset_tokens=False)
    nxt = step(
        kept,
        snap,
        "save",
        {"kind": sg.SEGMENT_END, "generation": 0, "confirmed": 2, "counter": True},
    ).snapshot
    assert (nxt.expected, nxt.sent) == (1, 2)


# -- directed runs ------------------------------------------------------------------------


def run(system: System, *labels: tuple[str, Mapping[str, Hashable]]) -> list[SystemState]:
    state = system.init_states()[0]
    states = [state]
    for name, args in labels:
        state = system.next_step(state, ActionLabel(name, tuple(args.items()))).state
        states.append(state)
    return states


def test_segments_late_save_is_dropped_and_segments_arrive_in_order() -> None:
    system = sg.SEGMENTS
    e = {"ext": EXT}
    states = run(
        system,
        ("arrive", {**e, "counter": True}),
        ("chunk", e),
        ("segment_end", e),
        ("late_save", e),
        ("next_segment", {**e, "mode": sg.UPDATE}),
        ("chunk", e),
        ("segment_end", e),
        ("end_parked", e),
    )
    view = system.view(states[-1])
    assert view.get("late_issued") and not view.get("late_enqueued")
    assert not view.get("lost")
    assert [t[:2] for t in view.get("queue")] == [
        (sg.CHUNK, 0),
        (sg.SEGMENT_END, 0),
        (sg.CHUNK, 1),
        (sg.SEGMENT_END, 1),
        (sg.TERMINAL, 2),
    ]
    watermark = view.snapshot("watermark", EXT)
    assert watermark is not None and watermark.expected == 2  # the parked end claimed gen 2
    for _ in range(5):
        states.append(system.next_state(states[-1], ActionLabel("send")))
    view = system.view(states[-1])
    watermark = view.snapshot("watermark", EXT)
    assert watermark is not None and watermark.expected is None  # popped by cleanup


def test_segments_preempted_rerun_is_skipped_and_steps_are_read_once() -> None:
    system = sg.SEGMENTS
    e = {"ext": EXT}
    states = run(system, ("arrive", {**e, "counter": False}), ("chunk", e))
    rerun = system.next_step(states[-1], ActionLabel("preempted_rerun", (("ext", EXT),)))
    assert [str(x.output) for x in rerun.outputs] == ["skipped(reason='replay')"]
    assert rerun.state == states[-1]  # deduplicated: nothing changes
    state = system.next_state(states[-1], ActionLabel("finish", (("ext", EXT),)))
    for _ in range(2):
        state = system.next_state(state, ActionLabel("send"))
    reads = []
    for _ in range(2):
        done = system.next_step(state, ActionLabel("receive"))
        reads.extend(x.output for x in done.outputs)
        state = done.state
    assert [(r.get("kind"), r.get("segment"), r.get("step")) for r in reads] == [
        (sg.CHUNK, 0, 1),
        (sg.TERMINAL, 0, 2),
    ]
    view = system.view(state)
    watermark = view.snapshot("watermark", EXT)
    assert view.get("seen_end") and watermark is not None
    assert (watermark.expected, watermark.sent) == (None, None)  # popped by the cleanup


def test_segments_without_counter_resume_keeps_the_stream() -> None:
    system = sg.SEGMENTS
    e = {"ext": EXT}
    states = run(
        system,
        ("arrive", {**e, "counter": False}),
        ("segment_end", e),
        ("next_segment", {**e, "mode": sg.RESUME}),
        ("chunk", e),
        ("finish", e),
    )
    view = system.view(states[-1])
    assert not view.get("lost")
    assert [t[0] for t in view.get("queue")] == [sg.SEGMENT_END, sg.CHUNK, sg.TERMINAL]
    with pytest.raises(Exception, match="not enabled"):
        run(system, ("arrive", {**e, "counter": False}), ("late_save", e))


def test_receiver_cleanup_is_a_commit_barrier_and_reuse_restarts_at_chunk_0() -> None:
    system = rx.RECEIVER_SYSTEM
    r = {"req": REQ}
    states = run(
        system,
        ("put", r),
        ("load_async", r),
        ("get_start", r),
        ("cleanup", r),
        ("new_request", r),
    )
    # The registration the poll ran for is gone: only the stale return is enabled.
    assert "get_return" not in [label.name for label in system.actions_in(states[-1])]
    step_ = system.next_step(states[-1], ActionLabel("get_return_stale"))
    assert [e.output.name for e in step_.outputs] == ["dropped"]
    view = system.view(step_.state)
    assert view.get("in_flight") is None
    successor = view.slot("receiver", REQ)
    assert successor.generation == 2 and successor.snapshot is not None
    assert successor.snapshot.chunk == 0 and not successor.snapshot.waiting
    # The successor reads its own stream from key 0.
    state = step_.state
    for name, args in [("put", r), ("load_async", r), ("get_start", r)]:
        state = system.next_state(state, ActionLabel(name, tuple(args.items())))
    done = system.next_step(state, ActionLabel("get_return"))
    (committed,) = [e.output for e in done.outputs]
    assert committed.name == "committed"
    assert (committed.get("chunk"), committed.get("producer"), committed.get("kind")) == (
        0,
        2,
        rx.DATA,
    )


def test_receiver_segment_end_then_resume_then_finished() -> None:
    system = rx.RECEIVER_SYSTEM
    r = {"req": REQ}
    poll = [("load_async", r), ("get_start", r)]
    state = run(system, *[("put", r)] * 3, *poll)[-1]
    kinds: list[str] = []
    for follow in (poll, [("resume_segment", r), *poll], []):
        done = system.next_step(state, ActionLabel("get_return"))
        (committed,) = [e.output for e in done.outputs]
        kinds.append(committed.get("kind"))
        state = done.state
        for name, args in follow:
            state = system.next_state(state, ActionLabel(name, tuple(args.items())))
    assert kinds == [rx.DATA, rx.SEGMENT_END, rx.FINISHED]
    final = system.view(state).snapshot("receiver", REQ)
    assert final is not None and final.state == "exhausted" and final.chunk == 3
    assert system.view(state).snapshot("entry", REQ) is None
    # Done receiving: only the cleanup is left.
    assert [label.name for label in system.actions_in(state)] == ["cleanup"]
