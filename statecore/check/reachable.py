"""Every reachable state of a system, in a set: for tests and tools that compare spaces.

The explorer's own search with no property judged, so the set is the one a
check walks; where symmetry's guard or the memos' premise turns a check's
reduction off (`statecore.check.symmetry_guard`, `statecore.check.plain`),
the set is the plain search's, as the check's would be.
"""

from __future__ import annotations

from collections.abc import Hashable

from ..system import System
from .explorer import Explorer
from .plain import without_memos
from .symmetry_guard import Asymmetry
from .values import NotInterchangeable

__all__ = ["reachable"]


def reachable(system: System, symmetry: bool = False) -> set[Hashable]:
    """Every reachable system state (with `symmetry`, one per orbit; equal ones are one)."""
    explorer = Explorer(system, (), symmetry)
    try:
        try:
            explorer.run()
        except Asymmetry:
            explorer = Explorer(system, (), False)
            explorer.run()
    except NotInterchangeable:
        explorer = without_memos(Explorer(system, (), False))
        explorer.run()
    return {node[0] for node in explorer.parents}
