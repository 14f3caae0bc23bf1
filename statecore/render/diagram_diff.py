"""The picture of a change to a lifecycle, for design review: ``statecore diagram A --diff B``.

`diff_systems(before, after)` compares two systems component by component:

* per machine, the transitions added, removed or retargeted, and the guards
  and effects changed (a transition is known by its source state, event and
  guard; a guard change is a transition removed and one added between the
  same states on the same event, reported as one change);
* the states added and removed;
* the actions added or removed, and those whose code differs (best effort:
  the function, its code and the values it closes over);
* with ``verdicts=True``, every property whose verdict changes, from an
  exhaustive exploration of both systems.

`diff_mermaid` draws one changed machine as a Mermaid flowchart (GitHub
renders it in a pull-request comment): added edges thick green with a ``+``,
removed ones dashed red with a ``-``, changed ones orange with ``~`` and the
old label. `diff_dot` draws the same for Graphviz (SVG, PNG); `diff_markdown`
puts the diagrams, a table of the changes and the verdict changes in one
document.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Literal

from ..definition import Machine
from ..system import System

__all__ = [
    "ComponentDiff",
    "EdgeChange",
    "SystemDiff",
    "VerdictChange",
    "diff_dot",
    "diff_markdown",
    "diff_mermaid",
    "diff_systems",
]

ChangeKind = Literal["added", "removed", "retargeted", "guard", "effect"]

_ADDED = "#2f9e44"
_REMOVED = "#e03131"
_CHANGED = "#e8590c"


@dataclass(frozen=True)
class EdgeChange:
    """One change to a machine's transitions, from one source state.

    `label` is the transition's label after the change (before it, for a
    removed one); `old` is what changed from: the old target, guard or
    effect label.
    """

    kind: ChangeKind
    source: str
    event: str
    target: str
    label: str
    old: str = ""

    def describe(self) -> str:
        edge = f"{self.source} --{self.label}--> {self.target}"
        if self.kind == "retargeted":
            return f"retargeted: {edge} (was --> {self.old})"
        if self.kind in ("guard", "effect"):
            return f"{self.kind} changed: {edge} (was {self.old or 'none'})"
        return f"{self.kind}: {edge}"


@dataclass(frozen=True)
class ComponentDiff:
    """What changed in one component's machine."""

    component: str
    before: Machine | None
    after: Machine | None
    changes: tuple[EdgeChange, ...]
    states_added: tuple[str, ...]
    states_removed: tuple[str, ...]

    @property
    def changed(self) -> bool:
        return bool(
            self.changes
            or self.states_added
            or self.states_removed
            or self.before is None
            or self.after is None
        )


@dataclass(frozen=True)
class VerdictChange:
    """A property whose verdict differs (``absent`` where one side has no such property)."""

    property_id: str
    before: str
    after: str


@dataclass(frozen=True)
class SystemDiff:
    """What changes from system `before` to system `after`."""

    before: str
    after: str
    components: tuple[ComponentDiff, ...]
    actions_added: tuple[str, ...]
    actions_removed: tuple[str, ...]
    actions_changed: tuple[str, ...]
    verdicts: tuple[VerdictChange, ...] | None  # None: not explored

    @property
    def empty(self) -> bool:
        return not (
            any(c.changed for c in self.components)
            or self.actions_added
            or self.actions_removed
            or self.actions_changed
            or self.verdicts
        )


# -- comparing -------------------------------------------------------------------------------


def _edge_map(machine: Machine) -> dict[tuple[str, str, str, int], tuple[str, str, str]]:
    """``(source, event, guard, n) -> (target, effect, label)``; `n` numbers repeated keys."""
    edges: dict[tuple[str, str, str, int], tuple[str, str, str]] = {}
    for t in machine.transitions:
        for source in t.source:
            n = 0
            while (source, t.event, t.guard_label, n) in edges:
                n += 1
            edges[(source, t.event, t.guard_label, n)] = (
                t.target or source,
                t.effect_label,
                t.label(),
            )
    return edges


def machine_changes(before: Machine, after: Machine) -> tuple[EdgeChange, ...]:
    """The transitions added, removed, retargeted, or with a guard or effect changed."""
    old, new = _edge_map(before), _edge_map(after)
    changes: list[EdgeChange] = []
    removed = [k for k in old if k not in new]
    added = [k for k in new if k not in old]
    for key in old.keys() & new.keys():
        (t0, e0, _), (t1, e1, label) = old[key], new[key]
        if t0 != t1:
            changes.append(EdgeChange("retargeted", key[0], key[1], t1, label, t0))
        elif e0 != e1:
            changes.append(EdgeChange("effect", key[0], key[1], t1, label, e0))
    for key in list(removed):  # a guard changed: removed and added between the same states
        match = next(
            (
                k
                for k in added
                if k[:2] == key[:2] and new[k][0] == old[key][0] and new[k][1] == old[key][1]
            ),
            None,
        )
        if match is not None:
            removed.remove(key)
            added.remove(match)
            changes.append(
                EdgeChange("guard", key[0], key[1], new[match][0], new[match][2], key[2])
            )
    changes += [EdgeChange("removed", k[0], k[1], old[k][0], old[k][2]) for k in removed]
    changes += [EdgeChange("added", k[0], k[1], new[k][0], new[k][2]) for k in added]
    order = {name: i for i, name in enumerate(s.name for s in after.states)}
    return tuple(sorted(changes, key=lambda c: (order.get(c.source, -1), c.event, c.kind)))


def _action_fingerprint(run: Any) -> object:
    """What an action's function does, as far as can be told without running it."""
    code = getattr(run, "__code__", None)
    cells = []
    for cell in getattr(run, "__closure__", None) or ():
        try:
            cells.append(repr(cell.cell_contents))
        except ValueError:  # an empty cell
            cells.append("<empty>")
    defaults = repr(getattr(run, "__defaults__", None))
    if code is None:
        return repr(run)
    return (code.co_code, code.co_consts.__repr__(), code.co_names, tuple(cells), defaults)


def diff_systems(before: System, after: System, *, verdicts: bool = True) -> SystemDiff:
    """Compare `before` with `after` (see the module docstring)."""
    components: list[ComponentDiff] = []
    names = [c.name for c in before.components]
    names += [c.name for c in after.components if c.name not in names]
    for name in names:
        b = next((c.machine for c in before.components if c.name == name), None)
        a = next((c.machine for c in after.components if c.name == name), None)
        if b is None or a is None:
            components.append(ComponentDiff(name, b, a, (), (), ()))
            continue
        b_states, a_states = [s.name for s in b.states], [s.name for s in a.states]
        components.append(
            ComponentDiff(
                name,
                b,
                a,
                machine_changes(b, a),
                tuple(s for s in a_states if s not in b_states),
                tuple(s for s in b_states if s not in a_states),
            )
        )
    b_actions = {x.name: x for x in before.actions}
    a_actions = {x.name: x for x in after.actions}
    changed = tuple(
        n
        for n in b_actions
        if n in a_actions
        and _action_fingerprint(b_actions[n].run) != _action_fingerprint(a_actions[n].run)
    )
    return SystemDiff(
        before.name,
        after.name,
        tuple(components),
        tuple(n for n in a_actions if n not in b_actions),
        tuple(n for n in b_actions if n not in a_actions),
        changed,
        _verdict_changes(before, after) if verdicts else None,
    )


def _verdict_changes(before: System, after: System) -> tuple[VerdictChange, ...]:
    from ..check.explore import explore

    old = {r.property.id: r.verdict for r in explore(before, stop_on_violation=False).results}
    new = {r.property.id: r.verdict for r in explore(after, stop_on_violation=False).results}
    ids = list(old) + [p for p in new if p not in old]
    return tuple(
        VerdictChange(p, old.get(p, "absent"), new.get(p, "absent"))
        for p in ids
        if old.get(p) != new.get(p)
    )


# -- drawing ---------------------------------------------------------------------------------


def _union_states(diff: ComponentDiff) -> list[str]:
    names: list[str] = []
    for machine in (diff.before, diff.after):
        if machine is not None:
            names += [s.name for s in machine.states if s.name not in names]
    return names


def _drawn_edges(diff: ComponentDiff) -> list[tuple[str, str, str, str]]:
    """``(source, target, label, style)``; style: same, added, removed or changed."""
    edges: list[tuple[str, str, str, str]] = []
    changed = {(c.source, c.event, c.target, c.label) for c in diff.changes}
    if diff.after is not None:
        for (source, event, _, _), (target, _, label) in _edge_map(diff.after).items():
            if (source, event, target, label) not in changed:
                edges.append((source, target, label, "same"))
    for c in diff.changes:
        if c.kind == "added":
            edges.append((c.source, c.target, f"+ {c.label}", "added"))
        elif c.kind == "removed":
            edges.append((c.source, c.target, f"- {c.label}", "removed"))
        elif c.kind == "retargeted":
            edges.append((c.source, c.old, f"- {c.label}", "removed"))
            edges.append((c.source, c.target, f"+ {c.label}", "added"))
        else:
            edges.append((c.source, c.target, f"~ {c.label} (was {c.old or 'none'})", "changed"))
    return edges


def _mermaid_text(text: str) -> str:
    return '"' + text.replace('"', "#quot;") + '"'


def diff_mermaid(diff: ComponentDiff, *, title: str | None = None) -> str:
    """One component's change as a Mermaid flowchart (see the module docstring)."""
    lines = ["---", f"title: {json.dumps(title)}", "---"] if title else []
    lines.append("flowchart LR")
    ids = {name: f"s{i}" for i, name in enumerate(_union_states(diff))}
    added, removed = set(diff.states_added), set(diff.states_removed)
    for name, ident in ids.items():
        mark = "+ " if name in added else "- " if name in removed else ""
        lines.append(f"    {ident}([{_mermaid_text(mark + name)}])")
    styles = {"added": _ADDED, "removed": _REMOVED, "changed": _CHANGED}
    link_styles: list[str] = []
    for index, (source, target, label, style) in enumerate(_drawn_edges(diff)):
        arrow = {"same": "-->", "added": "==>", "removed": "-.->", "changed": "==>"}[style]
        lines.append(f"    {ids[source]} {arrow}|{_mermaid_text(label)}| {ids[target]}")
        if style in styles:
            width = "3px" if style != "removed" else "2px"
            link_styles.append(
                f"    linkStyle {index} stroke:{styles[style]},stroke-width:{width},color:"
                f"{styles[style]}"
            )
    lines += link_styles
    if added:
        lines.append(f"    classDef added stroke:{_ADDED},stroke-width:3px")
        lines.append(f"    class {','.join(ids[s] for s in diff.states_added)} added")
    if removed:
        lines.append(f"    classDef removed stroke:{_REMOVED},stroke-dasharray:5 5")
        lines.append(f"    class {','.join(ids[s] for s in diff.states_removed)} removed")
    return "\n".join(lines) + "\n"


def _dot_quote(text: str) -> str:
    return '"' + text.replace("\\", "\\\\").replace('"', '\\"') + '"'


def diff_dot(diff: ComponentDiff, *, title: str | None = None) -> str:
    """One component's change as Graphviz DOT (see the module docstring)."""
    lines = [
        f"digraph {_dot_quote(diff.component)} {{",
        "    rankdir=LR;",
        '    node [shape=box, style=rounded, fontname="Helvetica"];',
        '    edge [fontname="Helvetica", fontsize=10];',
    ]
    if title:
        lines.append(f"    label={_dot_quote(title)}; labelloc=t;")
    added, removed = set(diff.states_added), set(diff.states_removed)
    for name in _union_states(diff):
        attrs = ""
        if name in added:
            attrs = f', color="{_ADDED}", penwidth=2'
        elif name in removed:
            attrs = f', color="{_REMOVED}", style="rounded,dashed"'
        lines.append(f"    {_dot_quote(name)} [label={_dot_quote(name)}{attrs}];")
    for source, target, label, style in _drawn_edges(diff):
        attrs = {
            "same": "",
            "added": f', color="{_ADDED}", fontcolor="{_ADDED}", penwidth=2.5',
            "removed": f', color="{_REMOVED}", fontcolor="{_REMOVED}", style=dashed',
            "changed": f', color="{_CHANGED}", fontcolor="{_CHANGED}", penwidth=2.5',
        }[style]
        lines.append(
            f"    {_dot_quote(source)} -> {_dot_quote(target)} [label={_dot_quote(label)}{attrs}];"
        )
    lines.append("}")
    return "\n".join(lines) + "\n"


def diff_title(diff: SystemDiff, component: ComponentDiff) -> str:
    before = component.before.name if component.before else "none"
    after = component.after.name if component.after else "none"
    machines = before if before == after else f"{before} -> {after}"
    return f"{diff.before} -> {diff.after}: {component.component} ({machines})"


def diff_lines(diff: SystemDiff) -> list[str]:
    """The change in words, one line each (the Markdown document's tables, as text)."""
    lines: list[str] = []
    for c in diff.components:
        if c.before is None or c.after is None:
            lines.append(f"{c.component}: component {'added' if c.before is None else 'removed'}")
            continue
        lines += [f"{c.component}: state added: {s}" for s in c.states_added]
        lines += [f"{c.component}: state removed: {s}" for s in c.states_removed]
        lines += [f"{c.component}: {change.describe()}" for change in c.changes]
    lines += [f"action added: {a}" for a in diff.actions_added]
    lines += [f"action removed: {a}" for a in diff.actions_removed]
    lines += [f"action changed: {a} (its code differs)" for a in diff.actions_changed]
    for v in diff.verdicts or ():
        lines.append(f"property {v.property_id}: {v.before} -> {v.after}")
    return lines


def diff_markdown(diff: SystemDiff) -> str:
    """The change as one Markdown document: a diagram per changed machine, then tables."""
    parts = [f"# {diff.before} -> {diff.after}\n"]
    if diff.empty:
        parts.append("No change: the same machines, actions and verdicts.\n")
        return "\n".join(parts)
    for c in diff.components:
        if not c.changed:
            continue
        parts.append(f"## {c.component}\n")
        if c.before is None or c.after is None:
            parts.append(f"Component {'added' if c.before is None else 'removed'}.\n")
            continue
        parts.append("```mermaid\n" + diff_mermaid(c, title=diff_title(diff, c)) + "```\n")
        if c.changes:
            parts.append("| change | from | event | to | label | was |")
            parts.append("| --- | --- | --- | --- | --- | --- |")
            for e in c.changes:
                cells = (e.kind, e.source, e.event, e.target, e.label, e.old)
                parts.append("| " + " | ".join(x.replace("|", "\\|") for x in cells) + " |")
            parts.append("")
    actions = _rows(
        [("added", a) for a in diff.actions_added]
        + [("removed", a) for a in diff.actions_removed]
        + [("code differs", a) for a in diff.actions_changed]
    )
    if actions:
        parts.append("## Actions\n")
        parts += ["| action | change |", "| --- | --- |", *actions, ""]
    if diff.verdicts is not None:
        parts.append("## Property verdicts\n")
        if diff.verdicts:
            parts += ["| property | before | after |", "| --- | --- | --- |"]
            parts += [f"| `{v.property_id}` | {v.before} | {v.after} |" for v in diff.verdicts]
            parts.append("")
        else:
            parts.append("Every property keeps its verdict.\n")
    return "\n".join(parts)


def _rows(items: Sequence[tuple[str, str]]) -> list[str]:
    return [f"| `{name}` | {what} |" for what, name in items]
