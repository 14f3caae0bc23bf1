"""The explorer's counterexamples: concrete paths rebuilt from its stored parents.

The explorer keeps, per visited node (a state and its monitor states, maybe
a canonical representative under symmetry), the node it came from and the
action taken. `rebuild` follows that chain back to an initial state and
replays the actions forward (`statecore.traces.path.take`), each renamed to fit the
concrete state reached so far, so a trace is a real path of the model. The
`ModelError` messages of a misbehaving model, with the trace that reached
the state, are worded here too.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any

from ..errors import (
    ActionRaisedError,
    ModelError,
    NondeterministicActionError,
    PropertyRaisedError,
)
from ..properties import EMPTY_MONITOR, MonitorState, Property
from ..system import ActionLabel, Emitted, System, SystemState
from ..traces.path import NotEnabledError, take
from ..traces.trace import Trace, TraceStep
from .stepcache import ActionFault
from .symmetry import Renaming, rename, rename_state
from .values import alike

__all__ = ["Node", "action_error", "property_error", "rebuild"]

Node = tuple[Any, ...]  # (SystemState, monitor state per monitor property...)

StepMonitors = Callable[
    [tuple[MonitorState, ...], tuple[Emitted, ...]], tuple[tuple[MonitorState, ...], Any]
]


def _chain(
    parents: Mapping[Node, tuple[Node, ActionLabel] | None], node: Node, last: ActionLabel | None
) -> tuple[list[Node], list[ActionLabel]]:
    """The nodes from an initial one to `node` (then `node` again after `last`), and the actions."""
    labels: list[ActionLabel] = []
    cursor: Node | None = node
    chain: list[Node] = []
    while cursor is not None:
        chain.append(cursor)
        parent = parents[cursor]
        if parent is None:
            break
        labels.append(parent[1])
        cursor = parent[0]
    chain.reverse()
    labels.reverse()
    if last is not None:
        labels.append(last)
        chain.append(chain[-1])
    return chain, labels


def rebuild(
    system: System,
    parents: Mapping[Node, tuple[Node, ActionLabel] | None],
    node: Node,
    last: ActionLabel | None,
    canon: Callable[[Node], Node],
    group: Sequence[Renaming],
    step_monitors: StepMonitors,
) -> list[TraceStep]:
    """The concrete steps to `node` (then `last`), replayed from the initial state.

    Stored parents link canonical representatives; replaying the actions,
    renamed to fit the concrete state reached so far, rebuilds a real path.
    """
    chain, labels = _chain(parents, node, last)
    state: SystemState = next(
        init for init in system.init_states() if _same(canon((init, *chain[0][1:])), chain[0])
    )
    steps = [TraceStep(None, "", state)]
    # The concrete node, monitor states included: a renaming that maps only
    # the system state may disagree with the monitors (when the state has
    # symmetries of its own) and replay a path that does not violate.
    concrete: Node = (state, *(EMPTY_MONITOR for _ in chain[0][1:]))
    for index, (rep, label) in enumerate(zip(chain[:-1], labels), 1):
        renaming = _renaming_to(system, group, rep, concrete, steps)
        try:
            step_ = take(system, state, rename(label, renaming), index)
        except NotEnabledError:
            raise _unreplayable(system, steps, label) from None
        state = step_.state
        concrete = (state, *step_monitors(concrete[1:], step_.outputs)[0])
        steps.append(TraceStep.of(step_))
    return steps


def _same(first: Node, second: Node) -> bool:
    """Whether two nodes are one to the search (without memos, equal is not enough)."""
    return first == second and alike(first, second)


def _renaming_to(
    system: System, group: Sequence[Renaming], rep: Node, concrete: Node, steps: list[TraceStep]
) -> Renaming:
    for renaming in group:
        if rename_state(system, rep, renaming) == concrete:
            return renaming
    raise _unreplayable(system, steps[:-1], steps[-1].action)


def _unreplayable(system: System, steps: list[TraceStep], label: ActionLabel | None) -> ModelError:
    """Replaying the search's own path went elsewhere: some action is not deterministic."""
    trace = Trace(system.name, tuple(steps))
    return NondeterministicActionError(
        f"system {system.name!r}: replaying the search's path, action {label} did "
        "not do what it did during the search; an action must be a function of what it "
        "reads through its Tx (no clock, random or state kept outside the model). "
        f"The path up to it:\n{_indented(trace.table(system))}",
        trace,
    )


def action_error(system: System, fault: ActionFault, trace: Trace) -> ModelError:
    """The `ModelError` for an action that raised or is not deterministic at the end of `trace`."""
    kind = ActionRaisedError if fault.cause is not None else NondeterministicActionError
    return kind(
        f"system {system.name!r}: action {fault.label} {fault.problem}; "
        f"the state is the last of this trace:\n{_indented(trace.table(system))}",
        trace,
    )


def property_error(
    system: System, what: str, cause: Exception, last: ActionLabel | None, trace: Trace
) -> ModelError:
    """The `ModelError` for `what` (``its predicate of property 'p'``) raising `cause`."""
    where = "in the last state of this trace"
    if last is not None:
        where = f"on the outputs of {last}, taken from the last state of this trace"
    return PropertyRaisedError(
        f"system {system.name!r}: {what} raised {cause!r} {where}:\n"
        f"{_indented(trace.table(system))}",
        trace,
    )


def _indented(text: str) -> str:
    return "\n".join("    " + line for line in text.splitlines())


class PropertyFault(Exception):
    """A property's predicate, condition or router raised; `part` says which."""

    def __init__(self, prop: Property, part: str, cause: Exception) -> None:
        super().__init__(f"{part} of property {prop.id!r} raised {cause!r}")
        self.prop = prop
        self.part = part
        self.cause = cause


def router_fault(prop: Property, cause: Exception) -> PropertyFault:
    """The `PropertyFault` of a monitor whose router raised."""
    return PropertyFault(prop, "its router", cause)
