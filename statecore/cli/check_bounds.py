"""The bounds of a ``statecore check``: the default memory bound, what a stopped search says."""

from __future__ import annotations

import argparse
import os

from ..check.explore import UNKNOWN, Report
from .common import UsageError, require_positive_float, require_positive_int

MEMORY_FRACTION = 0.75
"""The default ``--max-memory``: this share of the machine's physical memory."""


def add_bound_arguments(parser: argparse.ArgumentParser) -> None:
    """``--max-states``, ``--max-depth``, ``--max-time`` and ``--max-memory``."""
    parser.add_argument(
        "--max-states", type=int, default=None, metavar="N", help="stop after N distinct states"
    )
    parser.add_argument(
        "--max-depth",
        type=int,
        default=None,
        metavar="N",
        help="keep the states within N steps of an initial state: every one is judged, "
        "none deeper is kept (a complete check to that depth)",
    )
    parser.add_argument(
        "--max-time",
        type=float,
        default=None,
        metavar="SECONDS",
        help="stop after SECONDS of searching; the report says how deep it was complete",
    )
    parser.add_argument(
        "--max-memory",
        type=float,
        default=None,
        metavar="GB",
        help="stop when the process holds GB gigabytes (default: "
        + memory_default_text().replace("%", "%%")
        + ")",
    )


def require_bounds(args: argparse.Namespace) -> None:
    """Refuse bounds that bound nothing, or a depth where nothing is explored level by level."""
    require_positive_int(args.max_states, "--max-states", "states", 1_000_000)
    if args.max_depth is not None and args.max_depth < 0:
        raise UsageError(
            f"--max-depth {args.max_depth}: must be 0 or more steps (e.g. --max-depth 20)"
        )
    for flag, value in (("--max-depth", args.max_depth), ("--max-time", args.max_time)):
        if value is not None and (args.adequacy or args.symbolic):
            raise UsageError(f"{flag} bounds an exploration: drop it with --adequacy or --symbolic")
    require_positive_float(args.max_time, "--max-time", "seconds", 600)
    require_positive_float(args.max_memory, "--max-memory", "gigabytes", 4)


def memory_bound(args: argparse.Namespace | None) -> int | None:
    """``--max-memory`` in bytes, or the default share of physical memory (None: unknown).

    Targets checked side by side (``--jobs``) split the default between them.
    """
    gigabytes = None if args is None else args.max_memory
    if gigabytes is not None:
        return int(gigabytes * 2**30)
    total = _physical_memory()
    share = 1 if args is None else getattr(args, "memory_share", 1)
    return int(total * MEMORY_FRACTION / share) if total else None


def _physical_memory() -> int | None:
    try:
        total = os.sysconf("SC_PHYS_PAGES") * os.sysconf("SC_PAGE_SIZE")
    except (AttributeError, ValueError, OSError):
        return None
    return total if total > 0 else None


def memory_default_text() -> str:
    bound = memory_bound(None)
    if bound is None:
        return "none: this system does not tell its physical memory"
    return f"{MEMORY_FRACTION:.0%} of physical memory, {bound / 2**30:.3g} GB here"


def stop_text(report: Report, args: argparse.Namespace) -> str | None:
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
    if report.stop == "max_depth":
        return (
            f"stopped at --max-depth {args.max_depth}{before}; raise --max-depth to search further"
        )
    if report.stop == "max_time":
        return (
            f"stopped at --max-time {args.max_time:g}{before}; raise --max-time to search further"
        )
    if report.stop == "max_memory":
        bound = (memory_bound(args) or 0) / 2**30
        source = "--max-memory" if args.max_memory is not None else "the default --max-memory"
        share = getattr(args, "memory_share", 1)
        if args.max_memory is None and share > 1:
            source += f", split between {share} targets checked side by side (--jobs)"
        return (
            f"stopped at the memory bound of {bound:.3g} GB ({source}){before}; raise it with "
            f"--max-memory GB, or check a smaller configuration"
        )
    if report.stop == "interrupted":
        return f"interrupted (Ctrl-C){before}"
    return f"stopped early ({report.stop}){before}"
