"""Module paths of the flat layout, kept importable after the move into layer packages.

``statecore.explore`` is now ``statecore.check.explore``, and so on for every
module of the checking, traces, fuzzing, rendering, interop and CLI layers;
``statecore.models.vllm_omni_adapter`` is ``statecore.models.bindings.vllm_omni``,
and likewise for the other reference implementations and bindings.
Code that imports an old path gets the module itself (the same object, so
monkeypatching it works) and a `DeprecationWarning` naming the new path.
"""

from __future__ import annotations

import importlib
import importlib.abc
import importlib.machinery
import importlib.util
import sys
import warnings
from collections.abc import Sequence
from types import ModuleType

MOVED: dict[str, str] = {
    f"statecore.{old}": f"statecore.{new}"
    for old, new in {
        "explore": "check.explore",
        "results": "check.results",
        "counterexample": "check.counterexample",
        "stepcache": "check.stepcache",
        "symmetry": "check.symmetry",
        "symmetry_guard": "check.symmetry_guard",
        "mutation": "check.mutation",
        "adequacy": "check.adequacy",
        "symbolic": "check.symbolic",
        "trace": "traces.trace",
        "path": "traces.path",
        "judge": "traces.judge",
        "replay": "traces.replay",
        "verify": "traces.verify",
        "itf": "traces.itf",
        "itf_json": "traces.itf_json",
        "itf_values": "traces.itf_values",
        "regression": "traces.regression",
        "fuzz": "fuzzing.fuzz",
        "guided": "fuzzing.guided",
        "interpreter": "fuzzing.interpreter",
        "shrink": "fuzzing.shrink",
        "pytest_plugin": "fuzzing.pytest_plugin",
        "diagram": "render.diagram",
        "diagram_diff": "render.diagram_diff",
        "diagram_doc": "render.diagram_doc",
        "overlay": "render.overlay",
        "overview": "render.overview",
        "drawing": "render.drawing",
        "mermaid": "render.mermaid",
        "dot": "render.dot",
        "docgen": "render.docgen",
        "interop_errors": "interop.errors",
        "interop_export": "interop.to_transitions",
        "interop_config": "interop.config",
        "interop_callbacks": "interop.callbacks",
        "interop_import": "interop.from_transitions",
        "cli_check": "cli.check",
        "cli_common": "cli.common",
        "cli_fuzz": "cli.fuzz",
        "cli_progress": "cli.progress",
        "cli_replay": "cli.replay",
    }.items()
}
MOVED.update(
    {
        f"statecore.models.{old}": f"statecore.models.{new}"
        for old, new in {
            "request_state_impl": "implementations.request_state",
            "stream_edge_impl": "implementations.stream_edge",
            "request_state_adapter": "bindings.request_state",
            "stream_edge_adapter": "bindings.stream_edge",
            "vllm_omni_adapter": "bindings.vllm_omni",
            "vllm_omni_harness": "bindings.vllm_omni_harness",
            "vllm_omni_mutants": "bindings.vllm_omni_mutants",
        }.items()
    }
)


class _Moved(importlib.abc.MetaPathFinder, importlib.abc.Loader):
    """Finds an old module path and loads it as the module at its new path."""

    def find_spec(
        self, fullname: str, path: Sequence[str] | None, target: ModuleType | None = None
    ) -> importlib.machinery.ModuleSpec | None:
        if fullname not in MOVED:
            return None
        return importlib.util.spec_from_loader(fullname, self)

    def create_module(self, spec: importlib.machinery.ModuleSpec) -> None:
        return None  # a placeholder; exec_module puts the real module in its place

    def exec_module(self, module: ModuleType) -> None:
        # The import system reads the module back from sys.modules: put the
        # real one there under the old name, leaving its own spec untouched.
        old = module.__name__
        new = MOVED[old]
        warnings.warn(
            f"{old} moved to {new}; import it from there", DeprecationWarning, stacklevel=2
        )
        sys.modules[old] = importlib.import_module(new)


def install() -> None:
    """Make the old module paths importable (once)."""
    if not any(isinstance(finder, _Moved) for finder in sys.meta_path):
        sys.meta_path.append(_Moved())
