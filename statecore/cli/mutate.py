"""``statecore mutate``: how many single-point mutants of an implementation a fuzz run kills."""

from __future__ import annotations

import argparse
import contextlib
import json
import sys
from pathlib import Path
from typing import Any

from .common import (
    EXIT_FINDING,
    EXIT_OK,
    UsageError,
    colour,
    require_positive_float,
    require_positive_int,
    resolve_adapter_guarded,
    resolve_target,
)

EXAMPLE = (
    "statecore mutate request_state_system --adapter request-state-accessor "
    "--module statecore.models.implementations.request_state --functions cleanup,_fire"
)


def add_mutate_parser(sub: Any) -> None:
    p = sub.add_parser(
        "mutate",
        help="mutation testing of an implementation: which single-point mutants the fuzz kills",
        epilog=(
            f"example:\n  {EXAMPLE}\n\n"
            "exit codes: 0 every mutant killed or declared equivalent, 1 a mutant survived "
            "or hung,\n  2 bad usage, unknown target, module or function, 3 internal error, "
            "130 interrupted"
        ),
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument("target", metavar="TARGET")
    p.add_argument("--adapter", required=True, help="the adapter that drives the module")
    p.add_argument("--module", required=True, help="the implementation module to mutate")
    p.add_argument(
        "--functions",
        required=True,
        help="comma-separated functions to mutate: name (any class) or Class.name",
    )
    p.add_argument(
        "--budget",
        type=float,
        default=5.0,
        metavar="SECONDS",
        help="seconds of fuzzing per mutant (default 5)",
    )
    p.add_argument(
        "--max-examples", type=int, default=None, metavar="N", help="search examples per mutant"
    )
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--jobs", type=int, default=1, metavar="N", help="mutants run at once")
    p.add_argument(
        "--equivalents",
        type=Path,
        default=None,
        metavar="FILE",
        help="mutants declared equivalent (default: the bundled models/equivalent_mutants.toml)",
    )
    p.add_argument(
        "--only",
        action="append",
        default=[],
        metavar="TEXT",
        help="only the mutants whose id contains TEXT (repeatable)",
    )
    p.add_argument(
        "--lines",
        action="append",
        default=[],
        metavar="FIRST-LAST",
        help="only the mutants on lines FIRST to LAST of the module (repeatable)",
    )
    p.add_argument(
        "--also",
        action="append",
        default=[],
        metavar="TARGET:ADAPTER",
        help="another target and adapter that drive the module: a mutant the first fuzz "
        "leaves alive is fuzzed through each in turn (repeatable)",
    )
    p.add_argument("--json", action="store_true", help="print one JSON report")
    p.set_defaults(func=cmd_mutate)


def also_pairs(values: list[str]) -> list[tuple[str, str]]:
    """``TARGET:ADAPTER`` values as pairs; a malformed one is a usage error."""
    pairs = []
    for value in values:
        target, colon, adapter = value.partition(":")
        if not (colon and target and adapter):
            raise UsageError(
                f"--also {value}: give a target and an adapter, e.g. "
                f"--also segments:vllm-omni-segments"
            )
        pairs.append((target, adapter))
    return pairs


def line_ranges(values: list[str]) -> list[tuple[int, int]]:
    """``FIRST-LAST`` values as (first, last) line ranges; a malformed one is a usage error."""
    ranges = []
    for value in values:
        first, dash, last = value.partition("-")
        if not (dash and first.strip().isdigit() and last.strip().isdigit()):
            raise UsageError(f"--lines {value}: give a line range, e.g. --lines 640-790")
        a, b = int(first), int(last)
        if a > b:
            raise UsageError(
                f"--lines {value}: the first line is after the last; try --lines {b}-{a}"
            )
        ranges.append((a, b))
    return ranges


def default_equivalents() -> Path:
    """The equivalents file bundled with the models."""
    import importlib

    models = importlib.import_module("statecore.models")
    return Path(models.__file__ or ".").parent / "equivalent_mutants.toml"


def cmd_mutate(args: argparse.Namespace) -> int:
    from ..fuzzing.mutate import load_equivalents, module_file, mutate
    from ..fuzzing.source_mutants import source_mutants

    require_positive_float(args.budget, "--budget", "seconds", 5)
    require_positive_int(args.max_examples, "--max-examples", "examples", 100)
    require_positive_int(args.jobs, "--jobs", "processes", 2)
    functions = [f.strip() for f in args.functions.split(",") if f.strip()]
    if not functions:
        raise UsageError("--functions: give at least one function name (e.g. --functions open)")
    if args.equivalents is not None and not args.equivalents.is_file():
        raise UsageError(f"--equivalents {args.equivalents}: no such file")
    also = also_pairs(args.also)
    lines = line_ranges(args.lines)
    # What importing the adapter and the module prints goes to stderr: stdout is the report.
    with contextlib.redirect_stdout(sys.stderr):
        resolve_target(args.target)
        _, _, spec = resolve_adapter_guarded(args.target, args.adapter)
        for target, adapter in also:
            resolve_target(target)
            resolve_adapter_guarded(target, adapter)
        found = source_mutants(module_file(args.module), functions)  # an unknown one fails
    if lines and not any(a <= m.line <= b for m in found for a, b in lines):
        spans = ", ".join(f"{a}-{b}" for a, b in lines)
        raise UsageError(
            f"--lines {spans}: no mutant of {args.functions} there; its mutants are on lines "
            f"{min(m.line for m in found)}-{max(m.line for m in found)}"
        )
    equivalents = load_equivalents(
        args.equivalents or default_equivalents(), args.target, args.module
    )
    name = f"{args.target} / {spec.name}"

    def progress(done: int, total: int, result: Any) -> None:
        print(
            f"statecore: fuzzing {name}: mutant {done}/{total} {result.status}: "
            f"{result.mutant.id} ({result.mutant.where})",
            file=sys.stderr,
            flush=True,
        )

    report = mutate(
        args.target,
        args.adapter,
        args.module,
        functions,
        budget=args.budget,
        max_examples=args.max_examples,
        seed=args.seed,
        jobs=args.jobs,
        equivalents=equivalents,
        only=args.only,
        on_result=progress,
        also=also,
        lines=lines,
    )
    for stale in report.stale:
        print(
            f"statecore: warning: declared equivalent but no such mutant (stale?): {stale}",
            file=sys.stderr,
        )
    if report.never_called:
        print(
            f"statecore: warning: the unmutated run never called {', '.join(report.never_called)}"
            f": no mutant of it can be killed until the binding drives it",
            file=sys.stderr,
        )
    if args.json:
        print(json.dumps(mutation_json(report, spec.name), indent=2))
    else:
        print_mutation(report, spec.name)
    return EXIT_OK if report.ok else EXIT_FINDING


def mutation_json(report: Any, adapter: str) -> dict[str, Any]:
    from ..fuzzing.mutate import STATUSES

    return {
        "ok": report.ok,
        "target": report.target,
        "adapter": adapter,
        "module": report.module,
        "functions": list(report.functions),
        "score": round(report.score, 4),
        "non_equivalent": report.non_equivalent,
        "counts": {status: report.count(status) for status in STATUSES},
        "seconds": round(report.seconds, 3),
        "isolation": "forked child" if report.forked else "fresh process",
        "also": [f"{target} / {adapter}" for target, adapter in report.also],
        "mutants": [
            {
                "id": r.mutant.id,
                "kind": r.mutant.kind,
                "function": r.mutant.function,
                "where": r.mutant.where,
                "code": r.mutant.code,
                "changed": r.mutant.changed,
                "status": r.status,
                "seconds": round(r.seconds, 3),
                "finding": None
                if r.status != "killed"
                else {
                    "kind": r.kind,
                    "property": r.property,
                    "detail": r.detail,
                    "steps": r.steps,
                    "phase": r.phase or None,
                    "found_after": r.found_after,
                    "by": r.by,
                },
                "reason": r.reason or (r.detail if r.status == "crashed" else None),
            }
            for r in report.results
        ],
        "stale_equivalents": list(report.stale),
        "never_called": list(report.never_called),
    }


def print_mutation(report: Any, adapter: str) -> None:
    functions = ", ".join(report.functions)
    print(
        f"{report.target} / {adapter}: {len(report.results)} mutants of {report.module} "
        f"({functions})"
    )
    for target, other in report.also:
        print(f"  then, for a mutant still alive: {target} / {other}")
    for r in report.results:
        print(f"  {r.status:<10} {r.mutant.where}  {r.mutant.kind} {r.mutant.function}")
        print(f"             {r.mutant.code}")
        print(f"          -> {r.mutant.changed}")
        if r.status != "survived":
            by = f" by {r.by}" if report.also and r.by else ""
            print(f"             {r.summary()}{by}")
    survivors = [r for r in report.results if r.status == "survived"]
    if survivors:
        print("survivors (declare an equivalent one in the equivalents file, with its reason):")
        for r in survivors:
            print(f"  {json.dumps(r.mutant.id)}")
    head = colour("PASS", "32", sys.stdout) if report.ok else colour("FAIL", "31", sys.stdout)
    killed = report.count("killed")
    print(
        f"{head} {report.target} / {adapter}: score {report.score:.0%} ({killed} of "
        f"{report.non_equivalent} non-equivalent mutants killed), {report.count('survived')} "
        f"survived, {report.count('equivalent')} equivalent, {report.count('timeout')} timed "
        f"out, {report.count('crashed')} crashed at import; {report.seconds:.1f}s"
    )
