"""pytest integration: fuzz an implementation against a model inside your own suite.

Installed as a pytest plugin (entry point ``statecore``), it adds::

    --statecore-budget SECONDS   time budget of each statecore fuzz test
    --statecore-seed N           seed (default 0: reproducible in CI)
    --statecore-no-known         known findings fail the test too

and `fuzz_test`, which turns a System and an adapter into a test function::

    from statecore.pytest_plugin import fuzz_test
    from statecore.models.vllm_omni_adapter import (
        OmniChunkTransferAdapterBinding, fuzz_system_0_30_0)

    test_chunk_transfer = fuzz_test(fuzz_system_0_30_0, OmniChunkTransferAdapterBinding)

The test runs the ``ci`` profile for the budget (default 20 s; or
`max_examples` when given) and fails with the shrunk trace as a readable
table, plus the ITF file written under pytest's ``tmp_path``.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest

from .adapter import Adapter
from .system import System

DEFAULT_BUDGET = 20.0


def pytest_addoption(parser: pytest.Parser) -> None:
    """Register the statecore options."""
    group = parser.getgroup("statecore", "statecore stateful fuzzing")
    group.addoption(
        "--statecore-budget",
        type=float,
        default=None,
        metavar="SECONDS",
        help=f"time budget of each statecore fuzz test (default {DEFAULT_BUDGET:g})",
    )
    group.addoption("--statecore-seed", type=int, default=0, metavar="N")
    group.addoption(
        "--statecore-no-known",
        action="store_true",
        help="known findings of an adapter fail its fuzz test too",
    )


def fuzz_test(
    system: System | Callable[[], System],
    adapter_factory: Callable[[], Adapter],
    *,
    max_examples: int | None = None,
    budget: float | None = None,
) -> Callable[..., None]:
    """A pytest test function that fuzzes `adapter_factory()` against `system`."""

    def test(request: pytest.FixtureRequest, tmp_path: Path) -> None:
        from .fuzz import fuzz
        from .itf import write_itf

        config = request.config
        model = system if isinstance(system, System) else system()
        chosen = config.getoption("--statecore-budget", None) or budget
        if chosen is None and max_examples is None:
            chosen = DEFAULT_BUDGET
        report = fuzz(
            model,
            adapter_factory,
            budget=chosen,
            max_examples=max_examples if chosen is None else None,
            seed=config.getoption("--statecore-seed", 0),
            known={} if config.getoption("--statecore-no-known", False) else None,
        )
        finding = report.finding
        if finding is not None:
            path = tmp_path / f"{model.name}.{finding.property_id}.itf.json"
            write_itf(finding.trace, model, path)
            pytest.fail(
                f"{finding.kind} {finding.property_id}: {finding.detail}\n"
                f"{finding.trace.table(model)}\ntrace: {path}",
                pytrace=False,
            )

    test.__doc__ = f"statecore fuzz: {getattr(system, 'name', system)}"
    return test
