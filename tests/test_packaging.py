"""The distribution: one top-level package, models and spec inside it, a console script."""

from __future__ import annotations

import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent


@pytest.fixture(scope="module")
def wheel(tmp_path_factory: pytest.TempPathFactory) -> zipfile.ZipFile:
    out = tmp_path_factory.mktemp("wheel")
    subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "--no-deps", "-q", "-w", str(out), str(ROOT)],
        check=True,
        capture_output=True,
    )
    (path,) = out.glob("statecore-*.whl")
    return zipfile.ZipFile(path)


def test_models_and_spec_ship_inside_statecore_only(wheel: zipfile.ZipFile) -> None:
    names = wheel.namelist()
    tops = {name.split("/")[0] for name in names if not name.startswith("statecore-")}
    assert tops == {"statecore"}
    assert "statecore/models/__init__.py" in names
    assert "statecore/models/chunk_transfer.py" in names
    assert "statecore/spec/chunk_transfer.py" in names
    assert "statecore/py.typed" in names


def test_console_script_and_pytest_plugin_are_declared(wheel: zipfile.ZipFile) -> None:
    entry_points = next(n for n in wheel.namelist() if n.endswith("entry_points.txt"))
    text = wheel.read(entry_points).decode()
    assert "statecore = statecore.cli:main" in text
    assert "statecore = statecore.pytest_plugin" in text


def test_the_runtime_core_has_no_dependencies(wheel: zipfile.ZipFile) -> None:
    metadata = next(n for n in wheel.namelist() if n.endswith("METADATA"))
    requires = [
        line
        for line in wheel.read(metadata).decode().splitlines()
        if line.startswith("Requires-Dist:") and "extra ==" not in line
    ]
    assert requires == []
