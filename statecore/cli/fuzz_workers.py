"""``statecore fuzz --workers N``: run the workers, print one merged report.

The report says where the findings are shared (the example database), then
one line per worker (its seed, what it ran, its steps per second and how it
ended) and the total over the wall-clock time, then each finding - one per
kind and property, the shortest any worker found - as a single run prints it.
Exit codes are those of a single run.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

from ..adapter import Adapter
from ..fuzzing.workers import WorkerResult, WorkersReport, fuzz_workers
from ..system import System
from .common import EXIT_FINDING, EXIT_INTERRUPTED, EXIT_OK, colour, output_error
from .fuzz_common import fuzz_options, fuzz_replay_command, write_fuzz_trace
from .progress import fuzz_progress_printer


def run_workers(
    args: argparse.Namespace,
    system: System,
    factory: Callable[[], Adapter],
    adapter: str,
    database: str | Path,
) -> int:
    """Fuzz with ``args.workers`` processes; print the merged report; the exit code."""
    printer = fuzz_progress_printer(f"{args.target} / {adapter} x{args.workers}", sys.stderr)
    try:
        report = fuzz_workers(
            system,
            factory,
            workers=args.workers,
            database=str(database),
            progress=printer,
            **fuzz_options(args),
        )
    finally:
        printer.clear()
    files: list[tuple[Path | None, str | None]] = []
    failure = None
    for finding in report.findings:
        path = None
        try:
            path = write_fuzz_trace(system, finding, args, adapter)
        except OSError as exc:
            failure = output_error("--trace-out", exc)
        files.append((path, fuzz_replay_command(path, args.target, adapter)))
    if args.json:
        print(json.dumps(workers_json(report, adapter, files), indent=2))
    else:
        print_workers(report, adapter, files)
    if report.interrupted:
        print("statecore: interrupted", file=sys.stderr)
        return EXIT_INTERRUPTED
    if failure is not None:
        raise failure
    return EXIT_OK if report.ok else EXIT_FINDING


def _ended(w: WorkerResult) -> str:
    if w.interrupted:
        return "interrupted"
    if w.finding is None:
        return "nothing found"
    when = f"{w.found_after:.2f}s" if w.found_after is not None else "?"
    return f"{w.finding.kind} {w.finding.property_id} by the {w.found_in} phase after {when}"


def print_workers(
    report: WorkersReport, adapter: str, files: list[tuple[Path | None, str | None]]
) -> None:
    name = f"{report.system.name} / {adapter}"
    timing = (
        f"{len(report.workers)} workers, {report.seconds:.1f}s "
        f"({report.steps_per_second:,.0f} steps/s in all)"
    )
    if report.interrupted:
        head = f"{colour('INTERRUPTED', '33', sys.stdout)} {name}: {timing}"
    elif report.ok:
        head = f"{colour('PASS', '32', sys.stdout)} {name}: nothing found, {timing}"
    else:
        n = len(report.findings)
        head = f"{colour('FOUND', '31', sys.stdout)} {name}: {n} finding{'s' * (n > 1)}, {timing}"
    print(head)
    print(f"  example database: {report.database}")
    for w in report.workers:
        print(
            f"  worker {w.index} (seed {w.seed}): {w.replayed} replayed, {w.guided_paths} guided "
            f"paths, {w.examples} examples, {w.steps:,} steps in {w.seconds:.1f}s "
            f"({w.steps_per_second:,.0f} steps/s); {_ended(w)}"
        )
    print(
        f"  total: {report.steps:,} steps in {report.seconds:.1f}s wall-clock "
        f"({report.steps_per_second:,.0f} steps/s)"
    )
    for finding, (path, replay) in zip(report.findings, files):
        proof = {True: "no step or block of steps can go", False: "replay bound reached"}
        shrunk = "not shrunk" if finding.minimal is None else proof[finding.minimal]
        print(
            f"  {finding.kind} {finding.property_id}: {finding.detail} ({len(finding.trace)} "
            f"steps, {shrunk})"
        )
        print("\n".join("    " + line for line in finding.trace.table(report.system).splitlines()))
        if path is not None:
            print(f"  trace: {path}")
            print(f"  replay: {replay}")
    for pid, trace in report.known.items():
        reason = report.known_reasons.get(pid, "")
        print(f"  known   {pid} ({len(trace)} steps): {reason}")


def workers_json(
    report: WorkersReport, adapter: str, files: list[tuple[Path | None, str | None]]
) -> dict[str, Any]:
    return {
        "ok": report.ok,
        "interrupted": report.interrupted,
        "target": report.system.name,
        "adapter": adapter,
        "database": report.database,
        "seconds": round(report.seconds, 3),
        "steps": report.steps,
        "steps_per_s": round(report.steps_per_second, 1),
        "examples": report.examples,
        "workers": [
            {
                "worker": w.index,
                "seed": w.seed,
                "replayed": w.replayed,
                "guided_paths": w.guided_paths,
                "examples": w.examples,
                "steps": w.steps,
                "seconds": round(w.seconds, 3),
                "steps_per_s": round(w.steps_per_second, 1),
                "found_in": w.found_in or None,
                "finding": None if w.finding is None else w.finding.property_id,
            }
            for w in report.workers
        ],
        "findings": [
            {
                "kind": f.kind,
                "property": f.property_id,
                "detail": f.detail,
                "minimal": f.minimal,
                "actions": [str(a) for a in f.trace.actions],
                "trace_file": str(path) if path else None,
                "replay": replay,
            }
            for f, (path, replay) in zip(report.findings, files)
        ],
        "known": {
            pid: {"reason": report.known_reasons.get(pid, ""), "actions": len(t)}
            for pid, t in report.known.items()
        },
    }
