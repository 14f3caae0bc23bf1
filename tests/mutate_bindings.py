"""An adapter of the reference accessor that also checks what ``cleanup`` of an unknown id returns.

The bundled ``request-state-accessor`` binding never looks at that value, so
a mutant of it survives there; ``statecore mutate --also`` fuzzes this one
after it (``tests/test_mutate_server.py``).
"""

from __future__ import annotations

from collections.abc import Hashable
from typing import Any

from statecore.models.bindings.request_state import AccessorBinding

from statecore.system import StateView, SystemState, SystemStep


class CleanupReturnBinding(AccessorBinding):
    """`AccessorBinding`, plus ``cleanup`` of an id never opened, which must return False."""

    name = "request-state-accessor-cleanup-return"

    def apply(self, step: SystemStep, before: SystemState) -> None:
        super().apply(step, before)
        self.unknown_cleanup = self.accessor.cleanup("never-opened")

    def observe(self) -> Hashable:
        return (super().observe(), ("unknown cleanup", getattr(self, "unknown_cleanup", False)))

    def expect(self, view: StateView[Any]) -> Hashable:
        return (super().expect(view), ("unknown cleanup", False))
