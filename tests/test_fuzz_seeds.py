"""The seed-robustness benchmark runs, in its quick mode, and ends in its RESULT line.

Only the shape and the finding counts are checked: no wall-clock figure is asserted.
"""

from __future__ import annotations

import re

import pytest
from test_cli_benchmarks import load


def test_the_quick_benchmark_finds_every_target_on_every_seed(
    capsys: pytest.CaptureFixture[str],
) -> None:
    bench = load("fuzz_seeds")
    bench.main(["--quick"])
    out = capsys.readouterr().out.splitlines()
    result = out[-1]
    pattern = (
        r"RESULT targets=(\d+) new_found=(\d+)/(\d+) new_every_seed=(\d+)/(\d+) "
        r"new_median_first_s=\S+ new_median_report_s=\S+ "
        r"(old_found=(\d+)/(\d+) .*|old_found=n/a old50_found=n/a)"
    )
    match = re.fullmatch(pattern, result)
    assert match, result
    targets, found, total, every, of = (int(match.group(i)) for i in range(1, 6))
    assert targets == 4 and total == 2 * targets  # the docs' two services, two variants
    assert found == total and every == of == targets
    names = [line.split()[0] for line in out if line.startswith(("tutorial:", "adapters:"))]
    assert names == ["tutorial:UploadAdapter", "adapters:ShopAdapter"]
