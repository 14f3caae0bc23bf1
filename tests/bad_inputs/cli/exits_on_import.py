"""A user module that calls sys.exit while it is imported (a script run as a module)."""

from __future__ import annotations

import sys

sys.exit(0)
