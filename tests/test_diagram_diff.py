"""``statecore diagram TARGET --diff OTHER``: the picture of a change, for design review."""

from __future__ import annotations

import re
import shutil
from pathlib import Path

import pytest

from statecore import Event, Machine, State, Transition
from statecore.cli import main
from statecore.registry import bundled, resolve
from statecore.render.diagram_diff import (
    diff_dot,
    diff_markdown,
    diff_mermaid,
    diff_systems,
    machine_changes,
)


def job(*transitions: Transition, states: tuple[str, ...] = ("open", "done", "gone")) -> Machine:
    used = {t.event for t in transitions}
    return Machine(
        "job",
        states=[State(states[0], initial=True), *(State(s, final=True) for s in states[1:])],
        events=[Event(e) for e in ("finish", "cancel", "tick") if e in used],
        transitions=list(transitions),
    )


BASE = (
    Transition("open", "finish", "done", guard=lambda s, p: True, guard_label="ready"),
    Transition("open", "cancel", "gone"),
    Transition("open", "tick", None, effect=lambda s, p: None, effect_label="count"),
)


def kinds(before: Machine, after: Machine) -> list[tuple[str, str, str, str]]:
    return [(c.kind, c.source, c.event, c.target) for c in machine_changes(before, after)]


def test_an_unchanged_machine_has_no_changes() -> None:
    assert machine_changes(job(*BASE), job(*BASE)) == ()


def test_added_removed_and_retargeted_transitions() -> None:
    before = job(*BASE)
    after = job(
        Transition("open", "finish", "gone", guard=lambda s, p: True, guard_label="ready"),
        Transition("open", "finish", "done", guard=lambda s, p: False, guard_label="never"),
        Transition("open", "tick", None, effect=lambda s, p: None, effect_label="count"),
    )
    assert sorted(kinds(before, after)) == [
        ("added", "open", "finish", "done"),
        ("removed", "open", "cancel", "gone"),
        ("retargeted", "open", "finish", "gone"),
    ]
    (retargeted,) = [c for c in machine_changes(before, after) if c.kind == "retargeted"]
    assert retargeted.old == "done" and "was --> done" in retargeted.describe()


def test_guard_and_effect_changes_are_one_change_each() -> None:
    after = job(
        Transition("open", "finish", "done", guard=lambda s, p: True, guard_label="always"),
        Transition("open", "cancel", "gone"),
        Transition("open", "tick", None, effect=lambda s, p: None, effect_label="count twice"),
    )
    changes = {c.kind: c for c in machine_changes(job(*BASE), after)}
    assert set(changes) == {"guard", "effect"}
    assert changes["guard"].old == "ready" and changes["guard"].label == "finish [always]"
    assert changes["effect"].old == "count" and changes["effect"].label == "tick / count twice"


# -- the bundled variants against their references ----------------------------------------------


def reference_of(name: str) -> str:
    target = next(t for t in bundled() if t.name == name)
    return target.reference or target.family


VARIANTS = [t.name for t in bundled() if t.kind == "variant"]


@pytest.mark.parametrize("variant", VARIANTS)
def test_each_variant_differs_visibly_from_its_reference(variant: str) -> None:
    before = resolve(reference_of(variant))[1]
    after = resolve(variant)[1]
    found = diff_systems(before, after, verdicts=False)
    assert not found.empty, f"{variant}: no visible change from {reference_of(variant)}"
    document = diff_markdown(found)
    assert document.startswith(f"# {before.name} -> {after.name}\n")


def test_the_6670_change_in_the_sender_machine() -> None:
    found = diff_systems(
        resolve("chunk_transfer")[1], resolve("chunk_transfer_6670")[1], verdicts=False
    )
    (sender,) = [c for c in found.components if c.changes]
    assert sender.component == "sender" and sender.states_removed == ("draining",)
    changes = {(c.kind, c.source, c.event, c.target) for c in sender.changes}
    assert ("removed", "terminal_pending", "cleanup", "draining") in changes
    assert ("added", "terminal_pending", "cleanup", "reclaimed") in changes
    mermaid = diff_mermaid(sender)
    assert mermaid.startswith("flowchart LR\n")
    edges = [line for line in mermaid.splitlines() if re.match(r"\s+s\d+ (-->|==>|-\.->)", line)]
    styled = [int(m) for m in re.findall(r"linkStyle (\d+) ", mermaid)]
    assert styled and max(styled) < len(edges)  # each style names a drawn edge
    assert sum("-.->" in e for e in edges) == sum(c.kind == "removed" for c in sender.changes)
    assert "digraph" in diff_dot(sender)


def test_the_verdicts_that_change() -> None:
    name = "stream_edge_start_per_message"
    target = next(t for t in bundled() if t.name == name)
    found = diff_systems(resolve(reference_of(name))[1], resolve(name)[1])
    assert found.verdicts is not None
    changed = {
        v.property_id for v in found.verdicts if (v.before, v.after) == ("holds", "violated")
    }
    assert changed == target.expected_violations
    assert "## Property verdicts" in diff_markdown(found)


def test_a_system_against_itself_has_no_change() -> None:
    system = resolve("stream_edge")[1]
    found = diff_systems(system, system)
    assert found.empty and "No change" in diff_markdown(found)


# -- the command --------------------------------------------------------------------------------


def test_cli_diff_is_a_markdown_document(capsys: pytest.CaptureFixture[str]) -> None:
    code = main(["diagram", "chunk_transfer", "--diff", "chunk_transfer_6670", "--no-verdicts"])
    out = capsys.readouterr().out
    assert code == 0 and out.startswith("# chunk_transfer -> chunk_transfer_6670\n")
    assert out.count("```mermaid\n") == 1 and "## Property verdicts" not in out


def test_cli_diff_with_a_trace_is_refused(capsys: pytest.CaptureFixture[str]) -> None:
    argv = ["diagram", "chunk_transfer", "--diff", "chunk_transfer_6670", "--trace", "t.json"]
    assert main(argv) == 2
    assert "--diff draws a change and --trace a path" in capsys.readouterr().err


@pytest.mark.skipif(shutil.which("dot") is None, reason="Graphviz' dot is not installed")
def test_cli_diff_as_svg(tmp_path: Path) -> None:
    out = tmp_path / "change.svg"
    argv = ["diagram", "chunk_transfer", "--diff", "chunk_transfer_6670", "--no-verdicts"]
    assert main([*argv, "-f", "svg", "-o", str(out)]) == 0
    assert out.read_text().lstrip().startswith(("<?xml", "<svg"))
