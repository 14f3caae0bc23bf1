"""The checked sender state (`statecore.models.implementations.checked_sender`), without vLLM.

The flags of a `SenderGeneration` are the state of its machine, the
watermarks admit and skip saves as the ``segment_watermark`` machine does at
any count, and ``request_payload`` entries live exactly as long as their
request-state generation. The adapter built on them is fuzzed against the
reference model in ``tests/test_vllm_checked.py`` (the ``vllm`` tox env).
"""

from __future__ import annotations

import pytest
from statecore.models.implementations.checked_sender import (
    GenerationPayloads,
    SenderGeneration,
    Watermarks,
)
from statecore.models.segment_watermark import runtime_watermark_machine, watermark_machine

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


# -- Watermarks -----------------------------------------------------------------------


def test_the_runtime_watermark_has_the_checked_transitions() -> None:
    checked = {t.name for t in watermark_machine().transitions}
    runtime = {t.name for t in runtime_watermark_machine().transitions}
    assert runtime - checked == {"open--rebuild_prompt-->(same)"}
    assert checked - runtime == set()


def test_saves_are_admitted_and_skipped_at_counts_beyond_the_checked_bounds() -> None:
    marks = Watermarks()
    first = marks.save("e", kind="chunk", generation=1000, confirmed=5000, counter=True)
    assert first == "admitted"
    assert dict(marks.generations) == {"e": 1000}
    assert dict(marks.tokens) == {"e": 5000}
    assert marks.save("e", kind="chunk", generation=999, confirmed=6000, counter=True) == "late"
    assert marks.save("e", kind="chunk", generation=1000, confirmed=4999, counter=True) == "replay"
    end = marks.save("e", kind="segment_end", generation=1000, confirmed=5001, counter=True)
    assert end == "admitted"
    assert dict(marks.generations) == {"e": 1001} and dict(marks.tokens) == {}


def test_a_segment_end_without_the_counter_does_not_advance() -> None:
    # #6816: a speculative +1 would make every later save of the request late.
    marks = Watermarks()
    marks.save("e", kind="segment_end", generation=0, confirmed=3, counter=False)
    assert marks.generations["e"] == 0
    assert marks.save("e", kind="chunk", generation=0, confirmed=1, counter=False) == "admitted"


def test_the_schedulers_pop_of_the_token_watermark_is_an_event() -> None:
    marks = Watermarks()
    marks.save("e", kind="chunk", generation=0, confirmed=7, counter=True)
    assert marks.tokens.pop("e", None) == 7  # type: ignore[attr-defined]
    assert "e" not in marks.tokens and marks.generations["e"] == 0
    assert marks.save("e", kind="chunk", generation=0, confirmed=1, counter=True) == "admitted"
    assert marks.tokens.pop("absent", "default") == "default"  # type: ignore[attr-defined]


def test_clear_pops_both_and_a_reused_id_starts_afresh() -> None:
    marks = Watermarks()
    marks.save("e", kind="segment_end", generation=4, confirmed=2, counter=True)
    marks.clear("e")
    assert dict(marks.generations) == {} and dict(marks.tokens) == {}
    assert marks.save("e", kind="chunk", generation=0, confirmed=0, counter=True) == "admitted"
    marks.clear("never-saved")  # idempotent


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
    owner = object()
    payloads.open("e", owner)
    payloads.setdefault("e", {})["codec"] = "r1"
    payloads.complete_segment("e", owner)
    payloads.on_failure("e", owner)
    assert payloads["e"] == {"codec": "r1"}  # kept across a segment end and a failure
    payloads.release("e")
    assert "e" not in payloads
    payloads["e"] = {"codec": "stale"}  # a stale processor after cleanup
    assert "e" not in payloads
    payloads.open("e", object())  # the id reused: nothing inherited
    assert payloads.get("e") is None
    payloads.update({"e": {"codec": "r2"}})
    assert payloads == {"e": {"codec": "r2"}}


def test_opening_a_generation_drops_an_entry_left_over() -> None:
    payloads = GenerationPayloads()
    payloads.open("e", object())
    payloads["e"] = 1
    payloads.open("e", object())
    assert "e" not in payloads


# -- the call-site map (docs/checked-adapter.md) ------------------------------------------


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
        assert f'"{event}"' in source, f"{site.fires} does not fire {machine}.{event}"
        for caller in site.callers:
            caller_source = inspect.getsource(getattr(mixin, caller))
            assert f".{method}(" in caller_source, f"{caller} does not call {site.fires}"
