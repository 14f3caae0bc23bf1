"""Which target a trace file replays on, and through which adapter.

A trace file is data, not code: the names in its header are only looked up
among the bundled targets and adapters, never imported; what the user names
on the command line may be anything. `trace_target` settles the two,
`system_for_trace` loads the system.
"""

from __future__ import annotations

import difflib
import os
from typing import Any

from ..registry import (
    TargetError,
    adapter_system,
    bundled,
    bundled_adapters,
    is_user_adapter,
    is_user_target,
    resolve,
    resolve_adapter,
)
from ..system import System
from .itf import read_header

__all__ = ["system_for_trace", "trace_target"]


def system_for_trace(
    path: Any, target: str | None = None, adapter: str | None = None, *, drawing: bool = False
) -> tuple[str, System]:
    """The target name and the system a trace file replays (or is drawn) on.

    See `trace_target` for how the name is chosen. A trace written by
    ``statecore fuzz`` names its ``adapter``, whose model configuration (the
    fuzzing bounds) is the one the trace replays on; replaying it needs the
    adapter, drawing it does not.
    """
    name, chosen = trace_target(path, target, adapter, drawing=drawing)
    if chosen and adapter:
        return name, resolve_adapter(name, chosen)[0]
    if chosen:
        return name, adapter_system(name, chosen)
    return name, resolve(name)[1]


def trace_target(
    path: Any, target: str | None = None, adapter: str | None = None, *, drawing: bool = False
) -> tuple[str, str]:
    """``(target, adapter)`` a trace runs on: as the user names them, else as its header does.

    A trace file is data, not code: a name read from it is only looked up
    among the bundled targets and adapters, never imported. The user may
    name anything (`target` may be ``package.module:object``), but a header
    naming something else is refused with both names, so that either can be
    dropped. Without an `adapter`, a trace whose header names one is refused
    too, unless it is only being drawn (`drawing`): it shows what an
    implementation did, which the model alone cannot replay. When drawing,
    the header's target may also be a bundled variant of the `target` named.
    """
    where = os.fspath(path)
    header = read_header(path)
    named = str(header.get("target") or header.get("source") or "")
    chosen = _trace_adapter(where, str(header.get("adapter") or ""), adapter, drawing)
    if target is None:
        return _bundled_name(where, named), chosen
    declared = str(header.get("target") or "")
    if drawing and named and _is_variant_of(named, target):
        return named, chosen
    if declared and not _same_target(declared, target):
        fix = (
            f"draw it on {declared} or the model it is a variant of"
            if drawing
            else "drop --target to use the header's"
        )
        flag = "TARGET" if drawing else "--target"
        raise TargetError(
            f"{where}: the trace header names target {declared!r} but {flag} is {target!r}; "
            f"{fix}, or change 'target' in the header"
        )
    return target, chosen


def _trace_adapter(where: str, declared: str, adapter: str | None, drawing: bool) -> str:
    """The adapter a trace runs through: the user's, which must agree with the header's.

    A header naming an adapter that is not bundled (the user's own
    ``package.module:object``) is honoured only when the user passes the same
    name with --adapter: nothing named in a trace file is imported otherwise.
    """
    if declared and declared not in {a.name for a in bundled_adapters()}:
        if adapter == declared or (drawing and not adapter):
            return declared
        if is_user_adapter(declared) and not adapter:
            raise TargetError(
                f"{where}: the trace header names adapter {declared!r}, which is not bundled; "
                "statecore imports only what you name yourself - if you trust this file, "
                f"pass --adapter {declared} (and --target), or remove 'adapter' from the header"
            )
        if not is_user_adapter(declared):
            raise TargetError(
                f"{where}: the trace header names adapter {declared!r}, which is not bundled "
                "('statecore list' shows the adapters); remove 'adapter' from the header"
            )
    if adapter:
        if declared and declared != adapter:
            raise TargetError(
                f"{where}: the trace header names adapter {declared!r} but --adapter is "
                f"{adapter!r}; pass --adapter {declared}, or remove 'adapter' from the header "
                "to replay the trace through another"
            )
        return adapter
    if declared and not drawing:
        raise TargetError(
            f"{where}: the trace header names adapter {declared!r}: statecore fuzz wrote it "
            f"and it replays through that implementation; pass --adapter {declared}"
        )
    return declared


def _bundled_name(where: str, name: str) -> str:
    """`name`, read from a trace file, if it is a bundled target; refused otherwise."""
    targets = [t.name for t in bundled()]
    if name in targets:
        return name
    by_path = {t.path: t.name for t in bundled()}
    if name in by_path:  # written by `statecore check package.module:object` of a bundled one
        return by_path[name]
    if not name:
        raise TargetError(
            f"{where}: the trace names no target (no 'target' or 'source' in its #meta); "
            "pass --target"
        )
    if is_user_target(name):
        raise TargetError(
            f"{where}: the trace header names target {name!r}, which is not bundled; "
            "statecore imports only what you name yourself - if you trust this file, "
            f"pass --target {name}"
        )
    close = difflib.get_close_matches(name, targets, n=3, cutoff=0.5)
    hint = f" (did you mean {', '.join(close)}?)" if close else ""
    raise TargetError(
        f"{where}: the trace names target {name!r}, which is not bundled{hint}; "
        "pass --target NAME or --target package.module:object"
    )


def _same_target(declared: str, named: str) -> bool:
    """Whether the header's target and the user's are the same (by name or by path)."""
    if declared == named:
        return True
    paths = {t.name: t.path for t in bundled()}
    return paths.get(declared) == named or paths.get(named) == declared


def _is_variant_of(declared: str, named: str) -> bool:
    """Whether the header's target is `named` or a bundled variant of it."""
    if _same_target(declared, named):
        return True
    family = {t.name: t.family for t in bundled()}.get(declared, "")
    return bool(family) and _same_target(family, named)
