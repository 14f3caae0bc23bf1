"""Survivors of ``statecore mutate`` on the real adapter, each now caught by a comparison.

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

from collections.abc import Callable, Iterator

import pytest

pytest.importorskip("vllm_omni")

from statecore.models.bindings.vllm_omni import FREED_REQUEST
from statecore.models.bindings.vllm_omni_mutants import source_mutant
from test_vllm_adapter import CTA_FILE, EXT0, REAL, Lockstep

from statecore.fuzzing.source_mutants import source_mutants

FINISH = "finish_requests"


def abort_naming_a_freed_request(run: Lockstep) -> None:
    """An abort whose id list also names a request the scheduler already freed."""
    run.do("new_request", ext=EXT0).do("save_chunk", ext=EXT0)
    run.binding.aborts = 3  # the fourth shape of the binding's rotation
    run.do("abort", ext=EXT0)
    assert run.seen["senders"] == ()  # the live request was aborted all the same


KILLS: tuple[tuple[str, str, Callable[[Lockstep], None], type[BaseException]], ...] = (
    # finish_requests skips an id its map lacks (CTA:1601-1604); a mutant that
    # reads the missing request's status raises on the freed id.
    (FINISH, "negate-condition {}: if request is None:", abort_naming_a_freed_request, Exception),
    (FINISH, "swap-is {}: if request is None:", abort_naming_a_freed_request, Exception),
    (FINISH, "delete-statement {}: continue", abort_naming_a_freed_request, Exception),
)
"""(function, mutant id with ``{}`` for ``OmniChunkTransferAdapter.<function>``, the
walk to where it differs, what the walk raises under the mutant)."""


def mutant_id(function: str, template: str) -> str:
    """The id `template` names, checked to be one of `function`'s mutants."""
    qualified = f"OmniChunkTransferAdapter.{function}"
    wanted = template.replace("{}", qualified)
    assert wanted in {m.id for m in source_mutants(CTA_FILE, [qualified])}, wanted
    return wanted


@pytest.fixture
def run() -> Iterator[Lockstep]:
    lockstep = Lockstep()
    yield lockstep
    lockstep.close()


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
    raises: type[BaseException],
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
            with pytest.raises(raises):
                walk(run)
    finally:
        run.close()
