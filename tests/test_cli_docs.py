"""Every command the docs show is run, and what it prints is what they show.

The pages are the README and every page under ``docs/``. The shell blocks of a
page run in order, as one bash script, in a scratch directory that is also on
``PYTHONPATH`` and holds what the page's commands name (`SETUP`):

* in a ```console block each ``$ `` line is a command, and the lines under it
  are what it prints (stdout and stderr together, as on a terminal), where

  - timings (``0.80s (56,572 states/s)``, a ``0.81s`` column) are not compared;
  - a line ``...`` stands for any number of lines, and ``...`` within a line
    for any text;
  - trailing spaces are ignored;
  - progress lines (``statecore: checking ...``, ``statecore: fuzzing ...``,
    written to stderr every 10 s of a long run) are dropped: how many there
    are is a matter of timing too;

* in a ```bash block every line is a command (continuations joined, comments
  dropped); it must not fail as a command: exit 0, 1 (a finding) or 4 (a bound
  stopped the search), never 2 (usage or input) or 3 (internal error).

A command is not run here only where `EXEMPT` names the test or CI step that
runs it and why it cannot run here; a test keeps that list from going stale.

After a change that moves a figure, refresh what the pages show with::

    python tests/test_cli_docs.py [PAGE ...]

which reruns the commands and rewrites the shown output of the console blocks
that differ, keeping their ``...`` elisions; a change the elisions cannot
absorb is reported, to be edited by hand. ``tests/test_docs.py`` checks that
every ``statecore`` command of the docs parses.
"""

from __future__ import annotations

import ast
import os
import re
import shutil
import subprocess
import sys
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import pytest
from test_cli import install_corpus
from test_docs import FENCE, blocks

ROOT = Path(__file__).resolve().parent.parent
MARK = "@@ end of command @@"
TIMING = re.compile(r"\d+(?:\.\d+)?s \([\d,]+ (?:states|steps)/s\)")
SECONDS = re.compile(r"\s*\b\d+\.\d+s\b")
SHELLS = ("console", "bash")
PROGRESS = re.compile(r"^statecore: (?:checking|fuzzing) [^:]+(?: / \S+)?: ")


# -- what the pages show -------------------------------------------------------------------


@dataclass
class Command:
    """One command of a page: its text and, in a console block, the lines it prints."""

    text: str
    shown: list[str] | None  # None: a bash block, where nothing is shown
    block: int  # which shell block of the page


def pages() -> list[Path]:
    return [ROOT / "README.md", *sorted((ROOT / "docs").rglob("*.md"))]


def page_id(page: Path) -> str:
    return str(page.relative_to(ROOT))


def commands(text: str) -> list[Command]:
    """The commands of the shell blocks of `text`, in order."""
    found: list[Command] = []
    shell_blocks = [m for m in FENCE.finditer(text) if m.group("lang") in SHELLS]
    for number, match in enumerate(shell_blocks):
        body = match.group("body")
        if match.group("lang") == "console":
            for line in body.splitlines():
                if line.startswith("$ "):
                    found.append(Command(line[2:], [], number))
                elif found and found[-1].block == number and found[-1].shown is not None:
                    found[-1].shown.append(line)
            continue
        for line in body.replace("\\\n", " ").splitlines():
            line = re.sub(r"(^|\s)#.*$", "", line).strip()
            if line:
                found.append(Command(line, None, number))
    return found


# -- what is not run here, and why ---------------------------------------------------------

VLLM = "needs the real vLLM-Omni stack (~2 GB): `tox -e vllm` runs it (tests/test_ci_recipes.py)"
RAY = (
    "needs Ray and a cluster: `tox -e ray` runs tests/test_ray_search.py, which starts a local "
    "one and checks `statecore check --ray` against one process, and tests/test_ray_cluster.py, "
    "which runs `ray start --head`, `statecore check --ray auto` and `ray stop`"
)
INSTALL = (
    "installs into the current environment: .ci/run runs the README's install and test "
    "commands in a fresh venv (tests/test_packaging.py checks that it does)"
)

EXEMPT: list[tuple[str, str]] = [
    (r"^pip install ", INSTALL),
    (r"^tox$", INSTALL),
    (r"^bash scripts/install-vllm-stack\.sh$", VLLM),
    (r"^tox -e vllm$", VLLM),
    (r"--adapter vllm-omni\b", VLLM),
    (r"^python benchmarks/checked_adapter\.py", VLLM),
    (r"^pytest tests/distributed/", VLLM + "; the path is in vLLM-Omni's own repository"),
    (
        r"^python benchmarks/\w+\.py( REV)?$",
        "minutes of timing: tests/test_runtime_benchmark.py and tests/test_cli_benchmarks.py "
        "run the benchmark code on small inputs",
    ),
    (
        r"^statecore check --variants( -q)?$",
        "about a minute: tests/test_chunk_transfer.py and the other model tests check each "
        "variant against what it declares",
    ),
    (
        r"^python -m statecore\.render\.docgen",
        "rewrites the repository's pages: tests/test_docs.py runs `--check`",
    ),
    (r"\bshop:", "docs/adapters.md's own module: tests/test_fuzz_docs.py runs these commands"),
    (r"^ray (start|stop)\b|--ray\b|--address auto\b", RAY),
    (
        r"^python benchmarks/ray_explore\.py --fingerprints 64$",
        "needs Ray: `tox -e ray` runs it (tests/test_ray_search.py) and compares what it prints "
        "with docs/ray.md's block, timings aside",
    ),
]


def exemption(command: str) -> str | None:
    return next((why for pattern, why in EXEMPT if re.search(pattern, command)), None)


# -- where each page's commands run ---------------------------------------------------------


def _corpus(directory: Path) -> list[str]:
    """docs/cli.md: the corpus of tests/bad_inputs/cli, and the fuzz trace replay reads."""
    install_corpus(directory)
    # The replay section replays the trace the fuzz section (further down) writes.
    return ["statecore fuzz chunk_transfer --adapter model:chunk_transfer_6670"]


def _tutorial(directory: Path) -> list[str]:
    """docs/tutorial.md: its definitions as the module ``mypkg.uploads`` its commands name."""
    package = directory / "mypkg"
    package.mkdir()
    (package / "__init__.py").write_text("")
    (package / "uploads.py").write_text(definitions(ROOT / "docs" / "tutorial.md"))
    return []


def definitions(page: Path) -> str:
    """The imports, functions, classes and UPPER_CASE constants of the python blocks of `page`."""
    kept: list[str] = []
    for code in blocks(page, "python"):
        for node in ast.parse(code).body:
            constant = isinstance(node, ast.Assign) and all(
                isinstance(t, ast.Name) and t.id.isupper() for t in node.targets
            )
            definition = isinstance(
                node, (ast.Import, ast.ImportFrom, ast.FunctionDef, ast.ClassDef)
            )
            if constant or definition:
                kept.append(ast.get_source_segment(code, node) or "")
    return "\n\n\n".join(kept) + "\n"


SETUP: dict[str, Callable[[Path], list[str]]] = {
    "docs/cli.md": _corpus,
    "docs/tutorial.md": _tutorial,
}
"""Per page: put what its commands name in the directory; return commands to run first."""


# -- running and comparing ------------------------------------------------------------------


def normal(line: str) -> str:
    return SECONDS.sub(" <s>", TIMING.sub("<timing>", line.rstrip()))


def _pattern(expected: list[str]) -> str:
    parts = []
    for line in expected:
        if line.strip() == "...":
            parts.append(r"(?:[^\n]*\n)*?")
        else:
            parts.append(re.escape(normal(line)).replace(r"\.\.\.", r"[^\n]*") + r"\n")
    return "".join(parts)


def shows(expected: list[str], printed: list[str]) -> bool:
    """Whether `printed` is what `expected` shows (see the module docstring)."""
    text = "".join(normal(line) + "\n" for line in printed)
    return re.fullmatch(_pattern(expected), text) is not None


def _loose(segment: str) -> str:
    """A regex for `segment` where every figure may have changed."""
    return r"[\d,.]+".join(re.escape(part) for part in re.split(r"[\d,.]*\d[\d,.]*", segment))


def refresh(expected: list[str], printed: list[str]) -> list[str] | None:
    """What `expected` should show now that the command prints `printed`.

    The shown lines become the printed ones; a line ``...`` keeps standing for
    what it elides, and a line with ``...`` in it keeps its elisions with the
    text around them refreshed. None if the lines no longer line up (text,
    not only figures, changed around an elision).
    """
    printed = [line.rstrip() for line in printed]
    if shows(expected, printed):
        return expected
    if not any("..." in line for line in expected):
        return printed
    regexes = []
    for line in expected:
        if line.strip() == "...":
            regexes.append(r"((?:[^\n]*\n)*?)")
        else:
            inner = r"[^\n]*".join(f"({_loose(s)})" for s in line.split("..."))
            regexes.append(f"({inner})" + r"\n")
    match = re.fullmatch("".join(regexes), "".join(line + "\n" for line in printed))
    if match is None:
        return None
    groups = iter(match.groups())
    fresh: list[str] = []
    for line in expected:
        whole = next(groups)
        if line.strip() == "...":
            fresh.append(line)
            continue
        segments = [next(groups) for _ in line.split("...")]
        fresh.append("...".join(segments) if "..." in line else whole.rstrip("\n"))
    return fresh if shows(fresh, printed) else None


def script(run: list[str]) -> str:
    """One bash script running the commands in turn; `$?` carries over as in a shell."""
    steps = [f"{c} 2>&1\n__rc=$?\necho '{MARK}' $__rc\n(exit $__rc)" for c in run]
    return "\n".join(steps) + "\n"


def execute(page: Path, directory: Path) -> list[tuple[Command, list[str], int]]:
    """Run the commands of `page` in `directory`: each with what it printed and its exit code."""
    prelude = SETUP.get(page_id(page), lambda _: [])(directory)
    todo = [c for c in commands(page.read_text(encoding="utf-8")) if not exemption(c.text)]
    path = os.pathsep.join(filter(None, [str(directory), os.environ.get("PYTHONPATH")]))
    # The `statecore` of the environment running the tests, even where it is not activated.
    bin_path = os.pathsep.join([str(Path(sys.executable).parent), os.environ.get("PATH", "")])
    env = {**os.environ, "PYTHONPATH": path, "NO_COLOR": "1", "PYTHONUNBUFFERED": "1"}
    env["PATH"] = bin_path
    done = subprocess.run(
        ["bash", "-c", script([f"{c} >/dev/null" for c in prelude] + [c.text for c in todo])],
        cwd=directory,
        env=env,
        capture_output=True,
        text=True,
        timeout=900,
        check=False,
    )
    chunks = re.split(rf"^{re.escape(MARK)} (\d+)\n", done.stdout, flags=re.M)
    outputs = list(zip(chunks[0:-1:2], chunks[1::2]))[len(prelude) :]
    assert len(outputs) == len(todo), done.stdout + done.stderr
    return [(c, _printed(out), int(rc)) for c, (out, rc) in zip(todo, outputs)]


def _printed(output: str) -> list[str]:
    return [line for line in output.splitlines() if not PROGRESS.match(line)]


def problems(page: Path, directory: Path) -> list[str]:
    found = []
    for command, printed, code in execute(page, directory):
        where = f"{page_id(page)}, shell block {command.block + 1}: `{command.text}`"
        if command.shown is None and code not in (0, 1, 4):
            found.append(f"{where} exits {code}:\n" + "\n".join(printed))
        elif command.shown is not None and not shows(command.shown, printed):
            found.append(f"{where} now prints:\n" + "\n".join(printed))
    return found


def needs_dot(page: Path) -> bool:
    return bool(re.search(r"-f (png|svg)\b", page.read_text(encoding="utf-8")))


RUN = [p for p in pages() if any(not exemption(c.text) for c in commands(p.read_text()))]


@pytest.mark.parametrize("page", RUN, ids=page_id)
def test_each_command_shown_runs_and_prints_what_is_shown(page: Path, tmp_path: Path) -> None:
    if needs_dot(page) and shutil.which("dot") is None and not os.environ.get("CI"):
        pytest.skip("the page renders images with Graphviz' dot, which is not installed")
    found = problems(page, tmp_path)
    assert not found, (
        "\n\n".join(found) + "\n\n(if only figures moved: python tests/test_cli_docs.py)"
    )


def test_every_page_with_commands_is_run_or_exempt() -> None:
    shown = [(p, c) for p in pages() for c in commands(p.read_text()) if c.text]
    assert {page_id(p) for p in RUN} >= {"README.md", "docs/cli.md", "docs/quickstart.md"}
    assert len([c for p, c in shown if not exemption(c.text)]) >= 40
    assert all(page_id(p) in SETUP or p in RUN or exemption(c.text) for p, c in shown)


def test_every_exemption_is_used() -> None:
    every = [c.text for p in pages() for c in commands(p.read_text())]
    for pattern, _ in EXEMPT:
        assert any(re.search(pattern, c) for c in every), f"no command matches {pattern!r}"


def test_the_tutorial_module_defines_what_its_commands_name() -> None:
    namespace: dict[str, object] = {}
    exec(compile(definitions(ROOT / "docs" / "tutorial.md"), "uploads", "exec"), namespace)
    assert {"UPLOADS", "BUGGY", "UploadAdapter"} <= set(namespace)


@pytest.mark.parametrize(
    ("expected", "printed", "verdict"),
    [
        (["a 0.12s (1,000 states/s) b"], ["a 9.99s (7 states/s) b  "], True),
        (["x   0.81s", "6 targets; 1.20s; PASS"], ["x  10.02s", "6 targets; 9.00s; PASS"], True),
        (["a", "...", "z"], ["a", "b", "c", "z"], True),
        (["a", "...", "z"], ["a", "z"], True),
        (["x ... y"], ["x anything y"], True),
        (["a", "z"], ["a", "b", "z"], False),
        (["a"], ["b"], False),
        (["45301 states"], ["45302 states"], False),
    ],
)
def test_the_comparison(expected: list[str], printed: list[str], verdict: bool) -> None:
    assert shows(expected, printed) is verdict


@pytest.mark.parametrize(
    ("expected", "printed", "fresh"),
    [
        (["a 1 b"], ["a 2 b", "c"], ["a 2 b", "c"]),
        (
            ["PASS x: 4 states", "...", "end"],
            ["PASS x: 5 states", "y", "end"],
            ["PASS x: 5 states", "...", "end"],
        ),
        (
            ["PASS x: 4 states, 3 transitions", "..."],
            ["PASS x: 5 states, 7 transitions", "more"],
            ["PASS x: 5 states, 7 transitions", "..."],
        ),
        (
            ["FAIL a: 73% (22 of 30), ...", "  killed 3", "..."],
            ["FAIL a: 80% (24 of 30), 2 crashed", "  killed 4", "z"],
            ["FAIL a: 80% (24 of 30), ...", "  killed 4", "..."],
        ),
        (["PASS x", "..."], ["FAIL x", "y"], None),
    ],
)
def test_refresh_keeps_the_elisions(
    expected: list[str], printed: list[str], fresh: list[str] | None
) -> None:
    assert refresh(expected, printed) == fresh


# -- python tests/test_cli_docs.py: refresh the shown output --------------------------------


def rewrite(page: Path, directory: Path) -> list[str]:
    """Rewrite the console blocks of `page` with what their commands print; what could not be."""
    text = page.read_text(encoding="utf-8")
    ran = iter(execute(page, directory))
    failed: list[str] = []
    pieces: list[str] = []
    last = 0
    shell_blocks = [m for m in FENCE.finditer(text) if m.group("lang") in SHELLS]
    by_block: dict[int, list[tuple[Command, list[str] | None]]] = {}
    for command in commands(text):
        fresh = command.shown
        if not exemption(command.text):
            _, printed, _ = next(ran)
            if command.shown is not None:
                fresh = refresh(command.shown, printed)
                if fresh is None:
                    failed.append(f"{page_id(page)}: `{command.text}`: edit by hand")
                    fresh = command.shown
        by_block.setdefault(command.block, []).append((command, fresh))
    for number, match in enumerate(shell_blocks):
        if match.group("lang") != "console":
            continue
        body = []
        for command, fresh in by_block.get(number, []):
            body.append(f"$ {command.text}")
            body.extend(fresh or [])
        pieces.append(text[last : match.start("body")] + "".join(f"{b}\n" for b in body))
        last = match.end("body")
    page.write_text("".join(pieces) + text[last:], encoding="utf-8")
    return failed


def _refresh_main(argv: list[str]) -> int:
    import tempfile

    chosen = [Path(a).resolve() for a in argv] or RUN
    failed: list[str] = []
    for page in chosen:
        with tempfile.TemporaryDirectory() as directory:
            failed += rewrite(page, Path(directory))
        print(f"ran {page_id(page)}")
    print("\n".join(failed))
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(_refresh_main(sys.argv[1:]))
