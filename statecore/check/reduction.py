"""Partial-order reduction: from a state, take only an *ample* subset of the enabled actions.

Interleavings of actions that touch disjoint parts of the state (two ids'
scheduler steps, a consumer read against an unrelated save) all reach the
same states; exploring one order is enough when the others cannot show
anything a property looks at. The search stays breadth-first; `Reducer.ample`
picks, per state, a subset T of the enabled actions that satisfies

* C0: T is empty only if nothing is enabled;
* C1 (persistence): on every path from the state that takes no action of T,
  each action is independent of T. T is built as a *stubborn set* closed
  under: an enabled member adds every attempt that may write what it reads
  or writes, or read what it writes; a disabled member adds every attempt
  that may write what it read on the way to being disabled (so it stays
  disabled until a member of T runs);
* C2 (invisibility): when T is not everything enabled, no action of T
  writes a location an undecided ``always``/``sometimes`` property reads
  or emits an output a monitor routes, and none changes what is judged at
  rest: each is internal and changes something (so a state it is enabled
  in is never at rest), or writes nothing an undecided ``eventually``
  reads and nothing an internal action may read or write (so it cannot
  make or unmake a quiescent state, or change what is judged there);
* C3 (cycle proviso, for breadth-first search): every successor T leads to
  is new, or already queued on the next depth; otherwise the state is
  fully expanded. Along a chain of reduced states the depth grows, so no
  action is ignored forever.

What an action may read and write is not known before the search: Python
actions only tell through their `Tx` log. `Footprints` gathers every
attempt's reads and writes from every real run (the successor memo's
``verify`` hook), and each property's reads by judging it on a `StateView`
that logs them. One search uses the footprints known when it started; if a
run shows an attempt or a property touching a location outside them, the
search finishes its depth with every state fully expanded and starts again
with what it learned (`FootprintsGrew`). A complete search therefore ran on
footprints that cover everything it saw, and then (by induction on the
paths of the full state graph, using that each action is a function of what
it reads) they cover every reachable state too: every verdict of the full
search is kept, and so is the set of transitions taken.

A reduced counterexample is a real path but may be longer than the
shortest: `search` re-runs the unreduced search for each violated property,
which stops at the violation's depth, so reported counterexamples stay
shortest ones. A ``sometimes`` witness is kept as the reduced search found
it. Symmetry reduction is not combined with this one (the search runs
without it, and says so).
"""

from __future__ import annotations

from collections.abc import Callable, Container, Iterator, Mapping, Sequence
from dataclasses import replace
from typing import Any

from ..properties import Property
from ..system import Emitted, System, SystemState, SystemStep
from ..traces.judge import VIOLATED, at_rest
from ..transaction import Front
from .reads import logged_view
from .results import Limits, Report
from .stepcache import Run, SuccessorCache, Verify, run_attempt, typed
from .symmetry import Canonicalizer

__all__ = ["Footprints", "FootprintsGrew", "Reducer", "search"]

Node = tuple[Any, ...]  # as `statecore.check.counterexample.Node`


class FootprintsGrew(Exception):
    """A search met a read or write outside the footprints it started with: run it again."""


class _Probe:
    """A node of a read path: read `location` next (its `Front` only, if `front`),
    then follow its value's branch."""

    __slots__ = ("branches", "front", "location")

    def __init__(self, location: int, front: bool) -> None:
        self.location = location
        self.front = front
        self.branches: dict[Any, _Probe | tuple[int, int]] = {}


class Footprints:
    """What each attempt and property was seen to read and write, kept across searches.

    Index i below ``len(system.attempts)`` is attempt i; the indices after
    them are the properties, in order (reads only). Locations are bits of an int:
    slot i is bit i, global j is bit ``slots + j``. Per index, a tree of read
    paths (location by location, branching on the value read, as
    `statecore.check.stepcache` does) ends in the reads and writes of that
    path, so a state's footprint of an index is a few dictionary lookups.
    """

    def __init__(self, system: System, props: Sequence[Property]) -> None:
        self.system = system
        self.props = tuple(props)
        self.slots = len(system.slot_keys())
        self.attempts = len(system.attempts)
        self.everything = (1 << (self.slots + len(system.globals))) - 1
        size = self.attempts + len(self.props)
        self.reads = [0] * size
        self.writes = [0] * size
        self.roots: list[_Probe | tuple[int, int] | None] = [None] * size
        self.restarts = 0
        # The successor memo, kept across searches (it is a cache of a pure
        # function): a search started again runs no action it ran before.
        self.observer: Verify | None = None
        self.successors = SuccessorCache(system, verify=self._observe)

    def _observe(self, index: int, state: SystemState, run: Run) -> Sequence[tuple[int, Run]]:
        return () if self.observer is None else self.observer(index, state, run)

    def bit(self, location: int) -> int:
        """The bit of a `Tx` location (slot i is i, global j is ~j)."""
        return 1 << (location if location >= 0 else self.slots + ~location)

    def learn(self, index: int, path: Sequence[tuple[int, Any]], writes: int, whole: bool) -> None:
        """Remember that `index`, reading `path` (location, value), wrote `writes`."""
        reads = 0
        for location, _ in path:
            reads |= self.bit(location)
        if whole:
            reads = writes = self.everything
        self.reads[index] |= reads
        self.writes[index] |= writes
        node = self.roots[index]
        if whole or type(node) is tuple:  # a whole look, or no read: one leaf for every state
            self.roots[index] = (self.everything, self.everything) if whole else node
            return
        parent: dict[Any, Any] | None = None
        key: Any = None
        for location, value in path:
            front = type(value) is Front
            if node is None:
                node = _Probe(location, front)
                if parent is None:
                    self.roots[index] = node
                else:
                    parent[key] = node
            if type(node) is not _Probe or node.location != location or node.front != front:
                # Another location after the same values: not a function of its
                # reads (the successor memo says so for an action). Everything.
                self.roots[index] = (self.everything, self.everything)
                self.reads[index] = self.writes[index] = self.everything
                return
            parent, key = node.branches, typed(value)
            node = parent.get(key)
        if node is None:
            leaf = (reads, writes)
            if parent is None:
                self.roots[index] = leaf
            else:
                parent[key] = leaf

    def at(self, index: int, state: SystemState) -> tuple[int, int] | None:
        """The reads and writes of `index` on `state`, or None if its path is new."""
        node = self.roots[index]
        slots, values = state
        while type(node) is _Probe:
            location = node.location
            value = slots[location] if location >= 0 else values[~location]
            node = node.branches.get(typed(Front.of(value) if node.front else value))
        return node  # type: ignore[return-value]


class Reducer:
    """The ample set of each state of one search; see the module docstring."""

    def __init__(self, system: System, known: Footprints) -> None:
        self.system = system
        self.known = known
        self.results: Container[str] = ()
        self.grown = False
        # This search's footprints: fixed, so a decision never rests on less.
        self.reads = list(known.reads)
        self.writes = list(known.writes)
        n = known.attempts
        self.n = n
        self.index = {label: i for i, label in enumerate(system.labels())}
        self.internal = [action.internal for action, _, _ in system.attempts]
        width = known.everything.bit_length()
        self.writers = [0] * width  # per location bit: the attempts that may write it
        self.readers = [0] * width
        self.inner = 0  # every location an internal attempt may read or write
        for i in range(n):
            for b in _bits(self.writes[i]):
                self.writers[b] |= 1 << i
            for b in _bits(self.reads[i]):
                self.readers[b] |= 1 << i
            if self.internal[i]:
                self.inner |= self.reads[i] | self.writes[i]
        self.state_props = [(n + k, p) for k, p in enumerate(known.props) if p.kind != "monitor"]
        self.monitors = [p for p in known.props if p.kind == "monitor"]
        self.watched: dict[tuple[Emitted, ...], bool] = {}
        self.conflicts: dict[tuple[int, int], int] = {}
        self.settled = -1
        self.visible = known.everything  # what undecided always/sometimes read
        self.resting = known.everything  # what undecided eventually read
        self.level: list[Node] | None = None
        self.queued = 0
        self.next_level: set[Node] = set()
        self.full = 0  # states expanded fully while some action was enabled
        self.reduced = 0  # states expanded with a proper ample set

    # -- learning ----------------------------------------------------------------

    def observe(self, index: int, state: SystemState, run: Run) -> Sequence[tuple[int, Run]]:
        """The successor memo's ``verify`` hook: learn from every real run of an attempt (it
        makes no run of its own for the memo to learn)."""
        writes = 0
        if run.outcome is not None:
            slot_writes, value_writes = run.outcome[0], run.outcome[1]
            for i, _ in slot_writes:
                writes |= self.known.bit(i)
            for j, _ in value_writes:
                writes |= self.known.bit(~j)
        self.known.learn(index, run.reads, writes, run.whole)
        self._check_growth(index)
        return ()

    def successors(self, verify: Verify | None) -> SuccessorCache:
        """The successor memo of this search, learning through `observe` (after `verify`)."""
        assert verify is None, "partial-order reduction runs without the symmetry guard"
        self.known.observer = self.observe
        return self.known.successors

    def _check_growth(self, index: int) -> None:
        known = self.known
        if known.reads[index] & ~self.reads[index] or known.writes[index] & ~self.writes[index]:
            self.grown = True

    def _footprint(self, index: int, state: SystemState) -> tuple[int, int]:
        found = self.known.at(index, state)
        if found is None:  # not met by the successor memo in this search: run it
            self.observe(index, state, run_attempt(self.system, index, state))
            found = self.known.at(index, state)
            assert found is not None
        return found

    def _judge_reads(self, state: SystemState, rest: bool) -> None:
        """Learn what each undecided property reads on `state` (``eventually``: at rest only)."""
        results = self.results
        for index, prop in self.state_props:
            if prop.id in results or (prop.kind == "eventually" and not rest):
                continue
            if self.known.at(index, state) is None:
                self.known.learn(index, *_property_reads(self.system, prop, state))
                self._check_growth(index)

    def confirm(self, complete: bool) -> None:
        """At the end of a search: a complete one must have kept to its footprints."""
        if complete and self.grown:
            raise FootprintsGrew()

    # -- the ample set -------------------------------------------------------------

    def ample(
        self,
        node: Node,
        steps: list[SystemStep],
        deeper: list[Node],
        seen: Container[Node],
        results: Mapping[str, object],
    ) -> list[SystemStep]:
        """The steps of an ample set of `node` (all of `steps` where none is sound).

        `deeper` is the next depth's queue so far and `seen` the visited
        nodes: together they give the cycle proviso. `results` holds the
        properties decided so far, which no longer make an action visible.
        """
        self.results = results
        if deeper is not self.level:
            if self.grown and self.level is not None:
                raise FootprintsGrew()  # the last depth was fully expanded, learning
            self.level, self.queued = deeper, 0
            self.next_level = set()
        state = node[0]
        self._judge_reads(state, at_rest(state, steps))
        if self.grown or len(steps) < 2:
            return steps
        if len(results) != self.settled:
            self.settled = len(results)
            self.visible = self.resting = 0
            for index, prop in self.state_props:
                if prop.id in results:
                    continue
                if prop.kind == "eventually":
                    self.resting |= self.reads[index]
                else:
                    self.visible |= self.reads[index]
        enabled = 0
        bad = 0
        by_index: dict[int, SystemStep] = {}
        for step_ in steps:
            i = self.index[step_.action]
            by_index[i] = step_
            enabled |= 1 << i
            if not self._invisible(i, state, step_):
                bad |= 1 << i
        candidates: list[int] = []
        for seed in _bits(enabled & ~bad):
            stubborn = self._stubborn(seed, state, enabled, bad)
            if stubborn is not None and stubborn & enabled != enabled:
                candidates.append(stubborn & enabled)
        for chosen in sorted(candidates, key=int.bit_count):
            ample = [by_index[i] for i in _bits(chosen)]
            if self._proviso(node, ample, deeper, seen):
                self.reduced += 1
                return ample
        self.full += 1
        return steps

    def _invisible(self, i: int, state: SystemState, step_: SystemStep) -> bool:
        """C2 for enabled attempt `i`: no property can see it, and rest is unchanged.

        An internal step that changes something keeps every state it stays
        enabled in (C1) away from rest, where ``eventually`` is judged: only
        ``always``, ``sometimes`` and monitors can see it. Any other step must
        also leave what ``eventually`` reads, and what internal steps read and
        write, alone.
        """
        writes = self._footprint(i, state)[1]
        if writes & self.visible:
            return False
        if self.monitors and step_.outputs and self._watched(step_.outputs):
            return False
        if self.internal[i] and (step_.outputs or step_.state != state):
            return True
        return not writes & (self.inner | self.resting)

    def _watched(self, outputs: tuple[Emitted, ...]) -> bool:
        found = self.watched.get(outputs)
        if found is None:
            found = self.watched[outputs] = any(
                _routes(prop, emitted) for prop in self.monitors for emitted in outputs
            )
        return found

    def _stubborn(self, seed: int, state: SystemState, enabled: int, bad: int) -> int | None:
        """The stubborn set grown from `seed` (C1), or None if it takes in a visible step."""
        members = 1 << seed
        work = [seed]
        while work:
            c = work.pop()
            reads, writes = self._footprint(c, state)
            if enabled >> c & 1:
                added = self._conflicts(reads | writes, writes)
            else:
                added = self._conflicts(reads, 0)
            added &= ~members
            if added:
                if added & bad:
                    return None
                members |= added
                work.extend(_bits(added))
        return members

    def _conflicts(self, touched: int, written: int) -> int:
        """The attempts that may write a location of `touched` or read one of `written`."""
        key = (touched, written)
        found = self.conflicts.get(key)
        if found is None:
            found = 0
            for b in _bits(touched):
                found |= self.writers[b]
            for b in _bits(written):
                found |= self.readers[b]
            self.conflicts[key] = found
        return found

    def _proviso(
        self, node: Node, ample: list[SystemStep], deeper: list[Node], seen: Container[Node]
    ) -> bool:
        """C3: every ample successor is new, or queued on the next depth already."""
        monitors = node[1:]
        for step_ in ample:
            nxt = (step_.state, *monitors)  # an invisible step leaves the monitors
            if nxt in seen:
                if self.queued < len(deeper):
                    self.next_level.update(deeper[self.queued :])
                    self.queued = len(deeper)
                if nxt not in self.next_level:
                    return False
        return True


def _bits(mask: int) -> Iterator[int]:
    """The positions of the set bits of `mask`, lowest first."""
    while mask:
        low = mask & -mask
        yield low.bit_length() - 1
        mask ^= low


def _routes(prop: Property, emitted: Emitted) -> bool:
    assert prop.route is not None
    try:
        return prop.route(emitted) is not None
    except Exception:  # the explorer reports the router; here it is simply watched
        return True


# -- what a property reads ---------------------------------------------------------


def _property_reads(
    system: System, prop: Property, state: SystemState
) -> tuple[list[tuple[int, Any]], int, bool]:
    """What judging `prop` on `state` reads, in order, as ``(path, writes, whole)``.

    The property is judged as the explorer does (``when`` first). One that
    cannot be judged on the logging view is taken to read everything.
    """
    log: dict[int, Any] = {}
    view = logged_view(system, state, log)
    assert prop.predicate is not None
    try:
        if prop.when is None or prop.when(view):
            prop.predicate(view)
    except Exception:
        return [], 0, True
    return list(log.items()), 0, False


# -- the search -------------------------------------------------------------------


def search(
    system: System,
    properties: Sequence[Property] | None,
    symmetry: bool,
    limits: Limits,
    explorer: Callable[..., Any],
    explore: Callable[..., Report],
) -> Report:
    """`explore` with partial-order reduction: reduced searches until one kept to its footprints.

    `explorer(system, properties, symmetry, limits, footprints=...)` is one
    search; `explore` the unreduced search, run again for each
    violated property, stopping at its first violation: its trace (a
    shortest one) replaces the reduced one. A bound may stop it first; the
    report's notes then say the trace may be longer than the shortest. A
    search that stops at its first violation is the unreduced one's once a
    violation is known to exist, so it stops at the same one.
    """
    props = tuple(system.properties if properties is None else properties)
    known = Footprints(system, props)
    while True:
        try:
            report: Report = explorer(system, properties, False, limits, footprints=known).run()
            break
        except FootprintsGrew:
            known.restarts += 1
    notes = [
        f"partial-order reduction on: footprints learned in {known.restarts + 1} "
        f"{'search' if not known.restarts else 'searches'}"
    ]
    if symmetry and Canonicalizer(system).active:
        notes.append("symmetry reduction off: it is not combined with partial-order reduction")
    stop_on_violation, progress = limits.stop_on_violation, limits.progress
    if stop_on_violation and any(r.verdict == VIOLATED for r in report.results):
        # Which violation stops a search first depends on the order it goes in: the
        # unreduced search, which stops no deeper than this one, says which it is.
        again = explore(
            system,
            max_states=limits.max_states,
            max_memory=limits.max_memory,
            max_depth=limits.max_depth,
            max_seconds=limits.max_seconds,
            symmetry=symmetry,
            properties=properties,
            progress=progress,
        )
        if any(r.verdict == VIOLATED for r in again.results):
            stopped = "a violation was found: the report is the unreduced search's, to it"
            return replace(again, notes=(notes[0], stopped, *again.notes))
    results = list(report.results)
    longer: list[str] = []
    for k, result in enumerate(results):
        if result.verdict != VIOLATED:
            continue
        prop = result.property
        shortest = explore(
            system,
            max_states=limits.max_states,
            max_memory=limits.max_memory,
            max_depth=limits.max_depth,
            max_seconds=limits.max_seconds,
            symmetry=symmetry,
            properties=(prop,),
        ).result(prop.id)
        if shortest.verdict == VIOLATED:
            results[k] = shortest
        else:
            longer.append(prop.id)
    if longer:
        notes.append(
            f"the counterexamples of {', '.join(longer)} may be longer than the shortest: "
            "the unreduced search that finds the shortest stopped first"
        )
    return replace(report, results=tuple(results), notes=(*notes, *report.notes))
