"""Diagrams: structure of the Mermaid and DOT output, trace overlays, rendering, CLI.

The structural tests read the generated text back (every state and
transition drawn, styling, escaping, the highlighted path numbered in
order); rendering tests run Graphviz' ``dot``, a system program: they are
skipped where it is not installed, except in CI (``CI`` set), which must have
it (``.ci/run`` installs it).
"""

from __future__ import annotations

import argparse
import os
import re
import shutil
import xml.etree.ElementTree as ET
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from statecore.models.chunk_transfer import build
from statecore.models.sender_generation import sender_generation_machine
from strategies import machines_and_sequences

from statecore import Event, Machine, State, Transition, Var, step
from statecore.check.explore import VIOLATED, explore
from statecore.registry import machine_system, resolve
from statecore.render import diagram as dg
from statecore.render import drawing, mermaid
from statecore.render.diagram import (
    DiagramError,
    GraphvizNotFoundError,
    PathStep,
    add_parser,
    mermaid_escape,
    render,
    system_overview_dot,
    system_overview_mermaid,
    to_dot,
    to_mermaid,
    trace_overlay,
)
from statecore.system import Action, ActionLabel, Component, System, Tx
from statecore.traces.trace import Trace, TraceStep

HAS_DOT = shutil.which("dot") is not None
needs_dot = pytest.mark.skipif(
    not HAS_DOT and not os.environ.get("CI"),
    reason="Graphviz' dot is not installed (apt-get install graphviz, brew install graphviz)",
)

PNG_MAGIC = b"\x89PNG\r\n\x1a\n"

SENDER = sender_generation_machine()
SENDER_PRE = sender_generation_machine(defer_cleanup=False)
SYSTEM_6670 = resolve("chunk_transfer_6670")[1]


def shortest_violation(system: System) -> Trace:
    report = explore(system, stop_on_violation=False)
    traces = [r.trace for r in report.results if r.verdict == VIOLATED and r.trace is not None]
    return min(traces, key=len)


TRACE_6670 = shortest_violation(SYSTEM_6670)


def unescape(text: str) -> str:
    """Undo `mermaid_escape` (what Mermaid does when it draws)."""
    for char, code in mermaid._MERMAID_ESCAPES.items():
        if char != "\n":
            text = text.replace(code, char)
    return text


# -- DOT text helpers -------------------------------------------------------------

EDGE = re.compile(r'^\s*"((?:[^"\\]|\\.)*)" -> "((?:[^"\\]|\\.)*)" \[(.*)\];$')
ATTR = re.compile(r'(\w+)=("(?:[^"\\]|\\.)*"|<.*>)')


def dot_edges(source: str) -> list[tuple[str, str, dict[str, str]]]:
    """``(tail, head, attributes)`` of every edge line, DOT quoting undone."""
    edges = []
    for line in source.splitlines():
        m = EDGE.match(line)
        if m:
            attrs = {k: v[1:-1].replace('\\"', '"') for k, v in ATTR.findall(m.group(3))}
            edges.append((m.group(1), m.group(2), attrs))
    return edges


def dot_node(source: str, name: str) -> str:
    """The attribute text of node `name`."""
    for line in source.splitlines():
        if line.strip().startswith(f'"{name}" ['):
            return line
    raise AssertionError(f"no node {name!r} in\n{source}")


def node_text(source: str, name: str) -> str:
    """The text of node `name`'s label: HTML tags and entities undone, lines joined."""
    label = dot_node(source, name)
    text = re.sub(r"<[^>]+>", " ", label.split("label=", 1)[1])
    text = text.replace("&lt;", "<").replace("&gt;", ">").replace("&quot;", '"')
    return " ".join(text.replace("&amp;", "&").split())


def leading_steps(label: str, sep: str = ":") -> list[int]:
    m = re.match(r"^(\d+(?:, \d+)*)" + re.escape(sep), label)
    return [int(n) for n in m.group(1).split(", ")] if m else []


# -- every state and transition drawn ------------------------------------------------


@pytest.mark.parametrize("machine", [SENDER, SENDER_PRE], ids=lambda m: m.name)
def test_mermaid_draws_every_state_and_transition(machine: Machine) -> None:
    text = to_mermaid(machine, self_loops="edges")
    assert text.startswith("stateDiagram-v2\n")
    for state in machine.states:
        assert re.search(rf"\b{state.name}\b", text), state.name
    edges = [line.strip() for line in text.splitlines() if " --> " in line]
    for t in machine.transitions:
        for source in t.source:
            target = t.target or source
            wanted = mermaid_escape(t.label())
            assert any(
                e.startswith(f"{source} --> {target} : ") and wanted in e.split(" : ", 1)[1]
                for e in edges
            ), (source, t.name)


@pytest.mark.parametrize("machine", [SENDER, SENDER_PRE], ids=lambda m: m.name)
def test_mermaid_lists_self_loops_inside_their_state(machine: Machine) -> None:
    text = to_mermaid(machine)
    for t in machine.transitions:
        for source in t.source:
            if (t.target or source) == source:
                assert f"    {source} : {mermaid_escape(t.label())}" in text
                assert f"{source} --> {source}" not in text
            else:
                assert f"{source} --> {t.target} : {mermaid_escape(t.label())}" in text


@pytest.mark.parametrize("loops", ["inside", "edges"])
@pytest.mark.parametrize("machine", [SENDER, SENDER_PRE], ids=lambda m: m.name)
def test_dot_draws_every_state_and_transition(machine: Machine, loops: Any) -> None:
    text = to_dot(machine, self_loops=loops)
    edges = dot_edges(text)
    for state in machine.states:
        dot_node(text, state.name)
    for t in machine.transitions:
        for source in t.source:
            target = t.target or source
            if target == source and loops == "inside":
                assert t.label() in node_text(text, source), (source, t.name)
                continue
            labels = [a.get("label", "") for s, h, a in edges if (s, h) == (source, target)]
            assert any(t.event in label for label in labels), (source, t.name)
    # One edge per source of a multi-source transition.
    multi = next(t for t in machine.transitions if len(t.source) > 1 and t.target is not None)
    for source in multi.source:
        if source != multi.target or loops == "edges":
            assert any((s, h) == (source, multi.target) for s, h, _ in edges)


def test_dot_labels_are_the_transition_label_broken_into_lines() -> None:
    text = to_dot(SENDER)
    t = next(t for t in SENDER.transitions if t.name == "retiring--end-->reclaimed")
    (label,) = [a["label"] for s, h, a in dot_edges(text) if (s, h) == ("retiring", "reclaimed")]
    assert label.split("\\n") == ["end", "[in_flight]", "/ release_task"]
    assert " ".join(label.split("\\n")) == t.label()


# -- initial, final and hot styling ------------------------------------------------------


def test_mermaid_initial_final_and_hot() -> None:
    text = to_mermaid(SENDER)
    assert "    [*] --> open\n" in text
    assert "    reclaimed --> [*]\n" in text
    assert text.count("--> [*]") == 1
    assert re.search(r"classDef hot .*fill:#\w+.*stroke-dasharray", text)
    assert "    class terminal_pending,draining hot\n" in text
    assert re.search(r"classDef final ", text)
    assert "    class reclaimed final\n" in text


def test_dot_initial_final_and_hot() -> None:
    text = to_dot(SENDER)
    assert 'shape="point"' in dot_node(text, "[*]")
    assert ("[*]", "open") in [(s, h) for s, h, _ in dot_edges(text)]
    assert 'shape="doublecircle"' in dot_node(text, "reclaimed")
    for hot in ("terminal_pending", "draining"):
        node = dot_node(text, hot)
        assert f'fillcolor="{drawing._HOT_FILL}"' in node
        assert "filled" in node and "dashed" in node
    assert "filled" not in dot_node(text, "open")
    assert "doublecircle" not in dot_node(text, "open")


# -- escaping ----------------------------------------------------------------------------

NASTY = 'a: "b" [c] {d} #e; <f> 50% \\g'


def _yes(snapshot: object, payload: object) -> bool:
    return True


def _same(snapshot: object, payload: object) -> None:
    return None


def nasty_machine() -> Machine:
    return Machine(
        "nasty",
        states=[State("note", initial=True), State("end", final=True), State("x", hot=True)],
        variables=[Var("n", range(2), 0)],
        events=[Event("go"), Event("stay")],
        transitions=[
            Transition(
                "note",
                "go",
                "x",
                guard=_yes,
                guard_label=NASTY,
                effect=_same,
                effect_label="n := 1",
            ),
            Transition("x", "go", "end"),
            Transition(
                "x", "stay", None, guard=_yes, guard_label="[]:", effect=_same, effect_label='"q"'
            ),
        ],
    )


def test_mermaid_escapes_what_it_cannot_take() -> None:
    machine = nasty_machine()
    for loops in ("inside", "edges"):
        text = to_mermaid(machine, self_loops=loops)
        for line in text.splitlines():
            if " : " in line:
                bare = re.sub(r"#\w+;", "", line.split(" : ", 1)[1])
                for char in ':"[]{};<>%#':
                    assert char not in bare, line
        drawn = [unescape(line.split(" : ", 1)[1]) for line in text.splitlines() if " : " in line]
        assert machine.transitions[0].label() in drawn
        assert any(machine.transitions[2].label() in d for d in drawn)


def test_mermaid_renames_state_ids_it_reserves() -> None:
    text = to_mermaid(nasty_machine())
    assert 'state "note" as note_' in text
    assert 'state "end" as end_' in text
    assert "[*] --> note_" in text
    assert "end_ --> [*]" in text
    assert not re.search(r"^\s*(note|end) -->", text, re.M)


def test_dot_quotes_labels() -> None:
    text = to_dot(nasty_machine(), self_loops="edges")
    (label,) = [a["label"] for s, h, a in dot_edges(text) if (s, h) == ("note", "x")]
    assert label.startswith("go\\n[a: ")
    assert '\\"b\\"' in text and "\\\\g" in text  # quotes and backslashes escaped
    assert " ".join(label.split("\\n")).replace("\\\\", "\\") == (
        nasty_machine().transitions[0].label()
    )


@needs_dot
def test_dot_with_nasty_labels_renders() -> None:
    for loops in ("inside", "edges"):
        svg = render(to_dot(nasty_machine(), self_loops=loops), "svg")
        root = ET.fromstring(svg)
        assert root.tag.endswith("svg")
        texts = "".join(root.itertext())
        assert "50%" in texts and '"b"' in texts


# -- trace overlays -------------------------------------------------------------------------


def test_overlay_of_the_6670_trace() -> None:
    overlay = trace_overlay(SYSTEM_6670, TRACE_6670)
    assert {"request", "sender"} <= set(overlay)
    sender = [(p.step, p.kind, p.source, p.target, p.event) for p in overlay["sender"]]
    assert sender == [
        (2, "spawn", None, "open", ""),
        (2, "transition", "open", "terminal_pending", "save_terminal"),
        (3, "transition", "terminal_pending", "reclaimed", "cleanup"),
        (3, "retire", "reclaimed", None, ""),
        (4, "refused", None, None, "begin"),
    ]
    assert overlay["sender"][2].transition is not None
    assert overlay["sender"][2].transition.name == "terminal_pending--cleanup-->reclaimed"
    assert overlay["sender"][0].instance == "sender[ext0]#1"
    assert "no instance" in overlay["sender"][4].note
    assert [p.step for p in overlay["request"]] == [1, 2, 3]


def test_overlay_agrees_with_system_step_taken() -> None:
    overlay = trace_overlay(SYSTEM_6670, TRACE_6670)
    state = TRACE_6670.steps[0].state
    expected = []
    for number, item in enumerate(TRACE_6670.steps[1:], start=1):
        assert item.action is not None
        step_ = SYSTEM_6670.next_step(state, item.action)
        expected += [(number, t.component, t.transition) for t in step_.taken]
        state = step_.state
    got = sorted(
        (p.step, component, p.transition.name)
        for component, steps in overlay.items()
        for p in steps
        if p.transition is not None
    )
    assert got == sorted(expected)


def test_dot_highlights_the_path_in_red_with_step_numbers() -> None:
    highlight = trace_overlay(SYSTEM_6670, TRACE_6670)["sender"]
    text = to_dot(SENDER_PRE, highlight=highlight)
    red = {(s, h): a for s, h, a in dot_edges(text) if a.get("color") == drawing._PATH}
    assert set(red) == {
        ("[*]", "open"),
        ("open", "terminal_pending"),
        ("terminal_pending", "reclaimed"),
    }
    assert red[("[*]", "open")]["label"] == "2"
    assert red[("open", "terminal_pending")]["label"] == "2: save_terminal"
    assert red[("terminal_pending", "reclaimed")]["label"].startswith("3: cleanup\\n")
    assert all(float(a["penwidth"]) >= 3 for a in red.values())
    # The rest is greyed, and untouched edges carry no step numbers.
    others = [a for s, h, a in dot_edges(text) if a.get("color") != drawing._PATH]
    assert others and all(a.get("color") == drawing._DIM for a in others)
    assert not any(leading_steps(a.get("label", "")) for a in others)
    # The visited states are outlined in red; the legend lists every step.
    for state in ("open", "terminal_pending", "reclaimed"):
        assert f'color="{drawing._PATH}"' in dot_node(text, state)
    assert f'color="{drawing._PATH}"' not in dot_node(text, "retiring")
    assert "begin: rejected (no instance)" in text


def test_mermaid_numbers_the_path() -> None:
    highlight = trace_overlay(SYSTEM_6670, TRACE_6670)["sender"]
    text = to_mermaid(SENDER_PRE, highlight=highlight)
    assert "    [*] --> open : 2\n" in text
    assert "    open --> terminal_pending : 2#58; save_terminal\n" in text
    assert "    terminal_pending --> reclaimed : 3#58; cleanup #91;not_in_flight#93;" in text
    assert "    reclaimed --> [*] : 3\n" in text
    assert "class terminal_pending hot_path" in text
    assert "class reclaimed final_path" in text
    assert "%% 4 begin(): sender[ext0]#1 begin: rejected (no instance)" in text


def toggle_system() -> System:
    machine = Machine(
        "toggle",
        states=[State("off", initial=True), State("on", hot=True)],
        variables=[Var("n", range(3), 0)],
        events=[Event("flip"), Event("bump")],
        transitions=[
            Transition("off", "flip", "on"),
            Transition("on", "flip", "off"),
            Transition(
                ("off", "on"),
                "bump",
                None,
                guard=lambda s, p: s.n < 2,
                guard_label="n < 2",
                effect=lambda s, p: {"n": s.n + 1},
                effect_label="n += 1",
            ),
        ],
    )
    return machine_system(machine)


def trace_of(system: System, events: list[str]) -> Trace:
    state = system.init_states()[0]
    steps = [TraceStep(None, "", state)]
    for event in events:
        step_ = system.next_step(state, ActionLabel(event, (("payload", ()),)))
        state = step_.state
        steps.append(TraceStep(step_.action, step_.actor, state, step_.outputs))
    return Trace(system.name, tuple(steps), verdict="witness")


def test_repeated_edges_are_numbered_in_order() -> None:
    system = toggle_system()
    trace = trace_of(system, ["flip", "bump", "flip", "flip", "bump", "flip"])
    (machine,) = [c.machine for c in system.components]
    highlight = trace_overlay(system, trace)["toggle"]
    assert [p.step for p in highlight] == [1, 2, 3, 4, 5, 6]
    edges = {(s, h): a for s, h, a in dot_edges(to_dot(machine, highlight=highlight))}
    assert edges[("off", "on")]["label"] == "1, 4: flip"
    assert edges[("on", "off")]["label"] == "3, 6: flip"
    # Self-loops are listed inside their state, the taken ones red and numbered.
    on = dot_node(to_dot(machine, highlight=highlight), "on")
    assert "2, 5: bump [n &lt; 2] / n += 1" in on and drawing._PATH_TEXT in on
    mermaid = to_mermaid(machine, highlight=highlight)
    assert "off --> on : 1, 4#58; flip" in mermaid
    assert "on : 2, 5#58; bump #91;n #lt; 2#93; / n += 1" in mermaid
    loops = to_dot(machine, highlight=highlight, self_loops="edges")
    loop = {(s, h): a for s, h, a in dot_edges(loops)}[("on", "on")]
    assert loop["color"] == drawing._PATH and "2, 5: bump" in loop["label"]


def test_highlight_from_another_machine_is_refused() -> None:
    highlight = trace_overlay(SYSTEM_6670, TRACE_6670)["sender"]
    with pytest.raises(DiagramError, match="machine 'toggle' has no state 'open'"):
        to_dot(toggle_system().components[0].machine, highlight=highlight)


def test_nondeterministic_action_is_refused() -> None:
    machine = toggle_system().components[0].machine
    calls = iter(range(100))

    def spawn_it(tx: Tx) -> None:
        tx.spawn("toggle", "it")

    def flip_on_even_calls(tx: Any) -> None:
        if next(calls) % 2 == 0:
            tx.fire(("toggle", "it"), "flip")

    system = System(
        "flaky",
        components=[Component("toggle", machine, ("it",))],
        actions=[Action("flip", "env", flip_on_even_calls)],
        init=spawn_it,
    )
    state = system.init_states()[0]
    trace = Trace("flaky", (TraceStep(None, "", state), TraceStep(ActionLabel("flip"), "", state)))
    with pytest.raises(DiagramError, match="did not replay the same way twice at step 1"):
        trace_overlay(system, trace)


def test_trace_that_does_not_replay_is_refused() -> None:
    other = resolve("chunk_transfer")[1]
    bad = Trace(
        other.name,
        (TraceStep(None, "", other.init_states()[0]), TraceStep(ActionLabel("begin"), "", None)),  # type: ignore[arg-type]
    )
    with pytest.raises(DiagramError, match=r"at step 1 .*not enabled"):
        trace_overlay(other, bad)


@settings(max_examples=60, suppress_health_check=[HealthCheck.too_slow])
@given(machines_and_sequences(max_size=12))
def test_overlay_matches_stepping_the_machine(case: tuple[Machine, list[Any]]) -> None:
    machine, events = case
    system = machine_system(machine)
    snapshot = machine.initial_snapshot()
    state = system.init_states()[0]
    steps = [TraceStep(None, "", state)]
    expected: list[tuple[int, str, str, str]] = []
    for event, payload in events:
        outcome = step(machine, snapshot, event, payload)
        if not outcome.accepted:
            continue
        assert outcome.transition is not None
        label = ActionLabel(event, (("payload", tuple(payload.items())),))
        step_ = system.next_step(state, label)
        state = step_.state
        steps.append(TraceStep(step_.action, step_.actor, state, step_.outputs))
        expected.append(
            (len(steps) - 1, snapshot.state, outcome.snapshot.state, outcome.transition.name)
        )
        snapshot = outcome.snapshot
    trace = Trace(system.name, tuple(steps))
    highlight = trace_overlay(system, trace)[machine.name]
    got = [(p.step, p.source, p.target, p.transition.name) for p in highlight if p.transition]
    assert got == expected
    # Every step number appears exactly once on the drawn edges and loops.
    text = to_dot(machine, highlight=highlight, self_loops="edges")
    drawn: list[int] = []
    for _, _, attrs in dot_edges(text):
        lines = re.sub(r"<[^>]+>", "\n", attrs.get("label", "")).replace("\\n", "\n")
        for line in lines.splitlines():
            drawn += leading_steps(line)
    assert sorted(drawn) == [n for n, *_ in expected]


# -- overviews ---------------------------------------------------------------------------


def test_mermaid_overview_lists_every_action_under_its_actor() -> None:
    system = build()
    text = system_overview_mermaid(system)
    assert "flowchart LR" in text
    blocks = re.findall(r'subgraph \w+\["([^"]+)"\]\n(.*?)\n    end', text, re.S)
    listed = {actor: re.findall(r"a_(\w+)\[", body) for actor, body in blocks}
    expected: dict[str, list[str]] = {}
    for action in system.actions:
        expected.setdefault(action.actor, []).append(action.name)
    assert listed == {**expected, "not changed in the explored states": []}
    # A global one actor changes sits in its box (the mailbox, which the save
    # thread fills and the consumer empties, does not); the globals no step of the
    # reference changes are set apart: ghosts only a violation sets, and the
    # scheduler's place inside save_async, which only 0.30.0's lock-free window uses.
    kept = {actor: re.findall(r"g_(\w+)\[", body) for actor, body in blocks}
    assert "received" in kept["consumer"] and "in_flight" in kept["save_thread"]
    assert set(kept["not changed in the explored states"]) == {
        "crossed",
        "lost",
        "overwritten",
        "saving",
        "timed_out",
    }
    assert "queue" not in {g for names in kept.values() for g in names}
    internal = re.search(r"class (\S+) internal", text)
    assert internal is not None
    assert set(internal.group(1).split(",")) == {
        f"a_{a.name}" for a in system.actions if a.internal
    }
    for a in system.actions:
        assert ("internal" in text.split(f"a_{a.name}[", 1)[1].split("\n")[0]) == a.internal
    # What the actions change, found by exploring.
    assert "a_save_terminal --> c_sender" in text
    assert "a_save_terminal --> g_queue" in text
    assert "a_begin --> g_in_flight" in text
    assert "a_receive --> c_" not in text


def test_dot_overview_clusters_actions_by_actor() -> None:
    system = build()
    text = system_overview_dot(system)
    clusters = re.findall(
        r'subgraph cluster_\d+ \{\n\s+graph \[label="(\w+)".*?\n(.*?)\n    \}', text, re.S
    )
    listed = {actor: re.findall(r'"action:(\w+)"', body) for actor, body in clusters}
    expected: dict[str, list[str]] = {}
    for action in system.actions:
        expected.setdefault(action.actor, []).append(action.name)
    assert listed == expected
    for action in system.actions:
        node = dot_node(text, f"action:{action.name}")
        assert ("dashed" in node) == action.internal
    for comp in system.components:
        dot_node(text, f"component:{comp.name}")
    for g in system.globals:
        assert 'shape="cylinder"' in dot_node(text, f"global:{g.name}")
    edges = {(s, h) for s, h, _ in dot_edges(text)}
    assert ("action:abort", "component:sender") in edges
    consumer = next(body for actor, body in clusters if actor == "consumer")
    assert '"global:received"' in consumer
    assert not any('"global:queue"' in body for _, body in clusters)  # two actors change it
    assert ("action:receive", "global:received") in edges


def test_overview_of_a_machine_with_error_policy_events() -> None:
    # A bare machine is checked as a system firing every event; "end" has the
    # "error" policy, so some of those actions raise. The overview still shows
    # what every other action changes.
    system = machine_system(SENDER)
    edges = {(s, h) for s, h, _ in dot_edges(system_overview_dot(system))}
    component = f"component:{SENDER.name}"
    assert {(f"action:{e.name}", component) for e in SENDER.events} <= edges


def test_overview_without_exploring_draws_no_changes() -> None:
    text = system_overview_dot(build(), explore_limit=0)
    assert dot_edges(text) == []
    assert '"action:begin"' in text


# -- rendering -----------------------------------------------------------------------------


@needs_dot
def test_render_svg_and_png() -> None:
    highlight = trace_overlay(SYSTEM_6670, TRACE_6670)["sender"]
    source = to_dot(SENDER_PRE, highlight=highlight, title="sender\nwith a trace")
    svg = render(source, "svg")
    root = ET.fromstring(svg)
    assert root.tag == "{http://www.w3.org/2000/svg}svg"
    texts = " ".join(root.itertext())
    for state in SENDER_PRE.states:
        assert state.name in texts
    assert "3: cleanup" in texts
    png = render(source, "png")
    assert png.startswith(PNG_MAGIC) and len(png) > 10_000
    overview = render(system_overview_dot(build()), "png")
    assert overview.startswith(PNG_MAGIC)


def test_render_without_dot_names_the_install_command(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(shutil, "which", lambda name: None)
    with pytest.raises(GraphvizNotFoundError, match="apt-get install -y graphviz"):
        render(to_dot(SENDER), "svg")


def test_render_rejects_unknown_formats() -> None:
    with pytest.raises(DiagramError, match="cannot render 'gif'"):
        render("digraph {}", "gif")


@needs_dot
def test_render_reports_graphviz_errors() -> None:
    with pytest.raises(DiagramError, match="dot failed"):
        render("digraph { a -> }", "svg")


# -- the command ----------------------------------------------------------------------------


def cli(*argv: str) -> int:
    parser = argparse.ArgumentParser(prog="statecore")
    add_parser(parser.add_subparsers(dest="command", required=True))
    args = parser.parse_args(["diagram", *argv])
    code: int = args.func(args)
    return code


@pytest.fixture
def itf_6670(tmp_path: Path) -> Path:
    from statecore.traces.itf import write_itf

    return write_itf(TRACE_6670, SYSTEM_6670, tmp_path / "t.itf.json")


def test_cli_mermaid_document(capsys: pytest.CaptureFixture[str]) -> None:
    assert cli("chunk_transfer") == 0
    out = capsys.readouterr().out
    assert out.startswith("# chunk_transfer\n")
    # request, sender, watermark, state, put_req_chunk, overview
    assert out.count("```mermaid\n") == 6
    assert out.count("stateDiagram-v2") == 5 and out.count("flowchart LR") == 1


def test_cli_one_machine_is_bare_mermaid(capsys: pytest.CaptureFixture[str]) -> None:
    assert cli("chunk_transfer", "--machine", "sender_generation") == 0
    out = capsys.readouterr().out
    assert "```" not in out and "stateDiagram-v2" in out and "draining" in out


def test_cli_trace_overlay(itf_6670: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert cli("chunk_transfer_6670", "--trace", str(itf_6670)) == 0
    out = capsys.readouterr().out
    assert "terminal_pending --> reclaimed : 3#58; cleanup" in out
    assert (
        "| 3 | abort(ext=ext0) | sender[ext0]#1 | terminal_pending -> reclaimed (cleanup) |" in out
    )
    assert "terminal_delivered" in out


def test_a_trace_diagram_has_a_short_mermaid_title(tmp_path: Path) -> None:
    """The detail of a finding (hundreds of characters for a conformance one) stays out."""
    from dataclasses import replace

    from statecore.traces.itf import write_itf

    detail = "implementation and model differ - " + "sender: x, " * 40
    trace = replace(TRACE_6670, detail=detail)
    path = write_itf(trace, SYSTEM_6670, tmp_path / "long.itf.json")
    drawn = dg.diagrams(SYSTEM_6670, trace=dg.read_trace(path, SYSTEM_6670), only="sender")
    (title,) = [line for line in drawn[0].mermaid.splitlines() if line.startswith("title: ")]
    assert title == (
        'title: "chunk_transfer_6670: sender - trace: terminal_delivered violated, '
        f'{len(trace)} steps"'
    )
    assert len(drawn[0].title) < 250  # the image caption: the detail cut short
    assert detail in dg.markdown(SYSTEM_6670, drawn, trace)  # the document keeps it whole


def test_cli_dot(capsys: pytest.CaptureFixture[str]) -> None:
    assert cli("chunk_transfer", "--format", "dot") == 0
    assert capsys.readouterr().out.count("digraph ") == 6


def test_cli_unknown_machine() -> None:
    with pytest.raises(DiagramError, match=r"no component or machine 'nope'.*request, sender"):
        cli("chunk_transfer", "--machine", "nope")


@needs_dot
def test_cli_images_without_a_file_go_to_the_current_directory(
    itf_6670: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The command the review guide gives: a variant's trace drawn as PNG files."""
    monkeypatch.chdir(tmp_path)
    assert cli("chunk_transfer", "--format", "png", "--trace", str(itf_6670)) == 0
    written = sorted(p.name for p in tmp_path.iterdir() if p.suffix == ".png")
    assert written == [
        "chunk_transfer_6670.overview.png",
        "chunk_transfer_6670.put_req_chunk.png",
        "chunk_transfer_6670.request.png",
        "chunk_transfer_6670.sender.png",
        "chunk_transfer_6670.state.png",
        "chunk_transfer_6670.watermark.png",
    ]
    assert (tmp_path / "chunk_transfer_6670.sender.png").read_bytes().startswith(PNG_MAGIC)


@needs_dot
def test_cli_png_with_trace(itf_6670: Path, tmp_path: Path) -> None:
    out = tmp_path / "sender.png"
    args = ["--machine", "sender", "--format", "png", "-o", str(out), "--trace", str(itf_6670)]
    assert cli("chunk_transfer_6670", *args) == 0
    assert out.read_bytes().startswith(PNG_MAGIC)


@needs_dot
def test_cli_several_svgs(tmp_path: Path) -> None:
    assert cli("chunk_transfer", "--format", "svg", "-o", str(tmp_path / "ct.svg")) == 0
    written = sorted(p.name for p in tmp_path.iterdir())
    assert written == [
        "ct.overview.svg",
        "ct.put_req_chunk.svg",
        "ct.request.svg",
        "ct.sender.svg",
        "ct.state.svg",
        "ct.watermark.svg",
    ]
    for path in tmp_path.iterdir():
        assert ET.parse(path).getroot().tag.endswith("svg")


def test_cli_without_dot(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setattr(shutil, "which", lambda name: None)
    with pytest.raises(GraphvizNotFoundError, match="apt-get install -y graphviz"):
        cli("chunk_transfer", "--machine", "sender", "--format", "png", "-o", str(tmp_path / "x"))


def test_statecore_diagram_command(capsys: pytest.CaptureFixture[str]) -> None:
    from statecore import cli as statecore_cli

    assert statecore_cli.main(["diagram", "chunk_transfer", "--machine", "request"]) == 0
    assert "stateDiagram-v2" in capsys.readouterr().out
    assert statecore_cli.main(["diagram", "chunk_transfer", "--machine", "nope"]) == 2
    assert "no component or machine 'nope'" in capsys.readouterr().err


def test_path_step_descriptions() -> None:
    t = SENDER.transitions[0]
    assert PathStep(1, "a()", "x#1", "transition", "e", "s", "t", t).describe() == "s -> t (e)"
    assert PathStep(1, "a()", "x#1", "spawn", target="open").describe() == "spawned in open"
    assert PathStep(1, "a()", "x#1", "retire", source="done").describe() == "retired from done"
    refused = PathStep(1, "a()", "x#1", "refused", "e", note="rejected (no guard holds)")
    assert refused.describe() == "e: rejected (no guard holds)"
