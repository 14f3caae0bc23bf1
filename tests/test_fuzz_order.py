"""The search's choice order: kinds least taken in the example first, arguments as declared.

Hypothesis starts a search with the example whose every choice is the first;
with this order that example takes every kind in turn and reuses the first id.
"""

from __future__ import annotations

from collections import Counter
from itertools import pairwise

from hypothesis import HealthCheck, Phase, settings
from hypothesis.stateful import run_state_machine_as_test
from statecore.models.chunk_transfer import CHUNK_TRANSFER

from statecore.adapter import SystemAdapter
from statecore.fuzzing.interpreter import state_machine
from statecore.traces.trace import TraceStep

STEPS = 30


def first_example() -> tuple[TraceStep, ...]:
    """The steps `act` chose in the first example of a search (the drain left out)."""
    machine = state_machine(
        CHUNK_TRANSFER, lambda: SystemAdapter(CHUNK_TRANSFER, "model:chunk_transfer"), swarm=False
    )
    examples: list[tuple[TraceStep, ...]] = []

    class Recorded(machine):  # type: ignore[misc, valid-type]
        def teardown(self) -> None:
            examples.append(tuple(self.steps))  # before `finish` drains
            super().teardown()

    config = settings(
        max_examples=1,
        phases=[Phase.generate],
        database=None,
        deadline=None,
        stateful_step_count=STEPS,
        suppress_health_check=list(HealthCheck),
    )
    run_state_machine_as_test(Recorded, settings=config)  # type: ignore[no-untyped-call]
    return examples[0]


def test_the_first_example_takes_the_least_taken_kind_and_the_first_arguments() -> None:
    steps = first_example()
    assert len(steps) > 10  # (a step with nothing enabled in the bounded model is skipped)
    order = [action.name for action in CHUNK_TRANSFER.actions]
    taken: Counter[str] = Counter()
    for before, after in pairwise(steps):
        enabled = [s.action for s in CHUNK_TRANSFER.successors(before.state)]
        kinds = {label.name for label in enabled}
        least = min(taken[kind] for kind in kinds)
        kind = min((k for k in kinds if taken[k] == least), key=order.index)
        first = next(label for label in enabled if label.name == kind)
        assert after.action == first, f"step {len(taken)}: {after.action}, expected {first}"
        taken[kind] += 1
    assert len(taken) >= len(order) - 2  # nearly every kind, where declaration order took few
    ids = {str(v) for s in steps[1:] if s.action for name, v in s.action.args if name == "ext"}
    assert ids == {"ext0"}  # the first id, reused
