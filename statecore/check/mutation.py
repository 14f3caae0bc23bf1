"""Single-point mutants of a model, made from its structure rather than its source text.

A spec is only worth its verdicts if each property could have failed. A
*mutant* is the model with one point changed; exploring it shows which
properties notice the change. Mutants come from two places, so every model
gets them without rewriting files:

* **machines** of the system's components: per transition, drop its guard,
  negate it, drop its effect, drop what it emits, or make it stay in its
  source state;
* **actions** (and ``init``): per call site of the `Tx` in the model's code -
  a line that calls ``tx.require``, ``tx.set``, ``tx.fire``, ``tx.spawn``,
  ``tx.retire`` or ``tx.emit`` - skip the call, or for ``require`` negate it.
  Call sites are found by exploring the model once with a recording `Tx`;
  a mutant changes that one line wherever it runs.

`mutants(system)` lists them and `mutate(system, mutant)` builds one (a
mutated machine that its own definition checks reject raises
`InvalidMutant`). `statecore.check.adequacy` explores them and reports which
property kills which mutant. A site is identified by the function it is in
and its code, not its line number, so a model can declare a mutant
equivalent (`System(..., equivalent_mutants={id: reason})`) and keep the
declaration through edits that move lines.
"""

from __future__ import annotations

import functools
import linecache
import sys
from collections.abc import Callable, Hashable
from dataclasses import dataclass, replace
from pathlib import Path
from types import FrameType
from typing import Any, ClassVar

from ..definition import Machine, Output, Transition
from ..errors import DefinitionError, StatecoreError
from ..semantics import REJECTED, Outcome
from ..system import Handle, System, Tx

# Calls from the engine itself are not sites: files of the statecore package,
# except the bundled models and spec (which an installed wheel puts inside it).
_ENGINE = Path(__file__).resolve().parents[1]
_MODEL_FOLDERS = frozenset({"models", "spec"})

# What a call site can be mutated into, per Tx method.
SITE_KINDS: dict[str, tuple[str, ...]] = {
    "require": ("negate-require", "skip-require"),
    "set": ("skip-set",),
    "put": ("skip-put",),
    "append": ("skip-append",),
    "popleft": ("skip-popleft",),
    "fire": ("skip-fire",),
    "spawn": ("skip-spawn",),
    "retire": ("skip-retire",),
    "emit": ("skip-emit",),
}
MACHINE_KINDS = ("drop-guard", "negate-guard", "drop-effect", "drop-emit", "stay")


class InvalidMutant(StatecoreError):
    """A mutated machine that its definition checks reject (a mutant that does not build)."""


@dataclass(frozen=True)
class Site:
    """One line of model code that calls a `Tx` method."""

    method: str
    filename: str
    line: int
    function: str

    @property
    def code(self) -> str:
        """The line of code, stripped."""
        return linecache.getline(self.filename, self.line).strip()

    @property
    def where(self) -> str:
        """``path:line``, the path relative to the working directory when it can be."""
        return where(self.filename, self.line)


def where(filename: str, line: int) -> str:
    """``path:line``, the path relative to the working directory when it can be."""
    path = Path(filename)
    try:
        shown = str(path.resolve().relative_to(Path.cwd()))
    except ValueError:
        shown = str(path)
    return f"{shown}:{line}"


@dataclass(frozen=True)
class Mutant:
    """One single-point change: `id` is stable, `where` and `code` say what changed."""

    id: str
    kind: str
    where: str
    code: str
    site: Site | None = None
    machine: str = ""
    transition: str = ""

    def __str__(self) -> str:
        return f"{self.kind} at {self.where}: {self.code}"


# -- finding the call sites --------------------------------------------------------


def _site(frame: FrameType | None, method: str) -> Site | None:
    """The model line that called Tx.`method`, or None when the engine called it."""
    if frame is None:
        return None
    filename = frame.f_code.co_filename
    if _in_engine(filename):
        return None
    function = getattr(frame.f_code, "co_qualname", frame.f_code.co_name)
    return Site(method, filename, frame.f_lineno, function)


@functools.cache
def _in_engine(filename: str) -> bool:
    path = Path(filename).resolve()
    if _ENGINE not in path.parents:
        return False
    return path.relative_to(_ENGINE).parts[0] not in _MODEL_FOLDERS


class _RecordingTx(Tx[Any]):
    """A `Tx` that notes the model line of every call it gets."""

    __slots__ = ()
    found: ClassVar[set[Site]] = set()

    def require(self, condition: object, why: str = "") -> None:
        self._note("require")
        super().require(condition, why)

    def set(self, name: str, value: Hashable) -> None:
        self._note("set")
        super().set(name, value)

    def put(self, **changes: Hashable) -> None:
        self._note("put")
        super().put(**changes)

    def append(self, name: str, item: Hashable) -> None:
        self._note("append")
        super().append(name, item)

    def popleft(self, name: str) -> Any:
        self._note("popleft")
        return super().popleft(name)

    def fire(self, target: Handle | tuple[str, Hashable], event: str, /, **payload: Any) -> Outcome:
        self._note("fire")
        return super().fire(target, event, **payload)

    def spawn(self, component: str, key: Hashable) -> Handle:
        self._note("spawn")
        return super().spawn(component, key)

    def retire(self, target: Handle | tuple[str, Hashable]) -> bool:
        self._note("retire")
        return super().retire(target)

    def emit(self, output: Output) -> None:
        self._note("emit")
        super().emit(output)

    def _note(self, method: str) -> None:
        site = _site(sys._getframe(2), method)
        if site is not None:
            type(self).found.add(site)


def _with_tx_class(run: Callable[..., None], cls: type[Tx[Any]]) -> Callable[..., None]:
    """`run` with its transaction switched to `cls` (same layout) while it runs."""

    def wrapped(tx: Tx[Any], **args: Any) -> None:
        tx.__class__ = cls
        try:
            run(tx, **args)
        finally:
            tx.__class__ = Tx

    return wrapped


def _rebuilt(
    system: System,
    *,
    run: Callable[[Callable[..., None]], Callable[..., None]] | None = None,
    machines: dict[int, Machine] | None = None,
) -> System:
    """`system` with every action (and init) wrapped by `run`, and machines replaced."""
    swap = machines or {}
    wrap = run or (lambda f: f)
    return System(
        system.name,
        components=[
            replace(c, machine=swap.get(id(c.machine), c.machine)) for c in system.components
        ],
        actions=[replace(a, run=wrap(a.run)) for a in system.actions],
        globals=system.record or system.globals,
        init=None if system.init is None else wrap(system.init),
        properties=system.properties,
        doc=system.doc,
        equivalent_mutants=system.equivalent_mutants,
    )


def call_sites(system: System, max_states: int | None = None) -> tuple[Site, ...]:
    """Every model line that calls the `Tx`, met while exploring `system` (once)."""
    from .explore import explore

    recorder: type[_RecordingTx] = type(
        "_Recorder", (_RecordingTx,), {"__slots__": (), "found": set()}
    )
    recording = _rebuilt(system, run=lambda f: _with_tx_class(f, recorder))
    explore(recording, properties=(), max_states=max_states, stop_on_violation=False)
    found: set[Site] = recorder.found
    return tuple(sorted(found, key=lambda s: (s.filename, s.line, s.method)))


# -- listing mutants ------------------------------------------------------------------


def mutants(system: System, max_states: int | None = None) -> tuple[Mutant, ...]:
    """Every single-point mutant of `system`: machines first, then call sites."""
    found = [*_machine_mutants(system), *_site_mutants(call_sites(system, max_states))]
    seen: dict[str, int] = {}
    unique = []
    for mutant in found:
        count = seen[mutant.id] = seen.get(mutant.id, 0) + 1
        unique.append(mutant if count == 1 else replace(mutant, id=f"{mutant.id} #{count}"))
    return tuple(unique)


def _machines(system: System) -> list[Machine]:
    """The components' machines, each once, in declaration order."""
    seen: dict[int, Machine] = {}
    for comp in system.components:
        seen.setdefault(id(comp.machine), comp.machine)
    return list(seen.values())


def _machine_mutants(system: System) -> list[Mutant]:
    found = []
    for machine in _machines(system):
        for t in machine.transitions:
            for kind in _transition_kinds(t):
                found.append(
                    Mutant(
                        f"{kind} {machine.name}.{t.name}",
                        kind,
                        f"machine {machine.name!r}",
                        f"transition {t.name}",
                        machine=machine.name,
                        transition=t.name,
                    )
                )
    return found


def _transition_kinds(t: Transition) -> list[str]:
    kinds = []
    if t.guard is not None:
        kinds += ["drop-guard", "negate-guard"]
    if t.effect is not None:
        kinds.append("drop-effect")
    if t.emit:
        kinds.append("drop-emit")
    if t.target is not None and t.target not in t.source:
        kinds.append("stay")
    return kinds


def _site_mutants(sites: tuple[Site, ...]) -> list[Mutant]:
    return [
        Mutant(f"{kind} {site.function}: {site.code}", kind, site.where, site.code, site=site)
        for site in sites
        for kind in SITE_KINDS[site.method]
    ]


# -- building one -----------------------------------------------------------------------


def mutate(system: System, mutant: Mutant) -> System:
    """`system` with `mutant` applied; `InvalidMutant` if a mutated machine does not build."""
    if mutant.site is not None:
        cls = _site_tx(mutant.site, mutant.kind)
        return _rebuilt(system, run=lambda f: _with_tx_class(f, cls))
    for machine in _machines(system):
        if machine.name == mutant.machine:
            return _rebuilt(system, machines={id(machine): _mutated_machine(machine, mutant)})
    raise InvalidMutant(f"system {system.name!r} has no machine {mutant.machine!r}")


def _mutated_machine(machine: Machine, mutant: Mutant) -> Machine:
    transitions = [
        _mutated_transition(t, mutant.kind) if t.name == mutant.transition else t
        for t in machine.transitions
    ]
    try:
        return Machine(
            machine.name,
            states=machine.states,
            events=machine.events,
            transitions=transitions,
            variables=machine.variables,
            doc=machine.doc,
            check_limit=machine.check_limit,
        )
    except DefinitionError as exc:
        raise InvalidMutant(f"{mutant}: the mutated machine does not build: {exc}") from None


def _mutated_transition(t: Transition, kind: str) -> Transition:
    guard, effect, emit, target = t.guard, t.effect, t.emit, t.target
    if kind == "drop-guard":
        guard = None
    elif kind == "negate-guard":
        assert guard is not None
        original = guard

        def guard(snapshot: Any, payload: Any) -> bool:
            return not original(snapshot, payload)

    elif kind == "drop-effect":
        effect = None
    elif kind == "drop-emit":
        emit = ()
    elif kind == "stay":
        target = None
    return Transition(
        t.source,
        t.event,
        target,
        guard=guard,
        effect=effect,
        emit=emit,
        guard_label=t.guard_label if guard is not None else "",
        effect_label=t.effect_label if effect is not None else "",
        name=t.name,
    )


class _MutantTx(Tx[Any]):
    """A `Tx` that changes what one model line does (`site`, mutated as `kind`)."""

    __slots__ = ()
    site: ClassVar[Site]
    kind: ClassVar[str]

    def _hit(self, method: str) -> bool:
        site = _site(sys._getframe(2), method)
        return site is not None and site == type(self).site

    def require(self, condition: object, why: str = "") -> None:
        if self._hit("require"):
            if self.kind == "skip-require":
                return
            condition = not condition
        super().require(condition, why)

    def set(self, name: str, value: Hashable) -> None:
        if not self._hit("set"):
            super().set(name, value)

    def put(self, **changes: Hashable) -> None:
        if not self._hit("put"):
            super().put(**changes)

    def append(self, name: str, item: Hashable) -> None:
        if not self._hit("append"):
            super().append(name, item)

    def popleft(self, name: str) -> Any:
        """Skipped, the item is taken but left at the front (a get that forgets to remove)."""
        if not self._hit("popleft"):
            return super().popleft(name)
        queue = self.get(name)
        self.require(queue)
        return queue[0]

    def fire(self, target: Handle | tuple[str, Hashable], event: str, /, **payload: Any) -> Outcome:
        if not self._hit("fire"):
            return super().fire(target, event, **payload)
        machine = self.system.component(target[0]).machine
        snapshot = self.snapshot(target) or machine.initial_snapshot()
        return Outcome(REJECTED, snapshot, (), None, event, "the fire was skipped")

    def spawn(self, component: str, key: Hashable) -> Handle:
        if not self._hit("spawn"):
            return super().spawn(component, key)
        slot = self._slot(self.system.slot_index(component, key))
        return Handle(component, key, slot.generation + 1)

    def retire(self, target: Handle | tuple[str, Hashable]) -> bool:
        if not self._hit("retire"):
            return super().retire(target)
        return self.live(target)

    def emit(self, output: Output) -> None:
        if not self._hit("emit"):
            super().emit(output)


def _site_tx(site: Site, kind: str) -> type[Tx[Any]]:
    return type("_SiteMutantTx", (_MutantTx,), {"__slots__": (), "site": site, "kind": kind})
