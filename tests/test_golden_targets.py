"""Every bundled target explores exactly as pinned in ``tests/golden/targets.json``."""

from __future__ import annotations

import json

import pytest
from golden_targets import GOLDEN, figures, systems

PINNED = json.loads(GOLDEN.read_text())


def test_every_system_is_pinned() -> None:
    assert sorted(PINNED) == sorted(systems())


@pytest.mark.parametrize("symmetry", [True, False], ids=["symmetry", "plain"])
@pytest.mark.parametrize("name", sorted(PINNED))
def test_figures_unchanged(name: str, symmetry: bool) -> None:
    expected = PINNED[name]["symmetry" if symmetry else "plain"]
    assert figures(name, symmetry=symmetry) == expected
