"""A process that imports an implementation's dependencies once, then forks one child per mutant.

Importing the code under test can take far longer than fuzzing one mutant
(vLLM-Omni's adapter: 15-50 s of imports against a 20 s fuzz). So on a
platform with ``fork``, ``statecore mutate`` starts one server per job
(``python -m statecore.fuzzing.mutate_server``). It imports what the module
imports at its top level, never the module itself, and then, for each request
line on stdin, forks a child that runs `mutate_worker.run` exactly as a fresh
process would: the mutant's import hook goes in before the module's first
import. Every child is a copy of a process that never imported the module,
so no mutant meets another or the unmutated code. The server waits for the
child under the request's timeout, kills it past that, and answers with one
JSON line: ``{"exit": code}`` or ``{"exit": "timeout"}``.

If importing the dependencies imports the module itself (a package whose
``__init__`` imports it, say), forking would hand every child the unmutated
module: the server answers ``{"unforkable": why}`` to its first line, and
``statecore mutate`` falls back to a fresh process per mutant.
"""

from __future__ import annotations

import ast
import importlib
import importlib.util
import json
import os
import signal
import sys
import time
from typing import Any

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
    """Import `module`'s dependencies here; why forking cannot isolate it, or ""."""
    try:
        found = dependencies(filename, module)
    except (OSError, SyntaxError, ImportError):  # the child meets the same, and reports it
        found = []
    for name in (*ALWAYS, *found):
        try:
            importlib.import_module(name)
        except Exception:  # the child meets the same error, and reports it
            continue
    if module in sys.modules:
        return f"importing its dependencies imports {module} itself"
    return ""


def serve(request: dict[str, Any]) -> None:
    """Answer each request line on stdin by forking a child that runs it (see the module doc)."""
    why = preload(request["filename"], request["module"])
    for line in sys.stdin:
        if why:
            _answer({"unforkable": why})
            continue
        job = json.loads(line)
        pid = os.fork()
        if pid == 0:  # pragma: no cover - the child leaves through os._exit
            _child(job)
        _answer({"exit": _wait(pid, job.get("timeout"))})


def _child(job: dict[str, Any]) -> None:
    """Run `job` as `mutate_worker.main` would, its output kept off the answer channel."""
    code = 3
    try:
        os.dup2(2, 1)  # what the fuzz prints must not reach the server's answers
        sys.stdin = open(os.devnull, encoding="utf-8")  # noqa: SIM115 - the child exits
        from .mutate_worker import write_result

        code = write_result(job)
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


def _answer(message: dict[str, Any]) -> None:
    sys.stdout.write(json.dumps(message) + "\n")
    sys.stdout.flush()


def main() -> int:
    request = json.loads(sys.stdin.readline())
    serve(request)
    return 0


if __name__ == "__main__":
    sys.exit(main())
