"""The fuzzing docs show what their code prints, and their commands work as shown.

* ``docs/adapters.md``, ``docs/concepts.md`` and ``docs/tutorial.md``: every
  ```python block runs, in order, in one namespace (as ``tests/test_docs.py`` runs
  them), and what a block prints is the ```text block right after it (trailing
  spaces aside).
* The adapters page's model, service and adapter, written to a module, fuzz and
  replay from the command line as the page says, with ``--adapter
  package.module:object`` (a class or a factory) and ``--target``; a failing
  ``fuzz_test`` prints a replay command that reproduces the finding.
"""

from __future__ import annotations

import contextlib
import io
import json
import os
import re
import shlex
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any

import pytest

from statecore.cli import main

ROOT = Path(__file__).resolve().parent.parent
FENCE = re.compile(r"^```(?P<lang>[\w-]*)[^\n]*\n(?P<body>.*?)^```", re.M | re.S)


def python_with_output(page: Path) -> list[tuple[str, str | None]]:
    """Each python block of `page` with the text block right after it (or None)."""
    found: list[tuple[str, str | None]] = []
    fences = list(FENCE.finditer(page.read_text(encoding="utf-8")))
    for index, match in enumerate(fences):
        if match.group("lang") != "python":
            continue
        shown = None
        if index + 1 < len(fences) and fences[index + 1].group("lang") == "text":
            between = page.read_text(encoding="utf-8")[match.end() : fences[index + 1].start()]
            if not between.strip():
                shown = fences[index + 1].group("body")
        found.append((match.group("body"), shown))
    return found


def _lines(text: str) -> list[str]:
    return [line.rstrip() for line in text.strip("\n").splitlines()]


@pytest.mark.parametrize("name", ["adapters.md", "concepts.md", "tutorial.md"])
def test_the_page_prints_what_it_shows(
    name: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    namespace: dict[str, object] = {"__name__": f"docs_{name.removesuffix('.md')}"}
    for number, (code, shown) in enumerate(python_with_output(ROOT / "docs" / name), start=1):
        printed = io.StringIO()
        with contextlib.redirect_stdout(printed):
            exec(compile(code, f"{name}[python block {number}]", "exec"), namespace)
        if shown is not None:
            assert _lines(printed.getvalue()) == _lines(shown), (
                f"docs/{name}, python block {number} now prints:\n{printed.getvalue()}"
            )


def shop_module(directory: Path) -> Path:
    """The adapters page's definitions (its first blocks, up to the adapter) as shop.py."""
    blocks = [code for code, _ in python_with_output(ROOT / "docs" / "adapters.md")]
    upto = next(i for i, code in enumerate(blocks) if "class ShopAdapter" in code)
    source = "\n\n".join(blocks[: upto + 1])
    source += textwrap.dedent(
        """

        def make_adapter():
            return ShopAdapter()


        ADAPTER_INSTANCE = ShopAdapter()
        """
    )
    path = directory / "shop.py"
    path.write_text(source, encoding="utf-8")
    return path


@pytest.fixture
def shop(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    shop_module(tmp_path)
    monkeypatch.chdir(tmp_path)
    monkeypatch.syspath_prepend(str(tmp_path))
    for name in [m for m in sys.modules if m == "shop"]:
        del sys.modules[name]
    return tmp_path


def test_the_commands_of_the_adapters_page_work(
    shop: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["fuzz", "shop:SHOP", "--adapter", "shop:ShopAdapter"]) == 1
    out = capsys.readouterr().out
    assert "found by the guided phase" in out and "conformance conformance" in out
    trace = Path("statecore-traces/shop.shop_ShopAdapter.conformance.itf.json")
    assert trace.exists()
    command = f"statecore replay {trace} --target shop:SHOP --adapter shop:ShopAdapter"
    assert f"  replay: {command}" in out
    assert main(shlex.split(command)[1:]) == 1
    replayed = capsys.readouterr().out
    assert replayed.count("conformance violated") == 1
    assert replayed.rstrip().endswith("conformance at step 4")


def test_a_factory_works_as_the_adapter_and_an_instance_is_refused(
    shop: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["fuzz", "shop:SHOP", "--adapter", "shop:make_adapter", "--json"]) == 1
    assert '"kind": "conformance"' in capsys.readouterr().out
    assert main(["fuzz", "shop:SHOP", "--adapter", "shop:ADAPTER_INSTANCE"]) == 2
    assert "is an adapter instance" in capsys.readouterr().err


def test_a_users_adapter_in_a_trace_header_is_imported_only_when_named_again(
    shop: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["fuzz", "shop:SHOP", "--adapter", "shop:ShopAdapter"]) == 1
    trace = "statecore-traces/shop.shop_ShopAdapter.conformance.itf.json"
    capsys.readouterr()
    assert main(["replay", trace]) == 2
    err = capsys.readouterr().err
    assert "pass --adapter shop:ShopAdapter" in err
    assert main(["replay", trace, "--target", "shop:SHOP", "--adapter", "shop:make_adapter"]) == 2
    err = capsys.readouterr().err
    assert "names adapter 'shop:ShopAdapter' but --adapter is 'shop:make_adapter'" in err
    assert main(["replay", trace, "--adapter", "shop:ShopAdapter"]) == 2
    assert "pass --target shop:SHOP" in capsys.readouterr().err


def test_a_broken_adapter_module_is_one_line(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    shop_module(tmp_path)
    (tmp_path / "broken.py").write_text("import shop\nraise KeyError('carrier')\n")
    monkeypatch.chdir(tmp_path)
    monkeypatch.syspath_prepend(str(tmp_path))
    assert main(["fuzz", "shop:SHOP", "--adapter", "broken:Adapter"]) == 2
    err = capsys.readouterr().err
    assert err.startswith(
        "statecore: error: adapter 'broken:Adapter': importing it raised KeyError"
    )
    assert len(err.strip().splitlines()) == 1
    assert main(["fuzz", "shop:SHOP", "--adapter", "shop:Nothing"]) == 2
    assert "'shop' has no 'Nothing'" in capsys.readouterr().err


def test_a_trace_from_the_pytest_plugin_replays_with_the_command_it_prints(
    shop: Path,
) -> None:
    (shop / "test_shop_fuzz.py").write_text(
        "from shop import SHOP, ShopAdapter\n"
        "from statecore.fuzzing.pytest_plugin import fuzz_test\n\n"
        "test_shop = fuzz_test(SHOP, ShopAdapter)\n",
        encoding="utf-8",
    )
    env = {
        **os.environ,
        "PYTHONPATH": os.pathsep.join([str(shop), os.environ.get("PYTHONPATH", "")]),
    }
    done = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "test_shop_fuzz.py"],
        cwd=shop,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert done.returncode == 1, done.stdout + done.stderr
    line = next(
        line for line in done.stdout.splitlines() if line.lstrip().startswith("replay: statecore")
    )
    command = line.split("replay: ", 1)[1]
    assert "--target shop:SHOP --adapter shop:ShopAdapter" in command
    again = subprocess.run(
        shlex.split(command.replace("statecore", f"{sys.executable} -m statecore.cli", 1)),
        cwd=shop,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert again.returncode == 1, again.stdout + again.stderr
    assert "conformance at step" in again.stdout


def test_a_trace_naming_no_adapter_replays_with_the_adapter_named(
    shop: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # What the pytest plugin writes for an adapter it cannot name (a lambda):
    # no adapter and no target in the header, only the system's name.
    import shop as module  # type: ignore[import-not-found]

    from statecore.fuzzing.fuzz import fuzz
    from statecore.traces.itf import write_itf

    report = fuzz(module.SHOP, lambda: module.ShopAdapter())
    assert report.finding is not None
    trace = write_itf(report.finding.trace, module.SHOP, shop / "plugin.itf.json")
    assert main(["replay", str(trace)]) == 2
    err = capsys.readouterr().err
    assert "a conformance trace records what an implementation did" in err
    assert "--adapter" in err and "has no property" not in err
    argv = ["replay", str(trace), "--target", "shop:SHOP", "--adapter", "shop:ShopAdapter"]
    assert main(argv) == 1
    assert "conformance at step 4" in capsys.readouterr().out


def test_another_system_of_ones_own_runs_as_the_implementation(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    blocks = [code for code, _ in python_with_output(ROOT / "docs" / "tutorial.md")]
    upto = next(i for i, code in enumerate(blocks) if "BUGGY = build(" in code)
    definitions = [b for b in blocks[: upto + 1] if "def " in b or "BUGGY" in b]
    (tmp_path / "uploads.py").write_text("\n\n".join(definitions), encoding="utf-8")
    monkeypatch.chdir(tmp_path)
    monkeypatch.syspath_prepend(str(tmp_path))
    argv = ["fuzz", "uploads:UPLOADS", "--adapter", "model:uploads:BUGGY", "--json"]
    assert main(argv) == 1
    report = json.loads(capsys.readouterr().out)
    assert report["adapter"] == "model:uploads:BUGGY" and report["found_in"] == "guided"
    assert report["finding"]["replay"].endswith(
        "--target uploads:UPLOADS --adapter model:uploads:BUGGY"
    )
    assert main(shlex.split(report["finding"]["replay"])[1:]) == 1


def test_the_plugin_option_table_lists_what_the_plugin_registers() -> None:
    """docs/vllm-omni.md's option table: every option the plugin adds, with its default."""
    from statecore.fuzzing.pytest_plugin import pytest_addoption

    registered: dict[str, Any] = {}

    class Group:
        def addoption(self, name: str, **kwargs: Any) -> None:
            registered[name] = kwargs

    class Parser:
        def getgroup(self, *args: Any) -> Group:
            return Group()

    pytest_addoption(Parser())  # type: ignore[arg-type]
    page = (Path(__file__).parents[1] / "docs" / "vllm-omni.md").read_text()
    rows = dict(re.findall(r"^\| `(--statecore-[a-z-]+)[^`]*` \| ([^|]+) \|", page, re.M))
    assert sorted(rows) == sorted(registered)
    for name, kwargs in registered.items():
        shown = rows[name].strip()
        if kwargs.get("action") == "store_true":
            assert shown == "off", name
        elif kwargs["default"] is not None:
            assert shown == str(kwargs["default"]), name
        else:
            # No default of its own: the page says what runs instead.
            assert shown in {"none", "100 (the `ci` profile)"}, name
