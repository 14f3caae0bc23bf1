"""The accessor as the request-state system drives it: fences, ``get_or_create``, cleanup.

A view is fenced by one of the `FENCES` (the PR's ``is_active``): the
reference `identity_fence` and the three fences the review found wanting.
`access` is ``get_or_create`` through a view; `release_request_state` is the
canonical cleanup (``_clear_sender_state_locked``) that drops the request's
state.
"""

from __future__ import annotations

from collections.abc import Callable, Hashable, Mapping
from typing import Protocol, TypeVar

from statecore import out
from statecore.system import Handle, Tx

from .request_state_machines import NAMESPACES, namespace_var
from .request_state_records import (
    CANCELLED,
    CREATED,
    REFUSED,
    REUSED,
    Fence,
    Made,
    Shared,
    View,
)

Target = Handle | tuple[str, Hashable]
"""The state instance a fired event reaches: one generation, or whatever is live for a key."""

ViewFence = Callable[[Tx[Shared], View], Target | None]
"""Which state `view` may touch, or None when its fence refuses it."""


def identity_fence(tx: Tx[Shared], view: View) -> Target | None:
    """The review's fix: ``_sender_tokens.get(ext) is sender_token``.

    A view reaches its own generation's state only, cancelled or not; a
    released generation refuses it.
    """
    return view.state


def identity_not_cancelled_fence(tx: Tx[Shared], view: View) -> Target | None:
    """Seed 000 P1, the PR as submitted: also ``and not sender_token.cancelled``."""
    token = tx.snapshot(view.sender)
    if token is None or token.state in CANCELLED:
        return None
    return view.state


def external_id_fence(tx: Tx[Shared], view: View) -> Target | None:
    """A view resolving ``request_payload[ext]`` while any generation of ext is current."""
    ext = view.state.key
    if tx.handle("sender", ext) is None:
        return None
    return ("state", ext)


def unfenced(tx: Tx[Shared], view: View) -> Target | None:
    """Only ``adapter.request_state`` is checked: ``request_payload.setdefault(ext, {})``."""
    ext = view.state.key
    if tx.handle("state", ext) is None:
        tx.spawn("state", ext)  # recreated after cleanup
    return ("state", ext)


FENCES: Mapping[Fence, ViewFence] = {
    "identity": identity_fence,
    "identity_not_cancelled": identity_not_cancelled_fence,
    "external_id": external_id_fence,
    "unfenced": unfenced,
}
"""The fence each `RequestStateConfig.fence` names."""


def access(tx: Tx[Shared], view: View, namespace: str, *, retained: bool, fence: ViewFence) -> str:
    """get_or_create(namespace) through `view`: CREATED, REUSED or REFUSED."""
    target = fence(tx, view)
    if target is None:
        return _refuse(tx, view, namespace, retained)
    outcome = tx.fire(target, "get_or_create", namespace=namespace)
    if not outcome.accepted:
        return _refuse(tx, view, namespace, retained)
    ext = view.state.key
    reached = tx.handle("state", ext)
    assert reached is not None
    current = tx.handle("sender", ext)
    if current is not None and current != view.sender:
        tx.put(crossed=True)  # the successor's state
    created = bool(outcome.outputs[0].get("created"))
    if created:
        made = Made(reached, namespace_var(NAMESPACES.index(namespace)))
        tx.put(made=tx.g.made | {made})
    result = CREATED if created else REUSED
    sender = view.sender
    tx.emit(out("access", view=sender, namespace=namespace, retained=retained, result=result))
    return result


def _refuse(tx: Tx[Shared], view: View, namespace: str, retained: bool) -> str:
    sender = view.sender
    tx.emit(out("access", view=sender, namespace=namespace, retained=retained, result=REFUSED))
    return REFUSED


class _MadeEntry(Protocol):
    @property
    def state(self) -> Handle: ...


class _HoldsMade(Protocol):
    @property
    def made(self) -> frozenset[_MadeEntry]: ...


HoldsMade = TypeVar("HoldsMade", bound=_HoldsMade)
"""Globals with a ``made`` field of records that name their ``state`` generation."""


def release_request_state(tx: Tx[HoldsMade], ext: Hashable) -> None:
    """Canonical cleanup: release every namespace and pop the request's ``state``.

    Also forgets the ghost ``made`` entries of that state generation. Any
    system whose globals have such a ``made`` field can use it.
    """
    state = tx.handle("state", ext)
    if state is None:
        return
    tx.fire(state, "release")
    tx.retire(state)
    tx.put(made=frozenset(m for m in tx.g.made if m.state != state))


release_state = release_request_state
"""The earlier name of `release_request_state`, kept importable."""
