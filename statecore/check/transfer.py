"""Nodes sent from one worker process to another, by pickle.

A machine's snapshot class is built when the machine is validated, at run
time, so pickle cannot find it by name; the workers are forked from one
process, so each has the same classes, and a snapshot travels as its class's
id and its values.
"""

from __future__ import annotations

import copyreg
import io
import pickle
from collections.abc import Callable
from typing import Any

from ..definition import Snapshot

__all__ = ["dumps"]


_CLASSES: dict[int, type[Snapshot]] = {}  # this process's snapshot classes, by id


def _snapshot(key: int, values: tuple[Any, ...]) -> Snapshot:
    """Rebuild a machine snapshot sent by another worker (the same class, forked)."""
    cls = _CLASSES.get(key)
    if cls is None:
        _CLASSES.update(_snapshot_classes())
        cls = _CLASSES[key]
    return cls(values)


def _snapshot_classes() -> dict[int, type[Snapshot]]:
    found: dict[int, type[Snapshot]] = {}
    stack = [Snapshot]
    while stack:
        for sub in stack.pop().__subclasses__():
            found[id(sub)] = sub
            stack.append(sub)
    return found


def _reduce_snapshot(snap: Snapshot) -> tuple[Callable[..., Snapshot], tuple[int, tuple[Any, ...]]]:
    return _snapshot, (id(type(snap)), tuple(snap))


def dumps(items: list[Any]) -> bytes:
    """Pickle successors; a machine's snapshot class is built at run time, so it goes by id."""
    buffer = io.BytesIO()
    pickler = pickle.Pickler(buffer, pickle.HIGHEST_PROTOCOL)
    table = dict(copyreg.dispatch_table)
    for cls in _snapshot_classes().values():
        table[cls] = _reduce_snapshot
    pickler.dispatch_table = table
    pickler.dump(items)
    return buffer.getvalue()
