"""The scale goal on chunk_transfer at two ids, for `benchmarks/explore.py`.

``ChunkTransferConfig(ids=2, generations=2, saves=1, segments=1)`` checked
completely on this machine: 64-bit fingerprints, on 1 or 2 processes, within a
time budget (the goal: 600 s) and 4 GB, with its verdicts; and what symmetry and partial-order
reduction each take off it, with the reason when a factor is 1.00 (measured
on the complete two-id space without saves, and on the first N states of the
goal's). Run directly (``python benchmarks/scale_goal.py BUDGET WORKERS``) it is
the complete check alone, printing its figures as one JSON line.
"""

from __future__ import annotations

import gc
import json
import os
import resource
import subprocess
import sys
import time
from collections import Counter
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from statecore.models.chunk_transfer import ChunkTransferConfig, build

from statecore.check.explore import explore
from statecore.check.memory import resident_memory
from statecore.system import System

CT_TWO_IDS = ChunkTransferConfig(ids=2, generations=2, saves=1, segments=1)
GOAL_BYTES = 4 << 30  # the goal's memory bound, shared by the coordinator and the workers
COORDINATOR_BYTES = 512 << 20  # with workers, kept back for the coordinator; they share the rest


def complete_check(
    budget: float, workers: int, config: ChunkTransferConfig = CT_TWO_IDS
) -> dict[str, Any]:
    """chunk_transfer (`config`: two ids) with 64-bit fingerprints on `workers` processes."""
    system = build(config)
    before = resident_memory()
    cpu = time.process_time()
    levels: list[int] = []
    memory = GOAL_BYTES if workers == 1 else GOAL_BYTES - COORDINATOR_BYTES  # shared out
    with counting_levels(levels):
        report = explore(
            system,
            stop_on_violation=False,
            fingerprints=64,
            workers=workers,
            max_memory=memory,
            max_seconds=budget,
        )
    cpu = time.process_time() - cpu
    children = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu += children.ru_utime + children.ru_stime
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
    if workers > 1:
        peak += workers * children.ru_maxrss * 1024 - before * workers
    return {
        "states": report.states,
        "depth": report.depth,
        "complete": report.complete,
        "complete_depth": report.complete_depth,
        "seconds": report.seconds,
        "cpu": cpu,
        "bytes": max(0, peak - before) / max(1, report.states),
        "peak": peak,
        "judged": sum(r.verdict != "unknown" for r in report.results),
        "verdicts": dict(Counter(r.verdict for r in report.results)),
        "violated": [r.property.id for r in report.results if r.verdict == "violated"],
        "properties": len(system.properties),
        "stop": report.stop,
        "levels": levels,
    }


@contextmanager
def counting_levels(levels: list[int]) -> Iterator[None]:
    """Append to `levels` the new states of each depth the search completes (the initial
    states first), on one process or on workers."""
    from statecore.check import explore as one
    from statecore.check import parallel

    expand_level, merge = one.Explorer._expand_level, parallel.ParallelSearch._merge

    def expanded(self: Any, level: Any, depth: int, deeper: Any, *rest: Any) -> bool:
        if not levels:
            levels.append(len(level))
        going_on: bool = expand_level(self, level, depth, deeper, *rest)
        if going_on and deeper:
            levels.append(len(deeper))
        return going_on

    def merged(self: Any, reports: list[Any], command: str) -> None:
        merge(self, reports, command)
        new = sum(r.new for r in reports)
        if new and not any(r.stopped for r in reports):  # (a level a bound cut short: not one)
            levels.append(new)

    one.Explorer._expand_level = expanded  # type: ignore[method-assign,assignment]
    parallel.ParallelSearch._merge = merged  # type: ignore[method-assign]
    try:
        yield
    finally:
        one.Explorer._expand_level = expand_level  # type: ignore[method-assign]
        parallel.ParallelSearch._merge = merge  # type: ignore[method-assign]


def reduction_factors(bound: int) -> None:
    """Symmetry and POR on chunk_transfer at two ids: each factor, and why it is what it is.

    Symmetry on the complete two-id space without saves; POR there and on the
    first `bound` states of the goal's space (where both searches stop at the
    bound, so the share of states reduced is the figure, not the factor). POR
    runs twice: judging every property, and judging none (against a plain search
    that judges none either, whose nodes carry no monitor state), where no step
    is visible: the most any ample set takes away while actions read and write
    what they do now.
    """
    print(f"\n{'chunk_transfer, two ids':<44}{'plain':>10}{'reduced':>10}{'factor':>8}  why")
    print("-" * 110)
    small = ChunkTransferConfig(ids=2, generations=1, saves=0, segments=0)
    for label, config, limit in (
        ("ids=2 generations=1 saves=0 (complete)", small, None),
        (f"ids=2 generations=2 saves=1 (first {bound:,})", CT_TWO_IDS, bound),
    ):
        plain = explore(build(config), symmetry=False, stop_on_violation=False, max_states=limit)
        if plain.complete:  # a bounded row could stop before the guard meets what it checks
            sym = explore(build(config), symmetry=True, stop_on_violation=False)
            why = sym.notes[0].split("; every state")[0].split("off: ")[-1] if sym.notes else "on"
            factor = plain.states / max(1, sym.states)
            print(f"  symmetry  {label:<34}{plain.states:>10}{sym.states:>10}{factor:>8.2f}  {why}")
        states, share = por_states(config, limit, None)
        factor = plain.states / max(1, states) if plain.complete else 1.0
        print(
            f"  POR       {label:<34}{plain.states:>10}{states:>10}{factor:>8.2f}  "
            f"{share:.1%} of states with a proper ample set; {visible_share(build(config), limit)}"
        )
        bare = explore(
            build(config), symmetry=False, stop_on_violation=False, max_states=limit, properties=()
        )  # no monitor either: its nodes are the system's states alone
        states, share = por_states(config, limit, ())
        factor = bare.states / max(1, states) if bare.complete else 1.0
        print(
            f"  POR, no property judged{'':<11}{bare.states:>10}{states:>10}{factor:>8.2f}  "
            f"{share:.1%} of states with a proper ample set: the most POR takes while "
            "actions read and write what they do"
        )


def por_states(
    config: ChunkTransferConfig, limit: int | None, properties: tuple[()] | None
) -> tuple[int, float]:
    """The states of a POR search of `config` (judging `properties`, None: the model's) and
    the share of them it expanded with a proper ample set."""
    from statecore.check import reduction

    reducers: list[Any] = []
    original = reduction.Reducer.__init__

    def keep(self: Any, *args: Any, **kwargs: Any) -> None:
        original(self, *args, **kwargs)
        reducers.append(self)

    reduction.Reducer.__init__ = keep  # type: ignore[method-assign]
    try:
        system = build(config)
        report = explore(
            system, por=True, stop_on_violation=False, max_states=limit, properties=properties
        )
    finally:
        reduction.Reducer.__init__ = original  # type: ignore[method-assign]
    last = reducers[-1]
    return report.states, last.reduced / max(1, last.reduced + last.full)


def visible_share(system: System, limit: int | None) -> str:
    """How many enabled steps write a location an undecided always/sometimes reads (C2)."""
    from statecore.check import reduction

    counts = [0, 0]
    original = reduction.Reducer.ample

    def ample(self: Any, node: Any, steps: Any, *rest: Any) -> Any:
        chosen = original(self, node, steps, *rest)
        if not self.grown:
            for step_ in steps:
                writes = self._footprint(self.index[step_.action], node[0])[1]
                counts[0] += bool(writes & self.visible)
                counts[1] += 1
        return chosen

    reduction.Reducer.ample = ample  # type: ignore[method-assign,assignment]
    try:
        explore(system, por=True, stop_on_violation=False, max_states=limit)
    finally:
        reduction.Reducer.ample = original  # type: ignore[method-assign]
    share = counts[0] / max(1, counts[1])
    return f"{share:.1%} of enabled steps write what an undecided always/sometimes reads"


def goal_run(budget: float, workers: int) -> None:
    """The complete check of chunk_transfer at two ids, in a fresh process."""
    print(
        f"\nchunk_transfer ids=2 generations=2 saves=1 segments=1, complete: 64-bit fingerprints, "
        f"{workers} workers, budget {budget:.0f} s, {GOAL_BYTES >> 30} GB"
    )
    command = [sys.executable, __file__, str(budget), str(workers)]
    env = {**os.environ, "PYTHONPATH": os.path.dirname(__file__)}
    out = subprocess.run(command, capture_output=True, text=True, check=True, env=env)
    got = json.loads(out.stdout.splitlines()[-1])
    done = (
        "complete"
        if got["complete"]
        else f"NOT complete ({got['stop']}), complete to depth {got['complete_depth']}"
    )
    print(
        f"  {got['states']:,} states, depth {got['depth']}, {got['seconds']:.0f} s, "
        f"{got['cpu']:.0f} cpu s ({got['states'] / max(got['cpu'], 1e-9):.0f} states/cpu s), "
        f"{got['bytes']:.0f} B/state, peak {got['peak'] / 2**30:.2f} GB: {done}; "
        f"{got['judged']}/{got['properties']} properties judged"
    )
    levels = got["levels"]
    if len(levels) >= 2:
        growth = levels[-1] / max(1, levels[-2])
        print(
            f"  new states by depth: {', '.join(f'{n:,}' for n in levels)} "
            f"(the last level x{growth:.2f} the one before)"
        )
    verdicts = ", ".join(f"{count} {verdict}" for verdict, count in sorted(got["verdicts"].items()))
    violated = f" ({', '.join(got['violated'])})" if got["violated"] else ""
    print(f"  verdicts: {verdicts or 'none'}{violated}")


if __name__ == "__main__":
    gc.disable()
    print(json.dumps(complete_check(float(sys.argv[1]), int(sys.argv[2]))))
