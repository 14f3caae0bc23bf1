"""Symbolic guard checks: look past the samples for payloads that break a machine.

Definition-time validation fires every event with every combination of finite
domains and *samples*, so a float field sampled as ``(0.0, 5.0)`` never sees
NaN, a negative number or infinity. `symbolic_check` looks further, for each
state and each event with an unbounded field (a `Field` with a `sample` but no
finite `domain`), for payloads where:

* a guard raises (``"guard-raises"``): firing the event crashes the caller;
* two guards hold at once (``"overlap"``): `step` silently takes the first;
* no guard holds and the event's policy is ``"error"``
  (``"no-guard-error-policy"``): `step` raises `TransitionError` in production;
* an effect raises, returns something other than a mapping, or assigns an
  unknown variable or a value outside its domain (``"effect-domain"``).

Two searches propose payloads and one concrete oracle judges them:

1. Boundary values, always: the samples, then NaN, infinities, signed zeros,
   subnormals and powers of ten for floats (likewise for ints and strings),
   tried in every reachable snapshot of the state. This is what makes NaN,
   negative and infinite values deterministic findings.
2. CrossHair path exploration (the engine behind ``crosshair cover``): the
   unbounded fields become symbolic values of the field's type, the snapshot
   and the bounded fields symbolic choices, and every path through the guards
   and effects yields one concrete payload. This finds values no fixed list
   has, such as the narrow interval where two float comparisons overlap.

Every proposed payload is replayed with plain Python, outside CrossHair, and
classified there, so a finding is never a solver artefact: its payload and
snapshot reproduce it with `statecore.step`.

CrossHair is imported lazily, so ``import statecore`` stays stdlib-only;
install it with ``pip install 'statecore[check]'``.
"""

from __future__ import annotations

import inspect
import itertools
import math
import sys
import warnings
from collections.abc import Hashable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Literal

if TYPE_CHECKING:
    from ..definition import Compiled, Event, Field, Machine, Snapshot

FindingKind = Literal["guard-raises", "overlap", "no-guard-error-policy", "effect-domain"]

KINDS: tuple[FindingKind, ...] = (
    "guard-raises",
    "overlap",
    "no-guard-error-policy",
    "effect-domain",
)

INSTALL_HINT = "pip install 'statecore[check]'"

# Above this many payload combinations per snapshot, boundary values are tried
# one field at a time (the others at their first value) instead of crossed.
PRODUCT_LIMIT = 4096

# Effects' values are steered towards and away from a non-range domain by
# one equality test per value; past this size only the oracle checks them.
STEER_LIMIT = 32

_POWERS = tuple(10.0**k for k in range(1, 19))

_FLOAT_BOUNDARIES: tuple[float, ...] = (
    0.0,
    1.0,
    -1.0,
    0.5,
    -0.5,
    *_POWERS,
    *(-p for p in _POWERS),
    -0.0,
    5e-324,
    -5e-324,
    sys.float_info.max,
    -sys.float_info.max,
    math.inf,
    -math.inf,
    math.nan,
)

_INT_BOUNDARIES: tuple[int, ...] = (
    0,
    1,
    -1,
    2,
    -2,
    *(10**k for k in range(1, 19)),
    *(-(10**k) for k in range(1, 19)),
    2**31 - 1,
    -(2**31),
    2**63 - 1,
    -(2**63),
    2**64,
)

_STR_BOUNDARIES: tuple[str, ...] = (
    "",
    " ",
    "a",
    "0",
    "-1",
    "1.5",
    "nan",
    "inf",
    "None",
    "\x00",
    "\n",
    "é",
    "\U0001f4a5",
    "a" * 1000,
)

_BOUNDARIES: Mapping[type, tuple[Any, ...]] = {
    bool: (False, True),
    int: _INT_BOUNDARIES,
    float: _FLOAT_BOUNDARIES,
    str: _STR_BOUNDARIES,
    bytes: (b"", b"\x00", b"a", b"\xff", b"a" * 1000),
}


@dataclass(frozen=True)
class SymbolicFinding:
    """A payload that breaks `machine` in `snapshot` when `event` is fired.

    `kind` is one of `KINDS`; `transitions` names the transitions involved
    (the raising guard or effect, the two overlapping guards, or every guard
    that failed to hold). The payload and snapshot reproduce the problem with
    `statecore.step`.
    """

    machine: str
    state: str
    event: str
    kind: FindingKind
    transitions: tuple[str, ...]
    payload: dict[str, Any] = field(hash=False)
    snapshot: Snapshot
    message: str

    def __str__(self) -> str:
        return (
            f"{self.machine}: {self.kind} in state {self.state!r} on event "
            f"{self.event!r} with payload {self.payload!r}: {self.message}"
        )


def symbolic_check(
    machine: Machine,
    *,
    timeout_per_check: float = 2.0,
    max_iterations: int | None = None,
) -> list[SymbolicFinding]:
    """Search beyond the samples for payloads that break `machine`.

    One check runs per state and event with an unbounded payload field;
    `timeout_per_check` (seconds of CPU time) and `max_iterations` (paths)
    bound its CrossHair search, which stops earlier once every path is
    explored. Each problem is reported once, with the first payload and
    snapshot that showed it, ordered by state, event and kind. Raises
    `ImportError` if CrossHair is not installed.
    """
    _require_crosshair()
    collector = _Collector(machine)
    for check in _checks(machine):
        for snapshot in check.snapshots:
            for payload in _boundary_payloads(check.event):
                collector.replay(check, snapshot, payload)
        for snapshot, payload in _crosshair_payloads(
            check, collector.shapes, timeout_per_check, max_iterations
        ):
            collector.replay(check, snapshot, payload)
    return collector.findings()


def _require_crosshair() -> None:
    try:
        # Registers CrossHair's symbolic patches of the standard library.
        import crosshair.core_and_libs  # type: ignore[import-not-found, unused-ignore]  # noqa: F401
    except ImportError as exc:
        raise ImportError(
            f"statecore.check.symbolic needs CrossHair (crosshair-tool), which could not "
            f"be imported ({exc}); install it with: {INSTALL_HINT}"
        ) from exc


# -- what to check ------------------------------------------------------------


@dataclass(frozen=True)
class _Check:
    """One state and event to search, with the reachable snapshots of that state."""

    state: str
    event: Event
    candidates: tuple[Compiled, ...]
    snapshots: tuple[Snapshot, ...]


def _checks(machine: Machine) -> Iterator[_Check]:
    by_state: dict[str, list[Snapshot]] = {}
    for snapshot in machine.reachable_snapshots:
        by_state.setdefault(snapshot.state, []).append(snapshot)
    for state in machine.states:
        snapshots = sorted(by_state.get(state.name, ()), key=repr)
        if not snapshots:
            continue
        for event_name, candidates in machine.dispatch[state.name].items():
            event = machine.event_index[event_name]
            if all(f.bounded for f in event.fields):
                continue  # validation already tried every payload
            yield _Check(state.name, event, candidates, tuple(snapshots))


def _field_type(fld: Field) -> type | None:
    """The field's declared type, else the one type its samples share."""
    if fld.type is not None:
        return fld.type
    types = {type(v) for v in fld.sample or ()}
    return types.pop() if len(types) == 1 else None


def _distinct(values: Sequence[Any]) -> tuple[Any, ...]:
    """`values` without repeats, keeping 0.0 apart from -0.0 and NaN once."""
    seen: set[tuple[type, str]] = set()
    kept: list[Any] = []
    for value in values:
        key = (type(value), repr(value))
        if key not in seen:
            seen.add(key)
            kept.append(value)
    return tuple(kept)


def _boundary_values(fld: Field) -> tuple[Any, ...]:
    if fld.domain is not None:
        return fld.domain
    typ = _field_type(fld)
    extra = _BOUNDARIES.get(typ, ()) if typ is not None else ()
    return _distinct((*(fld.sample or ()), *extra))


def _boundary_payloads(event: Event) -> Iterator[dict[str, Any]]:
    names = [f.name for f in event.fields]
    values = [_boundary_values(f) for f in event.fields]
    if math.prod(len(vs) for vs in values) <= PRODUCT_LIMIT:
        for combo in itertools.product(*values):
            yield dict(zip(names, combo))
        return
    base = {name: vs[0] for name, vs in zip(names, values)}
    for name, vs in zip(names, values):
        for value in vs:
            yield {**base, name: value}


# -- the concrete oracle ------------------------------------------------------


@dataclass(frozen=True)
class _Shape:
    """A variable's domain, and how to steer a symbolic value across its edge."""

    members: frozenset[Hashable]
    span: tuple[int, int] | None  # (lo, hi) when the domain is exactly lo..hi
    values: tuple[Hashable, ...]


def _shape(domain: tuple[Hashable, ...]) -> _Shape:
    members = frozenset(domain)
    span = None
    ints = [v for v in members if type(v) is int]
    if ints and len(ints) == len(members) and max(ints) - min(ints) + 1 == len(ints):
        span = (min(ints), max(ints))
    return _Shape(members, span, domain)


def _labels(machine: Machine) -> dict[int, str]:
    """Transition names by identity, numbered where names repeat (defaults can)."""
    counts: dict[str, int] = {}
    for t in machine.transitions:
        counts[t.name] = counts.get(t.name, 0) + 1
    return {
        id(t): t.name if counts[t.name] == 1 else f"{t.name}#{i}"
        for i, t in enumerate(machine.transitions)
    }


def _member(value: object, members: frozenset[Hashable]) -> bool:
    try:
        return value in members
    except TypeError:  # unhashable
        return False


def _raised(exc: BaseException) -> str:
    return f"{type(exc).__name__}: {exc}" if str(exc) else type(exc).__name__


class _Collector:
    """Replays payloads concretely and keeps the first example of each problem."""

    def __init__(self, machine: Machine) -> None:
        self.machine = machine
        self.shapes = {v.name: _shape(v.domain) for v in machine.variables}
        self.labels = _labels(machine)
        self._found: dict[tuple[Any, ...], SymbolicFinding] = {}

    def replay(self, check: _Check, snapshot: Snapshot, payload: dict[str, Any]) -> None:
        for detail, kind, names, message in self._problems(check, snapshot, payload):
            key = (check.state, check.event.name, kind, names, detail)
            if key not in self._found:
                self._found[key] = SymbolicFinding(
                    self.machine.name,
                    check.state,
                    check.event.name,
                    kind,
                    names,
                    dict(payload),
                    snapshot,
                    message,
                )

    def findings(self) -> list[SymbolicFinding]:
        states = {s.name: i for i, s in enumerate(self.machine.states)}
        events = {e.name: i for i, e in enumerate(self.machine.events)}

        def order(key: tuple[Any, ...]) -> tuple[Any, ...]:
            state, event, kind, names, detail = key
            return (states[state], events[event], KINDS.index(kind), names, detail)

        return [self._found[key] for key in sorted(self._found, key=order)]

    def _problems(
        self, check: _Check, snapshot: Snapshot, payload: dict[str, Any]
    ) -> Iterator[tuple[str, FindingKind, tuple[str, ...], str]]:
        """Yield ``(detail, kind, transitions, message)`` for each problem."""
        enabled: list[Compiled] = []
        raised = False
        for compiled in check.candidates:
            name = self.labels[id(compiled.transition)]
            if compiled.guard is None:
                enabled.append(compiled)
                continue
            try:
                held = bool(compiled.guard(snapshot, payload))
            except Exception as exc:
                raised = True
                yield (
                    type(exc).__name__,
                    "guard-raises",
                    (name,),
                    f"guard of transition {name!r} raised {_raised(exc)}; firing "
                    f"the event raises it into the caller",
                )
                continue
            if held:
                enabled.append(compiled)
        for first, second in itertools.combinations(enabled, 2):
            names = (self.labels[id(first.transition)], self.labels[id(second.transition)])
            yield (
                "",
                "overlap",
                names,
                f"guards of transitions {list(names)} both hold; step() takes "
                f"{names[0]!r} because it is declared first, so make the guards "
                f"mutually exclusive",
            )
        if not enabled and not raised and check.event.policy == "error":
            yield (
                "",
                "no-guard-error-policy",
                tuple(self.labels[id(c.transition)] for c in check.candidates),
                f"no guard holds and event {check.event.name!r} has policy "
                f"'error', so firing it raises TransitionError; add a transition "
                f"for these payloads or use policy 'reject'",
            )
        for compiled in enabled:
            yield from self._effect_problems(compiled, snapshot, payload)

    def _effect_problems(
        self, compiled: Compiled, snapshot: Snapshot, payload: dict[str, Any]
    ) -> Iterator[tuple[str, FindingKind, tuple[str, ...], str]]:
        if compiled.effect is None:
            return
        name = self.labels[id(compiled.transition)]
        where = f"effect of transition {name!r}"
        try:
            updates = compiled.effect(snapshot, payload)
            items = list(updates.items()) if isinstance(updates, Mapping) else None
        except Exception as exc:
            yield (
                f"raises {type(exc).__name__}",
                "effect-domain",
                (name,),
                f"{where} raised {_raised(exc)}; firing the event raises it into the caller",
            )
            return
        if updates is None:
            return
        if items is None:
            yield (
                "not a mapping",
                "effect-domain",
                (name,),
                f"{where} returned {type(updates).__name__}, expected a mapping of "
                f"variable names to new values (or None)",
            )
            return
        for var, value in items:
            shape = self.shapes.get(var)
            if shape is None:
                yield (
                    f"unknown {var}",
                    "effect-domain",
                    (name,),
                    f"{where} assigns unknown variable {var!r}; declared variables "
                    f"are {sorted(self.shapes)}",
                )
            elif not _member(value, shape.members):
                yield (
                    f"outside {var}",
                    "effect-domain",
                    (name,),
                    f"{where} sets {var}={value!r}, outside its domain "
                    f"{_show(shape.values)}; guard the transition or widen the domain",
                )


def _show(values: tuple[Hashable, ...]) -> str:
    if len(values) <= 8:
        return repr(list(values))
    return f"[{values[0]!r}, {values[1]!r}, ..., {values[-1]!r}] ({len(values)} values)"


# -- the CrossHair search -----------------------------------------------------


@dataclass(frozen=True)
class _Slot:
    """How one argument of the explored function becomes part of the input.

    A ``symbolic`` slot is a payload field of that type; a choice slot (type
    None) is an int that picks one of `options` (a snapshot, or a value of a
    bounded or untyped field) by a chain of equality tests, so every option
    is its own path.
    """

    field: str | None  # None: the snapshot
    symbolic: type | None
    options: tuple[Any, ...]


def _slots(check: _Check) -> list[_Slot]:
    slots = [_Slot(None, None, check.snapshots)]
    for fld in check.event.fields:
        typ = None if fld.bounded else _field_type(fld)
        slots.append(_Slot(fld.name, typ, () if typ else fld.values))
    return slots


def _pick(options: tuple[Any, ...], index: int) -> Any:
    for position in range(len(options) - 1):
        if index == position:  # a symbolic fork: each option is one path
            return options[position]
    return options[-1]


def _crosshair_payloads(
    check: _Check,
    shapes: Mapping[str, _Shape],
    timeout: float,
    max_iterations: int | None,
) -> list[tuple[Snapshot, dict[str, Any]]]:
    """Concrete inputs, one per path CrossHair explores through the check."""
    from crosshair import smt  # type: ignore[import-not-found, unused-ignore]
    from crosshair.core import ExceptionFilter, deep_realize, explore_paths  # type: ignore[import-not-found, unused-ignore]
    from crosshair.options import DEFAULT_OPTIONS, AnalysisOptionSet  # type: ignore[import-not-found, unused-ignore]
    from crosshair.statespace import RootNode, StateSpace  # type: ignore[import-not-found, unused-ignore]
    from crosshair.util import NotDeterministic  # type: ignore[import-not-found, unused-ignore]

    slots = _slots(check)
    if not any(slot.symbolic for slot in slots):
        return []
    internal = (NotDeterministic, smt.Z3Exception)
    signature = inspect.Signature(
        [
            inspect.Parameter(
                f"arg{i}",
                inspect.Parameter.POSITIONAL_OR_KEYWORD,
                annotation=slot.symbolic or int,
            )
            for i, slot in enumerate(slots)
        ]
    )

    def assemble(args: Sequence[Any]) -> tuple[Snapshot, dict[str, Any]]:
        snapshot: Snapshot = _pick(slots[0].options, args[0])
        payload = {
            slot.field: arg if slot.symbolic else _pick(slot.options, arg)
            for slot, arg in zip(slots[1:], args[1:])
            if slot.field is not None
        }
        return snapshot, payload

    def run(bound: inspect.BoundArguments) -> None:
        snapshot, payload = assemble(bound.args)
        _exercise(check, snapshot, payload, shapes, internal)

    found: list[tuple[Snapshot, dict[str, Any]]] = []

    def on_path(
        space: StateSpace,
        pre_args: inspect.BoundArguments,
        post_args: inspect.BoundArguments,
        ret: object,
        exc: BaseException | None,
        stack: object,
    ) -> bool:
        with ExceptionFilter():
            space.detach_path()  # realizing must not fork the search tree
            found.append(assemble(deep_realize(tuple(pre_args.args))))
        return False

    options = DEFAULT_OPTIONS.overlay(
        AnalysisOptionSet(per_condition_timeout=timeout, max_iterations=max_iterations)
    )
    try:
        explore_paths(run, signature, options, RootNode(), on_path, on_nondeterminism=lambda: None)
    except Exception as exc:  # a CrossHair limitation must not hide the boundary findings
        warnings.warn(
            f"statecore.check.symbolic: CrossHair stopped early in state {check.state!r} on "
            f"event {check.event.name!r} ({_raised(exc)}); reporting what was found",
            RuntimeWarning,
            stacklevel=3,
        )
    return found


def _exercise(
    check: _Check,
    snapshot: Snapshot,
    payload: dict[str, Any],
    shapes: Mapping[str, _Shape],
    internal: tuple[type[BaseException], ...],
) -> None:
    """Run every guard, and the effects of those that hold, forking on each outcome.

    Runs under CrossHair: user exceptions are swallowed so the path goes on
    to the other guards (the oracle re-raises them concretely); CrossHair's
    own control-flow exceptions derive from BaseException and pass through.
    """
    for compiled in check.candidates:
        try:
            if compiled.guard is not None and not compiled.guard(snapshot, payload):
                continue
            if compiled.effect is None:
                continue
            updates = compiled.effect(snapshot, payload)
            if isinstance(updates, Mapping):
                for var, value in updates.items():
                    shape = shapes.get(var)
                    if shape is not None:
                        _steer(value, shape)
        except internal:
            raise
        except Exception:
            continue


def _steer(value: Any, shape: _Shape) -> bool:
    """Branch on whether `value` is in the domain, so both sides become paths."""
    if shape.span is not None:
        lo, hi = shape.span
        return bool(lo <= value and value <= hi)
    if len(shape.values) <= STEER_LIMIT:
        return any(value == member for member in shape.values)
    return True
