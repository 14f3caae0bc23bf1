"""A tiny counter system, for the exit codes that need a well-formed model.

``SYSTEM`` holds; ``BROKEN`` violates its invariant at n == 2; ``VACUOUS``
has a `sometimes` no state satisfies.
"""

from __future__ import annotations

from statecore.properties import always, sometimes
from statecore.system import Action, Global, System, Tx


def count(tx: Tx) -> None:
    n = tx.get("n")
    tx.require(n < 3)
    tx.set("n", n + 1)


def counter(name: str, *properties: object) -> System:
    return System(
        name,
        components=[],
        globals=[Global("n", 0)],
        actions=[Action("count", "env", count)],
        properties=properties,
    )


SYSTEM = counter("tiny", always("small", "n stays within 3", lambda v: v.get("n") <= 3))
BROKEN = counter("tiny_broken", always("below_two", "n stays below 2", lambda v: v.get("n") < 2))
VACUOUS = counter("tiny_vacuous", sometimes("ten", "n reaches 10", lambda v: v.get("n") == 10))
