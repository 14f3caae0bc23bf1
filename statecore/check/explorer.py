"""Exhaustive breadth-first exploration of a bounded `System`.

Every reachable state is visited once (deduplicated by hash, optionally up to
renaming of interchangeable ids); each property is judged along the way:

* ``always`` in every state, ``sometimes`` until one state satisfies it;
* ``eventually`` and hot monitor states at every quiescent state (no internal
  action enabled, or only ones that stutter: same state, no output) and every
  deadlock;
* monitors on every step's outputs.

Because the search is breadth-first (one depth level at a time), the first
violation found of a property has a shortest trace. A property that could
not have failed is reported *vacuous*: an ``always(..., when=A)`` whose A
never held, a ``sometimes`` never hit, an ``eventually`` with no quiescent
state to judge it in.

Successors come from a `statecore.check.stepcache.SuccessorCache`, which runs an
action only on a combination of read values it has not met before.

Symmetry reduction is used only where it is sound: `statecore.check.symmetry_guard`
checks, as the search goes, that nothing in the system tells its symmetric ids
apart, and raises `Asymmetry` if something does (`statecore.check.explore`
then searches again without symmetry); likewise `NotInterchangeable` for the
memos (`statecore.check.plain`). A model that misbehaves - an action or a
property that raises, an action that is not deterministic - stops the search
with a `statecore.errors.ModelError` carrying the trace that reached the state.
"""

from __future__ import annotations

import time
from collections import Counter
from collections import _count_elements as _count  # type: ignore[attr-defined]
from collections.abc import MutableMapping

from ..errors import ActionRaisedError, ModelError
from ..properties import EMPTY_MONITOR, MonitorState, Property, pending_hot
from ..system import ActionLabel, System, SystemStep, TakenTransition
from ..traces.judge import (
    HOLDS,
    INVARIANT_FALSE,
    REACHED,
    VIOLATED,
    at_rest,
    eventually_false,
    hot_monitor,
    judge_path,
    rest_place,
)
from ..traces.trace import Trace
from . import results as _results
from .counterexample import Node, PropertyFault, action_error, property_error, rebuild
from .fingerprints import FingerprintStore, store_notes
from .frontier import Level, NodeHint, Parts, expand_hinted, new_level
from .memory import resident_memory
from .monitor_steps import MonitorSteps
from .predicates import Judgement, Judgements, Predicate, PredicateCache, predicate_names
from .reduction import Footprints, Reducer
from .results import (
    UNBOUNDED,
    Coverage,
    ExplorationInterrupted,
    Limits,
    Progress,
    PropertyResult,
    Report,
)
from .stepcache import ActionFault, Expansion, SuccessorCache
from .symmetry import Canonicalizer, Renaming, renamings
from .symmetry_guard import Asymmetry, SymmetryGuard

__all__ = ["Explorer"]

_MEMORY_EVERY = 1024  # nodes expanded between two looks at the resident memory


class Explorer:
    walks = True  # whether successors carry hints (off: every walk from the roots)

    def __init__(
        self,
        system: System,
        properties: tuple[Property, ...] | None,
        symmetry: bool,
        limits: Limits = UNBOUNDED,
        footprints: Footprints | None = None,
    ) -> None:
        self.system = system
        self.props = tuple(system.properties if properties is None else properties)
        self.monitors = tuple(p for p in self.props if p.kind == "monitor")
        self.monitor_ids = tuple(p.id for p in self.monitors)
        self.group: tuple[Renaming, ...] = renamings(system) if symmetry else ({},)
        self.canonicalizer = Canonicalizer(system)
        self.symmetry = symmetry and self.canonicalizer.active
        self.guard = SymmetryGuard(system, self.canonicalizer) if self.symmetry else None
        self.monitor_steps = MonitorSteps(self.monitors, self.guard)
        verify = self.guard.check_run if self.guard is not None else None
        self.por = None if footprints is None else Reducer(system, footprints)
        if self.por is not None:  # its memo learns what each action reads and writes
            self.successors = self.por.successors(verify)
        else:
            self.successors = SuccessorCache(system, verify=verify)
        # One set of value ids: a hint's ids (`SuccessorCache.expand`) serve the predicates too.
        names = predicate_names(self.props)
        self.predicates = PredicateCache(system, self.guard, names, ids=self.successors.ids)
        self.values = self.monitor_steps.values = self.successors.values  # each value made
        if self.guard is not None:
            self.guard.values = self.values
            self.values.rename_by(self.canonicalizer.others(), self.canonicalizer.moved)
        self.max_states = limits.max_states
        self.max_memory = limits.max_memory
        self.max_depth = limits.max_depth
        self.max_seconds = limits.max_seconds
        self.deadline = float("inf")  # (`perf_counter`) the time bound's, once the search starts
        self.stop = ""  # why the search stopped early, a key of STOPS
        self.bound = ""  # the bound that turned a new state away first, a key of STOPS
        self.cut = -1  # the depth expanded when it did (its successors were not all kept)
        self.expanded = -1  # the deepest level expanded whole
        self.stop_on_violation = limits.stop_on_violation
        self.progress = limits.progress
        self.parents: MutableMapping[Node, tuple[Node, ActionLabel] | None] | FingerprintStore = {}
        if limits.fingerprints:
            self.parents = FingerprintStore(
                system, limits.fingerprints, self._canon, self.monitor_steps.step
            )
        # Levels packed with fingerprints (`frontier`), not under POR (its proviso reads them).
        packed = limits.fingerprints and self.por is None
        self.parts = Parts.of(system, len(self.monitors)) if packed else None
        self.results: dict[str, PropertyResult] = {}
        self.when_seen: set[str] = set()
        self.quiescent_seen = False
        # Monitor refusals met at this depth, committed one level deeper (`_commit_refusals`).
        self.refusals: dict[str, tuple[Property, Node, ActionLabel, str]] = {}
        # Transitions taken, counted per step's tuple of them (see `_coverage`).
        self.taken: Counter[tuple[TakenTransition, ...]] = Counter()
        self.transitions = 0
        self.depth = 0
        self.complete = True  # False once a bound turned a new state away
        self.violated = False
        self.last_report = 0.0
        self.state_props = self._undecided_state_props()  # to judge in each new state
        self.first = self.at = -1  # where the level, and the node, expanded are stored (or -1)

    # -- the search ------------------------------------------------------------

    def run(self) -> Report:
        start = time.perf_counter()
        if self.max_seconds is not None:
            self.deadline = start + self.max_seconds
        try:
            self._search(start)
        except KeyboardInterrupt:
            self.stop = "interrupted"
            raise ExplorationInterrupted(self._report(False, time.perf_counter() - start)) from None
        if self.por is not None:  # a complete search must have kept to its footprints
            self.por.confirm(self.complete and not self.stop)
        return self._report(self.complete and not self.stop, time.perf_counter() - start)

    def _search(self, start: float) -> None:
        level: Level = self._initial_nodes()
        self.last_report = start
        depth = first = 0  # and where the level's first node is stored (it is stored as queued)
        walks = self.hinted
        hints: list[NodeHint | None] | None = [None] * len(level) if walks else None
        while level:
            deeper = new_level(self.parts)
            deeper_hints: list[NodeHint | None] | None = [] if walks else None
            first, self.first = len(self.parents), first
            going_on = self._expand_level(level, depth, deeper, start, hints, deeper_hints)
            self.at = -1  # a node expanded outside a level's loop has no index known
            if not going_on:  # (a refusal held back may not be a shortest one: a hot monitor
                break  # at a quiescent node of the level not expanded may be one step shorter)
            # The level is whole: the refusals held back have shortest traces (so the workers,
            # which finish a level, report them too), and the level is complete.
            self._commit_refusals()
            self.expanded = depth
            if not deeper:
                break
            if self._done():
                self.stop = "violation"
                break
            hints = deeper_hints
            level, depth = deeper, depth + 1
        if not self.stop and not self.complete:
            self.stop = self.bound

    @property
    def hinted(self) -> bool:
        """Whether queued nodes carry hints (`SuccessorCache.expand`): not under POR, which
        learns footprints from every walk; in a packed level, only its unpacked nodes."""
        return self.walks and self.por is None

    def _initial_nodes(self) -> list[Node]:
        try:
            states = self.system.init_states()
        except ModelError:
            raise
        except Exception as exc:
            raise ActionRaisedError(f"system {self.system.name!r}: init raised {exc!r}") from exc
        if self.guard is not None:
            self.guard.check_initial(states)
        level: list[Node] = []
        for state in states:
            self.values.add_state(state)
            node = self._canon((state, *(EMPTY_MONITOR for _ in self.monitors)))
            stored = len(self.parents)
            if node not in self.parents:
                self.parents[node] = None  # (a worker's quota may turn it away: not queued)
            if len(self.parents) > stored:
                level.append(node)
                self._check_state(node)
        return level

    def _expand_level(
        self,
        level: Level,
        depth: int,
        deeper: Level,
        start: float,
        hints: list[NodeHint | None] | None = None,
        deeper_hints: list[NodeHint | None] | None = None,
    ) -> bool:
        """Expand `level` into `deeper` (their hints: `hints`, `deeper_hints`); False: stop."""
        for index, node in enumerate(level):
            if self._done():
                self.stop = "violation"
                return False
            self.depth = depth
            self.at = self.first + index
            deeper_hints = expand_hinted(self._expand, node, index, deeper, hints, deeper_hints)
            if index % _MEMORY_EVERY == 0 and (hit := self.bound_hit()):
                self.stop = hit
                return False
            if self.progress is not None and time.perf_counter() - self.last_report > 0.5:
                self._report_progress(start, depth, len(level) - index - 1 + len(deeper))
        return True

    def bound_hit(self) -> str:
        """The bound that stops the search where it is (``max_memory``, ``max_time``), or ""."""
        if self._out_of_memory():
            return "max_memory"
        return "max_time" if time.perf_counter() > self.deadline else ""

    def _out_of_memory(self) -> bool:
        return self.max_memory is not None and resident_memory() > self.max_memory

    def _expand(
        self,
        node: Node,
        deeper: Level,
        hint: NodeHint | None = None,
        deeper_hints: list[NodeHint | None] | None = None,
    ) -> None:
        """Judge `node` where it rests, and queue its new successors in `deeper`. With
        `deeper_hints` (`hinted`), `hint` is `node`'s, and each successor queued puts its own."""
        expansion: Expansion | None = None
        walk, judged = (None, None) if hint is None else hint
        queued = [] if deeper_hints is None else deeper_hints
        parents = self.parents
        # A fingerprint search works a successor's fingerprint out from its parent's where the
        # step wrote, or keeps its leaf's change (`_Leaf.fixed`); POR's ample set is a subset.
        store = None if self.por is not None else getattr(parents, "incremental", None)
        try:
            if deeper_hints is not None or store is not None:
                assert isinstance(self.successors, SuccessorCache)
                expansion = self.successors.expand(node[0], walk)
                steps = expansion.steps
            else:
                steps = self.successors(node[0])
        except ActionFault as fault:
            raise self._fault(node, fault) from fault.cause
        if at_rest(node[0], steps):
            self._check_quiescent(node, deadlock=not steps)
        if self.por is not None:
            assert isinstance(deeper, list)  # (never packed under POR)
            steps = self.por.ample(node, steps, deeper, self.parents, self.results)
        self.transitions += len(steps)
        # Counted in one C-level pass (a step that takes no transition counts under ()).
        _count(self.taken, [step_.taken for step_ in steps])
        raw = store.expanding(node, self.at) if store is not None and steps else 0
        monitors = node[1:]
        canon = self.canonicalizer if self.symmetry else None
        limit = self.max_states
        deepest = self.max_depth is not None and self.depth >= self.max_depth
        unbounded = limit is None and not deepest
        for number, step_ in enumerate(steps):
            nxt: Node
            if not monitors:
                nxt = (step_.state,)
            elif step_.outputs:
                nxt = (step_.state, *self._advance_monitors(node, step_))
            else:
                nxt = (step_.state, *monitors)
            if canon is not None:
                seen_as = nxt
                nxt = canon(nxt)
            if store is not None and (canon is None or nxt is seen_as):
                leaf = expansion.leaves[number]  # type: ignore[union-attr]  # (expanded above)
                store.reached(raw, node, nxt, leaf.writes, leaf if leaf.fixed else None)
            entry = (node, step_.action)
            if unbounded:
                if parents.setdefault(nxt, entry) is not entry:
                    continue  # seen before (one hash of the node, not two)
            elif nxt in parents:
                continue
            elif deepest or (limit is not None and len(parents) >= limit):
                self.complete = False
                if not self.bound:
                    self.bound, self.cut = "max_depth" if deepest else "max_states", self.depth
                continue
            else:
                parents[nxt] = entry
            deeper.append(nxt)
            if deeper_hints is None:
                if self.state_props:
                    self._check_state(nxt)
            elif canon is None or nxt is seen_as:
                assert expansion is not None  # (expanded with hints)
                walked = expansion.hint(number)
                self.predicates.focus(step_.state, walked[2])
                judgements = self._check_state(nxt, judged, walked[1]) if self.state_props else None
                queued.append((walked, judgements))
            else:  # a renamed node's positions moved: it is walked and judged afresh
                queued.append((None, self._check_state(nxt) if self.state_props else None))

    def _done(self) -> bool:
        return self.stop_on_violation and self.violated

    def _report_progress(self, start: float, depth: int, queued: int) -> None:
        assert self.progress is not None
        self.last_report = time.perf_counter()
        self.progress(
            Progress(len(self.parents), self.transitions, depth, queued, self.last_report - start)
        )

    def _canon(self, node: Node) -> Node:
        return self.canonicalizer(node) if self.symmetry else node

    def _advance_monitors(self, node: Node, step_: SystemStep) -> tuple[MonitorState, ...]:
        """The monitor states after `step_`, holding back any refusal (see `_commit_refusals`)."""
        monitors: tuple[MonitorState, ...] = node[1:]
        if not step_.outputs:
            return monitors
        found = self.monitor_steps.known.get((monitors, step_.outputs))  # `remembered`'s own
        if found is None:
            try:
                found = self.monitor_steps.remembered(monitors, step_.outputs)
            except PropertyFault as fault:
                raise self._property_error(fault, node, step_.action) from fault.cause
        after, refusals = found
        for prop, detail in refusals:
            if prop.id not in self.results:
                self.refusals.setdefault(prop.id, (prop, node, step_.action, detail))
        return after

    def _commit_refusals(self) -> None:
        """Report the monitor refusals met while expanding the last depth.

        A refusal found while expanding a node of depth d has a trace of d + 1
        steps, but a hot monitor at a quiescent node of depth d (checked when
        that node is popped, possibly later) has one of d. Holding refusals
        back until every node of depth d is popped keeps each reported trace
        a shortest one.
        """
        for prop, node, action, detail in self.refusals.values():
            self._violate(prop, node, action, detail)
        self.refusals.clear()

    # -- judging ---------------------------------------------------------------

    def _undecided_state_props(self) -> list[Property]:
        return [
            p for p in self.props if p.kind in ("always", "sometimes") and p.id not in self.results
        ]

    def _settle(self, result: PropertyResult) -> None:
        self.results[result.property.id] = result
        self.violated = self.violated or result.verdict == VIOLATED
        self.state_props = self._undecided_state_props()  # to judge in each new state

    def _check_state(
        self, node: Node, before: Judgements | None = None, wrote: int = -1
    ) -> Judgements | None:
        """Judge the undecided state properties at `node`; what decided each predicate.

        `before` is that of the node `node` was reached from, by a step that wrote the
        positions `wrote`: a judgement decided elsewhere stands (`Judgement`), unless it
        is not known on the whole orbit and symmetry is on (the guard checks each state).
        """
        judged: Judgements = {}  # the judgements a successor may take: none judged plainly
        unguarded = self.guard is None
        for prop in self.state_props:
            assert prop.predicate is not None
            if prop.id in self.results:  # settled earlier in this loop
                continue
            always, when, predicate = prop.kind == "always", prop.when, prop.predicate
            if always and when is not None:
                found = None if before is None else before.get(when)
                if found is None or found[2] & wrote or not (found[1] or unguarded):
                    found = self._judge(prop, "its condition", when, node)
                if found[1] or (unguarded and found[2] != -1):
                    judged[when] = found
                if not found[0]:
                    continue
                self.when_seen.add(prop.id)
            found = None if before is None else before.get(predicate)
            if found is None or found[2] & wrote or not (found[1] or unguarded):
                found = self._judge(prop, "its predicate", predicate, node)
            if found[1] or (unguarded and found[2] != -1):
                judged[predicate] = found
            if always and not found[0]:
                self._violate(prop, node, None, INVARIANT_FALSE)
            elif not always and found[0]:
                trace = self._trace(node, None, prop, "witness", REACHED)
                self._settle(PropertyResult(prop, HOLDS, trace, REACHED))
        return judged or None

    def _judge(self, prop: Property, part: str, predicate: Predicate, node: Node) -> Judgement:
        """`predicate` at `node`, checked on every renaming of it when symmetry is on.

        The predicate memo knows the renamings of most states' values already
        (`statecore.check.predicates`); the others are checked here.
        """
        try:
            judgement = self.predicates.judge(predicate, node[0])
            if not judgement[1] and self.guard is not None:
                self._check_orbit(f"{part} of property {prop.id!r}", predicate, node, judgement[0])
        except Asymmetry:
            raise
        except Exception as exc:
            raise self._property_error(PropertyFault(prop, part, exc), node, None) from exc
        return judgement

    def _check_orbit(self, what: str, predicate: Predicate, node: Node, value: bool) -> None:
        """Check that `predicate` is `value` on every renaming of `node` (symmetry's guard)."""
        assert self.guard is not None
        if self.predicates.is_plain(predicate):  # it reads a view: rename what it reads
            self.guard.check_value(what, predicate, value, self.guard.state_views(node))
        else:
            images = self.guard.state_images(node)
            self.guard.check_value(what, self.predicates.on_image(predicate), value, images)

    def _check_quiescent(self, node: Node, deadlock: bool) -> None:
        self.quiescent_seen = True
        where = rest_place(deadlock)
        for prop in self.props:
            if prop.id in self.results:
                continue
            if prop.kind == "eventually":
                assert prop.predicate is not None
                if not self._judge(prop, "its predicate", prop.predicate, node)[0]:
                    self._violate(prop, node, None, eventually_false(where))
            elif prop.kind == "monitor":
                index = 1 + self.monitors.index(prop)
                pending = pending_hot(prop, node[index])
                if self.guard is not None:
                    self.guard.check_value(
                        f"monitor {prop.id!r}",
                        lambda image, p=prop, i=index: pending_hot(p, image[i]),  # type: ignore[misc]
                        pending,
                        self.guard.images(node),
                    )
                if pending:
                    self._violate(prop, node, None, hot_monitor(prop, node[index], where))

    def _violate(self, prop: Property, node: Node, action: ActionLabel | None, detail: str) -> None:
        if prop.id in self.results:
            return
        trace = self._trace(node, action, prop, VIOLATED, detail)
        self._settle(PropertyResult(prop, VIOLATED, trace, detail))

    # -- a model that misbehaves ------------------------------------------------

    def _fault(self, node: Node, fault: ActionFault) -> ModelError:
        """The `ModelError` for an action that raised or is not deterministic at `node`."""
        return action_error(self.system, fault, self._path(node))

    def _property_error(
        self, fault: PropertyFault, node: Node, last: ActionLabel | None
    ) -> ModelError:
        what = f"{fault.part} of property {fault.prop.id!r}"
        return property_error(self.system, what, fault.cause, last, self._path(node))

    def _path(self, node: Node) -> Trace:
        """The trace to `node`, for an error message: no property is judged."""
        return self._trace(node, None, None, "", "")

    def _trace(
        self,
        node: Node,
        last: ActionLabel | None,
        prop: Property | None,
        verdict: str,
        detail: str,
    ) -> Trace:
        """The concrete path to `node` (then `last`), with what it shows (`rebuild`)."""
        parents = self.parents
        if isinstance(parents, FingerprintStore):
            parents = parents.path_to(node)
        steps = rebuild(
            self.system, parents, node, last, self._canon, self.group, self.monitor_steps.step
        )
        if prop is None:
            return Trace(self.system.name, tuple(steps), "", verdict, detail)
        if prop.kind == "monitor" and verdict == VIOLATED and self.symmetry:
            # The detail was worded on a renamed state; word it on the real path.
            detail = judge_path(self.system, prop, steps)[1] or detail
        return Trace(self.system.name, tuple(steps), prop.id, verdict, detail)

    # -- the report ------------------------------------------------------------

    def _report(self, complete: bool, seconds: float) -> Report:
        results = tuple(self._verdict(prop, complete) for prop in self.props)
        stop = "" if complete else self.stop
        depth = _results.complete_to(self.expanded, self.cut)
        bound = _results.bound_notes(stop, depth, self.por is not None)
        return Report(
            self.system,
            results,
            len(self.parents),
            self.transitions,
            self.depth,
            seconds,
            complete,
            self.symmetry,
            self._coverage(),
            stop,
            notes=(*store_notes(self.parents), *bound),
            complete_depth=depth,
        )

    def _verdict(self, prop: Property, complete: bool) -> PropertyResult:
        """The verdict on `prop` once the search is over (or stopped)."""
        seen = (prop.id in self.when_seen, self.quiescent_seen)
        return _results.final_verdict(prop, self.results.get(prop.id), complete, self.stop, *seen)

    def _coverage(self) -> tuple[Coverage, ...]:
        return _results.coverage_of(self.system, self.taken)
