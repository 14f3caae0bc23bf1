"""The ``statecore`` command: list, check and replay lifecycle models.

Exit codes: 0 everything holds; 1 a property is violated or vacuous, a
search was cut short, or a variant was not found as expected; 2 bad usage,
an unknown target or an invalid definition (the message says which).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any, TextIO

from .diagram import add_parser as add_diagram_parser
from .errors import StatecoreError
from .explore import HOLDS, VIOLATED, Progress, Report, explore
from .registry import Target, bundled, resolve, system_for_trace
from .system import System

EPILOG_MAIN = """\
examples:
  statecore list                         bundled models, variants and adapters
  statecore check                        check every bundled model
  statecore check chunk_transfer --trace-out traces
  statecore check chunk_transfer_6670 --regression-out tests/regressions
  statecore check --variants             every known-bug variant must be caught
  statecore check mypkg.lifecycle:SYSTEM --json
  statecore replay traces/x.itf.json     re-run a saved counterexample
  statecore diagram chunk_transfer -f png -o docs/ct.png --trace traces/x.itf.json

exit codes: 0 all hold, 1 violated/vacuous/incomplete, 2 usage or definition error
"""


def main(argv: Sequence[str] | None = None) -> int:
    """Run the command line; return the exit code."""
    parser = _parser()
    args = parser.parse_args(argv)
    try:
        code: int = args.func(args)
        return code
    except StatecoreError as exc:
        print(f"statecore: error: {exc}", file=sys.stderr)
        return 2
    except BrokenPipeError:  # e.g. `statecore list | head`: the reader left early
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 0


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="statecore",
        description="Check, replay and list declarative lifecycle models.",
        epilog=EPILOG_MAIN,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")

    p_list = sub.add_parser(
        "list",
        help="list bundled targets (NAME<TAB>KIND<TAB>EXPECTED), adapters and properties",
        epilog="example:\n  statecore list | grep variant",
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p_list.add_argument("--json", action="store_true", help="print JSON")
    p_list.set_defaults(func=_cmd_list)

    p_check = sub.add_parser(
        "check",
        help="explore models exhaustively and judge their properties",
        epilog=(
            "examples:\n  statecore check\n  statecore check chunk_transfer --no-symmetry\n"
            "  statecore check --variants --trace-out traces\n"
            "  statecore check --symbolic request_lifecycle"
        ),
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p_check.add_argument("targets", nargs="*", metavar="TARGET", help="name or module:object")
    p_check.add_argument("--max-states", type=int, default=None, metavar="N")
    p_check.add_argument("--trace-out", type=Path, default=None, metavar="DIR")
    p_check.add_argument(
        "--regression-out",
        type=Path,
        default=None,
        metavar="DIR",
        help="write a pytest regression test for each violation",
    )
    p_check.add_argument("--json", action="store_true", help="print one JSON report")
    p_check.add_argument("--no-symmetry", action="store_true", help="no symmetry reduction")
    p_check.add_argument(
        "--variants", action="store_true", help="check the known-bug variants instead"
    )
    p_check.add_argument(
        "--symbolic", action="store_true", help="CrossHair search over unbounded payloads"
    )
    p_check.set_defaults(func=_cmd_check)

    p_replay = sub.add_parser(
        "replay",
        help="replay an ITF trace and re-judge its property",
        epilog="example:\n  statecore replay traces/chunk_transfer.terminal_delivered.itf.json",
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p_replay.add_argument("trace", type=Path, metavar="TRACE")
    p_replay.add_argument("--target", default=None, help="target (default: from the trace)")
    p_replay.add_argument(
        "--adapter", default=None, help="replay against an implementation through this adapter"
    )
    p_replay.set_defaults(func=_cmd_replay)
    add_diagram_parser(sub)

    p_fuzz = sub.add_parser(
        "fuzz",
        help="fuzz a real implementation against a model (Hypothesis, stateful)",
        epilog=(
            "examples:\n  statecore fuzz chunk_transfer --adapter vllm-omni --budget 60\n"
            "  statecore fuzz chunk_transfer --adapter model:chunk_transfer_6670 "
            "--max-examples 200 --seed 1\n\n"
            "exit codes: 0 nothing new found, 1 a finding, 2 bad usage or adapter not installed"
        ),
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p_fuzz.add_argument("target", metavar="TARGET")
    p_fuzz.add_argument("--adapter", required=True, help="adapter name (see statecore list)")
    budget = p_fuzz.add_mutually_exclusive_group()
    budget.add_argument("--budget", type=float, default=None, metavar="SECONDS")
    budget.add_argument("--max-examples", type=int, default=None, metavar="N")
    p_fuzz.add_argument("--seed", type=int, default=0)
    p_fuzz.add_argument("--profile", choices=("dev", "ci"), default="ci")
    p_fuzz.add_argument("--trace-out", type=Path, default=Path("statecore-traces"), metavar="DIR")
    p_fuzz.add_argument("--json", action="store_true", help="print one JSON report")
    p_fuzz.add_argument("--no-known", action="store_true", help="known findings fail the run too")
    p_fuzz.add_argument("--no-swarm", action="store_true", help="no swarm testing")
    p_fuzz.set_defaults(func=_cmd_fuzz)
    return parser


# -- list ----------------------------------------------------------------------


def _cmd_list(args: argparse.Namespace) -> int:
    from .registry import bundled_adapters

    targets = bundled()
    adapters = bundled_adapters()
    properties = [(t.name, p) for t in targets if t.kind == "model" for p in t.load().properties]
    if args.json:
        rows = [{"name": t.name, "kind": t.kind, "expected": t.expected} for t in targets]
        extra = [{"name": a.name, "target": a.target, "doc": a.doc} for a in adapters]
        props = [
            {"target": name, "id": p.id, "kind": p.kind, "statement": p.statement}
            for name, p in properties
        ]
        print(json.dumps({"targets": rows, "properties": props, "adapters": extra}, indent=2))
        return 0
    for t in targets:
        print(f"{t.name}\t{t.kind}\t{t.expected}")
    for a in adapters:
        print(f"{a.name}\tadapter\t{a.target}")
    for name, p in properties:
        print(f"{name}.{p.id}\tproperty\t{p.kind}")
    return 0


# -- check ---------------------------------------------------------------------


def _cmd_check(args: argparse.Namespace) -> int:
    if args.symbolic:
        return _cmd_symbolic(args)
    chosen: list[tuple[str, System, Target | None]]
    if args.variants:
        if args.targets:
            raise _usage("--variants takes no TARGET")
        chosen = [(t.name, t.load(), t) for t in bundled() if t.kind == "variant"]
    elif args.targets:
        chosen = [resolve(name) for name in args.targets]
    else:
        chosen = [(t.name, t.load(), t) for t in bundled() if t.kind == "model"]
    out: TextIO = sys.stdout
    entries: list[dict[str, Any]] = []
    all_ok = True
    for name, system, target in chosen:
        report = explore(
            system,
            max_states=args.max_states,
            symmetry=not args.no_symmetry,
            stop_on_violation=False,
            progress=_progress_printer() if sys.stderr.isatty() else None,
        )
        _clear_progress()
        written = _write_traces(report, name, args.trace_out)
        _write_regressions(report, name, args.regression_out)
        ok = _judge(report, target if args.variants else None)
        all_ok = all_ok and ok
        entries.append(_report_json(name, target, report, ok, written))
        if not args.json:
            _print_report(out, name, target, report, ok, written, args.variants)
    if args.json:
        print(json.dumps({"ok": all_ok, "targets": entries}, indent=2))
    return 0 if all_ok else 1


def _judge(report: Report, variant: Target | None) -> bool:
    if variant is None:
        return report.ok
    failing = {r.property.id for r in report.results if r.verdict != HOLDS}
    return report.complete and failing == variant.expected_violations


def _write_traces(report: Report, name: str, directory: Path | None) -> dict[str, str]:
    if directory is None:
        return {}
    from .itf import write_itf

    directory.mkdir(parents=True, exist_ok=True)
    written: dict[str, str] = {}
    for result in report.results:
        if result.trace is not None and result.verdict == VIOLATED:
            path = directory / f"{name}.{result.property.id}.itf.json"
            write_itf(result.trace, report.system, path, meta={"target": name})
            written[result.property.id] = str(path)
    return written


def _write_regressions(report: Report, name: str, directory: Path | None) -> None:
    if directory is None:
        return
    from .regression import regression_test_source

    directory.mkdir(parents=True, exist_ok=True)
    for result in report.results:
        if result.trace is not None and result.verdict == VIOLATED:
            stem = f"test_{name}_{result.property.id}".replace(".", "_").replace(":", "_")
            path = directory / f"{stem}.py"
            path.write_text(regression_test_source(result.trace, name))


def _print_report(
    out: TextIO,
    name: str,
    target: Target | None,
    report: Report,
    ok: bool,
    written: dict[str, str],
    variant: bool,
) -> None:
    mark = _colour("PASS", "32", out) if ok else _colour("FAIL", "31", out)
    scope = "complete" if report.complete else "INCOMPLETE (raise --max-states)"
    print(
        f"{mark} {name}: {report.states} states, {report.transitions} transitions, "
        f"depth {report.depth}, {report.seconds:.2f}s ({report.rate:,.0f} states/s), {scope}",
        file=out,
    )
    if variant and target is not None:
        print(f"  expected: {target.expected}", file=out)
    for r in report.results:
        print(f"  {r.verdict:<9} {r.property.id}: {r.property.statement}", file=out)
        if r.verdict != HOLDS and r.detail:
            print(f"            {r.detail}", file=out)
        if r.verdict == VIOLATED and r.trace is not None:
            table = r.trace.table(report.system)
            print("\n".join("      " + line for line in table.splitlines()), file=out)
            if r.property.id in written:
                print(f"      trace: {written[r.property.id]}", file=out)
                print(f"      replay: statecore replay {written[r.property.id]}", file=out)
    for cov in report.coverage:
        print(
            f"  coverage {cov.component} ({cov.machine}): {len(cov.taken)}/{cov.total} "
            f"transitions taken",
            file=out,
        )
        untaken = report.system.component(cov.component).untaken
        for never in cov.never:
            print(f"    {_never_taken(never, untaken)}", file=out)


def _report_json(
    name: str, target: Target | None, report: Report, ok: bool, written: dict[str, str]
) -> dict[str, Any]:
    return {
        "name": name,
        "expected": target.expected if target else None,
        "ok": ok,
        "states": report.states,
        "transitions": report.transitions,
        "depth": report.depth,
        "seconds": round(report.seconds, 4),
        "states_per_s": round(report.rate, 1),
        "complete": report.complete,
        "symmetry": report.symmetry,
        "properties": [
            {
                "id": r.property.id,
                "kind": r.property.kind,
                "statement": r.property.statement,
                "source": r.property.source,
                "verdict": r.verdict,
                "detail": r.detail,
                "trace_length": len(r.trace) if r.trace is not None else None,
                "trace_actions": [str(a) for a in r.trace.actions] if r.trace else None,
                "trace_file": written.get(r.property.id),
            }
            for r in report.results
        ],
        "coverage": [
            {
                "component": c.component,
                "machine": c.machine,
                "taken": c.taken,
                "never": list(c.never),
                "by_design": {
                    n: why
                    for n, why in report.system.component(c.component).untaken.items()
                    if n in c.never
                },
            }
            for c in report.coverage
        ],
    }


def _cmd_symbolic(args: argparse.Namespace) -> int:
    from .symbolic import symbolic_check

    if not args.targets:
        raise _usage("--symbolic needs at least one TARGET")
    findings_total = 0
    rows: list[dict[str, Any]] = []
    for name in args.targets:
        _, system, _ = resolve(name)
        seen: set[str] = set()
        for comp in system.components:
            if comp.machine.name in seen:
                continue
            seen.add(comp.machine.name)
            findings = symbolic_check(comp.machine)
            findings_total += len(findings)
            for f in findings:
                rows.append({"target": name, "machine": comp.machine.name, "finding": str(f)})
                if not args.json:
                    print(f"{name}: {f}")
    if args.json:
        print(json.dumps({"ok": findings_total == 0, "findings": rows}, indent=2))
    elif findings_total == 0:
        print("no symbolic findings")
    return 0 if findings_total == 0 else 1


# -- replay --------------------------------------------------------------------


def _cmd_replay(args: argparse.Namespace) -> int:
    from .itf import TraceFileError
    from .replay import replay

    if args.adapter:
        return _replay_adapter(args)
    _, system = system_for_trace(args.trace, args.target)
    result = replay(system, args.trace)
    if result.trace is not None:
        print(result.trace.table(system))
    print(result.explain(system))
    if not result.reproduced:
        raise TraceFileError(str(args.trace), None, "the trace no longer shows what it recorded")
    return 1 if result.verdict == VIOLATED else 0


def _replay_adapter(args: argparse.Namespace) -> int:
    from .fuzz import replay_with_adapter
    from .itf import read_header, read_itf
    from .registry import resolve_adapter

    header = read_header(args.trace)
    target = args.target or str(header.get("target") or header.get("source") or "")
    system, factory, _ = resolve_adapter(target, args.adapter)
    trace = read_itf(args.trace, system)
    print(trace.table(system))
    finding = replay_with_adapter(system, trace, factory, known={})
    if finding is None:
        print(f"no finding: {args.adapter} now behaves as the model predicts along this trace")
        return 0
    print(f"{finding.kind} {finding.property_id}: {finding.detail}")
    return 1


# -- fuzz ----------------------------------------------------------------------


def _cmd_fuzz(args: argparse.Namespace) -> int:
    from .fuzz import fuzz
    from .itf import write_itf
    from .registry import resolve_adapter

    system, factory, spec = resolve_adapter(args.target, args.adapter)
    max_examples = args.max_examples
    if args.budget is None and max_examples is None:
        max_examples = 100
    report = fuzz(
        system,
        factory,
        budget=args.budget,
        max_examples=max_examples,
        seed=args.seed,
        profile=args.profile,
        known={} if args.no_known else None,
        swarm=not args.no_swarm,
    )
    trace_file = None
    if report.finding is not None:
        args.trace_out.mkdir(parents=True, exist_ok=True)
        safe = spec.name.replace(":", "_")
        trace_file = args.trace_out / f"{system.name}.{safe}.{report.finding.property_id}.itf.json"
        meta = {"target": args.target, "adapter": spec.name}
        write_itf(report.finding.trace, system, trace_file, meta=meta)
    if args.json:
        print(json.dumps(_fuzz_json(report, spec.name, trace_file), indent=2))
    else:
        _print_fuzz(report, spec.name, trace_file)
    return 0 if report.ok else 1


def _fuzz_json(report: Any, adapter: str, trace_file: Path | None) -> dict[str, Any]:
    finding = report.finding
    return {
        "ok": report.ok,
        "target": report.system.name,
        "adapter": adapter,
        "examples": report.examples,
        "steps": report.steps,
        "seconds": round(report.seconds, 3),
        "steps_per_s": round(report.steps_per_second, 1),
        "finding": None
        if finding is None
        else {
            "kind": finding.kind,
            "property": finding.property_id,
            "detail": finding.detail,
            "actions": [str(a) for a in finding.trace.actions],
            "trace_file": str(trace_file) if trace_file else None,
            "replay": f"statecore replay {trace_file} --adapter {adapter}",
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


def _print_fuzz(report: Any, adapter: str, trace_file: Path | None) -> None:
    head = (
        f"{report.examples} examples, {report.steps} steps, {report.seconds:.1f}s "
        f"({report.steps_per_second:,.0f} steps/s)"
    )
    if report.finding is None:
        print(f"{_colour('PASS', '32', sys.stdout)} {report.system.name} / {adapter}: {head}")
    else:
        f = report.finding
        print(f"{_colour('FOUND', '31', sys.stdout)} {report.system.name} / {adapter}: {head}")
        print(f"  {f.kind} {f.property_id}: {f.detail}")
        print("\n".join("    " + line for line in f.trace.table(report.system).splitlines()))
        if trace_file is not None:
            print(f"  trace: {trace_file}")
            print(f"  replay: statecore replay {trace_file} --adapter {adapter}")
            print(f"  diagram: statecore diagram {report.system.name} --trace {trace_file}")
    for pid, trace in report.known.items():
        reason = report.known_reasons.get(pid, "")
        print(f"  known   {pid} ({len(trace)} steps): {reason}")
    for component, machine, taken, total, never in report.coverage():
        print(f"  coverage {component} ({machine}): {taken}/{total} transitions taken")
        untaken = report.system.component(component).untaken
        for name in never:
            print(f"    {_never_taken(name, untaken)}")


def _never_taken(name: str, untaken: Mapping[str, str]) -> str:
    """One coverage line: an untaken transition, with its reason if one is declared."""
    if name in untaken:
        return f"not taken by design: {name} ({untaken[name]})"
    return f"never taken: {name}"


# -- terminal helpers ----------------------------------------------------------


def _usage(message: str) -> StatecoreError:
    return StatecoreError(message)


def _colour(text: str, code: str, stream: TextIO) -> str:
    if os.environ.get("NO_COLOR") or not stream.isatty():
        return text
    return f"\033[{code}m{text}\033[0m"


_progress_shown = False


def _progress_printer() -> Any:
    def show(p: Progress) -> None:
        global _progress_shown
        _progress_shown = True
        sys.stderr.write(
            f"\r{p.states:,} states  {p.rate:,.0f} states/s  depth {p.depth}  queue {p.queue:,}   "
        )
        sys.stderr.flush()

    return show


def _clear_progress() -> None:
    global _progress_shown
    if _progress_shown:
        sys.stderr.write("\r\033[K")
        _progress_shown = False


if __name__ == "__main__":
    raise SystemExit(main())
