"""The distribution: one top-level package, models and spec inside it, a console script."""

from __future__ import annotations

import subprocess
import sys
import zipfile
from pathlib import Path
from typing import Any

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
    # every module of the layout ships, and the mutants declared equivalent with them
    for folder in ("check", "cli", "fuzzing", "interop", "render", "traces"):
        assert f"statecore/{folder}/__init__.py" in names
    assert "statecore/models/bindings/vllm_omni.py" in names
    assert "statecore/models/implementations/request_state.py" in names
    assert "statecore/models/equivalent_mutants.toml" in names


def test_console_script_and_pytest_plugin_are_declared(wheel: zipfile.ZipFile) -> None:
    entry_points = next(n for n in wheel.namelist() if n.endswith("entry_points.txt"))
    text = wheel.read(entry_points).decode()
    assert "statecore = statecore.cli:main" in text
    assert "statecore = statecore.fuzzing.pytest_plugin" in text


def test_the_runtime_core_has_no_dependencies(wheel: zipfile.ZipFile) -> None:
    metadata = next(n for n in wheel.namelist() if n.endswith("METADATA"))
    requires = [
        line
        for line in wheel.read(metadata).decode().splitlines()
        if line.startswith("Requires-Dist:") and "extra ==" not in line
    ]
    assert requires == []


# -- README to green on a fresh machine -----------------------------------------------------


def readme_test_commands() -> list[str]:
    """The README's install and test commands: the first block of "Tests and benchmarks"."""
    section = (ROOT / "README.md").read_text().split("## Tests and benchmarks", 1)[1]
    body = section.split("```bash\n", 1)[1].split("```", 1)[0]
    return [line.split("#", 1)[0].strip() for line in body.splitlines() if line.strip()]


def test_the_readme_gives_an_install_command_then_a_test_command() -> None:
    assert readme_test_commands() == ["pip install -e '.[dev]'", "tox"]


def test_ci_runs_the_readme_commands_in_a_fresh_venv_then_the_ray_and_vllm_envs() -> None:
    lines = [line.strip() for line in (ROOT / ".ci" / "run").read_text().splitlines()]
    install, test = readme_test_commands()
    assert lines.index(install) < lines.index(test) < lines.index("tox -e ray")
    assert lines.index(test) < lines.index("tox -e vllm")
    assert any(line.startswith("python -m venv ") for line in lines[: lines.index(install)])


def pyproject() -> dict[str, Any]:
    try:
        import tomllib
    except ModuleNotFoundError:  # Python 3.10: pytest brings tomli
        import tomli as tomllib
    data: dict[str, Any] = tomllib.loads((ROOT / "pyproject.toml").read_text())
    return data


def test_the_dev_extra_installs_what_the_test_command_runs() -> None:
    import configparser

    tox = configparser.ConfigParser()
    tox.read(ROOT / "tox.ini")
    dev = pyproject()["project"]["optional-dependencies"]["dev"]
    assert any(req.startswith("tox>=") for req in dev)
    # The lint and type tools at the versions tox pins, so running them by hand agrees.
    for env in ("testenv:lint", "testenv:type"):
        for req in tox[env]["deps"].split():
            assert req in dev, (env, req)
    extras = {e.strip() for e in tox["testenv"]["extras"].split()}
    assert (
        f"statecore[{','.join(sorted(extras, key=['test', 'check', 'interop', 'bench'].index))}]"
        in dev
    )


def test_tox_leaves_the_vllm_environment_opt_in() -> None:
    import configparser

    tox = configparser.ConfigParser()
    tox.read(ROOT / "tox.ini")
    envs = [e.strip() for e in tox["tox"]["env_list"].split(",")]
    assert envs == ["py", "lint", "type"]
    assert "testenv:vllm" in tox


def test_the_project_urls_point_nowhere_invalid() -> None:
    urls = pyproject()["project"].get("urls", {})
    assert not any("example.invalid" in url for url in urls.values())
