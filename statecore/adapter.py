"""Adapters: bindings from a system's actions to a real implementation.

The fuzz interpreter advances the model and an adapter in lockstep. After
every step it compares what the implementation shows (`Adapter.observe`)
with what the model predicts for the same moment (`Adapter.expect`); any
difference is a finding - the model or the implementation is wrong.

An adapter owns the implementation's callbacks (a processor, a connector's
``put``). When the real code runs a call that the model splits into several
steps, the adapter runs it on a worker thread that parks at each callback
(see `Baton`), so the interpreter can take other actions - a cancel, a
cleanup, a new request re-using the id - while the call is suspended.

This module is standard library only: adapters for real implementations
live next to the models and import their heavy dependencies themselves.
"""

from __future__ import annotations

import os
import threading
import time
from collections.abc import Callable, Hashable, Mapping
from dataclasses import dataclass
from typing import Any

from .definition import Machine
from .errors import StatecoreError
from .system import Handle, StateView, System, SystemState, SystemStep


class AdapterError(StatecoreError):
    """An adapter cannot run: not installed, misconfigured, or out of sync."""


class Deadlock(StatecoreError):
    """A call neither reached a callback nor returned within the baton's timeout."""


class BatonReleased(Exception):
    """Raised inside a parked callback by `Baton.release`: the example is over."""


class AppliedStep(SystemStep):
    """A `SystemStep` as `Adapter.apply` receives it: with the instances it started.

    `spawned` holds a `Handle` per instance the step spawned (``tx.spawn``):
    the generation the model just gave a key, which an adapter maps to the
    id the implementation hands out (``self.ids[step.spawned[0]] =
    service.create()``).
    """

    spawned: tuple[Handle, ...] = ()

    @classmethod
    def of(cls, step: SystemStep, spawned: tuple[Handle, ...]) -> AppliedStep:
        """`step` with `spawned` attached."""
        applied = tuple.__new__(cls, step)
        applied.spawned = spawned
        return applied


class Adapter:
    """Base class of adapters; override `apply`, `observe` and `expect`.

    The interpreter calls `setup` before every example (a fresh
    implementation), `apply` after the model took each step, then compares
    `observe()` with `expect(view)`; `teardown` ends the example. Design the
    observation first: a small, hashable summary of what the implementation
    exposes (``(name, value)`` pairs read best in a mismatch), and an
    `expect` that computes the same summary from the model's state.
    `docs/adapters.md` walks through one.

    `known` maps property ids the implementation is known to violate to the
    reason: such violations are reported on every run but do not fail it
    alone (``--no-known`` makes them fail).
    """

    name: str = ""
    known: Mapping[str, str] = {}

    def setup(self, system: System) -> None:
        """Build a fresh implementation (called before every example)."""

    def apply(self, step: AppliedStep, before: SystemState) -> None:
        """Perform `step` (taken by the model from `before`) on the implementation.

        `step.action` is the action with its arguments, `step.state` the
        model's state after it, `step.outputs` what it emitted and
        `step.spawned` the handles of the instances it started.
        """
        raise NotImplementedError

    def observe(self) -> Hashable:
        """What the implementation shows now, in the same shape as `expect`."""
        return None

    def expect(self, view: StateView[Any]) -> Hashable:
        """What the model predicts the implementation shows in `view`'s state."""
        return None

    def teardown(self) -> None:
        """Release the implementation (called after every example, even a failing one)."""


@dataclass(frozen=True)
class AdapterSpec:
    """A named adapter: which target it fits, how to build it, how to install it.

    `system` (``package.module:callable``) builds the model configuration the
    implementation must conform to - for a real implementation, usually the
    model "as released" at wider fuzzing bounds - instead of the target's
    bundled system.
    """

    name: str
    target: str
    factory: str  # "package.module:callable" returning an Adapter
    system: str = ""
    install: str = ""
    doc: str = ""

    def load(self) -> Callable[[], Adapter]:
        """Import the factory; an ImportError becomes an AdapterError with the fix."""
        import importlib

        module_name, _, attr = self.factory.partition(":")
        try:
            module = importlib.import_module(module_name)
        except ImportError as exc:
            hint = f"; install it with: {self.install}" if self.install else ""
            raise AdapterError(f"adapter {self.name!r} is not installed ({exc}){hint}") from exc
        factory: Callable[[], Adapter] = getattr(module, attr)
        return factory


class Baton:
    """Run a call on a worker thread that parks at callbacks; one thread runs at a time.

    ``baton.start(fn)`` runs ``fn`` on a worker until it calls
    ``baton.park(point)`` (from inside a callback) or returns; control then
    comes back to the caller of `start`, which learns where the worker
    stopped. ``baton.resume(value)`` lets the parked callback return `value`
    (or raise it, if it is an exception) and again waits until the worker
    parks or finishes. Exactly one of the two threads runs at any time, so
    the interleaving is deterministic. A worker that neither parks nor
    finishes within `timeout` seconds raises `Deadlock`.

    Whose turn it is lives in `_turn`; each side wakes the other through a
    lock used as a binary semaphore (a handoff is one release and one
    acquire, cheaper than a condition variable), and re-checks `_turn` after
    waking, so a wake-up left over from a timed-out wait is ignored.

    Every call runs on a thread of its own, so per-thread state
    (``threading.local``) of one call never reaches the next; the thread is
    started ahead of time (see `_Spare`) by the call before, once that call
    is over, so `start` seldom waits for a thread to be created.
    """

    def __init__(self, timeout: float = 10.0) -> None:
        self.timeout = timeout
        self._turn = "main"
        self._wake_main = _Signal()
        self._wake_worker = _Signal()
        self._point: str | None = None
        self._reply: Any = None
        self._result: Any = None
        self._error: BaseException | None = None
        self._done = True

    @property
    def parked_at(self) -> str | None:
        """The callback point the worker is parked at, or None if it finished."""
        return None if self._done else self._point

    @property
    def busy(self) -> bool:
        """Whether a call is in progress (parked at a callback)."""
        return not self._done

    def start(self, fn: Callable[[], Any]) -> str | None:
        """Run `fn` on a worker; return the point it parked at, or None if it returned."""
        if not self._done:
            raise AdapterError(f"baton: a call is still parked at {self._point!r}")
        self._done = False
        self._point = None
        self._error = None
        self._result = None

        def work() -> None:
            try:
                self._result = fn()
            except BaseException as exc:  # handed to the main thread by result()
                self._error = exc
            self._done = True
            self._hand_to("main")
            _Spare.refill()  # for the next call, while the main thread goes on

        self._turn = "worker"
        # A new thread per call, as ever: code that keeps per-thread state
        # (threading.local) sees no state a previous call left.
        _Spare.run(work)
        self._wait_for("main")
        return self.parked_at

    def park(self, point: str) -> Any:
        """Called on the worker: hand control to the main thread until resumed."""
        self._point = point
        self._hand_to("main")
        self._wait_for("worker")
        reply = self._reply
        if isinstance(reply, BaseException):
            raise reply
        return reply

    def resume(self, reply: Any = None) -> str | None:
        """Let the parked callback return `reply` (or raise it); wait as in `start`."""
        if self._done:
            raise AdapterError("baton: no call is parked")
        self._reply = reply
        self._hand_to("worker")
        self._wait_for("main")
        return self.parked_at

    def release(self) -> None:
        """Unwind a parked call, if any: for `Adapter.teardown` when an example ends mid-call.

        The parked callback raises `BatonReleased`; whatever the call does
        with it (or raises) is dropped. The worker gets `timeout` seconds to
        finish, parking again included.
        """
        for _ in range(100):
            if self._done:
                break
            self.resume(BatonReleased("the example ended while this call was parked"))
        self._error = None
        self._result = None

    def result(self) -> Any:
        """The finished call's return value; re-raises what it raised."""
        if self._error is not None:
            error, self._error = self._error, None
            raise error
        return self._result

    def _hand_to(self, whose: str) -> None:
        self._turn = whose
        (self._wake_main if whose == "main" else self._wake_worker).set()

    def _wait_for(self, whose: str) -> None:
        signal = self._wake_main if whose == "main" else self._wake_worker
        deadline = time.monotonic() + self.timeout
        while self._turn != whose:
            left = deadline - time.monotonic()
            if left <= 0 or not signal.wait(left):
                if self._turn == whose:
                    return
                raise Deadlock(
                    f"baton: the {'worker' if whose == 'main' else 'main thread'} did not "
                    f"hand over control within {self.timeout:g}s (parked at {self._point!r})"
                )


class _Spare:
    """A thread started ahead of time that runs one call, given later, and ends.

    Starting a thread costs a few handoffs between threads (the new one must
    run before ``Thread.start`` returns), hundreds of microseconds on a busy
    machine. A call that ends starts the spare for the next one (`refill`)
    after handing control back, so that cost leaves the lockstep's path. At
    most one spare waits per process; `run` starts a thread as before when
    there is none. A forked child starts with none (the parent's is not there).
    """

    _lock = threading.Lock()
    _waiting: _Spare | None = None

    def __init__(self) -> None:
        self._go = _Signal()
        self._job: Callable[[], None] | None = None

    @classmethod
    def run(cls, job: Callable[[], None]) -> None:
        """Run `job` on a thread that never ran anything else: the spare, or a new one."""
        with cls._lock:
            spare, cls._waiting = cls._waiting, None
        if spare is None:
            threading.Thread(target=job, daemon=True, name="statecore-baton").start()
            return
        spare._job = job
        spare._go.set()

    @classmethod
    def refill(cls) -> None:
        """Start a spare if none waits."""
        if cls._waiting is not None:
            return
        spare = cls()
        try:
            threading.Thread(target=spare._serve, daemon=True, name="statecore-baton").start()
        except RuntimeError:  # no thread now (the interpreter exits): `run` starts one later
            return
        with cls._lock:
            if cls._waiting is None:
                cls._waiting = spare
                return
        spare._go.set()  # another call filled the place first: end this one

    def _serve(self) -> None:
        self._go.wait(None)
        if self._job is not None:
            self._job()

    @classmethod
    def _forget(cls) -> None:
        cls._lock = threading.Lock()
        cls._waiting = None


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_Spare._forget)


class _Signal:
    """A wake-up for one waiting thread: a lock used as a binary semaphore."""

    __slots__ = ("_lock",)

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._lock.acquire()

    def set(self) -> None:
        try:
            self._lock.release()
        except RuntimeError:  # already set, and not yet taken: one wake-up is enough
            pass

    def wait(self, timeout: float | None) -> bool:
        """Wait for the wake-up, at most `timeout` seconds (None: for ever)."""
        return self._lock.acquire(timeout=-1 if timeout is None else timeout)


class SystemAdapter(Adapter):
    """Run another system (a known-bug variant, say) as the implementation.

    The implementation takes the same actions as the model; where it cannot
    (an action the variant does not enable) that is a divergence, and
    `observe`/`expect` compare the globals the two systems share and the
    variables of every live instance of a component whose machines declare
    the same variables (the data an instance holds, say a namespace a
    variant drops), so any difference in behaviour shows up as a
    conformance finding.
    """

    def __init__(self, implementation: System, name: str = "") -> None:
        self.implementation = implementation
        self.name = name or f"model:{implementation.name}"
        self.state: SystemState | None = None

    def setup(self, system: System) -> None:
        self.state = self.implementation.init_states()[0]
        self._shared = tuple(
            g.name
            for g in self.implementation.globals
            if g.name in {h.name for h in system.globals}
        )
        variables = {c.name: _variables(c.machine) for c in system.components}
        self._instances = tuple(
            (c.name, _variables(c.machine))
            for c in self.implementation.components
            if variables.get(c.name) == _variables(c.machine) and variables[c.name]
        )

    def apply(self, step: SystemStep, before: SystemState) -> None:
        assert self.state is not None
        self.state = self.implementation.next_step(self.state, step.action).state

    def observe(self) -> Hashable:
        assert self.state is not None
        return self.expect(self.implementation.view(self.state))

    def expect(self, view: StateView[Any]) -> Hashable:
        instances = tuple(
            (
                component,
                tuple(
                    (handle.key, handle.generation, tuple(getattr(snap, v) for v in names))
                    for handle, snap in view.live(component)
                ),
            )
            for component, names in self._instances
        )
        return (*((name, view.get(name)) for name in self._shared), *instances)


def _variables(machine: Machine) -> tuple[str, ...]:
    """The names of `machine`'s variables, in declaration order."""
    return tuple(v.name for v in machine.variables)
