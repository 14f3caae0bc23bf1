"""A target factory that needs arguments: ``needs_arguments:make_system``."""

from __future__ import annotations

from tiny import counter

from statecore.system import System


def make_system(limit: int, *, name: str = "tiny") -> System:
    return counter(name)
