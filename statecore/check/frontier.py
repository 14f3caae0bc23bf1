"""A depth level's nodes packed into one array: the breadth-first queue of a fingerprint search.

With fingerprints the visited set holds a few bytes a state
(`statecore.check.fingerprints`), and what is left is the level being built:
on `chunk_transfer` at two ids it holds nearly half of the states seen, each
as four tuples (the node, its `SystemState`, the slots, the globals), a few
hundred bytes apiece. `Frontier` keeps a node as one number per part (each
slot, each global, each monitor state), two bytes each while they fit, all
of a level's in one flat array, and each part once in a table per position,
shared by every level of the search (`Parts`). A packed node is built again
when it is expanded: no walk hints (`statecore.check.stepcache`) survive
that. So a level keeps its first nodes as they are (`UNPACKED`, a few
megabytes), and the search their hints: a level of a moderate search is
never packed, and loses nothing to it.

A search's level holds at most `SPILL` bytes of packed nodes in memory: past
them it writes them to a temporary file of its own (in ``TMPDIR``), in order,
and reads them back as the level is expanded, as TLC keeps its queue on disk.
Then the memory a large search takes is its visited set and its memos, not the
tens of millions of nodes two levels can hold. Where the file cannot be
written (no room), the level keeps the rest in memory.

Equal parts at one position share a number only if they are alike
(`statecore.check.values.alike`: one `strict` form), so a node comes back
alike the one queued in every part: ``1`` stays ``1`` where ``True`` was
numbered first. Which is checked once per object: a part is looked up by
identity first (most are the memos' shared objects), by equality only when
it is an object not met at its position before.
"""

from __future__ import annotations

from array import array
from collections.abc import Callable, Hashable, Iterable, Iterator
from itertools import islice
from typing import Any

from ..system import System, SystemState
from .predicates import Judgements
from .spill import SpillFile
from .stepcache import Hint
from .values import alike, strict

__all__ = [
    "SPILL",
    "UNPACKED",
    "Frontier",
    "Level",
    "NodeHint",
    "Parts",
    "expand_hinted",
    "new_level",
]

Node = tuple[Any, ...]

NodeHint = tuple[Hint | None, Judgements | None]
"""What an unpacked level keeps beside each node, for its expansion to start from: its walks'
hint (`statecore.check.stepcache.SuccessorCache.expand`) and what decided each predicate judged
on it (`statecore.check.predicates.Judgements`); each None where not known."""

UNPACKED = 1 << 15
"""The nodes a level keeps as they are before it packs the rest (with their hints, a few
hundred bytes each)."""
SPILL = 32 << 20
"""The bytes of packed nodes a search's level holds in memory before it writes them to its file."""
_NARROW = 0xFFFF  # the largest number two bytes hold
_KEPT = 1 << 17  # parts remembered by identity at most
_new = tuple.__new__  # builds a named tuple without its Python-level __new__


class Parts:
    """The distinct parts met at each position of a node, numbered in the order met.

    A node ``(SystemState(slots, values), *monitors)`` has ``slots + globals +
    monitors`` positions; position i numbers its parts in ``numbers[i]`` and
    keeps them by number in ``tables[i]``. Two parts share a number only if
    they are `alike` (one `strict` form): ``1`` and ``True``, or ``0.0`` and
    ``-0.0``, are equal and get two.
    """

    def __init__(self, slots: int, globals_: int, monitors: int) -> None:
        self.slots = slots
        self.split = slots + globals_  # where the monitor states begin
        self.width = self.split + monitors
        self.numbers: list[dict[Hashable, int]] = [{} for _ in range(self.width)]
        self.tables: list[list[Hashable]] = [[] for _ in range(self.width)]
        # Equal parts that are not alike the numbered one, by its number and their strict form.
        self._unlike: list[dict[tuple[int, Hashable], int]] = [{} for _ in range(self.width)]
        self.wide = False  # whether a number needs more than two bytes
        # Each position's numbers by the identity of the objects met there (most parts are the
        # memos' shared objects): each kept alive while remembered, so an id names one object.
        self._known: list[dict[int, int]] = [{} for _ in range(self.width)]
        self._gets = [known.get for known in self._known]
        self._kept: list[Hashable] = []

    @property
    def shape(self) -> tuple[int, int, int]:
        """The slots, globals and monitor states of a node: the arguments to make such another."""
        return self.slots, self.split - self.slots, self.width - self.split

    @classmethod
    def of(cls, system: System, monitors: int) -> Parts:
        """The parts of `system`'s nodes, which carry `monitors` monitor states."""
        return cls(len(system.slot_keys()), len(system.globals), monitors)

    def codes(self, node: Node) -> list[int]:
        """The numbers of `node`'s parts, numbering the parts not met before."""
        state = node[0]
        parts = (*state[0], *state[1], *node[1:])
        codes = [get(id(part)) for get, part in zip(self._gets, parts)]
        if None in codes:
            for position, code in enumerate(codes):
                if code is None:
                    codes[position] = self._number(position, parts[position])
        return codes  # type: ignore[return-value]  # every None was numbered

    def _number(self, position: int, part: Hashable) -> int:
        """The number of `part` at `position`, an object not met there (or forgotten)."""
        table = self.tables[position]
        code = self.numbers[position].get(part)
        if code is None:
            code = self.numbers[position][part] = len(table)
            table.append(part)
            self.wide = self.wide or code > _NARROW
        elif table[code] is not part and not alike(table[code], part):
            unlike = self._unlike[position]
            code = unlike.setdefault((code, strict(part)), len(table))  # (NaN: strict, unequal)
            if code == len(table):
                table.append(part)
                self.wide = self.wide or code > _NARROW
        if len(self._kept) >= _KEPT:
            self._kept.clear()
            for known in self._known:
                known.clear()
        self._known[position][id(part)] = code
        self._kept.append(part)
        return code

    def node(self, codes: Iterable[int]) -> Node:
        """The node whose parts have `codes` (`width` numbers)."""
        parts = list(map(list.__getitem__, self.tables, codes))
        slots, split = self.slots, self.split
        state = _new(SystemState, (tuple(parts[:slots]), tuple(parts[slots:split])))
        return (state, *parts[split:])


class Frontier:
    """A list of nodes (``append``, ``len``, iteration in order): the first `unpacked` as they
    are, the rest ``width`` numbers each, two bytes a number while every position has met at
    most 65,536 parts, four from then on. With `spill`, packed nodes past `SPILL` bytes go to
    a temporary file, a chunk at a time (`_chunks`), and come back from it in order."""

    def __init__(self, parts: Parts, unpacked: int = 0, spill: bool = False) -> None:
        self.parts = parts
        self._plain: list[Node] = []
        self._room = unpacked  # nodes still kept as they are
        self._codes = array("I" if parts.wide else "H")  # the packed nodes held in memory
        self._length = 0  # packed (a system with no slot, global or monitor has 0 numbers a node)
        self._spill = spill
        self._file = SpillFile("statecore-level-")  # (closed, and gone, with the level)
        self._chunks: list[tuple[int, int, str]] = []  # (offset, nodes, typecode) in the file
        self._spilled = 0  # the packed nodes in the file

    @property
    def packing(self) -> bool:
        """Whether nodes appended now are packed."""
        return not self._room

    def append(self, node: Node) -> None:
        if self._room:
            self._plain.append(node)
            self._room -= 1
            return
        codes = self.parts.codes(node)
        if self.parts.wide and self._codes.typecode == "H":
            self._codes = array("I", self._codes)
        self._codes.extend(codes)
        self._length += 1
        if self._spill and len(self._codes) * self._codes.itemsize >= SPILL:
            self._write()

    def _write(self) -> None:
        """Move the packed nodes held in memory to the end of the file (made on first use);
        if it cannot be written, keep them, and those to come, in memory."""
        codes = self._codes
        offset = self._file.append(codes.tobytes())
        if offset is None:
            self._spill = False
            return
        nodes = len(codes) // self.parts.width
        self._chunks.append((offset, nodes, codes.typecode))
        self._spilled += nodes
        self._codes = array(codes.typecode)

    def _read(self, offset: int, numbers: int, typecode: str) -> array[int]:
        """`numbers` numbers of `typecode` from the file at `offset`."""
        return self._file.read(offset, numbers, typecode)

    def __len__(self) -> int:
        return len(self._plain) + self._length

    def __bool__(self) -> bool:
        return bool(self._plain) or self._length > 0

    def __iter__(self) -> Iterator[Node]:
        yield from self._plain
        width, build = self.parts.width, self.parts.node
        for offset, nodes, typecode in self._chunks:
            row = iter(self._read(offset, nodes * width, typecode))
            for _ in range(nodes):
                yield build(islice(row, width))
        row = iter(self._codes)
        for _ in range(self._length - self._spilled):
            yield build(islice(row, width))

    def rows(self, start: int, stop: int) -> array[int]:
        """The numbers of packed nodes `start` to `stop` (a level that packs them all and
        keeps them in memory), a node's `Parts.width` after another's."""
        assert not self._plain and not self._chunks, "only a level of packed nodes in memory"
        width = self.parts.width
        return self._codes[start * width : stop * width]

    def __getitem__(self, index: int) -> Node:
        width, plain = self.parts.width, len(self._plain)
        if not 0 <= index < len(self):
            raise IndexError(index)
        if index < plain:
            return self._plain[index]
        index -= plain
        for offset, nodes, typecode in self._chunks:
            if index < nodes:
                row_bytes = width * array(typecode).itemsize
                return self.parts.node(self._read(offset + index * row_bytes, width, typecode))
            index -= nodes
        return self.parts.node(self._codes[index * width : (index + 1) * width])


Level = list[Node] | Frontier  # what a search queues a level's nodes in


def new_level(parts: Parts | None) -> Level:
    """An empty level to queue nodes in: packed into `parts` past its first `UNPACKED` nodes,
    and spilled to a file past `SPILL` bytes of them (None: a plain list)."""
    return [] if parts is None else Frontier(parts, UNPACKED, spill=True)


def expand_hinted(
    expand: Callable[[Node, Level, NodeHint | None, list[NodeHint | None] | None], None],
    node: Node,
    index: int,
    deeper: Level,
    hints: list[NodeHint | None] | None,
    deeper_hints: list[NodeHint | None] | None,
) -> list[NodeHint | None] | None:
    """`expand` the `index`-th node of a level with its hint (none past `hints`' end) into
    `deeper`; the list of `deeper`'s hints to go on filling: None once `deeper` packs, where a
    node's hint would be lost (a level's hints are those of its unpacked first nodes)."""
    hint = hints[index] if hints is not None and index < len(hints) else None
    expand(node, deeper, hint, deeper_hints)
    if deeper_hints is not None and type(deeper) is Frontier and deeper.packing:
        return None
    return deeper_hints
