"""Reading an ITF file's JSON once, front to back, through a bounded window.

`Document` parses the members before ``"states"``, then the states one at a
time as a reader asks for them, so a reader that stops at a bad state has
parsed nothing after it; `Members` is the same interface over an object
already in memory. Problems raise `statecore.traces.itf_values.TraceFileError`
naming the file, the line and column, and the step.
"""

from __future__ import annotations

import codecs
import json
import re
from collections.abc import Iterator, Mapping
from typing import Any, BinaryIO

from .itf_values import _REGENERATE, MAX_DEPTH, Json, TraceFileError, _digits_problem, _kind

__all__ = ["Document", "Members"]

# A file is read in chunks of this many bytes; what was parsed is dropped.
_CHUNK = 1 << 20

_WHITESPACE = re.compile(r"[ \t\n\r]*")


class _DuplicateKey(Exception):
    pass


class _LongInteger(Exception):
    pass


def _no_duplicates(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    result: dict[str, Any] = {}
    for key, value in pairs:
        if key in result:
            raise _DuplicateKey(key)
        result[key] = value
    return result


def _parse_int(text: str) -> int:
    problem = _digits_problem(text)
    if problem is not None:
        raise _LongInteger(problem)
    return int(text)


class Members:
    """The top-level members of an ITF object already in memory.

    `fields` holds the members read before the states, `rest` those after
    them; `states` gives the states in order.
    """

    def __init__(self, obj: Mapping[str, Json]) -> None:
        self.fields: dict[str, Json] = dict(obj)
        self.rest: dict[str, Json] = {}
        self.streamed = False

    def has_states(self) -> bool:
        """Whether there is a ``"states"`` list."""
        return self.streamed or isinstance(self.fields.get("states"), list)

    def states(self) -> Iterator[Json]:
        """The raw states, in order."""
        listed = self.fields.get("states")
        if isinstance(listed, list):
            yield from listed


class Document(Members):
    """An ITF file parsed once, front to back, as far as its reader asks.

    The members before ``"states"`` are parsed by `open`; the states one at
    a time by `states`, so a reader that stops at a bad state has parsed
    nothing after it; then the members after them. (A file whose ``"#meta"``
    or ``"vars"`` follows its states is parsed whole by `open`: statecore
    never writes one.) Only a window of the text is held - the file is read
    in chunks and what was parsed is dropped - so a large trace costs the
    memory of its decoded states, not of its text.
    """

    def __init__(self, stream: BinaryIO, path: str) -> None:
        super().__init__({})
        self.path = path
        self.decoder = json.JSONDecoder(object_pairs_hook=_no_duplicates, parse_int=_parse_int)
        self.text = ""  # the window: the file's text from character `base` on
        self.pos = 0
        self._stream = stream
        self._utf8 = codecs.getincrementaldecoder("utf-8")()
        self._bytes = 0  # bytes read so far
        self._eof = False
        self._lines = 0  # newlines before the window
        self._column = 0  # characters after the last of them
        self._states_at = 0
        self._members: Iterator[tuple[str, int]] = iter(())

    def open(self) -> None:
        """Parse the members before the states (all of them if the states cannot stream)."""
        self._members = self._each_member(self._start())
        for key, pos in self._members:
            if key == "states" and self._at(pos, "[") and {"#meta", "vars"} <= self.fields.keys():
                self.streamed, self._states_at = True, pos
                return
            self.fields[key], self.pos = self._value(pos, None)
        self._end()

    def states(self) -> Iterator[Json]:
        """The states, parsed as they are asked for; then the members after them."""
        if not self.streamed:
            yield from super().states()
            return
        yield from self._elements(self._states_at)
        for key, pos in self._members:
            self.rest[key], self.pos = self._value(pos, None)
        self._end()

    def header(self) -> Json:
        """The ``"#meta"`` member (``{}`` if none), reading no further than it takes to reach it."""
        for key, pos in self._each_member(self._start()):
            if key == "#meta":
                return self._value(pos, None)[0]
            if key == "states" and self._at(pos, "["):
                for _ in self._elements(pos):
                    pass
            else:
                self.pos = self._value(pos, None)[1]
        self._end()
        return {}

    # -- the JSON around the members ----------------------------------------------------

    def _start(self) -> int:
        pos = self._skip(1 if self._at(0, "\ufeff") else 0)
        if pos == len(self.text):
            raise TraceFileError(
                self.path, None, "the file is empty; an ITF trace is a JSON object"
            )
        if not self._at(pos, "{"):
            try:
                value = self._value(pos, None)[0]
            except TraceFileError as exc:
                problem = f"not JSON ({exc.problem}); an ITF trace is a JSON object"
                raise TraceFileError(self.path, None, problem) from None
            raise TraceFileError(
                self.path,
                None,
                f"the file holds {_kind(value)}, not an ITF trace "
                "(a JSON object with '#meta', 'vars' and 'states')",
            )
        return pos + 1

    def _each_member(self, pos: int) -> Iterator[tuple[str, int]]:
        """Each member's name and where its value starts; the reader sets `pos` past the value."""
        seen: set[str] = set()
        pos = self._skip(pos)
        if self._at(pos, "}"):
            self.pos = pos + 1
            return
        while True:
            if not self._at(pos, '"'):
                raise self._bad(pos, None, "expected a member name in double quotes")
            key, pos = self._value(pos, None)
            assert isinstance(key, str)
            if key in seen:
                raise TraceFileError(self.path, None, f"bad JSON: key {key!r} appears twice")
            seen.add(key)
            pos = self._skip(pos)
            if not self._at(pos, ":"):
                raise self._bad(pos, None, "expected ':' after a member name")
            yield key, self._skip(pos + 1)
            pos = self._skip(self.pos)
            if self._at(pos, ","):
                pos = self._skip(pos + 1)
            elif self._at(pos, "}"):
                self.pos = pos + 1
                return
            else:
                raise self._bad(pos, None, "expected ',' or '}' after a member")

    def _elements(self, pos: int) -> Iterator[Json]:
        """The items of the list at `pos`, parsed one by one; `pos` ends past the list."""
        pos = self._skip(pos + 1)
        if self._at(pos, "]"):
            self.pos = pos + 1
            return
        index = 0
        while True:
            value, pos = self._value(pos, index)
            yield value
            index += 1
            pos = self._skip(self._drop(pos))
            if self._at(pos, ","):
                pos = self._skip(pos + 1)
            elif self._at(pos, "]"):
                self.pos = pos + 1
                return
            else:
                raise self._bad(pos, index, "expected ',' or ']' after a state")

    def _end(self) -> None:
        pos = self._skip(self.pos)
        if pos != len(self.text):
            raise self._bad(pos, None, "extra data after the trace object")

    def _value(self, pos: int, step: int | None) -> tuple[Json, int]:
        """The JSON value at `pos` and where it ends, reading on while the window cuts it."""
        while True:
            try:
                value, end = self.decoder.raw_decode(self.text, pos)
            except json.JSONDecodeError as exc:
                cut = self._cut(exc)
                if cut and self._more(len(self.text) - pos):
                    continue
                raise self._bad(exc.pos, step, exc.msg, truncated=cut) from None
            except _DuplicateKey as exc:
                problem = f"bad JSON: key {exc.args[0]!r} appears twice"
                raise TraceFileError(self.path, step, problem) from None
            except _LongInteger as exc:
                raise TraceFileError(self.path, step, str(exc)) from None
            except RecursionError:
                problem = f"values nest too deeply to read: more than {MAX_DEPTH} levels"
                raise TraceFileError(self.path, step, f"{problem} ({_REGENERATE})") from None
            # A number the window cuts short parses: it is whole only if something follows.
            if end < len(self.text) or not self._more(len(self.text) - pos):
                return value, end

    def _cut(self, error: json.JSONDecodeError) -> bool:
        """Whether `error` may only be the end of the window cutting a value short.

        A cut value fails within a few characters of the end (``tru``, half
        a ``\\u`` escape) or as a string left open; an error further back is
        in the file, and is reported without reading the rest of it.
        """
        return error.pos >= len(self.text) - 8 or error.msg.startswith("Unterminated string")

    def _bad(
        self, pos: int, step: int | None, problem: str, truncated: bool = False
    ) -> TraceFileError:
        """A bad-JSON error at `pos`; `truncated` when the file ended inside a value."""
        before = self.text[:pos]
        newlines = before.count("\n")
        line = self._lines + newlines + 1
        column = pos - before.rfind("\n") if newlines else self._column + pos + 1
        ends = truncated or pos >= len(self.text)
        ending = " (the file ends early: is it truncated?)" if ends else ""
        return TraceFileError(
            self.path, step, f"bad JSON at line {line}, column {column}: {problem}{ending}"
        )

    # -- the window ------------------------------------------------------------------------

    def _more(self, at_least: int = 0) -> bool:
        """Read on (at least `at_least` more bytes, or a chunk); False at the end of the file."""
        if self._eof:
            return False
        try:
            data = self._stream.read(max(_CHUNK, at_least))
        except OSError as exc:
            problem = f"cannot read the file: {exc.strerror or exc}"
            raise TraceFileError(self.path, None, problem) from None
        self._eof = not data
        try:
            self.text += self._utf8.decode(data, final=self._eof)
        except UnicodeDecodeError as exc:
            where = self._bytes + exc.start
            raise TraceFileError(
                self.path,
                None,
                f"not UTF-8 text (byte {where} is {data[exc.start]:#04x}); an ITF trace is JSON "
                "text - is this the right file?",
            ) from None
        self._bytes += len(data)
        return bool(data)

    def _drop(self, pos: int) -> int:
        """Forget the text before `pos` once it is a chunk long; return `pos` in the new window."""
        if pos < _CHUNK:
            return pos
        gone = self.text[:pos]
        newlines = gone.count("\n")
        self._column = pos - gone.rfind("\n") - 1 if newlines else self._column + pos
        self._lines += newlines
        self.text = self.text[pos:]
        return 0

    def _skip(self, pos: int) -> int:
        while True:
            match = _WHITESPACE.match(self.text, pos)
            assert match is not None
            if match.end() < len(self.text) or not self._more():
                return match.end()
            pos = match.end()

    def _at(self, pos: int, char: str) -> bool:
        while pos >= len(self.text) and self._more():
            pass
        return self.text.startswith(char, pos)
