"""What both directions of `statecore.interop` share: its errors and the lazy import.

``transitions`` is imported lazily (`require_transitions`), so that ``import
statecore`` stays standard-library only.
"""

from __future__ import annotations

import importlib
from types import ModuleType
from typing import Final

from ..errors import (
    DefinitionError,
)

INSTALL_HINT: Final = "pip install 'statecore[interop]'"


class InteropError(DefinitionError):
    """A transitions definition cannot be turned into a statecore machine, or back."""


class UnsupportedFeatureError(InteropError):
    """The definition uses a transitions feature statecore cannot express."""


class UnresolvedCallbackError(InteropError):
    """A condition named by a string is neither a variable, a model attribute nor importable."""


def require_transitions() -> ModuleType:
    """Import transitions, or say how to install it (it is an optional extra).

    `importlib` rather than an import statement, so that ``mypy --strict
    statecore`` also passes where the extra is not installed.
    """
    try:
        transitions = importlib.import_module("transitions")
    except ImportError as exc:
        raise ImportError(
            "statecore.interop needs the pytransitions package ('transitions'), "
            f"which is not installed; install it with: {INSTALL_HINT}"
        ) from exc
    return transitions
