"""Helpers shared by the tests of the bundled models: cached reports, trace reading."""

from __future__ import annotations

from statecore.check.explore import Report, explore
from statecore.registry import Target
from statecore.traces.trace import Trace

_REPORTS: dict[str, Report] = {}


def report_of(target: Target) -> Report:
    """The full exploration of `target` (every property judged), computed once per run."""
    if target.name not in _REPORTS:
        _REPORTS[target.name] = explore(target.load(), stop_on_violation=False)
    return _REPORTS[target.name]


def names(trace: Trace) -> list[str]:
    """The action names of `trace`, in order."""
    return [a.name for a in trace.actions]


def in_order(actions: list[str], expected: list[str]) -> bool:
    """Whether `expected` is a subsequence of `actions`."""
    it = iter(actions)
    return all(any(a == e for a in it) for e in expected)


def assert_story(report: Report, prop: str, length: int, story: list[str]) -> None:
    """`prop` is violated with a shortest trace of `length` actions that tells `story` in order."""
    result = report.result(prop)
    assert result.verdict == "violated"
    assert result.trace is not None
    assert len(result.trace) == length, names(result.trace)
    assert in_order(names(result.trace), story), names(result.trace)
