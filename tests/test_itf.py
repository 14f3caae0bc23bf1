"""Counterexample persistence: ITF files, replay and generated regression tests.

The systems here are small but have everything a real trace carries: keyed
components with generations, a FIFO queue of handles in a global, outputs
with handle fields, floats (NaN included) in a global, and one property of
each kind - an ``always`` with a violation planted at depth 4, an
``eventually`` and a hot monitor violated at quiescence, a ``sometimes``.

The systems are built by top-level functions so that the generated
regression tests, run by pytest in a subprocess, can load them as
``test_itf:queue_system``.
"""

from __future__ import annotations

import ast
import json
import math
import os
import re
import shutil
import subprocess
import sys
from collections.abc import Hashable
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from statecore import Event, Machine, Output, State, Transition, Var, out
from statecore.check.explore import Report, explore
from statecore.properties import always, eventually, monitor, sometimes
from statecore.registry import bundled
from statecore.system import (
    Action,
    ActionLabel,
    Component,
    Emitted,
    Global,
    Handle,
    Keys,
    ModelValue,
    Slot,
    System,
    Tx,
)
from statecore.traces.itf import (
    TraceFileError,
    Unserializable,
    decode_value,
    encode_value,
    read_itf,
    same_state,
    trace_to_itf,
    validate_itf_shape,
    variable_names,
    write_itf,
)
from statecore.traces.regression import (
    TargetError,
    load_system,
    python_literal,
    regression_test_source,
)
from statecore.traces.replay import replay, replay_actions
from statecore.traces.trace import Trace

EXT = Keys("ext", 2)
TESTS = Path(__file__).resolve().parent


def request_machine() -> Machine:
    """A request: queued (hot: it must be sent) until the save thread sends it."""
    return Machine(
        "req",
        states=[State("open", initial=True), State("queued", hot=True), State("done", final=True)],
        variables=[Var("tries", range(2), 0)],
        events=[Event("queue"), Event("send")],
        transitions=[
            Transition(
                "open", "queue", "queued", effect=lambda s, p: {"tries": 1}, emit=[out("queued")]
            ),
            Transition("queued", "send", "done", emit=[out("put", finished=True)]),
        ],
    )


def delivery_machine() -> Machine:
    """The monitor: a queued request must be put, once."""
    return Machine(
        "delivery",
        states=[
            State("idle", initial=True),
            State("waiting", hot=True),
            State("delivered", final=True),
        ],
        events=[Event("queued"), Event("put")],
        transitions=[
            Transition("idle", "queued", "waiting"),
            Transition("waiting", "put", "delivered"),
        ],
    )


def _route(emitted: Emitted) -> tuple[Hashable, str, dict[str, Any]] | None:
    if emitted.source is None:
        return None
    return emitted.source, emitted.output.name, {}


def queue_system(*, fixed: bool = False) -> System:
    """Requests queued in a FIFO of handles and drained by a save thread.

    Bugs (gone with ``fixed=True``): two tasks can be queued at once, and
    ``cleanup`` retires a queued request, so the drain drops its task.
    """

    def new_request(tx: Tx, ext: Hashable) -> None:
        tx.require(not tx.live(("req", ext)))
        tx.spawn("req", ext)

    def save(tx: Tx, ext: Hashable) -> None:
        handle = tx.handle("req", ext)
        tx.require(handle is not None)
        assert handle is not None
        if fixed:
            tx.require(not tx.get("queue"))
        tx.require(tx.fire(handle, "queue").accepted)
        tx.set("queue", (*tx.get("queue"), handle))

    def cleanup(tx: Tx, ext: Hashable) -> None:
        if fixed:
            snap = tx.snapshot(("req", ext))
            tx.require(snap is None or snap.state != "queued")
        tx.require(tx.retire(("req", ext)))

    def drain(tx: Tx) -> None:
        queue = tx.get("queue")
        tx.require(queue)
        head = queue[0]
        tx.set("queue", queue[1:])
        if tx.fire(head, "send").accepted:
            tx.set("sent", tx.get("sent") | {head})
            tx.set("score", 0.5)
        else:
            tx.set("dropped", tx.get("dropped") | {head})
            tx.set("score", -math.inf)
        tx.emit(out("drained", handle=head))

    ids = {"ext": EXT}
    return System(
        "queue_fixed" if fixed else "queue",
        components=[Component("req", request_machine(), EXT, max_generations=2)],
        globals=[
            Global("queue", ()),
            Global("sent", frozenset()),
            Global("dropped", frozenset()),
            Global("score", math.nan),
        ],
        actions=[
            Action("new_request", "scheduler", new_request, ids),
            Action("save", "scheduler", save, ids),
            Action("cleanup", "scheduler", cleanup, ids),
            Action("drain", "save_thread", drain, internal=True),
        ],
        properties=[
            always(
                "queue_bounded", "at most one task is queued", lambda v: len(v.get("queue")) < 2
            ),
            eventually(
                "nothing_dropped", "at rest, no task was dropped", lambda v: not v.get("dropped")
            ),
            monitor("delivery", "every queued request is put", delivery_machine(), _route),
            sometimes(
                "reused",
                "an id gets a second generation",
                lambda v: any(slot.generation == 2 for _, slot in v.instances("req")),
            ),
        ],
    )


def fixed_queue_system() -> System:
    """The system with both bugs fixed (a target for 'must hold' tests)."""
    return queue_system(fixed=True)


def resolve_system(name: str) -> System:
    """A resolver: systems by a short name, as a bundled-model registry would give them."""
    return {"queue": queue_system, "fixed": fixed_queue_system}[name]()


@pytest.fixture(scope="module")
def system() -> System:
    return queue_system()


@pytest.fixture(scope="module")
def report(system: System) -> Report:
    """Without symmetry reduction, so traces and details do not depend on hash seeds."""
    return explore(system, symmetry=False, stop_on_violation=False)


@pytest.fixture(scope="module")
def symmetric_report(system: System) -> Report:
    return explore(system, stop_on_violation=False)


def _trace(report: Report, property_id: str) -> Trace:
    trace = report.result(property_id).trace
    assert trace is not None
    return trace


# -- the explorer's findings, as the tests below expect them ---------------------------


def test_planted_violations(report: Report) -> None:
    verdicts = {
        r.property.id: (r.verdict, len(r.trace) if r.trace else None) for r in report.results
    }
    assert verdicts == {
        "queue_bounded": ("violated", 4),
        "nothing_dropped": ("violated", 4),
        "delivery": ("violated", 4),
        "reused": ("holds", 3),
    }


# -- writing and reading ---------------------------------------------------------------


def test_every_trace_round_trips(
    system: System, report: Report, symmetric_report: Report, tmp_path: Path
) -> None:
    for result in (*report.results, *symmetric_report.results):
        assert result.trace is not None
        path = write_itf(result.trace, system, tmp_path / f"{result.property.id}.itf.json")
        obj = json.loads(path.read_text(encoding="utf-8"))
        validate_itf_shape(obj)
        assert obj["#meta"]["format"] == "ITF"
        assert obj["#meta"]["source"] == "queue"
        assert obj["#meta"]["property"] == result.property.id
        assert obj["vars"] == ["req[ext0]", "req[ext1]", "queue", "sent", "dropped", "score"]
        assert all(set(s) == {"#meta", *obj["vars"]} for s in obj["states"])
        back = read_itf(path, system)
        assert back == result.trace  # exact: actions, actors, states and outputs
        unchecked = read_itf(path, system, verify=False)
        # Decoded, not replayed: equal up to NaN identity, which same_state sees through.
        assert all(same_state(a.state, b.state) for a, b in zip(unchecked.steps, back.steps))
        assert unchecked.actions == back.actions
        # Writing is deterministic: the same trace gives the same bytes.
        again = write_itf(back, system, tmp_path / "again.itf.json")
        assert again.read_bytes() == path.read_bytes()


def test_file_layout_is_readable(system: System, report: Report, tmp_path: Path) -> None:
    path = write_itf(_trace(report, "nothing_dropped"), system, tmp_path / "t.itf.json")
    text = path.read_text(encoding="utf-8")
    assert '"vars": ["req[ext0]", "req[ext1]", "queue", "sent", "dropped", "score"],' in text
    last = json.loads(text)["states"][-1]
    assert last["#meta"]["action"] == "drain"
    assert last["#meta"]["actor"] == "save_thread"
    assert last["#meta"]["outputs"] == ["drained(handle=req[ext0]#1)"]
    assert last["score"] == {"tag": "Float", "value": "-inf"}
    assert json.loads(text)["states"][0]["score"] == {"tag": "Float", "value": "nan"}
    assert last["dropped"]["#set"][0]["tag"] == "Handle"


_IDENT = st.sampled_from(["ext", "req", "a_b", "x1"])
_LEAVES = (
    st.none()
    | st.booleans()
    | st.integers()
    | st.integers(min_value=-(2**80), max_value=2**80)
    | st.floats(allow_nan=True, allow_infinity=True)
    | st.text(max_size=8)
    | st.builds(ModelValue, _IDENT, st.integers(0, 5))
)


def _compound(children: st.SearchStrategy[Hashable]) -> st.SearchStrategy[Hashable]:
    return (
        st.lists(children, max_size=4).map(tuple)
        | st.frozensets(children, max_size=4)
        | st.builds(Handle, _IDENT, children, st.integers(0, 3))
        | st.builds(Output, _IDENT, st.lists(st.tuples(_IDENT, children), max_size=3).map(tuple))
    )


VALUES = st.recursive(_LEAVES, _compound, max_leaves=12)


@settings(max_examples=200, deadline=None)
@given(VALUES)
def test_values_round_trip_exactly(value: Hashable) -> None:
    encoded = encode_value(value)
    assert "#unserializable" not in json.dumps(encoded)
    back = decode_value(json.loads(json.dumps(encoded)), {})
    # Equal encodings mean equal values with equal types (NaN and -0.0 included).
    assert encode_value(back) == encoded
    assert type(back) is type(value)
    if "nan" not in repr(value):  # a NaN equals only itself, not its copy
        assert back == value


def test_special_values(system: System) -> None:
    machine = system.component("req").machine
    snap = machine.snapshot("queued", tries=1)
    cases: list[Hashable] = [
        None,
        True,
        1,
        1.0,
        -0.0,
        (),
        (1,),
        frozenset(),
        Slot(2, snap),
        Slot(0, None),
        Handle("req", ModelValue("ext", 1), 2),
        Output("put", (("finished", True), ("at", None))),
    ]
    machines = {machine.name: machine}
    for value in cases:
        back = decode_value(encode_value(value), machines)
        assert back == value and type(back) is type(value)
    assert type(decode_value(encode_value(snap), machines)) is machine.snapshot_class
    assert encode_value(1) != encode_value(True) != encode_value(1.0)
    assert encode_value(0.0) != encode_value(-0.0)
    assert decode_value({"#tup": [{"#bigint": "1"}, "a"]}, {}) == (1, "a")
    assert encode_value(object).keys() == {"#unserializable"}  # type: ignore[union-attr]
    assert decode_value({"#unserializable": "x"}, {}) == Unserializable("x")
    with pytest.raises(TraceFileError, match="#map"):
        decode_value({"#map": []}, {})
    with pytest.raises(TraceFileError, match="no machine 'nope'"):
        decode_value(
            {"tag": "Snapshot", "value": {"machine": "nope", "state": "a", "vars": {}}}, {}
        )


def test_variable_names(system: System) -> None:
    assert variable_names(system)[:2] == ("req[ext0]", "req[ext1]")


# -- replay --------------------------------------------------------------------------


def test_replay_gives_the_explorers_verdicts(
    system: System, report: Report, tmp_path: Path
) -> None:
    for result in report.results:
        trace = _trace(report, result.property.id)
        path = write_itf(trace, system, tmp_path / f"{result.property.id}.itf.json")
        for source in (trace, path):
            replayed = replay(system, source)
            assert replayed.property is result.property
            assert (replayed.verdict, replayed.detail) == (result.verdict, result.detail)
            assert replayed.step == len(trace)
            assert replayed.reproduced
            assert replayed.result() == result
    detail = report.result("delivery").detail
    assert detail == "monitor for req[ext0]#1 left in hot state 'waiting' at a quiescent state"


def test_replay_agrees_with_symmetric_exploration(system: System, symmetric_report: Report) -> None:
    for result in symmetric_report.results:
        replayed = replay(system, _trace(symmetric_report, result.property.id))
        assert replayed.verdict == result.verdict and replayed.reproduced
        # The explorer words a monitor's detail on its canonical state, so the
        # id it names may be a renaming of the trace's; replay names the trace's.
        assert re.sub(r"ext\d", "ext_", replayed.detail) == re.sub(r"ext\d", "ext_", result.detail)


def test_replay_is_deterministic(system: System, report: Report) -> None:
    trace = _trace(report, "delivery")
    assert replay(system, trace) == replay(system, trace)


def test_replay_judges_another_property(system: System, report: Report) -> None:
    # The always trace queues two tasks and never drains: nothing is dropped.
    replayed = replay(system, _trace(report, "queue_bounded"), property_id="nothing_dropped")
    assert replayed.verdict == "holds"
    assert not replayed.reproduced


def test_replay_actions_stops_where_the_model_no_longer_allows(report: Report) -> None:
    actions = _trace(report, "nothing_dropped").actions
    fixed = replay_actions(fixed_queue_system(), actions, "nothing_dropped")
    assert fixed.verdict == "holds"
    assert fixed.blocked == 3 and "cleanup(ext=ext0)" in fixed.blocked_reason
    assert len(fixed.trace) == 2
    buggy = replay_actions(queue_system(), actions, "nothing_dropped")
    assert buggy.verdict == "violated" and buggy.blocked is None
    assert "stopped at step 3" in fixed.explain(fixed_queue_system())


def test_monitor_refusal_is_judged(system: System) -> None:
    # A put the monitor never saw queued is a refusal, judged on the step's outputs.
    strict = monitor("strict", "puts only after queued", delivery_machine(), _route)
    labels = [
        ActionLabel("new_request", (("ext", ModelValue("ext", 0)),)),
        ActionLabel("save", (("ext", ModelValue("ext", 0)),)),
        ActionLabel("drain"),
    ]
    ok = replay_actions(system, labels, "strict", properties=[strict])
    assert ok.verdict == "holds"
    skip_queued = monitor(
        "no_queued",
        "puts only after queued",
        delivery_machine(),
        lambda e: None if e.output.name == "queued" else _route(e),
    )
    refused = replay_actions(system, labels, "no_queued", properties=[skip_queued])
    assert refused.verdict == "violated" and refused.step == 3
    assert "not allowed in monitor state 'idle'" in refused.detail


# -- malformed files ------------------------------------------------------------------


def _written(system: System, report: Report, tmp_path: Path) -> tuple[Path, dict[str, Any]]:
    path = write_itf(_trace(report, "queue_bounded"), system, tmp_path / "bad.itf.json")
    return path, json.loads(path.read_text(encoding="utf-8"))


def _expect_error(
    path: Path, obj: dict[str, Any], system: System, step: int | None, *bits: str
) -> None:
    path.write_text(json.dumps(obj), encoding="utf-8")
    with pytest.raises(TraceFileError) as caught:
        read_itf(path, system)
    message = str(caught.value)
    assert str(path) in message
    assert caught.value.step == step
    if step is not None:
        assert f"step {step}:" in message
    for bit in bits:
        assert bit in message, message


def test_bad_json(system: System, report: Report, tmp_path: Path) -> None:
    path, _ = _written(system, report, tmp_path)
    path.write_text(path.read_text(encoding="utf-8")[:-40], encoding="utf-8")
    with pytest.raises(TraceFileError, match=r"bad JSON at line \d+, column \d+") as caught:
        read_itf(path, system)
    assert str(path) in str(caught.value)


def test_wrong_model(system: System, report: Report, tmp_path: Path) -> None:
    path, obj = _written(system, report, tmp_path)
    obj["#meta"]["source"] = "other"
    _expect_error(path, obj, system, None, "wrong model", "'other'", "'queue'")
    _, fresh = _written(system, report, tmp_path)
    fresh["#meta"]["source"] = "queue"
    path.write_text(json.dumps(fresh), encoding="utf-8")
    with pytest.raises(TraceFileError, match="wrong model"):
        read_itf(path, fixed_queue_system())


def test_unknown_action(system: System, report: Report, tmp_path: Path) -> None:
    path, obj = _written(system, report, tmp_path)
    obj["states"][2]["#meta"]["action"] = "teleport"
    _expect_error(path, obj, system, 2, "unknown action 'teleport'", "'new_request'")


def test_unknown_and_missing_variables(system: System, report: Report, tmp_path: Path) -> None:
    path, obj = _written(system, report, tmp_path)
    obj["vars"].append("bogus")
    for state in obj["states"]:
        state["bogus"] = True
    _expect_error(path, obj, system, 0, "unknown variable 'bogus'")
    path, obj = _written(system, report, tmp_path)
    obj["states"][3]["bogus"] = True
    _expect_error(path, obj, system, 3, "unknown variable 'bogus'")
    path, obj = _written(system, report, tmp_path)
    del obj["states"][1]["queue"]
    _expect_error(path, obj, system, 1, "missing variable 'queue'")
    path, obj = _written(system, report, tmp_path)
    obj["vars"].remove("score")
    for state in obj["states"]:
        del state["score"]
    _expect_error(path, obj, system, 0, "missing variable 'score'")


def test_tampered_state(system: System, report: Report, tmp_path: Path) -> None:
    path, obj = _written(system, report, tmp_path)
    obj["states"][3]["req[ext1]"]["value"]["generation"] = {"#bigint": "2"}
    _expect_error(path, obj, system, 3, "req[ext1] is recorded as Slot(generation=2")
    path, obj = _written(system, report, tmp_path)
    obj["states"][4]["queue"] = obj["states"][4]["queue"][::-1]
    _expect_error(path, obj, system, 4, "queue is recorded as")
    path, obj = _written(system, report, tmp_path)
    obj["states"][0]["score"] = {"tag": "Float", "value": "1.0"}
    _expect_error(path, obj, system, 0, "not an initial state", "score")
    path, obj = _written(system, report, tmp_path)
    obj["states"][2]["sent"] = {"#set": [{"#bigint": 1}]}
    _expect_error(path, obj, system, 2, "#bigint needs a string of digits")
    path, obj = _written(system, report, tmp_path)
    obj["states"][2]["req[ext0]"]["value"]["snapshot"]["value"]["state"] = "lost"
    _expect_error(path, obj, system, 2, "machine 'req' has no state 'lost'")


def test_step_not_enabled(system: System, report: Report, tmp_path: Path) -> None:
    path, obj = _written(system, report, tmp_path)
    obj["states"][1]["#meta"]["action"] = "save"  # save(ext0) before ext0 exists
    _expect_error(
        path, obj, system, 1, "does not allow save(ext=ext0) after step 0", "enabled there:"
    )
    path, obj = _written(system, report, tmp_path)
    obj["states"][3]["#meta"]["args"]["ext"] = encode_value(ModelValue("ext", 1))
    _expect_error(path, obj, system, 3, "save(ext=ext1) leads elsewhere", "req[ext0] is recorded")
    path, obj = _written(system, report, tmp_path)
    obj["states"][2]["#meta"]["args"] = {}
    _expect_error(path, obj, system, 2, "takes the arguments ['ext']")
    path, obj = _written(system, report, tmp_path)
    obj["states"][2]["#meta"]["actor"] = "consumer"
    _expect_error(path, obj, system, 2, "taken by 'scheduler', not 'consumer'")


def test_shape_errors() -> None:
    good: dict[str, Any] = {"#meta": {}, "vars": ["x"], "states": [{"x": True}]}
    deep: Any = True
    for _ in range(600):
        deep = [deep]
    validate_itf_shape(good)
    for bad, problem in [
        ([], "JSON object"),
        ({"vars": ["x"]}, "'states'"),
        ({"vars": ["x", "x"], "states": []}, "listed twice"),
        ({"vars": ["x"], "states": [{"x": 1.5}]}, "JSON number 1.5"),
        ({"vars": ["x"], "states": [{"x": None}]}, "null"),
        ({"vars": ["x"], "states": [{"x": {"#set": 1}}]}, "#set needs a JSON list"),
        ({"vars": ["x"], "states": [{"#meta": {"index": 3}, "x": True}]}, "'#meta.index' is 3"),
        ({"vars": [], "states": [], "extra": 1}, "unknown top-level field 'extra'"),
        ({"#meta": {"format": "JSON"}, "vars": [], "states": []}, "not 'ITF'"),
        ({"#meta": {"target": 5}, "vars": [], "states": []}, r"'#meta.target' must be a string"),
        ({"#meta": {"verdict": "maybe"}, "vars": [], "states": []}, "not 'violated' or 'witness'"),
        ({"#meta": {"x": deep}, "vars": [], "states": []}, "'#meta' nests more than 100"),
        ({"vars": ["x"], "states": [{"x": deep}]}, r"x\[0\]\[0\].*nest more than 100"),
        ({"vars": ["x"], "states": [{"x": {"#bigint": "1" * 4301}}]}, "4,301 digits"),
    ]:
        with pytest.raises(TraceFileError, match=problem):
            validate_itf_shape(bad)


def test_values_too_large_or_deep_to_decode(system: System) -> None:
    """Refused in one message, where decoding them would exhaust the stack or a limit."""
    machines = {c.machine.name: c.machine for c in system.components}
    deep: Any = True
    for _ in range(5000):
        deep = {"#set": [deep]}
    for value, problem in [
        (deep, "nest more than 100 levels deep"),
        ({"#bigint": "-" + "9" * 5000}, "an integer of 5,000 digits"),
        ({"#tup": [{"tag": "Float", "value": ["nan"] * 3}]}, "Float must be a string"),
    ]:
        with pytest.raises(TraceFileError, match=problem):
            decode_value(value, machines)


def test_write_refuses_another_systems_trace(system: System, report: Report) -> None:
    with pytest.raises(TraceFileError, match="not 'queue_fixed'"):
        trace_to_itf(_trace(report, "reused"), fixed_queue_system())


# -- regression tests -------------------------------------------------------------------


def test_python_literals_rebuild_values() -> None:
    namespace = {"ActionLabel": ActionLabel, "ModelValue": ModelValue, "Handle": Handle}
    namespace["Output"] = Output
    values: list[Hashable] = [
        ActionLabel("save", (("ext", ModelValue("ext", 0)),)),
        ActionLabel("drain"),
        (Handle("req", ModelValue("ext", 1), 2), frozenset({1, 2}), frozenset()),
        Output("put", (("finished", True),)),
        ('it\'s "quoted"\n', None, -3, 0.25),
    ]
    for value in values:
        assert eval(python_literal(value), namespace) == value
    assert math.isnan(eval(python_literal(math.nan), {}))
    with pytest.raises(TargetError, match="cannot be written"):
        python_literal(object())


def test_load_system() -> None:
    assert load_system("test_itf:queue_system").name == "queue"
    assert load_system("fixed", "test_itf:resolve_system").name == "queue_fixed"
    with pytest.raises(TargetError, match=r"package\.module:object"):
        load_system("test_itf")
    with pytest.raises(TargetError, match="no attribute 'nope'"):
        load_system("test_itf:nope")
    with pytest.raises(TargetError, match="not a System"):
        load_system("test_itf:EXT")


def _run_pytest(directory: Path) -> subprocess.CompletedProcess[str]:
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join([str(TESTS), str(TESTS.parent), env.get("PYTHONPATH", "")])
    return subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", str(directory)],
        capture_output=True,
        text=True,
        env=env,
        cwd=directory,
        timeout=120,
    )


def test_generated_regression_tests_run(report: Report, tmp_path: Path) -> None:
    sources = {
        # Each documents its counterexample (or witness) on the buggy system.
        **{
            f"test_doc_{pid}.py": regression_test_source(
                _trace(report, pid), "test_itf:queue_system"
            )
            for pid in ("queue_bounded", "nothing_dropped", "delivery", "reused")
        },
        # After the fix, the 'must hold' form passes (the bad path is gone).
        "test_fixed_dropped.py": regression_test_source(
            _trace(report, "nothing_dropped"),
            "fixed",
            must_hold=True,
            resolver="test_itf:resolve_system",
        ),
        "test_fixed_bounded.py": regression_test_source(
            _trace(report, "queue_bounded"), "test_itf:fixed_queue_system", must_hold=True
        ),
    }
    # A bundled variant, by name: the test resolves it through the registry.
    variant = next(t for t in bundled() if t.expected_violations)
    expected = sorted(variant.expected_violations)[0]
    variant_trace = explore(variant.load(), stop_on_violation=False).result(expected).trace
    assert variant_trace is not None
    sources["test_bundled.py"] = regression_test_source(variant_trace, variant.name)
    # ...and the documenting form fails on the fixed system: the test can tell.
    sources["test_stale_doc.py"] = regression_test_source(
        _trace(report, "delivery"), "test_itf:fixed_queue_system"
    )
    for name, source in sources.items():
        ast.parse(source)
        (tmp_path / name).write_text(source, encoding="utf-8")
    ruff = shutil.which("ruff")
    if ruff is not None:
        check = subprocess.run(
            [ruff, "format", "--isolated", "--check", "--diff", str(tmp_path)],
            capture_output=True,
            text=True,
        )
        assert check.returncode == 0, check.stdout + check.stderr
    run = _run_pytest(tmp_path)
    summary = run.stdout.strip().splitlines()[-1]
    assert "1 failed, 7 passed" in summary, run.stdout + run.stderr
    assert "FAILED test_stale_doc.py::test_delivery_is_violated" in run.stdout
    assert "property 'delivery'" in run.stdout  # the assertion explains itself


def test_generated_source_shape(report: Report) -> None:
    source = regression_test_source(_trace(report, "nothing_dropped"), "test_itf:queue_system")
    assert 'ActionLabel("save", (("ext", ModelValue("ext", 0)),)),' in source
    assert '    ActionLabel("drain"),' in source
    assert "def test_nothing_dropped_is_violated() -> None:" in source
    narrow = regression_test_source(
        _trace(report, "nothing_dropped"),
        "test_itf:queue_system",
        line_length=70,
    )
    ruff = shutil.which("ruff")
    if ruff is not None:
        formatted = subprocess.run(
            [ruff, "format", "--isolated", "--line-length", "70", "-"],
            input=narrow,
            capture_output=True,
            text=True,
        )
        assert formatted.stdout == narrow
    callable_resolver = regression_test_source(
        _trace(report, "reused"), "queue", resolver=resolve_system
    )
    assert f'RESOLVER = "{resolve_system.__module__}:resolve_system"' in callable_resolver
    with pytest.raises(TargetError, match="cannot be imported"):
        regression_test_source(
            _trace(report, "reused"), "queue", resolver=lambda name: queue_system()
        )
