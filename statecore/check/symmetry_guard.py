"""Checking, while exploring, that a system really cannot tell its symmetric ids apart.

Symmetry reduction keeps one state per orbit (see `statecore.check.symmetry`). Its
verdicts equal those of the full search exactly when renaming the ids is an
automorphism of everything the verdicts depend on:

1. the initial states are closed under renaming;
2. the attempts (action, arguments) are closed under renaming;
3. each step commutes with renaming: attempt ``π(a)`` on state ``π(s)``
   does what ``a`` does on ``s``, renamed;
4. each property's predicate (and ``when``) has one value on a whole orbit,
   each monitor step commutes with renaming, and a hot monitor state stays hot.

Then by induction every reachable state is a renaming of an explored
representative, and it has the same successors (renamed) and the same
property values. `SymmetryGuard` checks all four where the explorer already
looks, so the checks cost little:

* 1 and 2 once, before the search;
* 3 on every real run of an attempt (`statecore.check.stepcache` runs an attempt
  only on a combination of read values it has not met; a run of ``π(a)`` on
  ``π(s)`` reading the renamed locations with the renamed values and writing
  the renamed results covers every state that agrees on those reads);
* 4 on every representative, for every property still undecided, and on every
  monitor step the explorer computes.

A failed check raises `Asymmetry`; `statecore.check.explore.explore` then explores
again without symmetry and says why in the report's notes. A verdict is never
taken from a reduction that was not shown sound for the states it covered.
"""

from __future__ import annotations

from collections.abc import Callable, Hashable, Sequence
from typing import Any

from ..system import ActionLabel, ModelValue, StateView, System, SystemState
from ..transaction import Front
from .renamed_view import RenamedView
from .stepcache import ActionFault, Run, run_attempt, typed
from .symmetry import Canonicalizer, Renaming, _Plan, rename, rename_state, renamings
from .values import ValueRegistry, alike

_CHECKED_LIMIT = 1 << 20  # checked runs remembered at most (forgetting one costs a check)

# A monitor step as the guard sees it: (monitor states, outputs) -> (after, refused ids).
MonitorStep = Callable[
    [tuple[Hashable, ...], tuple[Hashable, ...]], tuple[tuple[Hashable, ...], tuple[str, ...]]
]


class Asymmetry(Exception):
    """The system tells symmetric ids apart; `reason` says where."""

    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason


class SymmetryGuard:
    """The soundness checks of symmetry reduction; see the module docstring."""

    def __init__(self, system: System, canonicalizer: Canonicalizer) -> None:
        self.system = system
        self.renamings: tuple[Renaming, ...] = tuple(
            r for r in renamings(system) if any(k != v for k, v in r.items())
        )
        self._images = canonicalizer.images
        labels = system.labels()
        index_of = {label: i for i, label in enumerate(labels)}
        # Per renaming: the attempt each attempt becomes, and where each slot moves.
        self._attempt_maps: list[tuple[int, ...]] = []
        for renaming in self.renamings:
            mapped = []
            for label in labels:
                image = rename(label, renaming)
                if image not in index_of:
                    raise Asymmetry(
                        f"action {label.name!r} takes {_ids_in(label)} as an argument but "
                        f"not every id of the same set (no attempt {image})"
                    )
                mapped.append(index_of[image])
            self._attempt_maps.append(tuple(mapped))
        self._slot_maps = [_slot_map(system, r) for r in self.renamings]
        self._plans = [canonicalizer.plan_of(r) for r in self.renamings]
        # Orbits of runs already checked: (attempt, reads) of each run and its images.
        self._checked: set[tuple[Any, ...]] = set()  # `_run_key`s
        # The search's registry of values (`statecore.check.values`): a renamed run's writes
        # are made too, in the states the reduction leaves out.
        self.values: ValueRegistry | None = None
        self._imaged: Any = None  # the node `images` was last asked for, and its images
        self._node_images: list[tuple[Renaming, Any]] = []
        self._state_imaged: Any = None  # the same for `state_images`
        self._state_images: list[tuple[Renaming, Any]] = []
        self._state_viewed: Any = None  # and for `state_views`
        self._state_views: list[tuple[Renaming, StateView[Any]]] = []

    # -- 1: the initial states ------------------------------------------------------

    def check_initial(self, states: Sequence[SystemState]) -> None:
        """Initial states must be closed under renaming."""
        known = set(states)
        for state in states:
            for renaming in self.renamings:
                if rename_state(self.system, state, renaming) not in known:
                    raise Asymmetry(
                        f"the initial state is not symmetric in {_names(renaming)}: "
                        "init treats one id differently from another"
                    )

    # -- 3: steps -----------------------------------------------------------------

    def check_run(self, index: int, state: SystemState, run: Run) -> list[tuple[int, Run]]:
        """Attempt `index`'s `run` on `state`, renamed, must be what its image does.

        A deterministic attempt's reads decide its run, so once a run is
        checked, every run in its orbit (each image attempt with the renamed
        reads) is known to commute with every renaming: such a run is not
        checked again.

        Gives back each image run that is exactly the renamed run, as (attempt, run): a
        real run of the image attempt, run twice alike, doing what the twice-run `run`
        predicts, on a state that agrees with its reads. The successor memo learns them,
        so the states that need them (whichever member of an orbit is its representative)
        are not run again.
        """
        # A deterministic attempt reads the same locations in the same order
        # after the same values: its reads in order name its run. Values are
        # told apart by type too, as the successor memo tells them (1 and True
        # are two runs there, so two here).
        key = _run_key(index, run.reads)
        if key in self._checked:
            return []
        orbit = [key]
        images: list[tuple[int, Run]] = []
        for renaming, attempts, slots, plan in zip(
            self.renamings, self._attempt_maps, self._slot_maps, self._plans
        ):
            other = attempts[index]
            expected = _renamed_run(run, plan, slots)
            if self.values is not None and expected.outcome is not None:
                self.values.add_outcome(expected.outcome)
            if not run.whole:
                # The image agrees with the renamed state where the run read: a run that
                # reads only there does what it does on the whole renamed state.
                patched = _patched(state, expected.reads)
                try:
                    observed = run_attempt(self.system, other, patched)
                except ActionFault:
                    pass
                else:
                    if _same(observed, expected):
                        orbit.append(_run_key(other, observed.reads))
                        images += self._learnable(other, patched, observed, expected)
                        continue
            # The whole renamed state decides (and words what differs).
            image = plan.apply((state,), plan.slots(state.slots))[0]
            try:
                observed = run_attempt(self.system, other, image)
            except ActionFault as fault:
                raise Asymmetry(
                    f"action {fault.label} raised on a renaming of a state where "
                    f"{self._label(index)} did not ({fault.problem})"
                ) from None
            if not _same(observed, expected):
                pair = (str(self._label(other)), str(self._label(index)))
                if _swaps(renaming):  # either one may be met first: name them in one order
                    pair = (min(pair), max(pair))
                raise Asymmetry(
                    f"action {pair[0]} does not do what {pair[1]} "
                    f"does with the ids renamed ({_names(renaming)}): "
                    f"{_what_differs(expected, observed)}"
                )
            orbit.append(_run_key(other, observed.reads))
            images += self._learnable(other, image, observed, expected)
        if len(self._checked) >= _CHECKED_LIMIT:
            self._checked.clear()
        self._checked.update(orbit)
        return images

    def _learnable(
        self, index: int, state: SystemState, observed: Run, expected: Run
    ) -> list[tuple[int, Run]]:
        """`observed`, attempt `index`'s run on `state`, as an image the memo may learn: if it
        is exactly `expected` and a second run does the same (as the memo runs what it learns
        twice, so an action that is not deterministic is caught as often); else none. Asked
        once `_same` holds, which for equal runs is that they are alike."""
        if observed != expected or observed.whole:
            return []
        try:
            again = run_attempt(self.system, index, state)
        except ActionFault:
            return []
        return [(index, observed)] if again == observed else []

    def _label(self, index: int) -> ActionLabel:
        return self.system.labels()[index]

    # -- 4: properties --------------------------------------------------------------

    def images(self, node: Any) -> list[tuple[Renaming, Any]]:
        """Every renaming of explorer node `node` that is not `node` itself.

        Those of the last node asked for are kept: its properties ask one by one.
        """
        if node is not self._imaged:
            self._imaged = node
            self._node_images = [(r, image) for r, image in self._images(node) if image != node]
        return self._node_images

    def state_images(self, node: Any) -> list[tuple[Renaming, Any]]:
        """`images` of `node`'s system state alone (``(state,)``): what a state predicate reads.

        Renaming the monitor states too would cost as much again, for nothing.
        """
        if node is not self._state_imaged:
            self._state_imaged = node
            state = (node[0],)
            self._state_images = [(r, im) for r, im in self._images(state) if im != state]
        return self._state_images

    def state_views(self, node: Any) -> list[tuple[Renaming, StateView[Any]]]:
        """`node`'s system state under every renaming but the identity, as views that
        rename only what is read (`RenamedView`): what a predicate judged plainly reads.

        Unlike `state_images`, an image equal to the state is kept: it gives the state's value.
        """
        if node is not self._state_viewed:
            self._state_viewed = node
            state = node[0]
            self._state_views = [
                (plan.renaming, RenamedView(self.system, state, plan)) for plan in self._plans
            ]
        return self._state_views

    def check_value(
        self,
        what: str,
        judge: Callable[[Any], object],
        value: object,
        images: Sequence[tuple[Renaming, Any]],
    ) -> None:
        """`judge` must give `value` (as a truth value) on every renaming of a node."""
        truth = bool(value)
        for renaming, image in images:
            if bool(judge(image)) != truth:
                raise Asymmetry(
                    f"{what} tells symmetric ids apart: its value in a reachable state "
                    f"changes with {_names(renaming)}"
                )

    def check_path(
        self,
        what: str,
        judge: Callable[[SystemState], tuple[tuple[tuple[int, Any], ...], bool]],
        state: SystemState,
        reads: tuple[tuple[int, Any], ...],
        value: bool,
    ) -> bool:
        """Whether predicate `what` that read `reads` on `state` and gave `value` gives it on
        every renaming of every state that agrees with `reads` (`statecore.check.predicates`).

        `judge` gives the predicate's reads and value on a state. Each renaming of
        `reads` is patched into `state`: judged there, the predicate must read
        only the renamed locations (then the renamed reads alone decide it on
        any state that has them), and give `value`, else it tells the ids apart
        on the renaming of a state that has `reads`, `state` itself. False if
        it read elsewhere: the renamed states decide, one by one.
        """
        for renaming, slots, plan in zip(self.renamings, self._slot_maps, self._plans):
            expected = tuple(
                (_renamed_location(loc, slots), _renamed_read(plan, loc, v)) for loc, v in reads
            )
            try:
                seen, got = judge(_patched(state, expected))
            except Exception:
                return False
            if not {loc for loc, _ in seen} <= {loc for loc, _ in expected}:
                return False
            if got != value:
                raise Asymmetry(
                    f"{what} tells symmetric ids apart: its value in a reachable state "
                    f"changes with {_names(renaming)}"
                )
        return True

    def check_monitor_step(
        self,
        ids: Sequence[str],
        before: tuple[Hashable, ...],
        outputs: tuple[Hashable, ...],
        after: tuple[Hashable, ...],
        refused: tuple[str, ...],
        step: MonitorStep,
    ) -> None:
        """A monitor step on renamed monitor states and outputs gives the renamed result."""
        for renaming in self.renamings:
            got_after, got_refused = step(rename(before, renaming), rename(outputs, renaming))
            expected_after = rename(after, renaming)
            for index, prop_id in enumerate(ids):
                if (prop_id in got_refused) != (prop_id in refused) or (
                    got_after[index] != expected_after[index]
                ):
                    shown = ", ".join(_output_text(e) for e in outputs)
                    if _swaps(renaming):  # either outputs may be met first: name one of them
                        image = ", ".join(_output_text(e) for e in rename(outputs, renaming))
                        shown = min(shown, image)
                    raise Asymmetry(
                        f"monitor {prop_id!r} tells symmetric ids apart: it steps one way on "
                        f"the outputs {shown} and another on the same outputs with "
                        f"{_names(renaming)}"
                    )


def _run_key(index: int, reads: tuple[tuple[int, Any], ...]) -> tuple[Any, ...]:
    """Attempt `index` and its `reads`, each value with its type (`stepcache.typed`), in one
    flat tuple: three items a read name one run, in a third of the memory of a pair each."""
    key: list[Any] = [index]
    for location, value in reads:
        key += (location, *typed(value))
    return tuple(key)


def _slot_map(system: System, renaming: Renaming) -> tuple[int, ...]:
    """Where each slot lands under `renaming`."""
    result = []
    for component, key in system.slot_keys():
        new_key = renaming.get(key, key) if isinstance(key, ModelValue) else key
        result.append(system.slot_index(component, new_key))
    return tuple(result)


def _patched(state: SystemState, reads: tuple[tuple[int, Any], ...]) -> SystemState:
    """`state` with the value of each location of `reads` replaced by the one read there.

    A FIFO whose front was read (`Front`) gets that front before the rest it holds.
    """
    slots, values = list(state.slots), list(state.values)
    for location, value in reads:
        if location >= 0:
            slots[location] = value
        elif type(value) is Front:
            values[~location] = _with_front(values[~location], value)
        else:
            values[~location] = value
    return SystemState(tuple(slots), tuple(values))


def _with_front(old: Any, front: Front) -> Any:
    """A value whose `Front` is `front`: `old` with its first item replaced, or emptied."""
    if front.kind == "other":
        return old  # a run that read this raised: it is never checked
    rest = old[1:] if type(old) is tuple else ()
    return (front.item, *rest) if front.kind == "item" else ()


def _renamed_location(location: int, slots: tuple[int, ...]) -> int:
    return slots[location] if location >= 0 else location


def _renamed_run(run: Run, plan: _Plan, slots: tuple[int, ...]) -> Run:
    """`run` as its image should look: locations moved, values renamed by `plan`."""
    rename_ = plan.renamed
    reads = tuple(
        (_renamed_location(loc, slots), _renamed_read(plan, loc, v)) for loc, v in run.reads
    )
    if run.outcome is None:
        return Run(reads, None, run.whole)
    slot_writes, value_writes, outputs, taken = run.outcome
    return Run(
        reads,
        (
            tuple((slots[i], rename_(v)) for i, v in slot_writes),
            tuple((i, plan.renamed_at(i, v)) for i, v in value_writes),
            rename_(outputs),
            taken,
        ),
        run.whole,
    )


def _renamed_read(plan: _Plan, location: int, value: Any) -> Any:
    """A value read at `location` (slot i is i, global j is ~j), renamed as a state's is."""
    return plan.renamed(value) if location >= 0 else plan.renamed_at(~location, value)


def _same(observed: Run, expected: Run) -> bool:
    """Whether an image's run does what the renamed run predicts: alike, not merely equal
    (an image writing ``(True, w1)`` where the run wrote ``(1, w0)`` tells the ids apart),
    in order or with its order-free parts as sets (`_comparable`)."""
    if observed == expected:
        return alike(observed, expected)
    comparable = _comparable(observed)
    return comparable == _comparable(expected) and alike(comparable, _comparable(expected))


def _comparable(run: Run) -> tuple[object, ...]:
    """A run with its order-free parts as sets: reading in another order is fine.

    The transitions taken are a multiset: they only count toward coverage, per
    machine transition (no id), so an action that fires on each id's machine in
    id order takes the same transitions under a renaming, in another order.
    The outputs keep their order: a monitor reads them in sequence.
    """
    if run.outcome is None:
        return (frozenset(run.reads), None)
    slot_writes, value_writes, outputs, taken = run.outcome
    return (
        frozenset(run.reads),
        frozenset(slot_writes),
        frozenset(value_writes),
        outputs,
        tuple(sorted(taken)),
    )


def _what_differs(expected: Run, observed: Run) -> str:
    if (expected.outcome is None) != (observed.outcome is None):
        enabled = "enabled" if expected.outcome is not None else "disabled"
        return f"one is {enabled} and the other is not"
    if frozenset(expected.reads) != frozenset(observed.reads):
        return "they read different locations"
    assert expected.outcome is not None and observed.outcome is not None
    parts = ("slots written", "globals written", "outputs", "transitions taken")
    for part, a, b in zip(parts, _comparable(expected)[1:], _comparable(observed)[1:]):
        if a != b:
            return f"the {part} differ"
    return "their results differ"


def _names(renaming: Renaming) -> str:
    """A renaming in words, e.g. ``job0 and job1 swapped``."""
    moved = [(k, v) for k, v in renaming.items() if k != v]
    if _swaps(renaming):
        pairs = sorted({tuple(sorted((str(k), str(v)))) for k, v in moved})
        return ", ".join(f"{a} and {b} swapped" for a, b in pairs)
    return "the ids renamed " + ", ".join(f"{k}->{v}" for k, v in moved)


def _swaps(renaming: Renaming) -> bool:
    """Whether `renaming` only swaps ids in pairs, so that it is its own inverse: what it
    tells apart on a state, it tells apart on the state renamed, the other way round.

    The explorer meets whichever member of an orbit has the least hash, which changes with
    the process's string hash; a message about a swap names what it found in one order."""
    return all(renaming.get(v, v) == k for k, v in renaming.items())


def _ids_in(label: ActionLabel) -> str:
    ids = [str(v) for _, v in label.args if isinstance(v, ModelValue)]
    return ", ".join(ids) or "ids"


def _output_text(emitted: Any) -> str:
    source = getattr(emitted, "source", None)
    output = getattr(emitted, "output", emitted)
    return f"{output} from {source!r}" if source is not None else str(output)
