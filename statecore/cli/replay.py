"""``statecore replay`` (an ITF trace, on the model or through an adapter) and ``diagram``."""

from __future__ import annotations

import argparse

from ..check.explore import (
    VIOLATED,
)
from ..registry import is_user_target
from ..traces.targets import system_for_trace
from .common import (
    EXIT_FINDING,
    EXIT_OK,
    UsageError,
    guard_user_code,
    resolve_adapter_guarded,
    resolve_target,
)

# -- replay --------------------------------------------------------------------


def cmd_replay(args: argparse.Namespace) -> int:
    from ..traces.itf import TraceFileError
    from ..traces.replay import replay

    if args.adapter:
        return _replay_adapter(args)
    from ..traces.itf import read_header

    _refuse_implementation_trace(args)
    name = args.target or str(read_header(args.trace).get("target") or "")
    _, system = guard_user_code(name, lambda: system_for_trace(args.trace, args.target))
    result = replay(system, args.trace)
    if result.trace is not None:
        print(result.trace.table(system))
    print(result.explain())
    if not result.reproduced:
        raise TraceFileError(str(args.trace), None, "the trace no longer shows what it recorded")
    return EXIT_FINDING if result.verdict == VIOLATED else EXIT_OK


def _refuse_implementation_trace(args: argparse.Namespace) -> None:
    """A conformance, crash or livelock trace records an implementation: it needs --adapter."""
    from ..fuzzing.fuzz import IMPLEMENTATION_KINDS
    from ..traces.itf import read_header

    header = read_header(args.trace)
    found = str(header.get("property") or "")
    if found in IMPLEMENTATION_KINDS and not header.get("adapter"):
        raise UsageError(
            f"{args.trace}: a {found} trace records what an implementation did, which the "
            "model alone cannot replay; pass the adapter that ran it: --adapter NAME or "
            "--adapter package.module:object (and --target if the model is not bundled)"
        )


def _replay_adapter(args: argparse.Namespace) -> int:
    from ..fuzzing.fuzz import replay_with_adapter
    from ..traces.itf import read_itf
    from ..traces.targets import trace_target
    from ..traces.trace import Trace

    target, _ = trace_target(args.trace, args.target, args.adapter)
    if args.target:
        resolve_target(args.target)  # a user module's failures are one line
    system, factory, spec = resolve_adapter_guarded(target, args.adapter)
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


def cmd_diagram(args: argparse.Namespace) -> int:
    """`statecore.render.diagram.run`, after loading a user's target (failures are one line)."""
    from ..render.diagram import run

    for name in (args.target, args.diff):
        if args.trace is None and name is not None and is_user_target(name):
            resolve_target(name)  # imported once; run() finds the module loaded
    code: int = run(args)
    return code
