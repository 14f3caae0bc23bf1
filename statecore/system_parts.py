"""The values a `System` is made of and the values its states and steps are.

Components and their keys (`Keys`, `ModelValue`), one instance's generation
(`Handle`, `Slot`), a whole state (`SystemState`), and an action (`Action`)
with what one step of it records (`ActionLabel`, `Emitted`,
`TakenTransition`, `SystemStep`). All are immutable, hashable values;
`statecore.system` re-exports them.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable, Hashable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, NamedTuple

from .definition import Machine, Output, Snapshot


class ModelValue(NamedTuple):
    """An opaque id of a bounded model (TLA+'s model values), e.g. ``ext0``.

    Ids of one `Keys` set are interchangeable when the set is symmetric: the
    explorer may then rename them to a canonical order.
    """

    group: str
    number: int

    def __repr__(self) -> str:
        return f"{self.group}{self.number}"

    def __str__(self) -> str:
        return f"{self.group}{self.number}"


@dataclass(frozen=True)
class Keys:
    """A bounded set of ids, e.g. ``Keys("ext", 2)`` gives ``ext0, ext1``."""

    name: str
    size: int
    symmetric: bool = True

    @property
    def values(self) -> tuple[ModelValue, ...]:
        """The ids of the set, in order."""
        return tuple(ModelValue(self.name, i) for i in range(self.size))


class Handle(NamedTuple):
    """One generation of one component's key: what a retained reference holds."""

    component: str
    key: Hashable
    generation: int

    def __repr__(self) -> str:
        return f"{self.component}[{self.key}]#{self.generation}"


@dataclass(frozen=True)
class Component:
    """A machine instantiated once per key, with at most `max_generations` per key.

    `untaken` names transitions of `machine` this system is not meant to take,
    each with the reason (a reused machine whose other users take them, say).
    Coverage reports list them as explained rather than as dead model code.
    """

    name: str
    machine: Machine
    keys: Keys | Sequence[Hashable]
    max_generations: int = 1
    untaken: Mapping[str, str] = field(default_factory=dict, compare=False, hash=False)

    @property
    def key_values(self) -> tuple[Hashable, ...]:
        """The concrete keys of this component."""
        return self.keys.values if isinstance(self.keys, Keys) else tuple(self.keys)


class Slot(NamedTuple):
    """The generation counter and current snapshot (or None) of one key."""

    generation: int
    snapshot: Snapshot | None


class SystemState(NamedTuple):
    """An immutable, hashable system state: slots in declaration order, then globals."""

    slots: tuple[Slot, ...]
    values: tuple[Hashable, ...]


class ActionLabel(NamedTuple):
    """An action with its arguments: what a trace step records."""

    name: str
    args: tuple[tuple[str, Hashable], ...] = ()

    def arg(self, name: str) -> Any:
        """The value of argument `name`."""
        return dict(self.args)[name]

    def __str__(self) -> str:
        inner = ", ".join(f"{k}={v!r}" for k, v in self.args)
        return f"{self.name}({inner})"

    def __repr__(self) -> str:
        return str(self)


class Emitted(NamedTuple):
    """An output and who emitted it (a handle, or None for the action itself)."""

    source: Handle | None
    output: Output


class TakenTransition(NamedTuple):
    """A machine transition taken during a system step (for coverage)."""

    component: str
    machine: str
    transition: str


class SystemStep(NamedTuple):
    """One enabled action and its effect."""

    action: ActionLabel
    actor: str
    internal: bool
    state: SystemState
    outputs: tuple[Emitted, ...]
    taken: tuple[TakenTransition, ...]


RunFn = Callable[..., None]


@dataclass(frozen=True)
class Action:
    """A kind of step an actor can take.

    `run(tx, **args)` is called with a `Tx` and one value for each parameter,
    drawn from `params` (a `Keys` set or any finite iterable). It changes the
    state through the transaction, or calls ``tx.require(False)`` to say the
    action is not enabled with these arguments. It must be deterministic.
    """

    name: str
    actor: str
    run: RunFn
    params: Mapping[str, Keys | Sequence[Hashable]] = field(default_factory=dict)
    internal: bool = False
    doc: str = ""

    def arguments(self) -> Iterator[tuple[tuple[str, Hashable], ...]]:
        """Every combination of argument values, as ``((name, value), ...)``."""
        names = list(self.params)
        domains = [d.values if isinstance(d, Keys) else tuple(d) for d in self.params.values()]
        for combo in itertools.product(*domains):
            yield tuple(zip(names, combo))
