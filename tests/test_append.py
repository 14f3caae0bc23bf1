"""`Tx.append`: a FIFO's put that does not read the queue, and what the memo makes of it."""

from __future__ import annotations

from collections.abc import Hashable

import pytest
from test_stepcache import TOGGLE, assert_agrees, closure

from statecore.check.explore import explore
from statecore.check.stepcache import SuccessorCache
from statecore.errors import ActionError, ActionRaisedError
from statecore.system import Action, Component, Global, Keys, System, SystemState, Tx
from statecore.transaction import Appended

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


def test_an_append_alone_logs_no_read_and_writes_what_it_appended() -> None:
    def body(tx: Tx) -> None:
        tx.append("queue", "b")
        tx.append("queue", "c")

    reads, _, values, *_ = record_of(body)
    assert reads == ()
    assert values == ((0, Appended(("b", "c"))),)
    assert Appended(("b", "c")).onto(("a",)) == ("a", "b", "c")


def test_a_read_after_an_append_logs_the_starting_value_and_the_value_written() -> None:
    seen = []

    def body(tx: Tx) -> None:
        tx.append("queue", "b")
        seen.append(tx.get("queue"))

    reads, _, values, *_ = record_of(body)
    assert seen == [("a", "b")]  # the action sees its own append
    assert reads == ((~0, ("a",)),)  # the log: the queue as it was
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
    assert reads == () and values == ((0, ("z",)),)


def test_an_append_to_a_global_that_is_no_tuple_is_an_error_naming_it() -> None:
    def body(tx: Tx) -> None:
        tx.append("n", 1)

    with pytest.raises(ActionError, match=r"tx.append\('n', ...\) needs a tuple in global 'n'"):
        record_of(body)


def test_the_memo_learns_an_append_once_for_every_queue() -> None:
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
    queues = {s.values[0] for s in states}
    assert len(queues) > 2 * 3 * 2  # many queues ...
    # ... one path per key, count below 3 and toggle state (each run twice when learned).
    assert runs["put"] == 2 * (2 * 3 * 2)
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
