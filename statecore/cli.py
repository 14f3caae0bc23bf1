"""The ``statecore`` command: list, check, replay, diagram and fuzz lifecycle models.

Exit codes, one meaning each (``docs/cli.md`` has the table):

* 0 - every property holds, or nothing was found;
* 1 - a finding: a property violated or vacuous, a variant not caught as
  declared, a fuzz finding, a replayed trace that still shows its violation;
* 2 - bad usage, a bad input file, an unknown target, an invalid definition,
  a model action or property that raised (the message says which), or an
  optional dependency the command needs that is not installed (the message
  names the extra);
* 3 - an internal error in statecore (the traceback follows the message);
* 4 - incomplete: a bound stopped the search before every property was
  decided, and nothing was found;
* 130 - interrupted (Ctrl-C), after the partial report.
"""

from __future__ import annotations

import argparse
import inspect
import json
import math
import os
import re
import sys
import tempfile
import time
import traceback
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, NoReturn, TextIO, TypeVar

from .diagram import add_parser as add_diagram_parser
from .errors import StatecoreError
from .explore import (
    HOLDS,
    UNKNOWN,
    VACUOUS,
    VIOLATED,
    ExplorationInterrupted,
    Progress,
    Report,
    explore,
)
from .registry import Target, TargetError, bundled, resolve, system_for_trace
from .system import System

EXIT_OK = 0
EXIT_FINDING = 1
EXIT_USAGE = 2
EXIT_INTERNAL = 3
EXIT_INCOMPLETE = 4
EXIT_INTERRUPTED = 130

PROGRESS_INTERVAL = 10.0
"""Seconds between two progress lines when stderr is not a terminal (CI logs)."""

MEMORY_FRACTION = 0.75
"""The default ``--max-memory``: this share of the machine's physical memory."""

REPORT_HINT = (
    "statecore: this is a bug in statecore, not in the code under test; please report it "
    "with the command line and the traceback above"
)

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
  statecore fuzz chunk_transfer --adapter model:chunk_transfer_6670

exit codes: 0 all hold, 1 a finding, 2 usage, input or model error,
  3 internal error in statecore, 4 incomplete (a bound stopped the search), 130 interrupted
"""


T = TypeVar("T")


class UsageError(StatecoreError):
    """A flag or argument the command cannot run with."""


def main(argv: Sequence[str] | None = None) -> int:
    """Run the command line; return the exit code."""
    try:
        args = _parse(argv)
    except SystemExit as exc:  # --help, --version, or a usage error already printed
        return exc.code if isinstance(exc.code, int) else EXIT_USAGE
    try:
        code: int = args.func(args)
        return code
    except StatecoreError as exc:
        print(f"statecore: error: {exc}", file=sys.stderr)
        return EXIT_USAGE
    except ImportError as exc:
        missing = _missing_extra(exc, f"statecore {args.command}")
        if missing is None:
            return _internal_error(exc)
        print(f"statecore: error: {missing}", file=sys.stderr)
        return EXIT_USAGE
    except KeyboardInterrupt:
        print("statecore: interrupted", file=sys.stderr)
        return EXIT_INTERRUPTED
    except BrokenPipeError:  # e.g. `statecore list | head`: the reader left early
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return EXIT_OK
    except Exception as exc:
        return _internal_error(exc)


OPTIONAL_DEPENDENCIES: Mapping[str, tuple[str, str]] = {
    "hypothesis": ("Hypothesis", "test"),
    "crosshair": ("CrossHair", "check"),
    "hypothesis_crosshair": ("hypothesis-crosshair", "check"),
    "transitions": ("pytransitions", "interop"),
    "statemachine": ("python-statemachine", "bench"),
}
"""Top-level module of an optional dependency: its name and the extra that installs it."""


def _missing_extra(exc: BaseException, command: str) -> str | None:
    """The one-line message for an optional dependency that is not installed, else None.

    The `ImportError` may be wrapped (statecore.symbolic re-raises it with a
    hint), so its causes are searched too.
    """
    seen: BaseException | None = exc
    while seen is not None:
        name = getattr(seen, "name", None) if isinstance(seen, ImportError) else None
        top = (name or "").split(".")[0]
        if top in OPTIONAL_DEPENDENCIES:
            package, extra = OPTIONAL_DEPENDENCIES[top]
            return (
                f"{command} needs {package}, which is not installed; install the "
                f"'{extra}' extra: pip install -e '.[{extra}]' in the statecore checkout"
            )
        seen = seen.__cause__ or seen.__context__
    return None


def _internal_error(exc: BaseException) -> int:
    """Say that statecore itself failed, so CI can tell it from a bug in the code checked."""
    sys.stdout.flush()
    print(f"statecore: internal error: {type(exc).__name__}: {exc}", file=sys.stderr)
    traceback.print_exception(exc, file=sys.stderr)
    print(REPORT_HINT, file=sys.stderr)
    return EXIT_INTERNAL


class _Parser(argparse.ArgumentParser):
    """An argument parser whose usage errors are one ``statecore: error:`` line."""

    def error(self, message: str) -> NoReturn:
        command = self.prog.removeprefix("statecore").strip()
        where = f"{command}: " if command else ""
        self.exit(EXIT_USAGE, f"statecore: error: {where}{message} (see '{self.prog} --help')\n")


def _parse(argv: Sequence[str] | None) -> argparse.Namespace:
    """Parse `argv`; an argument the command does not know is reported with its usage."""
    parser = _parser()
    args, extra = parser.parse_known_args(argv)
    if extra:
        command = _subparsers(parser).choices.get(getattr(args, "command", None) or "")
        (command or parser).error(f"unrecognized arguments: {' '.join(extra)}")
    return args


def _subparsers(parser: argparse.ArgumentParser) -> Any:
    return next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))


def _version() -> str:
    from importlib.metadata import PackageNotFoundError, version

    from . import __version__

    try:
        installed = version("statecore")
    except PackageNotFoundError:  # run from a source tree that is not installed
        installed = __version__
    python = ".".join(str(n) for n in sys.version_info[:3])
    return f"statecore {installed} (Python {python}, {Path(__file__).resolve().parent})"


def _parser() -> argparse.ArgumentParser:
    parser = _Parser(
        prog="statecore",
        description=(
            "List, check, replay, draw and fuzz declarative lifecycle models "
            "('statecore COMMAND --help' for one command)."
        ),
        epilog=EPILOG_MAIN,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--version", action="version", version=_version())
    sub: Any = parser.add_subparsers(
        dest="command", required=True, metavar="COMMAND", title="commands"
    )

    p_list = sub.add_parser(
        "list",
        help="list bundled targets (NAME<TAB>KIND<TAB>EXPECTED), adapters and properties",
        epilog="example:\n  statecore list | grep variant",
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p_list.add_argument("--json", action="store_true", help="print JSON")
    p_list.set_defaults(func=_cmd_list)
    _add_check_parser(sub)

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
    sub.choices["diagram"].set_defaults(func=_cmd_diagram)
    _add_fuzz_parser(sub)
    return parser


def _add_check_parser(sub: Any) -> None:
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
    p_check.add_argument(
        "--max-states", type=int, default=None, metavar="N", help="stop after N distinct states"
    )
    p_check.add_argument(
        "--max-memory",
        type=float,
        default=None,
        metavar="GB",
        help="stop when the process holds GB gigabytes (default: "
        + _memory_default_text().replace("%", "%%")
        + ")",
    )
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
        help="processes exploring mutants side by side (default: one per core)",
    )
    p_check.set_defaults(func=_cmd_check)


def _add_fuzz_parser(sub: Any) -> None:
    p_fuzz = sub.add_parser(
        "fuzz",
        help="fuzz a real implementation against a model (guided paths, then Hypothesis)",
        epilog=(
            "examples:\n  statecore fuzz chunk_transfer --adapter vllm-omni --budget 60\n"
            "  statecore fuzz chunk_transfer --adapter model:chunk_transfer_6670 --seed 1\n"
            "  statecore fuzz mypkg.shop:MODEL --adapter mypkg.shop:ShopAdapter\n\n"
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
    p_fuzz.set_defaults(func=_cmd_fuzz)


# -- validating flags before any work --------------------------------------------


def _require_positive_int(value: int | None, flag: str, what: str, example: int) -> None:
    if value is not None and value < 1:
        raise UsageError(
            f"{flag} {value}: must be a positive number of {what} (e.g. {flag} {example})"
        )


def _require_positive_float(value: float | None, flag: str, what: str, example: int) -> None:
    if value is not None and not (math.isfinite(value) and value > 0):
        raise UsageError(
            f"{flag} {value}: must be a positive, finite number of {what} (e.g. {flag} {example})"
        )


def _require_writable_dir(path: Path | None, flag: str) -> None:
    """Refuse an output directory that cannot be written, before the work whose result it keeps.

    Nothing is created here: a missing directory is made only when there is
    something to write, but its nearest existing ancestor must be a writable
    directory.
    """
    if path is None:
        return
    if path.exists() and not path.is_dir():
        raise UsageError(
            f"{flag} {path}: is a file, not a directory; give a directory (created if missing)"
        )
    ancestor = path
    while not ancestor.exists() and ancestor != ancestor.parent:
        ancestor = ancestor.parent
    if not ancestor.is_dir():
        raise UsageError(
            f"{flag} {path}: {ancestor} is a file, so the directory cannot be created; "
            f"give another directory"
        )
    if not os.access(ancestor, os.W_OK | os.X_OK):
        raise UsageError(
            f"{flag} {path}: {ancestor} is not writable; give a directory you can write to"
        )
    try:
        _probe_write(path, ancestor)
    except OSError as exc:
        raise UsageError(
            f"{flag} {path}: cannot write there ({exc.strerror or exc}); give a directory you "
            f"can write to"
        ) from None


def _probe_write(path: Path, ancestor: Path) -> None:
    """Write in `path` (or make its first missing part) and undo it: what access() misses."""
    if ancestor == path:
        with tempfile.TemporaryFile(dir=path):
            return
    first = path
    while first.parent != ancestor:
        first = first.parent
    first.mkdir()
    first.rmdir()


def _output_error(flag: str, exc: OSError) -> UsageError:
    return UsageError(f"{flag}: cannot write {exc.filename or ''}: {exc.strerror or exc}")


# -- loading user targets --------------------------------------------------------


def _resolve(name: str) -> tuple[str, System, Target | None]:
    """`resolve`, with a user module's own failures turned into one-line errors."""
    bundled()  # outside the guard: the bundled models failing to import is statecore's bug
    return _guard_user_code(name, lambda: resolve(name))


def _guard_user_code(name: str, load: Callable[[], T]) -> T:
    """Run `load` for target `name`; what user code raises becomes a `TargetError`.

    A bundled target that fails to load is a bug in statecore, so only
    ``module:object`` targets are guarded.
    """
    if ":" not in name:
        return load()
    try:
        return load()
    except StatecoreError:
        raise
    except SyntaxError as exc:
        where = f"{exc.filename}, line {exc.lineno}" if exc.filename else "its source"
        raise TargetError(
            f"target {name!r}: {where}: syntax error: {exc.msg}; fix the module"
        ) from None
    except SystemExit as exc:
        raise TargetError(
            f"target {name!r}: importing it called sys.exit({exc.code!r}); move script code "
            f"under `if __name__ == '__main__':`"
        ) from None
    except Exception as exc:
        raise TargetError(_user_failure(name, exc)) from exc


def _user_failure(name: str, exc: Exception) -> str:
    """What went wrong in the user's module or factory behind `name`, in one line."""
    module_name, _, attr = name.partition(":")
    module = sys.modules.get(module_name)
    if module is None:  # a failed import leaves nothing behind
        return (
            f"target {name!r}: importing {module_name!r} raised {_exception_text(exc)}"
            f"{_user_frame(exc)}; fix the module"
        )
    factory = _attribute(module, attr)
    needed = _required_parameters(factory)
    if needed:
        return (
            f"target {name!r}: {attr}() needs arguments ({', '.join(needed)}); give a System, "
            f"a Machine, or a function taking no arguments that returns one"
        )
    return (
        f"target {name!r}: calling {attr}() raised {_exception_text(exc)}{_user_frame(exc)}; "
        f"fix the function"
    )


def _attribute(module: object, path: str) -> object:
    obj: object = module
    for part in path.split("."):
        obj = getattr(obj, part, None)
    return obj


def _required_parameters(obj: object) -> list[str]:
    if not callable(obj):
        return []
    try:
        signature = inspect.signature(obj)
    except (TypeError, ValueError):
        return []
    variadic = (inspect.Parameter.VAR_POSITIONAL, inspect.Parameter.VAR_KEYWORD)
    return [
        p.name
        for p in signature.parameters.values()
        if p.default is inspect.Parameter.empty and p.kind not in variadic
    ]


def _exception_text(exc: BaseException) -> str:
    text = str(exc).splitlines()[0] if str(exc) else ""
    return f"{type(exc).__name__}: {text}" if text else type(exc).__name__


def _user_frame(exc: BaseException) -> str:
    """`` at FILE, line N``: the innermost frame outside statecore and importlib."""
    here = Path(__file__).resolve().parent
    frames = [
        f
        for f in traceback.extract_tb(exc.__traceback__)
        if not f.filename.startswith("<") and here not in Path(f.filename).resolve().parents
    ]
    if not frames:
        return ""
    return f" at {frames[-1].filename}, line {frames[-1].lineno}"


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
        return EXIT_OK
    for t in targets:
        print(f"{t.name}\t{t.kind}\t{t.expected}")
    for a in adapters:
        print(f"{a.name}\tadapter\t{a.target}")
    for name, p in properties:
        print(f"{name}.{p.id}\tproperty\t{p.kind}")
    return EXIT_OK


# -- check ---------------------------------------------------------------------

OK = "ok"
FINDING = "finding"
INCOMPLETE = "incomplete"
INTERRUPTED = "interrupted"
ERROR = "error"


def _cmd_check(args: argparse.Namespace) -> int:
    _require_positive_int(args.max_states, "--max-states", "states", 1_000_000)
    _require_positive_float(args.max_memory, "--max-memory", "gigabytes", 4)
    _require_writable_dir(args.trace_out, "--trace-out")
    _require_writable_dir(args.regression_out, "--regression-out")
    _require_positive_int(args.jobs, "--jobs", "processes", 2)
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
    from .adequacy import adequacy, report_json, report_lines

    if args.variants:
        raise UsageError("--adequacy measures models, not variants: drop --variants")
    jobs = args.jobs or os.cpu_count() or 1
    entries: list[dict[str, object]] = []
    all_ok = True
    for name in _chosen_names(args):
        _, system, _ = _resolve(name)
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

    def check_all(self) -> None:
        for pending in self.names:
            self.pending = pending
            name, system, target = _resolve(pending)
            self.current = (name, target)
            self.check_one(name, system, target)
            self.current = None

    def check_one(self, name: str, system: System, target: Target | None) -> None:
        printer = _progress_printer(name, sys.stderr)
        try:
            report = explore(
                system,
                max_states=self.args.max_states,
                max_memory=_memory_bound(self.args.max_memory),
                symmetry=not self.args.no_symmetry,
                stop_on_violation=False,
                progress=printer,
            )
        finally:
            printer.clear()
        self.record(name, target, report, _status(report, target if self.args.variants else None))

    def record(self, name: str, target: Target | None, report: Report, status: str) -> None:
        """Write the traces of `report`, then print it; an unwritable output fails after."""
        written, failure = self.write(report, name)
        self.statuses.append(status)
        entry = _report_json(name, target, report, status, written)
        entry["stopped"] = _stop_text(report, self.args)
        self.entries.append(entry)
        self.rows.append(_Row.of(name, report, status, target if self.args.variants else None))
        if not self.args.json and not (self.args.quiet and status == OK):
            _print_report(sys.stdout, name, target, report, status, written, self.args)
        if failure is not None:
            raise failure

    def write(self, report: Report, name: str) -> tuple[dict[str, str], UsageError | None]:
        """The traces and regression tests of `report`'s violations, and what failed."""
        try:
            written = _write_traces(report, name, self.args.trace_out)
        except OSError as exc:
            return {}, _output_error("--trace-out", exc)
        try:
            _write_regressions(report, name, self.args.regression_out)
        except OSError as exc:
            return written, _output_error("--regression-out", exc)
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
                print("\n".join(_summary(self.rows, status, self.args.variants)))
            others = [n for n in remaining if n != self.pending]
            if others and status != OK:
                print(f"not checked: {', '.join(others)}")
        sys.stdout.flush()


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


def _summary(rows: Sequence[_Row], status: str, variants: bool) -> list[str]:
    """The summary table of a ``check`` run: one line per target, then the total."""
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
    seconds = sum(r.seconds for r in rows)
    lines.append(f"{len(rows)} {what}: {tally}; {seconds:.2f}s; {SUMMARY_WORDS[status]}")
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


def _memory_bound(gigabytes: float | None) -> int | None:
    """``--max-memory`` in bytes, or the default share of physical memory (None: unknown)."""
    if gigabytes is not None:
        return int(gigabytes * 2**30)
    total = _physical_memory()
    return int(total * MEMORY_FRACTION) if total else None


def _physical_memory() -> int | None:
    try:
        total = os.sysconf("SC_PHYS_PAGES") * os.sysconf("SC_PAGE_SIZE")
    except (AttributeError, ValueError, OSError):
        return None
    return total if total > 0 else None


def _memory_default_text() -> str:
    bound = _memory_bound(None)
    if bound is None:
        return "none: this system does not tell its physical memory"
    return f"{MEMORY_FRACTION:.0%} of physical memory, {bound / 2**30:.3g} GB here"


def _stop_text(report: Report, args: argparse.Namespace) -> str | None:
    """Why the search stopped early and how to let it go further; None if it finished."""
    if not report.stop:
        return None
    undecided = any(r.verdict == UNKNOWN for r in report.results)
    before = " before every property was decided" if undecided else ""
    if report.stop == "max_states":
        return (
            f"stopped at --max-states {args.max_states}{before}; raise --max-states "
            f"to search further"
        )
    if report.stop == "max_memory":
        bound = (_memory_bound(args.max_memory) or 0) / 2**30
        source = "--max-memory" if args.max_memory is not None else "the default --max-memory"
        return (
            f"stopped at the memory bound of {bound:.3g} GB ({source}){before}; raise it with "
            f"--max-memory GB, or check a smaller configuration"
        )
    if report.stop == "interrupted":
        return f"interrupted (Ctrl-C){before}"
    return f"stopped early ({report.stop}){before}"


def _write_traces(report: Report, name: str, directory: Path | None) -> dict[str, str]:
    if directory is None:
        return {}
    from .itf import write_itf

    written: dict[str, str] = {}
    for result in report.results:
        if result.trace is not None and result.verdict == VIOLATED:
            directory.mkdir(parents=True, exist_ok=True)
            path = directory / f"{_file_stem(name)}.{result.property.id}.itf.json"
            write_itf(result.trace, report.system, path, meta={"target": name})
            written[result.property.id] = str(path)
    return written


def _file_stem(name: str) -> str:
    """`name` as part of a file name: ``mypkg.mod:SYSTEM`` becomes ``mypkg.mod_SYSTEM``.

    ``:`` is not allowed in a Windows file name nor in some CI artifact stores;
    the trace header keeps the target's real name.
    """
    return re.sub(r"[^\w.-]", "_", name)


def _write_regressions(report: Report, name: str, directory: Path | None) -> None:
    if directory is None:
        return
    from .regression import regression_test_source

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
    scope = _stop_text(report, args) or "complete"
    print(
        f"{_colour(text, code, out)} {name}: {report.states} states, {report.transitions} "
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
                extra = f" --target {name}" if ":" in name else ""
                print(f"      replay: statecore replay {written[r.property.id]}{extra}", file=out)
    for cov in report.coverage:
        print(
            f"  coverage {cov.component} ({cov.machine}): {len(cov.taken)}/{cov.total} "
            f"transitions taken",
            file=out,
        )
        untaken = report.system.component(cov.component).untaken
        for never in cov.never:
            print(f"    {_never_taken(never, untaken)}", file=out)
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
    from .symbolic import symbolic_check

    if not args.targets:
        raise UsageError("--symbolic needs at least one TARGET")
    findings_total = 0
    rows: list[dict[str, Any]] = []
    for name in args.targets:
        _, system, _ = _resolve(name)
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


# -- replay --------------------------------------------------------------------


def _cmd_replay(args: argparse.Namespace) -> int:
    from .itf import TraceFileError
    from .replay import replay

    if args.adapter:
        return _replay_adapter(args)
    from .itf import read_header

    _refuse_implementation_trace(args)
    name = args.target or str(read_header(args.trace).get("target") or "")
    _, system = _guard_user_code(name, lambda: system_for_trace(args.trace, args.target))
    result = replay(system, args.trace)
    if result.trace is not None:
        print(result.trace.table(system))
    print(result.explain(system))
    if not result.reproduced:
        raise TraceFileError(str(args.trace), None, "the trace no longer shows what it recorded")
    return EXIT_FINDING if result.verdict == VIOLATED else EXIT_OK


def _refuse_implementation_trace(args: argparse.Namespace) -> None:
    """A conformance, crash or livelock trace records an implementation: it needs --adapter."""
    from .fuzz import IMPLEMENTATION_KINDS
    from .itf import read_header

    header = read_header(args.trace)
    found = str(header.get("property") or "")
    if found in IMPLEMENTATION_KINDS and not header.get("adapter"):
        raise UsageError(
            f"{args.trace}: a {found} trace records what an implementation did, which the "
            "model alone cannot replay; pass the adapter that ran it: --adapter NAME or "
            "--adapter package.module:object (and --target if the model is not bundled)"
        )


def _replay_adapter(args: argparse.Namespace) -> int:
    from .fuzz import replay_with_adapter
    from .itf import read_itf
    from .registry import trace_target
    from .trace import Trace

    target, _ = trace_target(args.trace, args.target, args.adapter)
    if args.target:
        _resolve(args.target)  # a user module's failures are one line
    system, factory, spec = _resolve_adapter(target, args.adapter)
    trace = read_itf(args.trace, system)
    finding = replay_with_adapter(system, trace, factory, known={})
    where = f"replayed {len(trace)} action(s) through {spec.name} on system {system.name!r}"
    if finding is None:
        print(Trace(trace.system, trace.steps).table(system))
        print(f"{where}: no finding; the implementation behaves as the model predicts")
        return EXIT_OK
    print(finding.trace.table(system))
    print(f"{where}: {finding.kind} at step {len(finding.trace)}")
    return EXIT_FINDING


# -- diagram -------------------------------------------------------------------


def _cmd_diagram(args: argparse.Namespace) -> int:
    """`statecore.diagram.run`, after loading a user's target where its failures are one line."""
    from .diagram import run

    for name in (args.target, args.diff):
        if args.trace is None and name is not None and ":" in name:
            _resolve(name)  # imported once; run() finds the module loaded
    code: int = run(args)
    return code


# -- fuzz ----------------------------------------------------------------------


def _cmd_fuzz(args: argparse.Namespace) -> int:
    from .fuzz import FuzzInterrupted, fuzz

    _require_positive_float(args.budget, "--budget", "seconds", 60)
    _require_positive_int(args.max_examples, "--max-examples", "examples", 100)
    _require_writable_dir(args.trace_out, "--trace-out")
    _resolve(args.target)  # a user module's failures are one line
    system, factory, spec = _resolve_adapter(args.target, args.adapter)
    printer = _fuzz_progress_printer(f"{args.target} / {spec.name}", sys.stderr)
    interrupted = False
    try:
        report = fuzz(
            system,
            factory,
            budget=args.budget,
            max_examples=args.max_examples,
            seed=args.seed,
            profile=args.profile,
            known={} if args.no_known else None,
            swarm=not args.no_swarm,
            guided=not args.no_guided,
            progress=printer,
        )
    except FuzzInterrupted as stop:
        report, interrupted = stop.report, True
    finally:
        printer.clear()
    trace_file, failure = None, None
    if report.finding is not None:
        try:
            trace_file = _write_fuzz_trace(report, args, spec.name)
        except OSError as exc:
            failure = _output_error("--trace-out", exc)
    replay = _fuzz_replay_command(trace_file, args.target, spec.name)
    if args.json:
        print(json.dumps(_fuzz_json(report, spec.name, trace_file, replay), indent=2))
    else:
        _print_fuzz(report, args.target, spec.name, trace_file, replay)
    if interrupted:
        print("statecore: interrupted", file=sys.stderr)
        return EXIT_INTERRUPTED
    if failure is not None:
        raise failure
    return EXIT_OK if report.ok else EXIT_FINDING


def _resolve_adapter(target: str, adapter: str) -> tuple[System, Callable[[], Any], Any]:
    """`resolve_adapter`, with the user's own adapter module failing in one line."""
    from .registry import is_user_adapter, resolve_adapter

    if not is_user_adapter(adapter):
        return resolve_adapter(target, adapter)
    try:
        return resolve_adapter(target, adapter)
    except StatecoreError:
        raise
    except SyntaxError as exc:
        where = f"{exc.filename}, line {exc.lineno}" if exc.filename else "its source"
        raise TargetError(
            f"adapter {adapter!r}: {where}: syntax error: {exc.msg}; fix the module"
        ) from None
    except Exception as exc:
        raise TargetError(
            f"adapter {adapter!r}: importing it raised {_exception_text(exc)}"
            f"{_user_frame(exc)}; fix the module"
        ) from exc


def _write_fuzz_trace(report: Any, args: argparse.Namespace, adapter: str) -> Path:
    from .itf import write_itf

    finding = report.finding
    args.trace_out.mkdir(parents=True, exist_ok=True)
    safe = adapter.replace(":", "_")
    path: Path = args.trace_out / f"{report.system.name}.{safe}.{finding.property_id}.itf.json"
    meta = {"target": args.target, "adapter": adapter}
    write_itf(finding.trace, report.system, path, meta=meta)
    return path


def _fuzz_replay_command(trace_file: Path | None, target: str, adapter: str) -> str | None:
    """The command that replays a fuzz trace; --target only where the header's is not enough."""
    import shlex

    from .registry import bundled

    if trace_file is None:
        return None
    bundled_names = {t.name for t in bundled()}
    words = ["statecore", "replay", str(trace_file)]
    if target not in bundled_names:
        words += ["--target", target]
    words += ["--adapter", adapter]
    return " ".join(shlex.quote(w) for w in words)


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
        head = f"{_colour('INTERRUPTED', '33', sys.stdout)} {name}: {timing}"
    elif f is None:
        head = f"{_colour('PASS', '32', sys.stdout)} {name}: nothing found, {timing}"
    else:
        when = f"{report.found_after:.2f}s" if report.found_after is not None else "?"
        found = f"found by the {report.found_in} phase after {when}"
        head = f"{_colour('FOUND', '31', sys.stdout)} {name}: {found}, {timing}"
    print(head)
    guided = report.guided
    if guided is None:
        print("  guided: off (--no-guided)")
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
    if report.examples or not (f is not None and report.found_in == "guided"):
        cut = f" (and {report.discarded} Hypothesis cut short)" if report.discarded else ""
        print(f"  search: {report.examples} examples{cut}, {report.steps} steps")
    else:
        print("  search: not run (the guided phase found it)")
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
            print(f"    {_never_taken(name_, untaken)}")


class _FuzzTerminalProgress:
    """The fuzz progress line, rewritten in place on a terminal."""

    def __init__(self, stream: TextIO) -> None:
        self.stream = stream
        self.shown = False

    def __call__(self, p: Any) -> None:
        self.shown = True
        self.stream.write(f"\r{_fuzz_progress_text(p)}   ")
        self.stream.flush()

    def clear(self) -> None:
        if self.shown:
            self.stream.write("\r\033[K")
            self.stream.flush()
            self.shown = False


class _FuzzLogProgress:
    """One plain fuzz progress line every `PROGRESS_INTERVAL` seconds, for a CI log."""

    def __init__(self, name: str, stream: TextIO) -> None:
        self.name = name
        self.stream = stream
        self.last = time.monotonic()

    def __call__(self, p: Any) -> None:
        now = time.monotonic()
        if now - self.last < PROGRESS_INTERVAL:
            return
        self.last = now
        self.stream.write(f"statecore: fuzzing {self.name}: {_fuzz_progress_text(p)}\n")
        self.stream.flush()

    def clear(self) -> None:
        """Nothing to clear: each line stands on its own."""


def _fuzz_progress_text(p: Any) -> str:
    taken, total = p.transitions
    met, goals = p.goals
    return (
        f"{p.phase}, {p.paths} paths, {p.examples} examples, {p.replays} replays, "
        f"{p.steps_per_second:,.0f} steps/s, transitions {taken}/{total}, goals {met}/{goals}, "
        f"findings {p.findings}, known {p.known}, {p.seconds:.0f}s"
    )


def _fuzz_progress_printer(name: str, stream: TextIO) -> _FuzzTerminalProgress | _FuzzLogProgress:
    return _FuzzTerminalProgress(stream) if stream.isatty() else _FuzzLogProgress(name, stream)


def _never_taken(name: str, untaken: Mapping[str, str]) -> str:
    """One coverage line: an untaken transition, with its reason if one is declared."""
    if name in untaken:
        return f"not taken by design: {name} ({untaken[name]})"
    return f"never taken: {name}"


# -- terminal helpers ----------------------------------------------------------


def _colour(text: str, code: str, stream: TextIO) -> str:
    if os.environ.get("NO_COLOR") or not stream.isatty():
        return text
    return f"\033[{code}m{text}\033[0m"


class _TerminalProgress:
    """A progress line rewritten in place on a terminal."""

    def __init__(self, stream: TextIO) -> None:
        self.stream = stream
        self.shown = False

    def __call__(self, p: Progress) -> None:
        self.shown = True
        self.stream.write(
            f"\r{p.states:,} states  {p.rate:,.0f} states/s  depth {p.depth}  queue {p.queue:,}   "
        )
        self.stream.flush()

    def clear(self) -> None:
        if self.shown:
            self.stream.write("\r\033[K")
            self.shown = False


class _LogProgress:
    """One plain progress line every `PROGRESS_INTERVAL` seconds, so a CI log shows life."""

    def __init__(self, name: str, stream: TextIO) -> None:
        self.name = name
        self.stream = stream
        self.last = time.monotonic()

    def __call__(self, p: Progress) -> None:
        now = time.monotonic()
        if now - self.last < PROGRESS_INTERVAL:
            return
        self.last = now
        self.stream.write(
            f"statecore: checking {self.name}: {p.states:,} states, {p.rate:,.0f} states/s, "
            f"depth {p.depth}, queue {p.queue:,}, {p.seconds:.0f}s\n"
        )
        self.stream.flush()

    def clear(self) -> None:
        """Nothing to clear: each line stands on its own."""


def _progress_printer(name: str, stream: TextIO) -> _TerminalProgress | _LogProgress:
    return _TerminalProgress(stream) if stream.isatty() else _LogProgress(name, stream)


if __name__ == "__main__":
    raise SystemExit(main())
