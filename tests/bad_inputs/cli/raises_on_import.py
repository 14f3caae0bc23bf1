"""A user module that raises while it is imported (a missing setting, say)."""

from __future__ import annotations

import os

SETTINGS = {"queue_size": "2"}
QUEUE_SIZE = int(os.environ.get("STATECORE_TEST_QUEUE_SIZE") or SETTINGS["queue_sizes"])
