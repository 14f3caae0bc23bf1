"""`docs/ray.md`'s way to check on a cluster, run as the page gives it.

``ray start --head`` starts a cluster of this machine alone (two CPUs, on a
free port), ``statecore check --ray auto`` runs in a process of its own, as a
user runs it, and finds that cluster; ``ray stop`` ends it. The report must
read as one process's: the same verdict, states, trace and coverage.
`tests/test_ray_search.py` checks the search itself on many systems, on a
Ray instance its own process starts; tox runs this module after that one
(``tox -e ray``), as ``ray stop`` ends every Ray process of the machine.
"""

from __future__ import annotations

import importlib.util
import re
import socket
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.skipif(
    importlib.util.find_spec("ray") is None,
    reason="Ray is not installed (pip install 'statecore[ray]'; tox -e ray)",
)

RAY = str(Path(sys.executable).with_name("ray"))  # the `ray` command of this environment
TARGET = "request_state_seed000_p1"  # a bundled variant with a counterexample: the trace too


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


def check(*options: str) -> tuple[int, str]:
    """``statecore check TARGET -q OPTIONS`` in a process of its own: exit code, output."""
    done = subprocess.run(
        [sys.executable, "-m", "statecore", "check", TARGET, "-q", *options],
        capture_output=True,
        text=True,
        timeout=300,
    )
    return done.returncode, done.stdout


def untimed(out: str) -> str:
    return re.sub(r"\d+\.\d+s|[\d,]+ states/s", "", out)


def test_check_ray_auto_finds_the_cluster_ray_start_started() -> None:
    start = [RAY, "start", "--head", f"--port={free_port()}", "--num-cpus=2"]
    started = subprocess.run(
        [*start, "--include-dashboard=false", "--disable-usage-stats"],
        capture_output=True,
        text=True,
        timeout=180,
    )
    assert started.returncode == 0, started.stdout + started.stderr
    try:
        on_ray = check("--ray", "auto", "--workers", "2")
    finally:
        subprocess.run([RAY, "stop", "--force"], capture_output=True, timeout=120)
    alone = check()
    assert on_ray[0] == alone[0] == 1  # the variant's bug, found on the cluster too
    assert f"FAIL {TARGET}: 1617 states" in on_ray[1]
    assert untimed(on_ray[1]) == untimed(alone[1])  # the verdicts, the trace, the coverage
