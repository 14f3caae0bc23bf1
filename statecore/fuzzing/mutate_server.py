"""A process that imports an implementation's dependencies once, then forks one child per mutant.

Importing the code under test can take far longer than fuzzing one mutant
(vLLM-Omni's adapter: 15-50 s of imports against a 20 s fuzz). So on a
platform with ``fork``, ``statecore mutate`` starts one server per job
(``python -m statecore.fuzzing.mutate_server``). It imports what the module
imports at its top level from outside its own package (the heavy libraries),
never the module itself, and then, for each request
line on stdin, forks a child that runs `mutate_worker.run` as a fresh
process would: the mutant's import hook goes in before the module's first
import. Every child is a copy of a process that never imported the module,
so no mutant meets another or the unmutated code. The server waits for the
child under the request's timeout, kills it past that, and answers with one
JSON line: ``{"exit": code}`` or ``{"exit": "timeout"}``.

The server never imports the module: a dependency that would is refused it
and left to each child (`preload`). Where a child could still differ from a
fresh process (`preload` says when), the server answers ``{"unforkable":
why}`` to every line, and ``statecore mutate`` falls back to a fresh
process per mutant.
"""

from __future__ import annotations

import ast
import importlib
import importlib.abc
import importlib.machinery
import importlib.util
import json
import os
import signal
import sys
import time
import traceback
from collections.abc import Sequence
from types import ModuleType
from typing import Any, TextIO

__all__ = ["dependencies", "preload", "serve"]

ALWAYS = ("hypothesis", "statecore.fuzzing.fuzz", "statecore.registry")
"""Imported by every child whatever the module: worth importing once."""


def dependencies(filename: str, module: str) -> list[str]:
    """The modules `filename` (module `module`) imports at its top level, in order."""
    with open(filename, encoding="utf-8") as source:
        tree = ast.parse(source.read(), filename)
    is_package = os.path.basename(filename) == "__init__.py"
    package = module if is_package else module.rpartition(".")[0]
    names: list[str] = []
    for node in _top_level(tree.body):
        if isinstance(node, ast.Import):
            names += [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            relative = "." * node.level + (node.module or "")
            names.append(importlib.util.resolve_name(relative, package) if node.level else relative)
    own = (module, module + ".")
    return [n for n in dict.fromkeys(names) if n != module and not n.startswith(own[1])]


def _top_level(body: list[ast.stmt]) -> list[ast.stmt]:
    """Statements run at import: the body, and the bodies of its ``try`` and ``if`` blocks."""
    found: list[ast.stmt] = []
    for node in body:
        found.append(node)
        runs = isinstance(node, ast.Try) or (
            isinstance(node, ast.If) and not _is_type_checking(node.test)
        )
        if runs:
            found += _top_level(node.body) + _top_level(node.orelse)  # type: ignore[attr-defined]
    return found


def _is_type_checking(test: ast.expr) -> bool:
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING"
    )


def preload(filename: str, module: str) -> str:
    """Import `module`'s outside dependencies here, never `module`; why forking cannot isolate it.

    Only dependencies outside `module`'s own top-level package are imported
    (the heavy libraries: those are what take long), so a child imports the
    package itself as a fresh process would, in the same order. A dependency
    that would import `module` is refused it (`_Withheld`) and fails here,
    left to each child. Forking cannot isolate the mutant, and a reason is
    returned, if `module` is imported all the same, if a module caught the
    refusal and went on without it (a child would inherit it degraded), or if
    a failed import left a submodule behind without its package (a child
    would import the package in another order).
    """
    try:
        found = dependencies(filename, module)
    except (OSError, SyntaxError, ImportError):  # the child meets the same, and reports it
        found = []
    top = module.split(".")[0]
    outside = [name for name in found if name.split(".")[0] != top]
    before = set(sys.modules)
    withheld = _Withheld(module)
    sys.meta_path.insert(0, withheld)
    try:
        for name in (*ALWAYS, *outside):
            try:
                importlib.import_module(name)
            except Exception:  # withheld, or broken: the child imports it, or reports it
                continue
    finally:
        sys.meta_path.remove(withheld)
    if module in sys.modules:  # imported before (by Python, or this server)
        return f"{module} was imported before its dependencies"
    degraded = sorted(name for name in withheld.importers if name in sys.modules)
    if degraded:
        return f"{', '.join(degraded)} imported without {module} (it caught the refusal)"
    failed = {name for name in withheld.seen if name not in sys.modules}
    added = set(sys.modules) - before
    orphans = sorted(name for name in added if name.rpartition(".")[0] in failed)
    if orphans:
        return f"{', '.join(orphans)} imported without its package"
    return ""


class _Withheld(importlib.abc.MetaPathFinder):
    """Refuses to import `module` (and its submodules), noting who was importing it.

    First on ``sys.meta_path``, it also sees every import attempted (`seen`).
    """

    def __init__(self, module: str) -> None:
        self.module = module
        self.importers: set[str] = set()
        self.seen: set[str] = set()

    def find_spec(
        self, fullname: str, path: Sequence[str] | None, target: ModuleType | None = None
    ) -> importlib.machinery.ModuleSpec | None:
        self.seen.add(fullname)
        if fullname != self.module and not fullname.startswith(self.module + "."):
            return None
        self.importers.update(
            name
            for name, loaded in list(sys.modules.items())
            if getattr(getattr(loaded, "__spec__", None), "_initializing", False)
        )
        raise ImportError(f"{fullname} is imported by each mutant's child, not by the server")


def serve(request: dict[str, Any]) -> None:
    """Answer each request line on stdin by forking a child that runs it (see the module doc)."""
    # The answers get stdout to themselves: what imports and fuzzing print goes to stderr.
    answers = os.fdopen(os.dup(1), "w", encoding="utf-8")
    os.dup2(2, 1)
    why = preload(request["filename"], request["module"])
    for line in sys.stdin:
        if why:
            _answer(answers, {"unforkable": why})
            continue
        job = json.loads(line)
        pid = os.fork()
        if pid == 0:  # pragma: no cover - the child leaves through os._exit
            _child(job)
        _answer(answers, {"exit": _wait(pid, job.get("timeout"))})


def _child(job: dict[str, Any]) -> None:
    """Run `job` as `mutate_worker.main` would."""
    code = 3
    try:
        sys.stdin = open(os.devnull, encoding="utf-8")  # noqa: SIM115 - the child exits
        from .mutate_worker import write_result

        code = write_result(job)
    except BaseException:  # the server reads the last line of stderr as the reason
        traceback.print_exc()
    finally:
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(code)  # threads the mutant left running must not keep the child alive


def _wait(pid: int, timeout: float | None) -> int | str:
    """The child's exit code, or "timeout" once it outlives `timeout` seconds (it is killed)."""
    deadline = None if timeout is None else time.monotonic() + timeout
    pause = 0.001
    while True:
        done, status = os.waitpid(pid, os.WNOHANG)
        if done:
            return os.waitstatus_to_exitcode(status)
        if deadline is not None and time.monotonic() > deadline:
            os.kill(pid, signal.SIGKILL)
            os.waitpid(pid, 0)
            return "timeout"
        time.sleep(pause)
        pause = min(pause * 2, 0.05)


def _answer(answers: TextIO, message: dict[str, Any]) -> None:
    answers.write(json.dumps(message) + "\n")
    answers.flush()


def main() -> int:
    request = json.loads(sys.stdin.readline())
    serve(request)
    return 0


if __name__ == "__main__":
    sys.exit(main())
