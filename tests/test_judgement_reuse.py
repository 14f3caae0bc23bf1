"""A new state takes its parent's judgement of a predicate only where that is sound.

The explorer gives a successor the judgement its parent had (`Judgement`) when the
step wrote none of the positions that decided it; with symmetry on, only when the
judgement is known on the whole orbit, since the guard checks every other state.
The differential tests (`test_successor_walks`, `test_predicate_memo`) compare
whole searches; these pin each half of the rule on one state.
"""

from __future__ import annotations

from typing import Any

import pytest
from test_symmetry_soundness import W0, W1, workers

from statecore.check import explore as explore_module
from statecore.check.reachable import reachable
from statecore.check.symmetry_guard import Asymmetry
from statecore.properties import always
from statecore.system import StateView, System, SystemState


def w1_idle(view: StateView[Any]) -> bool:
    """Tells the workers apart: it names one of them."""
    snapshot = view.snapshot("worker", W1)
    return snapshot is None or snapshot.state == "idle"


def explorer_of(system: System, symmetry: bool) -> Any:
    return explore_module.Explorer(system, None, symmetry)


def state_where(system: System, w0: str, w1: str) -> SystemState:
    """The reachable state with the two workers in `w0` and `w1`."""
    (state,) = (
        s
        for s in reachable(system)
        if (
            StateView(system, s).snapshot("worker", W0).state,
            StateView(system, s).snapshot("worker", W1).state,
        )
        == (w0, w1)
    )
    return state


SYSTEM = workers(always("w1_idle", "worker1 stays idle", w1_idle))
W1_SLOT = 1 << SYSTEM.slot_keys().index(("worker", W1))
W0_SLOT = 1 << SYSTEM.slot_keys().index(("worker", W0))


def test_a_judgement_decided_where_the_step_wrote_is_judged_again() -> None:
    search = explorer_of(SYSTEM, symmetry=False)
    busy = state_where(SYSTEM, "idle", "busy")
    violations: list[str] = []
    search._violate = lambda prop, *rest: violations.append(prop.id)
    stale = {w1_idle: (True, False, W1_SLOT)}  # its parent's: worker1 was idle there
    judged = search._check_state((busy,), stale, W1_SLOT)
    assert judged[w1_idle][0] is False
    assert violations == ["w1_idle"]


def test_a_judgement_decided_elsewhere_stands() -> None:
    search = explorer_of(SYSTEM, symmetry=False)
    state = state_where(SYSTEM, "busy", "idle")
    carried = (True, False, W1_SLOT)
    judged = search._check_state((state,), {w1_idle: carried}, W0_SLOT)
    assert judged[w1_idle] is carried  # taken, not judged again


@pytest.mark.parametrize("on_orbit", [False, True])
def test_with_symmetry_only_a_judgement_known_on_the_orbit_stands(on_orbit: bool) -> None:
    search = explorer_of(SYSTEM, symmetry=True)
    assert search.guard is not None
    state = state_where(SYSTEM, "busy", "idle")  # worker1 idle; renamed, it is busy
    carried = (True, on_orbit, W1_SLOT)
    if on_orbit:  # vouched for by the guard when its path was learned: taken as it is
        assert search._check_state((state,), {w1_idle: carried}, W0_SLOT)[w1_idle] is carried
    else:  # the guard checks this state's renamings, and they tell the workers apart
        with pytest.raises(Asymmetry, match="w1_idle"):
            search._check_state((state,), {w1_idle: carried}, W0_SLOT)
