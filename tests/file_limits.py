"""A search's files: running code where no file may grow past a few bytes (a full disk), and
counting the writes of each process."""

from __future__ import annotations

import os
import resource
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest


def run_with_file_limit(code: str, size: int) -> subprocess.CompletedProcess[str]:
    """`code` run by a fresh Python whose files may grow to `size` bytes each at most
    (``RLIMIT_FSIZE``; Python ignores the signal, so a write past it fails with OSError)."""

    def limited() -> None:
        resource.setrlimit(resource.RLIMIT_FSIZE, (size, size))

    return subprocess.run(
        [sys.executable, "-c", code], preexec_fn=limited, capture_output=True, text=True
    )


def count_writes(monkeypatch: pytest.MonkeyPatch, owner: type, into: Path) -> None:
    """Each call of ``owner._write`` (in this process or a worker forked from it) leaves a
    file in `into` named after the process: the writers are the names' first parts."""
    write = owner._write  # type: ignore[attr-defined]

    def counted(self: Any) -> None:
        (into / f"{os.getpid()}-{len(list(into.iterdir()))}").touch()
        write(self)

    monkeypatch.setattr(owner, "_write", counted)


def writers(into: Path) -> set[str]:
    """The processes whose writes `count_writes` counted in `into`."""
    return {name.split("-")[0] for name in os.listdir(into)}
