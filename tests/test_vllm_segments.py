"""The real vLLM-Omni 0.30.0 adapter, and the checked one, against the `segments` model.

Needs the real stack (``tox -e vllm``); skipped without it.

(a) a directed scenario: a request without ``_omni_segment_generation``
    resumes its next segment and is delivered (the #6816 fix), in lockstep;
(b) fuzzing: no finding and every transition of both machines taken, for
    the released adapter and the checked one;
(c) mutation check: the segment-watermark bugs vLLM-Omni had or guards
    against, patched into the real class, are each found.
"""

from __future__ import annotations

from collections.abc import Callable, Hashable, Iterator
from typing import Any

import pytest
from statecore.models.bindings.vllm_omni_checked import CheckedSegmentsBinding
from statecore.models.bindings.vllm_omni_segments import SegmentsBinding
from statecore.models.segment import SEGMENTS

from statecore.fuzzing.fuzz import fuzz
from statecore.system import ActionLabel, SystemState

pytest.importorskip("vllm_omni")

from statecore.models.bindings.vllm_omni import real_classes

REAL = real_classes()
(EXT,) = SEGMENTS.component("request").key_values
FUZZ_EXAMPLES = 300


class Lockstep:
    def __init__(self, binding: SegmentsBinding) -> None:
        self.binding = binding
        binding.setup(SEGMENTS)
        self.state: SystemState = SEGMENTS.init_states()[0]

    def do(self, name: str, **args: Hashable) -> Lockstep:
        step = SEGMENTS.next_step(self.state, ActionLabel(name, tuple(args.items())))
        self.binding.apply(step, self.state)
        self.state = step.state
        assert self.binding.observe() == self.binding.expect(SEGMENTS.view(self.state))
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


@pytest.mark.parametrize("binding", [SegmentsBinding, CheckedSegmentsBinding])
def test_fuzzing_finds_nothing_and_takes_every_transition(binding: type[SegmentsBinding]) -> None:
    report = fuzz(SEGMENTS, binding, max_examples=FUZZ_EXAMPLES, seed=0)
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
    report = fuzz(SEGMENTS, SegmentsBinding, max_examples=FUZZ_EXAMPLES, seed=0)
    assert report.finding is not None, f"{name} survived {report.examples} examples"
