"""`RenamedView`: every read gives what the same read gives on the renamed state, built whole.

The symmetry guard judges plainly judged predicates on these views instead of
on renamed states (`statecore.check.renamed_view`), so a view that misread a
slot or a global could pass a predicate that tells ids apart. Compared here
with `rename_state` (the brute-force renaming) on every reachable state of
random symmetric systems and of ``chunk_transfer`` at two ids, for every read
a `StateView` offers; and, through the explorer, a plainly judged predicate
that names one id still turns symmetry reduction off.
"""

from __future__ import annotations

from typing import Any

from hypothesis import given, settings
from statecore.models.chunk_transfer import ChunkTransferConfig, build
from system_strategies import SystemSpec, build_system, systems
from test_symmetry_soundness import W1, WORKERS, spawn_all, workers

from statecore import Event, Field, Machine, State, Transition, Var
from statecore.check.explore import explore
from statecore.check.reachable import reachable
from statecore.check.renamed_view import RenamedView
from statecore.check.symmetry import Canonicalizer, rename_state, renamings
from statecore.errors import ActionError
from statecore.properties import always
from statecore.system import Action, Component, Global, StateView, System, SystemState, Tx
from statecore.traces.judge import HOLDS, VIOLATED


def exact(value: Any) -> Any:
    """`value` with the type of every part beside it: equal values of two types differ."""
    if isinstance(value, tuple):
        return (type(value), tuple(exact(v) for v in value))
    if isinstance(value, frozenset):
        return (frozenset, frozenset(exact(v) for v in value))
    return (type(value), value)


def reads(view: StateView[Any]) -> list[Any]:
    """Everything a predicate can read through `view`, each with its types."""
    system = view.system
    seen: list[Any] = [exact(view.state)]
    seen += [exact(view.get(g.name)) for g in system.globals]
    for component in system.components:
        name = component.name
        seen.append(exact(tuple(view.instances(name))))
        seen.append(exact(tuple(view.live(name))))
        for key in component.key_values:
            seen += [exact(view.slot(name, key)), exact(view.snapshot(name, key))]
            seen.append(exact(view.handle(name, key)))
            handle = view.handle(name, key)
            if handle is not None:
                seen.append(exact(view.snapshot(handle)))
    seen.append({k: exact(v) for k, v in view.as_dict().items()})
    try:
        seen.append(exact(view.g))
    except ActionError as exc:
        seen.append(str(exc))
    return seen


def assert_views_read_as_renamed_states(system: System, states: Any) -> int:
    canonicalizer = Canonicalizer(system)
    plans = [
        canonicalizer.plan_of(r) for r in renamings(system) if any(k != v for k, v in r.items())
    ]
    compared = 0
    for state in states:
        assert isinstance(state, SystemState)
        for plan in plans:
            image = rename_state(system, state, plan.renaming)
            assert reads(RenamedView(system, state, plan)) == reads(StateView(system, image))
            compared += 1
    return compared


@settings(max_examples=60, deadline=None)
@given(spec=systems(symmetric_pair=True))
def test_a_renamed_view_reads_as_the_renamed_state_on_random_systems(spec: SystemSpec) -> None:
    system = build_system(spec)
    assert_views_read_as_renamed_states(system, reachable(system))


def test_a_renamed_view_reads_as_the_renamed_state_on_chunk_transfer_at_two_ids() -> None:
    system = build(ChunkTransferConfig(ids=2, generations=1, saves=0, segments=1))
    states = sorted(reachable(system), key=repr)[::7]  # every 7th: a few hundred states
    assert assert_views_read_as_renamed_states(system, states) > 300


PAIRING = Machine(
    "pairing",
    states=[State("idle", initial=True), State("paired")],
    variables=[Var("peer", (None, *WORKERS.values), None)],
    events=[Event("pair", [Field("other", WORKERS.values)])],
    transitions=[Transition("idle", "pair", "paired", effect=lambda s, p: {"peer": p["other"]})],
)


def pair(tx: Tx, w: Any, other: Any) -> None:
    tx.require(w != other)
    tx.require(tx.fire(("worker", w), "pair", other=other).accepted)
    tx.set("queue", (*tx.get("queue"), (w, other)))


def test_a_renamed_view_renames_the_ids_inside_slots_and_globals() -> None:
    system = System(
        "pairs",
        components=[Component("worker", PAIRING, WORKERS)],
        globals=[Global("queue", ())],
        actions=[Action("pair", "scheduler", pair, {"w": WORKERS, "other": WORKERS})],
        init=spawn_all,
    )
    states = reachable(system)
    assert any(slot.snapshot.peer is not None for s in states for slot in s.slots)
    assert assert_views_read_as_renamed_states(system, states) == len(states)


def test_a_plainly_judged_predicate_naming_one_id_turns_symmetry_off() -> None:
    # `view.state` read directly: the predicate memo cannot log that, so it is judged plainly.
    def not_first(view: StateView[Any]) -> bool:
        return bool(view.state.values[0] != W1)

    def a_worker_or_none(view: StateView[Any]) -> bool:
        return view.state.values[0] is None or view.state.values[0] in WORKERS.values

    naming = workers(always("not_first", "worker1 never acquires first", not_first))
    plain = explore(naming, symmetry=False, stop_on_violation=False)
    reduced = explore(naming, stop_on_violation=False)
    assert plain.result("not_first").verdict == reduced.result("not_first").verdict == VIOLATED
    assert not reduced.symmetry and "not_first" in reduced.notes[0]
    symmetric = workers(always("a_worker", "the first is a worker", a_worker_or_none))
    kept = explore(symmetric, stop_on_violation=False)
    assert kept.symmetry and kept.result("a_worker").verdict == HOLDS
    assert kept.states < explore(symmetric, symmetry=False, stop_on_violation=False).states
