"""``statecore mutate``: mutants of the reference implementation, killed, equivalent or alive.

Each CLI run fuzzes a few mutants (``--only``) with a handful of search
examples, so the whole file stays within seconds; the measured score over
every lifecycle function is in docs/cli.md.
"""

from __future__ import annotations

import hashlib
import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
from test_cli import run

from statecore.fuzzing import mini_toml
from statecore.fuzzing.mutate import load_equivalents, module_file
from statecore.fuzzing.source_mutants import (
    SOURCE_KINDS,
    UnknownFunction,
    mutated_code,
    source_mutants,
)

ROOT = Path(__file__).resolve().parent.parent
MODULE = "statecore.models.implementations.request_state"
BASE = [
    "mutate",
    "request_state_system",
    "--adapter",
    "request-state-accessor",
    "--module",
    MODULE,
    "--max-examples",
    "5",
]
KILLABLE = "delete-statement RequestStateAccessor.cleanup: del self._generations[external_id]"
EQUIVALENT = "delete-statement RequestStateAccessor.open: _LOG.warning("
# The binding ignores what cleanup() returns for an id without state: a blind spot.
SURVIVOR = "flip-constant RequestStateAccessor.cleanup: return False"


def digest(path: str) -> str:
    return hashlib.sha256(Path(path).read_bytes()).hexdigest()


# -- the mutants ---------------------------------------------------------------------------

SAMPLE = '''\
class Box:
    def put(self, items, x, flag=True):
        """Docstring: not a statement to delete."""
        if x is None and not flag:
            return False
        while x in items or x < 0:
            x = x + 1
        items.append(x)
        return x == 3 if True else x


def other():
    return 1
'''


@pytest.fixture
def sample(tmp_path: Path) -> str:
    path = tmp_path / "sample.py"
    path.write_text(SAMPLE)
    return str(path)


def test_every_kind_is_made_with_a_stable_id_and_the_changed_line(sample: str) -> None:
    mutants = source_mutants(sample, ["put"])
    assert {m.kind for m in mutants} == set(SOURCE_KINDS)
    assert all(m.function == "Box.put" for m in mutants)
    assert len({m.id for m in mutants}) == len(mutants)
    assert mutants == source_mutants(sample, ["Box.put"])
    by_id = {m.id: m for m in mutants}
    swap = by_id["swap-is Box.put: if x is None and not flag:"]
    assert (swap.line, swap.changed) == (4, "if x is not None and not flag:")
    assert by_id["one-to-zero Box.put: x = x + 1"].changed == "x = x + 0"
    assert by_id["delete-statement Box.put: items.append(x)"].changed == "pass"
    assert not any("Docstring" in m.code for m in mutants)
    assert "swap-comparison Box.put: while x in items or x < 0:" in by_id


def test_the_mutated_module_behaves_as_the_changed_line_says(sample: str) -> None:
    code = mutated_code(sample, ["put"], "delete-statement Box.put: items.append(x)")
    namespace: dict[str, object] = {}
    exec(code, namespace)
    items: list[int] = []
    namespace["Box"]().put(items, 5)  # type: ignore[operator]
    assert items == []  # the append is gone
    assert code.co_filename == sample
    assert Path(sample).read_text() == SAMPLE


def test_an_unknown_function_is_named_with_what_the_module_defines(sample: str) -> None:
    with pytest.raises(UnknownFunction, match=r"no function 'gone'.*Box\.put, other"):
        source_mutants(sample, ["put", "gone"])


# -- the equivalents file ------------------------------------------------------------------


def test_the_bundled_equivalents_parse_alike_without_tomllib() -> None:
    tomllib = pytest.importorskip("tomllib")  # Python 3.11+: what the small reader must match
    path = ROOT / "models" / "equivalent_mutants.toml"
    with path.open("rb") as f:
        expected = tomllib.load(f)
    with path.open("rb") as f:
        assert mini_toml.load(f) == expected
    declared = load_equivalents(path, "request_state_system", MODULE)
    assert EQUIVALENT in declared and all(reason.strip() for reason in declared.values())


def test_the_small_toml_reader_handles_escapes_and_comments(tmp_path: Path) -> None:
    tomllib = pytest.importorskip("tomllib")
    path = tmp_path / "e.toml"
    path.write_text(
        textwrap.dedent(
            """\
            # comment
            ["t"."m.x"]  # trailing
            "swap-is f: if a is \\"#\\":" = "reason with \\\\ and # inside"
            bare = "x"
            """
        )
    )
    with path.open("rb") as f:
        expected = tomllib.load(f)
    with path.open("rb") as f:
        assert mini_toml.load(f) == expected


# -- the command ---------------------------------------------------------------------------


def test_killed_and_declared_equivalent_mutants_pass_and_the_file_is_untouched() -> None:
    before = digest(module_file(MODULE))
    code, out, err = run(
        *BASE,
        *("--functions", "cleanup,open", "--only", KILLABLE, "--only", EQUIVALENT),
        *("--jobs", "2", "--json"),
    )
    assert code == 0, out + err
    report = json.loads(out)
    status = {m["id"]: m for m in report["mutants"]}
    assert status[KILLABLE]["status"] == "killed"
    assert status[KILLABLE]["finding"]["kind"] == "conformance"
    assert status[KILLABLE]["finding"]["steps"] > 0
    assert status[EQUIVALENT]["status"] == "equivalent"
    assert "logging only" in status[EQUIVALENT]["reason"]
    assert report["score"] == 1.0 and report["non_equivalent"] == 1
    assert err.count("statecore: fuzzing request_state_system / request-state-accessor: ") == 2
    assert digest(module_file(MODULE)) == before


def test_a_surviving_mutant_fails_the_run_and_is_listed_to_triage() -> None:
    before = digest(module_file(MODULE))
    unreached = "delete-statement RequestStateView.get: gen = self._generation"
    code, out, err = run(
        *BASE, "--functions", "cleanup,get", "--only", SURVIVOR, "--only", unreached
    )
    assert code == 1
    assert f'  "{SURVIVOR}"' in out.splitlines()
    assert "score 0% (0 of 2 non-equivalent mutants killed), 2 survived" in out
    # The binding never reads a namespace with get(): said once, as a blind spot.
    assert "the unmutated run never called RequestStateView.get: " in err
    assert digest(module_file(MODULE)) == before


def test_lines_keeps_only_the_mutants_of_a_block() -> None:
    mutant = next(m for m in source_mutants(module_file(MODULE), ["cleanup"]) if m.id == KILLABLE)
    span = f"{mutant.line}-{mutant.line}"
    code, out, err = run(*BASE, "--functions", "cleanup,open", "--lines", span, "--json")
    assert code == 0, out + err
    report = json.loads(out)
    assert report["mutants"] and {m["where"].rsplit(":", 1)[1] for m in report["mutants"]} == {
        str(mutant.line)
    }
    assert KILLABLE in {m["id"] for m in report["mutants"]}


def test_a_module_imported_before_any_adapter_code_cannot_be_mutated() -> None:
    code, _, err = run(*BASE, "--module", "json", "--functions", "dumps")
    assert code == 2
    (line,) = err.splitlines()
    assert "module 'json' is imported before any adapter code runs" in line


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["--functions", "gone"], "no function 'gone' in the module"),
        (["--functions", "open", "--module", "statecore.models.nowhere"], "nowhere"),
        (["--functions", " , "], "--functions: give at least one function"),
        (["--functions", "open", "--jobs", "0"], "--jobs 0"),
        (["--functions", "open", "--also", "segments"], "--also segments: give a target and"),
        (["--functions", "open", "--also", "nowhere:x"], "nowhere"),
        (["--functions", "open", "--lines", "12"], "--lines 12: give a line range"),
        (
            ["--functions", "open", "--lines", "9-3"],
            "first line is after the last; try --lines 3-9",
        ),
        (["--functions", "open", "--lines", "1-2"], "--lines 1-2: no mutant of open there"),
    ],
)
def test_bad_input_is_one_line_and_exit_2(argv: list[str], message: str) -> None:
    code, out, err = run(*BASE, *argv)
    assert code == 2 and out == ""
    (line,) = err.splitlines()
    assert line.startswith("statecore: error: ") and message in line


def test_an_unknown_target_is_one_line_and_exit_2() -> None:
    argv = ["mutate", "no_such_target", "--adapter", "request-state-accessor"]
    code, _, err = run(*argv, "--module", MODULE, "--functions", "open")
    assert code == 2
    (line,) = err.splitlines()
    assert line.startswith("statecore: error: ") and "no_such_target" in line


def test_a_mutant_that_breaks_the_import_is_crashed_and_the_file_stays(tmp_path: Path) -> None:
    module = tmp_path / "crashy.py"
    module.write_text(
        "def f(flag=True):\n    if flag:\n        return 1\n    raise RuntimeError('no')\n\n\n"
        "X = f()\n"
    )
    before = module.read_bytes()
    (mutant,) = [m for m in source_mutants(str(module), ["f"]) if m.kind == "negate-condition"]
    result = tmp_path / "result.json"
    request = {"module": "crashy", "filename": str(module), "functions": ["f"]}
    request |= {"mutant": mutant.id, "result": str(result)}
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(tmp_path), *sys.path])}
    subprocess.run(
        [sys.executable, "-m", "statecore.fuzzing.mutate_worker"],
        input=json.dumps(request),
        text=True,
        env=env,
        check=True,
        timeout=60,
    )
    assert json.loads(result.read_text()) == {"status": "crashed", "detail": "RuntimeError: no"}
    assert module.read_bytes() == before
    assert not (tmp_path / "__pycache__").exists()
