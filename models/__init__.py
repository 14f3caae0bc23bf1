"""The vLLM-Omni lifecycle machines and composed systems (`statecore.models`).

`TARGETS` lists what ``statecore check`` and ``statecore list`` know by name:
the reference models, which must hold, and variants that reproduce bugs
vLLM-Omni really had, each expected to violate named properties. Each model
module declares its own ``TARGETS``; this package only gathers them.
"""

from __future__ import annotations

import importlib

from statecore.registry import Target

MODEL_MODULES: tuple[str, ...] = ("chunk_transfer",)


def _gather() -> tuple[Target, ...]:
    found: list[Target] = []
    for name in MODEL_MODULES:
        found.extend(importlib.import_module(f"{__name__}.{name}").TARGETS)
    return tuple(found)


TARGETS: tuple[Target, ...] = _gather()
