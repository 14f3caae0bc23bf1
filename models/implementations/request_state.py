"""Reference runtime of request-scoped, namespaced producer state (vllm-omni RFC #6453).

`RequestStateAccessor` keeps, per external request id, the state that
incremental producers (``custom_process_next_stage_input_func``) carry from
one chunk to the next, in declared namespaces. It runs the `request_state`
machine of `statecore.models.request_state` - the one ``statecore check``
verified - with one `statecore.Instance` per request generation, so the
lifecycle it enforces is exactly the checked one:

* ``open(ext, owner=sender_token)`` starts a generation (vLLM-Omni: where
  ``save_async`` creates a ``_SenderGeneration``); a live predecessor is
  released first, so nothing is inherited across a reused external id;
* ``view(ext, owner=sender_token)`` gives a retained handle to that
  generation; it is fenced by generation *identity* only: a cancelled but
  current generation stays readable (its terminal flush still runs), while a
  view of a released or superseded generation can never create, read or
  change state again - not its own, not its successor's;
* ``complete_segment(ext)`` keeps request-wide state (segment-scoped
  buffers are the caller's business); ``on_failure(ext)`` keeps the state
  until failure finalization; ``cleanup(ext)`` is the canonical cleanup
  (vLLM-Omni: from ``_clear_sender_state_locked``), idempotent.

Errors follow the RFC: runtime conditions never raise into a request. A
fenced view's ``get_or_create`` returns a *detached* value from the factory
(not stored, so nothing is recreated) and ``resolve`` says so; lifecycle
calls on an unknown id return False. Programmer errors raise: an undeclared
namespace (`UnknownNamespaceError`), a factory that is not callable or
returns None, a non-string id or namespace.

Thread safety: one lock for the id -> generation table and one re-entrant
lock per generation. Factories run under their generation's lock, so each
namespace's factory runs at most once per generation even under contention,
and a cleanup racing a factory either happens before it (the factory's
value is detached) or after it (the value is dropped with the rest). No
lock is ever held while taking another, so the accessor cannot deadlock.

Adopting it in vLLM-Omni (``chunk_transfer_adapter.py``), with
``self.request_state = RequestStateAccessor(namespaces)``:

==================================================  ======================================
vLLM-Omni                                           accessor call
==================================================  ======================================
``save_async`` creates a ``_SenderGeneration``      ``open(ext, owner=token)``
``_send_single_request_for_generation``             ``view(ext, owner=token)``, handed to
                                                    the processor
segment-end post-processing (after the put)         ``complete_segment(ext, owner=token)``
``record_send_failure`` after a failed put          ``on_failure(ext, owner=token)``
``_clear_sender_state_locked(ext)``                 ``cleanup(ext)``
==================================================  ======================================

Generation serial numbers are unique within an accessor; nothing is kept for
an id after its cleanup, so the accessor's memory is bounded by the live
requests. Only the standard library and statecore are used.
"""

from __future__ import annotations

import itertools
import logging
import threading
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Generic, Literal, TypeVar, cast

from statecore import Instance, Machine

from ..request_state_machines import request_state_machine

__all__ = [
    "MAX_NAMESPACES",
    "Access",
    "RequestStateAccessor",
    "RequestStateView",
    "UnknownNamespaceError",
]

T = TypeVar("T")

Status = Literal["created", "reused", "detached"]

MAX_NAMESPACES = 8
"""At most this many namespaces per accessor: group related buffers in one object."""

_LOG = logging.getLogger(__name__)

_LIVE = frozenset({"open", "failed"})


class UnknownNamespaceError(KeyError):
    """A namespace the accessor was not declared with: a programmer error."""


@dataclass(frozen=True)
class Access(Generic[T]):
    """The result of `RequestStateView.resolve`: the value and where it came from.

    ``created`` - the factory ran and its value is now the request's;
    ``reused`` - the request already held the namespace;
    ``detached`` - the view is fenced (its generation was released or
    superseded): the factory's value is returned but not stored.
    """

    value: T
    status: Status

    @property
    def stored(self) -> bool:
        """Whether `value` is the request's state (not a detached stand-in)."""
        return self.status != "detached"


class _Generation:
    """One generation of one request's state: an `Instance` and the values."""

    __slots__ = ("external_id", "instance", "lock", "number", "owner", "values")

    def __init__(self, external_id: str, number: int, owner: object, machine: Machine) -> None:
        self.external_id = external_id
        self.number = number
        self.owner = owner
        self.instance = Instance(machine)
        self.values: dict[str, object] = {}
        self.lock = threading.RLock()

    @property
    def live(self) -> bool:
        return self.instance.state in _LIVE

    def fire(self, event: str) -> bool:
        with self.lock:
            accepted = self.instance.fire(event).accepted
            if not self.live:
                self.values.clear()
            return accepted


class RequestStateView:
    """A retained handle to one generation of one request's state.

    Keep it as long as you like: once its generation is released (canonical
    cleanup, failure finalization, or a new request reusing the id) every
    access through it is fenced and fails open.
    """

    __slots__ = ("_accessor", "_generation")

    def __init__(self, accessor: RequestStateAccessor, generation: _Generation) -> None:
        self._accessor = accessor
        self._generation = generation

    @property
    def external_id(self) -> str:
        """The request's external id."""
        return self._generation.external_id

    @property
    def generation(self) -> int:
        """The generation's serial number, unique within the accessor (0: fenced from birth)."""
        return self._generation.number

    @property
    def active(self) -> bool:
        """Whether the view still reaches its request's state."""
        return self._generation.live

    def get_or_create(self, namespace: str, factory: Callable[[], T]) -> T:
        """The namespace's value, created with `factory` on first use.

        On a fenced view the factory's value is returned detached (not
        stored): the caller goes on, and no state is recreated.
        """
        return self.resolve(namespace, factory).value

    def resolve(self, namespace: str, factory: Callable[[], T]) -> Access[T]:
        """Like `get_or_create`, and say whether the value was created, reused or detached."""
        self._accessor._check_namespace(namespace)
        if not callable(factory):
            raise TypeError(f"factory for namespace {namespace!r} is not callable: {factory!r}")
        gen = self._generation
        with gen.lock:
            if namespace in gen.values and gen.live:
                outcome = gen.instance.fire("get_or_create", namespace=namespace)
                assert outcome.accepted and outcome.outputs[0].get("created") is False
                return Access(cast(T, gen.values[namespace]), "reused")
            value = _call(factory, namespace)
            outcome = gen.instance.fire("get_or_create", namespace=namespace)
            if not outcome.accepted:
                _LOG.debug(
                    "request state of %r generation %d is released; %r detached",
                    gen.external_id,
                    gen.number,
                    namespace,
                )
                return Access(value, "detached")
            assert outcome.outputs[0].get("created") is True
            gen.values[namespace] = value
            return Access(value, "created")

    def get(self, namespace: str) -> object | None:
        """The namespace's value without creating it; None if absent or fenced."""
        self._accessor._check_namespace(namespace)
        gen = self._generation
        with gen.lock:
            return gen.values.get(namespace) if gen.live else None

    def namespaces(self) -> frozenset[str]:
        """The namespaces this view's request holds (empty once fenced)."""
        gen = self._generation
        with gen.lock:
            return frozenset(gen.values) if gen.live else frozenset()

    def __repr__(self) -> str:
        state = "active" if self.active else "fenced"
        return f"RequestStateView({self.external_id!r}, generation={self.generation}, {state})"


def _call(factory: Callable[[], T], namespace: str) -> T:
    value = factory()
    if value is None:
        raise ValueError(
            f"factory for namespace {namespace!r} returned None; return the state object "
            f"itself (an empty list, a dataclass, ...)"
        )
    return value


class RequestStateAccessor:
    """Namespaced producer state for every request of one adapter, keyed by external id."""

    def __init__(self, namespaces: Iterable[str]) -> None:
        declared = tuple(namespaces)
        for ns in declared:
            if not isinstance(ns, str) or not ns:
                raise TypeError(f"namespace {ns!r} must be a non-empty str")
        if not declared:
            raise ValueError("declare at least one namespace")
        if len(set(declared)) != len(declared):
            raise ValueError(f"duplicate namespace in {declared!r}")
        if len(declared) > MAX_NAMESPACES:
            raise ValueError(
                f"{len(declared)} namespaces declared; at most {MAX_NAMESPACES} are supported "
                f"(group related buffers in one object)"
            )
        self._namespaces = declared
        self._known = frozenset(declared)
        self._machine = request_state_machine(declared)
        self._lock = threading.Lock()
        self._generations: dict[str, _Generation] = {}
        self._serial = itertools.count(1)

    # -- declarations ------------------------------------------------------------

    @property
    def namespaces(self) -> tuple[str, ...]:
        """The declared namespaces."""
        return self._namespaces

    @property
    def machine(self) -> Machine:
        """The `request_state` machine every generation runs."""
        return self._machine

    def _check_namespace(self, namespace: str) -> None:
        if namespace not in self._known:
            raise UnknownNamespaceError(
                f"namespace {namespace!r} was not declared; declared: {list(self._namespaces)}"
            )

    # -- lifecycle -----------------------------------------------------------------

    def open(self, external_id: str, owner: object = None) -> RequestStateView:
        """Start a new generation for `external_id`, owned by `owner` (the sender token).

        A generation still live for the id is released first (and logged):
        a new request never inherits its predecessor's state.
        """
        _check_id(external_id)
        with self._lock:
            number = next(self._serial)
            gen = _Generation(external_id, number, owner, self._machine)
            old = self._generations.get(external_id)
            self._generations[external_id] = gen
        if old is not None and old.fire("release"):
            _LOG.warning(
                "request state of %r generation %d was still live when generation %d opened; "
                "released it",
                external_id,
                old.number,
                number,
            )
        return RequestStateView(self, gen)

    def view(self, external_id: str, owner: object = None) -> RequestStateView:
        """A retained handle to the current generation of `external_id`.

        With `owner`, the view reaches the state only if that owner's
        generation is the current one (``_sender_tokens.get(ext) is
        sender_token``); otherwise, or if there is no generation, the view
        is fenced from the start.
        """
        _check_id(external_id)
        with self._lock:
            gen = self._generations.get(external_id)
        if gen is None or (owner is not None and gen.owner is not owner):
            gen = _Generation(external_id, 0, owner, self._machine)
            gen.fire("release")  # a view fenced from the start
        return RequestStateView(self, gen)

    def get_or_create(self, external_id: str, namespace: str, factory: Callable[[], T]) -> T:
        """`RequestStateView.get_or_create` on the current generation of `external_id`."""
        return self.view(external_id).get_or_create(namespace, factory)

    def complete_segment(self, external_id: str, owner: object = None) -> bool:
        """A segment of `external_id` completed: request-wide state is kept."""
        return self._fire(external_id, owner, "complete_segment")

    def on_failure(self, external_id: str, owner: object = None) -> bool:
        """A send of `external_id` failed: keep its state until failure finalization."""
        return self._fire(external_id, owner, "send_failed")

    def cleanup(self, external_id: str, owner: object = None) -> bool:
        """Canonical cleanup: release every namespace of `external_id`.

        Idempotent: False if the id holds no state (or, with `owner`, if the
        current generation is not that owner's, which is then left alone).
        """
        _check_id(external_id)
        with self._lock:
            gen = self._generations.get(external_id)
            if gen is None or (owner is not None and gen.owner is not owner):
                return False
            del self._generations[external_id]
        return gen.fire("release")

    def _fire(self, external_id: str, owner: object, event: str) -> bool:
        _check_id(external_id)
        with self._lock:
            gen = self._generations.get(external_id)
        if gen is None or (owner is not None and gen.owner is not owner):
            return False
        return gen.fire(event)

    # -- inspection ----------------------------------------------------------------

    def status(self, external_id: str) -> str | None:
        """``"open"`` or ``"failed"`` for a live request, None if it holds no state."""
        with self._lock:
            gen = self._generations.get(external_id)
        return None if gen is None else gen.instance.state

    def held(self, external_id: str) -> frozenset[str]:
        """The namespaces `external_id` holds now."""
        return self.view(external_id).namespaces()

    def __contains__(self, external_id: object) -> bool:
        with self._lock:
            return external_id in self._generations

    def __len__(self) -> int:
        with self._lock:
            return len(self._generations)

    def __repr__(self) -> str:
        return f"RequestStateAccessor(namespaces={list(self._namespaces)}, requests={len(self)})"


def _check_id(external_id: object) -> None:
    if not isinstance(external_id, str):
        raise TypeError(f"external request id must be a str, got {type(external_id).__name__}")
