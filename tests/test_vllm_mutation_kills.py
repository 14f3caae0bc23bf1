"""Survivors of ``statecore mutate`` on the real adapter, each now caught by a comparison;
and single-point mutants of the scheduler step that queues the saves
(``OmniARScheduler.update_from_output``), each caught in lockstep.

Each test puts one single-point mutant (`statecore.fuzzing.source_mutants`) of
vLLM-Omni 0.30.0's ``OmniChunkTransferAdapter`` in the real class, walks the
binding in lockstep with the model to the state where the mutant differs, and
asserts the step fails; the same walk on the unmutated adapter passes (the
``unmutated`` parameter), so each is a test of the comparison, not of the walk.
They are the survivors of ``python benchmarks/mutation.py`` that a stronger
binding now kills; the equivalent ones are declared, with their reasons, in
``models/equivalent_mutants.toml``.

Needs the real stack (``tox -e vllm``); skipped without it.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable, Iterator

import pytest

pytest.importorskip("vllm_omni")

from statecore.models.bindings.vllm_omni import FREED_REQUEST
from statecore.models.bindings.vllm_omni_mutants import source_mutant, source_mutant_id
from test_vllm_adapter import CTA_FILE, EXT0, EXT1, REAL, Lockstep

from statecore.adapter import AdapterError
from statecore.cli.mutate import default_equivalents
from statecore.fuzzing.mutate import load_equivalents, module_file
from statecore.fuzzing.source_mutants import source_mutants

FINISH = "finish_requests"


def abort_naming_a_freed_request(run: Lockstep) -> None:
    """An abort whose id list also names a request the scheduler already freed."""
    run.do("new_request", ext=EXT0).do("save_chunk", ext=EXT0)
    run.binding.aborts = 3  # the fourth shape of the binding's rotation
    run.do("abort", ext=EXT0)
    assert run.seen["senders"] == ()  # the live request was aborted all the same


def sent(run: Lockstep, save: str) -> Lockstep:
    """`save` for ext0, run through the processor and a successful put."""
    run.do(save, ext=EXT0).do("begin").do("process", outcome="payload")
    return run.do("put", outcome="ok").do("finish")


def segment_end_sent(run: Lockstep) -> None:
    """A chunk, then a segment end, each sent: the end clears the segment's tables."""
    sent(sent(run.do("new_request", ext=EXT0), "save_chunk"), "save_segment_end")
    tables = run.binding.adapter
    assert "ext0" not in tables.ramp_chunk_count and "ext0" not in tables._adaptive_states
    assert run.seen["side_tables"] == ()


def second_chunk_processed(run: Lockstep) -> None:
    """The processor of a segment's second chunk reads a ramp count of 1."""
    sent(run.do("new_request", ext=EXT0), "save_chunk").do("save_chunk", ext=EXT0).do("begin")
    assert run.binding.adapter.ramp_chunk_count["ext0"] == 1


RAISES = (AttributeError, "NoneType")
"""The real code raises (reading the status of a request that is not there)."""
CAUGHT = (AssertionError, "^implementation ")
"""The lockstep comparison fails (`Lockstep.check`), not an assertion of the walk."""
GEN = "_send_single_request_for_generation"
SEGMENT_END = "{}: if is_segment_finished:"

KILLS: tuple[tuple[str, str, Callable[[Lockstep], None], tuple[type[Exception], str]], ...] = (
    # finish_requests skips an id its map lacks (CTA:1601-1604); a mutant that
    # reads the missing request's status raises on the freed id.
    (FINISH, "negate-condition {}: if request is None:", abort_naming_a_freed_request, RAISES),
    (FINISH, "swap-is {}: if request is None:", abort_naming_a_freed_request, RAISES),
    (FINISH, "delete-statement {}: continue", abort_naming_a_freed_request, RAISES),
    # a segment end clears the segment-scoped side tables and the ramp counter
    # (CTA:902-909): each pop, and the test that guards them
    (GEN, f"negate-condition {SEGMENT_END}", segment_end_sent, CAUGHT),
    (
        GEN,
        "delete-statement {}: self.code_prompt_token_ids.pop(external_req_id, None)",
        segment_end_sent,
        CAUGHT,
    ),
    (
        GEN,
        'delete-statement {}: getattr(self, "_qwen3_tts_emitted_frames", {}).pop('
        "external_req_id, None)",
        segment_end_sent,
        CAUGHT,
    ),
    (
        GEN,
        "delete-statement {}: self.ramp_chunk_count.pop(external_req_id, None)",
        segment_end_sent,
        CAUGHT,
    ),
    (
        GEN,
        "delete-statement {}: self._adaptive_states.pop(external_req_id, None)",
        segment_end_sent,
        CAUGHT,
    ),
    (
        GEN,
        "delete-statement {}: cached_ic.pop(external_req_id, None)",
        segment_end_sent,
        CAUGHT,
    ),
    # the ramp counter a processor reads: the segment's successful puts so far
    (
        GEN,
        "delete-statement {}: self.ramp_chunk_count[external_req_id] += 1",
        second_chunk_processed,
        CAUGHT,
    ),
    (
        GEN,
        "one-to-zero {}: self.ramp_chunk_count[external_req_id] += 1",
        second_chunk_processed,
        CAUGHT,
    ),
)
"""(function, mutant id with ``{}`` for ``OmniChunkTransferAdapter.<function>``, the
walk to where it differs, what the walk raises under the mutant and its message's pattern)."""


def mutant_id(function: str, template: str) -> str:
    """The id `template` names, checked to be one of `function`'s mutants."""
    qualified = f"OmniChunkTransferAdapter.{function}"
    wanted = template.replace("{}", qualified, 1)
    assert wanted in {m.id for m in source_mutants(CTA_FILE, [qualified])}, wanted
    return wanted


@pytest.fixture
def run() -> Iterator[Lockstep]:
    lockstep = Lockstep()
    yield lockstep
    lockstep.close()


def test_the_ramp_count_starts_again_after_a_cleared_segment_end(run: Lockstep) -> None:
    segment_end_sent(run)
    run.do("next_segment", ext=EXT0).do("save_chunk", ext=EXT0).do("begin")
    assert run.binding.adapter.ramp_chunk_count.get("ext0", 0) == 0
    run.do("process", outcome="payload").do("put", outcome="ok").do("finish")
    assert run.binding.adapter.ramp_chunk_count["ext0"] == 1


def test_the_freed_id_is_one_no_map_holds() -> None:
    assert FREED_REQUEST not in {f"{e}-r{g}" for e in ("ext0", "ext1") for g in range(9)}


@pytest.mark.parametrize("unmutated", [False, True], ids=["mutant", "unmutated"])
@pytest.mark.parametrize(
    ("function", "template", "walk", "raises"),
    KILLS,
    ids=[f"{f}-{p.split(':')[0].split()[0]}-{i}" for i, (f, p, _, _) in enumerate(KILLS)],
)
def test_a_survivor_is_now_caught(
    function: str,
    template: str,
    walk: Callable[[Lockstep], None],
    raises: tuple[type[Exception], str],
    unmutated: bool,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    found = mutant_id(function, template)
    if not unmutated:
        for name, replacement in source_mutant(REAL.adapter, function, found).items():
            monkeypatch.setattr(REAL.adapter, name, replacement)
    run = Lockstep()
    try:
        if unmutated:
            walk(run)
        else:
            with pytest.raises(raises[0], match=raises[1]):
                walk(run)
    finally:
        run.close()


# -- the scheduler step that queues the saves: OmniARScheduler.update_from_output --------

ARS = importlib.import_module("vllm_omni.core.sched.omni_ar_scheduler").OmniARScheduler


def stop_with_update_queued(run: Lockstep) -> None:
    """Two segment ends, the second with the next segment's update already queued."""
    sent(run.do("new_request", ext=EXT0), "save_segment_end").do("next_segment", ext=EXT0)
    run.do("save_segment_end", ext=EXT0)


def test_a_stop_applies_a_queued_update_and_the_save_keeps_the_captured_generation(
    run: Lockstep,
) -> None:
    stop_with_update_queued(run)
    request = run.binding.requests[EXT0]
    assert request.status == REAL.status.WAITING  # resumed by the stop itself
    assert request._omni_segment_generation == 2  # moved on before save_async ran
    (task,) = run.binding.adapter._pending_save_reqs
    assert task["is_segment_finished"] and task["segment_generation"] == 1


def stale_step_dropped(run: Lockstep) -> None:
    """An asynchronously scheduled request (the second one) ends a segment and saves a
    chunk of the next: the step that ran ahead arrives stale first and saves nothing."""
    run.do("new_request", ext=EXT0).do("new_request", ext=EXT1)
    run.do("save_chunk", ext=EXT0).do("save_segment_end", ext=EXT1)
    run.do("next_segment", ext=EXT1).do("save_chunk", ext=EXT1)


def test_an_asynchronous_request_drops_the_stale_step_after_a_segment_stop(
    run: Lockstep,
) -> None:
    run.do("new_request", ext=EXT0).do("new_request", ext=EXT1)
    run.do("save_chunk", ext=EXT0).do("save_segment_end", ext=EXT1)
    request = run.binding.requests[EXT1]
    assert run.binding.lookahead == {"ext0-r1": 0, "ext1-r1": 1}
    assert (request.num_stale_output_tokens, request.num_output_placeholders) == (1, 0)
    run.do("next_segment", ext=EXT1).do("save_chunk", ext=EXT1)
    assert request.num_stale_output_tokens == 0 and request.num_in_flight_tokens == 1
    assert len(run.binding.adapter._pending_save_reqs) == 3  # no save of the stale step


def terminal_saved(run: Lockstep) -> None:
    """A request's end: update_from_output frees it, then queues its terminal."""
    run.do("new_request", ext=EXT0).do("save_terminal", ext=EXT0)


def two_chunks_saved(run: Lockstep) -> None:
    """Two chunks: the second after a scheduler step with no inter-stage output."""
    run.do("new_request", ext=EXT0).do("save_chunk", ext=EXT0).do("save_chunk", ext=EXT0)


SCHEDULER_KILLS: tuple[tuple[str, Callable[[Lockstep], None]], ...] = (
    # the boundary generation captured before the stop, and passed on
    (
        'delete-statement {}: save_kwargs["segment_generation"] = boundary_generation',
        stop_with_update_queued,
    ),
    ("delete-statement {}: boundary_generation = int(", stop_with_update_queued),
    ("negate-condition {}: if is_segment_finished:", stop_with_update_queued),
    # a stop of a resumable request is a segment end; of another, the terminal
    ("drop-not {}: is_segment_finished = not finished", stop_with_update_queued),
    ("delete-statement {}: finished = self._handle_stopped_request(request)", terminal_saved),
    # the save is queued for a payload, a segment end or the end
    (
        "swap-and-or {}: inter_stage_output is not None or is_segment_finished or finished",
        terminal_saved,
    ),
    ("delete-statement {}: self.chunk_transfer_adapter.save_async(", terminal_saved),
    ("swap-and-or {}: if self.chunk_transfer_adapter is not None and (", two_chunks_saved),
    # a finished request is no longer resumable, so its save is the terminal
    ("negate-condition {}: if finished:", terminal_saved),
    ("delete-statement {}: request.resumable = False #3", terminal_saved),
    # the stale share of an asynchronous request's step that ran ahead of a segment stop
    (
        "delete-statement {}: request.num_stale_output_tokens = request.num_in_flight",
        stale_step_dropped,
    ),
)
"""(mutant id prefix with ``{}`` for ``OmniARScheduler.update_from_output``, the walk to
where it differs): each reaches the adapter through the arguments of ``save_async``."""


@pytest.mark.parametrize("unmutated", [False, True], ids=["mutant", "unmutated"])
@pytest.mark.parametrize(
    ("prefix", "walk"),
    SCHEDULER_KILLS,
    ids=[f"{p.split()[0]}-{i}" for i, (p, _) in enumerate(SCHEDULER_KILLS)],
)
def test_a_scheduler_mutant_is_caught(
    prefix: str,
    walk: Callable[[Lockstep], None],
    unmutated: bool,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    found = source_mutant_id(ARS, "update_from_output", prefix)
    if not unmutated:
        for name, replacement in source_mutant(ARS, "update_from_output", found).items():
            monkeypatch.setattr(ARS, name, replacement)
    run = Lockstep()
    try:
        if unmutated:
            walk(run)
        else:
            with pytest.raises((AssertionError, AdapterError)):
                walk(run)
    finally:
        run.close()


@pytest.mark.parametrize(
    ("module", "cls"),
    [(REAL.adapter.__module__, "OmniChunkTransferAdapter"), (ARS.__module__, "OmniARScheduler")],
)
def test_each_declared_equivalent_is_a_mutant_of_the_real_code(module: str, cls: str) -> None:
    declared = load_equivalents(default_equivalents(), "chunk_transfer", module)
    assert declared, module
    functions = sorted({i.split(": ", 1)[0].split()[1].split(".")[1] for i in declared})
    ids = {m.id for m in source_mutants(module_file(module), [f"{cls}.{f}" for f in functions])}
    assert set(declared) <= ids, sorted(set(declared) - ids)
