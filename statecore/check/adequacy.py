"""How much of a model its spec pins down: explore every single-point mutant.

`adequacy(system)` explores the reference model, then each mutant of
`statecore.check.mutation.mutants`, and sorts the mutants:

* **killed** - some property that holds on the reference is violated or
  vacuous on the mutant (it says which);
* **crashed** - the mutant raised or is not deterministic (a `ModelError`):
  the checker notices, though no property does;
* **survived** - every property still holds: a blind spot of the spec, unless
  the model declares the mutant **equivalent** with its reason;
* **invalid** - a mutated machine that its own definition checks reject;
* **undecided** - the mutant's search hit its state bound before finding
  anything.

The score is killed and crashed mutants over every mutant that builds and is
not declared equivalent. A property no mutant violates is *possibly
tautological*: nothing in the model could make it fail. The report is `ok`
when the reference holds, every property is killed by some mutant, no mutant
survives untriaged and no equivalence declaration is contradicted.

Mutants are explored in parallel processes (``fork``, where the platform has
it): each is a whole exploration, and they share nothing.
"""

from __future__ import annotations

import multiprocessing
import time
from collections.abc import Callable
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass

from ..errors import ModelError, StatecoreError
from ..system import System
from .explore import HOLDS, UNKNOWN, Report, explore
from .mutation import InvalidMutant, Mutant, mutants, mutate

KILLED = "killed"
CRASHED = "crashed"
SURVIVED = "survived"
EQUIVALENT = "equivalent"
INVALID = "invalid"
UNDECIDED = "undecided"

_BOUND_FACTOR = 10  # a mutant may have this many times the reference's states
_MIN_BOUND = 10_000


@dataclass(frozen=True)
class MutantResult:
    """What exploring one mutant showed."""

    mutant: Mutant
    outcome: str
    killed_by: tuple[str, ...] = ()
    detail: str = ""
    states: int = 0


@dataclass(frozen=True)
class AdequacyReport:
    """Every mutant of one model with its outcome; see the module docstring."""

    system: System
    reference: Report
    results: tuple[MutantResult, ...]
    seconds: float

    def count(self, outcome: str) -> int:
        """How many mutants had `outcome`."""
        return sum(1 for r in self.results if r.outcome == outcome)

    @property
    def score(self) -> float:
        """Killed and crashed mutants over those that build and are not equivalent."""
        detected = self.count(KILLED) + self.count(CRASHED)
        judged = detected + self.count(SURVIVED) + self.count(UNDECIDED)
        return detected / judged if judged else 1.0

    def kills(self) -> dict[str, tuple[str, ...]]:
        """Per property id, the ids of the mutants that violate it (or make it vacuous)."""
        table: dict[str, list[str]] = {p.id: [] for p in self.system.properties}
        for result in self.results:
            for prop_id in result.killed_by:
                table[prop_id].append(result.mutant.id)
        return {prop_id: tuple(ids) for prop_id, ids in table.items()}

    @property
    def tautological(self) -> tuple[str, ...]:
        """Properties no mutant violates: nothing in the model could make them fail."""
        return tuple(prop_id for prop_id, ids in self.kills().items() if not ids)

    @property
    def survivors(self) -> tuple[MutantResult, ...]:
        """Mutants every property lets through, not declared equivalent."""
        return tuple(r for r in self.results if r.outcome in (SURVIVED, UNDECIDED))

    @property
    def stale_equivalences(self) -> tuple[MutantResult, ...]:
        """Mutants the model declares equivalent that a property kills after all."""
        declared = self.system.equivalent_mutants
        return tuple(r for r in self.results if r.mutant.id in declared and r.outcome == KILLED)

    @property
    def ok(self) -> bool:
        """The reference holds, every property can fail, every survivor is triaged."""
        return (
            self.reference.ok
            and not self.tautological
            and not self.survivors
            and not self.stale_equivalences
        )


def adequacy(
    system: System,
    *,
    max_states: int | None = None,
    jobs: int = 1,
    progress: Callable[[MutantResult], None] | None = None,
) -> AdequacyReport:
    """Explore `system` and each of its mutants; see the module docstring.

    `max_states` bounds each mutant's search (default: ten times the
    reference's states); `jobs` processes explore mutants side by side.
    """
    if jobs < 1:
        raise ValueError(f"jobs must be at least 1, got {jobs}")
    start = time.perf_counter()
    reference = explore(system, stop_on_violation=False)
    if not reference.complete:
        raise StatecoreError(f"system {system.name!r}: the reference search did not finish")
    bound = max_states or max(_BOUND_FACTOR * reference.states, _MIN_BOUND)
    found = mutants(system)
    holding = frozenset(r.property.id for r in reference.results if r.verdict == HOLDS)
    job = _Job(system, found, bound, holding)
    results = _run_all(job, jobs, progress)
    return AdequacyReport(system, reference, tuple(results), time.perf_counter() - start)


def killers(system: System, *, max_states: int | None = None) -> dict[str, Mutant | None]:
    """Per property holding on the reference, the first mutant (in mutant order) that fails it.

    A quick answer to "can each property fail?": each mutant is explored only
    for the properties not yet killed, and only up to its first violation.
    None marks a property no mutant fails: possibly tautological.
    """
    reference = explore(system, stop_on_violation=False)
    bound = max_states or max(_BOUND_FACTOR * reference.states, _MIN_BOUND)
    holding = [r.property for r in reference.results if r.verdict == HOLDS]
    found: dict[str, Mutant | None] = {p.id: None for p in holding}
    for mutant in mutants(system):
        open_props = tuple(p for p in holding if found[p.id] is None)
        if not open_props:
            break
        try:
            report = explore(mutate(system, mutant), max_states=bound, properties=open_props)
        except (InvalidMutant, ModelError):
            continue
        for result in report.results:
            if result.verdict not in (HOLDS, UNKNOWN):
                found[result.property.id] = mutant
    return found


@dataclass(frozen=True)
class _Job:
    system: System
    mutants: tuple[Mutant, ...]
    bound: int
    holding: frozenset[str]

    def run(self, index: int) -> MutantResult:
        """Explore mutant `index` and sort it."""
        mutant = self.mutants[index]
        try:
            report = explore(
                mutate(self.system, mutant), max_states=self.bound, stop_on_violation=False
            )
        except InvalidMutant as exc:
            return MutantResult(mutant, INVALID, detail=str(exc))
        except ModelError as exc:
            return MutantResult(mutant, CRASHED, detail=str(exc).splitlines()[0])
        killed_by = tuple(
            r.property.id
            for r in report.results
            if r.property.id in self.holding and r.verdict not in (HOLDS, UNKNOWN)
        )
        if killed_by:
            return MutantResult(mutant, KILLED, killed_by, states=report.states)
        bounded = "" if report.complete else f"no finding within {report.states} states"
        reason = self.system.equivalent_mutants.get(mutant.id)
        if reason is not None:  # a person's claim; a bounded search cannot refute it
            detail = f"{reason} ({bounded})" if bounded else reason
            return MutantResult(mutant, EQUIVALENT, detail=detail, states=report.states)
        if bounded:
            return MutantResult(mutant, UNDECIDED, detail=bounded, states=report.states)
        return MutantResult(mutant, SURVIVED, states=report.states)


_CURRENT: _Job | None = None  # the job a forked worker inherits


def _run_in_worker(index: int) -> MutantResult:
    assert _CURRENT is not None
    return _CURRENT.run(index)


def _run_all(
    job: _Job, jobs: int, progress: Callable[[MutantResult], None] | None
) -> list[MutantResult]:
    """Every mutant's result, in mutant order, in `jobs` processes when fork is available."""
    global _CURRENT
    indices = range(len(job.mutants))
    if jobs == 1 or len(job.mutants) < 2 or "fork" not in multiprocessing.get_all_start_methods():
        return [_reported(job.run(i), progress) for i in indices]
    _CURRENT = job
    try:
        context = multiprocessing.get_context("fork")
        with ProcessPoolExecutor(jobs, mp_context=context) as pool:
            return [_reported(r, progress) for r in pool.map(_run_in_worker, indices)]
    finally:
        _CURRENT = None


def _reported(
    result: MutantResult, progress: Callable[[MutantResult], None] | None
) -> MutantResult:
    if progress is not None:
        progress(result)
    return result


# -- reporting ----------------------------------------------------------------------------


def report_lines(name: str, report: AdequacyReport) -> list[str]:
    """The text report of one target: score, kills per property, blind spots."""
    detected = report.count(KILLED) + report.count(CRASHED)
    judged = detected + report.count(SURVIVED) + report.count(UNDECIDED)
    mark = "PASS" if report.ok else "FAIL"
    lines = [
        f"{mark} {name}: adequacy {report.score:.0%} ({detected} of {judged} mutants detected: "
        f"{report.count(KILLED)} killed, {report.count(CRASHED)} crashed; "
        f"{report.count(SURVIVED)} survived, {report.count(UNDECIDED)} undecided; "
        f"{report.count(INVALID)} invalid, {report.count(EQUIVALENT)} equivalent), "
        f"{report.seconds:.1f}s"
    ]
    if not report.reference.ok:
        lines.append("  the reference itself does not hold: run `statecore check` on it first")
    lines.append("  mutants killed per property:")
    width = max((len(p) for p in report.kills()), default=0)
    for prop_id, ids in report.kills().items():
        flag = "  possibly tautological: no mutant violates it" if not ids else ""
        lines.append(f"    {prop_id:<{width}}  {len(ids):>3}{flag}")
    if report.survivors:
        lines.append("  survivors (blind spots of the spec; close with a property, or declare")
        lines.append("  the mutant equivalent in System(equivalent_mutants={id: reason})):")
        lines.extend(f"    {r.mutant}  [{r.outcome}]" for r in report.survivors)
    for r in report.stale_equivalences:
        lines.append(f"  declared equivalent but killed by {', '.join(r.killed_by)}: {r.mutant.id}")
    return lines


def report_json(name: str, report: AdequacyReport) -> dict[str, object]:
    """The JSON report of one target: every mutant with its outcome."""
    return {
        "name": name,
        "ok": report.ok,
        "reference_ok": report.reference.ok,
        "score": round(report.score, 4),
        "seconds": round(report.seconds, 3),
        "counts": {
            o: report.count(o) for o in (KILLED, CRASHED, SURVIVED, UNDECIDED, INVALID, EQUIVALENT)
        },
        "kills": {prop_id: list(ids) for prop_id, ids in report.kills().items()},
        "tautological": list(report.tautological),
        "stale_equivalences": [r.mutant.id for r in report.stale_equivalences],
        "mutants": [
            {
                "id": r.mutant.id,
                "kind": r.mutant.kind,
                "where": r.mutant.where,
                "code": r.mutant.code,
                "outcome": r.outcome,
                "killed_by": list(r.killed_by),
                "detail": r.detail,
            }
            for r in report.results
        ],
    }
