"""A model whose action is not deterministic: it reads a counter outside the state."""

from __future__ import annotations

import itertools

from statecore.properties import always
from statecore.system import Action, Global, System, Tx

CLOCK = itertools.count()


def tick(tx: Tx) -> None:
    n = tx.get("n")
    tx.require(n < 3)
    tx.set("n", n + 1)
    tx.set("stamp", next(CLOCK) % 2)


SYSTEM = System(
    "nondeterministic",
    components=[],
    globals=[Global("n", 0), Global("stamp", 0)],
    actions=[Action("tick", "env", tick)],
    properties=[always("small", "n stays within 3", lambda v: v.get("n") <= 3)],
)
