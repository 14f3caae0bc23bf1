"""The real vLLM-Omni 0.30.0 adapter against the `segments` model.

Needs the real stack (``tox -e vllm``); skipped without it.

(a) directed scenarios in lockstep with ``segments_0_30_0`` (0.30.0 as
    released): a request without ``_omni_segment_generation`` resumes its next
    segment and is delivered (the #6816 fix); a parked session ended through
    the real scheduler's ``add_request`` while its segment end is still queued
    loses that segment end (docs/findings.md);
(b) fuzzing: no finding but the known ones and every transition of both
    machines taken; against the reference `segments` the fuzz finds that
    discard (the checked adapter, which sends it, is fuzzed against the
    reference in tests/test_vllm_checked.py);
(c) mutation check: the segment-watermark bugs vLLM-Omni had or guards
    against, patched into the real class, and single-point mutants of the real
    ``_finish_parked_streaming_session``, are each found.
"""

from __future__ import annotations

from collections.abc import Callable, Hashable, Iterator
from typing import Any

import pytest
from statecore.models.bindings.vllm_omni_segments import SegmentsBinding, fuzz_system
from statecore.models.segment import SEGMENTS
from statecore.spec.segment import REQUEST_END_AFTER_SEGMENTS

from statecore.fuzzing.fuzz import fuzz
from statecore.system import ActionLabel, SystemState

pytest.importorskip("vllm_omni")

from statecore.models.bindings.vllm_omni import real_classes

REAL = real_classes()
RELEASED = fuzz_system()
(EXT,) = RELEASED.component("request").key_values
FUZZ_EXAMPLES = 300


class Lockstep:
    def __init__(self, binding: SegmentsBinding) -> None:
        self.binding = binding
        binding.setup(RELEASED)
        self.state: SystemState = RELEASED.init_states()[0]

    def do(self, name: str, **args: Hashable) -> Lockstep:
        step = RELEASED.next_step(self.state, ActionLabel(name, tuple(args.items())))
        self.binding.apply(step, self.state)
        self.state = step.state
        assert self.binding.observe() == self.binding.expect(RELEASED.view(self.state))
        return self


@pytest.fixture
def run() -> Iterator[Lockstep]:
    lockstep = Lockstep(SegmentsBinding())
    yield lockstep
    lockstep.binding.teardown()


def test_a_resumed_segment_without_the_counter_is_delivered(run: Lockstep) -> None:
    run.do("arrive", ext=EXT, counter=False).do("chunk", ext=EXT).do("segment_end", ext=EXT)
    assert run.binding.adapter._segment_generation.get("ext0") == 0  # #6816: no +1
    run.do("next_segment", ext=EXT, mode="resume").do("chunk", ext=EXT).do("finish", ext=EXT)
    for _ in range(4):
        run.do("send")
    flags = [(s.finished, s.segment_finished) for s in run.binding.connector.sent]
    assert flags == [(False, False), (False, True), (False, False), (True, False)]
    assert "ext0" not in run.binding.adapter._segment_generation  # the terminal's cleanup


def test_ending_a_parked_session_discards_its_queued_segment_end(run: Lockstep) -> None:
    run.do("arrive", ext=EXT, counter=False).do("segment_end", ext=EXT).do("end_parked", ext=EXT)
    request, token = run.binding.request, run.binding.adapter._sender_tokens["ext0"]
    assert request.status == REAL.status.FINISHED_STOPPED and request._omni_segment_generation == 1
    assert token.cancelled and token.cleanup_deferred  # finish_requests -> cleanup_sender
    run.do("send").do("send")
    flags = [(s.finished, s.segment_finished) for s in run.binding.connector.sent]
    assert flags == [(True, False)]  # the segment end was discarded; the terminal went out
    run.do("receive")  # the request end, read with no segment end before it
    view = RELEASED.view(run.state)
    [(_, request_snapshot)] = view.live("request")
    assert view.g.seen_end and view.g.seen_ends == 0 and request_snapshot.ends == 1
    assert REQUEST_END_AFTER_SEGMENTS in run.binding.known


def test_fuzzing_the_reference_finds_the_discard() -> None:
    report = fuzz(SEGMENTS, SegmentsBinding, max_examples=FUZZ_EXAMPLES, seed=0)
    assert report.finding is not None
    actions = [step.action.name for step in report.finding.trace.steps if step.action]
    assert "end_parked" in actions and actions[-1] == "send"


def test_fuzzing_finds_nothing_and_takes_every_transition() -> None:
    report = fuzz(RELEASED, SegmentsBinding, max_examples=FUZZ_EXAMPLES, seed=0)
    assert report.finding is None, f"{report.finding}\n{report.finding.trace}"
    never = [(comp, names) for comp, _, _, _, names in report.coverage() if names]
    assert never == [], f"model transitions never taken: {never}"


def _segment_end_rule(
    rule: Callable[[Any, str, int, int], None],
) -> Callable[[type[Any]], dict[str, Any]]:
    """A mutant of save_async that rewrites the watermarks a queued segment end leaves."""

    def patches(cls: type[Any]) -> dict[str, Any]:
        original = cls.save_async

        def save_async(
            self: Any, output: Any = None, request: Any = None, segment: bool = False, **kw: Any
        ) -> None:
            queued = len(self._pending_save_reqs)
            original(self, output, request, segment, **kw)
            if segment and len(self._pending_save_reqs) > queued:
                generation = int(kw.get("segment_generation") or 0)
                confirmed = int(kw["confirmed_num_computed_tokens"])
                rule(self, request.external_req_id, generation, confirmed)

        return {"save_async": save_async}

    return patches


def _always_advance(adapter: Any, ext: str, generation: int, confirmed: int) -> None:
    adapter._segment_generation[ext] = generation + 1  # before #6816


def _never_advance(adapter: Any, ext: str, generation: int, confirmed: int) -> None:
    adapter._segment_generation[ext] = generation  # no deduplication of late saves


def _keep_tokens(adapter: Any, ext: str, generation: int, confirmed: int) -> None:
    adapter.requests_num_chunks_sent[ext] = confirmed  # CTA:486 removed: the watermark stays


MUTANTS = {
    "segment_end_always_advances_6816": _segment_end_rule(_always_advance),
    "segment_end_never_advances": _segment_end_rule(_never_advance),
    "segment_end_keeps_the_token_watermark": _segment_end_rule(_keep_tokens),
}


@pytest.mark.parametrize("name", sorted(MUTANTS))
def test_a_watermark_bug_is_found(name: str, monkeypatch: pytest.MonkeyPatch) -> None:
    for attribute, replacement in MUTANTS[name](REAL.adapter).items():
        monkeypatch.setattr(REAL.adapter, attribute, replacement)
    report = fuzz(RELEASED, SegmentsBinding, max_examples=FUZZ_EXAMPLES, seed=0)
    assert report.finding is not None, f"{name} survived {report.examples} examples"


def _finish_before_save(self: Any, request: Any, adapter: Any) -> None:
    """MIX:926-943 with the finish moved before the forced terminal's save."""
    request.resumable = False
    request._omni_segment_generation = int(getattr(request, "_omni_segment_generation", 0) or 0) + 1
    self.finish_requests(request.request_id, REAL.status.FINISHED_STOPPED)
    adapter.save_async(None, request, is_segment_finished=False, force_request_finished=True)


def _no_bump(self: Any, request: Any, adapter: Any) -> None:
    """MIX:926-943 without the bump of MIX:933."""
    request.resumable = False
    adapter.save_async(None, request, is_segment_finished=False, force_request_finished=True)
    self.finish_requests(request.request_id, REAL.status.FINISHED_STOPPED)


@pytest.mark.parametrize("mutant", [_finish_before_save, _no_bump])
def test_a_parked_session_bug_is_found(
    mutant: Callable[[Any, Any, Any], None], monkeypatch: pytest.MonkeyPatch
) -> None:
    from vllm_omni.core.sched.omni_scheduler_mixin import OmniSchedulerMixin

    monkeypatch.setattr(OmniSchedulerMixin, "_finish_parked_streaming_session", mutant)
    report = fuzz(RELEASED, SegmentsBinding, max_examples=FUZZ_EXAMPLES, seed=0)
    assert report.finding is not None, f"{mutant.__name__} survived {report.examples} examples"
    actions = [step.action.name for step in report.finding.trace.steps if step.action]
    assert "end_parked" in actions
