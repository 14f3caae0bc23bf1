"""Traces: a counterexample or witness as a list of (action, state) steps.

A `Trace` is what the explorer and the fuzzer return and what ITF files hold.
`Trace.table()` prints it for a person: one row per step with the actor, the
action and only the variables that changed.
"""

from __future__ import annotations

from collections.abc import Hashable
from dataclasses import dataclass
from typing import Any

from ..system import ActionLabel, Emitted, Slot, System, SystemState, SystemStep


@dataclass(frozen=True)
class TraceStep:
    """One step: the action taken (None for the initial state) and the state after it."""

    action: ActionLabel | None
    actor: str
    state: SystemState
    outputs: tuple[Emitted, ...] = ()

    @classmethod
    def of(cls, step_: SystemStep) -> TraceStep:
        """The trace step for the model's `step_`: its action, actor, state and outputs."""
        return cls(step_.action, step_.actor, step_.state, step_.outputs)


@dataclass(frozen=True)
class Trace:
    """A path through a system, with what it shows.

    `property_id` names the property the trace violates (or witnesses, for
    ``sometimes``); `verdict` is ``"violated"`` or ``"witness"``; `detail`
    says what went wrong in the last state.
    """

    system: str
    steps: tuple[TraceStep, ...]
    property_id: str = ""
    verdict: str = "violated"
    detail: str = ""

    @property
    def actions(self) -> tuple[ActionLabel, ...]:
        """The actions of the trace, without the initial state."""
        return tuple(s.action for s in self.steps if s.action is not None)

    def __len__(self) -> int:
        """The number of actions (the initial state is not one)."""
        return len(self.steps) - 1

    def table(self, system: System) -> str:
        """A readable table: step, actor, action, changed variables only."""
        rows: list[tuple[str, str, str, str]] = []
        before: dict[str, Any] = {}
        for index, item in enumerate(self.steps):
            now = system.view(item.state).as_dict()
            changed = {k: v for k, v in now.items() if before.get(k, _MISSING) != v}
            label = "(initial)" if item.action is None else str(item.action)
            outputs = "".join(f"  => {_source(e)}{e.output}" for e in item.outputs)
            rows.append(
                (str(index), item.actor, label + outputs, _changes(changed, before, index == 0))
            )
            before = now
        widths = [max(len(r[i]) for r in [*rows, _HEADER]) for i in range(3)]
        lines = [_row(_HEADER, widths)]
        lines.append("-" * (sum(widths) + 9 + len(_HEADER[3])))
        lines.extend(_row(r, widths) for r in rows)
        if self.detail:
            lines.append(f"{self.property_id} {self.verdict}: {self.detail}")
        return "\n".join(lines)


_MISSING = object()
_HEADER = ("step", "actor", "action", "changed")


def _source(emitted: Emitted) -> str:
    return "" if emitted.source is None else f"{emitted.source!r}."


def _row(row: tuple[str, str, str, str], widths: list[int]) -> str:
    return "   ".join(cell.ljust(w) for cell, w in zip(row[:3], widths)) + "   " + row[3]


def _changes(changed: dict[str, Any], before: dict[str, Any], initial: bool) -> str:
    parts: list[str] = []
    for name, value in changed.items():
        if initial and _is_empty(value):
            continue
        parts.append(f"{name}={_show(value)}")
    return ", ".join(parts)


def _is_empty(value: Any) -> bool:
    if isinstance(value, Slot):
        return value.snapshot is None
    return value in ((), frozenset(), None, 0, False)


def _show(value: Hashable) -> str:
    if isinstance(value, Slot):
        if value.snapshot is None:
            return f"#{value.generation} (none)"
        snap = value.snapshot
        extra = ", ".join(f"{k}={stable_repr(v)}" for k, v in snap.values().items())
        return f"#{value.generation} {snap.state}" + (f" ({extra})" if extra else "")
    return stable_repr(value)


def stable_repr(value: object) -> str:
    """`repr`, but a set's items in sorted order, in tuples, lists and dicts too.

    A set prints in the order of its items' hashes, and a string's hash changes from
    one process to the next: the same trace would print differently on each run.
    """
    kind = type(value)  # exactly these types: a subclass keeps its own repr
    if isinstance(value, (frozenset, set)) and kind in (frozenset, set):
        inner = "{" + ", ".join(sorted(stable_repr(item) for item in value)) + "}"
        if not value:
            return f"{kind.__name__}()"
        return inner if kind is set else f"frozenset({inner})"
    if isinstance(value, tuple) and kind is tuple:
        items = [stable_repr(item) for item in value]
        return "(" + ", ".join(items) + ("," if len(items) == 1 else "") + ")"
    if isinstance(value, list) and kind is list:
        return "[" + ", ".join(stable_repr(item) for item in value) + "]"
    if isinstance(value, dict) and kind is dict:
        pairs = (f"{stable_repr(k)}: {stable_repr(v)}" for k, v in value.items())
        return "{" + ", ".join(pairs) + "}"
    return repr(value)
