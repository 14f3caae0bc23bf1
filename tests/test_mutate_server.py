"""``statecore mutate``'s fork server: dependencies imported once, each mutant in a forked child.

Forking must not change a verdict: the same mutants give the same results
forked and in fresh processes; a module that its own dependencies import is
run in fresh processes instead; a child that outlives its timeout is killed
and reported as timed out.
"""

from __future__ import annotations

import os
import sys
import textwrap
from pathlib import Path

import pytest
from test_mutate import EQUIVALENT, KILLABLE, MODULE, SURVIVOR

from statecore.fuzzing.mutate import TIMEOUT, Runner, module_file, mutate
from statecore.fuzzing.mutate_server import dependencies, preload

TARGET, ADAPTER = "request_state_system", "request-state-accessor"


def package(tmp_path: Path, name: str, files: dict[str, str]) -> Path:
    root = tmp_path / name
    root.mkdir()
    for file, text in files.items():
        (root / file).write_text(textwrap.dedent(text))
    return root


def test_the_dependencies_are_the_imports_run_at_import_time(tmp_path: Path) -> None:
    root = package(
        tmp_path,
        "pkga",
        {
            "__init__.py": "",
            "impl.py": """\
                import os, json as j
                from . import helper
                from .sub.deep import thing
                from pkga.impl import nothing_of_itself
                try:
                    import tomllib
                except ImportError:
                    import pkga.fallback
                if TYPE_CHECKING:
                    import typing_only
                def f():
                    import never_at_import
                """,
        },
    )
    found = dependencies(str(root / "impl.py"), "pkga.impl")
    assert found == ["os", "json", "pkga", "pkga.sub.deep", "tomllib"]  # not the fallback
    init = dependencies(str(root / "__init__.py"), "pkga")
    assert init == []


def test_a_package_is_never_preloaded_through_its_own_submodules(tmp_path: Path) -> None:
    # `.core` is pkgb.core: importing it would import pkgb, the module under mutation.
    text = "import os\nfrom .core import x\nfrom . import y\n"
    root = package(tmp_path, "pkgb", {"__init__.py": text})
    assert dependencies(str(root / "__init__.py"), "pkgb") == ["os"]


def preloaded(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, init: str, outside: str = "") -> str:
    """`preload` of pkgc.impl, whose package's ``__init__`` is `init`; it imports `outside`."""
    root = package(tmp_path, "pkgc", {"__init__.py": init, "impl.py": "from pkgc import helper\n"})
    (root / "helper.py").write_text("")
    if outside:
        (root / "impl.py").write_text("import extc\nfrom pkgc import helper\n")
        package(tmp_path, "extc", {"__init__.py": outside, "sub.py": ""})
    monkeypatch.syspath_prepend(str(tmp_path))
    for name in ("pkgc", "pkgc.impl", "pkgc.helper", "extc", "extc.sub"):
        monkeypatch.delitem(sys.modules, name, raising=False)
    return preload(str(root / "impl.py"), "pkgc.impl")


def test_the_modules_own_package_is_left_to_the_children(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    assert preloaded(tmp_path, monkeypatch, "from . import impl\n") == ""
    assert "pkgc.impl" not in sys.modules and "pkgc" not in sys.modules


def test_an_outside_dependency_is_preloaded(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    assert preloaded(tmp_path, monkeypatch, "", outside="from . import sub\n") == ""
    assert "extc.sub" in sys.modules and "pkgc" not in sys.modules


def test_a_dependency_that_goes_on_without_the_module_cannot_be_forked(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    outside = "try:\n    import pkgc.impl\nexcept ImportError:\n    pass\n"
    why = preloaded(tmp_path, monkeypatch, "", outside=outside)
    assert why == "extc imported without pkgc.impl (it caught the refusal)"
    assert "pkgc.impl" not in sys.modules


def test_a_failed_import_that_leaves_a_submodule_behind_cannot_be_forked(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    outside = "from . import sub\nimport pkgc.impl\n"  # extc fails; extc.sub stays
    why = preloaded(tmp_path, monkeypatch, "", outside=outside)
    assert why == "extc.sub imported without its package"


def test_an_unforkable_module_runs_in_fresh_processes(tmp_path: Path) -> None:
    # The server imports json itself: forking would hand every child the unmutated module.
    request = {
        "target": TARGET,
        "adapter": ADAPTER,
        "module": "json",
        "filename": module_file("json"),
        "functions": ["dumps"],
        "budget": None,
        "max_examples": 1,
        "seed": 0,
        "mutant": None,
    }
    with Runner(request, fork=True) as runner:
        assert runner.forked
        outcome, _ = runner.run(request, timeout=None)
        assert not runner.forked
    assert outcome == {"status": "preloaded"}  # what a fresh process says of json


def test_a_child_that_outlives_its_timeout_is_killed_and_timed_out() -> None:
    request = {
        "target": TARGET,
        "adapter": ADAPTER,
        "module": MODULE,
        "filename": module_file(MODULE),
        "functions": ["cleanup"],
        "budget": 60.0,
        "max_examples": None,
        "seed": 0,
        "mutant": None,
    }
    with Runner(request, fork=True) as runner:
        outcome, seconds = runner.run(request, timeout=0.5)
        assert runner.forked
    assert outcome == {"status": TIMEOUT}
    assert seconds < 30


def test_forked_and_fresh_runs_give_the_same_verdicts() -> None:
    def verdicts(fork: bool) -> tuple[bool, list[tuple[str, str, str, str]]]:
        report = mutate(
            TARGET,
            ADAPTER,
            MODULE,
            ["cleanup", "open"],
            budget=None,
            max_examples=5,
            seed=3,
            equivalents={EQUIVALENT: "logging only"},
            only=[KILLABLE, EQUIVALENT, SURVIVOR],
            fork=fork,
        )
        rows = [(r.mutant.id, r.status, r.kind, r.property) for r in report.results]
        return report.forked, rows

    forked, with_fork = verdicts(fork=True)
    fresh, without = verdicts(fork=False)
    assert (forked, fresh) == (True, False)
    assert with_fork == without
    assert {status for _, status, _, _ in with_fork} == {"killed", "equivalent", "survived"}


def test_a_mutant_alive_after_the_first_fuzz_is_fuzzed_through_the_others(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # The bundled binding never checks cleanup()'s value for an unknown id; this one does.
    tests = str(Path(__file__).parent)
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join([tests, *sys.path]))
    checking = (TARGET, "mutate_bindings:CleanupReturnBinding")
    report = mutate(
        TARGET,
        ADAPTER,
        MODULE,
        ["cleanup"],
        budget=None,
        max_examples=5,
        only=[KILLABLE, SURVIVOR],
        also=[checking],
    )
    by = {r.mutant.id: (r.status, r.by) for r in report.results}
    assert by[KILLABLE] == ("killed", f"{TARGET} / {ADAPTER}")  # the first fuzz kills it
    assert by[SURVIVOR] == ("killed", f"{TARGET} / {checking[1]}")
    assert report.also == (checking,)
