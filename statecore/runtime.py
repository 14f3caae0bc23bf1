"""The production runtime: one `Instance` per entity (per request, say).

An `Instance` holds a snapshot and advances it with the pure `step` function,
so it means exactly what the explorer checked. It is thread-safe: each
instance has its own lock (there is no global lock), a fire reads and commits
the snapshot under it, and listeners run after the commit, outside the lock,
on the thread that fired. Concurrent fires on one instance are serialised;
their listeners may run in either order.

Whether a missing transition raises is the event's policy: ``reject`` and
``ignore`` return an outcome (fail open, never raise into a request),
``error`` raises `TransitionError`.

Because `step` is pure and a finite machine has finitely many snapshots,
the runtime remembers what it computed: each snapshot seen becomes a node
whose edges map an event (and its payload) to the outcome and the next node.
A lifecycle's steps are computed once per process and then looked up, which
makes `fire` cheap enough for a per-request hot path. Events with an
unbounded payload field (a float, say) are always computed. At most
`CACHE_LIMIT` nodes are kept per machine.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Any

from .definition import Machine, Snapshot
from .semantics import ACCEPTED, Outcome, check_fire, enabled, step

Listener = Callable[["Instance", Outcome], None]

CACHE_LIMIT = 65_536


class _Node:
    """A snapshot in the machine's lazily built graph of computed steps."""

    __slots__ = ("edges", "snapshot")

    def __init__(self, snapshot: Snapshot) -> None:
        self.snapshot = snapshot
        self.edges: dict[object, tuple[Outcome, _Node]] = {}


def _node(machine: Machine, snapshot: Snapshot) -> _Node:
    """The shared node for `snapshot`, or a private one once the cache is full."""
    nodes: dict[Snapshot, _Node] = machine.outcome_cache
    try:
        node = nodes.get(snapshot)
    except TypeError:  # an unhashable value in a variable: a private, uncached node
        return _Node(snapshot)
    if node is None:
        node = _Node(snapshot)
        if len(nodes) < CACHE_LIMIT:
            nodes[snapshot] = node
    return node


def _edge(
    machine: Machine, node: _Node, event: str, payload: dict[str, Any]
) -> tuple[Outcome, _Node]:
    """Compute the step from `node` with `step`; remember it where that is sound."""
    outcome = step(machine, node.snapshot, event, payload)
    target = node if outcome[1] is node.snapshot else _node(machine, outcome[1])
    entry = (outcome, target)
    if event in machine.cacheable_events:
        key = _key(event, payload)
        try:
            node.edges[key] = entry
        except TypeError:  # an unhashable payload value: not cacheable
            pass
    return entry


def _key(event: str, payload: dict[str, Any]) -> object:
    """The edge key of a fire: payload values with their types (so 1 and True differ).

    No payload: the event name. One field, the common case: a flat 4-tuple,
    cheaper to build than the general form (which has 5 or more items, so
    the two never meet). `Instance.fire` builds these keys inline.
    """
    if not payload:
        return event
    if len(payload) == 1:
        [(name, value)] = payload.items()
        return (event, name, value, type(value))
    return (event, *payload.items(), *map(type, payload.values()))


def remembered_step(
    machine: Machine, snapshot: Snapshot, event: str, payload: dict[str, Any]
) -> Outcome:
    """`step`, served from the machine's graph of computed steps where it can be."""
    node = _node(machine, snapshot)
    try:
        entry = node.edges.get(_key(event, payload))
    except TypeError:  # an unhashable payload value
        entry = None
    if entry is None:
        entry = _edge(machine, node, event, payload)
    return entry[0]


class Instance:
    """A running machine: ``Instance(machine).fire("event", field=value)``."""

    __slots__ = ("__weakref__", "_listeners", "_lock", "_node", "machine")

    def __init__(
        self,
        machine: Machine,
        snapshot: Snapshot | None = None,
        listeners: tuple[Listener, ...] = (),
    ) -> None:
        self.machine = machine
        self._node = _node(machine, machine.initial_snap if snapshot is None else snapshot)
        self._lock = threading.Lock()
        self._listeners = tuple(listeners)

    @property
    def snapshot(self) -> Snapshot:
        """The current snapshot (immutable: safe to keep)."""
        return self._node.snapshot

    @property
    def state(self) -> str:
        """The name of the current control state."""
        return str(self._node.snapshot[0])

    @property
    def is_final(self) -> bool:
        """Whether the instance rests in a final state."""
        return self.machine.state_index[self._node.snapshot[0]].final

    def fire(self, event: str, /, **payload: Any) -> Outcome:
        """Fire `event` with `payload`; return the outcome under the event's policy.

        Listeners are called with ``(instance, outcome)`` after an accepted
        transition has been committed.
        """
        # `_key`, inlined: this is the hot path.
        if not payload:
            key: object = event
        elif len(payload) == 1:
            [(name, value)] = payload.items()
            key = (event, name, value, type(value))
        else:
            key = (event, *payload.items(), *map(type, payload.values()))
        lock = self._lock
        lock.acquire()  # not `with`: its __enter__/__exit__ calls cost as much as the lookup
        try:
            node = self._node
            try:
                entry = node.edges.get(key)
            except TypeError:  # an unhashable payload value
                entry = None
            if entry is None:
                entry = _edge(self.machine, node, event, payload)
            outcome, self._node = entry
        finally:
            lock.release()
        if self._listeners and outcome[0] is ACCEPTED:
            for listener in self._listeners:
                listener(self, outcome)
        return outcome

    def can_fire(self, event: str, /, **payload: Any) -> bool:
        """Whether `event` with `payload` would be accepted now (a snapshot read).

        An undeclared event or a wrong payload raises `FireError`, as `fire` does.
        """
        check_fire(self.machine, event, payload)
        return enabled(self.machine, self._node.snapshot, event, payload)

    def add_listener(self, listener: Listener) -> None:
        """Call `listener(instance, outcome)` after every accepted transition."""
        with self._lock:
            self._listeners = (*self._listeners, listener)

    def remove_listener(self, listener: Listener) -> None:
        """Stop calling `listener`; a no-op if it was not registered."""
        with self._lock:
            self._listeners = tuple(x for x in self._listeners if x is not listener)

    def __repr__(self) -> str:
        return f"Instance({self._node.snapshot!r})"
