"""Model mutation: single-point mutants from a model's structure, and what the spec notices.

The shop below is small enough to know every mutant by heart: a guard on
`ship`, an effect counting payments, requires in the actions. Each test
states what a mutant must do and checks the engine agrees.
"""

from __future__ import annotations

import json
from collections.abc import Hashable

import pytest

from statecore import Event, Machine, State, Transition, Var, out
from statecore.check.adequacy import (
    CRASHED,
    EQUIVALENT,
    INVALID,
    KILLED,
    SURVIVED,
    AdequacyReport,
    adequacy,
)
from statecore.check.explore import explore
from statecore.check.mutation import InvalidMutant, Mutant, call_sites, mutants, mutate
from statecore.cli import main
from statecore.properties import Property, always, sometimes
from statecore.system import Action, Component, Global, Keys, System, Tx

ORDERS = Keys("order", 2)

ORDER = Machine(
    "order",
    states=[
        State("open", initial=True),
        State("paid"),
        State("shipped", final=True),
        State("cancelled", final=True),
    ],
    variables=[Var("payments", range(3), default=0)],
    events=[Event("pay"), Event("ship"), Event("cancel")],
    transitions=[
        Transition(
            ("open", "paid"),
            "pay",
            "paid",
            guard=lambda s, p: s.payments < 2,
            effect=lambda s, p: {"payments": s.payments + 1},
            name="pay",
        ),
        Transition(
            "paid",
            "ship",
            "shipped",
            guard=lambda s, p: s.payments == 1,
            emit=[out("shipped")],
            name="ship",
        ),
        Transition(("open", "paid"), "cancel", "cancelled", name="cancel"),
    ],
)


def create(tx: Tx, order: Hashable) -> None:
    tx.require(not tx.live(("order", order)))
    tx.spawn("order", order)


def pay(tx: Tx, order: Hashable) -> None:
    tx.require(tx.fire(("order", order), "pay").accepted)


def ship(tx: Tx, order: Hashable) -> None:
    tx.require(tx.get("stock") > 0)
    tx.require(tx.fire(("order", order), "ship").accepted)
    tx.set("stock", tx.get("stock") - 1)


def cancel(tx: Tx, order: Hashable) -> None:
    tx.require(tx.fire(("order", order), "cancel").accepted)


def shipped(view: object) -> list[object]:
    return [snap for _, snap in view.live("order") if snap.state == "shipped"]  # type: ignore[attr-defined]


SHIPPED_PAID_ONCE = always(
    "shipped_paid_once",
    "a shipped order was paid exactly once",
    lambda v: all(snap.payments == 1 for snap in shipped(v)),  # type: ignore[attr-defined]
)
STOCK_NEVER_NEGATIVE = always(
    "stock_never_negative", "stock never goes below zero", lambda v: v.get("stock") >= 0
)
SHIPS = sometimes("ships", "an order can ship", lambda v: bool(shipped(v)))
TRUISM = always("truism", "stock is a number", lambda v: isinstance(v.get("stock"), int))


def shop(*properties: Property, equivalent: dict[str, str] | None = None) -> System:
    return System(
        "shop",
        components=[Component("order", ORDER, ORDERS)],
        globals=[Global("stock", 1)],
        actions=[
            Action("create", "client", create, {"order": ORDERS}),
            Action("pay", "client", pay, {"order": ORDERS}),
            Action("ship", "warehouse", ship, {"order": ORDERS}),
            Action("cancel", "client", cancel, {"order": ORDERS}),
        ],
        properties=properties,
        equivalent_mutants=equivalent,
    )


def by_id(report: AdequacyReport) -> dict[str, str]:
    return {r.mutant.id: r.outcome for r in report.results}


# -- listing -------------------------------------------------------------------------


def test_call_sites_are_the_model_lines_that_call_the_tx() -> None:
    sites = call_sites(shop())
    shown = {(s.method, s.function, s.code) for s in sites}
    assert ("require", "create", 'tx.require(not tx.live(("order", order)))') in shown
    assert ("spawn", "create", 'tx.spawn("order", order)') in shown
    assert ("set", "ship", 'tx.set("stock", tx.get("stock") - 1)') in shown
    assert ("fire", "cancel", 'tx.require(tx.fire(("order", order), "cancel").accepted)') in shown
    # The engine's own calls (spawn's generation bound) are not sites of the model.
    assert all(s.filename == __file__ for s in sites)


def test_mutants_cover_guards_effects_emits_targets_and_call_sites() -> None:
    ids = {m.id for m in mutants(shop())}
    assert {
        "drop-guard order.ship",
        "negate-guard order.ship",
        "drop-guard order.pay",
        "drop-effect order.pay",
        "drop-emit order.ship",
        "stay order.ship",
        "stay order.cancel",
        'skip-set ship: tx.set("stock", tx.get("stock") - 1)',
        'negate-require ship: tx.require(tx.get("stock") > 0)',
        'skip-require ship: tx.require(tx.get("stock") > 0)',
    } <= ids
    assert "stay order.pay" not in ids  # `pay` may already stay in `paid`
    assert "drop-guard order.cancel" not in ids  # `cancel` has no guard
    assert len(ids) == len(mutants(shop()))  # ids are unique


def test_mutant_ids_carry_no_line_numbers() -> None:
    for mutant in mutants(shop()):
        assert mutant.site is None or str(mutant.site.line) not in mutant.id.split(":")[0]
        if mutant.site is not None:
            assert mutant.where.endswith(f":{mutant.site.line}")


# -- one point changed --------------------------------------------------------------------


def test_a_mutant_changes_its_point_and_nothing_else() -> None:
    (skip_set,) = [m for m in mutants(shop()) if m.kind == "skip-set"]
    mutated = mutate(shop(STOCK_NEVER_NEGATIVE), skip_set)
    stocks = {s.values[0] for s in _reachable(mutated)}  # type: ignore[attr-defined]
    assert stocks == {1}  # shipping no longer takes stock
    assert {s.values[0] for s in _reachable(shop())} == {0, 1}  # type: ignore[attr-defined]
    # The reference itself is untouched: the same system checks as before.
    assert explore(shop(STOCK_NEVER_NEGATIVE)).ok


def _reachable(system: System) -> set[object]:
    from statecore.check.reachable import reachable

    return reachable(system)  # type: ignore[return-value]


def test_a_mutated_machine_that_does_not_build_is_invalid() -> None:
    (stay,) = [m for m in mutants(shop()) if m.id == "stay order.ship"]
    with pytest.raises(InvalidMutant, match="cannot be reached"):
        mutate(shop(), stay)


# -- adequacy -----------------------------------------------------------------------------


@pytest.fixture(scope="module")
def report() -> AdequacyReport:
    return adequacy(shop(SHIPPED_PAID_ONCE, STOCK_NEVER_NEGATIVE, SHIPS, TRUISM))


def test_each_mutant_is_killed_by_the_property_it_breaks(report: AdequacyReport) -> None:
    results = {r.mutant.id: r for r in report.results}

    def killed_by(mutant_id: str) -> tuple[str, ...]:
        return results[mutant_id].killed_by

    # Shipping after two payments:
    assert killed_by("drop-guard order.ship") == ("shipped_paid_once",)
    assert killed_by("negate-guard order.ship") == ("shipped_paid_once",)
    # Never shipping makes the reachability guard vacuous:
    assert killed_by('negate-require ship: tx.require(tx.get("stock") > 0)') == ("ships",)
    assert killed_by("drop-effect order.pay") == ("ships",)
    # Two orders shipped from a stock of one:
    assert killed_by('skip-require ship: tx.require(tx.get("stock") > 0)') == (
        "stock_never_negative",
    )
    # Nothing checks that shipping takes stock: a blind spot.
    assert results['skip-set ship: tx.set("stock", tx.get("stock") - 1)'].outcome == SURVIVED
    assert results["stay order.ship"].outcome == INVALID


def test_a_property_no_mutant_can_fail_is_flagged(report: AdequacyReport) -> None:
    assert report.tautological == ("truism",)
    kills = report.kills()
    assert kills["truism"] == ()
    assert kills["ships"] and kills["shipped_paid_once"] and kills["stock_never_negative"]
    assert not report.ok


def test_score_counts_detected_over_judged(report: AdequacyReport) -> None:
    detected = report.count(KILLED) + report.count(CRASHED)
    judged = detected + report.count(SURVIVED) + report.count("undecided")
    assert report.score == detected / judged
    assert 0 < report.score < 1
    assert report.count(INVALID) >= 1


def test_declared_equivalent_mutants_are_triaged_and_contradictions_reported() -> None:
    survivor = 'skip-set ship: tx.set("stock", tx.get("stock") - 1)'
    killed = "drop-effect order.pay"
    report = adequacy(
        shop(
            SHIPPED_PAID_ONCE,
            SHIPS,
            equivalent={survivor: "stock is not part of this spec", killed: "mistaken"},
        )
    )
    outcomes = by_id(report)
    assert outcomes[survivor] == EQUIVALENT
    assert [r.mutant.id for r in report.stale_equivalences] == [killed]
    assert survivor not in {r.mutant.id for r in report.survivors}


def test_a_mutant_that_crashes_the_model_is_detected_but_kills_no_property() -> None:
    def restock(tx: Tx) -> None:
        stock = tx.get("stock")
        tx.require(stock == 0)
        tx.set("stock", (1,)[stock])  # only stock 0 can be restocked

    system = shop(STOCK_NEVER_NEGATIVE)
    system = System(
        "shop",
        components=system.components,
        globals=system.globals,
        actions=[*system.actions, Action("restock", "warehouse", restock)],
        properties=system.properties,
    )
    (negated,) = [
        r
        for r in adequacy(system).results
        if r.mutant.id.endswith("<locals>.restock: tx.require(stock == 0)")
        and r.mutant.kind == "negate-require"
    ]
    assert negated.outcome == CRASHED and negated.killed_by == ()
    assert "IndexError" in negated.detail


def test_parallel_workers_give_the_results_of_one_process() -> None:
    system = shop(SHIPPED_PAID_ONCE, STOCK_NEVER_NEGATIVE, SHIPS)
    one = adequacy(system, jobs=1)
    two = adequacy(system, jobs=2)
    assert [(r.mutant.id, r.outcome, r.killed_by) for r in one.results] == [
        (r.mutant.id, r.outcome, r.killed_by) for r in two.results
    ]


def test_jobs_must_be_positive() -> None:
    with pytest.raises(ValueError, match="jobs must be at least 1"):
        adequacy(shop(), jobs=0)


def test_a_mutant_is_a_plain_record() -> None:
    mutant = mutants(shop())[0]
    assert isinstance(mutant, Mutant) and str(mutant).startswith(mutant.kind)


# -- the command line -----------------------------------------------------------------------

SHOP = shop(SHIPPED_PAID_ONCE, STOCK_NEVER_NEGATIVE, SHIPS)


def triaged_shop() -> System:
    """SHOP with every survivor declared equivalent: an adequate spec by declaration."""
    survivors = adequacy(SHOP).survivors
    return shop(
        SHIPPED_PAID_ONCE,
        STOCK_NEVER_NEGATIVE,
        SHIPS,
        equivalent={r.mutant.id: "triaged in the test" for r in survivors},
    )


def test_cli_adequacy_reports_the_score_and_the_blind_spots(
    capsys: pytest.CaptureFixture[str],
) -> None:
    assert main(["check", "--adequacy", "test_adequacy:SHOP", "--jobs", "1"]) == 1
    out = capsys.readouterr().out
    assert out.startswith("FAIL test_adequacy:SHOP: adequacy ")
    assert "skip-set at tests/test_adequacy.py" in out or "skip-set at " in out
    assert "possibly tautological" not in out
    assert main(["check", "--adequacy", "test_adequacy:SHOP", "--json", "--jobs", "2"]) == 1
    (entry,) = json.loads(capsys.readouterr().out)["targets"]
    assert entry["counts"]["survived"] >= 1 and entry["tautological"] == []
    assert {m["outcome"] for m in entry["mutants"]} >= {"killed", "survived", "invalid"}


def test_cli_adequacy_passes_once_every_survivor_is_triaged(
    capsys: pytest.CaptureFixture[str],
) -> None:
    assert main(["check", "--adequacy", "test_adequacy:triaged_shop", "--jobs", "1"]) == 0
    assert capsys.readouterr().out.startswith("PASS test_adequacy:triaged_shop: adequacy 100%")


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["check", "--adequacy", "--variants"], "--adequacy measures models, not variants"),
        (["check", "--adequacy", "--jobs", "0", "segments"], "--jobs"),
    ],
)
def test_cli_adequacy_bad_usage(
    argv: list[str], message: str, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(argv) == 2
    assert message in capsys.readouterr().err


def test_an_undecided_mutant_may_be_declared_equivalent() -> None:
    system = shop(SHIPPED_PAID_ONCE, SHIPS)
    bounded = adequacy(system, max_states=3)
    undecided = [r.mutant.id for r in bounded.results if r.outcome == "undecided"]
    assert undecided
    declared = shop(SHIPPED_PAID_ONCE, SHIPS, equivalent={undecided[0]: "same as the model"})
    again = {r.mutant.id: r for r in adequacy(declared, max_states=3).results}
    assert again[undecided[0]].outcome == EQUIVALENT
    assert again[undecided[0]].detail == "same as the model (no finding within 3 states)"
