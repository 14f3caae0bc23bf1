"""Three independent counters up to 300: 27 million states, minutes of search.

Big enough to still be running when a test interrupts it or a bound stops it.
"""

from __future__ import annotations

from statecore.properties import always
from statecore.system import Action, Global, System, Tx

LIMIT = 300


def count(tx: Tx, which: str) -> None:
    value = tx.get(which)
    tx.require(value < LIMIT)
    tx.set(which, value + 1)


SYSTEM = System(
    "big_space",
    components=[],
    globals=[Global("a", 0), Global("b", 0), Global("c", 0)],
    actions=[Action("count", "env", count, {"which": ("a", "b", "c")})],
    properties=[always("bounded", "a never passes its limit", lambda v: v.get("a") <= LIMIT)],
)
