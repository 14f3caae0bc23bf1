"""Mutation testing of an implementation under fuzzing: how much of its code a fuzz run pins down.

`mutate` makes the single-point mutants of the named functions of an
implementation module (`statecore.fuzzing.source_mutants`), runs each in a
fresh process (`statecore.fuzzing.mutate_worker`: the mutant is compiled in
memory and put in place by an import hook, so the file on disk is never
changed) that fuzzes the target through the adapter under a per-mutant
budget, and reports per mutant:

* ``killed`` - the fuzz found it (the finding's kind, property and steps);
* ``survived`` - nothing found within the budget;
* ``equivalent`` - survived, and declared equivalent with a reason (an
  equivalents file, see `load_equivalents`): no behaviour the model can
  observe changed;
* ``timeout`` - the process outlived its budget by far (a mutant that hangs);
* ``crashed`` - the mutated module does not import (not a behaviour the fuzz
  could test, so left out of the score).

The score is killed / non-equivalent, where non-equivalent leaves out the
declared equivalents and the mutants that do not import. An unmutated run
comes first: a module the adapter never imports, or an implementation that
already fails, makes every verdict meaningless and is refused.
"""

from __future__ import annotations

import json
import os
import queue
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..errors import StatecoreError
from .source_mutants import SourceMutant, source_mutants

__all__ = [
    "MutantResult",
    "MutationReport",
    "load_equivalents",
    "module_file",
    "mutate",
]

KILLED, SURVIVED, EQUIVALENT, TIMEOUT, CRASHED = (
    "killed",
    "survived",
    "equivalent",
    "timeout",
    "crashed",
)
STATUSES = (KILLED, SURVIVED, EQUIVALENT, TIMEOUT, CRASHED)

GRACE = 30.0
"""Seconds a mutant's process may run past its budget (and the baseline's start-up and
shrinking time) before it counts as hanging."""


@dataclass(frozen=True)
class MutantResult:
    """What fuzzing one mutant gave: `status`, and for a kill the finding that made it."""

    mutant: SourceMutant
    status: str
    seconds: float
    kind: str = ""
    property: str = ""
    detail: str = ""
    steps: int = 0
    phase: str = ""
    found_after: float | None = None
    reason: str = ""  # why it is equivalent, as declared
    by: str = ""  # "target / adapter" whose fuzz killed it

    def summary(self) -> str:
        """``killed (crash, 3 steps, guided 0.02s)``, ``equivalent: <reason>``, ..."""
        if self.status == KILLED:
            when = "" if self.found_after is None else f" {self.found_after:.2f}s"
            phase = f", {self.phase}{when}" if self.phase else ""
            found = self.kind if self.property == self.kind else f"{self.kind} {self.property}"
            return f"killed ({found}, {self.steps} steps{phase})"
        if self.status == EQUIVALENT:
            return f"equivalent: {self.reason}"
        if self.status == CRASHED:
            return f"crashed at import: {self.detail}"
        if self.status == TIMEOUT:
            return f"timed out after {self.seconds:.0f}s"
        return "survived"


@dataclass(frozen=True)
class MutationReport:
    """Every mutant's result, in the order the mutants were made."""

    target: str
    adapter: str
    module: str
    functions: tuple[str, ...]
    results: tuple[MutantResult, ...]
    seconds: float
    stale: tuple[str, ...] = field(default=())  # declared equivalents no mutant has
    never_called: tuple[str, ...] = field(default=())  # functions the unmutated run never ran
    forked: bool = False  # each mutant ran in a child of a process that imported its dependencies
    also: tuple[tuple[str, str], ...] = field(default=())  # more (target, adapter) pairs fuzzed

    def count(self, status: str) -> int:
        return sum(1 for r in self.results if r.status == status)

    @property
    def non_equivalent(self) -> int:
        """Mutants that change behaviour the fuzz could test: not equivalent, and importable."""
        return len(self.results) - self.count(EQUIVALENT) - self.count(CRASHED)

    @property
    def score(self) -> float:
        """Killed / non-equivalent (1.0 when there is nothing to kill)."""
        return self.count(KILLED) / self.non_equivalent if self.non_equivalent else 1.0

    @property
    def ok(self) -> bool:
        """True when no mutant survived undeclared or hung."""
        return self.count(SURVIVED) == 0 and self.count(TIMEOUT) == 0


# -- inputs -------------------------------------------------------------------------------


def module_file(module: str) -> str:
    """The source file of `module`, found without running it; `StatecoreError` if none."""
    import importlib.util

    try:
        spec = importlib.util.find_spec(module)
    except (ImportError, ValueError) as exc:
        raise StatecoreError(f"module {module!r}: {exc}") from None
    if spec is None or not spec.origin or not spec.origin.endswith(".py"):
        raise StatecoreError(f"module {module!r}: no Python source file found for it")
    return spec.origin


def load_equivalents(path: Path, target: str, module: str) -> dict[str, str]:
    """The mutants declared equivalent for `target` and `module` in `path`: id -> reason.

    The file is TOML, one table per target and module::

        ["request_state_system"."statecore.models.implementations.request_state"]
        "delete-statement RequestStateAccessor.open: _LOG.warning(" = "logging only"
    """
    if not path.exists():
        return {}
    data = _read_toml(path)
    table = data.get(target, {}).get(module, {})
    if not isinstance(table, dict) or not all(
        isinstance(k, str) and isinstance(v, str) and v.strip() for k, v in table.items()
    ):
        raise StatecoreError(
            f"{path}: [{target!r}.{module!r}] must map mutant ids to non-empty reasons"
        )
    return dict(table)


def _read_toml(path: Path) -> dict[str, Any]:
    if sys.version_info >= (3, 11):
        import tomllib
    else:
        from . import mini_toml as tomllib
    try:
        with path.open("rb") as f:
            data: dict[str, Any] = tomllib.load(f)
    except (ValueError, OSError) as exc:
        raise StatecoreError(f"{path}: {exc}") from None
    return data


# -- running ------------------------------------------------------------------------------


def mutate(
    target: str,
    adapter: str,
    module: str,
    functions: Sequence[str],
    *,
    budget: float | None = 5.0,
    max_examples: int | None = None,
    seed: int = 0,
    jobs: int = 1,
    equivalents: Mapping[str, str] | None = None,
    only: Sequence[str] = (),
    on_result: Callable[[int, int, MutantResult], None] | None = None,
    fork: bool = True,
    also: Sequence[tuple[str, str]] = (),
    lines: Sequence[tuple[int, int]] = (),
) -> MutationReport:
    """Fuzz every mutant of `functions` of `module` through `adapter` against `target`.

    Each mutant runs in its own process with `budget` seconds (and/or
    `max_examples` search examples) of fuzzing; `jobs` processes run at
    once. `equivalents` maps mutant ids to the reason they are equivalent;
    `only` keeps the mutants whose id contains one of its strings, `lines` those
    on a line of one of its (first, last) ranges (a block of a long function). `on_result`
    is called with (done, total, result) as each mutant finishes. `also` names
    more (target, adapter) pairs that drive the same module: a mutant the first
    fuzz leaves alive is fuzzed through each in turn, with the same budget, and
    is killed by the first that finds something. With `fork`
    (where the platform has it), each process is a child forked from a server
    that imported the module's dependencies once (`statecore.fuzzing.mutate_server`).
    """
    started = time.perf_counter()
    filename = module_file(module)
    mutants = source_mutants(filename, functions)
    if only:
        mutants = tuple(m for m in mutants if any(s in m.id for s in only))
    if lines:
        mutants = tuple(m for m in mutants if any(a <= m.line <= b for a, b in lines))
    declared = dict(equivalents or {})
    request = {
        "target": target,
        "adapter": adapter,
        "module": module,
        "filename": filename,
        "functions": list(functions),
        "budget": budget,
        "max_examples": max_examples,
        "seed": seed,
        "also": [list(pair) for pair in also],
    }
    with Runner(request, fork=fork) as runner:
        baseline, wall = runner.run({**request, "mutant": None}, timeout=None)
        _check_baseline(baseline, module)
        fuzz_time = baseline.get("fuzz_seconds", 0.0)
        timeout = wall + 2 * fuzz_time + GRACE

        done = 0
        lock = threading.Lock()

        def one(mutant: SourceMutant) -> MutantResult:
            nonlocal done
            outcome, seconds = runner.run({**request, "mutant": mutant.id}, timeout=timeout)
            result = _result(mutant, outcome, seconds, declared.get(mutant.id, ""))
            with lock:  # one progress line at a time, numbered in the order they finish
                done += 1
                if on_result is not None:
                    on_result(done, len(mutants), result)
            return result

        with ThreadPoolExecutor(max_workers=max(1, jobs)) as pool:
            results = tuple(pool.map(one, mutants))
        forked = runner.forked
    ids = {m.id for m in source_mutants(filename, functions)}
    stale = tuple(i for i in declared if i not in ids and _in_functions(i, functions))
    called = set(baseline.get("called", ()))
    never = tuple(
        dict.fromkeys(
            m.function
            for m in mutants
            if m.function not in called and m.function.rsplit(".", 1)[-1] not in called
        )
    )
    return MutationReport(
        target,
        adapter,
        module,
        tuple(functions),
        results,
        time.perf_counter() - started,
        stale,
        never,
        forked,
        tuple(also),
    )


def _in_functions(mutant_id: str, functions: Sequence[str]) -> bool:
    """Whether a declared id names one of `functions` (else another run's, not stale here)."""
    qualname = mutant_id.split(" ", 1)[-1].split(":", 1)[0]
    return any(qualname == f or qualname.rsplit(".", 1)[-1] == f for f in functions)


def _check_baseline(outcome: dict[str, Any], module: str) -> None:
    if outcome["status"] == "preloaded":
        raise StatecoreError(
            f"module {module!r} is imported before any adapter code runs (by Python or "
            f"statecore itself), so no mutant of it can be put in place; mutate the "
            f"implementation's own module"
        )
    if outcome["status"] == CRASHED:
        raise StatecoreError(f"module {module!r} does not import: {outcome['detail']}")
    if outcome["status"] == TIMEOUT:  # pragma: no cover - no timeout on the baseline
        raise StatecoreError("the unmutated run did not finish")
    if outcome["status"] == KILLED:
        raise StatecoreError(
            f"the unmutated implementation already fails under {outcome.get('by', '')} "
            f"({outcome.get('kind', '')} "
            f"{outcome.get('property', '')}: {outcome.get('detail', '')}); mutants of it "
            f"say nothing until 'statecore fuzz' passes"
        )
    if not outcome.get("imported"):
        raise StatecoreError(
            f"the adapter never imports module {module!r}: its mutants cannot change what "
            f"is fuzzed; give the module the adapter drives"
        )


def _result(
    mutant: SourceMutant, outcome: dict[str, Any], seconds: float, reason: str
) -> MutantResult:
    status = outcome["status"]
    if status == SURVIVED and reason:
        status = EQUIVALENT
    return MutantResult(
        mutant,
        status,
        seconds,
        kind=outcome.get("kind", ""),
        property=outcome.get("property", ""),
        detail=outcome.get("detail", ""),
        steps=outcome.get("steps", 0),
        phase=outcome.get("phase", ""),
        found_after=outcome.get("found_after"),
        reason=reason,
        by=outcome.get("by", ""),
    )


class Runner:
    """Runs worker requests in isolated processes: forked children of servers, or fresh ones.

    One fork server per concurrent caller, started on first use. A server that
    reports the module unforkable (its dependencies import it) switches the
    runner to a fresh process per request, for good.
    """

    def __init__(self, request: dict[str, Any], *, fork: bool) -> None:
        self.request = request
        self.forked = fork and hasattr(os, "fork")
        self._idle: queue.SimpleQueue[_ForkServer] = queue.SimpleQueue()
        self._all: list[_ForkServer] = []
        self._lock = threading.Lock()

    def run(self, request: dict[str, Any], timeout: float | None) -> tuple[dict[str, Any], float]:
        """`request`'s outcome, and the wall time of the process that ran it."""
        if self.forked:
            server = self._server()
            try:
                answer = server.run(request, timeout)
            finally:
                self._idle.put(server)
            if answer is not None:
                return answer
            self.forked = False
        return _run_fresh(request, timeout)

    def _server(self) -> _ForkServer:
        try:
            return self._idle.get_nowait()
        except queue.Empty:
            server = _ForkServer(self.request)
            with self._lock:
                self._all.append(server)
            return server

    def __enter__(self) -> Runner:
        return self

    def __exit__(self, *exc: object) -> None:
        for server in self._all:
            server.close()


class _ForkServer:
    """A ``statecore.fuzzing.mutate_server`` process and its answer channel."""

    def __init__(self, request: dict[str, Any]) -> None:
        self.log = tempfile.TemporaryFile("w+", encoding="utf-8")  # noqa: SIM115 - closed in close
        self.process = subprocess.Popen(
            [sys.executable, "-m", "statecore.fuzzing.mutate_server"],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=self.log,
            text=True,
            env={**os.environ, "PYTHONDONTWRITEBYTECODE": "1"},
        )
        self._send({"module": request["module"], "filename": request["filename"]})

    def run(
        self, request: dict[str, Any], timeout: float | None
    ) -> tuple[dict[str, Any], float] | None:
        """The outcome and wall time of `request` in a forked child; None if unforkable."""
        began = time.perf_counter()
        with tempfile.TemporaryDirectory(prefix="statecore-mutant-") as scratch:
            result = Path(scratch) / "result.json"
            self._send({**request, "result": str(result), "timeout": timeout})
            line = self.process.stdout.readline() if self.process.stdout else ""
            if not line:
                raise StatecoreError(f"the mutant server exited: {self._last_words()}")
            answer = json.loads(line)
            if "unforkable" in answer:
                return None
            seconds = time.perf_counter() - began
            if not result.exists():
                if answer["exit"] == "timeout":
                    return {"status": TIMEOUT}, seconds
                raise StatecoreError(
                    f"the process fuzzing {request['mutant'] or 'the unmutated module'} "
                    f"exited {answer['exit']}: {self._last_words()}"
                )
            outcome: dict[str, Any] = json.loads(result.read_text(encoding="utf-8"))
        return outcome, seconds

    def _send(self, message: dict[str, Any]) -> None:
        assert self.process.stdin is not None
        self.process.stdin.write(json.dumps(message) + "\n")
        self.process.stdin.flush()

    def _last_words(self) -> str:
        self.log.seek(0)
        lines = self.log.read().strip().splitlines()
        return lines[-1] if lines else "without a word"

    def close(self) -> None:
        if self.process.stdin is not None:
            self.process.stdin.close()
        try:
            self.process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()
        if self.process.stdout is not None:
            self.process.stdout.close()
        self.log.close()


def _run_fresh(request: dict[str, Any], timeout: float | None) -> tuple[dict[str, Any], float]:
    """Run one request in a fresh process: its outcome, and the process's wall time."""
    began = time.perf_counter()
    with tempfile.TemporaryDirectory(prefix="statecore-mutant-") as scratch:
        result = Path(scratch) / "result.json"
        env = {**os.environ, "PYTHONDONTWRITEBYTECODE": "1"}
        try:
            done = subprocess.run(
                [sys.executable, "-m", "statecore.fuzzing.mutate_worker"],
                input=json.dumps({**request, "result": str(result)}),
                capture_output=True,
                text=True,
                timeout=timeout,
                env=env,
                check=False,
            )
        except subprocess.TimeoutExpired:
            if not result.exists():
                return {"status": TIMEOUT}, time.perf_counter() - began
            done = None
        seconds = time.perf_counter() - began
        if not result.exists():
            assert done is not None
            lines = done.stderr.strip().splitlines()
            raise StatecoreError(
                f"the process fuzzing {request['mutant'] or 'the unmutated module'} exited "
                f"{done.returncode}: {lines[-1] if lines else 'without a word'}"
            )
        outcome: dict[str, Any] = json.loads(result.read_text(encoding="utf-8"))
    return outcome, seconds
