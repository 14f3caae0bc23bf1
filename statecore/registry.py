"""Bundled targets: the models and known-bug variants anyone can check by name.

A target is a `System` (or a `Machine`, checked as a one-instance system)
found by name, or by ``package.module:object`` for a user's own model. Each
bundled target declares what checking it must find: ``holds``, or
``violates:PROPERTY_ID`` for a variant that reproduces a known bug.
"""

from __future__ import annotations

import difflib
import importlib
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from .adapter import Adapter, AdapterSpec, SystemAdapter
from .definition import Machine
from .errors import StatecoreError
from .system import Action, Component, System


class TargetError(StatecoreError):
    """A target name or ``module:object`` path that cannot be resolved."""


@dataclass(frozen=True)
class Target:
    """A bundled target: a name, where it lives, and what checking it must find."""

    name: str
    path: str  # "package.module:object"
    expected: str = "holds"  # or "violates:PROPERTY_ID[,PROPERTY_ID...]"
    doc: str = ""
    family: str = ""  # for a variant: the model it is a variant of
    # For a variant checked at other bounds than its family's model: the
    # reference at those bounds ("package.module:object"), which it is fuzzed
    # against when it runs as an implementation.
    reference: str = ""

    @property
    def kind(self) -> str:
        """``model`` for a target that must hold, ``variant`` for a known bug."""
        return "model" if self.expected == "holds" else "variant"

    @property
    def expected_violations(self) -> frozenset[str]:
        """The properties a variant must violate (empty for a model)."""
        if self.expected == "holds":
            return frozenset()
        return frozenset(self.expected.split(":", 1)[1].split(","))

    def load(self) -> System:
        """Import and return the target's system."""
        return load_path(self.path)


def bundled() -> tuple[Target, ...]:
    """Every bundled target, models first."""
    targets: tuple[Target, ...] = importlib.import_module("statecore.models").TARGETS
    return tuple(sorted(targets, key=lambda t: (t.kind != "model", t.name)))


def bundled_adapters() -> tuple[AdapterSpec, ...]:
    """Every bundled adapter: real implementations, then each variant as an implementation."""
    declared: tuple[AdapterSpec, ...] = importlib.import_module("statecore.models").ADAPTERS
    variants = tuple(
        AdapterSpec(
            name=f"model:{t.name}",
            target=t.family,
            factory="",
            system=t.reference,
            doc=f"the {t.name} variant run as the implementation ({t.doc})",
        )
        for t in bundled()
        if t.kind == "variant" and t.family
    )
    return declared + variants


def resolve_adapter(
    target_name: str, adapter_name: str
) -> tuple[System, Callable[[], Adapter], AdapterSpec]:
    """The system to fuzz and a factory of fresh adapters, for a target and adapter name."""
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
    if spec.name.startswith("model:"):
        implementation = resolve(spec.name.removeprefix("model:"))[1]
        system = load_path(spec.system) if spec.system else resolve(target_name)[1]
        return system, lambda: SystemAdapter(implementation), spec
    factory = spec.load()
    system = load_path(spec.system) if spec.system else resolve(target_name)[1]
    return system, factory, spec


def resolve(name: str) -> tuple[str, System, Target | None]:
    """A bundled name or ``package.module:object`` -> (name, system, target or None)."""
    targets = {t.name: t for t in bundled()}
    if name in targets:
        return name, targets[name].load(), targets[name]
    if ":" in name:
        return name, load_path(name), None
    close = difflib.get_close_matches(name, list(targets), n=3, cutoff=0.5)
    hint = f"; did you mean {', '.join(close)}?" if close else ""
    raise TargetError(
        f"unknown target {name!r}{hint} (run 'statecore list' for the bundled "
        f"targets, or give package.module:object)"
    )


def load_path(path: str) -> System:
    """Import ``package.module:object`` and return it as a System."""
    module_name, _, attr = path.partition(":")
    if not module_name or not attr:
        raise TargetError(f"target {path!r} must look like package.module:object")
    try:
        module = importlib.import_module(module_name)
    except ImportError as exc:
        raise TargetError(f"target {path!r}: cannot import {module_name!r}: {exc}") from exc
    obj: Any = module
    for part in attr.split("."):
        try:
            obj = getattr(obj, part)
        except AttributeError:
            raise TargetError(f"target {path!r}: {module_name!r} has no {attr!r}") from None
    if callable(obj) and not isinstance(obj, (System, Machine)):
        obj = obj()
    return as_system(obj, path)


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


def system_for_trace(path: Any, target: str | None = None) -> tuple[str, System]:
    """The target name and the system a trace file was taken from.

    The header's ``target`` (else its ``source``) names the target; a trace
    written by ``statecore fuzz`` also names its ``adapter``, whose model
    configuration (the fuzzing bounds) is the one the trace replays on.
    """
    from .itf import read_header

    header = read_header(path)
    name = target or str(header.get("target") or header.get("source") or "")
    if not name:
        raise TargetError(f"{path}: the trace names no target; pass --target")
    adapter = header.get("adapter")
    if adapter:
        return name, resolve_adapter(name, str(adapter))[0]
    return name, resolve(name)[1]
