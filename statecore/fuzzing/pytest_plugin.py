"""pytest integration: fuzz an implementation against a model inside your own suite.

Installed as a pytest plugin (entry point ``statecore``), it adds::

    --statecore-max-examples N   search examples of each statecore fuzz test
    --statecore-budget SECONDS   search for this long instead
    --statecore-seed N           seed (default 0: reproducible in CI)
    --statecore-no-known         known findings fail the test too
    --statecore-database DB      a directory or redis://host:port/db: stored findings
                                 replay first, new ones are stored (for later runs and
                                 for the other pytest-xdist workers)

and `fuzz_test`, which turns a System and an adapter into a test function::

    from statecore.fuzzing.pytest_plugin import fuzz_test
    from statecore.models.bindings.vllm_omni import (
        OmniChunkTransferAdapterBinding, fuzz_system_0_30_0)

    test_chunk_transfer = fuzz_test(fuzz_system_0_30_0, OmniChunkTransferAdapterBinding)

The test runs what ``statecore fuzz`` and `statecore.fuzzing.fuzz.fuzz` run by
default: the guided phase, then the ``ci`` profile's 100 search examples
(`max_examples` or `budget`, or the command-line options, change that). It
fails with the shrunk trace as a readable table, the ITF file written under
pytest's ``tmp_path`` and the ``statecore replay`` command that re-runs it.
"""

from __future__ import annotations

import importlib
import sys
from collections.abc import Callable, Iterable
from pathlib import Path
from types import ModuleType

import pytest

from ..adapter import Adapter
from ..system import System


def pytest_addoption(parser: pytest.Parser) -> None:
    """Register the statecore options."""
    group = parser.getgroup("statecore", "statecore stateful fuzzing")
    group.addoption(
        "--statecore-max-examples",
        type=int,
        default=None,
        metavar="N",
        help="search examples of each statecore fuzz test (default: the ci profile's, 100)",
    )
    group.addoption(
        "--statecore-budget",
        type=float,
        default=None,
        metavar="SECONDS",
        help="search each statecore fuzz test for this long instead",
    )
    group.addoption("--statecore-seed", type=int, default=0, metavar="N")
    group.addoption(
        "--statecore-no-known",
        action="store_true",
        help="known findings of an adapter fail its fuzz test too",
    )
    group.addoption(
        "--statecore-database",
        default=None,
        metavar="DIR|redis://HOST:PORT/DB",
        help="a Hypothesis example database shared by the fuzz tests (and pytest-xdist "
        "workers, and later runs): stored findings replay first, new ones are stored",
    )


def fuzz_test(
    system: System | Callable[[], System],
    adapter_factory: Callable[[], Adapter],
    *,
    max_examples: int | None = None,
    budget: float | None = None,
) -> Callable[..., None]:
    """A pytest test function that fuzzes `adapter_factory()` against `system`.

    The command line's ``--statecore-max-examples`` or ``--statecore-budget``
    wins over `max_examples` and `budget`; with none of them the run is
    `statecore.fuzzing.fuzz.fuzz`'s default.
    """

    def test(request: pytest.FixtureRequest, tmp_path: Path) -> None:
        from ..traces.itf import write_itf
        from .finding_store import open_database
        from .fuzz import fuzz

        config = request.config
        model = system if isinstance(system, System) else system()
        chosen_examples = config.getoption("--statecore-max-examples", None)
        chosen_budget = config.getoption("--statecore-budget", None)
        shared = config.getoption("--statecore-database", None)
        if chosen_examples is None and chosen_budget is None:
            chosen_examples, chosen_budget = max_examples, budget
        report = fuzz(
            model,
            adapter_factory,
            budget=chosen_budget,
            max_examples=chosen_examples,
            seed=config.getoption("--statecore-seed", 0),
            known={} if config.getoption("--statecore-no-known", False) else None,
            database=open_database(shared) if shared else None,
        )
        finding = report.finding
        if finding is not None:
            # A System instance is named by a global of the adapter's module (where
            # models and adapters usually live) or else of the test's.
            modules = [_module_of(adapter_factory), getattr(request, "module", None)]
            names = {
                "target": importable_name(system, modules),
                "adapter": importable_name(adapter_factory, modules),
            }
            meta = {key: value for key, value in names.items() if value}
            path = tmp_path / f"{model.name}.{finding.property_id}.itf.json"
            write_itf(finding.trace, model, path, meta=meta)
            target = names["target"] or "package.module:SYSTEM"
            adapter = names["adapter"] or "package.module:ADAPTER"
            pytest.fail(
                f"{finding.kind} {finding.property_id}: {finding.detail}\n"
                f"{finding.trace.table(model)}\ntrace: {path}\n"
                f"replay: statecore replay {path} --target {target} --adapter {adapter}",
                pytrace=False,
            )

    test.__doc__ = f"statecore fuzz: {getattr(system, 'name', system)}"
    return test


def importable_name(obj: object, modules: Iterable[ModuleType | None] = ()) -> str | None:
    """``package.module:name`` that imports back to `obj`, or None if there is none.

    A class or function is named by its own module and qualified name; any
    other object (a System instance) by a global of the first of `modules`
    that holds it.
    """
    module_name = getattr(obj, "__module__", None)
    qualname = getattr(obj, "__qualname__", None)
    if isinstance(module_name, str) and isinstance(qualname, str) and "<" not in qualname:
        name = f"{module_name}:{qualname}"
        return name if _imports_to(name, obj) else None
    for module in modules:
        if module is None:
            continue
        for attr, value in vars(module).items():
            if value is obj and not attr.startswith("_"):
                name = f"{module.__name__}:{attr}"
                if _imports_to(name, obj):
                    return name
    return None


def _module_of(obj: object) -> ModuleType | None:
    name = getattr(obj, "__module__", None)
    module = sys.modules.get(name) if isinstance(name, str) else None
    return module if isinstance(module, ModuleType) else None


def _imports_to(name: str, obj: object) -> bool:
    module_name, _, attr = name.partition(":")
    try:
        found: object = importlib.import_module(module_name)
        for part in attr.split("."):
            found = getattr(found, part)
    except Exception:
        return False
    return found is obj
