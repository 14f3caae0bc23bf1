"""Branch coverage of the real vLLM-Omni 0.30.0 adapter's per-request lifecycle under a fuzz run.

A passing fuzz run says nothing about the code its binding never drives. This fuzzes
every system bound to the real adapter (`BOUND`: ``chunk_transfer`` through the
``vllm-omni`` binding and through ``vllm-omni-shm`` on the real shared-memory
connector, ``segments`` through ``vllm-omni-segments``, ``receiver_system`` through
``vllm-omni-receiver`` and ``vllm-omni-receiver-generation``), ``--budget`` seconds in
all, split evenly (the known 0.30.0 findings allowed, as ``statecore fuzz`` does), while
coverage.py measures ``chunk_transfer_adapter.py``, and prints, per lifecycle method
(`SENDER`, then `RECEIVER`), the branches taken and the statements run, with what was
missed: where the bindings are blind. The receiving stage's chunk gate, which the
receiver bindings drive as its scheduler does (`GATE`: ``process_pending_chunks``,
``restore_queues`` and the two queue passes, plain and with an active-stream window),
is printed as a third group, with the figure of all three together; the RESULT line
keeps to the lifecycle methods, as issue 13's goal counts them.

Before that, in the same run and with the same budget, it measures the sender bindings
as they were before the shared-memory binding and the processor inputs (`BEFORE`: the
four systems, ``vllm-omni`` without codec streams, side tables and
``finish_requests(None, ...)``; the receiver bindings as they are today), so the two
figures are side by side.

Run with the vLLM stack and coverage.py installed:
``python benchmarks/coverage.py [--budget SECONDS] [--seed N]``. The last line is

``RESULT branch_coverage=<pct> branches=<k>/<n> sender=<pct> receiver=<pct> before=<pct>``

where each percent is branches taken over branches, as in issue 13's goal, and
``before`` is the overall figure of `BEFORE`.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

# Run as a script, this file's folder comes first on sys.path, where its own name
# would shadow coverage.py itself.
_HERE = Path(__file__).resolve().parent
sys.path[:] = [p for p in sys.path if Path(p or ".").resolve() != _HERE]

from statecore.models.bindings.vllm_omni import OmniChunkTransferAdapterBinding  # noqa: E402

from statecore.fuzzing.coverage import (  # noqa: E402
    CodeCoverage,
    FunctionCoverage,
    Measurement,
    parse_target,
)
from statecore.fuzzing.fuzz import fuzz  # noqa: E402
from statecore.registry import resolve_adapter  # noqa: E402

MODULE = "vllm_omni.distributed.omni_connectors.transfer_adapter.chunk_transfer_adapter"
CLASS = "OmniChunkTransferAdapter"
SENDER = (
    "save_async",
    "_send_single_request",
    "_send_single_request_for_generation",
    "_release_terminal_fence",
    "_sender_generation_is_active",
    "cleanup_sender",
    "_clear_sender_state_locked",
    "finish_requests",
    "cleanup",
)
BEFORE = (
    ("chunk_transfer", "vllm-omni"),
    ("segments", "vllm-omni-segments"),
    ("receiver_system", "vllm-omni-receiver"),
    ("receiver_system", "vllm-omni-receiver-generation"),
)
"""(target, adapter) of the systems bound before the shared-memory binding."""
BOUND = (*BEFORE, ("chunk_transfer", "vllm-omni-shm"))
"""(target, adapter) of every system bound to the real adapter."""


class FirstBinding(OmniChunkTransferAdapterBinding):
    """``vllm-omni`` as first bound: no codec streams, no side tables, no None ids."""

    processor_inputs = False


RECEIVER = (
    "load_async",
    "_poll_single_request",
    "_commit_received_chunk",
    "cleanup_receiver",
    "is_done_receiving_chunks",
)
GATE = (
    "process_pending_chunks",
    "restore_queues",
    "_process_chunk_queue_legacy",
    "_process_chunk_queue",
)
"""The receiving stage's scheduler helpers around the lifecycle (the chunk gate)."""


def branch_percent(f: FunctionCoverage) -> float:
    return 100.0 * f.branches_taken / f.branches if f.branches else 100.0


def subtotal(name: str, functions: list[FunctionCoverage]) -> FunctionCoverage:
    return FunctionCoverage(
        name,
        sum(f.lines for f in functions),
        sum(f.lines_run for f in functions),
        sum(f.branches for f in functions),
        sum(f.branches_taken for f in functions),
    )


def show(reached: CodeCoverage) -> tuple[FunctionCoverage, FunctionCoverage, FunctionCoverage]:
    """Print the table; return the sender, receiver and overall sums (the gate apart)."""
    by_short = {f.name.rsplit(".", 1)[-1]: f for f in reached.functions}
    width = max(len(n) for n in (*SENDER, *RECEIVER, *GATE, "total"))
    sums = []
    groups = [("sender", SENDER), ("receiver", RECEIVER)]
    if all(n in by_short for n in GATE):
        groups.append(("scheduler gate", GATE))
    for side, names in groups:
        rows = [by_short[n] for n in names]
        print(f"{side}:")
        for f in [*rows, subtotal(f"{side} total", rows)]:
            label = f.name.rsplit(".", 1)[-1]
            missed = f"  missed {f.missed}" if f.missed else ""
            share = f"{branch_percent(f):5.1f}%" if f.branches else "     -"
            line = (
                f"  {label:<{width + 7}} branches {f.branches_taken:>3}/{f.branches:<3} "
                f"{share}   lines {f.lines_run:>3}/{f.lines:<3}{missed}"
            )
            print(line.rstrip())
        sums.append(subtotal(side, rows))
    sender, receiver = sums[:2]
    overall = subtotal("total", sums[:2])
    print(
        f"total: branches {overall.branches_taken}/{overall.branches} "
        f"{branch_percent(overall):.1f}%, lines {overall.lines_run}/{overall.lines}"
    )
    if len(sums) > 2:
        every = subtotal("total", sums)
        print(
            f"total with the scheduler gate: branches {every.branches_taken}/{every.branches} "
            f"{branch_percent(every):.1f}%, lines {every.lines_run}/{every.lines}"
        )
    return sender, receiver, overall


def measure(
    bound: tuple[tuple[str, str], ...], budget: float, seed: int, *, first: bool
) -> CodeCoverage:
    """Fuzz every system of `bound`, `budget` seconds in all, under coverage.py (the
    gate too, unless `first`: the first bindings did not drive it)."""
    names = (*SENDER, *RECEIVER) if first else (*SENDER, *RECEIVER, *GATE)
    target = parse_target(f"{MODULE}:{','.join(f'{CLASS}.{n}' for n in names)}")
    measurement = Measurement(target)
    measurement.start()
    try:
        for name, adapter in bound:
            system, factory, _ = resolve_adapter(name, adapter)
            if first and adapter == "vllm-omni":
                factory = FirstBinding
            share = budget / len(bound)
            report = fuzz(system, factory, budget=share, seed=seed)
            found = report.finding
            verdict = "nothing new found" if found is None else f"FOUND {found.property_id}"
            guided = report.guided
            print(
                f"fuzz {name} / {adapter}, --budget {share:g} --seed {seed}: "
                f"{verdict}, {report.seconds:.1f}s, {report.all_steps} steps "
                f"(guided {guided.paths if guided else 0} paths, search {report.examples} "
                f"examples, {len(report.known)} known findings)"
            )
    finally:
        reached = measurement.stop()
    print(f"coverage.py branch coverage of {target.path}")
    return reached


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--budget", type=float, default=60.0, metavar="SECONDS")
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args(argv)
    print(f"before: {len(BEFORE)} systems as first bound")
    _, _, before = show(measure(BEFORE, args.budget, args.seed, first=True))
    print(f"\nafter: {len(BOUND)} systems")
    sender, receiver, overall = show(measure(BOUND, args.budget, args.seed, first=False))
    print(
        f"\nbranch coverage before {branch_percent(before):.1f}% "
        f"({before.branches_taken}/{before.branches}), "
        f"after {branch_percent(overall):.1f}% ({overall.branches_taken}/{overall.branches})"
    )
    print(
        f"RESULT branch_coverage={branch_percent(overall):.1f} "
        f"branches={overall.branches_taken}/{overall.branches} "
        f"sender={branch_percent(sender):.1f} receiver={branch_percent(receiver):.1f} "
        f"before={branch_percent(before):.1f}"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
