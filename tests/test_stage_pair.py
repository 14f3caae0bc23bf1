"""The stage-pair model (`statecore.models.stage_pair`): sender, connector keys, receiver.

* golden figures: the reference and each variant explore to pinned counts, the
  reference holds with no vacuous property and every transition taken but the
  receiver's segment ones (declared), each variant violates exactly its
  expected properties with a shortest trace that tells its bug's story;
* every property can fail: each is violated by a variant that replaces one
  part of the reference (a single switch of `StagePairConfig`); that some
  single-point mutant of the model violates each is `tests/test_spec_adequacy.py`'s;
* directed runs: a put of an aborted request that lands after its id was
  reused is dropped by the reference's receiver and committed by 0.30.0's;
  a put terminal's keys outlive the request, an aborted one's are unlinked
  by the save thread.
"""

from __future__ import annotations

import re
from dataclasses import fields
from pathlib import Path

import pytest
from model_checks import assert_story, report_of
from statecore.models import stage_pair as sp
from statecore.models import stage_pair_records as sp_records
from statecore.models.stage_pair_records import Chunk, Cleanup, Stored
from statecore.spec import stage_pair as spec

from statecore.check.explore import HOLDS, VIOLATED
from statecore.registry import Target
from statecore.system import ActionLabel, System
from statecore.traces.path import follow

TARGETS = {t.name: t for t in sp.TARGETS}
VARIANTS = [t for t in sp.TARGETS if t.kind == "variant"]
PROPERTIES = (
    spec.PAIR_OWN_CHUNKS,
    spec.PAIR_IN_ORDER,
    spec.PAIR_DELIVERED,
    spec.TERMINAL_RELEASES_RECEIVER,
    spec.FAILURE_RELEASES_RECEIVER,
)

# name: (states, transitions, depth) of a full search.
GOLDEN = {
    "stage_pair": (2529, 6076, 20),
    "stage_pair_0_30_0": (4317, 10138, 26),
    "stage_pair_stale_read": (2983, 7194, 20),
    "stage_pair_key_not_advanced": (2803, 6565, 22),
    "stage_pair_key_counter_kept": (2393, 5676, 20),
    "stage_pair_terminal_keys_unlinked": (3944, 9143, 24),
    "stage_pair_failures_logged": (3660, 8534, 26),
}

EXT = ("ext", sp_records.EXT.values[0])
FINDINGS = Path(__file__).resolve().parent.parent / "docs" / "findings.md"


def act(text: str) -> ActionLabel:
    """``name`` or ``name:outcome``: an action of the one external id (or of none)."""
    name, _, outcome = text.partition(":")
    if outcome:
        return ActionLabel(name, (("outcome", outcome),))
    if name in {"collect_failures", "begin", "run_cleanup"}:
        return ActionLabel(name)
    return ActionLabel(name, (EXT,))


def run(system: System, *actions: str) -> object:
    """The globals after `actions`."""
    path = follow(system, [act(a) for a in actions])
    return system.view(path.steps[-1].state).g


# -- golden figures and verdicts ---------------------------------------------------------


def test_targets_are_registered_with_their_family() -> None:
    assert list(GOLDEN) == [t.name for t in sp.TARGETS]
    assert TARGETS["stage_pair"].kind == "model"
    for target in VARIANTS:
        assert target.family == "stage_pair"
        assert list(target.violates) == sorted(target.violates), target.name


@pytest.mark.parametrize("name", list(GOLDEN))
def test_golden_figures(name: str) -> None:
    report = report_of(TARGETS[name])
    assert report.complete
    assert (report.states, report.transitions, report.depth) == GOLDEN[name]


def test_the_reference_holds_without_vacuity_and_takes_every_transition_it_should() -> None:
    report = report_of(TARGETS["stage_pair"])
    assert report.ok
    assert {r.verdict for r in report.results} == {HOLDS}
    for cov in report.coverage:
        assert set(cov.never) <= set(sp.UNTAKEN_BY_DESIGN), (cov.component, cov.never)


def test_the_default_check_is_small() -> None:
    # statecore check runs every bundled model: this one stays a few thousand states.
    assert report_of(TARGETS["stage_pair"]).states < 5000


@pytest.mark.parametrize("target", VARIANTS, ids=lambda t: t.name)
def test_each_variant_violates_exactly_its_expected_properties(target: Target) -> None:
    report = report_of(target)
    failing = {r.property.id for r in report.results if r.verdict != HOLDS}
    assert failing == target.expected_violations
    assert all(report.result(p).verdict == VIOLATED for p in failing)


def test_0_30_0_stories() -> None:
    report = report_of(TARGETS["stage_pair_0_30_0"])
    # An aborted request's chunk, in flight at the abort, lands after the id is
    # reused; the new request's receiver polls key 0 and commits it.
    assert_story(
        report,
        spec.PAIR_OWN_CHUNKS,
        7,
        ["save_chunk", "begin", "abort", "new_request", "put", "poll"],
    )
    # A failed terminal put is only logged: the receiver waits for its deadline.
    assert_story(report, spec.FAILURE_RELEASES_RECEIVER, 7, ["put", "collect_failures", "deadline"])


def test_single_switch_variant_stories() -> None:
    overwrite = report_of(TARGETS["stage_pair_key_not_advanced"])
    # The terminal overwrites the unread chunk under key 0: the receiver commits it first.
    assert_story(overwrite, spec.PAIR_IN_ORDER, 8, ["save_chunk", "put", "put", "poll"])
    skew = report_of(TARGETS["stage_pair_key_counter_kept"])
    # The reused id's sender puts under key 1; its receiver polls key 0.
    assert_story(
        skew, spec.PAIR_DELIVERED, 10, ["abort", "new_request", "put", "save_chunk", "put"]
    )
    unlinked = report_of(TARGETS["stage_pair_terminal_keys_unlinked"])
    assert_story(unlinked, spec.TERMINAL_RELEASES_RECEIVER, 7, ["put", "run_cleanup", "deadline"])


# -- every property can fail ---------------------------------------------------------------


def test_each_property_is_violated_by_a_single_switch_variant() -> None:
    reference = sp.StagePairConfig()
    switched = set()
    killed: set[str] = set()
    for name, config in sp.SINGLE_SWITCH.items():
        changed = [
            f.name
            for f in fields(config)
            if f.name != "name" and getattr(config, f.name) != getattr(reference, f.name)
        ]
        assert len(changed) == 1, (name, changed)
        switched |= set(changed)
        report = report_of(TARGETS[name])
        killed |= {r.property.id for r in report.results if r.verdict == VIOLATED}
    assert killed == set(PROPERTIES)
    assert len(switched) == len(sp.SINGLE_SWITCH) == len(VARIANTS) - 1  # and 0.30.0


# -- directed runs ---------------------------------------------------------------------------

LATE_PUT = ("new_request", "save_chunk", "begin", "abort", "new_request", "put:ok")


def test_a_late_put_of_an_aborted_request_is_dropped_by_the_reference() -> None:
    g = run(sp.STAGE_PAIR, *LATE_PUT)
    assert g.store == (Stored(0, Chunk("data", 1, 0)),)  # type: ignore[attr-defined]
    assert g.queue == (Cleanup(1),)  # type: ignore[attr-defined]
    g = run(sp.STAGE_PAIR, *LATE_PUT, "drop_foreign")
    assert g.store == () and not g.crossed  # type: ignore[attr-defined]
    with pytest.raises(Exception, match="not enabled"):
        run(sp.STAGE_PAIR, *LATE_PUT, "poll")


def test_0_30_0_commits_the_late_put_into_the_reused_id() -> None:
    system = sp.released_0_30_0()
    g = run(system, *LATE_PUT, "poll")
    assert g.crossed and g.store == ()  # type: ignore[attr-defined]


def test_a_put_terminal_keeps_its_keys_an_aborted_generation_unlinks_them() -> None:
    sent = ("new_request", "save_chunk", "begin", "put:ok", "save_terminal", "begin", "put:ok")
    g = run(sp.STAGE_PAIR, *sent, "abort")
    assert [s.key for s in g.store] == [0, 1] and g.queue == ()  # type: ignore[attr-defined]
    aborted = ("new_request", "save_chunk", "begin", "put:ok", "abort")
    g = run(sp.STAGE_PAIR, *aborted)
    assert g.queue == (Cleanup(1),)  # type: ignore[attr-defined]
    g = run(sp.STAGE_PAIR, *aborted, "run_cleanup")
    assert g.store == () and g.put_chunk == 0  # type: ignore[attr-defined]


def test_findings_show_the_shortest_traces_of_0_30_0() -> None:
    # The last trace block of docs/findings.md is what the stage pair's Python block prints.
    blocks = re.findall(r"^```text\n(.*?)^```", FINDINGS.read_text(encoding="utf-8"), re.M | re.S)
    shown = blocks[-1].strip().splitlines()
    printed = []
    for result in report_of(TARGETS["stage_pair_0_30_0"]).violations():
        assert result.trace is not None
        actions = [str(a) for a in result.trace.actions]
        printed.append(f"{result.property.id} {len(actions)} {actions}")
    assert shown == printed
