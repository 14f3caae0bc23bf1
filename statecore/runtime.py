"""The production runtime: one `Instance` per entity (per request, say).

An `Instance` holds a snapshot and advances it with the pure `step` function,
so it means exactly what the explorer checked. It is thread-safe: each
instance has its own lock (there is no global lock), a fire reads and commits
the snapshot under it, and listeners run after the commit, outside the lock,
on the thread that fired. Concurrent fires on one instance are serialised;
their listeners may run in either order.

Whether a missing transition raises is the event's policy: ``reject`` and
``ignore`` return an outcome (fail open, never raise into a request),
``error`` raises `TransitionError`. A payload value outside its field's
domain never takes a transition (see `statecore.semantics`).

The memo (`statecore.memo`). Because `step` is pure and a finite machine has
finitely many snapshots, the runtime remembers what it computed: each snapshot seen becomes
a node whose edges map an event (and its payload, with the values' types, so
1 and True differ) to the outcome and the next node. A lifecycle's steps are
computed once per process and then looked up, which makes `fire` cheap enough
for a per-request hot path. Only declared values are remembered: events with
an unbounded field (a float, say), payloads outside the domains and events or
machines declared ``pure=False`` are computed on every fire. A machine's memo
holds at most `CACHE_LIMIT` entries, snapshots and steps together; past that,
new steps are computed and not kept, so memory stays bounded whatever the
payloads.

The contract. Guards, effects and emitters must be pure functions of the
snapshot and the payload; one that reads a clock or counts calls would be
remembered with the result of its first call. Declare such an event (or the
whole machine) ``pure=False``. `verify_memo` (or ``STATECORE_VERIFY_MEMO=N``
in the environment, as statecore's own test suite sets) re-runs `step` on
every N-th memo hit and raises `ImpureCallbackError` naming the guard or
effect whose result changed.

Re-entrancy and listeners. A guard, effect or emitter that fires on the
instance it is a step of raises `ReentrantFireError` (it would otherwise
deadlock on the instance's lock). A listener may fire. Every listener runs
even when one raises; their exceptions are then raised together as one
`ListenerError`, after the transition was committed.
"""

from __future__ import annotations

import os
import threading
from collections.abc import Callable, Mapping
from types import MappingProxyType
from typing import Any

from . import memo as _memo
from .definition import Machine, Snapshot
from .errors import ImpureCallbackError, ListenerError, ReentrantFireError, StatecoreError
from .memo import (
    Memo,
    Node,
    clear_memo,
    compute_edge,
    given_node,
    initial_node,
    memo_size,
    remembered_step,
    same_types,
)
from .module_settings import forward_settings
from .semantics import ACCEPTED, Outcome, check_fire, enabled, step

__all__ = [
    "CACHE_LIMIT",
    "Instance",
    "Listener",
    "Memo",
    "Prepared",
    "SerialInstance",
    "clear_memo",
    "impurity",
    "memo_size",
    "prepare",
    "remembered_step",
    "verify_memo",
]

Listener = Callable[["Instance", Outcome], None]

CACHE_LIMIT = _memo.CACHE_LIMIT  # the memo's bound; setting it here sets `statecore.memo`'s

# The memo's helpers under the names they had when the memo lived here.
_Node = Node
_node = _memo.node_of
_memos_get = _memo.MEMOS.get
_key = _memo.edge_key
_edge = compute_edge  # `Instance._step` calls it through this name

_get_ident = threading.get_ident
_new_lock = threading.Lock
_LISTENERS = threading.Lock()  # guards listener registration, never held while a step runs


class _Stepping(tuple[Any, ...]):
    """An instance's lock while one of its steps runs: re-entry from that step raises.

    Holds ``(real lock, instance, id of the stepping thread)``; a tuple, as
    it is built on every step not served from the memo. `Instance.fire`
    takes the lock with a plain ``acquire()``, the cheapest call; while a
    step computes, the instance's lock attribute is this stand-in, so a fire
    from the step's own thread (a guard, effect or emitter) raises
    `ReentrantFireError` instead of deadlocking, and a fire from another
    thread waits for the real lock as usual.
    """

    __slots__ = ()

    def acquire(self) -> bool:
        """Wait for the real lock, unless this thread is the one stepping."""
        lock, instance, owner = self
        if _get_ident() == owner:
            raise ReentrantFireError(
                f"machine {instance.machine.name!r}: a guard, effect or emitter fired on "
                f"the instance it is a step of ({instance.snapshot!r}); a step must not "
                f"fire, so return the change instead, or fire from a listener"
            )
        return bool(lock.acquire())

    def release(self) -> None:
        """Release the real lock."""
        self[0].release()


_new_tuple = tuple.__new__


class Prepared:
    """An event and its payload, fixed once and fired many times (`Instance.fire_prepared`).

    A hot path fires the same few events over and over (a save thread's
    ``begin`` and ``end`` on every chunk). Building and hashing the memo key
    from keyword arguments costs more than the memo lookup itself, so
    `prepare` builds the key once, and the memo also files each step under
    the prepared event itself, hashed by identity. The step, the memo entry
    and the outcome are `fire`'s. Immutable.
    """

    __slots__ = ("event", "key", "payload")

    event: str
    payload: Mapping[str, Any]
    key: object
    """`statecore.memo.edge_key` of the event and payload; None if a value is unhashable."""

    def __init__(self, event: str, payload: Mapping[str, Any]) -> None:
        payload = dict(payload)  # the caller's dict may change later; this may not
        key = _key(event, payload)
        try:
            hash(key)
        except TypeError:  # an unhashable value: every fire computes its step, as `fire` does
            key = None
        for name, value in (("event", event), ("payload", MappingProxyType(payload)), ("key", key)):
            object.__setattr__(self, name, value)

    def __setattr__(self, name: str, value: object) -> None:
        raise AttributeError(f"a Prepared event is immutable; prepare another ({name!r})")

    def __repr__(self) -> str:
        fields = ", ".join(f"{name}={value!r}" for name, value in self.payload.items())
        return f"Prepared({self.event!r}{', ' if fields else ''}{fields})"


def prepare(machine: Machine, event: str, /, **payload: Any) -> Prepared:
    """`event` with `payload`, checked against `machine`'s declaration, ready to fire.

    An undeclared event or a payload without exactly the event's fields
    raises `FireError` here, once, instead of on the hot path.
    """
    check_fire(machine, event, payload)
    return Prepared(event, payload)


class Instance:
    """A running machine: ``Instance(machine).fire("event", field=value)``."""

    __slots__ = ("__weakref__", "_listeners", "_lock", "_node", "machine")
    _lock: threading.Lock | _Stepping

    def __init__(
        self,
        machine: Machine,
        snapshot: Snapshot | None = None,
        listeners: tuple[Listener, ...] = (),
    ) -> None:
        self.machine = machine
        if snapshot is not None:
            self._node = given_node(machine, snapshot)
        else:  # `memo_of(machine).initial`, without the call: one per instance made
            memo = _memos_get(id(machine))
            node = None if memo is None else memo.initial
            self._node = node or initial_node(machine)
        self._lock = _new_lock()
        self._listeners = tuple(listeners)

    @property
    def snapshot(self) -> Snapshot:
        """The current snapshot (immutable: safe to keep)."""
        return self._node.snapshot

    @property
    def state(self) -> str:
        """The name of the current control state."""
        state: str = self._node.snapshot[0]
        return state

    @property
    def is_final(self) -> bool:
        """Whether the instance rests in a final state."""
        return self.machine.state_index[self._node.snapshot[0]].final

    def fire(self, event: str, /, **payload: Any) -> Outcome:
        """Fire `event` with `payload`; return the outcome under the event's policy.

        Listeners are called with ``(instance, outcome)`` after an accepted
        transition has been committed; see `ListenerError` for when they raise.
        """
        # `edge_key` of `statecore.memo`, inlined: this is the hot path.
        if not payload:
            key: object = event
        elif len(payload) == 1:
            [name] = payload
            value = payload[name]
            key = (event, name, value, type(value))
        elif len(payload) == 2:
            [name, other] = payload
            value, second = payload[name], payload[other]
            key = (event, name, value, type(value), other, second, type(second))
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
                entry = self._step(node, event, payload)
            outcome, self._node = entry
        finally:
            lock.release()
        if self._listeners and outcome[0] is ACCEPTED:
            self._notify(outcome)
        return outcome

    def fire_prepared(self, prepared: Prepared) -> Outcome:
        """`fire` of a `prepare`d event: the same step, memo entry and outcome."""
        lock = self._lock
        lock.acquire()
        try:
            node = self._node
            entry = node.edges.get(prepared)
            if entry is None:
                entry = self._prepared_step(node, prepared)
            outcome, self._node = entry
        finally:
            lock.release()
        if self._listeners and outcome[0] is ACCEPTED:
            self._notify(outcome)
        return outcome

    def _prepared_step(self, node: _Node, prepared: Prepared) -> tuple[Outcome, _Node]:
        """The edge under `prepared`'s key (computed if missing), filed under `prepared` too."""
        entry = node.edges.get(prepared.key)
        if entry is None:
            entry = self._step(node, prepared.event, dict(prepared.payload))
        _memo.remember_alias(self.machine, node, prepared, prepared.key, entry)
        return entry

    def _fire_prepared_verified(self, prepared: Prepared) -> Outcome:
        """`fire_prepared` under `verify_memo`: `fire`'s sampled re-check."""
        return self._fire_verified(prepared.event, **prepared.payload)

    def _fire_verified(self, event: str, /, **payload: Any) -> Outcome:
        """`fire`, re-running `step` on sampled memo hits (`verify_memo`)."""
        key = _memo.edge_key(event, payload)
        lock = self._lock
        lock.acquire()
        try:
            node = self._node
            try:
                entry = node.edges.get(key)
            except TypeError:  # an unhashable payload value
                entry = None
            if entry is None:
                entry = self._step(node, event, payload)
            elif _sampled():
                self._verify(node, event, payload, entry[0])
            outcome, self._node = entry
        finally:
            lock.release()
        if self._listeners and outcome[0] is ACCEPTED:
            self._notify(outcome)
        return outcome

    def _step(self, node: _Node, event: str, payload: dict[str, Any]) -> tuple[Outcome, _Node]:
        """Compute a step not in the memo, with the lock marked as held by this step."""
        lock = self._lock
        self._lock = _new_tuple(_Stepping, (lock, self, _get_ident()))
        try:
            return _edge(self.machine, node, event, payload)
        finally:
            self._lock = lock

    def _verify(self, node: _Node, event: str, payload: dict[str, Any], memo: Outcome) -> None:
        """Raise `ImpureCallbackError` if `step` now disagrees with the memo."""
        lock = self._lock
        self._lock = _new_tuple(_Stepping, (lock, self, _get_ident()))
        try:
            fresh: Outcome | StatecoreError = step(self.machine, node.snapshot, event, payload)
        except StatecoreError as exc:
            fresh = exc
        finally:
            self._lock = lock
        difference = impurity(self.machine, node.snapshot, event, payload, memo, fresh)
        if difference:
            raise ImpureCallbackError(difference)

    def _notify(self, outcome: Outcome) -> None:
        """Call every listener; raise what they raised as one `ListenerError`."""
        errors: list[Exception] = []
        culprits: list[str] = []
        for listener in self._listeners:
            try:
                listener(self, outcome)
            except Exception as exc:  # collected: the remaining listeners still run
                errors.append(exc)
                first_line = (str(exc).splitlines() or [""])[0]
                culprits.append(
                    f"{getattr(listener, '__qualname__', repr(listener))} raised "
                    f"{type(exc).__name__}: {first_line}"
                )
        if errors:
            raise ListenerError(
                f"machine {self.machine.name!r}: {len(errors)} listener(s) raised after "
                f"{outcome.event!r} was committed ({outcome.snapshot!r}): "
                f"{'; '.join(culprits)}; every listener ran and the transition stands, "
                f"so handle the error in the listener or catch ListenerError",
                outcome,
                tuple(errors),
            ) from errors[0]

    def can_fire(self, event: str, /, **payload: Any) -> bool:
        """Whether `event` with `payload` would be accepted now (a snapshot read).

        An undeclared event or a wrong payload raises `FireError`, as `fire` does.
        """
        check_fire(self.machine, event, payload)
        return enabled(self.machine, self._node.snapshot, event, payload)

    def add_listener(self, listener: Listener) -> None:
        """Call `listener(instance, outcome)` after every accepted transition."""
        with _LISTENERS:
            self._listeners = (*self._listeners, listener)

    def remove_listener(self, listener: Listener) -> None:
        """Stop calling `listener`; a no-op if it was not registered."""
        with _LISTENERS:
            self._listeners = tuple(x for x in self._listeners if x is not listener)

    def __repr__(self) -> str:
        return f"Instance({self._node.snapshot!r})"


class SerialInstance(Instance):
    """An `Instance` whose owner serialises every fire on it, for a hot path.

    A call site that already holds a lock of its own around every fire of
    an instance (the checked adapter's sender lock, say) pays for the
    instance's lock twice. A `SerialInstance` is the same instance, the same
    memo and the same steps, but a `fire_prepared` served from the memo takes
    no lock: it looks the prepared event up in the current node's edges and
    moves to the next node. Everything else is `Instance`'s: a step not in
    the memo is computed under the instance's lock, ``fire`` locks, and under
    `verify_memo` every fire takes the verified path. While a step is
    computed the instance stands on a private node of its snapshot with no
    edges, so a guard, effect or emitter that fires on it misses the memo
    and raises `ReentrantFireError`, as it does on an `Instance`.

    The contract: two fires on one `SerialInstance` never overlap (reads of
    `state` and `snapshot` may). It takes no listeners: they are for
    observers, which the owner's own call sites are not.
    """

    __slots__ = ()

    def __init__(self, machine: Machine, snapshot: Snapshot | None = None) -> None:
        Instance.__init__(self, machine, snapshot)  # no listeners; named, as super() costs

    def fire_prepared(self, prepared: Prepared) -> Outcome:
        """`Instance.fire_prepared`, without the instance's lock when the memo has the step.

        A subscript in a ``try`` (free in 3.11 when nothing is raised) is the
        cheapest lookup: a miss is rare, and costs a step anyway.
        """
        try:
            outcome, self._node = self._node.edges[prepared]
            return outcome
        except KeyError:  # not in the memo (yet): `Instance.fire_prepared` computes it,
            pass  # outside the handler, so what it raises does not chain this KeyError
        return _fast_fire_prepared(self, prepared)

    def _step(self, node: _Node, event: str, payload: dict[str, Any]) -> tuple[Outcome, _Node]:
        self._node = Node(node.snapshot, False)  # no edges: a fire from the step raises
        try:
            return Instance._step(self, node, event, payload)
        finally:
            self._node = node

    def add_listener(self, listener: Listener) -> None:
        """Refused: a `SerialInstance` calls no listeners (see the class doc)."""
        raise TypeError(
            f"machine {self.machine.name!r}: a SerialInstance takes no listeners; "
            f"use an Instance where something else must hear its transitions"
        )


# -- memo verification ---------------------------------------------------------


def impurity(
    machine: Machine,
    snapshot: Snapshot,
    event: str,
    payload: dict[str, Any],
    memo: Outcome,
    fresh: Outcome | StatecoreError,
) -> str:
    """How `fresh` (`step` run again) differs from the memo's outcome, naming the culprit.

    "" when they agree: same status, transition, outputs and exact snapshot.
    """
    if (
        isinstance(fresh, Outcome)
        and fresh.status == memo.status
        and fresh.transition is memo.transition
        and fresh.snapshot == memo.snapshot
        and same_types(fresh.snapshot, memo.snapshot)
        and fresh.outputs == memo.outputs
    ):
        return ""
    return (
        f"machine {machine.name!r}: {_culprit(memo, fresh)} gave another result for the "
        f"same snapshot and payload (event {event!r} in {snapshot!r} with payload "
        f"{payload!r}: remembered {_brief(memo)}, now {_brief(fresh)}); the memo needs "
        f"guards, effects and emitters that are pure functions of (snapshot, payload), "
        f"so make it one or declare Event({event!r}, ..., pure=False)"
    )


def _culprit(memo: Outcome, fresh: Outcome | StatecoreError) -> str:
    """The guard, effect or emitter that explains the difference between two outcomes."""
    taken = memo.transition
    now = fresh.transition if isinstance(fresh, Outcome) else None
    if taken is None or now is not taken:
        guards = [
            f"guard {t.guard_label or 'guard'!r} of transition {t.name!r}"
            for t in (taken, now)
            if t is not None and t.guard is not None
        ]
        return " or ".join(guards) or "a guard"
    assert isinstance(fresh, Outcome)
    if fresh.snapshot != memo.snapshot or not same_types(fresh.snapshot, memo.snapshot):
        return f"effect {taken.effect_label or 'effect'!r} of transition {taken.name!r}"
    return f"the emitter of transition {taken.name!r}"


def _brief(outcome: Outcome | StatecoreError) -> str:
    """An outcome in a few words, for `impurity`'s message."""
    if not isinstance(outcome, Outcome):
        return f"{type(outcome).__name__}"
    if outcome.transition is None:
        return f"{outcome.status} ({outcome.reason})"
    return f"{outcome.status} by {outcome.transition.name!r} to {outcome.snapshot!r}"


_verify_every = 0
_verify_hits = 0


def _sampled() -> bool:
    """Whether this memo hit is one `verify_memo` checks (every N-th)."""
    global _verify_hits
    _verify_hits += 1
    return _verify_hits % _verify_every == 0


def verify_memo(every: int) -> int:
    """Re-run `step` on every `every`-th memo hit of `Instance.fire`; 0 turns it off.

    A debugging aid for the purity contract: a hit whose outcome `step` no
    longer gives raises `ImpureCallbackError`. Off, `fire` pays nothing for it.
    Returns the previous setting, to restore it with.
    """
    global _verify_every, _verify_hits
    previous = _verify_every
    if isinstance(every, bool) or not isinstance(every, int) or every < 0:
        raise ValueError(
            f"verify_memo({every!r}): give 0 (off), 1 (every memo hit) or N (every N-th)"
        )
    _verify_every = every
    _verify_hits = 0
    Instance.fire = Instance._fire_verified if every else _fast_fire  # type: ignore[method-assign]
    Instance.fire_prepared = (  # type: ignore[method-assign]
        Instance._fire_prepared_verified if every else _fast_fire_prepared
    )
    SerialInstance.fire_prepared = (  # type: ignore[method-assign]
        Instance._fire_prepared_verified if every else _serial_fire_prepared
    )
    return previous


def _every_from_environment() -> int:
    """``STATECORE_VERIFY_MEMO`` as a whole number ("" or unset: 0)."""
    text = os.environ.get("STATECORE_VERIFY_MEMO", "").strip()
    try:
        every = int(text or "0")
    except ValueError:
        every = -1
    if every < 0:
        raise ValueError(
            f"STATECORE_VERIFY_MEMO={text!r}: give 0 (off), 1 (check every memo hit) "
            f"or N (every N-th)"
        )
    return every


_fast_fire = Instance.fire
_fast_fire_prepared = Instance.fire_prepared
_serial_fire_prepared = SerialInstance.fire_prepared
verify_memo(_every_from_environment())


# ``runtime.CACHE_LIMIT = n`` also sets the bound `statecore.memo` reads.
forward_settings(__name__, {"CACHE_LIMIT": _memo})
