"""``python -m statecore``: the ``statecore`` command (`statecore.cli.main`)."""

from __future__ import annotations

from .cli import main

if __name__ == "__main__":
    raise SystemExit(main())
