"""Memoised successors: each action attempt as a decision tree over what it reads.

An action is a deterministic function of the slots and globals it reads
through its `Tx`, so what one attempt (an action with fixed arguments) does
is decided by the values of the locations it read, in the order it read them.
`SuccessorCache` keeps one tree per attempt: an inner node names the location
read next and branches on its value; a leaf is the outcome (disabled, or the
values written with the outputs and transitions). Expanding a state walks
each tree; only a path never seen before runs the action, recording its reads.

Most attempts are disabled after one or two reads, so most of the explorer's
successor work becomes a few dictionary lookups, and the states it builds
share their slot and global objects.

A state and the one it was reached from differ only where the step wrote, so
`SuccessorCache.expand` takes where each attempt's walk ended in the parent
(its leaf, with the positions its path read) and walks again only the attempts
that read a position the step wrote; the others end where they ended.

A tree branches on a value's id (`ValueIds`), a small int that equal values
share, not on the value: a slot or a record is a tuple, and Python hashes a
tuple anew each time it is looked up, all the way down. A state's ids are
worked out once, each where a walk first reads it, and a successor takes its
parent's: only the positions the step wrote get new ones, which the leaf
knows (it wrote the same objects every time), but for a FIFO edited in place.

Values are told apart by their type and equality (`typed`): ``1`` and
``True`` are equal, but an action may tell them apart. Inside a container
they are told apart by equality alone (``frozenset({1})`` is
``frozenset({True})``), as the explorer's visited set tells states apart.
An action that looks at the whole state (`Tx.before`, or `Tx.result()`
inside the action) reads everything: such a run is used but not cached.

The cache is only as good as that premise, so it is checked where it costs
least: each attempt the cache learns from is run twice, and two runs that
differ (an action reading a clock, `random` or a counter of its own) stop the
search with `ActionFault`. So does an action that raises. A `verify` hook
(the symmetry guard) sees every real run too, and may give back runs it made of
other attempts: the guard runs each renamed image of a run to check it, and an
image that does exactly what the renamed run predicts is learned with it (its
states are met on other representatives of the orbit, and not run again there).
Such an image is run twice, as a run learned here is, and must also equal the
renamed run. One that disagrees with its tree is left for the search to learn,
and judge, when it meets it.
"""

from __future__ import annotations

from collections.abc import Callable, Hashable, Sequence
from typing import Any, NamedTuple

from ..system import System
from ..system_parts import ActionLabel, Emitted, Slot, SystemState, SystemStep, TakenTransition
from ..transaction import Disabled, Edited, Front, Tx
from .values import ValueRegistry

# Slot i is location i; global j is location ~j (negative).
Location = int

_new = tuple.__new__  # builds a named tuple without its Python-level __new__


class Run(NamedTuple):
    """What one run of an attempt did: everything the cache and its checks compare.

    `outcome` is None for a disabled attempt, else the slots and globals
    written (by index), the outputs and the machine transitions taken.
    """

    reads: tuple[tuple[Location, Any], ...]
    outcome: (
        tuple[
            tuple[tuple[int, Slot], ...],
            tuple[tuple[int, Hashable], ...],
            tuple[Emitted, ...],
            tuple[TakenTransition, ...],
        ]
        | None
    )
    whole: bool  # the run looked at the whole state: it cannot be cached


class ActionFault(Exception):
    """An attempt raised, or two runs of it on one state differed.

    The explorer turns it into a `statecore.errors.ModelError` with the trace
    that reached `state`.
    """

    def __init__(
        self, label: ActionLabel, state: SystemState, problem: str, cause: BaseException | None
    ) -> None:
        super().__init__(f"{label}: {problem}")
        self.label = label
        self.state = state
        self.problem = problem
        self.cause = cause


def run_attempt(system: System, index: int, state: SystemState) -> Run:
    """Run attempt `index` of `system` once on `state`; raise `ActionFault` if it raises.

    What the run did is read from the transaction's `Tx.record` (a
    `statecore.transaction.TxRecord`), its one interface for this.
    """
    action, args, kwargs = system.attempts[index]
    tx: Tx[Any] = Tx(system, state)
    try:
        action.run(tx, **kwargs)
    except Disabled:
        record = tx.record()
        return _new(Run, (record[0], None, record[5]))
    except Exception as exc:
        label = ActionLabel(action.name, args)
        raise ActionFault(label, state, f"raised {exc!r}", exc) from exc
    reads, slot_writes, value_writes, outputs, taken, whole = tx.record()
    return _new(Run, (reads, (slot_writes, value_writes, outputs, taken), whole))


# Called with (attempt index, state, run) after every real run of an attempt; gives back the
# runs of other attempts it made that are known to do what the run predicts of them (the
# symmetry guard's renamed images of it), each as (attempt index, run): the cache learns them
# as it learns its own.
Verify = Callable[[int, SystemState, Run], Sequence[tuple[int, Run]]]


class ValueIds:
    """Small ints for the values a tree branches on: two values share an id exactly when
    their `typed` keys are equal, so a probe hashes an int, not a nest of tuples.

    Ids live as long as the ids object; a search keeps one, shared by its successor and
    predicate memos, so a state's ids (`Ids`) serve both. Only what a tree keeps gets an
    id (a branch, a leaf's write): a probe only `find`s one, so a search whose trees are
    full keeps nothing more of the values it reads.
    """

    __slots__ = ("_ids", "find")

    def __init__(self) -> None:
        self._ids: dict[tuple[type, Any], int] = {}
        self.find = self._ids.get
        """``find(typed(value), -1)``: the id of `value`, or -1 if it has none (then no branch
        of any tree is for it). A dictionary's own ``get``: the hot loops call no Python."""

    def __call__(self, value: Any) -> int:
        """The id of `value` (a new one for a value unlike any before)."""
        ids = self._ids
        return ids.setdefault((type(value), value), len(ids))


# A state's value ids by flat position (`ValueIds`); None where none is worked out yet.
Ids = list[int | None]


class _Leaf:
    """What an enabled attempt does: its writes and the step's fixed parts.

    `reads` and `writes` are bit masks of the flat positions (see `_Probe`) the
    run read and wrote; a run that looked at the whole state reads them all (-1).
    `ids` are the ids of what it writes, by position: None until the leaf joins a tree
    (`name_writes`: a leaf run and dropped keeps nothing), and for a FIFO edited in
    place, whose value depends on the state.

    `fixed` says, once the leaf joined a tree, that its path read whole every position
    it writes (a FIFO it edited in place it read at the front only): every state whose
    walk ends here then holds equal values where the step writes, so what the step takes
    out of a state and what it puts in are the same on all of them
    (`statecore.check.fingerprints.Fingerprinter.moved` keeps a fingerprint's change per
    such leaf).
    """

    __slots__ = (
        "actor",
        "fixed",
        "ids",
        "internal",
        "label",
        "outputs",
        "reads",
        "slot_writes",
        "taken",
        "value_writes",
        "writes",
    )

    def __init__(
        self,
        label: ActionLabel,
        actor: str,
        internal: bool,
        slot_writes: tuple[tuple[int, Slot], ...],
        value_writes: tuple[tuple[int, Hashable], ...],
        outputs: tuple[Emitted, ...],
        taken: tuple[TakenTransition, ...],
        reads: int,
        slots: int,
    ) -> None:
        self.label = label
        self.actor = actor
        self.internal = internal
        self.slot_writes = slot_writes
        self.value_writes = value_writes
        self.outputs = outputs
        self.taken = taken
        self.reads = reads
        self.writes = _mask([i for i, _ in slot_writes] + [slots + i for i, _ in value_writes])
        self.ids: tuple[tuple[int, int | None], ...] = tuple(
            (i, None) for i, _ in slot_writes
        ) + tuple((slots + i, None) for i, _ in value_writes)
        self.fixed = False

    def name_writes(self, value_ids: ValueIds, whole: int) -> None:
        """Give `ids` the ids of what the leaf writes, and work out `fixed`: it joined a
        tree by a path that read the positions of the bit mask `whole` whole."""
        written = [slot for _, slot in self.slot_writes] + [v for _, v in self.value_writes]
        self.ids = tuple(
            (position, None if type(value) is Edited else value_ids(value))
            for (position, _), value in zip(self.ids, written)
        )
        self.fixed = not self.writes & ~whole  # (a FIFO edited in place had its front read)

    def step(self, state: SystemState) -> SystemStep:
        """The step this outcome makes from `state`."""
        slots, values = state
        if self.slot_writes:
            new_slots = list(slots)
            for index, slot in self.slot_writes:
                new_slots[index] = slot
            slots = tuple(new_slots)
        if self.value_writes:  # an `Edited` FIFO's front was read: it is a tuple, long enough
            new_values = list(values)
            for index, value in self.value_writes:
                new_values[index] = value.onto(values[index]) if type(value) is Edited else value
            values = tuple(new_values)
        state = _new(SystemState, (slots, values))
        return _new(
            SystemStep, (self.label, self.actor, self.internal, state, self.outputs, self.taken)
        )


class _Probe:
    """An inner node: read `location`, then follow the branch of its value's id (`ValueIds`).

    `position` is where the location sits in the flat tuple ``slots + values``
    of a state: one index, worked out once, instead of a test on every read.
    """

    __slots__ = ("branches", "location", "position")
    reads = -1  # as a root: always walked (`SuccessorCache.expand`)

    def __init__(self, location: Location, slots: int) -> None:
        self.location = location
        self.position = _position(location, slots)
        self.branches: dict[Any, _Node] = {}


class _FrontProbe(_Probe):
    """An inner node that reads only the front of a FIFO (`Tx.popleft`): it branches on
    the `typed` key of its `Front` (equal FIFOs may differ in their first item's type)."""

    __slots__ = ()


class _Off:
    """A disabled attempt's leaf; `reads` as `_Leaf.reads`."""

    __slots__ = ("reads",)

    def __init__(self, reads: int) -> None:
        self.reads = reads

    def __repr__(self) -> str:
        return "disabled"


class _Mark:
    """A sentinel leaf."""

    __slots__ = ("name",)
    reads = -1  # as a root: always walked (`SuccessorCache.expand`)

    def __init__(self, name: str) -> None:
        self.name = name

    def __repr__(self) -> str:
        return self.name


_UNKNOWN = _Mark("unknown")  # a path no run has taken yet

_Node = _Probe | _Leaf | _Off | _Mark
_End = _Leaf | _Off  # where a walk ends


def _position(location: Location, slots: int) -> int:
    """Where `location` sits in the flat tuple ``slots + values`` of a state."""
    return location if location >= 0 else slots + ~location


def _mask(positions: list[int]) -> int:
    """The bit mask of `positions`."""
    mask = 0
    for position in positions:
        mask |= 1 << position
    return mask


# What a state's expansion leaves for its successors' (see `SuccessorCache.expand`):
# where each attempt's walk ended, the positions the step to the successor wrote, and the
# successor's ids (`Expansion.hint`).
Hint = tuple[list[_End], int, Ids]


class Expansion(NamedTuple):
    """A state's expansion: its steps, and what its successors' expansions start from."""

    steps: list[SystemStep]
    ends: list[_End]  # where each attempt's walk ended
    leaves: list[_Leaf]  # the leaf of each step
    ids: Ids  # the state's value ids, as far as they were worked out

    def hint(self, number: int) -> Hint:
        """The hint of the state that ``steps[number]`` reaches: its parent's ids but where
        the step wrote."""
        leaf = self.leaves[number]
        ids = self.ids.copy()
        for position, value_id in leaf.ids:
            ids[position] = value_id
        return self.ends, leaf.writes, ids


class SuccessorCache:
    """`System.successors`, memoised per attempt on the locations it reads.

    The trees stop growing at `max_nodes` nodes; past that, new paths are
    run directly every time.
    """

    def __init__(
        self,
        system: System,
        max_nodes: int = 1 << 21,
        verify: Verify | None = None,
        ids: ValueIds | None = None,
    ) -> None:
        self.system = system
        self.ids = ValueIds() if ids is None else ids
        self._attempts = system.attempts
        self._labels = system.labels()
        self._roots: list[_Node] = [_UNKNOWN] * len(self._attempts)
        self._slots = len(system.slot_keys())
        self._width = self._slots + len(system.globals)  # of a state's flat tuple
        self._room = max_nodes
        self._keys: dict[Any, Any] = {}  # the trees' branch keys (`add_path`)
        self._verify = verify
        self.runs = 0  # real runs of an attempt (each learned path is run twice)
        self.values = ValueRegistry()  # what learned runs wrote: equal values must be alike

    def __call__(self, state: SystemState) -> list[SystemStep]:
        """Every enabled action in `state` with the step it makes, as `System.successors`."""
        return self.expand(state, None).steps

    def expand(self, state: SystemState, hint: Hint | None) -> Expansion:
        """`self(state)`, with where each attempt's walk ended and each step's leaf.

        `hint` is `Expansion.hint` of the state `state` was reached from: an
        attempt whose walk there read no position the step wrote ends where it
        ended there, without a walk (the values it reads are the same).
        """
        flat = None
        steps: list[SystemStep] = []
        ends: list[_End] = []
        leaves: list[_Leaf] = []
        probe, front, leaf, unknown, front_of = _Probe, _FrontProbe, _Leaf, _UNKNOWN, Front.of
        before: Sequence[_Node]
        ids: Ids
        if hint is None:
            before, wrote, ids = self._roots, -1, [None] * self._width
        else:
            before, wrote, ids = hint
        find = self.ids.find
        # Without a hint, each attempt's walk starts at its root: every inner node and unknown
        # root reads -1, and a root that is an end (its attempt read nothing) reads 0.
        for index, node in enumerate(before):
            if node.reads & wrote:
                node = self._roots[index]
                if flat is None:
                    flat = state[0] + state[1]
                while True:
                    while type(node) is probe:
                        key = ids[node.position]
                        if key is None:  # worked out once, unless unknown (then learned next)
                            read = flat[node.position]
                            key = find((type(read), read), -1)
                            if key >= 0:
                                ids[node.position] = key
                        node = node.branches.get(key, unknown)
                    if type(node) is not front:
                        break
                    read = front_of(flat[node.position])
                    node = node.branches.get((type(read.item), read), unknown)
                if node is unknown:
                    node = self._learn(index, state)
            ends.append(node)  # type: ignore[arg-type]
            if type(node) is leaf:
                steps.append(node.step(state))
                leaves.append(node)
        return _new(Expansion, (steps, ends, leaves, ids))

    def _learn(self, index: int, state: SystemState) -> _End:
        """Run attempt `index` on `state` (twice: it must be deterministic) and remember it,
        with the runs `verify` gives back (its images under symmetry, met on other states)."""
        run = run_attempt(self.system, index, state)
        again = run_attempt(self.system, index, state)
        self.runs += 2
        if again != run:
            raise ActionFault(
                self._labels[index],
                state,
                "is not deterministic: two runs on the same state differ "
                f"({_difference(run, again)}); an action must be a function of what it "
                "reads through its Tx (no clock, random or state kept outside the model)",
                None,
            )
        images = () if self._verify is None else self._verify(index, state, run)
        leaf = self._leaf(index, run)
        if not self._grow(index, run, leaf):
            raise ActionFault(
                self._labels[index],
                state,
                "is not deterministic: after reading the same values it read another "
                "location than on an earlier state",
                None,
            )
        for other, image in images:  # one that disagrees with the tree is learned when met
            self._grow(other, image, self._leaf(other, image))
        return leaf

    def _leaf(self, index: int, run: Run) -> _End:
        """The leaf of attempt `index`'s `run`; what it wrote is registered first (before any
        state holds it)."""
        self.values.add_run(run.reads, run.outcome)
        reads = -1 if run.whole else _mask([_position(i, self._slots) for i, _ in run.reads])
        if run.outcome is None:
            return _Off(reads)
        action = self._attempts[index][0]
        return _Leaf(
            self._labels[index], action.actor, action.internal, *run.outcome, reads, self._slots
        )

    def _grow(self, index: int, run: Run, leaf: _End) -> bool:
        """Add `run`'s path to `leaf` to attempt `index`'s tree, while there is room (a run
        that read the whole state has no path); False if it disagrees with the tree."""
        if run.whole or self._room <= 0:
            return True
        grown = add_path(self._roots[index], run.reads, leaf, self._slots, self._keys, self.ids)
        if grown is None:
            return False
        self._roots[index], added = grown
        self._room -= added
        if type(leaf) is _Leaf:
            slots = self._slots
            whole = [_position(i, slots) for i, value in run.reads if type(value) is not Front]
            leaf.name_writes(self.ids, _mask(whole))
        return True


def typed(value: Any) -> tuple[type, Any]:
    """The key of a value read in a tree: its type with it (``1`` and ``True`` are equal,
    but an action or predicate may tell them apart); a `Front` by its item's type."""
    return (type(value.item) if type(value) is Front else type(value)), value


def add_path(
    root: _Node,
    reads: tuple[tuple[Location, Any], ...],
    leaf: _Node,
    slots: int,
    keys: dict[Any, Any],
    ids: ValueIds,
) -> tuple[_Node, int] | None:
    """`root` with the path `reads` -> `leaf` added, and how many nodes that took.

    None if the path disagrees with the tree (another location read after the
    same values): what made it is not a function of what it reads. A branch's
    key is the value's id in `ids` (a `Front`'s: its `typed` key), one of
    `keys`, the tree's keys by equality: a branch is only ever looked up, so
    one object serves every branch on an equal key (they recur across a tree's
    nodes, and hold most of its memory otherwise).
    """
    added = 0
    parent: dict[Any, _Node] | None = None
    key: Any = None
    node = root
    for location, value in reads:
        kind = _FrontProbe if type(value) is Front else _Probe
        if node is _UNKNOWN:
            node = kind(location, slots)
            added += 1
            if parent is None:
                root = node
            else:
                parent[key] = node
        if type(node) is not kind or node.location != location:
            return None
        parent, key = node.branches, typed(value) if kind is _FrontProbe else ids(value)
        key = keys.setdefault(key, key)
        node = parent.get(key, _UNKNOWN)
    if node is _UNKNOWN:
        added += 1
        if parent is None:
            root = leaf
        else:
            parent[key] = leaf
    return root, added


def _difference(first: Run, second: Run) -> str:
    """Which part of two runs of one attempt differs, in words."""
    if first.reads != second.reads:
        return "they read different locations or values"
    if (first.outcome is None) != (second.outcome is None):
        return "one was enabled and the other disabled"
    assert first.outcome is not None and second.outcome is not None
    parts = ("slots written", "globals written", "outputs", "transitions taken")
    for part, a, b in zip(parts, first.outcome, second.outcome):
        if a != b:
            return f"the {part} differ: {a!r} then {b!r}"
    return "they looked at the whole state differently"
