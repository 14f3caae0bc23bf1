"""Partial-order reduction: states and transitions with and without it, side by side.

For each system, the full search and the reduced one (`explore(..., por=True)`),
both without symmetry reduction (the two are not combined): distinct states,
transitions, depth, CPU seconds, and the reduction factors (full / reduced).
The verdicts must agree; a row that disagrees is marked ``VERDICTS DIFFER``
(the differential tests in ``tests/test_por.py`` say the same, on more systems).

Systems: every bundled model (``--variants`` adds the known-bug variants),
the explore benchmark's model at a few bounds (``benchmarks/explore.py``), and
``chunk_transfer`` at two ids (``ChunkTransferConfig(ids=2, generations=2,
saves=1, segments=1)``) under a state bound: there both searches stop at the
bound, and the row compares how deep each got with that many states.

Run: ``python benchmarks/por.py [--quick] [--variants] [--bound N]``. The
last line is ``RESULT por_states_factor=<x> por_transitions_factor=<y>``: the
geometric means over the complete rows.
"""

from __future__ import annotations

import argparse
import functools
import importlib.util
import math
import sys
import time
from collections.abc import Callable
from pathlib import Path
from types import ModuleType

from statecore.models.chunk_transfer import ChunkTransferConfig, build

from statecore.check.explore import Report, explore
from statecore.registry import bundled
from statecore.system import System

HERE = Path(__file__).resolve().parent


def explore_benchmark() -> ModuleType:
    """``benchmarks/explore.py``, for its scalable model."""
    spec = importlib.util.spec_from_file_location("benchmark_explore", HERE / "explore.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # its dataclasses look their module up
    spec.loader.exec_module(module)
    return module


def timed(system: System, por: bool, bound: int | None) -> tuple[Report, float]:
    cpu = time.process_time()
    report = explore(system, symmetry=False, stop_on_violation=False, por=por, max_states=bound)
    return report, time.process_time() - cpu


def verdicts(report: Report) -> dict[str, str]:
    return {r.property.id: r.verdict for r in report.results}


HEADER = (
    f"{'system':<34}{'states':>9}{'POR':>9}{'x':>6}{'transitions':>12}{'POR':>10}{'x':>6}"
    f"{'depth':>6}{'POR':>5}{'cpu s':>7}{'POR':>7}  searches"
)


def compare(name: str, system: System, bound: int | None = None) -> tuple[float, float] | None:
    """Print one row: the full and the reduced search of `system`; the factors if complete."""
    full, full_cpu = timed(system, False, bound)
    reduced, por_cpu = timed(system, True, bound)
    searches = reduced.notes[0].split("learned in ")[1].split()[0] if reduced.notes else "?"
    states = full.states / reduced.states
    transitions = full.transitions / max(reduced.transitions, 1)
    complete = full.complete and reduced.complete
    same = "" if not complete or verdicts(full) == verdicts(reduced) else "  VERDICTS DIFFER"
    cut = "" if complete else "  (stopped at the state bound)"
    print(
        f"{name:<34}{full.states:>9}{reduced.states:>9}{states:>6.2f}{full.transitions:>12}"
        f"{reduced.transitions:>10}{transitions:>6.2f}{full.depth:>6}{reduced.depth:>5}"
        f"{full_cpu:>7.1f}{por_cpu:>7.1f}  {searches}{cut}{same}",
        flush=True,
    )
    return (states, transitions) if complete else None


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="small systems only")
    parser.add_argument("--variants", action="store_true", help="the known-bug variants too")
    parser.add_argument(
        "--bound", type=int, default=300_000, help="state bound of the two-id chunk_transfer"
    )
    args = parser.parse_args()
    rows: list[tuple[str, Callable[[], System], int | None]] = []
    for target in bundled():
        if target.kind == "model" or args.variants:
            rows.append((target.name, target.load, None))
    bench = explore_benchmark()
    for b in bench.QUICK[:2] if args.quick else bench.QUICK:
        rows.append((f"explore model {b}", functools.partial(bench.model, b), None))
    if not args.quick:
        two = ChunkTransferConfig(ids=2, generations=2, saves=1, segments=1)
        rows.append(("chunk_transfer ids=2 g=2 s=1 seg=1", lambda: build(two), args.bound))
    print(HEADER)
    print("-" * len(HEADER))
    factors = []
    for name, factory, bound in rows:
        if args.quick and name.startswith("chunk_transfer"):
            continue
        found = compare(name, factory(), bound)
        if found is not None:
            factors.append(found)
    mean = [math.exp(sum(math.log(f[k]) for f in factors) / len(factors)) for k in (0, 1)]
    print(f"RESULT por_states_factor={mean[0]:.2f} por_transitions_factor={mean[1]:.2f}")


if __name__ == "__main__":
    main()
