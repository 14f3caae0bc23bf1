"""Seed robustness of the default fuzz run: today's default against the one before it.

For each target - the tutorial's upload service (``docs/tutorial.md``, its planted
cancel bug), the order shop of ``docs/adapters.md`` (cancel let through after
shipping) and every bundled ``model:`` variant run as the implementation against its
reference - the default run is made with each of N seeds (100 by default), side by
side in one process:

* **new**: ``statecore.fuzzing.fuzz.fuzz(system, factory, seed=s)`` with nothing else - what
  ``statecore fuzz TARGET --adapter A`` and ``fuzz_test`` run: the guided phase, then
  the ``ci`` profile's 100 search examples, then shrinking;
* **old**: the default ``statecore fuzz`` run before the guided phase existed -
  ``statecore/fuzz.py`` as of commit ``6acab07``, loaded from git, with the CLI's
  default of 100 examples (two Hypothesis batches of 50, shrinking with Hypothesis'
  shrinker and the old single-step and pair deletions);
* **old50**: the old ``fuzz()`` called with no arguments, which ran the first of those
  batches only (found or not, read off the old run).

Two times per run: *first failure* (from the start of the run to the first run of the
implementation that showed the finding) and *report* (the whole call, shrinking
included, as a user waits for it). The old default's first failure and whether it
finds the bug at all are measured for every seed by running its search exactly as it
ran (same settings and seeds) without the shrink phase, which never changes what the
search generates before its first failure; its report time, shrinking included, is
measured with the old ``fuzz()`` itself on the first ``--report-seeds`` seeds (5 by
default), as shrinking costs seconds per run. A seed that finds nothing counts as an
infinite time. Medians are over seeds per target, then over targets.

    python benchmarks/fuzz_seeds.py [--seeds N] [--report-seeds K] [--quick]

(``--quick``: two seeds, the docs' targets and two variants, and no old report times;
what ``tests/test_fuzz_seeds.py`` runs.)

The last line is

``RESULT targets=<n> new_found=<k>/<n*N> new_every_seed=<t>/<n> new_median_first_s=<x>
new_median_report_s=<x> old_found=<k>/<n*N> old_every_seed=<t>/<n> old_median_first_s=<x>
old_median_report_s=<x> old50_found=<k>/<n*N> old50_every_seed=<t>/<n>``
"""

from __future__ import annotations

import argparse
import contextlib
import importlib.util
import io
import math
import os
import re
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from types import ModuleType

from hypothesis import HealthCheck, Phase, settings
from hypothesis import seed as hypothesis_seed
from hypothesis.stateful import run_state_machine_as_test

from statecore.adapter import Adapter
from statecore.fuzzing.fuzz import fuzz
from statecore.registry import bundled_adapters, resolve_adapter
from statecore.system import System

ROOT = Path(__file__).resolve().parent.parent
OLD_COMMIT = "6acab07"
OLD_MAX_EXAMPLES = 100  # the CLI's default then
OLD_BATCH = 50
DOC_MARKERS = {
    "tutorial.md": ("UPLOADS", "UploadAdapter"),
    "adapters.md": ("SHOP", "ShopAdapter"),
}


@dataclass(frozen=True)
class Case:
    """A target: the model to fuzz and a factory of adapters for the implementation."""

    name: str
    system: System
    factory: Callable[[], Adapter]


@dataclass
class Runs:
    """One tool's runs on one target: per seed, (first failure, report) seconds or inf."""

    first: list[float] = field(default_factory=list)
    report: list[float] = field(default_factory=list)

    @property
    def found(self) -> int:
        return sum(1 for s in self.first if math.isfinite(s))

    def median_first(self) -> float:
        return statistics.median(self.first) if self.first else math.inf

    def median_report(self) -> float:
        return statistics.median(self.report) if self.report else math.inf


# -- the targets ----------------------------------------------------------------------


def doc_module(page: str) -> ModuleType:
    """A docs page's Python blocks run in order until its system and adapter are defined.

    They run as the docs test runs them: in a scratch working directory, their
    printing kept out of the benchmark's output.
    """
    text = (ROOT / "docs" / page).read_text(encoding="utf-8")
    blocks = re.findall(r"^```python\n(.*?)^```", text, re.M | re.S)
    module = ModuleType(f"docs_{page.removesuffix('.md')}")
    sys.modules[module.__name__] = module  # dataclasses look their module up
    system_name, adapter_name = DOC_MARKERS[page]
    here = os.getcwd()
    with tempfile.TemporaryDirectory() as scratch, contextlib.redirect_stdout(io.StringIO()):
        os.chdir(scratch)
        try:
            for number, code in enumerate(blocks, start=1):
                exec(compile(code, f"{page}[python block {number}]", "exec"), module.__dict__)
                if hasattr(module, adapter_name) and hasattr(module, system_name):
                    return module
        finally:
            os.chdir(here)
    raise SystemExit(f"{page}: its python blocks define no {system_name} and {adapter_name}")


def cases(quick: bool) -> list[Case]:
    found: list[Case] = []
    for page, (system_name, adapter_name) in DOC_MARKERS.items():
        if not (ROOT / "docs" / page).exists():
            continue
        module = doc_module(page)
        name = f"{page.removesuffix('.md')}:{adapter_name}"
        found.append(Case(name, getattr(module, system_name), getattr(module, adapter_name)))
    variants = [a for a in bundled_adapters() if a.name.startswith("model:")]
    if quick:
        variants = variants[:2]
    for spec in variants:
        system, factory, _ = resolve_adapter(spec.target, spec.name)
        found.append(Case(spec.name, system, factory))
    return found


# -- today's default and the old one --------------------------------------------------


def run_new(case: Case, seed: int) -> tuple[float, float]:
    """The default run: (first failure, report) seconds, inf when nothing was found."""
    started = time.perf_counter()
    report = fuzz(case.system, case.factory, seed=seed)
    took = time.perf_counter() - started
    if report.finding is None:
        return math.inf, math.inf
    assert report.found_after is not None
    return report.found_after, took


def old_module() -> ModuleType | None:
    """``statecore/fuzz.py`` as of `OLD_COMMIT`, imported next to today's statecore."""
    try:
        source = subprocess.run(
            ["git", "show", f"{OLD_COMMIT}:statecore/fuzz.py"],
            cwd=ROOT,
            capture_output=True,
            text=True,
            check=True,
        ).stdout
    except (OSError, subprocess.CalledProcessError):
        return None
    name = "statecore._fuzz_before_guided"
    spec = importlib.util.spec_from_loader(name, loader=None)
    assert spec is not None
    module = importlib.util.module_from_spec(spec)
    module.__package__ = "statecore"
    sys.modules[name] = module
    exec(compile(source, f"{OLD_COMMIT}:statecore/fuzz.py", "exec"), module.__dict__)
    return module


def run_old_search(old: ModuleType, case: Case, seed: int) -> tuple[float, int]:
    """The old default's search to its first failure, exactly as it ran.

    Returns the seconds (inf if nothing was found) and the batch that found it: the
    old ``fuzz()`` called with no arguments ran the first batch of 50 only.
    """
    machine = old.state_machine(case.system, case.factory)
    warm = case.factory()
    warm.setup(case.system)
    warm.teardown()
    started = time.perf_counter()
    remaining = OLD_MAX_EXAMPLES
    round_ = 0
    while remaining > 0:
        examples = min(OLD_BATCH, remaining)
        config = settings(
            max_examples=examples,
            stateful_step_count=old.PROFILES["ci"]["stateful_step_count"],
            deadline=None,
            database=None,
            derandomize=False,
            suppress_health_check=list(HealthCheck),
            phases=[Phase.generate],
            report_multiple_bugs=False,
        )
        seeded = hypothesis_seed(seed * 1_000_003 + round_)(machine)
        try:
            run_state_machine_as_test(seeded, settings=config)
        except old.Finding:
            return time.perf_counter() - started, round_
        remaining -= examples
        round_ += 1
    return math.inf, round_


def run_old_report(old: ModuleType, case: Case, seed: int) -> float:
    """The old default run as a whole, shrinking included: seconds, or inf if nothing found."""
    started = time.perf_counter()
    report = old.fuzz(case.system, case.factory, max_examples=OLD_MAX_EXAMPLES, seed=seed)
    took = time.perf_counter() - started
    return took if report.finding is not None else math.inf


# -- running and reporting -------------------------------------------------------------


@dataclass
class Row:
    """One target's runs: today's default, the old CLI default, the old `fuzz()` default."""

    case: Case
    new: Runs
    old: Runs  # the CLI's 100 examples
    old50: Runs  # fuzz() with no arguments: one batch of 50


def measure(
    all_cases: list[Case], seeds: int, report_seeds: int, old: ModuleType | None
) -> Iterator[Row]:
    for case in all_cases:
        row = Row(case, Runs(), Runs(), Runs())
        for seed in range(seeds):
            first, report = run_new(case, seed)
            row.new.first.append(first)
            row.new.report.append(report)
            if old is not None:
                took, batch = run_old_search(old, case, seed)
                row.old.first.append(took)
                row.old50.first.append(took if batch == 0 else math.inf)
                if seed < report_seeds:
                    row.old.report.append(run_old_report(old, case, seed))
        yield row


def seconds(value: float) -> str:
    return "miss" if math.isinf(value) else f"{value:.3f}"


def result_line(rows: list[Row], seeds: int) -> str:
    """The RESULT line: found over every (target, seed) run, medians over targets."""
    total = len(rows) * seeds

    def side(label: str, picked: list[Runs], times: bool = True) -> str:
        if not any(r.first for r in picked):
            return f"{label}_found=n/a"
        found = sum(r.found for r in picked)
        every = sum(1 for r in picked if r.found == len(r.first))
        text = f"{label}_found={found}/{total} {label}_every_seed={every}/{len(picked)}"
        if not times:
            return text
        first = statistics.median(r.median_first() for r in picked)
        report = (
            seconds(statistics.median(r.median_report() for r in picked))
            if all(r.report for r in picked)
            else "n/a"
        )
        return f"{text} {label}_median_first_s={seconds(first)} {label}_median_report_s={report}"

    return (
        f"RESULT targets={len(rows)} {side('new', [r.new for r in rows])} "
        f"{side('old', [r.old for r in rows])} {side('old50', [r.old50 for r in rows], False)}"
    )


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    parser.add_argument("--seeds", type=int, default=100, help="seeds per target (default 100)")
    parser.add_argument(
        "--report-seeds",
        type=int,
        default=5,
        help="seeds per target for the old default's report time (default 5)",
    )
    parser.add_argument(
        "--quick",
        action="store_true",
        help="2 seeds, the docs' targets and two variants, no old report times",
    )
    args = parser.parse_args(argv)
    seeds, report_seeds = (2, 0) if args.quick else (args.seeds, args.report_seeds)
    old = old_module()
    if old is None:
        print(f"(no git checkout with commit {OLD_COMMIT}: the old default is not measured)")
    all_cases = cases(args.quick)
    print(
        f"{len(all_cases)} targets x {seeds} seeds; old report time over the first "
        f"{min(seeds, report_seeds)} seeds; times in seconds (median over seeds)"
    )
    head = (
        f"{'target':<44} {'new found':>9} {'first':>7} {'report':>7} "
        f"{'old found':>9} {'first':>7} {'report':>7} {'old50 found':>11}"
    )
    print(head)
    print("-" * len(head))
    rows = []
    for row in measure(all_cases, seeds, report_seeds, old):
        rows.append(row)
        new, before = row.new, row.old
        old_cells = (
            f"{before.found:>5}/{seeds:<3} {seconds(before.median_first()):>7} "
            f"{seconds(before.median_report()) if before.report else 'n/a':>7} "
            f"{row.old50.found:>7}/{seeds:<3}"
            if old is not None
            else f"{'n/a':>9} {'':>7} {'':>7} {'n/a':>11}"
        )
        print(
            f"{row.case.name:<44} {new.found:>5}/{seeds:<3} {seconds(new.median_first()):>7} "
            f"{seconds(new.median_report()):>7} {old_cells}",
            flush=True,
        )
    print(result_line(rows, seeds))


if __name__ == "__main__":
    main()
