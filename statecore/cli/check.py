"""``statecore check``: explore targets, judge their properties, report and write traces.

Also ``check --adequacy`` (mutation adequacy of a model's spec) and
``check --symbolic``.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from collections.abc import Sequence
from contextlib import redirect_stdout
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TextIO

from ..check.explore import (
    HOLDS,
    UNKNOWN,
    VACUOUS,
    VIOLATED,
    ExplorationInterrupted,
    Report,
    explore,
)
from ..errors import StatecoreError
from ..registry import Target, bundled, is_user_target
from ..system import System
from .check_bounds import add_bound_arguments, memory_bound, require_bounds, stop_text
from .check_jobs import Printed, jobs_for, side_by_side
from .check_ray import add_ray_argument, check_ray_usage, on_ray
from .common import (
    EXIT_FINDING,
    EXIT_INCOMPLETE,
    EXIT_INTERRUPTED,
    EXIT_OK,
    UsageError,
    colour,
    file_stem,
    never_taken,
    output_error,
    require_positive_int,
    require_writable_dir,
    resolve_target,
)
from .progress import LogProgress, TerminalProgress, progress_printer


def add_check_parser(sub: Any) -> None:
    p_check = sub.add_parser(
        "check",
        help="explore models exhaustively and judge their properties",
        epilog=(
            "examples:\n  statecore check\n  statecore check chunk_transfer --no-symmetry\n"
            "  statecore check --variants --trace-out traces\n"
            "  statecore check --symbolic request_lifecycle\n\n"
            "exit codes: 0 all hold, 1 a finding, 2 usage, input or model error, 3 internal "
            "error,\n  4 incomplete (a bound stopped the search), 130 interrupted"
        ),
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p_check.add_argument("targets", nargs="*", metavar="TARGET", help="name or module:object")
    add_bound_arguments(p_check)
    p_check.add_argument("--trace-out", type=Path, default=None, metavar="DIR")
    p_check.add_argument(
        "--regression-out",
        type=Path,
        default=None,
        metavar="DIR",
        help="write a pytest regression test for each violation",
    )
    p_check.add_argument("--json", action="store_true", help="print one JSON report")
    p_check.add_argument(
        "-q",
        "--quiet",
        action="store_true",
        help="the detail of failing targets only, then the summary table",
    )
    p_check.add_argument("--no-symmetry", action="store_true", help="no symmetry reduction")
    p_check.add_argument(
        "--por",
        action=argparse.BooleanOptionalAction,
        default=False,
        help="partial-order reduction (default off; it runs without symmetry reduction)",
    )
    p_check.add_argument(
        "--fingerprints",
        type=int,
        choices=(64, 128),
        default=0,
        metavar="BITS",
        help="keep a 64- or 128-bit fingerprint per state instead of the state (about 25 "
        "bytes a state; the collision probability is reported); default: full states, exact",
    )
    p_check.add_argument(
        "--workers",
        type=int,
        default=None,
        metavar="N",
        help="explore each target on N processes, the states partitioned among them (default 1)",
    )
    add_ray_argument(p_check)
    p_check.add_argument(
        "--variants", action="store_true", help="check the known-bug variants instead"
    )
    p_check.add_argument(
        "--symbolic", action="store_true", help="CrossHair search over unbounded payloads"
    )
    p_check.add_argument(
        "--adequacy",
        action="store_true",
        help="explore every single-point mutant of each model: which property kills which",
    )
    p_check.add_argument(
        "--jobs",
        type=int,
        default=None,
        metavar="N",
        help="processes checking targets (with --adequacy: mutants) side by side "
        "(default: one per core)",
    )
    p_check.set_defaults(func=_cmd_check)


# -- check ---------------------------------------------------------------------

OK = "ok"
FINDING = "finding"
INCOMPLETE = "incomplete"
INTERRUPTED = "interrupted"
ERROR = "error"


def _cmd_check(args: argparse.Namespace) -> int:
    require_bounds(args)
    require_writable_dir(args.trace_out, "--trace-out")
    require_writable_dir(args.regression_out, "--regression-out")
    require_positive_int(args.jobs, "--jobs", "processes", 2)
    require_positive_int(args.workers, "--workers", "processes", 2)
    if (args.workers or 1) > 1 and args.por:
        raise UsageError("--workers and --por do not combine yet: drop --por or use --workers 1")
    check_ray_usage(args)
    if args.symbolic:
        return _cmd_symbolic(args)
    if args.adequacy:
        return _cmd_adequacy(args)
    if args.variants and args.targets:
        raise UsageError("--variants takes no TARGET")
    run = _CheckRun(args, _chosen_names(args))
    try:
        run.check_all()
    except ExplorationInterrupted as exc:
        run.interrupted(exc.report)
        return EXIT_INTERRUPTED
    except BaseException as exc:  # reported by main(); what was done is printed first
        run.failed(exc)
        raise
    return run.finish()


def _cmd_adequacy(args: argparse.Namespace) -> int:
    """``check --adequacy``: each model's mutants, and which property kills each."""
    from ..check.adequacy import adequacy, report_json, report_lines

    if args.variants:
        raise UsageError("--adequacy measures models, not variants: drop --variants")
    jobs = args.jobs or os.cpu_count() or 1
    entries: list[dict[str, object]] = []
    all_ok = True
    for name in _chosen_names(args):
        _, system, _ = resolve_target(name)
        report = adequacy(system, max_states=args.max_states, jobs=jobs)
        all_ok = all_ok and report.ok
        entries.append(report_json(name, report))
        if not args.json:
            print("\n".join(report_lines(name, report)))
    if args.json:
        print(json.dumps({"ok": all_ok, "targets": entries}, indent=2))
    return EXIT_OK if all_ok else EXIT_FINDING


def _chosen_names(args: argparse.Namespace) -> list[str]:
    if args.variants:
        return [t.name for t in bundled() if t.kind == "variant"]
    if args.targets:
        return list(args.targets)
    return [t.name for t in bundled() if t.kind == "model"]


@dataclass
class _CheckRun:
    """One ``statecore check``: the targets in turn, and what is reported when it stops.

    Whatever stops the run (an error, Ctrl-C), the reports already made are
    printed, with ``--json`` as one valid document, and the targets not
    reached are named.
    """

    args: argparse.Namespace
    names: list[str]
    entries: list[dict[str, Any]] = field(default_factory=list)
    statuses: list[str] = field(default_factory=list)
    rows: list[_Row] = field(default_factory=list)
    current: tuple[str, Target | None] | None = None
    pending: str = ""  # the target being loaded or checked
    started: float = field(default_factory=time.perf_counter)

    def check_all(self) -> None:
        jobs = jobs_for(self.args, self.names)
        if jobs > 1:
            self.args = argparse.Namespace(**{**vars(self.args), "memory_share": jobs})
            for pending, checked in side_by_side(self.names, self.checked_alone, jobs):
                self.pending = pending
                if checked is None:
                    self.check_pending(pending)  # again here: it fails as one process does
                else:
                    self.adopt(checked)
            return
        for pending in self.names:
            self.check_pending(pending)

    def checked_alone(self, pending: str) -> _Checked | None:
        """`pending` checked as `check_pending` would (`statecore.cli.check_jobs`'s worker).

        None if anything raised: the parent checks it again, to report the error.
        """
        alone = _CheckRun(self.args, [pending])
        printed = Printed(sys.stdout.isatty())
        try:
            with redirect_stdout(printed):
                name, system, target = resolve_target(pending)
                alone.check_one(name, system, target, LogProgress(name, sys.stderr))
        except BaseException:
            return None
        return _Checked(printed.getvalue(), alone.entries[0], alone.statuses[0], alone.rows[0])

    def check_pending(self, pending: str) -> None:
        """Load and check the target named `pending`."""
        self.pending = pending
        name, system, target = resolve_target(pending)
        self.current = (name, target)
        self.check_one(name, system, target)
        self.current = None

    def check_one(
        self,
        name: str,
        system: System,
        target: Target | None,
        printer: TerminalProgress | LogProgress | None = None,
    ) -> None:
        printer = printer or progress_printer(name, sys.stderr)
        try:
            run = explore if self.args.ray is None else on_ray(self.args, name, target)
            report = run(
                system,
                max_states=self.args.max_states,
                max_depth=self.args.max_depth,
                max_seconds=self.args.max_time,
                max_memory=memory_bound(self.args),
                symmetry=not self.args.no_symmetry,
                por=self.args.por,
                stop_on_violation=False,
                progress=printer,
                fingerprints=self.args.fingerprints,
                workers=self.args.workers or 1,
            )
        finally:
            printer.clear()
        self.record(name, target, report, _status(report, target if self.args.variants else None))

    def record(self, name: str, target: Target | None, report: Report, status: str) -> None:
        """Write the traces of `report`, then print it; an unwritable output fails after."""
        written, failure = self.write(report, name)
        self.statuses.append(status)
        entry = _report_json(name, target, report, status, written)
        entry["stopped"] = stop_text(report, self.args)
        self.entries.append(entry)
        self.rows.append(_Row.of(name, report, status, target if self.args.variants else None))
        if not self.args.json and not (self.args.quiet and status == OK):
            _print_report(sys.stdout, name, target, report, status, written, self.args)
        if failure is not None:
            raise failure

    def adopt(self, checked: _Checked) -> None:
        """A target checked in another process (`checked_alone`), reported as `record` does."""
        self.statuses.append(checked.status)
        self.entries.append(checked.entry)
        self.rows.append(checked.row)
        sys.stdout.write(checked.text)

    def write(self, report: Report, name: str) -> tuple[dict[str, str], UsageError | None]:
        """The traces and regression tests of `report`'s violations, and what failed."""
        try:
            written = _write_traces(report, name, self.args.trace_out)
        except OSError as exc:
            return {}, output_error("--trace-out", exc)
        try:
            _write_regressions(report, name, self.args.regression_out)
        except OSError as exc:
            return written, output_error("--regression-out", exc)
        return written, None

    def interrupted(self, report: Report) -> None:
        """Ctrl-C: the partial report of the target being checked, then the summary."""
        if self.current is not None:
            try:
                self.record(*self.current, report, INTERRUPTED)
            except UsageError as exc:  # the report is out; Ctrl-C still decides the exit
                print(f"statecore: error: {exc}", file=sys.stderr)
        self.summary(INTERRUPTED)
        print("statecore: interrupted; the report is partial", file=sys.stderr)

    def failed(self, exc: BaseException) -> None:
        status = INTERRUPTED if isinstance(exc, KeyboardInterrupt) else ERROR
        error = str(exc) if isinstance(exc, StatecoreError) else f"{type(exc).__name__}: {exc}"
        self.summary(status, error=error)

    def finish(self) -> int:
        status = _overall(self.statuses)
        self.summary(status)
        return {OK: EXIT_OK, FINDING: EXIT_FINDING, INCOMPLETE: EXIT_INCOMPLETE}[status]

    def summary(self, status: str, error: str | None = None) -> None:
        """The JSON document (with ``--json``); the targets never reached."""
        remaining = self.names[len(self.entries) :]
        if self.args.json:
            doc: dict[str, Any] = {
                "ok": status == OK,
                "status": status,
                "interrupted": status == INTERRUPTED,
                "targets": self.entries,
                "not_checked": remaining,
            }
            if error is not None:
                doc["error"] = error
            print(json.dumps(doc, indent=2))
        else:
            if self.rows and (len(self.names) > 1 or self.args.quiet):
                elapsed = time.perf_counter() - self.started
                print("\n".join(_summary(self.rows, status, self.args.variants, elapsed)))
            others = [n for n in remaining if n != self.pending]
            if others and status != OK:
                print(f"not checked: {', '.join(others)}")
        sys.stdout.flush()


@dataclass(frozen=True)
class _Checked:
    """What checking one target in its own process gave, for the parent to report."""

    text: str  # what `record` printed for it on stdout
    entry: dict[str, Any]  # its ``--json`` entry
    status: str
    row: _Row


@dataclass(frozen=True)
class _Row:
    """One line of the summary table of a ``check`` run."""

    name: str
    states: int
    status: str
    seconds: float
    note: str  # the properties that decided a failure, or the bound that stopped the search

    @classmethod
    def of(cls, name: str, report: Report, status: str, variant: Target | None) -> _Row:
        failing = [r.property.id for r in report.results if r.verdict in (VIOLATED, VACUOUS)]
        expected = variant.expected_violations if variant is not None else frozenset()
        if status == OK:
            note = f"caught: {', '.join(failing)}" if failing else ""
        elif status == FINDING:
            unexpected = [p for p in failing if p not in expected]
            missed = sorted(expected - set(failing))
            parts = [f"{p} {_verdict_of(report, p)}" for p in unexpected]
            parts += [f"{p} not caught" for p in missed]
            note = ", ".join(parts)
        else:
            note = report.stop or ""
        return cls(name, report.states, status, report.seconds, note)


def _verdict_of(report: Report, property_id: str) -> str:
    return next(r.verdict for r in report.results if r.property.id == property_id)


SUMMARY_WORDS = {
    OK: "PASS",
    FINDING: "FAIL",
    INCOMPLETE: "INCOMPLETE",
    INTERRUPTED: "INTERRUPTED",
    ERROR: "ERROR",
}


def _summary(rows: Sequence[_Row], status: str, variants: bool, elapsed: float) -> list[str]:
    """The summary table of a ``check`` run: one line per target, then the tally, whose
    seconds are the run's (with ``--jobs``, the targets' own seconds overlap)."""
    width = max(len("target"), *(len(r.name) for r in rows))
    lines = ["", f"{'target':<{width}}  {'states':>9}  {'verdict':<10}  {'time':>7}  detail"]
    for r in rows:
        word = SUMMARY_WORDS.get(r.status, r.status.upper())
        lines.append(
            f"{r.name:<{width}}  {r.states:>9}  {word:<10}  {r.seconds:>6.2f}s  {r.note}".rstrip()
        )
    counts = {SUMMARY_WORDS[s]: sum(r.status == s for r in rows) for s in SUMMARY_WORDS}
    tally = ", ".join(f"{n} {word}" for word, n in counts.items() if n)
    what = "variants" if variants else "targets"
    lines.append(f"{len(rows)} {what}: {tally}; {elapsed:.2f}s; {SUMMARY_WORDS[status]}")
    return lines


def _overall(statuses: Sequence[str]) -> str:
    if FINDING in statuses:
        return FINDING
    if INCOMPLETE in statuses:
        return INCOMPLETE
    return OK


def _status(report: Report, variant: Target | None) -> str:
    """``ok``, ``finding`` or ``incomplete`` for one report (a variant must show its bug)."""
    failing = {r.property.id for r in report.results if r.verdict in (VIOLATED, VACUOUS)}
    unknown = any(r.verdict == UNKNOWN for r in report.results)
    expected = variant.expected_violations if variant is not None else frozenset()
    if failing - expected:
        return FINDING
    if unknown:
        return INCOMPLETE
    return OK if failing == expected else FINDING


def _write_traces(report: Report, name: str, directory: Path | None) -> dict[str, str]:
    if directory is None:
        return {}
    from ..traces.itf import write_itf

    written: dict[str, str] = {}
    for result in report.results:
        if result.trace is not None and result.verdict == VIOLATED:
            directory.mkdir(parents=True, exist_ok=True)
            path = directory / f"{file_stem(name)}.{result.property.id}.itf.json"
            write_itf(result.trace, report.system, path, meta={"target": name})
            written[result.property.id] = str(path)
    return written


def _write_regressions(report: Report, name: str, directory: Path | None) -> None:
    if directory is None:
        return
    from ..traces.regression import regression_test_source

    for result in report.results:
        if result.trace is not None and result.verdict == VIOLATED:
            directory.mkdir(parents=True, exist_ok=True)
            stem = f"test_{name}_{result.property.id}".replace(".", "_").replace(":", "_")
            path = directory / f"{stem}.py"
            path.write_text(regression_test_source(result.trace, name))


MARKS = {OK: ("PASS", "32"), FINDING: ("FAIL", "31"), INCOMPLETE: ("INCOMPLETE", "33")}


def _print_report(
    out: TextIO,
    name: str,
    target: Target | None,
    report: Report,
    status: str,
    written: dict[str, str],
    args: argparse.Namespace,
) -> None:
    text, code = MARKS.get(status, MARKS[INCOMPLETE])
    scope = stop_text(report, args) or "complete"
    print(
        f"{colour(text, code, out)} {name}: {report.states} states, {report.transitions} "
        f"transitions, depth {report.depth}, {report.seconds:.2f}s "
        f"({report.rate:,.0f} states/s), {scope}",
        file=out,
    )
    for note in report.notes:
        print(f"  note: {note}", file=out)
    if args.variants and target is not None:
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
                # A trace names a target outside the registry, but replay imports only
                # what the user names: the command names it.
                extra = f" --target {name}" if is_user_target(name) else ""
                print(f"      replay: statecore replay {written[r.property.id]}{extra}", file=out)
    for cov in report.coverage:
        print(
            f"  coverage {cov.component} ({cov.machine}): {len(cov.taken)}/{cov.total} "
            f"transitions taken",
            file=out,
        )
        untaken = report.system.component(cov.component).untaken
        for never in cov.never:
            print(f"    {never_taken(never, untaken)}", file=out)
    out.flush()


def _report_json(
    name: str, target: Target | None, report: Report, status: str, written: dict[str, str]
) -> dict[str, Any]:
    return {
        "name": name,
        "expected": target.expected if target else None,
        "ok": status == OK,
        "status": status,
        "states": report.states,
        "transitions": report.transitions,
        "depth": report.depth,
        "seconds": round(report.seconds, 4),
        "states_per_s": round(report.rate, 1),
        "complete": report.complete,
        "complete_depth": report.complete_depth,
        "stop": report.stop or None,
        "symmetry": report.symmetry,
        "notes": list(report.notes),
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
    from ..check.symbolic import symbolic_check

    if not args.targets:
        raise UsageError("--symbolic needs at least one TARGET")
    findings_total = 0
    rows: list[dict[str, Any]] = []
    for name in args.targets:
        _, system, _ = resolve_target(name)
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
    return EXIT_OK if findings_total == 0 else EXIT_FINDING
