"""What a large search keeps on disk: arrays appended to a temporary file, and read back.

A fingerprint search of tens of millions of states is bound by memory before
time. Two things it holds grow with it and are read rarely, in an order known
in advance: a depth level's packed nodes, read once in the order queued
(`statecore.check.frontier`), and each stored node's parent and action, read
only to rebuild a trace (`ParentLog`). TLC keeps both on disk: its queue, and
its trace file of parent fingerprints. Each goes to a `SpillFile` of its own in
``TMPDIR``, gone when closed or when the process ends. Where a file cannot be
written (no room, a file size limit), the caller keeps what it would have
written in memory, and nothing is lost.
"""

from __future__ import annotations

import tempfile
from array import array
from bisect import bisect_right
from typing import IO

__all__ = ["PARENTS", "ParentLog", "SpillFile"]

PARENTS = 16 << 20
"""The bytes of parent references and actions a fingerprint store holds in memory before it
writes them to its file."""
_REF = "Q"  # a parent reference: index * partitions + partition


class SpillFile:
    """An append-only temporary file of arrays, made on the first append."""

    def __init__(self, prefix: str) -> None:
        self._prefix = prefix
        self._file: IO[bytes] | None = None
        self.end = 0  # the bytes written

    def append(self, data: bytes) -> int | None:
        """Write `data` at the end; its offset, or None if it could not be written whole (then
        the file is as it was, and the caller keeps `data`)."""
        try:
            if self._file is None:
                # Unbuffered: a write that fails (no room) fails here, not at a later seek.
                self._file = tempfile.TemporaryFile(buffering=0, prefix=self._prefix)  # noqa: SIM115
            self._file.seek(self.end)
            rest = memoryview(data)
            while rest:  # (a write may take part of it: up to a file size limit, say)
                written = self._file.write(rest)
                if not written:
                    raise OSError("the file took no more bytes")
                rest = rest[written:]
        except OSError:
            return None
        offset, self.end = self.end, self.end + len(data)
        return offset

    def write(self, offset: int, data: bytes) -> None:
        """Write `data` over what was written at `offset` (a file that took it once does)."""
        assert self._file is not None and offset + len(data) <= self.end
        self._file.seek(offset)
        self._file.write(data)

    def read(self, offset: int, count: int, typecode: str) -> array[int]:
        """`count` numbers of `typecode` written at `offset`."""
        assert self._file is not None, "only what was written is read"
        self._file.seek(offset)
        numbers = array(typecode)
        numbers.fromfile(self._file, count)
        return numbers

    def close(self) -> None:
        if self._file is not None:
            self._file.close()
            self._file = None


class ParentLog:
    """Each stored node's parent reference and action number, by index (``append``, ``len``,
    ``log[i]``). Past `limit` bytes in memory the entries held go to a file, a chunk at a time,
    and an entry of a chunk is read back from it: only a trace reads them."""

    def __init__(self, wide_actions: bool, limit: int | None = None) -> None:
        self._refs = array(_REF)
        self._actions = array("I" if wide_actions else "H")
        entry = self._refs.itemsize + self._actions.itemsize
        self._room = self._chunk = max(1, (PARENTS if limit is None else limit) // entry)
        self._base = 0  # the index of the first entry held in memory
        self._firsts: list[int] = []  # per chunk in the file: its first index
        self._offsets: list[int] = []  # and where it starts there
        self._file = SpillFile("statecore-parents-")
        self._spill = True  # until the file takes no more

    def append(self, ref: int, action: int) -> None:
        self._refs.append(ref)
        self._actions.append(action)
        self._room -= 1
        if not self._room:
            self._room = self._chunk
            if self._spill:
                self._write()

    def _write(self) -> None:
        """Move the entries held to the file; if it cannot take them, keep them, and those to
        come, in memory (the chunks written stay readable)."""
        offset = self._file.append(self._refs.tobytes() + self._actions.tobytes())
        if offset is None:
            self._spill = False
            return
        self._firsts.append(self._base)
        self._offsets.append(offset)
        self._base += len(self._refs)
        self._refs = array(_REF)
        self._actions = array(self._actions.typecode)

    def __len__(self) -> int:
        return self._base + len(self._refs)

    def __getitem__(self, index: int) -> tuple[int, int]:
        """``(parent reference, action number)`` of the node stored `index`-th."""
        if not 0 <= index < len(self):
            raise IndexError(index)
        if index >= self._base:
            return self._refs[index - self._base], self._actions[index - self._base]
        ref_at, action_at = self._offsets_of(index)
        ref = self._file.read(ref_at, 1, _REF)[0]
        return ref, self._file.read(action_at, 1, self._actions.typecode)[0]

    def __setitem__(self, index: int, entry: tuple[int, int]) -> None:
        """Make node `index`'s parent reference and action number `entry`."""
        if not 0 <= index < len(self):
            raise IndexError(index)
        ref, action = entry
        if index >= self._base:
            self._refs[index - self._base], self._actions[index - self._base] = ref, action
            return
        ref_at, action_at = self._offsets_of(index)
        self._file.write(ref_at, array(_REF, [ref]).tobytes())
        self._file.write(action_at, array(self._actions.typecode, [action]).tobytes())

    def _offsets_of(self, index: int) -> tuple[int, int]:
        """Where node `index`'s parent reference and its action number are in the file."""
        chunk = bisect_right(self._firsts, index) - 1
        first, offset = self._firsts[chunk], self._offsets[chunk]
        after = self._firsts[chunk + 1] if chunk + 1 < len(self._firsts) else self._base
        refs, actions = self._refs.itemsize, self._actions.itemsize
        return offset + (index - first) * refs, offset + (after - first) * refs + (
            index - first
        ) * actions

    @property
    def nbytes(self) -> int:
        """The bytes held in memory."""
        return len(self._refs) * self._refs.itemsize + len(self._actions) * self._actions.itemsize
