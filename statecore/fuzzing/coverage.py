"""Which lines and branches of an implementation a fuzz run reached, per function.

A fuzz run that passes says nothing about the code its adapter never drove:
``statecore fuzz ... --coverage MODULE[:FUNC,...]`` measures the named
module's functions with coverage.py (branch coverage) over the whole run -
warm-up, guided paths, search and shrinking - so a binding's blind spots show
as functions at 0 % or as missed lines and branches.

coverage.py is an optional dependency (the ``coverage`` extra): it is
imported only by `Measurement.start`, and its `ImportError` is left to the
caller, which names the extra. Everything else here is the standard library.
"""

from __future__ import annotations

import ast
import importlib
import json
import tempfile
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..errors import StatecoreError

__all__ = [
    "CodeCoverage",
    "CoverageTarget",
    "FunctionCoverage",
    "Measurement",
    "compact_ranges",
    "parse_target",
]


class CoverageTargetError(StatecoreError):
    """A ``--coverage`` module or function that cannot be measured."""


# -- what to measure -------------------------------------------------------------


@dataclass(frozen=True)
class CoverageTarget:
    """A module's source file and the functions of it to report (qualified names)."""

    module: str
    path: Path
    functions: tuple[str, ...]


def parse_target(spec: str) -> CoverageTarget:
    """``MODULE`` (every function) or ``MODULE:FUNC,FUNC`` (those, by name or ``Class.name``).

    The module is imported to find its file; a bare function name stands for
    every function or method of that name. Errors are one line.
    """
    module, _, names = spec.partition(":")
    module = module.strip()
    if not module:
        raise CoverageTargetError(f"--coverage {spec!r}: give MODULE or MODULE:FUNC,FUNC")
    path = _source_file(module)
    defined = functions_of(path)
    if not names.strip():
        return CoverageTarget(module, path, tuple(defined))
    chosen: list[str] = []
    for name in (n.strip() for n in names.split(",")):
        if not name:
            raise CoverageTargetError(f"--coverage {spec!r}: an empty function name")
        found = [q for q in defined if q == name or q.endswith("." + name)]
        if not found:
            shown = ", ".join(defined[:8]) + (", ..." if len(defined) > 8 else "")
            raise CoverageTargetError(
                f"--coverage {spec!r}: {module} defines no function {name!r} "
                f"(it defines {shown or 'none'})"
            )
        chosen += [q for q in found if q not in chosen]
    return CoverageTarget(module, path, tuple(chosen))


def _source_file(module: str) -> Path:
    try:
        loaded = importlib.import_module(module)
    except Exception as exc:  # the user's module: its failure is one line
        text = str(exc).splitlines()[0] if str(exc) else ""
        raise CoverageTargetError(
            f"--coverage {module}: importing it raised {type(exc).__name__}"
            f"{': ' + text if text else ''}"
        ) from None
    file = getattr(loaded, "__file__", None)
    if not file or not file.endswith(".py"):
        raise CoverageTargetError(
            f"--coverage {module}: not a Python source module ({file or 'no file'})"
        )
    return Path(file).resolve()


def functions_of(path: Path) -> list[str]:
    """Qualified names (``Class.method``, ``outer.inner``) of every function in `path`.

    Named as coverage.py names its function regions, in source order.
    """
    found: list[tuple[int, str]] = []

    def visit(node: ast.AST, prefix: str) -> None:
        for child in ast.iter_child_nodes(node):
            if isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef)):
                found.append((child.lineno, prefix + child.name))
                visit(child, prefix + child.name + ".")
            elif isinstance(child, ast.ClassDef):
                visit(child, prefix + child.name + ".")
            else:
                visit(child, prefix)

    visit(ast.parse(path.read_text(encoding="utf-8"), str(path)), "")
    return [name for _, name in sorted(found)]


# -- what was reached ------------------------------------------------------------


@dataclass(frozen=True)
class FunctionCoverage:
    """One function: its statements and branches, how many ran, and what was missed."""

    name: str
    lines: int
    lines_run: int
    branches: int
    branches_taken: int
    missed_lines: tuple[int, ...] = ()
    missed_branches: tuple[tuple[int, int], ...] = ()
    statements: tuple[int, ...] = ()

    @property
    def percent(self) -> float:
        """Statements and branches together, as ``coverage report --branch`` counts them."""
        total = self.lines + self.branches
        return 100.0 * (self.lines_run + self.branches_taken) / total if total else 100.0

    @property
    def missed(self) -> str:
        """``12-14, 20->22``: missed lines in ranges, and missed branches between lines run.

        As coverage.py's text report: a branch to or from a missed line is not repeated.
        """
        ranges = _runs(self.statements, self.missed_lines)
        skipped = set(self.missed_lines)
        arcs = [
            (a, f"{a}->{b if b > 0 else 'exit'}")
            for a, b in self.missed_branches
            if a not in skipped and b not in skipped
        ]
        return ", ".join(text for _, text in sorted(ranges + arcs))


@dataclass(frozen=True)
class CodeCoverage:
    """The functions of one module a run reached, and their sum."""

    module: str
    path: Path
    functions: tuple[FunctionCoverage, ...]

    @property
    def total(self) -> FunctionCoverage:
        fs = self.functions
        return FunctionCoverage(
            "total",
            sum(f.lines for f in fs),
            sum(f.lines_run for f in fs),
            sum(f.branches for f in fs),
            sum(f.branches_taken for f in fs),
        )

    def to_json(self) -> dict[str, Any]:
        def row(f: FunctionCoverage) -> dict[str, Any]:
            return {
                "lines": f.lines,
                "lines_run": f.lines_run,
                "branches": f.branches,
                "branches_taken": f.branches_taken,
                "percent": round(f.percent, 1),
            }

        return {
            "module": self.module,
            "file": str(self.path),
            "functions": [
                {
                    "name": f.name,
                    **row(f),
                    "missed_lines": compact_ranges(f.statements, f.missed_lines),
                    "missed_branches": [list(arc) for arc in f.missed_branches],
                }
                for f in self.functions
            ],
            "total": row(self.total),
        }


def compact_ranges(statements: Iterable[int], missed: Iterable[int]) -> str:
    """``12-14, 20``: the missed statements as runs, as coverage.py's text report shows them."""
    return ", ".join(text for _, text in _runs(statements, missed))


def _runs(statements: Iterable[int], missed: Iterable[int]) -> list[tuple[int, str]]:
    """Runs of consecutive missed statements, by first line.

    Lines in between that are no statements (blank, comments) do not break a run.
    """
    gone = set(missed)
    runs: list[list[int]] = []
    previous_missed = False
    for line in sorted(statements):
        if line in gone:
            if previous_missed:
                runs[-1].append(line)
            else:
                runs.append([line])
        previous_missed = line in gone
    return [(r[0], f"{r[0]}-{r[-1]}" if len(r) > 1 else str(r[0])) for r in runs]


# -- measuring -------------------------------------------------------------------


class Measurement:
    """coverage.py (branch mode) on one module's file, from `start` to `stop`."""

    def __init__(self, target: CoverageTarget) -> None:
        self.target = target
        self._cov: Any = None

    def start(self) -> None:
        """Begin measuring; raises `ImportError` (name ``coverage``) if it is not installed."""
        import coverage

        cov = coverage.Coverage(
            data_file=None, branch=True, include=[str(self.target.path)], config_file=False
        )
        cov.set_option(
            "run:disable_warnings",
            ["no-data-collected", "module-not-measured", "module-not-imported"],
        )
        cov.start()
        self._cov = cov

    def stop(self) -> CodeCoverage:
        """Stop measuring and report the target's functions."""
        cov, self._cov = self._cov, None
        assert cov is not None, "stop() without start()"
        cov.stop()
        with tempfile.TemporaryDirectory() as scratch:
            out = Path(scratch) / "coverage.json"
            cov.json_report(morfs=[str(self.target.path)], outfile=str(out))
            data = json.loads(out.read_text(encoding="utf-8"))
        (measured,) = data["files"].values()
        regions: dict[str, Any] = measured.get("functions", {})
        return CodeCoverage(
            self.target.module,
            self.target.path,
            tuple(_function(name, regions.get(name)) for name in self.target.functions),
        )


def _function(name: str, region: dict[str, Any] | None) -> FunctionCoverage:
    if region is None:  # a function coverage.py has no region for (e.g. excluded)
        return FunctionCoverage(name, 0, 0, 0, 0)
    summary = region["summary"]
    missed: Sequence[int] = region["missing_lines"]
    return FunctionCoverage(
        name,
        summary["num_statements"],
        summary["covered_lines"],
        summary.get("num_branches", 0),
        summary.get("covered_branches", 0),
        tuple(missed),
        tuple((a, b) for a, b in region.get("missing_branches", [])),
        tuple(sorted([*region["executed_lines"], *missed])),
    )
