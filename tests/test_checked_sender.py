"""The checked sender state (`statecore.models.implementations.checked_sender`), without vLLM.

The flags of a `SenderGeneration` are the state of its machine, the
watermarks admit and skip saves as the ``segment_watermark`` machine does at
any count, and ``request_payload`` entries live exactly as long as their
request-state generation. The adapter built on them is fuzzed against the
reference model in ``tests/test_vllm_checked.py`` (the ``vllm`` tox env).
"""

from __future__ import annotations

import itertools
import re
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st
from statecore.models.implementations.checked_sender import (
    BEGIN,
    END,
    SENDER_GENERATION,
    WATERMARKS,
    GenerationPayloads,
    SenderGeneration,
    Watermarks,
)
from statecore.models.segment_watermark import (
    KINDS,
    below_sent,
    late,
    unbounded_watermark_machine,
    watermark_machine,
)
from statecore.models.segment_watermark_runtime import EFFECTS, Counts, compiled

from statecore import FireError, Prepared, Snapshot, step
from statecore.runtime import Instance, SerialInstance, verify_memo

# -- SenderGeneration ---------------------------------------------------------------


def flags(token: SenderGeneration) -> tuple[str, bool, bool, bool, bool]:
    return (
        token.state,
        token.cancelled,
        token.terminal_pending,
        token.cleanup_deferred,
        token.in_flight,
    )


def test_a_cleanup_while_a_terminal_is_queued_defers_to_the_terminal() -> None:
    token = SenderGeneration("r1")
    assert flags(token) == ("open", False, False, False, False)
    token.fire("save_terminal")
    assert flags(token) == ("terminal_pending", False, True, False, False)
    token.fire("cleanup")
    assert flags(token) == ("draining", True, True, True, False)
    assert token.fire("begin", terminal=False).status == "rejected"  # cancelled vetoes a chunk
    assert token.fire("begin", terminal=True).accepted  # not the terminal
    assert flags(token) == ("draining", True, True, True, True)
    assert token.fire("end", terminal=True).snapshot.state == "reclaimed"
    assert token.owner == "r1"


def test_a_cleanup_while_a_chunk_runs_leaves_the_reclaim_to_its_finally() -> None:
    token = SenderGeneration("r1")
    token.fire("begin", terminal=False)
    token.fire("cleanup")
    assert flags(token) == ("retiring", True, False, False, True)
    assert token.fire("end", terminal=False).snapshot.state == "reclaimed"


def test_the_flags_cannot_be_assigned_by_hand() -> None:
    token = SenderGeneration("r1")
    with pytest.raises(AttributeError):
        token.cancelled = True  # type: ignore[misc]


def test_the_prepared_fires_are_checked_by_verify_memo() -> None:
    # The sender fires its per-chunk events on the SerialInstance fast path; under
    # verify_memo that path re-runs the step, so the memo contract still holds there.
    previous = verify_memo(1)
    try:
        token = SenderGeneration("r1")
        for _ in range(2):
            assert token.fire_prepared(BEGIN[False]).accepted
            assert token.fire_prepared(END[False]).snapshot.state == "open"
        # No override of its own: the generation takes verify_memo's checked fire.
        assert SenderGeneration.fire_prepared is Instance._fire_prepared_verified
    finally:
        verify_memo(previous)
    assert isinstance(token, SerialInstance) and token.machine is SENDER_GENERATION


# -- Watermarks -----------------------------------------------------------------------


UNBOUNDED = unbounded_watermark_machine()


def test_the_runtime_watermark_has_the_checked_transitions_in_order() -> None:
    checked = [t.name for t in watermark_machine().transitions]
    unbounded = [t.name for t in UNBOUNDED.transitions]
    assert [name for name in unbounded if name not in checked] == ["open--rebuild_prompt-->(same)"]
    assert [name for name in unbounded if name in checked] == checked
    assert [t.name for t in WATERMARKS.machine.transitions] == unbounded


def as_snapshot(counts: Counts) -> Snapshot:
    return UNBOUNDED.snapshot_class(("open", counts.expected, counts.sent))


def presence(counts: Counts) -> Snapshot:
    has = (counts.expected is not None, counts.sent is not None)
    return WATERMARKS.machine.snapshot_class(("open", *has))


def assert_runs_as_checked(counts: Counts, event: str, payload: dict[str, Any]) -> None:
    """The table (presence machine + counts) takes the checked machine's step.

    Its step is also the presence machine's `step` on the presence of `counts`
    (the table is that machine, tabulated), and it leaves the presence of the
    counts it returns.
    """
    checked = step(UNBOUNDED, as_snapshot(counts), event, payload)
    taken, after = WATERMARKS.fire(counts, event, **payload)
    outcome = taken.outcome
    assert (outcome.status, outcome.transition, outcome.outputs) == (
        checked.status,
        checked.transition and UNBOUNDED_TO_RUNTIME[checked.transition.name],
        checked.outputs,
    )
    assert as_snapshot(after) == checked.snapshot
    assert outcome.snapshot == presence(after)
    if event == "save":
        fired = {
            "kind": payload["kind"],
            "counter": payload["counter"],
            "late": late(counts, payload),
            "below": below_sent(counts, payload),
        }
        assert step(WATERMARKS.machine, presence(counts), "save", fired) == outcome
        [output] = outcome.outputs
        assert taken.verdict == ("admitted" if output.name == "admitted" else output.get("reason"))


UNBOUNDED_TO_RUNTIME = {t.name: t for t in WATERMARKS.machine.transitions}
COUNTS = [Counts(e, s) for e, s in itertools.product([None, *range(5)], repeat=2)]


def test_the_runtime_watermark_runs_as_the_checked_one_on_every_bounded_case() -> None:
    for counts in COUNTS:
        for event in ("clear", "rebuild_prompt"):
            assert_runs_as_checked(counts, event, {})
        for kind, generation, confirmed, counter in itertools.product(
            KINDS, range(6), range(6), (False, True)
        ):
            payload = {
                "kind": kind,
                "generation": generation,
                "confirmed": confirmed,
                "counter": counter,
            }
            assert_runs_as_checked(counts, "save", payload)


COUNT = st.integers(-(2**70), 2**70)
any_save = given(
    counts=st.builds(Counts, st.none() | COUNT, st.none() | COUNT),
    kind=st.sampled_from(KINDS),
    generation=COUNT,
    confirmed=COUNT,
    counter=st.booleans(),
)
"""A save at any counts, far beyond the checked bounds."""


@any_save
def test_the_runtime_watermark_runs_as_the_checked_one_at_any_count(
    counts: Counts, kind: str, generation: int, confirmed: int, counter: bool
) -> None:
    payload = {"kind": kind, "generation": generation, "confirmed": confirmed, "counter": counter}
    assert_runs_as_checked(counts, "save", payload)


def strange_effect(s: Any, p: Any) -> dict[str, Any]:
    """Not a copy of the save's counts: the larger of two counts."""
    return {"expected": max(p["generation"], s.expected or 0), "sent": p["confirmed"] + 1}


@any_save
def test_a_compiled_effect_gives_the_checked_effects_counts(
    counts: Counts, kind: str, generation: int, confirmed: int, counter: bool
) -> None:
    payload = {"kind": kind, "generation": generation, "confirmed": confirmed, "counter": counter}
    effects = [e for e in EFFECTS.values() if e is not None]
    for effect in [*effects, strange_effect]:
        expected = counts.changed(effect(counts, payload) or {})  # type: ignore[arg-type]
        after = compiled(effect)(counts, kind, generation, confirmed, counter)
        assert after == expected and type(after) is Counts, effect.__name__


def test_only_an_effect_that_copies_the_saves_counts_is_compiled() -> None:
    copies = [e for e in EFFECTS.values() if e is not None]
    assert all(compiled(e).__name__ == "<lambda>" for e in copies)
    assert not hasattr(compiled(strange_effect), "__name__")  # called as it is


def test_a_count_that_is_not_an_int_is_refused_as_the_checked_machine_refuses_it() -> None:
    payload = {"kind": "chunk", "generation": 0, "confirmed": 1.5, "counter": True}
    with pytest.raises(FireError):
        step(UNBOUNDED, as_snapshot(Counts()), "save", payload)
    with pytest.raises(FireError, match=r"confirmed=1\.5"):
        WATERMARKS.fire(Counts(), "save", **payload)


@pytest.mark.parametrize(
    "wrong",
    [{"kind": "bogus"}, {"kind": ["chunk"]}, {"counter": 2}, {"generation": None}],
    ids=["kind", "unhashable kind", "counter", "generation"],
)
def test_a_save_outside_the_domains_is_refused_as_the_checked_machine_refuses_it(
    wrong: dict[str, Any],
) -> None:
    payload = {"kind": "chunk", "generation": 0, "confirmed": 1, "counter": True, **wrong}
    with pytest.raises(FireError):
        step(UNBOUNDED, as_snapshot(Counts()), "save", payload)
    [(name, value)] = wrong.items()
    with pytest.raises(FireError, match=re.escape(f"{name}={value!r}")):
        WATERMARKS.fire(Counts(), "save", **payload)


def test_an_int_subclass_is_a_count_as_the_checked_machine_takes_it() -> None:
    payload = {"kind": "chunk", "generation": True, "confirmed": 1, "counter": True}
    assert_runs_as_checked(Counts(), "save", payload)


def test_saves_are_admitted_and_skipped_at_counts_beyond_the_checked_bounds() -> None:
    marks = Watermarks()
    first = marks.save("e", "chunk", 1000, 5000, True)[1]
    assert first == "admitted"
    assert dict(marks.generations) == {"e": 1000}
    assert dict(marks.tokens) == {"e": 5000}
    assert marks.save("e", "chunk", 999, 6000, True)[1] == "late"
    assert marks.save("e", "chunk", 1000, 4999, True)[1] == "replay"
    end = marks.save("e", "segment_end", 1000, 5001, True)[1]
    assert end == "admitted"
    assert dict(marks.generations) == {"e": 1001} and dict(marks.tokens) == {}


def test_a_segment_end_without_the_counter_does_not_advance() -> None:
    # #6816: a speculative +1 would make every later save of the request late.
    marks = Watermarks()
    marks.save("e", "segment_end", 0, 3, False)
    assert marks.generations["e"] == 0
    assert marks.save("e", "chunk", 0, 1, False)[1] == "admitted"


def test_the_schedulers_pop_of_the_token_watermark_is_an_event() -> None:
    marks = Watermarks()
    marks.save("e", "chunk", 0, 7, True)[1]
    assert marks.tokens.pop("e", None) == 7  # type: ignore[attr-defined]
    assert "e" not in marks.tokens and marks.generations["e"] == 0
    assert marks.save("e", "chunk", 0, 1, True)[1] == "admitted"
    assert marks.tokens.pop("absent", "default") == "default"  # type: ignore[attr-defined]


def test_clear_pops_both_and_a_reused_id_starts_afresh() -> None:
    marks = Watermarks()
    marks.save("e", "segment_end", 4, 2, True)[1]
    marks.clear("e")
    assert dict(marks.generations) == {} and dict(marks.tokens) == {}
    assert marks.save("e", "chunk", 0, 0, True)[1] == "admitted"
    marks.clear("never-saved")  # idempotent
    # `Watermarks.clear` drops the entry: the checked ``clear`` leaves no count, from any counts.
    assert {WATERMARKS.fire(counts, "clear")[1] for counts in COUNTS} == {Counts()}


def test_a_table_whose_clear_keeps_a_count_keeps_the_entry(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from statecore.models import segment_watermark_runtime as runtime

    [name] = [t.name for t in runtime.UNBOUNDED.transitions if t.event == "clear"]
    monkeypatch.setitem(runtime.EFFECTS, name, lambda s, p: {"expected": None})  # keeps `sent`
    marks = {"e": Counts(3, 5), "f": Counts(3, None)}
    table = runtime.WatermarkTable()
    table.clear(marks, "e")
    table.clear(marks, "f")
    assert marks == {"e": Counts(None, 5)}
    WATERMARKS.clear(marks, "e")  # the checked machine's: both go, and the entry
    assert marks == {}


def test_the_checked_clear_is_a_pop_that_fires_nothing(monkeypatch: pytest.MonkeyPatch) -> None:
    from statecore.models import segment_watermark_runtime as runtime

    table = runtime.WatermarkTable()  # built with the checked `clear`: it empties every probe

    def fired(*args: Any, **kwargs: Any) -> Any:
        raise AssertionError("the checked clear fired the table")

    monkeypatch.setattr(runtime.WatermarkTable, "fire", fired)
    marks = {"e": Counts(1_000_003, 7)}
    table.clear(marks, "e")
    assert marks == {}


def test_a_clear_that_keeps_large_counts_only_is_not_taken_for_a_pop(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from statecore.models import segment_watermark_runtime as runtime

    [name] = [t.name for t in runtime.UNBOUNDED.transitions if t.event == "clear"]

    def keeps_large(s: Any, p: Any) -> dict[str, Any]:
        return {"expected": None, "sent": s.sent if (s.sent or 0) > 1000 else None}

    monkeypatch.setitem(runtime.EFFECTS, name, keeps_large)
    marks = {"e": Counts(3, 2_000_003)}
    runtime.WatermarkTable().clear(marks, "e")
    assert marks == {"e": Counts(None, 2_000_003)}


def test_the_views_are_read_only() -> None:
    marks = Watermarks()
    with pytest.raises(TypeError):
        marks.generations["e"] = 1  # type: ignore[index]


# -- GenerationPayloads --------------------------------------------------------------


def test_a_write_with_no_live_generation_is_dropped() -> None:
    payloads = GenerationPayloads()
    payloads["e"] = {"codec": 1}
    assert "e" not in payloads
    detached = payloads.setdefault("e", {})
    detached["codec"] = 1
    assert "e" not in payloads and isinstance(payloads, dict)


def test_an_entry_lives_as_long_as_its_generation() -> None:
    payloads = GenerationPayloads()
    owner = SenderGeneration("r1")
    payloads.open("e", owner)
    assert payloads.generations == {"e": owner}
    payloads.setdefault("e", {})["codec"] = "r1"
    payloads.complete_segment("e", owner)
    payloads.on_failure("e", owner)
    assert payloads["e"] == {"codec": "r1"}  # kept across a segment end and a failure
    payloads.release("e", owner)
    assert "e" not in payloads and payloads.generations == {}
    assert owner.request_state.state == "released"
    payloads["e"] = {"codec": "stale"}  # a stale processor after cleanup
    assert "e" not in payloads
    payloads.open("e", SenderGeneration("r2"))  # the id reused: nothing inherited
    assert payloads.get("e") is None
    payloads.update({"e": {"codec": "r2"}})
    assert payloads == {"e": {"codec": "r2"}}


def test_opening_a_generation_drops_an_entry_left_over() -> None:
    payloads = GenerationPayloads()
    first = SenderGeneration("r1")
    payloads.open("e", first)
    payloads["e"] = 1
    payloads.open("e", SenderGeneration("r2"))
    assert "e" not in payloads and first.request_state.state == "released"


def test_releasing_a_generation_that_is_no_longer_the_ids_leaves_the_live_one() -> None:
    payloads = GenerationPayloads()
    old, live = SenderGeneration("r1"), SenderGeneration("r2")
    payloads.open("e", live)
    payloads["e"] = {"codec": "r2"}
    payloads.release("e", old)  # a late reclaim of a generation the id no longer has
    assert payloads.generations == {"e": live} and payloads.status("e") == "open"
    assert payloads == {"e": {"codec": "r2"}} and old.request_state.state == "released"
    payloads.release("e", None)  # "the id had none": not so, so the live one stays
    assert payloads == {"e": {"codec": "r2"}} and payloads.status("e") == "open"
    payloads.release("never-opened", None)  # idempotent: nothing lives there


@pytest.mark.parametrize("write", ["__setitem__", "setdefault"])
def test_a_write_waits_for_the_adapters_lock_so_a_release_under_it_drops_the_write(
    write: str,
) -> None:
    import threading

    lock = threading.Lock()
    payloads = GenerationPayloads(lock)
    owner = SenderGeneration("r1")
    with lock:  # the adapter, in save_async
        payloads.open("e", owner)
    with lock:  # the adapter, in _clear_sender_state_locked, while a processor writes
        writer = threading.Thread(target=getattr(payloads, write), args=("e", {"codec": "late"}))
        writer.start()
        writer.join(0.2)
        assert writer.is_alive()  # the write waits for the lock
        payloads.release("e", owner)
    writer.join()
    assert "e" not in payloads and payloads.status("e") is None
    assert not lock.locked()  # the write let go of it


def test_setdefault_gives_the_entry_there_and_stores_one_only_when_admitted() -> None:
    import threading

    lock = threading.Lock()
    payloads = GenerationPayloads(lock)
    payloads.open("e", SenderGeneration("r1"))
    first = payloads.setdefault("e", {"codec": "r1"})
    assert payloads.setdefault("e", {"codec": "other"}) is first  # a read, as dict's
    assert payloads == {"e": {"codec": "r1"}} and not lock.locked()


def test_a_generation_is_a_row_of_the_request_state_table() -> None:
    from statecore.models.implementations.checked_sender import REQUEST_STATES

    payloads = GenerationPayloads()
    owner = SenderGeneration("r1")
    payloads.open("e", owner)
    assert payloads.status("e") == "open"
    payloads["e"] = 1
    payloads.complete_segment("e", SenderGeneration("r0"))  # another generation: no effect
    assert payloads.status("e") == "open"
    payloads.on_failure("e", owner)
    assert payloads.status("e") == "failed" and payloads["e"] == 1
    assert {row.snapshot for row in REQUEST_STATES.rows.values()} <= set(
        REQUEST_STATES.machine.reachable_snapshots
    )
    # The hot path looks each event up on the row (`row.edges[...]`): every row has them all.
    assert all(set(row.edges) == set(REQUEST_STATES.events) for row in REQUEST_STATES.rows.values())


# -- the call-site map (docs/checked-adapter.md) ------------------------------------------


def prepared_names(module: object, event: str) -> set[str]:
    """The module's names of `event` prepared (a `Prepared`, or a dict of them), as fired:
    an argument, a dict's item, or a table row's edge (`statecore.table`)."""
    names = set()
    for name, value in vars(module).items():
        values = value.values() if isinstance(value, dict) else (value,)
        if any(isinstance(v, Prepared) and v.event == event for v in values):
            names |= {f"{name}["} if isinstance(value, dict) else {f"({name})", f"edges[{name}]"}
    return names


def test_the_call_site_map_names_every_event_and_matches_the_code() -> None:
    import inspect

    from statecore.models.implementations import checked_chunk_transfer, checked_sender
    from statecore.models.implementations.checked_map import FIRED_BY, MACHINES

    events = {(name, e.name) for name, m in MACHINES.items() for e in m.events}
    assert set(FIRED_BY) == events
    mixin = checked_chunk_transfer.CheckedSenderMixin
    for (machine, event), site in FIRED_BY.items():
        owner_name, method = site.fires.split(".")
        owner = getattr(checked_chunk_transfer, owner_name, None) or getattr(
            checked_sender, owner_name
        )
        source = inspect.getsource(getattr(owner, method))
        # The event's name, a prepared event's, or the watermark table's own ``save``.
        spellings = {f'"{event}"', f"WATERMARKS.{event}(", *prepared_names(checked_sender, event)}
        table_event = site.fires == f"WatermarkTable.{event}"
        assert table_event or any(s in source for s in spellings), (
            f"{site.fires} does not fire {machine}.{event}"
        )
        for caller in site.callers:
            caller_source = inspect.getsource(getattr(mixin, caller))
            assert f".{method}(" in caller_source, f"{caller} does not call {site.fires}"
