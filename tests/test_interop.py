"""statecore.interop: pytransitions machines in and out.

Three differential checks, each over random inputs:

* round trip: statecore -> `to_transitions` -> `from_transitions` keeps the
  states, transitions, initial state and the step-by-step behaviour of random
  flat machines (through the kwargs dict, through the EventData stand-in for
  conditions, and through a live ``transitions.Machine``);
* `to_transitions`: the kwargs run in ``transitions.Machine`` agree with
  statecore's `step` on random event sequences;
* `from_transitions`: hand-written transitions configs (wildcard sources,
  reflexive ``'='``, internal ``None``, conditions and ``unless``, names
  resolved on a model, ``send_event`` on and off) behave as transitions does.

Then the refusals: everything statecore cannot express is a clear
`DefinitionError`.
"""

from __future__ import annotations

import enum
import subprocess
import sys
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from strategies import Step, event_sequences, machines_and_sequences

from statecore import (
    DefinitionError,
    Event,
    Field,
    Machine,
    Snapshot,
    State,
    Transition,
    TransitionError,
    Var,
    out,
    step,
)
from statecore.errors import (
    CallbackError,
    FinalStateTransitionError,
    InitialStateError,
    NameClashError,
    NondeterminismError,
    UnknownEventError,
    UnknownStateError,
    UnknownVariableError,
    UnreachableStateError,
)
from statecore.semantics import enabled

transitions = pytest.importorskip("transitions")

from statecore.interop import (  # noqa: E402  (after the importorskip)
    INSTALL_HINT,
    TransitionsModel,
    UnresolvedCallbackError,
    UnsupportedFeatureError,
    from_transitions,
    to_transitions,
)

ALL_POLICIES = ("reject", "ignore", "error")


def _fire(machine: Machine, snapshot: Snapshot, event: str, payload: dict[str, Any]) -> Any:
    """`step`, with an 'error' policy's TransitionError turned into a value."""
    try:
        return step(machine, snapshot, event, payload)
    except TransitionError:
        return "error"


def _back(machine: Machine, config_or_machine: Any) -> Machine:
    """`from_transitions` given what transitions cannot carry (fields, policies, hot)."""
    return from_transitions(
        config_or_machine,
        variables=machine.variables,
        event_fields={e.name: e.fields for e in machine.events},
        policies={e.name: e.policy for e in machine.events},
        hot=machine.hot_states,
    )


def _through_shim(kwargs: dict[str, Any]) -> dict[str, Any]:
    """Hide the guards behind plain lambdas so they take the generic EventData-shim path."""
    rows = []
    for row in kwargs["transitions"]:
        row = dict(row)
        if "conditions" in row:
            row["conditions"] = [lambda event, c=c: c(event) for c in row["conditions"]]
        rows.append(row)
    return {**kwargs, "transitions": rows}


def _dispatch(machine: Machine) -> dict[str, dict[str, list[str]]]:
    """Per state and event, the targets in the order they are tried."""
    return {
        state: {event: [c.target for c in cs] for event, cs in by_event.items()}
        for state, by_event in machine.dispatch.items()
    }


# -- round trip ----------------------------------------------------------------


@settings(max_examples=210, deadline=None)
@given(
    machines_and_sequences(ALL_POLICIES, min_size=5, max_size=30),
    st.sampled_from(("config", "shim", "instance")),
)
def test_round_trip_preserves_structure_and_behaviour(
    case: tuple[Machine, list[Step]], route: str
) -> None:
    machine, steps = case
    kwargs = to_transitions(machine)
    if route == "shim":
        kwargs = _through_shim(kwargs)
    if route == "instance":
        live = transitions.Machine(model=TransitionsModel(machine), **kwargs)
        back = _back(machine, live)
    else:
        back = _back(machine, kwargs)

    assert back.name == machine.name
    assert back.states == machine.states
    assert back.initial == machine.initial
    assert back.variables == machine.variables
    assert sorted(back.events, key=str) == sorted(machine.events, key=str)
    assert _dispatch(back) == _dispatch(machine)
    if route != "instance":  # a live machine keeps one transition per source
        assert [(t.source, t.event, t.target) for t in back.transitions] == [
            (t.source, t.event, t.target) for t in machine.transitions
        ]

    mine, theirs = machine.initial_snapshot(), back.initial_snapshot()
    for event, payload in steps:
        context = f"{event}({payload}) from {mine!r}"
        expected, got = _fire(machine, mine, event, payload), _fire(back, theirs, event, payload)
        if expected == "error":
            assert got == "error", context
            continue
        assert got.status == expected.status, context
        assert got.outputs == expected.outputs, context
        mine, theirs = expected.snapshot, got.snapshot
        assert (theirs.state, theirs.values()) == (mine.state, mine.values()), context


# -- statecore run on transitions ----------------------------------------------


@settings(max_examples=150, deadline=None)
@given(machines_and_sequences(min_size=10, max_size=40))
def test_to_transitions_agrees_with_step(case: tuple[Machine, list[Step]]) -> None:
    machine, steps = case
    kwargs = to_transitions(machine)
    assert kwargs["ignore_invalid_triggers"] is True
    model = TransitionsModel(machine)
    transitions.Machine(model=model, **kwargs)
    snapshot = machine.initial_snapshot()
    assert model.snapshot() == snapshot
    for event, payload in steps:
        context = f"{event}({payload}) from {snapshot!r}"
        assert model.may_trigger(event, **payload) is enabled(machine, snapshot, event, payload)
        seen = len(model.emitted)
        taken = model.trigger(event, **payload)
        outcome = step(machine, snapshot, event, payload)
        snapshot = outcome.snapshot
        assert taken is outcome.accepted, context
        assert model.snapshot() == snapshot, context
        assert tuple(model.emitted[seen:]) == outcome.outputs, context


@settings(max_examples=60, deadline=None)
@given(
    st.sampled_from((("error",), ("reject", "error"), ("ignore", "error"))).flatmap(
        lambda policies: machines_and_sequences(policies, min_size=10, max_size=30)
    )
)
def test_error_policy_as_far_as_transitions_can_express_it(
    case: tuple[Machine, list[Step]],
) -> None:
    """transitions raises only for 'no transition from this state', and only machine-wide.

    With every event 'error' it raises MachineError where statecore raises and
    the state has no transition for the event, and returns False where every
    guard fails; with a mix it fails open and returns False.
    """
    machine, steps = case
    all_error = {e.policy for e in machine.events} == {"error"}
    kwargs = to_transitions(machine)
    assert kwargs["ignore_invalid_triggers"] is not all_error
    model = TransitionsModel(machine)
    transitions.Machine(model=model, **kwargs)
    snapshot = machine.initial_snapshot()
    for event, payload in steps:
        context = f"{event}({payload}) from {snapshot!r}"
        outcome = _fire(machine, snapshot, event, payload)
        if outcome == "error" and all_error and event not in machine.dispatch[snapshot.state]:
            with pytest.raises(transitions.MachineError):
                model.trigger(event, **payload)
            continue
        taken = model.trigger(event, **payload)
        if outcome == "error":
            assert taken is False, context
            continue
        snapshot = outcome.snapshot
        assert taken is outcome.accepted, context
        assert model.snapshot() == snapshot, context


# -- transitions configs brought in ---------------------------------------------


def is_odd(event: Any) -> bool:
    return bool(event.kwargs["n"] % 2 == 1)


class Job:
    """A transitions model in the usual style: conditions and callbacks as methods."""

    def __init__(self) -> None:
        self.retries = 0
        self.limit = 2  # configuration, not a statecore variable

    def can_retry(self, event: Any) -> bool:
        return self.retries < self.limit

    def is_urgent(self, event: Any) -> bool:
        return bool(event.kwargs["urgent"])

    @property
    def exhausted(self) -> bool:
        return self.retries >= self.limit

    def count_retry(self, event: Any) -> None:
        self.retries += 1

    def reset_retries(self, event: Any) -> None:
        self.retries = 0


def job_config() -> dict[str, Any]:
    """Wildcards, reflexive '=', internal None, conditions, unless, names on the model."""
    return {
        "name": "job",
        "states": ["idle", "running", "paused", "failed"],
        "initial": "idle",
        "send_event": True,
        "ignore_invalid_triggers": True,
        "auto_transitions": False,
        "transitions": [
            {"trigger": "start", "source": "idle", "dest": "running"},
            {"trigger": "pause", "source": "running", "dest": "paused", "unless": "is_urgent"},
            {"trigger": "resume", "source": "paused", "dest": "running"},
            {"trigger": "fail", "source": ["running", "paused"], "dest": "failed"},
            {
                "trigger": "retry",
                "source": "failed",
                "dest": "running",
                "conditions": "can_retry",
                "after": "count_retry",
            },
            {"trigger": "retry", "source": "failed", "dest": "=", "conditions": ["exhausted"]},
            {
                "trigger": "ping",
                "source": "*",
                "dest": None,
                "conditions": [lambda event: event.kwargs["n"] > 0],
                "unless": [is_odd],
            },
            {"trigger": "reset", "source": "*", "dest": "idle", "before": "reset_retries"},
        ],
    }


def job_statecore(config: Any) -> Machine:
    return from_transitions(
        config,
        model=Job(),
        variables=[Var("retries", range(3), default=0)],
        event_fields={"pause": [Field("urgent", (False, True))], "ping": [Field("n", range(3))]},
        effects={
            "retry": lambda s, p: {"retries": s.retries + 1} if s.retries < 2 else None,
            "reset": lambda s, p: {"retries": 0},
        },
    )


def positive(amount: int) -> bool:
    return amount > 0


class Account:
    """A ``send_event=False`` model: conditions get the payload as keyword arguments."""

    def __init__(self) -> None:
        self.balance = 0
        self.locked = False

    def under_cap(self, amount: int) -> bool:
        return self.balance + amount <= 3

    def covers(self, amount: int) -> bool:
        return amount <= self.balance

    @property
    def is_empty(self) -> bool:
        return self.balance == 0

    def add(self, amount: int) -> None:
        self.balance += amount

    def subtract(self, amount: int) -> None:
        self.balance -= amount

    def lock(self) -> None:
        self.locked = True

    def unlock(self) -> None:
        self.locked = False


def account_config() -> dict[str, Any]:
    """List-form transitions, a final state, a dotted path, a variable as a condition."""
    return {
        "name": "account",
        "states": ["open", "held", {"name": "closed", "final": True}],
        "initial": "open",
        "auto_transitions": False,
        "transitions": [
            ["deposit", "open", None, [f"{__name__}.positive", "under_cap"], None, None, "add"],
            ["withdraw", ["open", "held"], "=", ["covers"], "locked", "subtract"],
            ["hold", "open", "held", None, None, None, "lock"],
            ["release", "held", "open", None, None, "unlock"],
            ["close", ["open", "held"], "closed", "is_empty"],
        ],
    }


ACCOUNT_FIELDS = {
    "deposit": [Field("amount", range(4))],
    "withdraw": [Field("amount", range(4))],
}
ACCOUNT_EFFECTS = {
    "deposit": lambda s, p: {"balance": s.balance + p["amount"]},
    "withdraw": lambda s, p: {"balance": s.balance - p["amount"]},
    "hold": lambda s, p: {"locked": True},
    "release": lambda s, p: {"locked": False},
}
ACCOUNT_VARIABLES = [Var("balance", range(4), default=0), Var("locked", (False, True), False)]


def account_statecore(config: Any) -> Machine:
    return from_transitions(
        config,
        variables=ACCOUNT_VARIABLES,
        event_fields=ACCOUNT_FIELDS,
        effects=ACCOUNT_EFFECTS,
        model=None if isinstance(config, transitions.Machine) else Account(),
    )


def _agree(machine: Machine, model: Any, steps: list[Step]) -> None:
    """Fire `steps` through statecore and a transitions model; they must agree."""
    snapshot = machine.initial_snapshot()
    names = [v.name for v in machine.variables]
    for event, payload in steps:
        context = f"{event}({payload}) from {snapshot!r}"
        outcome = _fire(machine, snapshot, event, payload)
        if outcome == "error":  # transitions raises only when the state has no transition
            if event in machine.dispatch[snapshot.state]:
                assert model.trigger(event, **payload) is False, context
            else:
                with pytest.raises(transitions.MachineError):
                    model.trigger(event, **payload)
        else:
            assert model.trigger(event, **payload) is outcome.accepted, context
            snapshot = outcome.snapshot
        assert model.state == snapshot.state, context
        assert {n: getattr(model, n) for n in names} == snapshot.values(), context


JOB = job_statecore(job_config())
ACCOUNT = account_statecore(account_config())
ACCOUNT_LIVE = account_statecore(transitions.Machine(model=Account(), **account_config()))


def test_converted_configs_have_the_expected_shape() -> None:
    assert [s.name for s in JOB.states] == ["idle", "running", "paused", "failed"]
    assert {e.name: e.policy for e in JOB.events} == dict.fromkeys(
        ["start", "pause", "resume", "fail", "retry", "ping", "reset"], "reject"
    )
    ping = next(t for t in JOB.transitions if t.event == "ping")
    assert ping.source == ("idle", "running", "paused", "failed")
    assert ping.target is None
    assert ping.guard_label == "condition and not is_odd"
    pause = next(t for t in JOB.transitions if t.event == "pause")
    assert pause.guard_label == "not is_urgent"

    assert ACCOUNT.final_states == {"closed"}
    assert {e.policy for e in ACCOUNT.events} == {"error"}  # transitions raises by default
    assert _dispatch(ACCOUNT_LIVE) == _dispatch(ACCOUNT)


@settings(max_examples=100, deadline=None)
@given(event_sequences(JOB, min_size=5, max_size=40))
def test_job_config_behaves_as_transitions(steps: list[Step]) -> None:
    model = Job()
    transitions.Machine(model=model, **job_config())
    _agree(JOB, model, steps)


@settings(max_examples=100, deadline=None)
@given(event_sequences(ACCOUNT, min_size=5, max_size=40), st.booleans())
def test_account_config_behaves_as_transitions(steps: list[Step], live: bool) -> None:
    model = Account()
    transitions.Machine(model=model, **account_config())
    _agree(ACCOUNT_LIVE if live else ACCOUNT, model, steps)


def test_model_methods_read_the_snapshot_not_the_live_model() -> None:
    """The explorer evaluates guards in every snapshot, so `self.retries` must be the snapshot's."""
    stale = Job()
    stale.retries = 99  # would make can_retry false everywhere if it were read
    machine = from_transitions(
        job_config(),
        model=stale,
        variables=[Var("retries", range(3), default=0)],
        event_fields={"pause": [Field("urgent", (False, True))], "ping": [Field("n", range(3))]},
        ignore_callbacks=True,
    )
    snapshot = machine.snapshot("failed", retries=1)
    assert step(machine, snapshot, "retry").snapshot.state == "running"
    assert step(machine, machine.snapshot("failed", retries=2), "retry").snapshot.state == "failed"


# -- refusals --------------------------------------------------------------------


def _config(**overrides: Any) -> dict[str, Any]:
    config: dict[str, Any] = {
        "states": ["a", "b"],
        "initial": "a",
        "transitions": [{"trigger": "go", "source": "a", "dest": "b"}],
    }
    config.update(overrides)
    return config


@pytest.mark.parametrize(
    ("config", "error", "match"),
    [
        (
            _config(states=["a", {"name": "b", "children": ["x", "y"]}]),
            UnsupportedFeatureError,
            "nested",
        ),
        (
            _config(transitions=[{"trigger": "go", "source": "a", "dest": "b", "prepare": "p"}]),
            UnsupportedFeatureError,
            "prepare",
        ),
        (_config(prepare_event="p"), UnsupportedFeatureError, "prepare_event"),
        (_config(queued=True), UnsupportedFeatureError, "queued"),
        (_config(ordered_transitions=True), UnsupportedFeatureError, "ordered_transitions"),
        (_config(on_final="f"), UnsupportedFeatureError, "effects="),
        (_config(states=["a", {"name": "b", "tags": ["x"]}]), UnsupportedFeatureError, "tags"),
        (
            _config(states=["a", {"name": "b", "on_enter": "f"}]),
            UnsupportedFeatureError,
            "on_enter",
        ),
        (
            _config(transitions=[{"trigger": "go", "source": "a", "dest": "b", "after": "f"}]),
            UnsupportedFeatureError,
            "effects=",
        ),
        (
            _config(states=["a", {"name": "b", "ignore_invalid_triggers": True}]),
            UnsupportedFeatureError,
            "per state",
        ),
        (_config(foo=1), UnsupportedFeatureError, "foo"),
        (
            _config(transitions=[{"trigger": "go", "source": "a", "dest": "b", "conditions": "x"}]),
            UnresolvedCallbackError,
            "model=",
        ),
        (
            _config(
                states=["a", {"name": "b", "final": True}],
                transitions=[{"trigger": "go", "source": "*", "dest": "b"}],
            ),
            FinalStateTransitionError,
            r"source '\*' includes final state 'b'",
        ),
        (_config(initial=None), InitialStateError, "initial"),
        (
            _config(transitions=[{"trigger": "go", "source": "a", "dest": "c"}]),
            UnknownStateError,
            "'c'",
        ),
        (_config(states=["a", "b", "c"]), UnreachableStateError, "'c'"),
        (
            _config(
                transitions=[
                    {"trigger": "go", "source": "a", "dest": "b"},
                    {"trigger": "go", "source": "a", "dest": "a"},
                ]
            ),
            NondeterminismError,
            "both enabled",
        ),
        (_config(states=["a", "go"], initial="a"), NameClashError, "'go'"),
    ],
)
def test_refusals_are_definition_errors(
    config: dict[str, Any], error: type[Exception], match: str
) -> None:
    assert issubclass(error, DefinitionError)
    with pytest.raises(error, match=match):
        from_transitions(config)


def test_callbacks_are_accepted_once_their_effects_are_spelt_out() -> None:
    config = _config(transitions=[{"trigger": "go", "source": "a", "dest": "b", "after": "f"}])
    assert from_transitions(config, ignore_callbacks=True).transitions[0].effect is None
    machine = from_transitions(
        config, variables=[Var("n", range(2), 0)], effects={"go": lambda s, p: {"n": 1}}
    )
    assert step(machine, machine.initial_snapshot(), "go").snapshot.values() == {"n": 1}


def test_per_state_ignore_is_accepted_with_explicit_policies() -> None:
    config = _config(states=["a", {"name": "b", "ignore_invalid_triggers": True}])
    machine = from_transitions(config, policies="ignore")
    assert machine.event_index["go"].policy == "ignore"


def test_unknown_names_in_the_extra_arguments() -> None:
    with pytest.raises(UnknownEventError, match="'stop'"):
        from_transitions(_config(), effects={"stop": lambda s, p: None})
    with pytest.raises(UnknownEventError, match="'stop'"):
        from_transitions(_config(), event_fields={"stop": []})
    with pytest.raises(UnknownStateError, match="'z'"):
        from_transitions(_config(), hot=["z"])
    with pytest.raises(TypeError, match=r"transitions\.Machine"):
        from_transitions(["a", "b"])


def test_hierarchical_machine_is_refused() -> None:
    from transitions.extensions import HierarchicalMachine

    machine = HierarchicalMachine(
        states=["a", {"name": "b", "children": ["x", "y"]}], initial="a", auto_transitions=False
    )
    with pytest.raises(UnsupportedFeatureError, match="nested"):
        from_transitions(machine)


def test_conditions_must_stay_pure() -> None:
    class Meddler:
        def sneaky(self, event: Any) -> bool:
            self.touched = True
            return True

        def nosy(self, event: Any) -> bool:
            return bool(event.machine)

    for name, match in (("sneaky", "must not change"), ("nosy", "stand-in for EventData")):
        config = _config(
            send_event=True,
            transitions=[{"trigger": "go", "source": "a", "dest": "b", "conditions": name}],
        )
        with pytest.raises(CallbackError, match=match):
            from_transitions(config, model=Meddler())


def test_to_transitions_refuses_names_transitions_would_not_bind() -> None:
    def machine(var: str, event: str = "go") -> Machine:
        return Machine(
            "m",
            states=[State("a", initial=True), State("b")],
            variables=[Var(var, (0, 1), 0)],
            events=[Event(event)],
            transitions=[Transition("a", event, "b")],
        )

    with pytest.raises(NameClashError, match="'trigger'"):
        to_transitions(machine("trigger"))
    with pytest.raises(NameClashError, match="'is_a'"):
        to_transitions(machine("is_a"))
    with pytest.raises(NameClashError, match="'state'"):
        to_transitions(machine("v", event="state"))
    with pytest.raises(NameClashError, match="'emitted'"):
        TransitionsModel(machine("emitted"))
    with pytest.raises(UnknownVariableError, match="'w'"):
        TransitionsModel(machine("v"), w=1)
    assert TransitionsModel(machine("v"), v=1).values() == {"v": 1}


def test_to_transitions_output_is_plain_transitions_kwargs() -> None:
    sender = Machine(
        "sender",
        states=[State("idle", initial=True), State("queued", hot=True), State("sent", final=True)],
        variables=[Var("puts", range(3), default=0)],
        events=[Event("enqueue"), Event("put", [Field("ok", (True, False))]), Event("poke")],
        transitions=[
            Transition("idle", "enqueue", "queued"),
            Transition(
                "queued",
                "put",
                "sent",
                guard=lambda s, p: p["ok"],
                effect=lambda s, p: {"puts": s.puts + 1},
                emit=[out("put", finished=True)],
            ),
            Transition(["idle", "queued"], "poke"),
        ],
    )
    kwargs = to_transitions(sender)
    assert kwargs["states"] == ["idle", "queued", {"name": "sent", "final": True}]
    assert kwargs["initial"] == "idle"
    assert [(r["trigger"], r["source"], r["dest"]) for r in kwargs["transitions"]] == [
        ("enqueue", "idle", "queued"),
        ("put", "queued", "sent"),
        ("poke", ["idle", "queued"], None),
    ]
    finals: list[str] = []
    model = TransitionsModel(sender)
    machine = transitions.Machine(
        model=model, on_final=lambda e: finals.append(e.state.name), **kwargs
    )
    assert machine.get_state("sent").final
    assert model.enqueue() and model.poke() and model.state == "queued"
    assert not model.put(ok=False)
    assert model.put(ok=True)
    assert (model.state, model.puts, model.emitted, finals) == (
        "sent",
        1,
        [out("put", finished=True)],
        ["sent"],
    )


def test_missing_transitions_names_the_extra(monkeypatch: pytest.MonkeyPatch) -> None:
    machine = from_transitions(_config())
    monkeypatch.setitem(sys.modules, "transitions", None)
    for call in (lambda: to_transitions(machine), lambda: from_transitions(_config())):
        with pytest.raises(ImportError, match=INSTALL_HINT.replace("[", r"\[").replace("]", r"\]")):
            call()


def test_importing_statecore_does_not_import_transitions() -> None:
    code = "import sys, statecore, statecore.interop; assert 'transitions' not in sys.modules"
    subprocess.run([sys.executable, "-c", code], check=True)


def test_state_objects_enums_and_auto_transitions() -> None:
    config = _config(states=[transitions.State("a"), transitions.State("b", final=True)])
    assert from_transitions(config).final_states == {"b"}

    class Colour(enum.Enum):
        RED = 1
        GREEN = 2

    with pytest.raises(UnsupportedFeatureError, match="enum"):
        from_transitions(_config(states=Colour, initial=Colour.RED))
    with pytest.raises(UnsupportedFeatureError, match="enum"):
        from_transitions(_config(states=[Colour.RED, Colour.GREEN], initial=Colour.RED))

    live = transitions.Machine(states=["a", "b"], initial="a", transitions=[["go", "a", "b"]])
    assert [e.name for e in from_transitions(live, name="m").events] == ["go"]
