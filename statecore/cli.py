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
from collections.abc import Sequence
from pathlib import Path
from typing import Any, TextIO

from .diagram import add_parser as add_diagram_parser
from .errors import StatecoreError
from .explore import HOLDS, VIOLATED, Progress, Report, explore
from .registry import Target, bundled, resolve
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
        help="list bundled targets as NAME<TAB>KIND<TAB>EXPECTED",
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
            "  statecore check --symbolic telemetry"
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
    p_replay.set_defaults(func=_cmd_replay)
    add_diagram_parser(sub)
    return parser


# -- list ----------------------------------------------------------------------


def _cmd_list(args: argparse.Namespace) -> int:
    targets = bundled()
    if args.json:
        rows = [{"name": t.name, "kind": t.kind, "expected": t.expected} for t in targets]
        print(json.dumps({"targets": rows}, indent=2))
        return 0
    for t in targets:
        print(f"{t.name}\t{t.kind}\t{t.expected}")
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
            write_itf(result.trace, report.system, path)
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
        for never in cov.never:
            print(f"    never taken: {never}", file=out)


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

    target = args.target or _trace_source(args.trace)
    _, system, _ = resolve(target)
    result = replay(system, args.trace)
    if result.trace is not None:
        print(result.trace.table(system))
    print(result.explain(system))
    if not result.reproduced:
        raise TraceFileError(str(args.trace), None, "the trace no longer shows what it recorded")
    return 1 if result.verdict == VIOLATED else 0


def _trace_source(path: Path) -> str:
    """The target a trace file names in its header (the system it was taken from)."""
    try:
        header = json.loads(path.read_text())["#meta"]
        return str(header["source"])
    except (OSError, ValueError, KeyError, TypeError) as exc:
        raise StatecoreError(
            f"{path}: cannot read the trace's source ({exc}); pass --target"
        ) from None


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
