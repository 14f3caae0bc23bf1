"""The search on Ray against one process and forked workers: throughput per worker.

One target (``chunk_transfer`` by default, 140,740 states; ``--quick``:
``segments``, 3,281) is checked completely, side by side:

* ``explore`` in this process;
* ``explore(workers=N)``, N forked processes;
* ``ray_explore`` on 1 and N actors of a Ray cluster: a local one of N CPUs
  started here, or the one at ``--address`` (``auto``, ``HOST:6379``).

Each row prints states, transitions, wall-clock seconds, distinct states/s
and states/s per worker; the counts must agree (the script says if they do
not). Ray's start and its actors' start are not timed: a first, small
search starts the actors, which later searches reuse. With full states the
actors own states by fingerprint where forked workers use the hash, so
``--fingerprints 64`` compares like with like.

Run: ``python benchmarks/ray_explore.py [--quick] [--target NAME] [--workers N]
[--address ADDRESS] [--fingerprints 64]``. The last line is
``RESULT ray_states_per_s_per_worker=<x> one_process_states_per_s=<y>``.
"""

from __future__ import annotations

import argparse
import sys
import time
from collections.abc import Callable

from statecore.check.explore import Report, explore
from statecore.check.ray_search import ray_explore
from statecore.registry import bundled


def timed(run: Callable[[], Report]) -> tuple[Report, float]:
    """What `run` reports, and the wall-clock seconds it took."""
    start = time.perf_counter()
    report = run()
    return report, time.perf_counter() - start


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="segments instead")
    parser.add_argument("--target", default=None, help="a bundled target (default chunk_transfer)")
    parser.add_argument("--workers", type=int, default=2, help="forked workers and actors (2)")
    parser.add_argument("--address", default=None, help="a running Ray cluster's address")
    parser.add_argument("--fingerprints", type=int, choices=(0, 64, 128), default=0)
    args = parser.parse_args(argv)
    import ray

    name = args.target or ("segments" if args.quick else "chunk_transfer")
    target = {t.name: t for t in bundled()}[name]
    system = target.load()
    n, bits = args.workers, args.fingerprints
    started = not ray.is_initialized()  # else: the caller's cluster, left running
    if started and args.address:
        ray.init(address=args.address, logging_level="warning")
    elif started:
        ray.init(address="local", num_cpus=n, include_dashboard=False, logging_level="warning")
    warm = {t.name: t for t in bundled()}["request_state_system"].load

    def here(workers: int) -> tuple[Report, float]:
        return timed(
            lambda: explore(system, stop_on_violation=False, fingerprints=bits, workers=workers)
        )

    def on_ray(workers: int) -> tuple[Report, float]:
        ray_explore(warm, workers=workers)  # starts the actors: not timed
        return timed(
            lambda: ray_explore(
                target.load,
                system=system,
                workers=workers,
                stop_on_violation=False,
                fingerprints=bits,
            )
        )

    rows: list[tuple[str, int, Report, float]] = []
    for label, workers, run in (
        ("one process", 1, here),
        (f"{n} forked processes", n, here),
        ("Ray, 1 actor", 1, on_ray),
        (f"Ray, {n} actors", n, on_ray),
    ):
        rows.append((label, workers, *run(workers)))
    where = args.address or f"a local cluster of {int(ray.cluster_resources()['CPU'])} CPUs"
    print(f"{name}, full states" if not bits else f"{name}, {bits}-bit fingerprints", end="")
    print(f"; Ray: {where}; wall-clock seconds")
    header = f"{'states':>9} {'transitions':>12} {'s':>8} {'states/s':>10} {'per worker':>11}"
    print(f"{'search':<22} {header}")
    for label, workers, report, seconds in rows:
        rate = report.states / seconds
        print(
            f"{label:<22} {report.states:>9,} {report.transitions:>12,} {seconds:>8.2f} "
            f"{rate:>10,.0f} {rate / workers:>11,.0f}"
        )
    counts = {(r.states, r.transitions, r.depth) for _, _, r, _ in rows}
    verdicts = {tuple((p.property.id, p.verdict) for p in r.results) for _, _, r, _ in rows}
    if len(counts) != 1 or len(verdicts) != 1:
        print("MISMATCH: the searches disagree on counts or verdicts", file=sys.stderr)
        return 1
    if started:
        ray.shutdown()
    _, workers, report, seconds = rows[-1]
    one = rows[0][2].states / rows[0][3]
    print(
        f"RESULT ray_states_per_s_per_worker={report.states / seconds / workers:.0f} "
        f"one_process_states_per_s={one:.0f}"
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
