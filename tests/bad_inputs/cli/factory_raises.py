"""A target factory that takes no arguments but raises: ``factory_raises:make_system``."""

from __future__ import annotations

from statecore.system import System


def make_system() -> System:
    bounds = {"ids": 2}
    return System(f"ids_{bounds['chunks']}", components=[], actions=[])
