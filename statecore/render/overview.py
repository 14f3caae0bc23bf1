"""A system at a glance: its actors, their actions, and what each action changes.

What an action changes - which components and globals - is found by walking
at most `explore_limit` reachable states breadth-first, then by a few seeded
random walks that reach what lies deeper than the breadth-first part (a
consumer's deadline, say), with the steps of
`statecore.traces.path.enabled_steps`: an action that is not enabled, or that
fires an event where its policy is ``error``, is skipped there; any other
error of the model (an undeclared event fired, say) is raised.

For a design review the Graphviz overview keeps each global next to the actor
that changes it when only one actor does (the consumer's mailbox sits in the
consumer's box), draws the globals several actors change between them, and
sets apart the globals no explored step changed.
"""

from __future__ import annotations

import random
from collections import deque
from collections.abc import Iterator
from typing import Any

from ..system import System
from ..traces.path import enabled_steps
from .dot import _attrs, _dot_header, _dot_quote
from .drawing import _DIM
from .mermaid import _mermaid_header, mermaid_escape

__all__ = ["system_overview_dot", "system_overview_mermaid"]

WALKS = 64  # seeded random walks after the breadth-first part
WALK_DEPTH = 80


def _touches(system: System, limit: int) -> dict[str, set[tuple[str, str]]]:
    """Per action, the ``("component"|"global", name)`` it changed in some state.

    Found by a breadth-first exploration of at most `limit` states (0: none).
    """
    touched: dict[str, set[tuple[str, str]]] = {a.name: set() for a in system.actions}
    if limit <= 0:
        return touched
    slot_components = [component for component, _ in system.slot_keys()]
    global_names = [g.name for g in system.globals]
    for state, step_ in _steps(system, limit):
        marks = touched[step_.action.name]
        for name, before, after in zip(slot_components, state.slots, step_.state.slots):
            if before != after:
                marks.add(("component", name))
        for t in step_.taken:
            marks.add(("component", t.component))
        for name, old, new in zip(global_names, state.values, step_.state.values):
            if old != new:
                marks.add(("global", name))
    return touched


def _steps(system: System, limit: int) -> Iterator[tuple[Any, Any]]:
    """``(state, step)`` pairs: breadth-first over `limit` states, then seeded random walks."""
    initial = system.init_states()
    seen = set(initial)
    queue = deque(initial)
    while queue:
        state = queue.popleft()
        for step_ in enabled_steps(system, state):
            yield state, step_
            if step_.state not in seen and len(seen) < limit:
                seen.add(step_.state)
                queue.append(step_.state)
    pick = random.Random(0)
    for _ in range(WALKS):
        state = pick.choice(initial)
        for _ in range(WALK_DEPTH):
            steps = enabled_steps(system, state)
            if not steps:
                break
            step_ = pick.choice(steps)
            yield state, step_
            state = step_.state


def _actors(system: System) -> dict[str, list[Any]]:
    actors: dict[str, list[Any]] = {}
    for action in system.actions:
        actors.setdefault(action.actor, []).append(action)
    return actors


def _action_text(action: Any) -> str:
    return f"{action.name}({', '.join(action.params)})"


def system_overview_mermaid(system: System, *, explore_limit: int = 5000) -> str:
    """The system as a Mermaid flowchart: actors, their actions, what each changes.

    Internal actions are dashed. What an action changes is found by exploring
    at most `explore_limit` states (0 draws actors and actions only).
    """
    return _overview_mermaid(system, _touches(system, explore_limit))


def _overview_mermaid(system: System, touched: dict[str, set[tuple[str, str]]]) -> str:
    lines = [
        *_mermaid_header(f"{system.name}: actors, actions and what they change"),
        "flowchart LR",
    ]
    writers = _writers(system, touched)
    actors = _actors(system)
    for number, (actor, actions) in enumerate(actors.items()):
        lines.append(f'    subgraph actor{number}["{mermaid_escape(actor)}"]')
        for action in actions:
            text = _action_text(action) + (" · internal" if action.internal else "")
            lines.append(f'        a_{action.name}["{mermaid_escape(text)}"]')
        lines.extend(
            f"        {_mermaid_global(g)}" for g, who in writers.items() if who == {actor}
        )
        lines.append("    end")
    for comp in system.components:
        text = f"{comp.name}: {comp.machine.name} ×{len(comp.key_values)}"
        lines.append(f'    c_{comp.name}[["{mermaid_escape(text)}"]]')
    lines.extend(f"    {_mermaid_global(g)}" for g, who in writers.items() if len(who) > 1)
    unchanged = [g for g, who in writers.items() if not who]
    if unchanged:
        lines.append(f'    subgraph actor{len(actors)}["not changed in the explored states"]')
        lines.extend(f"        {_mermaid_global(g)}" for g in unchanged)
        lines.append("    end")
    links: dict[str, list[str]] = {"component": [], "global": []}
    for action in system.actions:
        for kind, name in sorted(touched[action.name]):
            links[kind].append(str(sum(len(v) for v in links.values())))
            lines.append(f"    a_{action.name} --> {kind[0]}_{name}")
    for kind, colour in (("component", "#1c7ed6"), ("global", "#f08c00")):
        if links[kind]:
            lines.append(f"    linkStyle {','.join(links[kind])} stroke:{colour}")
    lines.append("    classDef internal stroke-dasharray:5 5,fill:#f8f9fa")
    lines.append("    classDef component fill:#e7f5ff,stroke:#1c7ed6")
    lines.append("    classDef global fill:#fff9db,stroke:#f08c00")
    internal = [f"a_{a.name}" for a in system.actions if a.internal]
    if internal:
        lines.append(f"    class {','.join(internal)} internal")
    if system.components:
        lines.append(f"    class {','.join('c_' + c.name for c in system.components)} component")
    if system.globals:
        lines.append(f"    class {','.join('g_' + g.name for g in system.globals)} global")
    return "\n".join(lines) + "\n"


def system_overview_dot(system: System, *, explore_limit: int = 5000) -> str:
    """The system as a Graphviz digraph: actors, their actions, what each changes.

    Each actor is a cluster of its actions (internal ones dashed); components
    are blue, globals yellow cylinders. See `system_overview_mermaid`.
    """
    return _overview_dot(system, _touches(system, explore_limit))


def _overview_dot(system: System, touched: dict[str, set[tuple[str, str]]]) -> str:
    title = f"{system.name}: actors, actions and what they change (dashed: internal)"
    lines = _dot_header(f"{system.name}_overview", title, "LR")
    writers = _writers(system, touched)
    actors = _actors(system)
    for number, (actor, actions) in enumerate(actors.items()):
        lines.append(f"    subgraph cluster_{number} {{")
        lines.append(
            f"        graph {_attrs(label=actor, style='rounded', color=_DIM, fontsize=13)};"
        )
        for action in actions:
            attrs: dict[str, str | float] = {"label": _action_text(action), "shape": "box"}
            attrs["style"] = "rounded,dashed" if action.internal else "rounded"
            lines.append(f"        {_dot_quote('action:' + action.name)} {_attrs(**attrs)};")
        # A global only this actor changes is drawn inside its box.
        lines.extend(f"        {_global_node(g)}" for g, who in writers.items() if who == {actor})
        lines.append("    }")
    for comp in system.components:
        label = f"{comp.name}\n{comp.machine.name} ×{len(comp.key_values)}"
        attrs = {"label": label, "shape": "box3d", "style": "filled", "fillcolor": "#e7f5ff"}
        lines.append(f"    {_dot_quote('component:' + comp.name)} {_attrs(**attrs)};")
    lines.extend(f"    {_global_node(g)}" for g, who in writers.items() if len(who) > 1)
    unchanged = [g for g, who in writers.items() if not who]
    if unchanged:
        label = "not changed in the explored states"
        lines.append(f"    subgraph cluster_{len(actors)} {{")
        lines.append(
            f"        graph {_attrs(label=label, style='dashed', color=_DIM, fontsize=11)};"
        )
        lines.extend(f"        {_global_node(g)}" for g in unchanged)
        lines.append("    }")
    for action in system.actions:
        for kind, name in sorted(touched[action.name]):
            colour = "#1c7ed6" if kind == "component" else "#f08c00"
            lines.append(
                f"    {_dot_quote('action:' + action.name)} -> {_dot_quote(f'{kind}:{name}')} "
                f"{_attrs(color=colour)};"
            )
    lines.append("}")
    return "\n".join(lines) + "\n"


def _writers(system: System, touched: dict[str, set[tuple[str, str]]]) -> dict[str, set[str]]:
    """Per global, the actors whose actions changed it."""
    writers: dict[str, set[str]] = {g.name: set() for g in system.globals}
    for action in system.actions:
        for kind, name in touched[action.name]:
            if kind == "global":
                writers[name].add(action.actor)
    return writers


def _mermaid_global(name: str) -> str:
    return f'g_{name}[("{mermaid_escape(name)}")]'


def _global_node(name: str) -> str:
    attrs = {"label": name, "shape": "cylinder", "style": "filled", "fillcolor": "#fff9db"}
    return f"{_dot_quote('global:' + name)} {_attrs(**attrs)};"
