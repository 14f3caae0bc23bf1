"""The ``request-state-accessor`` adapter: `RequestStateAccessor` against `request_state_system`.

`AccessorBinding` drives the reference runtime of seed 000
(`statecore.models.implementations.request_state`) in lockstep with the
`request_state_system` model (`statecore.models.request_state`), so the
runtime can be fuzzed by name::

    statecore fuzz request_state_system --adapter request-state-accessor

Each model step maps to the accessor calls the chunk-transfer adapter's glue
makes at that point (see `AccessorBinding`); after every step the accessor's
status, held namespaces, access results and view liveness are compared with
what the model predicts. Standard library and statecore only.
"""

from __future__ import annotations

from collections.abc import Hashable
from typing import Any

from statecore.adapter import Adapter
from statecore.system import Handle, StateView, System, SystemState, SystemStep

from ..implementations.request_state import Access, RequestStateAccessor, RequestStateView
from ..request_state_machines import NAMESPACES, namespace_var
from ..request_state_records import Shared

__all__ = ["NS", "AccessorBinding"]

NS: tuple[str, ...] = NAMESPACES
"""The namespaces the model declares (the accessor is built with the same ones)."""

# The accessor's `Access.status` -> the model's ``access`` output ``result``.
_MODEL_STATUS = {"created": "created", "reused": "reused", "detached": "refused"}


class AccessorBinding(Adapter):
    """Drive `RequestStateAccessor` the way the adapter's glue would, from model steps.

    Each model step maps to the accessor calls the chunk-transfer adapter
    makes at that point: a sender token created -> ``open(ext, owner)``; the
    producer's accesses -> ``view(ext, owner).resolve``; retained accesses ->
    the view captured by that producer; the request-state transitions taken ->
    ``complete_segment`` / ``on_failure`` / ``cleanup``.
    """

    name = "request-state-accessor"

    def setup(self, system: System) -> None:
        self.system = system
        self.accessor = RequestStateAccessor(NS)
        self.owners: dict[Handle, object] = {}
        self.views: dict[Handle, RequestStateView] = {}
        self.expected_accesses: tuple[tuple[str, str], ...] = ()
        self.observed_accesses: tuple[tuple[str, str], ...] = ()
        # The event of each request-state transition, by transition name.
        machine = system.component("state").machine
        self.events = {t.name: t.event for t in machine.transitions}

    def apply(self, step: SystemStep, before: SystemState) -> None:
        was, now = self.system.view(before), self.system.view(step.state)
        expected: list[tuple[str, str]] = []
        observed: list[tuple[str, str]] = []
        for ext in self.system.component("sender").key_values:
            old, new = was.slot("sender", ext), now.slot("sender", ext)
            if new.snapshot is not None and new.generation != old.generation:
                handle = Handle("sender", ext, new.generation)
                self.owners[handle] = object()
                self.accessor.open(str(ext), owner=self.owners[handle])
        for emitted in step.outputs:
            output = emitted.output
            if output.name != "access":
                continue
            sender: Handle = output.get("view")
            if not output.get("retained"):
                self.views[sender] = self.accessor.view(str(sender.key), owner=self.owners[sender])
            access: Access[list[Any]] = self.views[sender].resolve(output.get("namespace"), list)
            expected.append((output.get("namespace"), output.get("result")))
            observed.append((output.get("namespace"), _MODEL_STATUS[access.status]))
        ext = self.system.component("state").key_values[0]
        for taken in step.taken:
            if taken.component != "state":
                continue
            event = self.events[taken.transition]
            if event == "complete_segment":
                self.accessor.complete_segment(str(ext))
            elif event == "send_failed":
                self.accessor.on_failure(str(ext))
            elif event == "release":
                self.accessor.cleanup(str(ext))
        self.expected_accesses = tuple(expected)
        self.observed_accesses = tuple(observed)

    def observe(self) -> Hashable:
        ext = str(self.system.component("state").key_values[0])
        views = tuple(sorted((h.generation, v.active) for h, v in self.views.items()))
        return (
            ("status", self.accessor.status(ext)),
            ("held", self.accessor.held(ext)),
            ("accesses", self.observed_accesses),
            ("views", views),
        )

    def expect(self, view: StateView[Shared]) -> Hashable:
        ext = self.system.component("state").key_values[0]
        snap = view.snapshot("state", ext)
        held = (
            frozenset()
            if snap is None
            else frozenset(ns for i, ns in enumerate(NS) if getattr(snap, namespace_var(i)))
        )
        views = tuple(
            sorted(
                (retained.sender.generation, view.snapshot(retained.state) is not None)
                for retained in view.g.views
            )
        )
        return (
            ("status", None if snap is None else snap.state),
            ("held", held),
            ("accesses", self.expected_accesses),
            ("views", views),
        )
