"""The typed registry: a variant's expected violations are property ids checked at load,
and an adapter name is read once into its kind."""

from __future__ import annotations

import inspect
import warnings

import pytest

from statecore.properties import always
from statecore.registry import (
    AdapterKind,
    AdapterRef,
    Target,
    TargetError,
    bundled,
    bundled_adapters,
    is_user_adapter,
    resolve,
)


def a_model() -> Target:
    return next(t for t in bundled() if t.kind == "model")


def test_violates_names_the_properties_a_variant_must_violate() -> None:
    target = Target("v", "pkg.mod:SYSTEM", violates=("first", "second"))
    assert target.kind == "variant"
    assert target.violates == ("first", "second")
    assert target.expected_violations == frozenset({"first", "second"})
    assert target.expected == "violates:first,second"


def test_a_target_without_violations_is_a_model() -> None:
    target = Target("m", "pkg.mod:SYSTEM")
    assert (target.kind, target.expected, target.violates) == ("model", "holds", ())
    assert target.expected_violations == frozenset()


def test_an_empty_expectation_declares_nothing() -> None:
    assert Target("m", "pkg.mod:SYSTEM", "").kind == "model"


def test_property_objects_stand_for_their_ids() -> None:
    prop = always("below_two", "count stays below two", lambda view: True)
    assert Target("v", "pkg.mod:SYSTEM", violates=(prop, "other")).violates == (
        "below_two",
        "other",
    )


def test_the_string_form_is_deprecated_and_means_the_same() -> None:
    with pytest.warns(DeprecationWarning, match=r"write violates=\('a', 'b'\)"):
        old = Target("v", "pkg.mod:SYSTEM", "violates:a,b")
    assert old == Target("v", "pkg.mod:SYSTEM", violates=("a", "b"))


@pytest.mark.parametrize("expected", ["violates:", "violates", "violated:a", "violates:a,,b"])
def test_a_malformed_string_form_is_refused(expected: str) -> None:
    with pytest.raises(TargetError, match="must be 'holds' or 'violates:PROPERTY_ID"):
        Target("v", "pkg.mod:SYSTEM", expected)


def test_both_forms_must_agree() -> None:
    with (
        warnings.catch_warnings(),
        pytest.raises(TargetError, match="disagree; give violates= only"),
    ):
        warnings.simplefilter("ignore", DeprecationWarning)
        Target("v", "pkg.mod:SYSTEM", "violates:a", violates=("b",))


def test_a_property_named_twice_is_refused() -> None:
    with pytest.raises(TargetError, match="names a property twice"):
        Target("v", "pkg.mod:SYSTEM", violates=("a", "a"))


def test_an_id_the_system_has_no_property_for_fails_at_load_in_one_line() -> None:
    model = a_model()
    system = model.load()
    known = [p.id for p in system.properties]
    target = Target("typo_variant", model.path, violates=(known[0], "no_such_property"))
    with pytest.raises(TargetError) as caught:
        target.load()
    message = str(caught.value)
    assert "\n" not in message
    assert "'typo_variant'" in message and "'no_such_property'" in message
    assert ", ".join(known) in message


def test_a_known_id_loads() -> None:
    model = a_model()
    known = model.load().properties[0].id
    assert Target("ok_variant", model.path, violates=(known,)).load().name


def test_every_bundled_variant_names_properties_its_system_has() -> None:
    for target in bundled():
        if target.kind == "variant":
            ids = {p.id for p in target.load().properties}
            assert set(target.violates) <= ids, target.name


def test_resolve_checks_the_ids_of_a_bundled_variant(monkeypatch: pytest.MonkeyPatch) -> None:
    model = a_model()
    broken = Target("broken_variant", model.path, violates=("no_such_property",))
    monkeypatch.setattr("statecore.registry.bundled", lambda: (model, broken))
    with pytest.raises(TargetError, match="'broken_variant' expects property 'no_such_property'"):
        resolve("broken_variant")


@pytest.mark.parametrize(
    ("name", "kind", "ref", "user"),
    [
        ("vllm-omni", AdapterKind.BUNDLED, "vllm-omni", False),
        ("model:chunk_transfer_6670", AdapterKind.VARIANT, "chunk_transfer_6670", False),
        ("pkg.mod:Adapter", AdapterKind.USER, "pkg.mod:Adapter", True),
        ("model:pkg.mod:BUGGY", AdapterKind.USER_MODEL, "pkg.mod:BUGGY", True),
    ],
)
def test_an_adapter_name_is_read_once_into_its_kind(
    name: str, kind: AdapterKind, ref: str, user: bool
) -> None:
    parsed = AdapterRef.parse(name)
    assert (parsed.kind, parsed.ref, parsed.is_user_code) == (kind, ref, user)
    assert parsed.name == str(parsed) == name
    assert is_user_adapter(name) is user


def test_each_variant_adapter_is_named_by_its_kind() -> None:
    variants = {t.name for t in bundled() if t.kind == "variant" and t.family}
    runs_a_variant = {
        AdapterRef.parse(a.name).ref
        for a in bundled_adapters()
        if AdapterRef.parse(a.name).kind is AdapterKind.VARIANT
    }
    assert runs_a_variant == variants


def test_a_module_level_build_function_stands_for_its_path() -> None:
    import importlib

    built = [t for t in bundled() if ":" in t.path]
    for target in built:
        module, _, attr = target.path.partition(":")
        build = getattr(importlib.import_module(module), attr)
        if inspect.isfunction(build):
            assert Target("m", build).path == target.path
            break
    else:
        pytest.fail("no bundled target is built by a module-level function")

    def local() -> None: ...

    with pytest.raises(TargetError, match="defined at module level"):
        Target("m", local)  # type: ignore[arg-type]
