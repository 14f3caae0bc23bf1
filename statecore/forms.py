"""Equal values and their exact forms: ``1 == True == 1.0`` and ``0.0 == -0.0``, but a model
can tell them apart.

Every memo of statecore answers a value with what it learned on an equal one,
and a set or a dict keeps one of two equal values. That is sound only where
equal values behave alike. `strict` gives a value's form with every part's
exact type and a number's sign and digits; two equal values are `alike` if
their forms are equal. A domain that holds two equal values that are not
alike (`aliased`) is refused where it is declared: nothing keyed by value
could tell them apart.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Hashable, Iterable
from decimal import Decimal
from typing import Any

__all__ = ["PLAIN", "SPELLED", "aliased", "alike", "strict"]

PLAIN = frozenset({int, bool, str, bytes, type(None)})
"""Types whose equal values of the one type behave alike: their value is their form."""
SPELLED = frozenset({float, complex, Decimal})
"""Numbers whose equal values can still differ (sign of zero, digits): their repr tells."""


def strict(value: Any) -> Hashable:
    """`value` as a form that tells apart what ``==`` does not."""
    kind = type(value)
    if kind in PLAIN:
        return kind, value
    if kind in SPELLED:
        return kind, repr(value)
    if isinstance(value, tuple):  # records, slots and snapshots too
        return kind, tuple([strict(item) for item in value])
    if isinstance(value, frozenset):
        return kind, frozenset([strict(item) for item in value])
    if dataclasses.is_dataclass(value):  # its fields (not its InitVars or ClassVars)
        return kind, tuple([strict(getattr(value, f.name)) for f in dataclasses.fields(value)])
    return kind, value  # anything else: its equality is its own to define


def alike(first: Any, second: Any) -> bool:
    """Whether two equal values are alike in every part (have one `strict` form); cheap
    where they share parts, as a renamed value and its cache entry mostly do."""
    if first is second:
        return True
    kind = type(first)
    if kind is not type(second):
        return False
    if kind in PLAIN:
        return True
    if isinstance(first, tuple):  # equal tuples: as long as each other
        return all([alike(a, b) for a, b in zip(first, second)])
    if isinstance(first, frozenset):  # equal sets: each item has its one equal in the other
        if len(first) != len(second):
            return False
        others = {item: item for item in second}
        return all([alike(item, others.get(item, _NONE)) for item in first])
    return strict(first) == strict(second)


_NONE = object()  # no equal item: alike nothing but itself


def aliased(values: Iterable[Hashable]) -> tuple[Hashable, Hashable] | None:
    """Two of `values` that are equal but not alike (1 and True, 0.0 and -0.0), if any."""
    first: dict[Hashable, Hashable] = {}
    for value in values:
        seen = first.setdefault(value, value)
        if not alike(seen, value):
            return seen, value
    return None
