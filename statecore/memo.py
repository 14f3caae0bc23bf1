"""The memo of `step`: each machine's lazily built graph of computed steps.

Because `step` is pure and a finite machine has finitely many snapshots, the
outcome of a fire can be remembered: each snapshot seen becomes a node whose
edges map an event (and its payload, with the values' types, so 1 and True
differ) to the outcome and the next node. `remembered_step` is `step` served
from that graph; the runtime's `Instance` walks it directly, and a system's
`Tx.fire` calls `remembered_step`.

Only declared values are remembered: events with an unbounded field (a float,
say), payloads outside the domains and events or machines declared
``pure=False`` are computed on every fire. So are payloads holding a value
whose equal values of one type can still differ (``0.0`` and ``-0.0``,
``Decimal("1.0")`` and ``Decimal("1.00")``, ``(1,)`` and ``(True,)``): an edge
key tells values apart by type only, so one remembered step would answer the
other. A machine's memo holds at most
`CACHE_LIMIT` entries, snapshots and steps together; past that, new steps are
computed and not kept, so memory stays bounded whatever the payloads.

The memo belongs to this module, not to the `Machine`: a machine is an
immutable definition, and `memo_of` keeps each machine's memo beside it (by
the machine's id, dropped when the machine goes).
"""

from __future__ import annotations

import threading
import weakref
from collections.abc import Iterable
from enum import Enum
from typing import Any

from .definition import Machine, Snapshot
from .forms import PLAIN, alike
from .semantics import Outcome, payload_fault, step

CACHE_LIMIT = 65_536  # memo entries per machine: snapshots and remembered steps together

_STORE = threading.Lock()  # guards memo insertions (rare: at most CACHE_LIMIT per machine)


class Node:
    """A snapshot in the machine's lazily built graph of computed steps.

    A shared node is in the machine's memo and collects edges; a private one
    (the memo is full, or the snapshot is unhashable) never does.
    """

    __slots__ = ("edges", "shared", "snapshot")

    def __init__(self, snapshot: Snapshot, shared: bool) -> None:
        self.snapshot = snapshot
        self.shared = shared
        self.edges: dict[object, tuple[Outcome, Node]] = {}


class Memo(dict[Snapshot, Node]):
    """A machine's memo: snapshot -> node, with the count of entries (nodes and edges)."""

    __slots__ = ("entries", "initial")

    def __init__(self) -> None:
        super().__init__()
        self.entries = 0
        self.initial: Node | None = None


MEMOS: dict[int, Memo] = {}
"""Each machine's memo, by the machine's id: a fresh instance looks its machine's memo up
with no weak reference made. The entry goes when the machine does (`weakref.finalize`),
so before its id can be reused."""


def memo_of(machine: Machine) -> Memo:
    """The memo of `machine`, made empty on first use; it lives as long as the machine."""
    memo = MEMOS.get(id(machine))
    if memo is None:
        with _STORE:
            memo = MEMOS.get(id(machine))
            if memo is None:
                memo = MEMOS[id(machine)] = Memo()
                weakref.finalize(machine, MEMOS.pop, id(machine), None)
    return memo


def memo_size(machine: Machine) -> int:
    """How many entries (snapshots and remembered steps) `machine`'s memo holds."""
    memo = memo_of(machine)
    return memo.entries


def clear_memo(machine: Machine) -> None:
    """Forget every remembered step of `machine`; instances keep their snapshots."""
    memo = memo_of(machine)
    with _STORE:
        for node in memo.values():
            node.shared = False
            node.edges = {}
        memo.clear()
        memo.entries = 0
        memo.initial = None


def same_types(a: Snapshot, b: Snapshot) -> bool:
    """Whether two equal snapshots hold values alike in every part (1 and True, or (1,) and
    (True,), are not: a variable written from an unbounded field may hold either)."""
    return a is b or alike(a, b)


def node_of(machine: Machine, snapshot: Snapshot) -> Node:
    """The shared node for `snapshot`, or a private one where none can be shared.

    Snapshots that `step` builds hold their variables' domain values (never 1
    for True), so an equal snapshot is the same snapshot.
    """
    memo = memo_of(machine)
    try:
        node = memo.get(snapshot)
    except TypeError:  # an unhashable value in a variable
        return Node(snapshot, False)
    if node is None:
        if memo.entries >= CACHE_LIMIT:
            return Node(snapshot, False)
        fresh = Node(snapshot, True)
        with _STORE:
            node = memo.setdefault(snapshot, fresh)
            if node is fresh:
                memo.entries += 1
    return node


def given_node(machine: Machine, snapshot: Snapshot) -> Node:
    """The node for a snapshot built by hand, or written from an unbounded field, which may
    hold True where the memo's holds 1, or (True,) for (1,): then a private node."""
    node = node_of(machine, snapshot)
    return node if same_types(node.snapshot, snapshot) else Node(snapshot, False)


def initial_node(machine: Machine) -> Node:
    """The node of the initial snapshot, looked up once per memo."""
    memo = memo_of(machine)
    node = node_of(machine, machine.initial_snap)
    if node.shared:
        memo.initial = node
    return node


def compute_edge(
    machine: Machine, node: Node, event: str, payload: dict[str, Any]
) -> tuple[Outcome, Node]:
    """Compute the step from `node` with `step`; remember it where that is sound."""
    outcome = step(machine, node.snapshot, event, payload)
    nxt = outcome[1]
    if event not in machine.cacheable_events:
        # An unbounded payload (a count, say) mostly leads to snapshots no
        # finite memo could hold: they stay private, and out of the memo.
        return outcome, node if nxt is node.snapshot else Node(nxt, False)
    entry = (outcome, node if nxt is node.snapshot else node_of(machine, nxt))
    if node.shared:
        remember(machine, node, event, payload, entry)
    return entry


def remember(
    machine: Machine,
    node: Node,
    event: str,
    payload: dict[str, Any],
    entry: tuple[Outcome, Node],
) -> None:
    """Keep `entry` as an edge of `node` if the payload is declared and the memo has room.

    Out-of-domain values are never kept: there are infinitely many of them.
    """
    memo = memo_of(machine)
    if memo.entries >= CACHE_LIMIT:
        return
    if payload and (not exact(payload.values()) or payload_fault(machine, event, payload)):
        return
    key = edge_key(event, payload)
    try:
        hash(key)
    except TypeError:  # an unhashable payload value
        return
    with _STORE:
        if memo.entries < CACHE_LIMIT and node.shared and key not in node.edges:
            node.edges[key] = entry
            memo.entries += 1


def exact(values: Iterable[object]) -> bool:
    """Whether each of `values` is told apart from every other by its type and equality (a
    str, int, bool, bytes, None or enum member), as an edge key tells them."""
    return all(type(value) in PLAIN or isinstance(value, Enum) for value in values)


def remember_alias(
    machine: Machine, node: Node, alias: object, key: object, entry: tuple[Outcome, Node]
) -> None:
    """File `entry` under `alias` too, if `node` files it under `key` (and the memo has room).

    The alias is a prepared event (`statecore.runtime.Prepared`), hashed and
    compared by identity, so it never meets a `key`; it stands for `key` only,
    and only where `key`'s own entry was remembered.
    """
    memo = memo_of(machine)
    with _STORE:
        if (
            memo.entries < CACHE_LIMIT
            and node.shared
            and key is not None
            and node.edges.get(key) is entry
            and alias not in node.edges
        ):
            node.edges[alias] = entry
            memo.entries += 1


def edge_key(event: str, payload: dict[str, Any]) -> object:
    """The edge key of a fire: payload values with their types (so 1 and True differ).

    No payload: the event name. One or two fields, the common cases: a flat
    4- or 7-tuple, cheaper to build than the general form, whose second item
    is a (name, value) pair rather than a name, so the forms never meet.
    `Instance.fire` builds these keys inline.
    """
    if not payload:
        return event
    size = len(payload)
    if size == 1:
        [name] = payload
        value = payload[name]
        return (event, name, value, type(value))
    if size == 2:
        [name, other] = payload
        value, second = payload[name], payload[other]
        return (event, name, value, type(value), other, second, type(second))
    return (event, *payload.items(), *map(type, payload.values()))


def remembered_step(
    machine: Machine, snapshot: Snapshot, event: str, payload: dict[str, Any]
) -> Outcome:
    """`step`, served from the machine's graph of computed steps where it can be (not for a
    snapshot equal to the memo's but unlike it: `given_node`)."""
    node = given_node(machine, snapshot)
    try:
        entry = node.edges.get(edge_key(event, payload))
    except TypeError:  # an unhashable payload value
        entry = None
    if entry is None:
        entry = compute_edge(machine, node, event, payload)
    return entry[0]
