"""A model whose invariant raises once the queue holds two items."""

from __future__ import annotations

from statecore.properties import always
from statecore.system import Action, Global, System, Tx


def push(tx: Tx) -> None:
    queue = tx.get("queue")
    tx.require(len(queue) < 3)
    tx.set("queue", (*queue, len(queue)))


def first_two_ordered(view: object) -> bool:
    queue = view.get("queue")  # type: ignore[attr-defined]
    return len(queue) < 2 or queue[0] < queue[1] < queue[2]


SYSTEM = System(
    "property_raises",
    components=[],
    globals=[Global("queue", ())],
    actions=[Action("push", "env", push)],
    properties=[always("ordered", "the queue's first items are in order", first_two_ordered)],
)
