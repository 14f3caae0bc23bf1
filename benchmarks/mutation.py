"""Mutation score on the real vLLM-Omni 0.30.0 adapter: `statecore mutate` against a
hand-written Hypothesis test, side by side, on the same single-point mutants.

The mutants are those ``statecore mutate`` makes of the adapter's sender-side
lifecycle methods (`FUNCTIONS`, in ``chunk_transfer_adapter.py``). Each is given,
with the same per-mutant budget (20 s by default), to

* statecore: ``statecore mutate chunk_transfer --adapter vllm-omni --also
  segments:vllm-omni-segments --also chunk_transfer:vllm-omni-shm --also
  receiver_system:vllm-omni-receiver --also receiver_system:vllm-omni-receiver-generation``
  (its Python API,
  `statecore.fuzzing.mutate.mutate`; a mutant the first fuzz leaves alive is fuzzed
  through each other binding in turn, each with the budget);
* the baseline: the hand-written Hypothesis state machine over the real adapter of
  ``benchmarks/fuzz.py`` (`baseline_machine`, imported from there), searched
  generate-only with seed 0 until its first failure or the budget.

Both run each mutant in a process of its own that compiled the mutated module in
memory before anything imported it (`statecore.fuzzing.mutate_worker.install`): the
baseline's is a child forked from this process after it imported the module's
dependencies (`statecore.fuzzing.mutate_server.preload`), as ``statecore mutate``'s
fork server does. The denominator is the same for both: every mutant that imports
and is not declared equivalent in ``models/equivalent_mutants.toml``; a mutant that
hangs past the budget counts as not killed for either tool.

``python benchmarks/mutation.py`` is the full run (every mutant, about an hour on
2 cores); ``--sample N`` fuzzes N mutants drawn at random, ``--functions`` others,
``--only TEXT`` the mutants whose id contains TEXT. ``--statecore-report FILE``
(repeatable; where files overlap, the last one's verdict counts) reuses the verdicts
of saved ``statecore mutate --json`` reports instead of fuzzing those mutants again
(the survivors re-run after a binding changed, say), and ``--save-baseline`` /
``--baseline-report`` save and reuse the baseline's. The last line is

``RESULT mutants=<n> non_equivalent=<m> statecore_killed=<k> statecore_score=<x>
baseline_killed=<k> baseline_score=<x> baseline_only=<k>``
"""

from __future__ import annotations

import argparse
import importlib
import importlib.util
import json
import os
import random
import re
import signal
import sys
import tempfile
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

MODULE = "vllm_omni.distributed.omni_connectors.transfer_adapter.chunk_transfer_adapter"
FUNCTIONS = (
    "save_async",
    "_send_single_request",
    "_send_single_request_for_generation",
    "_release_terminal_fence",
    "_sender_generation_is_active",
    "cleanup_sender",
    "_clear_sender_state_locked",
    "finish_requests",
)
TARGET, ADAPTER = "chunk_transfer", "vllm-omni"
ALSO = (
    ("segments", "vllm-omni-segments"),
    ("chunk_transfer", "vllm-omni-shm"),
    ("receiver_system", "vllm-omni-receiver"),
    ("receiver_system", "vllm-omni-receiver-generation"),
)
KILLED, SURVIVED, EQUIVALENT, TIMEOUT, CRASHED = (
    "killed",
    "survived",
    "equivalent",
    "timeout",
    "crashed",
)
GRACE = 60.0  # seconds a baseline child may run past its budget (its module import)


@dataclass(frozen=True)
class Verdict:
    """One tool on one mutant: its status and, for a kill, what found it."""

    status: str
    what: str = ""
    seconds: float = 0.0

    @property
    def killed(self) -> bool:
        return self.status == KILLED


# -- the mutants -------------------------------------------------------------------------


def module_file() -> str:
    """`MODULE`'s source file, found without importing its packages.

    ``importlib.util.find_spec`` of a dotted name runs the parent packages, and
    vLLM-Omni's import the adapter module: this process must not, as it forks
    the baseline's children before the module is imported (each imports its
    mutant).
    """
    top, _, rest = MODULE.partition(".")
    spec = importlib.util.find_spec(top)
    if spec is None or not spec.submodule_search_locations:
        raise SystemExit(f"benchmarks/mutation.py needs the vLLM stack: no {top} package")
    path = Path(next(iter(spec.submodule_search_locations)), *rest.split("."))
    return str(path.with_suffix(".py"))


def mutants(functions: Sequence[str], only: Sequence[str], sample: int | None, seed: int) -> Any:
    """The mutants to fuzz: every mutant of `functions`, filtered by `only`, sampled."""
    from statecore.fuzzing.source_mutants import source_mutants

    found = source_mutants(module_file(), functions)
    if only:
        found = tuple(m for m in found if any(s in m.id for s in only))
    if sample is not None and sample < len(found):
        keep = set(random.Random(seed).sample(range(len(found)), sample))
        found = tuple(m for i, m in enumerate(found) if i in keep)
    return found


def equivalents() -> dict[str, str]:
    from statecore.cli.mutate import default_equivalents
    from statecore.fuzzing.mutate import load_equivalents

    return load_equivalents(default_equivalents(), TARGET, MODULE)


# -- statecore ---------------------------------------------------------------------------


def saved_statecore(paths: Sequence[str]) -> dict[str, Verdict]:
    """The verdicts of saved ``statecore mutate --json`` reports; a later file wins."""
    verdicts: dict[str, Verdict] = {}
    for path in paths:
        report = json.loads(Path(path).read_text(encoding="utf-8"))
        if report.get("module") != MODULE or report.get("target") != TARGET:
            raise SystemExit(f"--statecore-report {path}: not a report on {TARGET} / {MODULE}")
        for m in report["mutants"]:
            verdicts[m["id"]] = _statecore_verdict(
                m["status"], m.get("finding") or {}, m.get("seconds", 0.0)
            )
    return verdicts


PROGRESS = re.compile(r"mutant \d+/\d+ (\w+): (.*) \([^()]*:\d+\)$")
"""A progress line of `statecore mutate`: ``...: mutant 3/12 killed: ID (FILE:LINE)``."""


def logged_statecore(paths: Sequence[str]) -> dict[str, Verdict]:
    """The verdicts in `statecore mutate` progress lines; a later line wins."""
    verdicts: dict[str, Verdict] = {}
    for path in paths:
        for line in Path(path).read_text(encoding="utf-8").splitlines():
            found = PROGRESS.search(line)
            if found is not None:
                verdicts[found.group(2)] = _statecore_verdict(found.group(1), {}, 0.0)
    return verdicts


def _statecore_verdict(status: str, finding: dict[str, Any], seconds: float) -> Verdict:
    if status == EQUIVALENT:  # survived; the declaration is applied below, for both tools
        status = SURVIVED
    what = ""
    if status == KILLED:
        what = f"{finding.get('kind', '')} {finding.get('property', '')}".strip()
        by = finding.get("by", "")
        if by and by != f"{TARGET} / {ADAPTER}":
            what += f" via {by.split(' / ')[1]}"
    return Verdict(status, what, seconds)


def run_statecore(
    todo: Sequence[Any], functions: Sequence[str], budget: float, jobs: int
) -> dict[str, Verdict]:
    """`statecore mutate` on the mutants `todo` (by id), through the three bindings."""
    from statecore.fuzzing.mutate import mutate

    wanted = {m.id for m in todo}

    def progress(done: int, total: int, result: Any) -> None:
        if result.mutant.id in wanted:
            print(f"  statecore {result.status:<9} {result.mutant.id}", file=sys.stderr, flush=True)

    report = mutate(
        TARGET,
        ADAPTER,
        MODULE,
        functions,
        budget=budget,
        jobs=jobs,
        only=sorted(wanted),  # substrings: a few more may run; only `wanted` is kept
        on_result=progress,
        also=ALSO,
    )
    verdicts = {}
    for r in report.results:
        if r.mutant.id in wanted:
            finding = {"kind": r.kind, "property": r.property, "by": r.by}
            verdicts[r.mutant.id] = _statecore_verdict(r.status, finding, r.seconds)
    return verdicts


# -- the baseline ------------------------------------------------------------------------


def run_baseline(
    todo: Sequence[Any], functions: Sequence[str], budget: float, jobs: int
) -> dict[str, Verdict]:
    """The hand-written Hypothesis test on each mutant, in a child forked per mutant."""
    from statecore.fuzzing.mutate_server import preload

    filename = module_file()
    why = preload(filename, MODULE)
    if why:
        raise SystemExit(f"benchmarks/mutation.py: cannot fork isolated mutants: {why}")
    unmutated = _fork_baseline(None, filename, functions, budget)
    if unmutated.status != SURVIVED:
        raise SystemExit(f"the baseline fails on the unmutated adapter: {unmutated}")
    verdicts: dict[str, Verdict] = {}
    pending = list(todo)
    running: dict[int, tuple[Any, str, float]] = {}  # pid -> mutant, result path, start
    with tempfile.TemporaryDirectory(prefix="statecore-baseline-") as scratch:
        while pending or running:
            while pending and len(running) < max(1, jobs):
                mutant = pending.pop(0)
                out = os.path.join(scratch, f"{len(verdicts) + len(running)}-{os.getpid()}.json")
                pid = _spawn(mutant.id, filename, functions, budget, out)
                running[pid] = (mutant, out, time.monotonic())
            reaped, verdict = _reap(running, budget)
            if reaped is None:
                time.sleep(0.05)
                continue
            mutant = running.pop(reaped)[0]
            verdicts[mutant.id] = verdict
            print(f"  baseline  {verdict.status:<9} {mutant.id}", file=sys.stderr, flush=True)
    return verdicts


def _fork_baseline(
    mutant_id: str | None, filename: str, functions: Sequence[str], budget: float
) -> Verdict:
    """The baseline's verdict on one mutant (None: the unmutated module), in a forked child."""
    with tempfile.TemporaryDirectory(prefix="statecore-baseline-") as scratch:
        out = os.path.join(scratch, "result.json")
        pid = _spawn(mutant_id, filename, functions, budget, out)
        running = {pid: (None, out, time.monotonic())}
        while True:
            done, verdict = _reap(running, budget)
            if done is not None:
                return verdict
            time.sleep(0.05)


def _spawn(
    mutant_id: str | None, filename: str, functions: Sequence[str], budget: float, out: str
) -> int:
    sys.stdout.flush()
    sys.stderr.flush()
    pid = os.fork()
    if pid == 0:  # pragma: no cover - the child leaves through os._exit
        code = 3
        try:
            outcome = _baseline_child(mutant_id, filename, functions, budget)
            with open(out + ".partial", "w", encoding="utf-8") as f:
                json.dump(outcome, f)
            os.replace(out + ".partial", out)
            code = 0
        finally:
            sys.stdout.flush()
            sys.stderr.flush()
            os._exit(code)  # threads the mutant left running must not keep the child alive
    return pid


def _reap(running: dict[int, tuple[Any, str, float]], budget: float) -> tuple[int | None, Verdict]:
    """A finished (or killed past its time) child of `running` and its verdict, or None."""
    for pid, (_, out, began) in running.items():
        done, _status = os.waitpid(pid, os.WNOHANG)
        if not done and time.monotonic() - began > budget + GRACE:
            os.kill(pid, signal.SIGKILL)
            os.waitpid(pid, 0)
            return pid, Verdict(TIMEOUT, "", time.monotonic() - began)
        if done:
            seconds = time.monotonic() - began
            if not os.path.exists(out):
                return pid, Verdict(KILLED, "the process died", seconds)
            outcome = json.loads(Path(out).read_text(encoding="utf-8"))
            return pid, Verdict(outcome["status"], outcome.get("what", ""), seconds)
    return None, Verdict(SURVIVED)


def _baseline_child(
    mutant_id: str | None, filename: str, functions: Sequence[str], budget: float
) -> dict[str, Any]:
    """In a forked child: put the mutant in place, then search the baseline for `budget` s."""
    from statecore.fuzzing.mutate_worker import install

    if mutant_id is not None:
        install(MODULE, filename, functions, mutant_id)
    try:
        importlib.import_module(MODULE)
    except BaseException as exc:
        return {"status": CRASHED, "what": f"{type(exc).__name__}: {exc}"}
    fuzz = _fuzz_benchmark()
    try:
        machine = fuzz.baseline_machine()
    except Exception as exc:  # the mutant broke the harness's set-up
        return {"status": KILLED, "what": f"setup: {type(exc).__name__}"}
    attempt = fuzz.first_failure(machine, 0, budget, 10**9)
    return {"status": KILLED if attempt.found else SURVIVED, "what": attempt.what}


def _fuzz_benchmark() -> Any:
    """``benchmarks/fuzz.py``, where the hand-written baseline lives."""
    name = "benchmark_fuzz"
    if name not in sys.modules:
        spec = importlib.util.spec_from_file_location(name, Path(__file__).parent / "fuzz.py")
        assert spec is not None and spec.loader is not None
        module = importlib.util.module_from_spec(spec)
        sys.modules[name] = module  # dataclasses look their module up
        spec.loader.exec_module(module)
    return sys.modules[name]


BASELINE_PROGRESS = re.compile(r"^  baseline  (\w+) +(.*)$")
"""A progress line of `run_baseline` on stderr: ``  baseline  killed    ID``."""


def logged_baseline(paths: Sequence[str]) -> dict[str, Verdict]:
    """The baseline's verdicts in the progress lines a run wrote to stderr."""
    verdicts: dict[str, Verdict] = {}
    for path in paths:
        for line in Path(path).read_text(encoding="utf-8").splitlines():
            found = BASELINE_PROGRESS.match(line)
            if found is not None:
                verdicts[found.group(2)] = Verdict(found.group(1))
    return verdicts


def saved_baseline(paths: Sequence[str]) -> dict[str, Verdict]:
    verdicts: dict[str, Verdict] = {}
    for path in paths:
        for mutant_id, v in json.loads(Path(path).read_text(encoding="utf-8")).items():
            verdicts[mutant_id] = Verdict(v["status"], v.get("what", ""), v.get("seconds", 0.0))
    return verdicts


# -- the report --------------------------------------------------------------------------


@dataclass(frozen=True)
class Row:
    """Counts for one function (or the total)."""

    name: str
    mutants: int
    equivalent: int
    crashed: int
    statecore: dict[str, int]
    baseline: dict[str, int]

    @property
    def non_equivalent(self) -> int:
        return self.mutants - self.equivalent - self.crashed


def tally(
    todo: Sequence[Any],
    declared: dict[str, str],
    ours: dict[str, Verdict],
    theirs: dict[str, Verdict],
) -> list[Row]:
    """One row per function, in the order of `todo`, then the total."""
    groups: dict[str, list[Any]] = {}
    for m in todo:
        groups.setdefault(m.function.rsplit(".", 1)[-1], []).append(m)
    groups["total"] = list(todo)
    rows = []
    for name, members in groups.items():
        counted = [m for m in members if m.id not in declared and not _crashed(m, ours, theirs)]
        rows.append(
            Row(
                name,
                len(members),
                sum(1 for m in members if m.id in declared),
                sum(1 for m in members if m.id not in declared and _crashed(m, ours, theirs)),
                _counts(counted, ours),
                _counts(counted, theirs),
            )
        )
    return rows


def _crashed(m: Any, ours: dict[str, Verdict], theirs: dict[str, Verdict]) -> bool:
    return ours[m.id].status == CRASHED or theirs[m.id].status == CRASHED


def _counts(members: list[Any], verdicts: dict[str, Verdict]) -> dict[str, int]:
    counts = {KILLED: 0, SURVIVED: 0, TIMEOUT: 0}
    for m in members:
        status = verdicts[m.id].status
        counts[status if status in counts else SURVIVED] += 1
    return counts


def score(killed: int, of: int) -> str:
    return f"{100 * killed / of:.1f}%" if of else "n/a"


def print_report(
    todo: Sequence[Any],
    declared: dict[str, str],
    ours: dict[str, Verdict],
    theirs: dict[str, Verdict] | None,
) -> str:
    """The side-by-side table and the survivors; returns the RESULT line.

    `theirs` None: the baseline was not run (its columns read ``-``).
    """
    ran = theirs is not None
    if theirs is None:
        theirs = {m.id: Verdict(SURVIVED) for m in todo}
    rows = tally(todo, declared, ours, theirs)
    width = max(len(r.name) for r in rows) + 2
    print(
        f"{'':<{width + 18}}{' statecore ':-^25}  {' baseline ':-^25}\n"
        f"{'function':<{width}}{'mutants':>8}{'equiv':>6}{'n-eq':>5}"
        f"{'killed':>7}{'surv':>6}{'hang':>5}{'score':>7}  "
        f"{'killed':>7}{'surv':>6}{'hang':>5}{'score':>7}"
    )
    for r in rows:
        if r.name == "total":
            print("-" * (width + 70))
        s, b, n = r.statecore, r.baseline, r.non_equivalent
        base = (
            f"{b[KILLED]:>7}{b[SURVIVED]:>6}{b[TIMEOUT]:>5}{score(b[KILLED], n):>7}"
            if ran
            else f"{'-':>7}{'-':>6}{'-':>5}{'-':>7}"
        )
        print(
            f"{r.name:<{width}}{r.mutants:>8}{r.equivalent:>6}{n:>5}"
            f"{s[KILLED]:>7}{s[SURVIVED]:>6}{s[TIMEOUT]:>5}{score(s[KILLED], n):>7}  {base}"
        )
    live = [m for m in todo if m.id not in declared and not _crashed(m, ours, theirs)]
    both = sum(1 for m in live if ours[m.id].killed and theirs[m.id].killed)
    only_ours = sum(1 for m in live if ours[m.id].killed and not theirs[m.id].killed)
    only_theirs = [m for m in live if theirs[m.id].killed and not ours[m.id].killed]
    if ran:
        print(
            f"killed by both {both}, by statecore only {only_ours}, by the baseline only "
            f"{len(only_theirs)}, by neither {len(live) - both - only_ours - len(only_theirs)}"
        )
    wrongly = [m.id for m in todo if m.id in declared and ours[m.id].killed]
    for mutant_id in wrongly:
        print(f"  declared equivalent, yet statecore killed it: {mutant_id!r}")
    for m in only_theirs:
        print(f"  baseline only: {m.id!r} ({theirs[m.id].what})")
    survivors = [m for m in live if not ours[m.id].killed]
    if survivors:
        print("statecore survivors (not declared equivalent):")
        for m in survivors:
            print(f"  {ours[m.id].status:<8} {m.where}  {m.id!r}")
    total = rows[-1]
    if not ran:
        return (
            f"RESULT mutants={total.mutants} non_equivalent={total.non_equivalent} "
            f"statecore_killed={total.statecore[KILLED]} "
            f"statecore_score={score(total.statecore[KILLED], total.non_equivalent)}"
        )
    return (
        f"RESULT mutants={total.mutants} non_equivalent={total.non_equivalent} "
        f"statecore_killed={total.statecore[KILLED]} "
        f"statecore_score={score(total.statecore[KILLED], total.non_equivalent)} "
        f"baseline_killed={total.baseline[KILLED]} "
        f"baseline_score={score(total.baseline[KILLED], total.non_equivalent)} "
        f"baseline_only={len(only_theirs)}"
    )


def reported(todo: Sequence[Any], args: argparse.Namespace, theirs: dict[str, Verdict]) -> Any:
    """The mutants of `todo` with a verdict from every tool that was given saved ones."""
    ours = logged_statecore(args.statecore_log)
    ours.update(saved_statecore(args.statecore_report))
    keep = [m for m in todo if args.no_baseline or m.id in theirs]
    if args.statecore_log or args.statecore_report:
        keep = [m for m in keep if m.id in ours]
    print(f"{len(keep)} of the {len(todo)} mutants have a verdict from every saved run")
    return keep


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    parser.add_argument(
        "--functions", default=",".join(FUNCTIONS), help="comma-separated methods to mutate"
    )
    parser.add_argument("--sample", type=int, default=None, metavar="N", help="N random mutants")
    parser.add_argument("--only", action="append", default=[], metavar="TEXT")
    parser.add_argument("--budget", type=float, default=20.0, metavar="SECONDS")
    parser.add_argument("--jobs", type=int, default=1, metavar="N", help="mutants at once")
    parser.add_argument("--seed", type=int, default=0, help="of the sample")
    parser.add_argument(
        "--statecore-report",
        action="append",
        default=[],
        metavar="FILE",
        help="reuse the verdicts of a saved `statecore mutate --json` report of this module "
        "(repeatable; for a mutant in several, the last file's verdict counts); "
        "mutants in none are fuzzed",
    )
    parser.add_argument(
        "--statecore-log",
        action="append",
        default=[],
        metavar="FILE",
        help="as --statecore-report, from the progress lines a `statecore mutate` run wrote "
        "to stderr (a run stopped before its report)",
    )
    parser.add_argument("--baseline-report", action="append", default=[], metavar="FILE")
    parser.add_argument(
        "--baseline-log",
        action="append",
        default=[],
        metavar="FILE",
        help="as --baseline-report, from the progress lines a run of this script wrote to stderr",
    )
    parser.add_argument(
        "--reported-only",
        action="store_true",
        help="only the mutants every given report or log has a verdict for (a run stopped early)",
    )
    parser.add_argument("--save-baseline", metavar="FILE", help="write the baseline's verdicts")
    parser.add_argument(
        "--baseline-only", action="store_true", help="run the baseline, save it, and stop"
    )
    parser.add_argument(
        "--no-baseline", action="store_true", help="statecore alone (the baseline's columns: -)"
    )
    args = parser.parse_args()
    functions = [f.strip() for f in args.functions.split(",") if f.strip()]
    started = time.perf_counter()
    todo = mutants(functions, args.only, args.sample, args.seed)
    declared = equivalents()
    load = ", ".join(f"{x:.1f}" for x in os.getloadavg())
    print(
        f"{len(todo)} mutants of {MODULE.rsplit('.', 1)[1]} ({', '.join(functions)}); "
        f"{args.budget:g}s each; load average {load} on {os.cpu_count()} CPUs"
    )
    theirs = logged_baseline(args.baseline_log)
    theirs.update(saved_baseline(args.baseline_report))
    if args.reported_only:
        todo = reported(todo, args, theirs)
    missing = [m for m in todo if m.id not in theirs]
    if missing and not args.no_baseline:  # forks first: this process has no threads yet
        theirs.update(run_baseline(missing, functions, args.budget, args.jobs))
    if args.save_baseline:
        Path(args.save_baseline).write_text(
            json.dumps({k: v.__dict__ for k, v in theirs.items()}, indent=1), encoding="utf-8"
        )
    if args.baseline_only:
        return
    ours = logged_statecore(args.statecore_log)
    ours.update(saved_statecore(args.statecore_report))
    missing = [m for m in todo if m.id not in ours]
    if missing:
        ours.update(run_statecore(missing, functions, args.budget, args.jobs))
    print(
        f"statecore: statecore mutate {TARGET} --adapter {ADAPTER} "
        + " ".join(f"--also {t}:{a}" for t, a in ALSO)
        + f" --budget {args.budget:g} ({len(todo) - len(missing)} verdicts from saved reports)"
    )
    if not args.no_baseline:
        print(
            "baseline: benchmarks/fuzz.py's hand-written Hypothesis state machine over the "
            f"real adapter, seed 0, generate-only, {args.budget:g}s"
        )
    result = print_report(todo, declared, ours, None if args.no_baseline else theirs)
    print(f"total {time.perf_counter() - started:.0f}s")
    print(result)


if __name__ == "__main__":
    main()
