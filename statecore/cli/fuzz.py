"""``statecore fuzz``: drive an implementation through an adapter against its model."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

from ..fuzzing.coverage import CodeCoverage, Measurement, parse_target
from ..fuzzing.finding_store import DEFAULT_DIRECTORY, open_database
from .common import (
    EXIT_FINDING,
    EXIT_INTERRUPTED,
    EXIT_OK,
    UsageError,
    colour,
    never_taken,
    output_error,
    require_positive_float,
    require_positive_int,
    require_writable_dir,
    resolve_adapter_guarded,
    resolve_target,
)
from .fuzz_common import fuzz_options, fuzz_replay_command, write_fuzz_trace
from .progress import fuzz_progress_printer


def add_fuzz_parser(sub: Any) -> None:
    p_fuzz = sub.add_parser(
        "fuzz",
        help="fuzz a real implementation against a model (guided paths, then Hypothesis)",
        epilog=(
            "examples:\n  statecore fuzz chunk_transfer --adapter vllm-omni --budget 60\n"
            "  statecore fuzz chunk_transfer --adapter model:chunk_transfer_6670 --seed 1\n"
            "  statecore fuzz mypkg.shop:MODEL --adapter mypkg.shop:ShopAdapter\n"
            "  statecore fuzz request_state_system --adapter request-state-accessor \\\n"
            "      --coverage statecore.models.implementations.request_state\n"
            "  statecore fuzz chunk_transfer --adapter vllm-omni --workers 2 --budget 60\n"
            "  statecore fuzz chunk_transfer --adapter vllm-omni --database redis://ci-redis:6379/0\n\n"
            "exit codes: 0 nothing new found, 1 a finding, 2 bad usage or adapter not "
            "installed,\n  3 internal error, 130 interrupted"
        ),
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p_fuzz.add_argument("target", metavar="TARGET")
    p_fuzz.add_argument(
        "--adapter",
        required=True,
        help="a bundled adapter (statecore list), model:VARIANT, or package.module:object "
        "(an Adapter subclass or a function returning one)",
    )
    budget = p_fuzz.add_mutually_exclusive_group()
    budget.add_argument(
        "--budget", type=float, default=None, metavar="SECONDS", help="search until then"
    )
    budget.add_argument(
        "--max-examples",
        type=int,
        default=None,
        metavar="N",
        help="search examples (default: the profile's, 100 for ci)",
    )
    p_fuzz.add_argument("--seed", type=int, default=0)
    p_fuzz.add_argument("--profile", choices=("dev", "ci"), default="ci")
    p_fuzz.add_argument("--trace-out", type=Path, default=Path("statecore-traces"), metavar="DIR")
    p_fuzz.add_argument("--json", action="store_true", help="print one JSON report")
    p_fuzz.add_argument("--no-known", action="store_true", help="known findings fail the run too")
    p_fuzz.add_argument("--no-swarm", action="store_true", help="no swarm testing")
    p_fuzz.add_argument(
        "--no-guided", action="store_true", help="no model-chosen paths before the search"
    )
    p_fuzz.add_argument(
        "--coverage",
        default=None,
        metavar="MODULE[:FUNC,...]",
        help="report the lines and branches of MODULE's functions (or of FUNC,... only: a "
        "name or Class.name) that the run reached, measured by coverage.py",
    )
    p_fuzz.add_argument(
        "--workers",
        type=int,
        default=1,
        metavar="N",
        help="fuzz in N processes, worker i with seed SEED+i, sharing findings through the "
        "example database (--max-examples is the total)",
    )
    p_fuzz.add_argument(
        "--database",
        default=None,
        metavar="DIR|redis://HOST:PORT/DB",
        help="a Hypothesis example database: its stored findings replay first and new ones are "
        f"stored there (default: none with one worker, {DEFAULT_DIRECTORY} with more)",
    )
    p_fuzz.set_defaults(func=_cmd_fuzz)


# -- fuzz ----------------------------------------------------------------------


def _cmd_fuzz(args: argparse.Namespace) -> int:
    from ..fuzzing.fuzz import FuzzInterrupted, fuzz

    require_positive_float(args.budget, "--budget", "seconds", 60)
    require_positive_int(args.max_examples, "--max-examples", "examples", 100)
    require_positive_int(args.workers, "--workers", "processes", 2)
    require_writable_dir(args.trace_out, "--trace-out")
    if args.workers > 1 and args.coverage:
        raise UsageError("--coverage measures one process; run it without --workers")
    resolve_target(args.target)  # a user module's failures are one line
    system, factory, spec = resolve_adapter_guarded(args.target, args.adapter)
    if args.workers > 1:
        from .fuzz_workers import run_workers

        return run_workers(args, system, factory, spec.name, args.database or DEFAULT_DIRECTORY)
    database = open_database(args.database) if args.database else None
    measurement = Measurement(parse_target(args.coverage)) if args.coverage else None
    printer = fuzz_progress_printer(f"{args.target} / {spec.name}", sys.stderr)
    interrupted = False
    reached: CodeCoverage | None = None
    if measurement is not None:
        measurement.start()  # coverage.py missing: the ImportError names the extra
    try:
        report = fuzz(system, factory, progress=printer, database=database, **fuzz_options(args))
    except FuzzInterrupted as stop:
        report, interrupted = stop.report, True
    finally:
        printer.clear()
        if measurement is not None:
            reached = measurement.stop()
    trace_file, failure = None, None
    if report.finding is not None:
        try:
            trace_file = write_fuzz_trace(report.system, report.finding, args, spec.name)
        except OSError as exc:
            failure = output_error("--trace-out", exc)
    replay = fuzz_replay_command(trace_file, args.target, spec.name)
    if args.json:
        data = _fuzz_json(report, spec.name, trace_file, replay)
        if reached is not None:
            data["code_coverage"] = reached.to_json()
        print(json.dumps(data, indent=2))
    else:
        _print_fuzz(report, args.target, spec.name, trace_file, replay)
        if reached is not None:
            _print_code_coverage(reached)
    if interrupted:
        print("statecore: interrupted", file=sys.stderr)
        return EXIT_INTERRUPTED
    if failure is not None:
        raise failure
    return EXIT_OK if report.ok else EXIT_FINDING


def _fuzz_json(
    report: Any, adapter: str, trace_file: Path | None, replay: str | None
) -> dict[str, Any]:
    finding = report.finding
    guided = report.guided
    return {
        "ok": report.ok,
        "interrupted": report.interrupted,
        "target": report.system.name,
        "adapter": adapter,
        "examples": report.examples,
        "steps": report.steps,
        "seconds": round(report.seconds, 3),
        "steps_per_s": round(report.steps_per_second, 1),
        "found_in": report.found_in or None,
        "replayed": report.replayed,
        "found_after": None if report.found_after is None else round(report.found_after, 3),
        "guided": None
        if guided is None
        else {
            "paths": guided.paths,
            "steps": guided.steps,
            "seconds": round(guided.seconds, 3),
            "model_states": guided.states,
            "goals": {kind: {"met": met, "total": total} for kind, met, total in guided.by_kind()},
            "missed": [str(g) for g in guided.missed],
            "stopped": guided.stopped or None,
        },
        "search": {
            "examples": report.examples,
            "discarded": report.discarded,
            "steps": report.steps,
        },
        "shrink": {
            "replays": report.shrink_replays,
            "steps": report.shrink_steps,
            "minimal": None if finding is None else finding.minimal,
        },
        "finding": None
        if finding is None
        else {
            "kind": finding.kind,
            "property": finding.property_id,
            "detail": finding.detail,
            "actions": [str(a) for a in finding.trace.actions],
            "trace_file": str(trace_file) if trace_file else None,
            "replay": replay,
        },
        "known": {
            pid: {"reason": report.known_reasons.get(pid, ""), "actions": len(t)}
            for pid, t in report.known.items()
        },
        "coverage": [
            {"component": c, "machine": m, "taken": k, "total": n, "never": never}
            for c, m, k, n, never in report.coverage()
        ],
    }


GUIDED_STOPS = {
    "finding": "stopped at the first finding",
    "budget": "stopped by --budget",
    "max_states": "the model walk stopped at its state bound",
    "stalled": "the model walk met no new goal for long",
    "interrupted": "interrupted",
}


def _print_fuzz(
    report: Any, target: str, adapter: str, trace_file: Path | None, replay: str | None
) -> None:
    timing = f"{report.seconds:.1f}s ({report.steps_per_second:,.0f} steps/s)"
    name = f"{report.system.name} / {adapter}"
    f = report.finding
    if report.interrupted:
        head = f"{colour('INTERRUPTED', '33', sys.stdout)} {name}: {timing}"
    elif f is None:
        head = f"{colour('PASS', '32', sys.stdout)} {name}: nothing found, {timing}"
    else:
        when = f"{report.found_after:.2f}s" if report.found_after is not None else "?"
        found = f"found by the {report.found_in} phase after {when}"
        head = f"{colour('FOUND', '31', sys.stdout)} {name}: {found}, {timing}"
    print(head)
    guided = report.guided
    replayed = f is not None and report.found_in == "replay"
    if report.replayed:
        print(f"  replay: {report.replayed} stored findings replayed from the example database")
    if guided is None:
        print(
            "  guided: "
            + ("not run (a stored finding replayed)" if replayed else "off (--no-guided)")
        )
    else:
        stop = GUIDED_STOPS.get(guided.stopped, "")
        print(
            f"  guided: {guided.paths} paths, {guided.steps} steps: {guided.summary()}"
            + (f"; {stop}" if stop else "")
        )
        if guided.stopped in ("max_states", "stalled"):
            for goal in guided.missed[:10]:
                print(f"    not reached: {goal}")
            if len(guided.missed) > 10:
                print(f"    ... and {len(guided.missed) - 10} more")
    if report.examples or not (f is not None and report.found_in in ("guided", "replay")):
        cut = f" (and {report.discarded} Hypothesis cut short)" if report.discarded else ""
        print(f"  search: {report.examples} examples{cut}, {report.steps} steps")
    else:
        print(f"  search: not run (the {report.found_in} phase found it)")
    if f is not None:
        proof = {True: "no step or block of steps can go", False: "replay bound reached"}
        print(
            f"  shrink: {report.shrink_replays} replays, {report.shrink_steps} steps: "
            f"{len(f.trace)} steps left, {proof.get(f.minimal, 'not shrunk')}"
        )
        print(f"  {f.kind} {f.property_id}: {f.detail}")
        print("\n".join("    " + line for line in f.trace.table(report.system).splitlines()))
        if trace_file is not None:
            print(f"  trace: {trace_file}")
            print(f"  replay: {replay}")
            print(f"  diagram: statecore diagram {target} --trace {trace_file}")
    for pid, trace in report.known.items():
        reason = report.known_reasons.get(pid, "")
        print(f"  known   {pid} ({len(trace)} steps): {reason}")
    for component, machine, taken, total, never in report.coverage():
        print(f"  coverage {component} ({machine}): {taken}/{total} transitions taken")
        untaken = report.system.component(component).untaken
        for name_ in never:
            print(f"    {never_taken(name_, untaken)}")


def _print_code_coverage(reached: CodeCoverage) -> None:
    """Per function: branches taken, statements run, the percent of both, what was missed."""
    rows = [*reached.functions, reached.total]
    width = max(len(f.name) for f in rows)
    print(f"  code coverage of {reached.module} (coverage.py, branches):")
    for f in rows:
        missed = f"  missed {f.missed}" if f.missed else ""
        print(
            f"    {f.name:<{width}}  branches {f.branches_taken:>3}/{f.branches:<3} "
            f"lines {f.lines_run:>4}/{f.lines:<4} {f.percent:5.1f}%{missed}"
        )
