"""Every command output shown in ``docs/cli.md`` is what the command prints.

Each ```console block of the page runs as one bash script in a scratch
directory, with the corpus of ``tests/bad_inputs/cli`` on ``PYTHONPATH``. What
each ``$ `` line prints (stdout and stderr together, as on a terminal) must
match the lines shown under it, where

* timings (``0.80s (56,572 states/s)``) are not compared;
* a line ``...`` stands for any number of lines, and ``...`` within a line for
  any text;
* trailing spaces are ignored.

``tests/test_docs.py`` checks that the same commands parse.
"""

from __future__ import annotations

import os
import re
import subprocess
from pathlib import Path

import pytest
from test_cli import install_corpus

ROOT = Path(__file__).resolve().parent.parent
PAGE = ROOT / "docs" / "cli.md"
CONSOLE = re.compile(r"^```console\n(?P<body>.*?)^```", re.M | re.S)
TIMING = re.compile(r"\d+(?:\.\d+)?s \([\d,]+ (?:states|steps)/s\)")
MARK = "@@ end of command @@"

Session = list[tuple[str, list[str]]]  # (command, the lines it prints)


def sessions(text: str) -> list[Session]:
    """The console blocks of `text`: each a list of (command, expected lines)."""
    found: list[Session] = []
    for match in CONSOLE.finditer(text):
        session: Session = []
        for line in match.group("body").splitlines():
            if line.startswith("$ "):
                session.append((line[2:], []))
            elif session:
                session[-1][1].append(line)
        found.append(session)
    return found


def script(session: Session) -> str:
    """One bash script running the commands in turn; `$?` carries over as in a shell."""
    steps = [f"{command} 2>&1\n__rc=$?\necho '{MARK}'\n(exit $__rc)" for command, _ in session]
    return "\n".join(steps) + "\n"


def normal(line: str) -> str:
    return TIMING.sub("<timing>", line.rstrip())


def shows(expected: list[str], printed: list[str]) -> bool:
    """Whether `printed` is what `expected` shows (see the module docstring)."""
    parts = []
    for line in expected:
        if line.strip() == "...":
            parts.append(r"(?:[^\n]*\n)*?")
        else:
            parts.append(re.escape(normal(line)).replace(r"\.\.\.", r"[^\n]*") + r"\n")
    text = "".join(normal(line) + "\n" for line in printed)
    return re.fullmatch("".join(parts), text) is not None


def run(session: Session, cwd: Path, corpus: Path) -> list[list[str]]:
    path = os.pathsep.join(filter(None, [str(corpus), os.environ.get("PYTHONPATH")]))
    env = {**os.environ, "PYTHONPATH": path, "NO_COLOR": "1", "PYTHONUNBUFFERED": "1"}
    done = subprocess.run(
        ["bash", "-c", script(session)],
        cwd=cwd,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    chunks = done.stdout.split(f"{MARK}\n")
    assert len(chunks) == len(session) + 1, done.stdout + done.stderr
    return [chunk.splitlines() for chunk in chunks[:-1]]


SESSIONS = sessions(PAGE.read_text(encoding="utf-8"))


@pytest.mark.parametrize("number", range(len(SESSIONS)), ids=lambda n: f"console-{n + 1}")
def test_console_block_shows_what_the_commands_print(number: int, tmp_path: Path) -> None:
    corpus = install_corpus(tmp_path)  # also the working directory, as for a reader
    session = SESSIONS[number]
    for (command, expected), printed in zip(session, run(session, corpus, corpus)):
        assert shows(expected, printed), (
            f"docs/cli.md, console block {number + 1}: `{command}` now prints:\n"
            + "\n".join(printed)
        )


def test_the_page_shows_output() -> None:
    commands = [c for session in SESSIONS for c, _ in session if c.startswith("statecore ")]
    assert len(commands) >= 10


@pytest.mark.parametrize(
    ("expected", "printed", "verdict"),
    [
        (["a 0.12s (1,000 states/s) b"], ["a 9.99s (7 states/s) b  "], True),
        (["a", "...", "z"], ["a", "b", "c", "z"], True),
        (["a", "...", "z"], ["a", "z"], True),
        (["x ... y"], ["x anything y"], True),
        (["a", "z"], ["a", "b", "z"], False),
        (["a"], ["b"], False),
    ],
)
def test_the_comparison(expected: list[str], printed: list[str], verdict: bool) -> None:
    assert shows(expected, printed) is verdict
