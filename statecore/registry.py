"""Bundled targets: the models and known-bug variants anyone can check by name.

A target is a `System` (or a `Machine`, checked as a one-instance system)
found by name, or by ``package.module:object`` for a user's own model. Each
bundled target declares what checking it must find: nothing for a model
(it must hold), or ``violates=(PROPERTY_ID, ...)`` for a variant that
reproduces a known bug; the ids are checked against the system's properties.

An adapter is named on the command line as text (``vllm-omni``,
``model:VARIANT``, ``package.module:object``); `AdapterRef.parse` reads that
text once into a kind (`AdapterKind`) and what it points at.

Only the user imports code by naming it: a name read from a trace file is
looked up among the bundled targets and adapters and nowhere else
(`trace_target`).
"""

from __future__ import annotations

import difflib
import enum
import importlib
import inspect
import warnings
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any

from .adapter import Adapter, AdapterSpec, SystemAdapter
from .definition import Machine
from .errors import StatecoreError
from .properties import Property
from .system import Action, Component, System


class TargetError(StatecoreError):
    """A target name or ``module:object`` path that cannot be resolved."""


@dataclass(frozen=True)
class Target:
    """A bundled target: a name, where it lives, and what checking it must find.

    `path` is ``package.module:object``, or the module-level function (a
    build taking no arguments) itself, which stands for its own path.

    A model must hold; a variant reproduces a known bug and names the
    properties it must violate, as ids or as the property objects themselves:
    ``Target(name, path, violates=("terminal_delivered",))``. Each id is checked
    against the target's system when it is loaded (`load`): one the system has
    no property for raises `TargetError`.

    ``expected="violates:a,b"`` is the older string form of ``violates=("a",
    "b")``, still read (with a `DeprecationWarning`). Whichever form was
    given, `expected` reads ``holds`` or ``violates:a,b`` and `violates` the
    ids, in the order given.
    """

    name: str
    path: str  # "package.module:object"
    expected: str = "holds"  # deprecated as an argument: give `violates`
    doc: str = ""
    family: str = ""  # for a variant: the model it is a variant of
    # For a variant checked at other bounds than its family's model: the
    # reference at those bounds ("package.module:object"), which it is fuzzed
    # against when it runs as an implementation.
    reference: str = ""
    violates: tuple[str, ...] = ()

    def __init__(
        self,
        name: str,
        path: str | Callable[[], System | Machine],
        expected: str = "holds",
        doc: str = "",
        family: str = "",
        reference: str = "",
        violates: Iterable[str | Property] = (),
    ) -> None:
        ids = tuple(p.id if isinstance(p, Property) else p for p in violates)
        for pid in ids:
            if not isinstance(pid, str) or not pid:
                raise TargetError(
                    f"target {name!r}: violates= takes property ids or Property objects, "
                    f"not {pid!r}"
                )
        if expected not in ("holds", ""):  # "": nothing declared, as "holds"
            stated = _parse_expected(name, expected)
            warnings.warn(
                f"target {name!r}: expected={expected!r} is deprecated; write violates={stated!r}",
                DeprecationWarning,
                stacklevel=2,
            )
            if ids and ids != stated:
                raise TargetError(
                    f"target {name!r}: expected={expected!r} and violates={ids!r} disagree; "
                    "give violates= only"
                )
            ids = stated
        if len(set(ids)) != len(ids):
            raise TargetError(f"target {name!r}: violates= names a property twice: {ids!r}")
        setattr_ = object.__setattr__
        setattr_(self, "name", name)
        setattr_(self, "path", path if isinstance(path, str) else _path_of(name, path))
        setattr_(self, "expected", f"violates:{','.join(ids)}" if ids else "holds")
        setattr_(self, "doc", doc)
        setattr_(self, "family", family)
        setattr_(self, "reference", reference)
        setattr_(self, "violates", ids)

    @property
    def kind(self) -> str:
        """``model`` for a target that must hold, ``variant`` for a known bug."""
        return "variant" if self.violates else "model"

    @property
    def expected_violations(self) -> frozenset[str]:
        """The properties a variant must violate (empty for a model)."""
        return frozenset(self.violates)

    def load(self) -> System:
        """Import and return the target's system, with `violates` checked against its properties."""
        system = load_path(self.path)
        self.check_properties(system)
        return system

    def check_properties(self, system: System) -> None:
        """Raise `TargetError` if `violates` names an id `system` has no property for."""
        known = [p.id for p in system.properties]
        for pid in self.violates:
            if pid not in known:
                raise TargetError(
                    f"target {self.name!r} expects property {pid!r} to be violated, but system "
                    f"{system.name!r} has no property {pid!r}; its properties are "
                    f"{', '.join(known) or 'none'}"
                )


def _path_of(name: str, obj: object) -> str:
    """``package.module:object`` of a module-level function (or class) given as a target."""
    module = getattr(obj, "__module__", None)
    qualname = getattr(obj, "__qualname__", None)
    if not isinstance(module, str) or not isinstance(qualname, str) or "<locals>" in qualname:
        raise TargetError(
            f"target {name!r}: give the path as 'package.module:object', or a function or "
            f"class defined at module level, not {obj!r}"
        )
    return f"{module}:{qualname}"


def _parse_expected(name: str, expected: str) -> tuple[str, ...]:
    """The ids of the string form ``violates:a,b``; anything else is refused."""
    kind, _, ids = expected.partition(":")
    parsed = tuple(i.strip() for i in ids.split(",")) if ids else ()
    if kind != "violates" or not parsed or not all(parsed):
        raise TargetError(
            f"target {name!r}: expected={expected!r} must be 'holds' or "
            "'violates:PROPERTY_ID[,PROPERTY_ID...]'; give violates=(PROPERTY_ID, ...) instead"
        )
    return parsed


def bundled() -> tuple[Target, ...]:
    """Every bundled target, models first."""
    targets: tuple[Target, ...] = importlib.import_module("statecore.models").TARGETS
    return tuple(sorted(targets, key=lambda t: (t.kind != "model", t.name)))


def bundled_pages() -> tuple[tuple[str, Callable[[], str]], ...]:
    """The generated pages the models declare besides their own: (path under docs/, render)."""
    declared: tuple[tuple[str, str], ...] = getattr(
        importlib.import_module("statecore.models"), "PAGES", ()
    )
    return tuple((path, _import_object(where, "page")) for path, where in declared)


def bundled_adapters() -> tuple[AdapterSpec, ...]:
    """Every bundled adapter: real implementations, then each variant as an implementation."""
    declared: tuple[AdapterSpec, ...] = importlib.import_module("statecore.models").ADAPTERS
    variants = tuple(
        AdapterSpec(
            name=AdapterRef(AdapterKind.VARIANT, t.name).name,
            target=t.family,
            factory="",
            system=t.reference,
            doc=f"the {t.name} variant run as the implementation ({t.doc})",
        )
        for t in bundled()
        if t.kind == "variant" and t.family
    )
    return declared + variants


MODEL_PREFIX = "model:"
"""``model:NAME`` runs a variant (a bundled name, or ``model:package.module:object``) as the
implementation, through `SystemAdapter`."""


class AdapterKind(enum.Enum):
    """What an adapter name on the command line stands for."""

    BUNDLED = "bundled"
    """A bundled adapter of a real or reference implementation (``statecore list``)."""
    VARIANT = "variant"
    """``model:VARIANT``: a bundled variant run as the implementation."""
    USER = "user"
    """``package.module:object``: the user's `Adapter` subclass or factory."""
    USER_MODEL = "user-model"
    """``model:package.module:object``: the user's System run as the implementation."""


@dataclass(frozen=True)
class AdapterRef:
    """An adapter name, read once into its kind and what it points at.

    `name` is the text as written (and as trace headers and reports show it);
    `ref` is what the kind points at: the bundled adapter's name, the
    variant's name, or the ``package.module:object`` path.
    """

    kind: AdapterKind
    ref: str

    @classmethod
    def parse(cls, name: str) -> AdapterRef:
        """Read the command line's syntax: ``NAME``, ``model:NAME`` or a ``:``-path."""
        if name.startswith(MODEL_PREFIX):
            ref = name.removeprefix(MODEL_PREFIX)
            return cls(AdapterKind.USER_MODEL if ":" in ref else AdapterKind.VARIANT, ref)
        return cls(AdapterKind.USER if ":" in name else AdapterKind.BUNDLED, name)

    @property
    def name(self) -> str:
        """The name in the command line's syntax, as `parse` reads it."""
        runs_a_model = self.kind in (AdapterKind.VARIANT, AdapterKind.USER_MODEL)
        return f"{MODEL_PREFIX}{self.ref}" if runs_a_model else self.ref

    @property
    def is_user_code(self) -> bool:
        """Whether it names the user's own code rather than something bundled."""
        return self.kind in (AdapterKind.USER, AdapterKind.USER_MODEL)

    def __str__(self) -> str:
        return self.name


def is_user_target(name: str) -> bool:
    """Whether a target name is the user's ``package.module:object`` rather than a bundled name."""
    return ":" in name


def is_user_adapter(name: str) -> bool:
    """Whether `name` names the user's own code (``package.module:object``, or
    ``model:package.module:object``) rather than a bundled adapter."""
    return AdapterRef.parse(name).is_user_code


def resolve_adapter(
    target_name: str, adapter_name: str
) -> tuple[System, Callable[[], Adapter], AdapterSpec]:
    """The system to fuzz and a factory of fresh adapters, for a target and adapter name.

    `adapter_name` is a bundled adapter (``statecore list``), ``model:VARIANT``
    for a bundled variant run as the implementation, or the user's own code:
    ``package.module:object`` naming an `Adapter` subclass or a function of no
    arguments returning a fresh adapter, or ``model:package.module:object``
    naming a System (or a function returning one) to run as the
    implementation. The user's adapters fit any target; the model fuzzed is
    `target_name`'s.
    """
    ref = AdapterRef.parse(adapter_name)
    if ref.is_user_code:
        return _user_adapter(target_name, ref)
    spec = _adapter_spec(target_name, adapter_name)
    if ref.kind is AdapterKind.VARIANT:
        implementation = resolve(ref.ref)[1]
        return _adapter_model(spec, target_name), lambda: SystemAdapter(implementation), spec
    factory = spec.load()
    return _adapter_model(spec, target_name), factory, spec


def adapter_system(target_name: str, adapter_name: str) -> System:
    """The model configuration an adapter is fuzzed against, without importing the adapter."""
    if is_user_adapter(adapter_name):
        return resolve(target_name)[1]
    return _adapter_model(_adapter_spec(target_name, adapter_name), target_name)


def _user_adapter(
    target_name: str, ref: AdapterRef
) -> tuple[System, Callable[[], Adapter], AdapterSpec]:
    """A ``package.module:object`` adapter (or ``model:package.module:object``) of the user's."""
    system = resolve(target_name)[1]
    spec = AdapterSpec(name=ref.name, target=target_name, factory=ref.name)
    if ref.kind is AdapterKind.USER_MODEL:
        implementation = load_path(ref.ref)
        return system, lambda: SystemAdapter(implementation, name=ref.name), spec
    return system, load_adapter(ref.ref), spec


def load_adapter(path: str) -> Callable[[], Adapter]:
    """Import ``package.module:object`` and return it as a factory of fresh adapters.

    The object is an `Adapter` subclass (called with no arguments for each
    example) or a function of no arguments that returns a new adapter. An
    adapter *instance* is refused: every example needs a fresh one.
    """
    obj = _import_object(path, "adapter")
    if isinstance(obj, Adapter):
        raise TargetError(
            f"adapter {path!r} is an adapter instance; name its class, or a function that "
            "returns a new one, so that every example starts from a fresh adapter"
        )
    if not callable(obj):
        raise TargetError(
            f"adapter {path!r} is a {type(obj).__name__}; name an Adapter subclass or a "
            "function of no arguments that returns one"
        )
    try:
        inspect.signature(obj).bind()
    except TypeError:
        raise TargetError(
            f"adapter {path!r} is {_callable_kind(obj)} that needs arguments; name an Adapter "
            "subclass or a function of no arguments that returns one"
        ) from None
    except ValueError:  # no signature to check: the first call decides
        pass
    factory: Callable[[], Adapter] = obj
    return factory


def _adapter_spec(target_name: str, adapter_name: str) -> AdapterSpec:
    """The bundled adapter `adapter_name`, which must fit `target_name`."""
    specs = {a.name: a for a in bundled_adapters()}
    spec = specs.get(adapter_name)
    if spec is None:
        close = difflib.get_close_matches(adapter_name, list(specs), n=3, cutoff=0.5)
        hint = f"; did you mean {', '.join(close)}?" if close else ""
        raise TargetError(
            f"unknown adapter {adapter_name!r}{hint} (run 'statecore list' for the adapters)"
        )
    if spec.target != target_name:
        raise TargetError(
            f"adapter {adapter_name!r} fits target {spec.target!r}, not {target_name!r}"
        )
    return spec


def _adapter_model(spec: AdapterSpec, target_name: str) -> System:
    return load_path(spec.system) if spec.system else resolve(target_name)[1]


def resolve(name: str) -> tuple[str, System, Target | None]:
    """A bundled name or ``package.module:object`` -> (name, system, target or None)."""
    targets = {t.name: t for t in bundled()}
    if name in targets:
        return name, targets[name].load(), targets[name]
    if is_user_target(name):
        return name, load_path(name), None
    close = difflib.get_close_matches(name, list(targets), n=3, cutoff=0.5)
    hint = f"; did you mean {', '.join(close)}?" if close else ""
    raise TargetError(
        f"unknown target {name!r}{hint} (run 'statecore list' for the bundled "
        f"targets, or give package.module:object)"
    )


def load_path(path: str) -> System:
    """Import ``package.module:object`` and return it as a System."""
    obj = _import_object(path, "target")
    if callable(obj) and not isinstance(obj, (System, Machine)):
        obj = call_factory(obj, f"target {path!r}")
    return as_system(obj, path)


def call_factory(factory: Callable[[], object], what: str) -> object:
    """Call a function named as a target, refusing one that needs arguments.

    ``json:dumps`` names a callable too; calling it with nothing would end
    in the callee's own TypeError, so the signature is checked first.
    """
    try:
        inspect.signature(factory).bind()
    except TypeError:
        raise TargetError(
            f"{what} is {_callable_kind(factory)} that needs arguments; name a System, a "
            "Machine, or a function of no arguments that returns one"
        ) from None
    except ValueError:  # no signature to check (some builtins): the call decides
        pass
    return factory()


def _callable_kind(obj: object) -> str:
    return "a class" if isinstance(obj, type) else "a function"


def as_system(obj: Any, where: str) -> System:
    """A System as is; a Machine as one instance driven by every event it declares."""
    if isinstance(obj, System):
        return obj
    if isinstance(obj, Machine):
        return machine_system(obj)
    raise TargetError(f"target {where!r} is a {type(obj).__name__}, not a System or Machine")


def machine_system(machine: Machine) -> System:
    """Wrap a single machine so the explorer can check it: one instance, every event."""
    from .validation import payloads

    def make_run(event: str) -> Any:
        def run(tx: Any, payload: tuple[tuple[str, Any], ...]) -> None:
            outcome = tx.fire((machine.name, "it"), event, **dict(payload))
            tx.require(outcome.accepted)

        return run

    actions = [
        Action(
            event.name,
            "environment",
            make_run(event.name),
            {"payload": [tuple(p.items()) for p in payloads(event)]},
        )
        for event in machine.events
    ]
    return System(
        machine.name,
        components=[Component(machine.name, machine, ("it",))],
        actions=actions,
        init=lambda tx: _spawn_one(tx, machine.name),
        doc=machine.doc,
    )


def _spawn_one(tx: Any, component: str) -> None:
    tx.spawn(component, "it")


def _import_object(path: str, kind: str) -> Any:
    """The object ``package.module:object`` names; `kind` words the errors."""
    module_name, _, attr = path.partition(":")
    if not module_name or not attr:
        raise TargetError(f"{kind} {path!r} must look like package.module:object")
    try:
        module = importlib.import_module(module_name)
    except ImportError as exc:
        raise TargetError(f"{kind} {path!r}: cannot import {module_name!r}: {exc}") from exc
    obj: Any = module
    for part in attr.split("."):
        try:
            obj = getattr(obj, part)
        except AttributeError:
            raise TargetError(f"{kind} {path!r}: {module_name!r} has no {attr!r}") from None
    return obj
