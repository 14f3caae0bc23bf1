"""Tests for `statecore.check.symbolic`: payloads beyond the samples that break a machine.

Every finding is also replayed with `statecore.step`, so the tests check that a
reported payload really does what the finding says in production.
"""

from __future__ import annotations

import math
import subprocess
import sys
from collections.abc import Callable, Mapping
from typing import Any

import pytest

from statecore import Event, Field, Machine, State, Transition, TransitionError, Var, step
from statecore.check.symbolic import KINDS, SymbolicFinding, symbolic_check

pytest.importorskip("crosshair")

Guard = Callable[[Any, Mapping[str, Any]], bool]

# Checks whose CrossHair search cannot finish (int() or math.sqrt of a float)
# run to their timeout; keep it short, the boundary values find these anyway.
QUICK = 0.5


def telemetry(
    *guards: Guard,
    policy: Any = "error",
    sample: tuple[float, ...] = (0.0, 5.0),
    effect: Callable[[Any, Mapping[str, Any]], Mapping[str, Any]] | None = None,
    variables: tuple[Var, ...] = (),
) -> Machine:
    """A one-state machine whose ``observe(elapsed_ms: float)`` has one transition per guard."""
    names = ("record", "drop", "other")
    return Machine(
        "telemetry",
        states=[State("idle", initial=True)],
        variables=variables,
        events=[
            Event(
                "observe",
                [Field("elapsed_ms", sample=sample, type=float)],
                policy=policy,
            )
        ],
        transitions=[
            Transition(
                "idle",
                "observe",
                guard=guard,
                effect=effect if i == 0 else None,
                name=names[i],
            )
            for i, guard in enumerate(guards)
        ],
    )


def elapsed(finding: SymbolicFinding) -> float:
    value = finding.payload["elapsed_ms"]
    assert isinstance(value, float)
    return value


def of_kind(findings: list[SymbolicFinding], kind: str) -> list[SymbolicFinding]:
    assert kind in KINDS
    return [f for f in findings if f.kind == kind]


def test_nan_is_found_when_no_guard_holds_under_error_policy() -> None:
    machine = telemetry(
        lambda s, p: p["elapsed_ms"] >= 0,
        lambda s, p: p["elapsed_ms"] < 0,
        policy="error",
    )
    findings = symbolic_check(machine)
    assert [f.kind for f in findings] == ["no-guard-error-policy"]
    (finding,) = findings
    assert math.isnan(elapsed(finding))
    assert finding.transitions == ("record", "drop")
    assert (finding.machine, finding.state, finding.event) == ("telemetry", "idle", "observe")
    with pytest.raises(TransitionError):
        step(machine, finding.snapshot, "observe", finding.payload)


def test_guard_calling_sqrt_raises_for_negatives() -> None:
    machine = telemetry(
        lambda s, p: math.sqrt(p["elapsed_ms"]) < 10,
        lambda s, p: not math.sqrt(p["elapsed_ms"]) < 10,
        policy="reject",
    )
    findings = symbolic_check(machine, timeout_per_check=QUICK)
    raising = of_kind(findings, "guard-raises")
    assert {f.transitions for f in raising} == {("record",), ("drop",)}
    for finding in raising:
        assert elapsed(finding) < 0
        assert "ValueError" in finding.message
    with pytest.raises(ValueError):
        step(machine, raising[0].snapshot, "observe", raising[0].payload)


def test_overlapping_guards_are_found_with_an_example_in_both() -> None:
    # The samples miss the overlap, so definition-time validation accepts it.
    machine = telemetry(
        lambda s, p: p["elapsed_ms"] >= 0,
        lambda s, p: p["elapsed_ms"] <= 10,
        policy="reject",
        sample=(-5.0, 50.0),
    )
    findings = symbolic_check(machine)
    assert [f.kind for f in findings] == ["overlap"]
    (finding,) = findings
    assert finding.transitions == ("record", "drop")
    assert 0 <= elapsed(finding) <= 10


def test_crosshair_finds_an_overlap_no_boundary_value_hits() -> None:
    machine = telemetry(
        lambda s, p: 1000 < p["elapsed_ms"] < 1001,
        lambda s, p: p["elapsed_ms"] > 1000.5,
        policy="reject",
    )
    (finding,) = symbolic_check(machine)
    assert finding.kind == "overlap"
    assert 1000.5 < elapsed(finding) < 1001


def test_effect_leaving_the_domain_and_raising_on_infinity() -> None:
    machine = telemetry(
        lambda s, p: p["elapsed_ms"] >= 0,
        policy="reject",
        effect=lambda s, p: {"bucket": int(p["elapsed_ms"]) // 100},
        variables=(Var("bucket", range(10), 0),),
    )
    findings = symbolic_check(machine, timeout_per_check=QUICK)
    assert {f.kind for f in findings} == {"effect-domain"}
    outside = [f for f in findings if "outside its domain" in f.message]
    raising = [f for f in findings if "OverflowError" in f.message]
    assert len(outside) == 1 and len(raising) == 1
    assert elapsed(outside[0]) >= 1000
    assert "bucket=" in outside[0].message
    assert math.isinf(elapsed(raising[0]))
    after = step(machine, outside[0].snapshot, "observe", outside[0].payload).snapshot
    assert after.bucket not in range(10)
    with pytest.raises(OverflowError):
        step(machine, raising[0].snapshot, "observe", raising[0].payload)


def test_infinity_and_nan_break_a_guard_that_calls_int() -> None:
    machine = telemetry(
        lambda s, p: int(p["elapsed_ms"]) >= 0,
        lambda s, p: int(p["elapsed_ms"]) < 0,
        policy="reject",
    )
    findings = symbolic_check(machine, timeout_per_check=QUICK)
    assert {f.kind for f in findings} == {"guard-raises"}
    overflow = [f for f in findings if "OverflowError" in f.message]
    assert {f.transitions for f in overflow} == {("record",), ("drop",)}
    assert all(math.isinf(elapsed(f)) for f in overflow)
    assert any(math.isnan(elapsed(f)) and "ValueError" in f.message for f in findings)


def test_a_correct_machine_reports_nothing() -> None:
    def ok(s: Any, p: Mapping[str, Any]) -> bool:
        x = p["elapsed_ms"]
        return math.isfinite(x) and x >= 0

    machine = telemetry(ok, lambda s, p: not ok(s, p), policy="reject")
    assert symbolic_check(machine) == []


def quota() -> Machine:
    """Several snapshots per state, a bounded field and unbounded int and str fields."""
    return Machine(
        "quota",
        states=[State("open", initial=True), State("closed", final=True)],
        variables=[Var("used", range(4), 0)],
        events=[
            Event(
                "spend",
                [Field("kind", ("a", "b")), Field("amount", sample=(1,), type=int)],
                policy="reject",
            ),
            Event("tag", [Field("label", sample=("x", "yy"))]),
            Event("close"),
        ],
        transitions=[
            Transition(
                "open",
                "spend",
                guard=lambda s, p: p["kind"] == "a" and 0 < p["amount"] <= 3 - s.used,
                effect=lambda s, p: {"used": s.used + p["amount"]},
                name="spend",
            ),
            Transition(
                "open",
                "spend",
                guard=lambda s, p: p["kind"] == "b" and p["amount"] == 12345,
                effect=lambda s, p: {"used": s.used + 1},
                name="bonus",
            ),
            Transition(
                "open",
                "tag",
                guard=lambda s, p: p["label"].startswith("x"),
                name="tag_x",
            ),
            Transition(
                "open",
                "tag",
                guard=lambda s, p: len(p["label"]) == 7 and p["label"][3] == "q",
                name="tag_q",
            ),
            Transition("open", "close", "closed"),
        ],
    )


def test_snapshots_bounded_fields_ints_and_strings() -> None:
    machine = quota()
    findings = symbolic_check(machine)
    assert [(f.event, f.kind, f.transitions) for f in findings] == [
        ("spend", "effect-domain", ("bonus",)),
        ("tag", "overlap", ("tag_x", "tag_q")),
    ]
    bonus, tags = findings
    # Only the magic amount, in the one snapshot with no room left, leaves the domain.
    assert bonus.payload == {"kind": "b", "amount": 12345}
    assert bonus.snapshot == machine.snapshot("open", used=3)
    assert step(machine, bonus.snapshot, "spend", bonus.payload).snapshot.used == 4
    label = tags.payload["label"]
    assert label.startswith("x") and len(label) == 7 and label[3] == "q"


def test_events_with_only_finite_fields_are_left_to_validation() -> None:
    machine = Machine(
        "door",
        states=[State("shut", initial=True), State("open")],
        events=[Event("push", [Field("hard", (True, False))], policy="error")],
        transitions=[Transition("shut", "push", "open", guard=lambda s, p: p["hard"])],
    )
    assert symbolic_check(machine) == []


def test_findings_are_frozen_and_readable() -> None:
    machine = telemetry(
        lambda s, p: p["elapsed_ms"] >= 0,
        lambda s, p: p["elapsed_ms"] < 0,
    )
    (finding,) = symbolic_check(machine)
    text = str(finding)
    for part in ("telemetry", "no-guard-error-policy", "'idle'", "'observe'", "nan"):
        assert part in text
    with pytest.raises(AttributeError):
        finding.kind = "overlap"  # type: ignore[misc]
    assert hash(finding) == hash(finding)


def test_a_crosshair_failure_warns_and_keeps_the_boundary_findings(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    import crosshair.core

    def broken(*args: object, **kwargs: object) -> None:
        raise RuntimeError("solver fell over")

    monkeypatch.setattr(crosshair.core, "explore_paths", broken)
    machine = telemetry(
        lambda s, p: p["elapsed_ms"] >= 0,
        lambda s, p: p["elapsed_ms"] < 0,
    )
    with pytest.warns(RuntimeWarning, match="solver fell over"):
        (finding,) = symbolic_check(machine)
    assert finding.kind == "no-guard-error-policy"


def test_missing_crosshair_says_how_to_install(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "crosshair.core_and_libs", None)
    machine = telemetry(lambda s, p: True)
    with pytest.raises(ImportError, match=r"pip install 'statecore\[check\]'"):
        symbolic_check(machine)


def test_importing_statecore_does_not_import_crosshair() -> None:
    code = (
        "import sys, statecore, statecore.check.symbolic; "
        "loaded = [m for m in sys.modules if m.split('.')[0] in ('crosshair', 'z3')]; "
        "assert not loaded, loaded"
    )
    subprocess.run([sys.executable, "-c", code], check=True)
