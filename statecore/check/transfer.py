"""Nodes sent from one worker to another, by pickle.

A machine's snapshot class is built when the machine is validated, at run
time, so pickle cannot find it by name. Forked workers have the same classes
as the process they were forked from, so there a snapshot travels as its
class's id and its values (`dumps`, `loads`). Workers that are not forked (a
Ray cluster's) each build the system anew: there a snapshot travels as its
class's place among the system's machines (`Codec`), the same in every
process that built the same system.
"""

from __future__ import annotations

import copyreg
import io
import pickle
from collections.abc import Callable, Sequence
from typing import Any

from ..definition import Snapshot
from ..system import System

__all__ = ["Codec", "dumps", "loads", "snapshot_classes"]


_CLASSES: dict[int, type[Snapshot]] = {}  # this process's snapshot classes, by id


def _snapshot(key: int, values: tuple[Any, ...]) -> Snapshot:
    """Rebuild a machine snapshot sent by another worker (the same class, forked)."""
    cls = _CLASSES.get(key)
    if cls is None:
        _CLASSES.update(_all_snapshot_classes())
        cls = _CLASSES[key]
    return cls(values)


def _all_snapshot_classes() -> dict[int, type[Snapshot]]:
    found: dict[int, type[Snapshot]] = {}
    stack = [Snapshot]
    while stack:
        for sub in stack.pop().__subclasses__():
            found[id(sub)] = sub
            stack.append(sub)
    return found


def _pickle(items: Any, keys: dict[type[Snapshot], int]) -> bytes:
    def reduce(snap: Snapshot) -> tuple[Callable[..., Snapshot], tuple[int, tuple[Any, ...]]]:
        return _snapshot, (keys[type(snap)], tuple(snap))

    buffer = io.BytesIO()
    pickler = pickle.Pickler(buffer, pickle.HIGHEST_PROTOCOL)
    table = dict(copyreg.dispatch_table)
    for cls in keys:
        table[cls] = reduce
    pickler.dispatch_table = table
    pickler.dump(items)
    return buffer.getvalue()


def dumps(items: Any) -> bytes:
    """Pickle successors for a forked worker: a snapshot class goes by its id."""
    return _pickle(items, {cls: key for key, cls in _all_snapshot_classes().items()})


def loads(data: bytes) -> Any:
    """Unpickle what `dumps` pickled, in a process forked from the sender's parent."""
    return pickle.loads(data)


def snapshot_classes(system: System) -> tuple[type[Snapshot], ...]:
    """The snapshot classes of `system`'s machines and its monitors', in declaration order."""
    machines = [component.machine for component in system.components]
    machines += [p.machine for p in system.properties if p.machine is not None]
    return tuple(dict.fromkeys(machine.snapshot_class for machine in machines))


class Codec:
    """Pickles nodes between processes that each built the same system (not forked).

    A snapshot goes as the index of its class in `snapshot_classes`; the
    receiver maps the index back to its own class.
    """

    def __init__(self, system: System) -> None:
        self.classes = snapshot_classes(system)
        self.keys = {cls: index for index, cls in enumerate(self.classes)}

    def dumps(self, items: Any) -> bytes:
        return _pickle(items, self.keys)

    def loads(self, data: bytes) -> Any:
        return _Unpickler(io.BytesIO(data), self.classes).load()


class _Unpickler(pickle.Unpickler):
    def __init__(self, file: io.BytesIO, classes: Sequence[type[Snapshot]]) -> None:
        super().__init__(file)
        self.classes = classes

    def find_class(self, module: str, name: str) -> Any:
        if module == __name__ and name == "_snapshot":
            classes = self.classes
            return lambda key, values: classes[key](values)
        return super().find_class(module, name)
