"""The garbage collector's pacing while fuzzing: spaced full collections, restored after."""

from __future__ import annotations

import gc
import subprocess
import sys
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest
from statecore.models.chunk_transfer import CHUNK_TRANSFER, variant_6670

from statecore.adapter import SystemAdapter
from statecore.fuzzing.collector import FULL_COLLECTION_SPACING, spaced_full_collections
from statecore.fuzzing.fuzz import fuzz


@pytest.fixture(autouse=True)
def default_thresholds() -> Iterator[None]:
    saved = gc.get_threshold()
    gc.set_threshold(700, 10, 10)
    yield
    gc.set_threshold(*saved)


def test_a_fuzz_run_spaces_full_collections_and_restores_the_thresholds() -> None:
    seen: list[tuple[int, ...]] = []

    def implementation() -> SystemAdapter:
        seen.append(gc.get_threshold())
        return SystemAdapter(variant_6670(), "model:chunk_transfer_6670")

    report = fuzz(CHUNK_TRANSFER, implementation, seed=0, max_examples=5)
    assert report.finding is not None  # a run that ends in a finding and its shrinking
    assert seen and set(seen) == {(700, 10, FULL_COLLECTION_SPACING)}
    assert gc.get_threshold() == (700, 10, 10)


def test_the_thresholds_come_back_when_the_run_raises() -> None:
    def broken() -> SystemAdapter:
        raise RuntimeError("no implementation today")

    with pytest.raises(Exception, match="no implementation today"):
        fuzz(CHUNK_TRANSFER, broken, seed=0, max_examples=1)
    assert gc.get_threshold() == (700, 10, 10)


def test_overlapping_runs_restore_only_when_the_last_ends() -> None:
    first_in, second_out = threading.Event(), threading.Event()

    def other_run() -> None:
        with spaced_full_collections(50):
            first_in.set()
            second_out.wait(5)

    thread = threading.Thread(target=other_run)
    thread.start()
    first_in.wait(5)
    with spaced_full_collections(50):
        assert gc.get_threshold() == (700, 10, 50)
    assert gc.get_threshold() == (700, 10, 50)  # the other run still goes on
    second_out.set()
    thread.join(5)
    assert gc.get_threshold() == (700, 10, 10)


@pytest.mark.parametrize("given", [(700, 10, 500), (0, 10, 10)])
def test_a_higher_threshold_or_a_switched_off_collector_is_left_alone(
    given: tuple[int, int, int],
) -> None:
    gc.set_threshold(*given)
    with spaced_full_collections(100):
        assert gc.get_threshold() == given
    assert gc.get_threshold() == given


def test_the_heap_of_the_first_two_examples_goes_to_the_permanent_generation() -> None:
    # In a fresh process: what the first example's first use allocates (the
    # implementation's imports, here a thousand lists) is frozen by the second.
    code = (
        "import gc\n"
        "from statecore.fuzzing.collector import CollectorPause\n"
        "kept, counts = [], []\n"
        "for _ in range(3):\n"
        "    pause = CollectorPause()\n"
        "    counts.append(gc.get_freeze_count())\n"
        "    kept.append([[i] for i in range(1000)])\n"
        "    pause.end()\n"
        "print(*counts, gc.isenabled())\n"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    first, second, third, enabled = done.stdout.split()
    assert int(second) >= int(first) + 1000
    assert int(third) <= int(second)  # no third freeze
    assert enabled == "True"


def test_the_pacing_benchmark_runs_the_same_search_under_both_pacings() -> None:
    bench = Path(__file__).parent.parent / "benchmarks" / "fuzz_collector.py"
    command = [sys.executable, str(bench), "--examples", "12", "--rounds", "1"]
    done = subprocess.run(command, capture_output=True, text=True, check=True)
    rows = [
        line.split()
        for line in done.stdout.splitlines()
        if line.split()[:1] in (["python"], ["statecore"])
    ]
    assert [row[0] for row in rows] == ["python", "statecore"]
    assert rows[0][1] == rows[1][1] != "0"  # the same steps: pacing changes no choice
    assert done.stdout.splitlines()[-1].startswith("RESULT python_steps_per_cpu_s=")
