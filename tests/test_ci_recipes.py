"""The CI recipes of ``docs/vllm-omni.md`` work as written.

The page shows one job twice, as a Buildkite step and as a GitHub Actions
workflow. Here:

* always: both recipes run the same commands and keep the same artifacts, and
  what they name in this repository exists;
* under ``tox -e vllm`` (``STATECORE_CI_RECIPES=1``; CI runs it): the commands
  run as written, in order, in a fresh virtual environment, in a scratch
  repository whose ``third_party/statecore`` is this checkout, and what they
  leave is what the artifact upload picks up. The fresh environment sees the
  vLLM-Omni stack ``tox -e vllm`` installed (through a ``.pth`` file), so the
  install script finds it there, as it does in vLLM-Omni's own CI image, and
  the only network the commands need is PyPI.
"""

from __future__ import annotations

import glob
import json
import os
import re
import shutil
import subprocess
import sys
import sysconfig
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
PAGE = ROOT / "docs" / "vllm-omni.md"
YAML = re.compile(r"^```yaml\n(?P<body>.*?)^```", re.M | re.S)
CHECKOUT = "third_party/statecore"


def recipes() -> tuple[str, str]:
    buildkite, actions = (m.group("body") for m in YAML.finditer(PAGE.read_text()))
    return buildkite, actions


def buildkite_commands(text: str) -> list[str]:
    section = text.split("commands:", 1)[1].split("artifact_paths:", 1)[0]
    return [line.strip()[2:] for line in section.splitlines() if line.strip().startswith("- ")]


def buildkite_artifacts(text: str) -> list[str]:
    section = text.split("artifact_paths:", 1)[1]
    return [line.strip()[2:].strip('"') for line in section.splitlines() if line.strip()]


def actions_commands(text: str) -> list[str]:
    return [m.group(1) for m in re.finditer(r"^\s+- run: (.+)$", text, re.M)]


def actions_artifacts(text: str) -> list[str]:
    section = text.split("path: |", 1)[1]
    return [line.strip() for line in section.splitlines() if line.strip()]


def test_both_recipes_run_the_same_commands_and_keep_the_same_artifacts() -> None:
    buildkite, actions = recipes()
    commands = buildkite_commands(buildkite)
    assert commands == actions_commands(actions)
    assert commands[0] == f"pip install './{CHECKOUT}[test]'"
    (fuzz,) = [c for c in commands if "statecore fuzz " in c]
    # vLLM logs to stdout unless told not to configure logging: the JSON report would not parse.
    assert fuzz.startswith("VLLM_CONFIGURE_LOGGING=0 statecore fuzz ") and "--json >" in fuzz
    assert buildkite_artifacts(buildkite) == actions_artifacts(actions)
    assert "submodules: true" in actions


def test_what_the_recipes_name_in_this_repository_exists() -> None:
    for command in buildkite_commands(recipes()[0]):
        for path in re.findall(rf"{CHECKOUT}/(\S+)", command):
            assert (ROOT / path).is_file(), command


def test_the_recipes_install_from_a_checkout_not_from_pypi() -> None:
    for command in buildkite_commands(recipes()[0]):
        if command.startswith("pip install"):
            assert f"./{CHECKOUT}" in command, command


needs_stack = pytest.mark.skipif(
    not os.environ.get("STATECORE_CI_RECIPES"),
    reason="runs under `tox -e vllm` (STATECORE_CI_RECIPES=1), with the vLLM-Omni stack",
)


def scratch_repository(directory: Path) -> Path:
    """A repository under test with this checkout as its statecore submodule."""
    repo = directory / "repo"
    shutil.copytree(ROOT, repo / CHECKOUT, ignore=_not_source)
    return repo


_SKIP = shutil.ignore_patterns(
    ".git", ".tox", "build", "dist", "*.egg-info", "__pycache__", ".*_cache"
)


def _not_source(folder: str, names: list[str]) -> set[str]:
    """What a checkout copy leaves out: build output, caches, and the traces folder
    the CLI writes at the top (``statecore/traces``, the package, is source)."""
    skipped = set(_SKIP(folder, names))
    if Path(folder) == ROOT and "traces" in names:
        skipped.add("traces")
    return skipped


def fresh_venv(directory: Path) -> Path:
    """A new virtual environment that also sees this environment's packages, statecore aside.

    The vLLM stack ``tox -e vllm`` installed is reached through a ``.pth``
    file naming a folder of links to this environment's packages, where
    statecore is left out: the recipe installs it from the checkout.
    """
    venv = directory / "venv"
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True)
    site = subprocess.run(
        [
            str(venv / "bin" / "python"),
            "-c",
            "import sysconfig; print(sysconfig.get_path('purelib'))",
        ],
        capture_output=True,
        text=True,
        check=True,
    ).stdout.strip()
    stack = directory / "stack"
    stack.mkdir()
    for folder in {sysconfig.get_path("purelib"), sysconfig.get_path("platlib")}:
        for entry in Path(folder).iterdir():
            if "statecore" not in entry.name and not (stack / entry.name).exists():
                (stack / entry.name).symlink_to(entry)
    # Appended after the venv's own site-packages: what the recipe installs comes first.
    (Path(site) / "stack.pth").write_text(f"{stack}\n")
    return venv


@needs_stack
def test_the_recipe_commands_run_as_written(tmp_path: Path) -> None:
    repo = scratch_repository(tmp_path)
    venv = fresh_venv(tmp_path)
    env = {**os.environ, "PATH": f"{venv / 'bin'}{os.pathsep}{os.environ['PATH']}"}
    env.pop("PYTHONPATH", None)
    env["VIRTUAL_ENV"] = str(venv)
    for command in buildkite_commands(recipes()[0]):
        done = subprocess.run(
            ["bash", "-c", command],
            cwd=repo,
            env=env,
            capture_output=True,
            text=True,
            timeout=1800,
            check=False,
        )
        assert done.returncode == 0, f"{command}\n{done.stdout}\n{done.stderr}"
    where = subprocess.run(
        [str(venv / "bin" / "python"), "-c", "import statecore; print(statecore.__file__)"],
        capture_output=True,
        text=True,
        check=True,
        cwd=tmp_path,
        env=env,
    ).stdout
    assert str(venv) in where  # the checkout's statecore, installed by the recipe
    report = json.loads((repo / "statecore.json").read_text())
    assert report["ok"] is True and report["adapter"] == "vllm-omni"
    found = [
        p
        for pattern in buildkite_artifacts(recipes()[0])
        for p in glob.glob(pattern, root_dir=repo)
    ]
    assert "statecore.json" in found
