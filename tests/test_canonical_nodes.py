"""The canonical form of whole explorer nodes (state and monitor states), caches warm or cold."""

from __future__ import annotations

from hypothesis import HealthCheck, given, settings
from system_strategies import SystemSpec, build_system, systems

from statecore.check.explorer import Explorer
from statecore.check.symmetry import Canonicalizer, rename_state, renamings


@settings(max_examples=100, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(systems(symmetric_pair=True))
def test_a_node_and_its_monitors_are_renamed_together(spec: SystemSpec) -> None:
    system = build_system(spec)
    explorer = Explorer(system, None, False)
    explorer.run()
    group = renamings(system)
    warm = Canonicalizer(system)
    for node in explorer.parents:
        rep = warm(node)
        assert rep in {rename_state(system, node, r) for r in group}
        assert rep == Canonicalizer(system)(node)  # the caches change nothing
        assert warm(rep) == rep or hash(warm(rep)) <= hash(rep)
