"""`Tx.append` and `Tx.popleft`: a FIFO's put and get that do not read the whole queue,
and what the successor memo makes of them."""

from __future__ import annotations

from collections.abc import Callable, Hashable

import pytest
from test_stepcache import TOGGLE, assert_agrees, closure

from statecore.check.explore import explore
from statecore.check.mutation import mutants, mutate
from statecore.check.stepcache import SuccessorCache
from statecore.check.values import NotInterchangeable
from statecore.errors import ActionError, ActionRaisedError
from statecore.system import (
    Action,
    ActionLabel,
    Component,
    Global,
    Keys,
    System,
    SystemState,
    Tx,
)
from statecore.transaction import Disabled, Edited, Front

KEYS = Keys("k", 2)


def record_of(body: object, queue: object = ("a",)) -> tuple[object, ...]:
    """What one run of `body` on a state whose queue is `queue` logs."""
    system = fifo(body)
    tx: Tx = Tx(system, SystemState((), (queue, 0)))
    body(tx)  # type: ignore[operator]
    return tx.record()


def fifo(*bodies: object, counter: int = 0) -> System:
    return System(
        "fifo",
        components=[],
        globals=[Global("queue", ()), Global("n", counter)],
        actions=[Action(f"a{i}", "user", b) for i, b in enumerate(bodies)],  # type: ignore[arg-type]
    )


def test_an_append_alone_reads_the_front_and_writes_what_it_appended() -> None:
    def body(tx: Tx) -> None:
        tx.append("queue", "b")
        tx.append("queue", "c")

    reads, _, values, *_ = record_of(body)
    assert reads == ((~0, Front("item", "a")),)  # its front: that it is a tuple, and how
    assert values == ((0, Edited(0, ("b", "c"))),)
    assert Edited(0, ("b", "c")).onto(("a",)) == ("a", "b", "c")


def test_a_read_after_an_append_logs_the_starting_value_and_the_value_written() -> None:
    seen = []

    def body(tx: Tx) -> None:
        tx.append("queue", "b")
        seen.append(tx.get("queue"))

    reads, _, values, *_ = record_of(body)
    assert seen == [("a", "b")]  # the action sees its own append
    assert reads == ((~0, Front("item", "a")), (~0, ("a",)))  # then the queue as it was
    assert values == ((0, ("a", "b")),)


@pytest.mark.parametrize("first", ["read", "set"])
def test_an_append_after_a_read_or_a_set_is_an_ordinary_write(first: str) -> None:
    def body(tx: Tx) -> None:
        if first == "read":
            tx.get("queue")
        else:
            tx.set("queue", ("z",))
        tx.append("queue", "b")

    expected = ("a", "b") if first == "read" else ("z", "b")
    assert record_of(body)[2] == ((0, expected),)


def test_a_set_after_an_append_overwrites_it() -> None:
    def body(tx: Tx) -> None:
        tx.append("queue", "b")
        tx.set("queue", ("z",))

    reads, _, values, *_ = record_of(body)
    assert reads == ((~0, Front("item", "a")),) and values == ((0, ("z",)),)


def test_an_append_to_a_global_that_is_no_tuple_is_an_error_naming_it() -> None:
    def body(tx: Tx) -> None:
        tx.append("n", 1)

    with pytest.raises(ActionError, match=r"tx.append\('n', ...\) needs a tuple in global 'n'"):
        record_of(body)


def test_the_memo_learns_an_append_once_per_front_not_per_queue() -> None:
    runs = {"put": 0}

    def put(tx: Tx, k: Hashable) -> None:
        runs["put"] += 1
        puts = tx.get("puts")
        tx.require(puts < 3)
        tx.set("puts", puts + 1)
        tx.require(tx.fire(("t", k), "flip").accepted)
        tx.append("queue", k)

    def get(tx: Tx) -> None:
        queue = tx.get("queue")
        tx.require(queue)
        tx.set("queue", queue[1:])

    system = System(
        "fifo",
        components=[Component("t", TOGGLE, KEYS)],
        globals=[Global("queue", ()), Global("puts", 0)],
        actions=[Action("put", "user", put, {"k": KEYS}), Action("get", "saver", get)],
        init=lambda tx: [tx.spawn("t", k) for k in KEYS.values] and None,
    )
    cache = SuccessorCache(system)
    states = closure(system, cache)

    def seen(queue: Callable[[tuple[Hashable, ...]], object]) -> set[object]:
        """What put(k) reads in each state: the count, then (below 3) k's toggle and queue."""
        return {
            (k, s.values[1]) + ((s.slots[i], queue(s.values[0])) if s.values[1] < 3 else ())
            for s in states
            for i, k in enumerate(KEYS.values)
        }

    paths = seen(lambda queue: queue[:1])  # the front: what append reads
    assert runs["put"] == 2 * len(paths)  # each path run twice when learned
    assert len(seen(lambda queue: queue)) > len(paths)  # reading it whole: more paths
    assert_agrees(system, cache)


def test_a_learned_append_meets_a_global_that_is_no_tuple_and_raises_as_a_run_does() -> None:
    def put(tx: Tx) -> None:
        tx.append("queue", 1)

    def spoil(tx: Tx) -> None:
        tx.require(tx.get("n") == 0)
        tx.set("n", 1)
        tx.set("queue", None)

    system = fifo(put, spoil)
    cache = SuccessorCache(system)
    (start,) = system.init_states()
    assert [s.state.values for s in cache(start)] == [((1,), 0), (None, 1)]
    with pytest.raises(ActionRaisedError, match=r"tx.append\('queue', ...\) needs a tuple"):
        explore(system)


# -- popleft ------------------------------------------------------------------------


def test_a_popleft_alone_reads_the_front_and_writes_what_it_dropped() -> None:
    taken = []

    def body(tx: Tx) -> None:
        taken.append(tx.popleft("queue"))

    reads, _, values, *_ = record_of(body, ("a", "b"))
    assert taken == ["a"]
    assert reads == ((~0, Front("item", "a")),)
    assert values == ((0, Edited(1, ())),)
    assert Edited(1, ()).onto(("a", "z")) == ("z",)


def test_a_popleft_on_an_empty_queue_disables_the_action_having_read_that() -> None:
    system = fifo()
    tx: Tx = Tx(system, SystemState((), ((), 0)))
    with pytest.raises(Disabled):
        tx.popleft("queue")
    assert tx.record()[0] == ((~0, Front("empty")),)


def test_a_popleft_then_an_append_is_one_edit_of_the_unread_queue() -> None:
    def body(tx: Tx) -> None:
        tx.append("queue", tx.popleft("queue"))  # requeue at the back

    reads, _, values, *_ = record_of(body, ("a", "b"))
    assert reads == ((~0, Front("item", "a")),)
    assert values == ((0, Edited(1, ("a",))),)


@pytest.mark.parametrize("then", ["get", "popleft"])
def test_reading_more_after_a_popleft_reads_the_starting_queue_whole(then: str) -> None:
    seen = []

    def body(tx: Tx) -> None:
        tx.popleft("queue")
        seen.append(tx.get("queue") if then == "get" else tx.popleft("queue"))

    reads, _, values, *_ = record_of(body, ("a", "b", "c"))
    assert seen == [("b", "c")] if then == "get" else ["b"]
    assert reads == ((~0, Front("item", "a")), (~0, ("a", "b", "c")))
    assert values == ((0, ("b", "c") if then == "get" else ("c",)),)


def test_a_popleft_after_an_append_reads_the_starting_queue_whole() -> None:
    def body(tx: Tx) -> None:
        tx.append("queue", "z")
        tx.popleft("queue")

    reads, _, values, *_ = record_of(body, ("a",))
    assert reads == ((~0, Front("item", "a")), (~0, ("a",)))
    assert values == ((0, ("z",)),)


def test_the_front_of_a_value_that_is_no_tuple_is_other() -> None:
    assert Front.of(None) == Front("other", None) != Front.of(5)
    assert Front.of(()) == Front("empty")
    assert Front.of((1, 2)) == Front("item", 1)


def test_the_memo_learns_a_popleft_once_per_front() -> None:
    runs = {"get": 0}

    def put(tx: Tx, k: Hashable) -> None:
        puts = tx.get("puts")
        tx.require(puts < 4)
        tx.set("puts", puts + 1)
        tx.append("queue", k)

    def get(tx: Tx) -> None:
        runs["get"] += 1
        tx.popleft("queue")

    system = System(
        "fifo",
        components=[],
        globals=[Global("queue", ()), Global("puts", 0)],
        actions=[Action("put", "user", put, {"k": KEYS}), Action("get", "saver", get)],
    )
    cache = SuccessorCache(system)
    states = closure(system, cache)
    assert len({s.values[0] for s in states}) > 3 * 2  # many queues ...
    assert runs["get"] == 2 * 3  # ... three fronts (empty, k0, k1), each run twice
    assert_agrees(system, cache)


def test_each_append_and_popleft_is_a_mutation_site_and_a_skipped_take_keeps_the_item() -> None:
    def put(tx: Tx) -> None:
        tx.require(tx.get("n") < 2)
        tx.set("n", tx.get("n") + 1)
        tx.append("queue", "job")

    def get(tx: Tx) -> None:
        tx.popleft("queue")

    system = fifo(put, get)
    found = {m.kind: m for m in mutants(system)}
    assert found["skip-append"].code == 'tx.append("queue", "job")'
    assert found["skip-popleft"].code == 'tx.popleft("queue")'
    mutated = mutate(system, found["skip-popleft"])
    (start,) = mutated.init_states()
    queued = mutated.next_state(start, ActionLabel("a0"))
    assert queued.values[0] == ("job",)
    assert mutated.next_state(queued, ActionLabel("a1")).values[0] == ("job",)  # kept
    assert system.next_state(queued, ActionLabel("a1")).values[0] == ()


def test_an_action_disabled_after_an_append_still_fails_on_a_global_that_is_no_tuple() -> None:
    """Its path read the front, which tells a tuple from anything else: a state whose
    global is no tuple takes another path, and the run there raises as it does plainly."""

    def put(tx: Tx) -> None:
        tx.append("queue", 1)
        tx.require(tx.get("n") == 1)

    def spoil(tx: Tx) -> None:
        tx.require(tx.get("queue") == ())
        tx.set("queue", None)

    system = fifo(put, spoil)
    with pytest.raises(ActionRaisedError, match=r"tx.append\('queue', ...\) needs a tuple"):
        explore(system)


def test_a_caught_append_on_a_global_that_is_no_tuple_is_its_own_path() -> None:
    """The front is read before the error is raised: an action that catches it, learned
    first where the queue is None, does not answer for a state with a tuple there."""

    def put(tx: Tx) -> None:
        tx.require(tx.get("n") == 0)
        tx.set("n", 1)
        try:
            tx.append("queue", 1)
        except ActionError:
            tx.set("queue", ("failed",))

    def fix(tx: Tx) -> None:
        tx.require(tx.get("queue") is None and tx.get("n") == 0)
        tx.set("queue", ())

    system = System(
        "caught",
        components=[],
        globals=[Global("queue", None), Global("n", 0)],
        actions=[Action("put", "user", put), Action("fix", "user", fix)],
    )
    cache = SuccessorCache(system)
    assert_agrees(system, cache)
    (start,) = system.init_states()
    assert [s.state.values for s in cache(start)] == [(("failed",), 1), ((), 0)]
    fixed = system.next_state(start, ActionLabel("fix"))
    assert [s.state.values for s in cache(fixed)] == [((1,), 1)]


def test_equal_items_of_different_types_turn_the_memos_off() -> None:
    """1 and True are equal, and so are the queues ``(1,)`` and ``(True,)``; an action that
    takes the front and looks at its type tells them apart. The memo keys a front by its
    type, but not a queue read whole: the search runs without memos, as plainly."""

    def setter(value: object) -> Callable[[Tx], None]:
        def run(tx: Tx) -> None:
            tx.require(tx.get("n") == 0)
            tx.append("queue", value)
            tx.set("n", 1 if value is True else 2)

        return run

    def take(tx: Tx) -> None:  # reads only the front: the two queues are equal
        tx.set("n", -1 if type(tx.popleft("queue")) is bool else -2)

    system = fifo(setter(1), setter(True), take)
    with pytest.raises(NotInterchangeable, match=r"the values 1 and True are equal"):
        closure(system, SuccessorCache(system))
    report = explore(system, stop_on_violation=False)
    assert report.notes[0].startswith("memos off: the values 1 and True")
    states = {step.state for s in system.init_states() for step in system.successors(s)}
    assert report.states == 1 + len(states) + 2  # each queue, then each take
