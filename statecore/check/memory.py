"""The resident memory of this process, for a search's memory bound."""

from __future__ import annotations

import os
import sys

__all__ = ["resident_memory"]


def resident_memory() -> int:
    """The process's resident memory in bytes (its peak where the current is not known)."""
    try:
        with open("/proc/self/statm", "rb") as statm:
            return int(statm.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")
    except (OSError, ValueError, IndexError):
        import resource

        peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
        return peak if sys.platform == "darwin" else peak * 1024
