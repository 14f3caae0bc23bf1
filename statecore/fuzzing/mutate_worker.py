"""One mutant under fuzzing, in the fresh process ``statecore mutate`` starts for it.

``python -m statecore.fuzzing.mutate_worker`` reads a request (JSON on stdin:
target, adapter, module, functions, mutant id or null for the unmutated
baseline, budget, max_examples, seed, result path), installs an import hook
*before anything imports the module*, so every import of it - by the adapter,
its binding, or the models - runs the mutated code compiled in memory
(`statecore.fuzzing.source_mutants.mutated_code`, with the file's own name
and line numbers), then fuzzes and writes the outcome as JSON to the result
path. The file on disk is only read, and no bytecode is written, so the
installed module stays as it was and other processes never see the mutant.
"""

from __future__ import annotations

import importlib
import importlib.abc
import importlib.machinery
import importlib.util
import json
import os
import sys
import threading
import time
from collections.abc import Sequence
from types import CodeType, FrameType, ModuleType
from typing import Any


class _MutantLoader(importlib.machinery.SourceFileLoader):
    """Loads the module from its file's path but runs the given code object."""

    def __init__(self, fullname: str, path: str, code: CodeType) -> None:
        super().__init__(fullname, path)
        self.mutated = code

    def get_code(self, fullname: str) -> CodeType:
        return self.mutated


class _MutantFinder(importlib.abc.MetaPathFinder):
    """Finds `module` where the other finders would, with `_MutantLoader` as its loader."""

    def __init__(self, module: str, code: CodeType) -> None:
        self.module = module
        self.code = code

    def find_spec(
        self, fullname: str, path: Sequence[str] | None, target: ModuleType | None = None
    ) -> importlib.machinery.ModuleSpec | None:
        if fullname != self.module:
            return None
        for finder in sys.meta_path:
            if finder is self or not hasattr(finder, "find_spec"):
                continue
            spec = finder.find_spec(fullname, path, target)
            if spec is not None and spec.origin:
                return importlib.util.spec_from_file_location(
                    fullname, spec.origin, loader=_MutantLoader(fullname, spec.origin, self.code)
                )
        return None


def install(module: str, filename: str, functions: Sequence[str], mutant_id: str) -> None:
    """Make every later import of `module` run the mutant `mutant_id` of `filename`."""
    from .source_mutants import mutated_code

    if module in sys.modules:
        raise RuntimeError(f"{module} was imported before the mutant could be installed")
    sys.dont_write_bytecode = True
    sys.meta_path.insert(0, _MutantFinder(module, mutated_code(filename, functions, mutant_id)))


def run(request: dict[str, Any]) -> dict[str, Any]:
    """Fuzz the request's target through its adapter, the mutant (if any) in place.

    Then each ``also`` pair (target, adapter) in turn, until one finds something.
    """
    started = time.perf_counter()
    module = request["module"]
    if module in sys.modules:
        return {"status": "preloaded"}
    if request["mutant"] is not None:
        install(module, request["filename"], request["functions"], request["mutant"])
    try:
        importlib.import_module(module)
    except BaseException as exc:
        return {"status": "crashed", "detail": _text(exc)}
    from ..adapter import AdapterError
    from ..registry import resolve_adapter
    from .fuzz import fuzz

    called: set[str] = set()
    if request["mutant"] is None:
        _watch_calls(request["filename"], called)
    fuzz_seconds = 0.0
    finding, found_in, found_after, by = None, "", None, ""
    for target, adapter in [(request["target"], request["adapter"]), *request.get("also", ())]:
        by = f"{target} / {adapter}"
        system, factory, _ = resolve_adapter(target, adapter)
        try:
            report = fuzz(
                system,
                factory,
                budget=request["budget"],
                max_examples=request["max_examples"],
                seed=request["seed"],
            )
        except AdapterError as exc:
            killed = {"kind": "setup", "property": "setup", "detail": str(exc)}
            return {"status": "killed", **killed, "by": by}
        except Exception as exc:  # the fuzz itself could not go on with this implementation
            killed = {"kind": "error", "property": "fuzz", "detail": _text(exc)}
            return {"status": "killed", **killed, "by": by}
        fuzz_seconds += report.seconds
        finding, found_in, found_after = report.finding, report.found_in, report.found_after
        if finding is not None:
            break
    sys.setprofile(None)
    outcome: dict[str, Any] = {
        "status": "survived" if finding is None else "killed",
        "seconds": round(time.perf_counter() - started, 3),
        "fuzz_seconds": round(fuzz_seconds, 3),
        "imported": module in sys.modules,
        "called": sorted(called),
    }
    if finding is not None:
        outcome.update(
            kind=finding.kind,
            property=finding.property_id,
            detail=finding.detail.splitlines()[0] if finding.detail else "",
            steps=len(finding.trace),
            phase=found_in,
            found_after=None if found_after is None else round(found_after, 3),
            by=by,
        )
    return outcome


def _watch_calls(filename: str, called: set[str]) -> None:
    """Note the qualified name of every function of `filename` called from now on, any thread."""

    def profile(frame: FrameType, event: str, arg: object) -> None:
        code = frame.f_code
        if event == "call" and code.co_filename == filename:
            called.add(getattr(code, "co_qualname", code.co_name))

    sys.setprofile(profile)
    threading.setprofile(profile)


def _text(exc: BaseException) -> str:
    first = str(exc).splitlines()[0] if str(exc) else ""
    return f"{type(exc).__name__}: {first}" if first else type(exc).__name__


def write_result(request: dict[str, Any]) -> int:
    """`run` the request and write its outcome to the request's result path."""
    outcome = run(request)
    partial = request["result"] + ".partial"
    with open(partial, "w", encoding="utf-8") as out:
        json.dump(outcome, out)
    os.replace(partial, request["result"])  # whole or absent, even if the process is killed
    return 0


def main() -> int:
    return write_result(json.load(sys.stdin))


if __name__ == "__main__":
    code = main()
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(code)  # threads the mutant left running must not keep the process alive
