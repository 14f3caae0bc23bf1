"""The ``statecore`` command: list, check, replay, diagram and fuzz lifecycle models.

Exit codes, one meaning each (``docs/cli.md`` has the table):

* 0 - every property holds, or nothing was found;
* 1 - a finding: a property violated or vacuous, a variant not caught as
  declared, a fuzz finding, a replayed trace that still shows its violation,
  a mutant that ``statecore mutate``'s fuzzing did not kill;
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
import json
import os
import sys
import traceback
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any, NoReturn

from ..errors import StatecoreError
from ..module_settings import forward_settings
from ..registry import bundled
from ..render.diagram import add_parser as add_diagram_parser
from . import progress as cli_progress
from .check import add_check_parser
from .check_bounds import MEMORY_FRACTION
from .common import EXIT_INTERNAL, EXIT_INTERRUPTED, EXIT_OK, EXIT_USAGE, REPORT_HINT
from .fuzz import add_fuzz_parser
from .mutate import add_mutate_parser
from .progress import PROGRESS_INTERVAL, FuzzTerminalProgress, progress_printer
from .replay import cmd_diagram, cmd_replay

__all__ = ["EPILOG_MAIN", "MEMORY_FRACTION", "PROGRESS_INTERVAL", "main"]

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
  statecore mutate request_state_system --adapter request-state-accessor \\
    --module statecore.models.implementations.request_state --functions cleanup

exit codes: 0 all hold, 1 a finding, 2 usage, input or model error,
  3 internal error in statecore, 4 incomplete (a bound stopped the search), 130 interrupted
"""


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
    "coverage": ("coverage.py", "coverage"),
}
"""Top-level module of an optional dependency: its name and the extra that installs it."""


def _missing_extra(exc: BaseException, command: str) -> str | None:
    """The one-line message for an optional dependency that is not installed, else None.

    The `ImportError` may be wrapped (statecore.check.symbolic re-raises it with a
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

    from .. import __version__

    try:
        installed = version("statecore")
    except PackageNotFoundError:  # run from a source tree that is not installed
        installed = __version__
    python = ".".join(str(n) for n in sys.version_info[:3])
    return f"statecore {installed} (Python {python}, {Path(__file__).resolve().parents[1]})"


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
    add_check_parser(sub)

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
    p_replay.set_defaults(func=cmd_replay)
    add_diagram_parser(sub)
    sub.choices["diagram"].set_defaults(func=cmd_diagram)
    add_fuzz_parser(sub)
    add_mutate_parser(sub)
    return parser


# -- list ----------------------------------------------------------------------


def _cmd_list(args: argparse.Namespace) -> int:
    from ..registry import bundled_adapters

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


# -- names kept from when every subcommand lived here -------------------------------


_progress_printer = progress_printer
_FuzzTerminalProgress = FuzzTerminalProgress


# ``cli.PROGRESS_INTERVAL = s`` also sets the interval `statecore.cli.progress` reads.
forward_settings(__name__, {"PROGRESS_INTERVAL": cli_progress})


if __name__ == "__main__":
    raise SystemExit(main())
