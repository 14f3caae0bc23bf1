"""A fuzz run's garbage collection: Python's own pacing against ``statecore fuzz``'s, side by side.

``statecore fuzz`` pauses the cyclic collector inside each example and, while
the run lasts, spaces full collections (`statecore.fuzzing.collector`): the
successor memo outlives every example, and each full collection walks all of
it. This runs one workload under each pacing, each in a fresh process and the
two alternating (A B A B ...), and prints CPU seconds, steps per CPU-second
and the seconds the collector took, by generation. "Python" keeps the
interpreter's thresholds for the run (the per-example pause stays on in both).

Workload: the search phase of `fuzz` (no guided phase; a finding would end the
run) on the real vLLM-Omni 0.30.0 adapter through the ``vllm-omni`` binding
when the vLLM stack is installed, else on the ``chunk_transfer`` model run as
its own implementation: one warm-up run, then three runs of ``--examples``
examples (seeds 1-3) in the same process, so the memo grows as in a long run.

Run: ``python benchmarks/fuzz_collector.py [--examples N] [--rounds R]``. The last
line is ``RESULT python_steps_per_cpu_s=<x> statecore_steps_per_cpu_s=<y> ratio=<y/x>``.
"""

from __future__ import annotations

import argparse
import gc
import json
import statistics
import subprocess
import sys
import time
from collections import Counter
from collections.abc import Callable
from typing import Any

PACINGS = ("python", "statecore")


def workload() -> tuple[str, Any, Callable[[], Any]]:
    """(what it is, the model, the implementation factory)."""
    from statecore.adapter import AdapterError, SystemAdapter

    try:
        from statecore.models.bindings.vllm_omni import (
            OmniChunkTransferAdapterBinding,
            fuzz_system_0_30_0,
            real_classes,
        )

        real_classes()
        return "the real 0.30.0 adapter", fuzz_system_0_30_0(), OmniChunkTransferAdapterBinding
    except (ImportError, AdapterError):  # no vLLM stack here
        from statecore.models.chunk_transfer import CHUNK_TRANSFER

        return (
            "chunk_transfer as its own implementation",
            CHUNK_TRANSFER,
            (lambda: SystemAdapter(CHUNK_TRANSFER, "model:chunk_transfer")),
        )


def measure(pacing: str, examples: int) -> dict[str, Any]:
    """One process's runs under `pacing`: steps, CPU seconds and collector seconds."""
    from statecore.fuzzing import collector
    from statecore.fuzzing.fuzz import fuzz

    if pacing == "python":  # a spacing at the interpreter's own threshold changes nothing
        collector.FULL_COLLECTION_SPACING = gc.get_threshold()[2]
    what, system, factory = workload()
    fuzz(system, factory, seed=99, max_examples=examples // 6, guided=False)  # warm-up
    spent: Counter[int] = Counter()
    started = [0.0]

    def timed(phase: str, info: dict[str, int]) -> None:
        if phase == "start":
            started[0] = time.perf_counter()
        else:
            spent[info["generation"]] += time.perf_counter() - started[0]

    gc.callbacks.append(timed)
    steps, cpu = 0, time.process_time()
    for seed in (1, 2, 3):
        report = fuzz(system, factory, seed=seed, max_examples=examples, guided=False)
        steps += report.steps
    cpu = time.process_time() - cpu
    gc.callbacks.remove(timed)
    return {"what": what, "steps": steps, "cpu": cpu, "gc": [spent[g] for g in range(3)]}


def main() -> None:
    if sys.argv[1:2] == ["--measure"]:
        print(json.dumps(measure(sys.argv[2], int(sys.argv[3]))))
        return
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--examples", type=int, default=300, help="examples per run (3 runs)")
    parser.add_argument("--rounds", type=int, default=2, help="fresh processes per pacing")
    args = parser.parse_args()
    rows: dict[str, list[dict[str, Any]]] = {p: [] for p in PACINGS}
    for _ in range(args.rounds):
        for pacing in PACINGS:
            command = [sys.executable, __file__, "--measure", pacing, str(args.examples)]
            done = subprocess.run(command, capture_output=True, text=True, check=False)
            if done.returncode:
                last = (done.stderr.strip().splitlines() or ["no output"])[-1]
                raise SystemExit(f"benchmarks/fuzz_collector.py: the {pacing} run failed: {last}")
            rows[pacing].append(json.loads(done.stdout.splitlines()[-1]))
    what = rows[PACINGS[0]][0]["what"]
    print(f"fuzz search on {what}: 3 runs of {args.examples} examples per process,")
    print(f"{args.rounds} fresh processes per pacing, alternating; collector seconds by generation")
    print(
        f"{'pacing':<12}{'steps':>9}{'cpu s':>8}{'steps/cpu s':>13}"
        f"{'young':>8}{'middle':>8}{'full':>8}"
    )
    rates = {}
    for pacing in PACINGS:
        for row in rows[pacing]:
            young, middle, full = row["gc"]
            rate = row["steps"] / row["cpu"]
            print(
                f"{pacing:<12}{row['steps']:>9,}{row['cpu']:>8.2f}{rate:>13,.0f}"
                f"{young:>8.2f}{middle:>8.2f}{full:>8.2f}"
            )
        rates[pacing] = statistics.median(r["steps"] / r["cpu"] for r in rows[pacing])
    ratio = rates["statecore"] / rates["python"]
    print(
        f"RESULT python_steps_per_cpu_s={rates['python']:.0f} "
        f"statecore_steps_per_cpu_s={rates['statecore']:.0f} ratio={ratio:.2f}"
    )


if __name__ == "__main__":
    main()
