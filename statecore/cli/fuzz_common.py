"""What ``statecore fuzz`` shares with ``--workers``: the flags as `fuzz` options, where a
finding's trace is written, and the command that replays it."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ..registry import bundled
from ..system import System

if TYPE_CHECKING:  # the CLI starts without Hypothesis: `statecore fuzz` says to install it
    from ..fuzzing.interpreter import Finding


def fuzz_options(args: argparse.Namespace) -> dict[str, Any]:
    """The search options the command line chose, as `statecore.fuzzing.fuzz.fuzz` takes them."""
    return {
        "budget": args.budget,
        "max_examples": args.max_examples,
        "seed": args.seed,
        "profile": args.profile,
        "known": {} if args.no_known else None,
        "swarm": not args.no_swarm,
        "guided": not args.no_guided,
    }


def write_fuzz_trace(
    system: System, finding: Finding, args: argparse.Namespace, adapter: str
) -> Path:
    from ..traces.itf import write_itf

    args.trace_out.mkdir(parents=True, exist_ok=True)
    safe = adapter.replace(":", "_")
    path: Path = args.trace_out / f"{system.name}.{safe}.{finding.property_id}.itf.json"
    meta = {"target": args.target, "adapter": adapter}
    write_itf(finding.trace, system, path, meta=meta)
    return path


def fuzz_replay_command(trace_file: Path | None, target: str, adapter: str) -> str | None:
    """The command that replays a fuzz trace; --target only where the header's is not enough."""
    import shlex

    if trace_file is None:
        return None
    bundled_names = {t.name for t in bundled()}
    words = ["statecore", "replay", str(trace_file)]
    if target not in bundled_names:
        words += ["--target", target]
    words += ["--adapter", adapter]
    return " ".join(shlex.quote(w) for w in words)
