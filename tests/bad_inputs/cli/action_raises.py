"""A model whose action raises on the third step (a division by zero)."""

from __future__ import annotations

from statecore.properties import always
from statecore.system import Action, Global, System, Tx


def count(tx: Tx) -> None:
    n = tx.get("n")
    tx.require(n < 5)
    tx.set("n", n + 1)
    tx.set("ratio", 12 // (2 - n))


SYSTEM = System(
    "action_raises",
    components=[],
    globals=[Global("n", 0), Global("ratio", 0)],
    actions=[Action("count", "env", count)],
    properties=[always("small", "n stays within 5", lambda v: v.get("n") <= 5)],
)
