"""The subset of TOML an equivalent-mutants file uses, for Python 3.10 (no `tomllib`).

Comments, blank lines, table headers of dotted quoted or bare keys
(``["target"."module"]``), and ``"key" = "value"`` lines whose key and value
are basic strings (with ``\\"``, ``\\\\``, ``\\n`` and ``\\t`` escapes) or a
bare key. Anything else is a `ValueError` naming the line.
"""

from __future__ import annotations

import re
from typing import IO, Any

_STRING = r'"(?:[^"\\]|\\.)*"'
_KEY = rf"(?:{_STRING}|[A-Za-z0-9_-]+)"
_HEADER = re.compile(rf"^\[\s*({_KEY}(?:\s*\.\s*{_KEY})*)\s*\]$")
_PAIR = re.compile(rf"^({_KEY})\s*=\s*({_STRING})$")
_ESCAPES = {'"': '"', "\\": "\\", "n": "\n", "t": "\t"}


def load(f: IO[bytes]) -> dict[str, Any]:
    """Parse the file `f` (opened in binary) as TOML of the subset above."""
    data: dict[str, Any] = {}
    table = data
    for number, raw in enumerate(f.read().decode("utf-8").splitlines(), 1):
        line = _strip_comment(raw).strip()
        if not line:
            continue
        header, pair = _HEADER.match(line), _PAIR.match(line)
        if header:
            table = data
            for key in re.findall(_KEY, header.group(1)):
                table = table.setdefault(_unquote(key), {})
        elif pair:
            table[_unquote(pair.group(1))] = _unquote(pair.group(2))
        else:
            raise ValueError(f"line {number}: not a table header or a string entry: {raw}")
    return data


def _strip_comment(line: str) -> str:
    """`line` without a ``#`` comment outside strings."""
    quoted = False
    i = 0
    while i < len(line):
        char = line[i]
        if char == "\\" and quoted:
            i += 2
            continue
        if char == '"':
            quoted = not quoted
        elif char == "#" and not quoted:
            return line[:i]
        i += 1
    return line


def _unquote(token: str) -> str:
    if not token.startswith('"'):
        return token
    return re.sub(r"\\(.)", lambda m: _ESCAPES.get(m.group(1), m.group(0)), token[1:-1])
