"""Every property of every bundled model can fail: a single-point mutant of the model violates it.

A property no mutant of its own reference model can violate checks nothing
the model could get wrong (a tautology, or a ghost flag only a variant sets).
`statecore.check.adequacy.killers` finds, per property, the first mutant that fails
it; the full report with survivors is ``statecore check --adequacy``.
"""

from __future__ import annotations

import pytest

from statecore.check.adequacy import killers
from statecore.registry import bundled

MODELS = [t for t in bundled() if t.kind == "model"]


@pytest.mark.parametrize("target", MODELS, ids=[t.name for t in MODELS])
def test_every_property_is_violated_by_some_mutant(target: object) -> None:
    system = target.load()  # type: ignore[attr-defined]
    found = killers(system)
    unkillable = sorted(prop_id for prop_id, mutant in found.items() if mutant is None)
    assert not unkillable, f"{system.name}: no single-point mutant violates {unkillable}"
    assert set(found) == {p.id for p in system.properties}
