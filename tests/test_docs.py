"""The docs are tested: their code runs, their commands parse, their generated pages are current.

* Every ```python block of ``docs/*.md`` runs, in order, in one fresh namespace
  per page, with a temporary directory as the working directory; what a block
  prints is the ```text block right after it, where there is one.
* The table of bugs on ``docs/index.md`` is what exploring each target gives.
* Every ``statecore ...`` command line in a ```bash or ```console block of
  any page under ``docs/`` (and of the README) is accepted by the CLI's
  argument parser.
* ``python -m statecore.render.docgen --check`` finds nothing stale: a model changed
  without ``python -m statecore.render.docgen`` being run fails here.
* The README's Python example runs.
"""

from __future__ import annotations

import contextlib
import importlib.util
import io
import re
import shlex
import subprocess
import sys
from pathlib import Path

import pytest

from statecore.cli import _parser

ROOT = Path(__file__).resolve().parent.parent
DOCS = ROOT / "docs"
FENCE = re.compile(
    r"^(?P<indent> *)```(?P<lang>[\w-]*)[^\n]*\n(?P<body>.*?)^(?P=indent)```", re.M | re.S
)


def blocks(path: Path, *langs: str) -> list[str]:
    """The bodies of the fenced blocks of `path` in one of `langs`, in order."""
    found = []
    for m in FENCE.finditer(path.read_text(encoding="utf-8")):
        if m.group("lang") in langs:
            indent = len(m.group("indent"))
            found.append("\n".join(line[indent:] for line in m.group("body").splitlines()))
    return found


def python_with_output(path: Path) -> list[tuple[str, str | None]]:
    """Each python block of `path` with the ```text block right after it (or None)."""
    text = path.read_text(encoding="utf-8")
    fences = list(FENCE.finditer(text))
    found: list[tuple[str, str | None]] = []
    for index, m in enumerate(fences):
        if m.group("lang") != "python" or m.group("indent"):
            continue
        after = fences[index + 1] if index + 1 < len(fences) else None
        shown = None
        between = text[m.end() : after.start()] if after is not None else "x"
        if after is not None and after.group("lang") == "text" and not between.strip():
            shown = after.group("body")
        found.append((m.group("body"), shown))
    return found


def _lines(text: str) -> list[str]:
    return [line.rstrip() for line in text.strip("\n").splitlines()]


NEEDS_VLLM = "# needs vllm-omni"
"""A python block that starts so runs only where vLLM-Omni is installed."""


def pages_with_python() -> list[Path]:
    return sorted(p for p in DOCS.glob("*.md") if blocks(p, "python"))


def all_pages() -> list[Path]:
    return sorted(DOCS.rglob("*.md")) + [ROOT / "README.md"]


def command_lines(path: Path) -> list[str]:
    """``statecore ...`` commands in the shell blocks of `path`.

    In ```console blocks only ``$ `` prompt lines are commands (the rest is
    output); in ```bash blocks every line is. Continuation lines are joined;
    chains (``&&``, ``;``, ``|``) are split and redirections dropped.
    """
    found = []
    for lang in ("bash", "console", "sh", "shell"):
        for body in blocks(path, lang):
            lines = body.replace("\\\n", " ").splitlines()
            for line in lines:
                line = line.strip()
                if lang == "console":
                    if not line.startswith("$ "):
                        continue
                    line = line[2:]
                for part in re.split(r"&&|\|\||;|\|", line):
                    part = part.strip()
                    if part.startswith("statecore "):
                        found.append(part)
    return found


def _argv(command: str) -> list[str]:
    words = shlex.split(command, comments=True)[1:]
    argv = []
    for word in words:
        if word.startswith((">", "2>", "<")):
            break
        argv.append(word)
    return argv


@pytest.mark.parametrize("page", pages_with_python(), ids=lambda p: p.name)
def test_python_blocks_run(page: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    namespace: dict[str, object] = {"__name__": f"docs_{page.stem}"}
    for number, (code, shown) in enumerate(python_with_output(page), start=1):
        if code.startswith(NEEDS_VLLM) and importlib.util.find_spec("vllm_omni") is None:
            continue  # tests/test_vllm_checked.py runs the same calls in `tox -e vllm`
        printed = io.StringIO()
        try:
            with contextlib.redirect_stdout(printed):
                exec(compile(code, f"{page.name}[python block {number}]", "exec"), namespace)
        except Exception as exc:
            pytest.fail(f"{page.name}, python block {number}: {type(exc).__name__}: {exc}")
        if shown is not None:
            assert _lines(printed.getvalue()) == _lines(shown), (
                f"{page.name}, python block {number} now prints:\n{printed.getvalue()}"
            )


def test_every_doc_page_with_code_is_collected() -> None:
    names = {p.name for p in pages_with_python()}
    assert {"tutorial.md", "quickstart.md"} <= names


@pytest.mark.parametrize("page", all_pages(), ids=lambda p: str(p.relative_to(ROOT)))
def test_statecore_commands_parse(page: Path) -> None:
    parser = _parser()
    for command in command_lines(page):
        try:
            parser.parse_args(_argv(command))
        except SystemExit:
            pytest.fail(f"{page.name}: the CLI rejects {command!r}")


def test_commands_are_found() -> None:
    assert len(command_lines(DOCS / "cli.md")) >= 10


def test_generated_pages_are_current() -> None:
    done = subprocess.run(
        [sys.executable, "-m", "statecore.render.docgen", "--check", "--docs", str(DOCS)],
        capture_output=True,
        text=True,
        check=False,
    )
    assert done.returncode == 0, (
        "generated docs are stale; run 'python -m statecore.render.docgen':\n"
        f"{done.stdout}{done.stderr}"
    )


def test_docgen_reports_changed_and_orphaned_pages(tmp_path: Path) -> None:
    from statecore.render.docgen import GENERATED, stale, write

    pages = {"models/a.md": f"{GENERATED}\n\n# a\n", "properties.md": f"{GENERATED}\n"}
    assert write(tmp_path, pages) == ["models/a.md", "properties.md"]
    assert stale(tmp_path, pages) == []
    (tmp_path / "models" / "a.md").write_text("edited by hand\n")
    (tmp_path / "models" / "gone.md").write_text(f"{GENERATED}\n\n# gone\n")
    (tmp_path / "models" / "notes.md").write_text("# not generated\n")
    assert stale(tmp_path, pages) == ["models/a.md", "models/gone.md"]
    write(tmp_path, pages)
    assert not (tmp_path / "models" / "gone.md").exists()
    assert (tmp_path / "models" / "notes.md").exists()


def test_readme_example_runs(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    (code,) = blocks(ROOT / "README.md", "python")
    exec(compile(code, "README.md[python]", "exec"), {"__name__": "readme"})


def claims() -> list[tuple[str, str, int, list[str]]]:
    """The rows of the bug table of docs/index.md: target, property, steps, action names."""
    rows = []
    for line in (DOCS / "index.md").read_text(encoding="utf-8").splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if len(cells) == 5 and cells[1].startswith("`") and cells[3].isdigit():
            actions = [a.strip(" `") for a in cells[4].split(",")]
            rows.append((cells[1].strip("`"), cells[2].strip("`"), int(cells[3]), actions))
    return rows


def test_the_bug_table_is_found() -> None:
    assert len(claims()) >= 5


@pytest.mark.parametrize("claim", claims(), ids=lambda c: f"{c[0]}-{c[1]}")
def test_the_bug_table_shows_the_shortest_traces(claim: tuple[str, str, int, list[str]]) -> None:
    from model_checks import report_of

    from statecore.registry import Target, bundled

    name, prop, steps, actions = claim
    target = next((t for t in bundled() if t.name == name), None) or Target(name, name, "")
    result = report_of(target).result(prop)
    assert result.verdict == "violated" and result.trace is not None
    assert (len(result.trace), [a.name for a in result.trace.actions]) == (steps, actions)


QUOTED_STATES = re.compile(
    r"`chunk_transfer`+ (?:\(|by default, )([\d,]+) states"
    r"|([\d,]+) states \(`statecore check chunk_transfer`\)"
)
"""Where prose quotes the size of the bundled ``chunk_transfer`` space."""


def test_the_quoted_size_of_chunk_transfer_is_what_the_explorer_finds() -> None:
    from statecore.check.explore import explore
    from statecore.registry import bundled

    pages = [*sorted((ROOT / "docs").glob("*.md")), ROOT / "benchmarks" / "ray_explore.py"]
    quoted = {
        (page.name, int((match.group(1) or match.group(2)).replace(",", "")))
        for page in pages
        for match in QUOTED_STATES.finditer(page.read_text())
    }
    assert {name for name, _ in quoted} >= {"concepts.md", "ray.md", "ray_explore.py"}
    [target] = [t for t in bundled() if t.name == "chunk_transfer"]
    states = explore(target.load()).states
    assert {count for _, count in quoted} == {states}, quoted


def test_the_quoted_sizes_of_a_level_are_the_ones_the_frontier_uses() -> None:
    """docs/cli.md says how many states a level keeps as they are, and how many bytes of
    packed ones it holds in memory before it writes them to its file."""
    from statecore.check.frontier import SPILL, UNPACKED

    text = " ".join((DOCS / "cli.md").read_text().split())
    assert set(re.findall(r"past (?:its )?first ([\d,]+)", text)) == {f"{UNPACKED:,}"}
    assert re.findall(r"Past (\d+) MB of packed states", text) == [str(SPILL >> 20)]


def test_the_quoted_size_of_a_visited_sets_parents_is_the_one_it_uses() -> None:
    """docs/cli.md says past how many bytes, and so how many states, a fingerprint store
    writes its parents' indices and actions to a file, and what a state then holds."""
    from statecore.check.fingerprints import _MAX_LOAD
    from statecore.check.spill import PARENTS

    text = " ".join((DOCS / "cli.md").read_text().split())
    [(size, states)] = re.findall(r"Past (\d+) MB of parents' .*?about ([\d.]+) million", text)
    assert int(size) == PARENTS >> 20 and float(states) == round(PARENTS / 10 / 1e6, 1)
    [(low, high)] = re.findall(r"holds (\d+) to (\d+) bytes of memory", text)
    assert (int(low), int(high)) == (8 + round(4 / _MAX_LOAD), 8 + round(8 / _MAX_LOAD))
