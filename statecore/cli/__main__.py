"""``python -m statecore.cli``: the ``statecore`` command, as ``python -m statecore``."""

from __future__ import annotations

from . import main

if __name__ == "__main__":
    raise SystemExit(main())
