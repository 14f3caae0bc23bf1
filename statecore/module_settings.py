"""Module-level settings kept under an older module's name.

`statecore.runtime.CACHE_LIMIT` now lives in `statecore.memo`, and
`statecore.cli.PROGRESS_INTERVAL` in `statecore.cli.progress`. Code that sets
the old name (``runtime.CACHE_LIMIT = n``, a test's monkeypatch) must still
change the setting, so `forward_settings` makes assignments of those names on
the old module also assign them on the module that reads them.
"""

from __future__ import annotations

import sys
import types
from collections.abc import Mapping
from typing import Any


def forward_settings(module_name: str, owners: Mapping[str, types.ModuleType]) -> None:
    """Make ``module.NAME = value`` also set ``owners[NAME].NAME`` for each name in `owners`."""

    class _Forwarding(types.ModuleType):
        def __setattr__(self, name: str, value: Any) -> None:
            owner = owners.get(name)
            if owner is not None:
                setattr(owner, name, value)
            super().__setattr__(name, value)

    _Forwarding.__name__ = f"{module_name}.module"
    sys.modules[module_name].__class__ = _Forwarding
