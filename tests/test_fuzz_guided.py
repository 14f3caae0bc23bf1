"""The guided phase: model-chosen paths to every goal, run before the random search.

A conformance bug one action away from a model transition, a machine state (of a
first or a later generation of a key) or a property's interesting state is found by
the default run on every seed, and the phase is reported apart from the search.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Hashable, Mapping

import pytest
from statecore.models import request_lifecycle as rl
from statecore.models.bindings.stream_edge import StreamEdgeLifecycleBinding
from statecore.models.chunk_transfer import CHUNK_TRANSFER, variant_6670
from statecore.models.implementations import stream_edge as impl

from statecore import Event, Machine, Output, State, Transition
from statecore.adapter import Adapter, SystemAdapter
from statecore.fuzzing.fuzz import fuzz
from statecore.fuzzing.guided import REUSED, Goal, Planner, goals
from statecore.properties import always, eventually, monitor, sometimes
from statecore.registry import bundled_adapters, resolve_adapter
from statecore.system import (
    Action,
    Component,
    Emitted,
    Global,
    Keys,
    StateView,
    System,
    SystemState,
    Tx,
)

# -- a small system with every kind of goal ---------------------------------------------------

ORDERS = Keys("order", 1)
AUDIT = Machine(
    "audit",
    states=[State("quiet", initial=True), State("noted", final=True)],
    events=[Event("shipped")],
    transitions=[Transition("quiet", "shipped", "noted")],
)


def order_machine(cancel_after_shipping: bool = False) -> Machine:
    cancellable = ("placed", "shipped") if cancel_after_shipping else "placed"
    return Machine(
        "order",
        states=[
            State("placed", initial=True),
            State("shipped"),
            State("cancelled", final=True),
            State("delivered", final=True),
        ],
        events=[Event("ship"), Event("deliver"), Event("cancel")],
        transitions=[
            Transition("placed", "ship", "shipped", emit=(Output("shipped"),)),
            Transition("shipped", "deliver", "delivered"),
            Transition(cancellable, "cancel", "cancelled"),
        ],
    )


ORDER = order_machine()


def place(tx: Tx, order: Hashable) -> None:
    old = tx.handle("order", order)
    tx.require(old is None or tx.snapshot(old).state in ("cancelled", "delivered"))
    tx.spawn("order", order)


def ship(tx: Tx, order: Hashable) -> None:
    handle = tx.handle("order", order)
    tx.require(handle is not None and tx.fire(handle, "ship").accepted)


def deliver(tx: Tx, order: Hashable) -> None:
    handle = tx.handle("order", order)
    tx.require(handle is not None and tx.fire(handle, "deliver").accepted)
    tx.set("delivered", tx.get("delivered") + 1)


def cancel(tx: Tx, order: Hashable) -> None:
    handle = tx.handle("order", order)
    tx.require(handle is not None and tx.snapshot(handle).state in ("placed", "shipped"))
    tx.fire(handle, "cancel")  # refused once shipped, by the reference


def route(emitted: Emitted) -> tuple[Hashable, str, Mapping[str, object]] | None:
    return (emitted.source, emitted.output.name, {})  # one audit per generation


def shop(machine: Machine) -> System:
    return System(
        "mini_shop",
        components=[Component("order", machine, ORDERS, max_generations=2)],
        globals=[Global("delivered", 0)],
        actions=[
            Action("place", "customer", place, {"order": ORDERS}),
            Action("ship", "warehouse", ship, {"order": ORDERS}),
            Action("deliver", "carrier", deliver, {"order": ORDERS}, internal=True),
            Action("cancel", "customer", cancel, {"order": ORDERS}),
        ],
        properties=[
            always(
                "few",
                "At most two deliveries.",
                lambda v: v.get("delivered") <= 2,
                when=lambda v: v.get("delivered") > 0,
            ),
            sometimes("delivered", "An order is delivered.", lambda v: v.get("delivered") > 0),
            eventually(
                "no_shipped_rest",
                "Nothing rests shipped.",
                lambda v: all(s.state != "shipped" for _, s in v.live("order")),
            ),
            monitor("audit", "Each order is audited once.", AUDIT, route),
        ],
    )


SHOP = shop(ORDER)
BUGGY = shop(order_machine(cancel_after_shipping=True))


class OrderStates(SystemAdapter):
    """Another system as the implementation, compared by each order's state."""

    def observe(self) -> Hashable:
        assert self.state is not None
        return self.expect(self.implementation.view(self.state))

    def expect(self, view: StateView) -> Hashable:
        return tuple((str(h), snap.state) for h, snap in view.live("order"))


def test_the_goals_of_a_system() -> None:
    found = set(goals(SHOP))
    transitions = {g.what for g in found if g.kind == "transition"}
    assert transitions == {t.name for t in ORDER.transitions}
    states = {g.what for g in found if g.kind == "state"}
    # Not the initial state (every spawn reaches it), but every state of a reused key.
    assert states == {"shipped", "cancelled", "delivered"} | {
        f"{s.name}{REUSED}" for s in ORDER.states
    }
    props = {(g.where, g.what) for g in found if g.kind == "property"}
    assert props == {
        ("few", "condition holds"),
        ("delivered", "reached"),
        ("no_shipped_rest", "open obligation"),
        ("audit", "monitor in noted"),
    }


def _distance(system: System, reached: object) -> int:
    """Breadth-first distance to the first state where `reached(state)` holds."""
    init = system.init_states()[0]
    seen, queue = {init}, deque([(init, 0)])
    while queue:
        state, depth = queue.popleft()
        if reached(state):  # type: ignore[operator]
            return depth
        for step_ in system.successors(state):
            if step_.state not in seen:
                seen.add(step_.state)
                queue.append((step_.state, depth + 1))
    raise AssertionError("not reachable")


def test_each_goal_is_met_by_a_shortest_path() -> None:
    planner = Planner(SHOP, SHOP.successors)
    targets = list(planner.targets())
    assert not planner.missed and not planner.stopped
    lengths = [len(t.path) for t in targets]
    assert lengths == sorted(lengths)  # breadth-first: shortest first
    for target in targets:
        for goal in target.goals:
            assert planner.met[goal] == len(target.path)
            if goal.kind == "state":

                def holds(state: SystemState, goal: Goal = goal) -> bool:
                    slot = state.slots[0]
                    name, reused = goal.what.removesuffix(REUSED), goal.what.endswith(REUSED)
                    live = slot.snapshot is not None and slot.snapshot.state == name
                    return live and (slot.generation > 1) == reused

                assert len(target.path) == _distance(SHOP, holds), goal
    reused = Goal("state", "order", f"placed{REUSED}")
    names = [s.action.name for s in next(t.path for t in targets if reused in t.goals)]
    assert names == ["place", "cancel", "place"]


def test_the_walk_stops_at_its_bound_or_when_it_stalls() -> None:
    bounded = Planner(CHUNK_TRANSFER, CHUNK_TRANSFER.successors, max_states=10)
    list(bounded.targets())
    assert bounded.stopped == "max_states" and bounded.missed and bounded.states == 10
    unreachable = Goal("state", "order", "nowhere")
    stalled = Planner(SHOP, SHOP.successors, all_goals=(*goals(SHOP), unreachable), patience=1)
    list(stalled.targets())
    assert stalled.missed == (unreachable,) and stalled.complete


# -- the default run finds what the guided phase reaches -----------------------------------------


@pytest.mark.parametrize("seed", range(5))
def test_a_bug_one_step_from_a_model_state_is_found_on_every_seed(seed: int) -> None:
    # The issue's own lifecycle: the service lets cancel through after shipping.
    report = fuzz(SHOP, lambda: OrderStates(BUGGY), seed=seed)
    finding = report.finding
    assert finding is not None and finding.kind == "conformance"
    assert report.found_in == "guided" and report.examples == 0
    assert [a.name for a in finding.trace.actions] == ["place", "ship", "cancel"]
    assert report.guided is not None and report.guided.stopped == "finding"


def test_the_guided_phase_does_not_depend_on_the_seed() -> None:
    runs = [fuzz(SHOP, lambda: OrderStates(SHOP), seed=s, max_examples=1) for s in (0, 7)]
    first, second = (r.guided for r in runs)
    assert first is not None and second is not None
    assert (first.paths, first.steps, dict(first.met)) == (
        second.paths,
        second.steps,
        dict(second.met),
    )
    assert not first.missed and first.summary().startswith(f"{len(first.goals)}/{len(first.goals)}")


def test_every_bundled_variant_is_found_by_the_default_run_before_any_search() -> None:
    variants = [a for a in bundled_adapters() if a.name.startswith("model:")]
    assert len(variants) >= 20
    for spec in variants:
        system, factory, _ = resolve_adapter(spec.target, spec.name)
        report = fuzz(system, factory, seed=0)
        assert report.finding is not None, spec.name
        assert report.found_in == "guided" and report.finding.minimal, spec.name


def test_a_stale_instance_token_on_a_reused_id_is_found(monkeypatch: pytest.MonkeyPatch) -> None:
    # Five precise steps (register, abort, register again, open a segment, deliver
    # with the first instance's token): the goal "edge open (key reused)" is met
    # after four, and the guided phase tries every action from there.
    record = impl.StreamEdgeRecorder.record

    def by_id_only(self: object, *args: object, instance: str, **kwargs: object) -> bool:
        return bool(record(self, *args, instance=self.instance, **kwargs))  # type: ignore[arg-type,attr-defined]

    monkeypatch.setattr(impl.StreamEdgeRecorder, "record", by_id_only)
    report = fuzz(rl.REQUEST_LIFECYCLE, StreamEdgeLifecycleBinding, seed=0)
    finding = report.finding
    assert finding is not None and finding.kind == "conformance", finding
    assert report.found_in == "guided"
    labels = finding.trace.actions
    assert [a.name for a in labels].count("register") == 2
    assert labels[-1].name == "deliver" and labels[-1].arg("instance") == 1


def test_a_budget_bounds_the_guided_phase() -> None:
    report = fuzz(CHUNK_TRANSFER, lambda: SystemAdapter(CHUNK_TRANSFER), budget=0.05)
    assert report.ok and report.guided is not None
    assert report.guided.stopped == "budget" and report.guided.missed


def test_the_guided_phase_can_be_switched_off() -> None:
    report = fuzz(CHUNK_TRANSFER, lambda: SystemAdapter(variant_6670()), guided=False, seed=0)
    assert report.guided is None and report.found_in == "search" and report.examples >= 1


def test_an_adapter_learns_the_spawned_generation_from_the_step() -> None:
    seen: list[object] = []

    class Recording(SystemAdapter):
        def apply(self, step: object, before: SystemState) -> None:
            seen.append(step.spawned)  # type: ignore[attr-defined]
            super().apply(step, before)  # type: ignore[arg-type]

    fuzz(SHOP, lambda: Recording(SHOP), max_examples=1)
    spawned = {h for handles in seen for h in handles}  # type: ignore[attr-defined]
    assert {(h.key, h.generation) for h in spawned} == {
        (ORDERS.values[0], 1),
        (ORDERS.values[0], 2),
    }
    assert all(isinstance(h, tuple) and h.component == "order" for h in spawned)


def test_the_adapter_base_class_is_what_apply_receives() -> None:
    assert Adapter.apply.__annotations__["step"] == "AppliedStep"
