"""Pinned exploration figures of every bundled target and variant.

A refactor of the models or the engine must not change what checking finds:
each target's distinct states, transitions, depth, and each property's
verdict with its trace (the action labels), with symmetry on and off. The
figures live in ``tests/golden/targets.json``; ``python tests/golden_targets.py``
rewrites it after a deliberate change to a model, and the diff shows what moved.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

from statecore.models import chunk_transfer, request_state

from statecore.check.explore import explore
from statecore.registry import bundled
from statecore.system import System

GOLDEN = Path(__file__).parent / "golden" / "targets.json"


# Two ids, where symmetry reduction has something to do (the bundled targets
# have one id each): both systems' ids are interchangeable (chunk_transfer's
# failure sweep steps them in id order, which only reorders the transitions taken).
EXTRA = {
    "request_state_two_ids": lambda: request_state.build(
        request_state.RequestStateConfig(ids=2, generations=1)
    ),
    "chunk_transfer_two_ids": lambda: chunk_transfer.build(
        chunk_transfer.ChunkTransferConfig(ids=2, generations=1, saves=0, segments=0)
    ),
}


def systems() -> dict[str, Any]:
    """Every system the golden file pins, by name, as a factory."""
    found: dict[str, Any] = {t.name: t.load for t in bundled()}
    found.update(EXTRA)
    return found


def figures(name: str, *, symmetry: bool) -> dict[str, Any]:
    """What a full search of system `name` finds, as JSON-ready data."""
    system: System = systems()[name]()
    report = explore(system, symmetry=symmetry, stop_on_violation=False)
    return {
        "states": report.states,
        "transitions": report.transitions,
        "depth": report.depth,
        "complete": report.complete,
        "notes": list(report.notes),
        "verdicts": {
            r.property.id: {
                "verdict": r.verdict,
                "trace": None if r.trace is None else [str(a) for a in r.trace.actions],
            }
            for r in report.results
        },
    }


def all_figures() -> dict[str, dict[str, Any]]:
    """Figures of every bundled target, symmetry on and off."""
    return {
        name: {"symmetry": figures(name, symmetry=True), "plain": figures(name, symmetry=False)}
        for name in systems()
    }


if __name__ == "__main__":
    GOLDEN.write_text(json.dumps(all_figures(), indent=1, sort_keys=True) + "\n")
    print(f"wrote {GOLDEN}", file=sys.stderr)
