"""Values whose equal members often differ: a Hypothesis strategy and equal twins.

``0``, ``False``, ``0.0`` and ``-0.0`` are equal, and so are ``1``, ``True``,
``1.0``, ``Decimal("1.0")`` and ``Decimal("1.00")``, but a model can tell
them apart; so can it ``(1,)`` from ``(True,)``, and an id ``ext0`` from the
tuple of its parts ``("ext", 0)``. Whatever keeps one of two
equal values for the other (a memo, a packed level) must keep them apart
where they differ (`statecore.check.values.strict`).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from decimal import Decimal
from typing import Any

from hypothesis import strategies as st

from statecore.system import ModelValue

EQUALS: list[list[Any]] = [
    [0, False, 0.0, -0.0],
    [1, True, 1.0, Decimal("1.0"), Decimal("1.00")],
    ["a"],
    [ModelValue("ext", 0), ("ext", 0), ("ext", False)],  # an id equals the tuple of its parts
    [ModelValue("ext", 1), ("ext", 1), ("ext", True)],
]


@dataclasses.dataclass(frozen=True)
class Pair:
    left: Any
    right: Any


def equal_forms() -> st.SearchStrategy[Any]:
    """Such values, nested in tuples, sets and a record."""
    return st.recursive(
        st.sampled_from([value for group in EQUALS for value in group]),
        lambda inner: st.one_of(
            st.tuples(inner),
            st.tuples(inner, inner),
            st.frozensets(inner, max_size=2),
            st.builds(Pair, inner, inner),
        ),
        max_leaves=6,
    )


def twin(value: Any, draw: Callable[[Any], Any]) -> Any:
    """A value equal to `value` whose scalars are drawn from their equals (often another form)."""
    if isinstance(value, Pair):
        return Pair(twin(value.left, draw), twin(value.right, draw))
    if type(value) is tuple and not any(value in group for group in EQUALS):
        return tuple(twin(item, draw) for item in value)
    if type(value) is frozenset:
        return frozenset(twin(item, draw) for item in value)
    equals = next(group for group in EQUALS if value in group)
    return draw(st.sampled_from(equals))
