"""Python's cyclic garbage collector, paced for fuzzing.

A fuzz run allocates model states, steps and observations at every step, and
most die with the step or the example; what lives on is the successor memo
(`statecore.fuzzing.interpreter.shared_successors`), which grows with every
model state the run meets and soon holds most of the objects the collector
tracks. Left to itself, the collector walks the young objects many times per
example and, whenever the long-lived objects have grown by a quarter, walks
all of them again: the whole memo, each time. Two measures keep that cost in
proportion without keeping any garbage for good:

* `CollectorPause` - no collection inside an example; the example's cyclic
  garbage goes at the first collection after it.
* `spaced_full_collections` - while a fuzz run lasts, full collections come
  at most every `FULL_COLLECTION_SPACING` collections of the middle
  generation; cyclic garbage that reached the oldest generation waits that
  much longer, and the thresholds are restored when the run ends.
"""

from __future__ import annotations

import gc
import threading
from collections.abc import Iterator
from contextlib import contextmanager

__all__ = ["FULL_COLLECTION_SPACING", "CollectorPause", "spaced_full_collections"]

FULL_COLLECTION_SPACING = 100
"""Middle-generation collections between two full ones while fuzzing (Python's default: 10).

With the pause, a young collection follows each example, so this is a full
collection about every thousand examples rather than every hundred.
"""


class CollectorPause:
    """Python's cyclic garbage collector paused for one example, resumed by `end`.

    Paused, nothing is collected mid-example: each collection the example's
    allocations would trigger walks the young objects and promotes whatever
    the example holds to the older generations. Not paused when the collector
    was off already, and never switched on by `end` then.

    The first two examples of a process also move the heap that exists then
    (the model, the implementation and the imports of its first use) to the
    collector's permanent generation (`gc.freeze`, after collecting the young
    generations), so that full collections walk what fuzzing allocates, not
    the implementation's libraries (vLLM's are most of a heap). Cyclic garbage
    among the frozen objects is not reclaimed in this process.
    """

    __slots__ = ("_paused",)
    _freezes_left = 2

    def __init__(self) -> None:
        self._paused = gc.isenabled()
        if not self._paused:
            return
        gc.disable()
        if CollectorPause._freezes_left:
            CollectorPause._freezes_left -= 1
            gc.collect(1)
            gc.freeze()

    def end(self) -> None:
        """Let the collector run again (once; later calls do nothing)."""
        if self._paused:
            self._paused = False
            gc.enable()


class _Spacing:
    """The fuzz runs in progress in this process, and the thresholds to restore after them.

    `saved` is None when the first run found nothing to change.
    """

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.runs = 0
        self.saved: tuple[int, int, int] | None = None


_SPACING = _Spacing()


@contextmanager
def spaced_full_collections(spacing: int | None = None) -> Iterator[None]:
    """Full collections at most every `spacing` middle-generation collections, inside.

    `spacing` is `FULL_COLLECTION_SPACING` unless given (read at each entry).
    Runs may nest or overlap (threads): the first to start raises the
    threshold, the last to end restores what it found. A threshold already
    above `spacing`, or automatic collection switched off (a young threshold
    of 0), is left as it is.
    """
    spacing = FULL_COLLECTION_SPACING if spacing is None else spacing
    with _SPACING.lock:
        if _SPACING.runs == 0:
            young, middle, old = gc.get_threshold()
            if young and old < spacing:
                _SPACING.saved = (young, middle, old)
                gc.set_threshold(young, middle, spacing)
        _SPACING.runs += 1
    try:
        yield
    finally:
        with _SPACING.lock:
            _SPACING.runs -= 1
            if _SPACING.runs == 0 and _SPACING.saved is not None:
                gc.set_threshold(*_SPACING.saved)
                _SPACING.saved = None
