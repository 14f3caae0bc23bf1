"""The explorer of this tree against another revision's, on this machine, in one run.

A busy machine moves one search's seconds by a third from one minute to the next,
so a change is measured in pairs: the same search in a fresh process with REV's
``statecore`` and with this tree's, back to back, in alternating order, and what
counts is each pair's ratio of CPU seconds (this tree's over REV's) and their
median. Each side is laid out as the installed package is (``models/`` as
``statecore.models``, ``spec/`` as ``statecore.spec``), REV's from ``git
archive``, so each runs its own models: a change to a model is measured too.

The searches: the bundled ``chunk_transfer`` (what ``statecore check`` spends its
time on; one id, no symmetry), with full states and with 64-bit fingerprints; the
first 100,000 states of ``chunk_transfer`` at two ids with 64-bit fingerprints (ids
symmetric: the search the complete two-id check runs, bounded), on one process and
on two (the CPU seconds of all processes); and the explore benchmark's model at
N=3 K=2 G=2 (symmetric ids: most new states are renamed). Each prints its states, so
a pair that searched different spaces shows it.

Run: ``python benchmarks/against.py REV [--pairs N]``. The last line is
``RESULT <search>=<median ratio> ...``.
"""

from __future__ import annotations

import argparse
import json
import shutil
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
LAYOUT = {"statecore": "statecore", "models": "statecore/models", "spec": "statecore/spec"}
"""Where each top-level folder of the repository goes in the package."""

SEARCHES = {
    "chunk_transfer": (
        "from statecore.registry import bundled\n"
        "system = next(t for t in bundled() if t.name == 'chunk_transfer').load()\n"
    ),
    "chunk_transfer, 64-bit fingerprints": (
        "from statecore.registry import bundled\n"
        "system = next(t for t in bundled() if t.name == 'chunk_transfer').load()\n"
        "options = {'fingerprints': 64}\n"
    ),
    "chunk_transfer ids=2, 64-bit fingerprints, 100,000 states": (
        "from statecore.models.chunk_transfer import ChunkTransferConfig, build\n"
        "system = build(ChunkTransferConfig(ids=2, generations=2, saves=1, segments=1))\n"
        "options = {'fingerprints': 64, 'max_states': 100_000, 'stop_on_violation': False}\n"
    ),
    "chunk_transfer ids=2, 64-bit fingerprints, 2 workers, 100,000 states": (
        "from statecore.models.chunk_transfer import ChunkTransferConfig, build\n"
        "system = build(ChunkTransferConfig(ids=2, generations=2, saves=1, segments=1))\n"
        "options = {'fingerprints': 64, 'max_states': 100_000, 'stop_on_violation': False,\n"
        "           'workers': 2}\n"
    ),
    "model N=3 K=2 G=2": (
        f"import sys; sys.path.insert(0, {str(ROOT / 'benchmarks')!r})\n"
        "from explore import Bound, model\n"
        "system = model(Bound(3, 2, 2))\n"
    ),
}
"""Search name -> the code that builds its system (and `options`, explore's keywords)."""

TIMED = (
    "import json, resource, time\n"
    "import statecore\n"
    "from statecore.check.explore import explore\n"
    "cpu = time.process_time()\n"
    "report = explore(system, **globals().get('options', {}))\n"
    "cpu = time.process_time() - cpu\n"
    "workers = resource.getrusage(resource.RUSAGE_CHILDREN)  # (those of a parallel search)\n"
    "cpu += workers.ru_utime + workers.ru_stime\n"
    "print(json.dumps([cpu, report.states, statecore.__file__]))\n"
)


def lay_out(files: Path, into: Path) -> Path:
    """The package tree of the repository folders under `files`, made in `into`."""
    for source, target in LAYOUT.items():
        shutil.copytree(files / source, into / target, dirs_exist_ok=True)
    return into


def revision(rev: str, into: Path) -> Path:
    """REV's package tree, made in `into`."""
    archive = subprocess.run(
        ["git", "-C", str(ROOT), "archive", rev, *LAYOUT], capture_output=True, check=False
    )
    if archive.returncode:
        why = archive.stderr.decode(errors="replace").strip().splitlines()
        raise SystemExit(
            f"against.py: git archive {rev!r} failed ({why[-1] if why else archive.returncode}); "
            "give a revision of this repository, e.g. HEAD~1"
        )
    files = into / "files"
    files.mkdir(parents=True)
    subprocess.run(["tar", "-x", "-C", str(files)], input=archive.stdout, check=True)
    return lay_out(files, into / "package")


def timed(package: Path, search: str) -> tuple[float, int]:
    """CPU seconds and states of `search`, in a fresh process importing `package` (refused
    if it imported another ``statecore``: the pair would measure nothing)."""
    done = subprocess.run(
        [sys.executable, "-c", SEARCHES[search] + TIMED],
        capture_output=True,
        text=True,
        check=True,
        cwd=package,  # neither this tree nor the current folder on the path but `package`
        env={"PYTHONPATH": str(package), "PATH": "/usr/bin:/bin"},
    )
    seconds, states, imported = json.loads(done.stdout.strip().splitlines()[-1])
    if not Path(imported).is_relative_to(package):
        raise SystemExit(f"against.py: the search imported {imported}, not {package}")
    return float(seconds), int(states)


def pairs(base: Path, this: Path, search: str, count: int) -> list[float]:
    """`count` ratios, this tree's CPU seconds over REV's, the order alternating."""
    ratios = []
    for number in range(count):
        order = [(base, "rev"), (this, "this")]
        if number % 2:
            order.reverse()
        got = {side: timed(package, search) for package, side in order}
        (rev_s, rev_n), (this_s, this_n) = got["rev"], got["this"]
        ratios.append(this_s / rev_s)
        print(
            f"  {rev_s:8.2f} {this_s:8.2f} {this_s / rev_s:8.3f}"
            f"{'' if rev_n == this_n else f'  states differ: {rev_n} vs {this_n}'}",
            flush=True,
        )
    return ratios


def result_key(search: str) -> str:
    """`search`'s name on the RESULT line: its first word, ``_ids2`` for two ids, ``_fp``
    for fingerprints, ``_2w`` for two workers (``chunk_transfer_ids2_fp_2w``)."""
    marks = (("ids=2", "_ids2"), ("finger", "_fp"), ("2 workers", "_2w"))
    return search.split()[0].rstrip(",") + "".join(m for k, m in marks if k in search)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("rev", help="the revision to measure against (e.g. HEAD~3)")
    parser.add_argument("--pairs", type=int, default=6)
    parser.add_argument(
        "--search", action="append", choices=list(SEARCHES), help="only this search (repeatable)"
    )
    args = parser.parse_args()
    medians = {}
    with tempfile.TemporaryDirectory() as tmp:
        base = revision(args.rev, Path(tmp) / "rev")
        this = lay_out(ROOT, Path(tmp) / "this")
        for search in args.search or SEARCHES:
            print(f"{search}: CPU s with {args.rev}, with this tree, ratio")
            medians[search] = statistics.median(pairs(base, this, search, args.pairs))
            print(f"  median ratio {medians[search]:.3f}", flush=True)
    shown = " ".join(f"{result_key(name)}={ratio:.3f}" for name, ratio in medians.items())
    print(f"RESULT {shown}")


if __name__ == "__main__":
    main()
