"""What an exploration reports: a verdict per property, counts, coverage.

`statecore.check.explore.explore` returns a `Report`; `statecore.traces.replay` gives a
`PropertyResult` for one path. The verdict words are `statecore.traces.judge`'s.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from typing import NamedTuple

from ..properties import Property
from ..system import System, TakenTransition
from ..traces.judge import HOLDS, UNKNOWN, VACUOUS, PropertyResult, vacuity

__all__ = [
    "STOPS",
    "UNBOUNDED",
    "Coverage",
    "ExplorationInterrupted",
    "Limits",
    "Progress",
    "PropertyResult",
    "Report",
    "bound_notes",
    "complete_to",
    "coverage_of",
    "final_verdict",
]

# Why a search stopped before it finished (`Report.stop`), in words.
STOPS = {
    "violation": "the search stopped at the first violation",
    "max_states": "the search hit its state bound",
    "max_depth": "the search hit its depth bound",
    "max_time": "the search hit its time bound",
    "max_memory": "the search hit its memory bound",
    "interrupted": "the search was interrupted",
}


@dataclass(frozen=True)
class Coverage:
    """Which transitions of one component's machine exploration took."""

    component: str
    machine: str
    taken: dict[str, int]
    never: tuple[str, ...]

    @property
    def total(self) -> int:
        """The number of transitions the machine declares."""
        return len(self.taken) + len(self.never)


@dataclass(frozen=True)
class Progress:
    """A progress sample, for a progress line on a terminal."""

    states: int
    transitions: int
    depth: int
    queue: int
    seconds: float

    @property
    def rate(self) -> float:
        """Distinct states per second so far."""
        return self.states / self.seconds if self.seconds > 0 else 0.0


@dataclass(frozen=True)
class Report:
    """The result of one exploration."""

    system: System
    results: tuple[PropertyResult, ...]
    states: int
    transitions: int
    depth: int
    seconds: float
    complete: bool
    symmetry: bool
    coverage: tuple[Coverage, ...] = field(default=())
    stop: str = ""  # why the search stopped early (a key of `STOPS`), "" if it finished
    notes: tuple[str, ...] = ()  # what the user must know to read the verdicts
    # Every state within this many steps of an initial state was judged and its steps taken
    # (breadth-first, a stopped search is complete that deep): `depth` if it finished, -1 if
    # not even the initial states were.
    complete_depth: int = -1

    @property
    def ok(self) -> bool:
        """True when the search finished and every property holds."""
        return self.complete and all(r.ok for r in self.results)

    @property
    def rate(self) -> float:
        """Distinct states per second."""
        return self.states / self.seconds if self.seconds > 0 else float(self.states)

    def result(self, property_id: str) -> PropertyResult:
        """The result for `property_id`."""
        for r in self.results:
            if r.property.id == property_id:
                return r
        raise KeyError(f"no property {property_id!r} in report of {self.system.name!r}")

    def violations(self) -> tuple[PropertyResult, ...]:
        """Results that are not `holds`."""
        return tuple(r for r in self.results if not r.ok)


class ExplorationInterrupted(KeyboardInterrupt):
    """Ctrl-C stopped `explore`; `report` is what was decided so far (stop ``interrupted``)."""

    def __init__(self, report: Report) -> None:
        super().__init__("the search was interrupted")
        self.report = report


def noted(search: Callable[[], Report], note: str) -> Report:
    """`search`'s report with `note` first in its notes; an interrupted one's too."""
    try:
        report = search()
    except ExplorationInterrupted as stopped:
        stopped.report = replace(stopped.report, notes=(note, *stopped.report.notes))
        raise
    return replace(report, notes=(note, *report.notes))


def coverage_of(
    system: System, taken: Counter[tuple[TakenTransition, ...]]
) -> tuple[Coverage, ...]:
    """Each component's coverage from `taken`: how often each tuple of transitions was taken."""
    counts: Counter[tuple[str, str]] = Counter()
    for transitions, times in taken.items():
        for t in transitions:
            counts[(t.component, t.transition)] += times
    result: list[Coverage] = []
    for comp in system.components:
        names = [t.name for t in comp.machine.transitions]
        found = {n: counts[(comp.name, n)] for n in names if counts[(comp.name, n)]}
        never = tuple(n for n in names if n not in found)
        result.append(Coverage(comp.name, comp.machine.name, found, never))
    return tuple(result)


class Limits(NamedTuple):
    """How a search is bounded and run, as `explore` takes it (`statecore.check.explorer.Explorer`,
    `ParallelSearch`). The defaults: no bound, full states, on past every violation."""

    max_states: int | None = None
    max_memory: int | None = None
    stop_on_violation: bool = False
    progress: Callable[[Progress], None] | None = None
    fingerprints: int = 0
    max_depth: int | None = None
    max_seconds: float | None = None

    def checked(self) -> Limits:
        """These limits, refused where a bound bounds nothing: a count, size or time not above
        0, a depth below 0."""
        bounds = (
            ("max_states", self.max_states),
            ("max_memory", self.max_memory),
            ("max_seconds", self.max_seconds),
        )
        for name, bound in bounds:
            if bound is not None and not bound > 0:
                raise ValueError(f"{name} must be positive (or None for no bound), got {bound}")
        depth = self.max_depth
        if depth is not None and (type(depth) is not int or depth < 0):
            raise ValueError(f"max_depth must be 0 or more (or None for no bound), got {depth!r}")
        return self


UNBOUNDED = Limits()
"""A search with no bound, on past every violation, keeping full states."""


def complete_to(expanded: int, cut: int) -> int:
    """`Report.complete_depth` of a search whose deepest level expanded whole is `expanded`, and
    whose bound first turned a successor away while expanding depth `cut` (-1: never)."""
    return expanded if cut < 0 else min(cut, expanded)


def bound_notes(stop: str, complete_depth: int, reduced: bool = False) -> tuple[str, ...]:
    """How deep a search that a bound stopped (`stop`) was complete, as `Report.notes`: none
    for one that finished or stopped at a violation. `reduced`: under partial-order
    reduction, whose ample sets leave some states out."""
    if stop in ("", "violation") or complete_depth < 0:
        return ()
    steps = f"{complete_depth:,} step{'' if complete_depth == 1 else 's'}"
    within = f"within {steps} of an initial state"
    deeper = "; the states first met deeper were not kept" if stop == "max_depth" else ""
    if reduced:
        return (
            f"complete to depth {complete_depth:,}: the states the reduced search reached "
            f"{within} were judged and their ample steps taken (not every state that near: "
            "only an unreduced search keeps them all)",
        )
    return (
        f"complete to depth {complete_depth:,}: every state {within} was judged and its "
        f"steps taken{deeper}",
    )


def final_verdict(
    prop: Property,
    found: PropertyResult | None,
    complete: bool,
    stop: str,
    when_seen: bool,
    quiescent_seen: bool,
) -> PropertyResult:
    """The verdict on `prop` once a search is over (or stopped, for the reason `stop`).

    `found` is what the search settled, if anything; `when_seen` whether the
    condition of an always ever held, `quiescent_seen` whether a quiescent
    state was met.
    """
    if found is not None:
        return found
    if not complete:
        # Holding, and vacuity alike, are claims about every reachable
        # state: only a complete search can make them.
        return PropertyResult(prop, UNKNOWN, None, f"undecided: {STOPS[stop]}")
    vacuous = vacuity(prop, when_seen, quiescent_seen)
    if vacuous:
        return PropertyResult(prop, VACUOUS, None, vacuous)
    return PropertyResult(prop, HOLDS, None, "")
