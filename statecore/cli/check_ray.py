"""``statecore check --ray [ADDRESS]``: the search on a Ray cluster's actors.

The flag, its checks, and `statecore.check.ray_search.ray_explore` called as
`explore` is. The actors build the target themselves: a bundled target by
its ``load``, a user's ``module:object`` by its path, which every node of
the cluster must be able to import.
"""

from __future__ import annotations

import argparse
import functools
from collections.abc import Callable
from typing import Any

from ..check.explore import Report
from ..check.ray_search import ray_explore
from ..registry import Target, load_path
from ..system import System
from .common import UsageError


def add_ray_argument(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--ray",
        nargs="?",
        const="",
        default=None,
        metavar="ADDRESS",
        help="explore on a Ray cluster's actors, one per --workers (default: one per CPU): "
        "the cluster at ADDRESS (HOST:6379, or auto), else the one started here by 'ray start "
        "--head', else a new local one; needs the ray extra: pip install 'statecore[ray]'",
    )


def check_ray_usage(args: argparse.Namespace) -> None:
    """Refuse what does not combine with ``--ray``, before any work."""
    if args.ray is None:
        return
    if args.por:
        raise UsageError("--ray and --por do not combine yet: drop --por")
    if args.adequacy or args.symbolic:
        raise UsageError("--ray explores targets: drop it with --adequacy or --symbolic")


def on_ray(args: argparse.Namespace, name: str, target: Target | None) -> Callable[..., Report]:
    """`explore`, keywords and all, on the Ray cluster of ``--ray`` (its ``--workers``)."""
    build: Callable[[], System] = target.load if target else functools.partial(load_path, name)

    def run(system: System, *, workers: int, por: bool, **options: Any) -> Report:
        address = args.ray or None
        return ray_explore(build, system=system, address=address, workers=args.workers, **options)

    return run
