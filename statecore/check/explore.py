"""`explore`: the exhaustive check of a bounded `System`, and what its report holds.

One process searches (`statecore.check.explorer`), or several
(`statecore.check.parallel`), with partial-order reduction or without
(`statecore.check.reduction`). Where symmetry reduction turns out unsound for
the system (`statecore.check.symmetry_guard`), or the memos' premise fails
(`statecore.check.plain`), the search starts again without them and the
report's notes say why.
"""

from __future__ import annotations

import gc
from collections.abc import Callable

from ..properties import Property
from ..system import System
from ..traces.judge import HOLDS, UNKNOWN, VACUOUS, VIOLATED
from . import plain as _plain
from . import results as _results
from .explorer import Explorer
from .memory import resident_memory
from .parallel import parallel_search
from .reduction import search
from .results import (
    STOPS,
    Coverage,
    ExplorationInterrupted,
    Limits,
    Progress,
    PropertyResult,
    Report,
)
from .symmetry_guard import Asymmetry
from .values import NotInterchangeable

__all__ = [
    "HOLDS",
    "STOPS",
    "UNKNOWN",
    "VACUOUS",
    "VIOLATED",
    "Coverage",
    "ExplorationInterrupted",
    "Progress",
    "PropertyResult",
    "Report",
    "explore",
    "resident_memory",
]


def explore(
    system: System,
    *,
    max_states: int | None = None,
    max_memory: int | None = None,
    symmetry: bool = True,
    stop_on_violation: bool = True,
    properties: tuple[Property, ...] | None = None,
    por: bool = False,
    progress: Callable[[Progress], None] | None = None,
    fingerprints: int = 0,
    workers: int = 1,
    max_depth: int | None = None,
    max_seconds: float | None = None,
) -> Report:
    """Explore `system` breadth-first and judge its properties.

    With `por`, only an ample subset of the actions is taken from each state (partial-order
    reduction, `statecore.check.reduction`: the same verdicts). `max_states` bounds the number of
    distinct states and `max_memory` the process's resident memory in bytes (the report is then
    incomplete unless the space was smaller). `max_depth` keeps the states within that many steps
    of an initial state: each is judged and its steps taken, none first met deeper is kept (the
    report is then incomplete, stopped by ``max_depth``, unless the space is no deeper);
    `max_seconds` stops it after that many seconds of searching (``max_time``). With
    `stop_on_violation` the search stops at the first violation; otherwise it runs on and reports
    the first (shortest) violation of every property. Ctrl-C raises `ExplorationInterrupted` with
    the partial report; a misbehaving model raises `ModelError`. `fingerprints` (64 or 128) keeps
    that many bits per state instead of the state (`statecore.check.fingerprints`) and packs each
    level (`statecore.check.frontier`); 0, the default, keeps full states: exact. `workers` > 1
    searches on that many processes (`statecore.check.parallel`).
    """
    limits = Limits(
        max_states, max_memory, stop_on_violation, progress, fingerprints, max_depth, max_seconds
    ).checked()
    make = Explorer if workers == 1 else parallel_search(Explorer, workers, por)
    # The visited set only grows, with no cycles: the cyclic collector would rescan it for nothing.
    enabled = gc.isenabled()
    gc.disable()
    try:
        if por:
            return search(system, properties, symmetry, limits, Explorer, explore)
        try:
            return make(system, properties, symmetry, limits).run()
        except Asymmetry as exc:
            note = f"symmetry reduction off: {exc.reason}; every state was explored without it"
        return _results.noted(make(system, properties, False, limits).run, note)
    except NotInterchangeable as exc:  # the memos' premise fails (`statecore.check.values`)
        plain = _plain.without_memos(Explorer(system, properties, False, limits))
        return _results.noted(plain.run, _plain.note(exc.reason))
    finally:
        if enabled:
            gc.enable()
