"""Targets that are neither a System nor a Machine."""

from __future__ import annotations

SYSTEM = {"name": "tiny", "actions": []}


def make_system() -> int:
    return 42
