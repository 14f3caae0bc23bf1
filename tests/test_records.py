"""Typed globals: a record type declares them, ``tx.g`` / ``tx.put`` / ``view.g`` use them.

The typed access must be the string access under another name: the same
states, the same reads logged for the successor memo, the same renaming
under symmetry (a record inside a global stays a record), the same mutants.
"""

from __future__ import annotations

from collections.abc import Hashable
from dataclasses import dataclass
from pathlib import Path
from typing import Annotated, Any, NamedTuple

import pytest

from statecore import Event, Machine, State, Transition
from statecore.check.explore import explore
from statecore.check.mutation import mutants
from statecore.errors import ActionError, SystemDefinitionError
from statecore.properties import always, sometimes
from statecore.system import Action, Component, Global, Keys, StateView, System, Tx

JOBS = Keys("job", 2)

JOB = Machine(
    "job",
    states=[State("queued", initial=True), State("done", final=True)],
    events=[Event("run")],
    transitions=[Transition("queued", "run", "done")],
)


class Ticket(NamedTuple):
    """A queued item as a record."""

    job: Hashable
    attempt: int


class Shared(NamedTuple):
    queue: Annotated[tuple[Ticket, ...], "tickets waiting for the worker"] = ()
    served: tuple[Hashable, ...] = ()


def _spawn(tx: Tx[Any]) -> None:
    for j in JOBS.values:
        tx.spawn("job", j)


def typed_system() -> System:
    def submit(tx: Tx[Shared], job: Hashable) -> None:
        tx.require(all(t.job != job for t in tx.g.queue) and job not in tx.g.served)
        tx.put(queue=tx.g.queue + (Ticket(job, 1),))

    def serve(tx: Tx[Shared]) -> None:
        tx.require(bool(tx.g.queue))
        head, *rest = tx.g.queue
        tx.require(tx.fire(("job", head.job), "run").accepted)
        tx.put(queue=tuple(rest), served=tx.g.served + (head.job,))

    def served_once(view: StateView[Shared]) -> bool:
        return len(set(view.g.served)) == len(view.g.served)

    def both_served(view: StateView[Shared]) -> bool:
        return len(view.g.served) == 2

    return System(
        "typed",
        components=[Component("job", JOB, JOBS)],
        globals=Shared,
        actions=[
            Action("submit", "client", submit, {"job": JOBS}),
            Action("serve", "worker", serve, internal=True),
        ],
        init=_spawn,
        properties=[
            always("served_once", "each job is served once", served_once),
            sometimes("both_served", "both jobs get served", both_served),
        ],
    )


def string_system() -> System:
    def submit(tx: Tx[Any], job: Hashable) -> None:
        tx.require(all(t.job != job for t in tx.get("queue")) and job not in tx.get("served"))
        tx.set("queue", tx.get("queue") + (Ticket(job, 1),))

    def serve(tx: Tx[Any]) -> None:
        tx.require(bool(tx.get("queue")))
        head, *rest = tx.get("queue")
        tx.require(tx.fire(("job", head.job), "run").accepted)
        tx.set("queue", tuple(rest))
        tx.set("served", tx.get("served") + (head.job,))

    return System(
        "typed",
        components=[Component("job", JOB, JOBS)],
        globals=[Global("queue", ()), Global("served", ())],
        actions=[
            Action("submit", "client", submit, {"job": JOBS}),
            Action("serve", "worker", serve, internal=True),
        ],
        init=_spawn,
        properties=[
            always(
                "served_once",
                "each job is served once",
                lambda v: len(set(v.get("served"))) == len(v.get("served")),
            ),
            sometimes("both_served", "both jobs get served", lambda v: len(v.get("served")) == 2),
        ],
    )


def test_record_declares_the_globals_in_field_order_with_docs() -> None:
    system = typed_system()
    assert [(g.name, g.default) for g in system.globals] == [("queue", ()), ("served", ())]
    assert system.globals[0].doc == "tickets waiting for the worker"
    assert system.record is Shared


@pytest.mark.parametrize("symmetry", [True, False])
def test_typed_access_explores_like_string_access(symmetry: bool) -> None:
    typed = explore(typed_system(), symmetry=symmetry, stop_on_violation=False)
    plain = explore(string_system(), symmetry=symmetry, stop_on_violation=False)
    assert (typed.states, typed.transitions, typed.depth) == (
        plain.states,
        plain.transitions,
        plain.depth,
    )
    assert [(r.property.id, r.verdict) for r in typed.results] == [
        (r.property.id, r.verdict) for r in plain.results
    ]
    assert typed.notes == plain.notes == ()


def test_symmetry_reduces_and_records_stay_records() -> None:
    reduced = explore(typed_system(), stop_on_violation=False)
    full = explore(typed_system(), symmetry=False, stop_on_violation=False)
    assert reduced.states < full.states
    # Every state the reduced search keeps holds Ticket records, not bare tuples.
    trace = reduced.result("both_served").trace
    assert trace is not None
    for step in trace.steps:
        for ticket in step.state.values[0]:
            assert type(ticket) is Ticket


def test_reads_are_logged_per_field() -> None:
    system = typed_system()
    (state,) = system.init_states()
    tx: Tx[Shared] = Tx(system, state)
    assert tx.g.served == ()
    assert [location for location, _ in tx.record().reads] == [~1]


def test_view_reads_the_record() -> None:
    system = typed_system()
    (state,) = system.init_states()
    view: StateView[Shared] = system.view(state)
    assert view.g == Shared()


def test_put_of_an_unknown_field_names_the_fields() -> None:
    system = typed_system()
    (state,) = system.init_states()
    with pytest.raises(
        ActionError, match=r"Shared has no field 'queu'; fields are \['queue', 'served'\]"
    ):
        Tx(system, state).put(queu=())


def test_typo_in_a_read_names_the_fields() -> None:
    system = typed_system()
    (state,) = system.init_states()
    with pytest.raises(AttributeError, match=r"Shared has no field 'queu'"):
        Tx(system, state).g.queu  # type: ignore[attr-defined]  # noqa: B018


def test_globals_are_not_assigned() -> None:
    system = typed_system()
    (state,) = system.init_states()
    with pytest.raises(AttributeError, match=r"tx.put\(queue=...\)"):
        Tx(system, state).g.queue = ()  # type: ignore[misc]


def test_g_without_a_record_says_how_to_declare_one() -> None:
    system = string_system()
    (state,) = system.init_states()
    with pytest.raises(ActionError, match="globals=<a NamedTuple>"):
        Tx(system, state).g  # noqa: B018


def test_a_frozen_dataclass_record_works_too() -> None:
    @dataclass(frozen=True)
    class Counter:
        count: int = 0

    def bump(tx: Tx[Counter]) -> None:
        tx.require(tx.g.count < 3)
        tx.put(count=tx.g.count + 1)

    system = System("counter", components=[], actions=[Action("bump", "a", bump)], globals=Counter)
    assert explore(system).states == 4
    assert system.view(system.init_states()[0]).g == Counter(0)


@pytest.mark.parametrize(
    ("record", "message"),
    [
        (int, "neither a NamedTuple nor a dataclass"),
        (NamedTuple("NoDefault", [("x", int)]), "needs a default"),
    ],
)
def test_bad_records_are_refused(record: type, message: str) -> None:
    with pytest.raises(SystemDefinitionError, match=message):
        System("bad", components=[], actions=[], globals=record)


def test_each_put_is_a_mutation_site() -> None:
    kinds = {(m.kind, m.code) for m in mutants(typed_system())}
    assert ("skip-put", "tx.put(queue=tx.g.queue + (Ticket(job, 1),))") in kinds
    assert ("skip-put", "tx.put(queue=tuple(rest), served=tx.g.served + (head.job,))") in kinds


def test_renaming_keeps_a_record_that_equals_a_renamed_tuple() -> None:
    from statecore.check.symmetry import _Plan

    j0, j1 = JOBS.values
    plan = _Plan({j0: j1, j1: j0}, (), ())
    assert plan.renamed((j0, 1)) == (j1, 1)
    # The record equals the tuple just renamed; it must come back a record.
    renamed = plan.renamed(Ticket(j0, 1))
    assert renamed == Ticket(j1, 1)
    assert type(renamed) is Ticket


def test_records_in_a_trace_file_keep_their_names_and_read_back(tmp_path: Path) -> None:
    from statecore.traces.itf import read_itf, write_itf

    system = typed_system()
    trace = explore(system).result("both_served").trace
    assert trace is not None
    path = write_itf(trace, system, tmp_path / "typed.itf.json")
    text = path.read_text()
    assert "#unserializable" not in text and '"type": "Ticket"' in text
    unchecked = read_itf(path, system, verify=False)
    queued = [t for step in unchecked.steps for t in step.state.values[0]]
    assert queued and all(type(t).__name__ == "Ticket" and t.job in JOBS.values for t in queued)
    assert [s.state for s in read_itf(path, system).steps] == [s.state for s in trace.steps]


def test_a_label_names_the_guard_or_effect_it_is_on() -> None:
    from statecore import Transition
    from statecore.errors import DefinitionError

    with pytest.raises(DefinitionError, match="guard_label='ready' labels no guard"):
        Transition("open", "finish", "done", guard_label="ready")
    with pytest.raises(DefinitionError, match="effect_label='count' labels no effect"):
        Transition("open", "tick", None, effect_label="count")

    def ready(snapshot: object, payload: object) -> bool:
        return True

    assert Transition("open", "finish", "done", guard=ready).label() == "finish [ready]"


def test_bundled_machines_are_labelled_by_their_guards_and_effects() -> None:
    from statecore.registry import bundled

    free_text = {
        (component.machine.name, t.name)
        for target in bundled()
        for component in target.load().components
        for t in component.machine.transitions
        if (t.guard is not None and t.guard_label != t.guard.__name__)
        or (t.effect is not None and t.effect_label != t.effect.__name__)
    }
    assert free_text == set()
