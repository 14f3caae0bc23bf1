"""statecore: one declarative lifecycle definition, four uses.

Run it (`Instance`), check it exhaustively (`statecore.check.explore`), fuzz a real
implementation against it (`statecore.fuzzing.fuzz`), and draw it
(`statecore.render.diagram`). The names below are the public API of the runtime
core; they import nothing outside the standard library.
"""

from __future__ import annotations

from . import moved
from .definition import Event, Field, Machine, Output, Snapshot, State, Transition, Var, out
from .errors import (
    DefinitionError,
    FireError,
    ImpureCallbackError,
    ListenerError,
    ReentrantFireError,
    StatecoreError,
    TransitionError,
)
from .runtime import Instance, Prepared, clear_memo, memo_size, prepare, verify_memo
from .semantics import ACCEPTED, IGNORED, REJECTED, Outcome, step

__version__ = "0.1.0"

moved.install()  # the flat layout's module paths (statecore.explore, ...) still import

__all__ = [
    "ACCEPTED",
    "IGNORED",
    "REJECTED",
    "DefinitionError",
    "Event",
    "Field",
    "FireError",
    "ImpureCallbackError",
    "Instance",
    "ListenerError",
    "Machine",
    "Outcome",
    "Output",
    "Prepared",
    "ReentrantFireError",
    "Snapshot",
    "State",
    "StatecoreError",
    "Transition",
    "TransitionError",
    "Var",
    "clear_memo",
    "memo_size",
    "out",
    "prepare",
    "step",
    "verify_memo",
]
