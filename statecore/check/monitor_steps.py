"""The monitors' steps of a search, remembered and checked for symmetry.

Stepping the monitors is pure (`statecore.traces.judge.advance_monitors`), so
a search remembers each step on the monitor states and a step's outputs, up to
`LIMIT` of them at a time, and the symmetry guard checks each step it computes
(`SymmetryGuard.check_monitor_step`): a monitor that tells symmetric ids apart
turns symmetry off. The monitor states each computed step makes are noted in
the search's values registry (`statecore.check.values`): a router that keys one
instance by ``1`` and another by ``True`` makes equal monitor states that are
not alike.
"""

from __future__ import annotations

from collections.abc import Hashable, Sequence

from ..properties import MonitorState, Property
from ..system import Emitted
from ..traces.judge import advance_monitors
from .counterexample import router_fault
from .symmetry_guard import SymmetryGuard
from .values import ValueRegistry

__all__ = ["LIMIT", "MonitorSteps", "Stepped"]

LIMIT = 1 << 16  # monitor steps remembered at most

Stepped = tuple[tuple[MonitorState, ...], list[tuple[Property, str]]]
"""The monitor states after a step, and the monitors that refused it with their details."""


class MonitorSteps:
    """`step` and `remembered`: the monitors' steps, computed and remembered."""

    def __init__(self, monitors: Sequence[Property], guard: SymmetryGuard | None) -> None:
        self.monitors = tuple(monitors)
        self.ids = tuple(p.id for p in self.monitors)
        self.guard = guard
        self.known: dict[tuple[tuple[MonitorState, ...], tuple[Emitted, ...]], Stepped] = {}
        self.values: ValueRegistry | None = None  # where the monitor states made are noted

    def step(self, states: tuple[MonitorState, ...], outputs: tuple[Emitted, ...]) -> Stepped:
        """Feed a step's outputs to every monitor: the new monitor states and refusals.

        A refused output leaves its monitor where it was, so the search goes on
        past a monitor violation: the system state is reachable all the same,
        and the other properties must still be judged there. A router that
        raises raises `statecore.check.counterexample.PropertyFault`.
        """
        return advance_monitors(self.monitors, states, outputs, router_fault)

    def remembered(self, states: tuple[MonitorState, ...], outputs: tuple[Emitted, ...]) -> Stepped:
        """`step`, remembered, and checked for symmetry when computed."""
        key = (states, outputs)
        found = self.known.get(key)
        if found is None:
            if len(self.known) >= LIMIT:
                self.known.clear()
            found = self.known[key] = self._checked(states, outputs)
        return found

    def _checked(self, states: tuple[MonitorState, ...], outputs: tuple[Emitted, ...]) -> Stepped:
        after, refusals = self.step(states, outputs)
        if self.values is not None:
            for index, state in enumerate(after):
                self.values.add(("monitor", index), state)
        if self.guard is not None:
            refused = tuple(p.id for p, _ in refusals)
            self.guard.check_monitor_step(
                self.ids, states, outputs, after, refused, self._refused_ids
            )
        return after, refusals

    def _refused_ids(
        self, states: tuple[Hashable, ...], outputs: tuple[Hashable, ...]
    ) -> tuple[tuple[Hashable, ...], tuple[str, ...]]:
        after, refusals = self.step(states, outputs)  # type: ignore[arg-type]
        return after, tuple(p.id for p, _ in refusals)
