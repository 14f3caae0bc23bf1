"""Running code where no file may grow past a few bytes: a full disk, for a search's files."""

from __future__ import annotations

import resource
import subprocess
import sys


def run_with_file_limit(code: str, size: int) -> subprocess.CompletedProcess[str]:
    """`code` run by a fresh Python whose files may grow to `size` bytes each at most
    (``RLIMIT_FSIZE``; Python ignores the signal, so a write past it fails with OSError)."""

    def limited() -> None:
        resource.setrlimit(resource.RLIMIT_FSIZE, (size, size))

    return subprocess.run(
        [sys.executable, "-c", code], preexec_fn=limited, capture_output=True, text=True
    )
