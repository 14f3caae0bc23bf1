"""Hypothesis strategies for small random, bounded, symmetric `System` models.

A system is generated as plain data first (`SystemSpec`, printable when a test
fails) and then built (`build_system`). Guarantees, by construction:

* 1-2 components, each a small valid machine (2-4 states, no variables, one
  transition per (state, event), every state reachable, final states without
  outgoing transitions), keyed by a symmetric ``Keys(name, 1..2)`` set
  (possibly shared by both components), ``max_generations`` 1-2, at most three
  slots in all;
* 0-1 global: a bounded counter or a short FIFO tuple of ``(handle, event)``
  items;
* 2-5 actions of three actors, some internal, that spawn, fire, retire, push,
  pop or count (a spawn may also append to the FIFO without reading it, a pop
  take only its front), each guarded with ``tx.require`` so the space stays
  small and finite;
* a few always/eventually/sometimes properties whose predicates count
  instances or read the global, and 0-1 monitor per key over the outputs the
  machines emit.

Every predicate, action and monitor treats the ids of a `Keys` set alike, so
the systems are symmetric: exploring with and without symmetry reduction must
give the same verdicts. With ``systems(naming=True)`` some of them do not: an
initial state that spawns one id, an action enabled for one id only (in its
code, or through a parameter domain holding one id), a predicate about one
id's instance, a monitor that only watches one id. Symmetry reduction must then
still give the verdicts of the full search.

Importers: ``from system_strategies import systems, SystemSpec, build_system``.
"""

from __future__ import annotations

from collections.abc import Hashable, Mapping
from dataclasses import dataclass, replace
from typing import Any, Literal

from hypothesis import HealthCheck, settings
from hypothesis import strategies as st

from statecore import Event, Machine, State, Transition, out
from statecore.definition import Policy
from statecore.properties import Property, always, eventually, monitor, sometimes
from statecore.system import Action, Component, Emitted, Global, Keys, StateView, System, Tx

# Settings of a differential test that also takes a function-scoped fixture
# (``monkeypatch``, set and undone inside each example).
WITH_FIXTURE = settings(
    max_examples=150,
    deadline=None,
    suppress_health_check=[
        HealthCheck.too_slow,
        HealthCheck.data_too_large,
        HealthCheck.function_scoped_fixture,
    ],
)

OUTPUT_NAMES: tuple[str, ...] = ("o0", "o1")
ACTORS: tuple[str, ...] = ("scheduler", "saver", "consumer")
SYSTEM_KEY = "system"  # the monitor key of outputs an action emits itself


# -- plain data ---------------------------------------------------------------


@dataclass(frozen=True)
class MachineSpec:
    """States ``(name, final, hot)`` (the first is initial) and transitions."""

    name: str
    states: tuple[tuple[str, bool, bool], ...]
    # (source, event, target, output names emitted)
    transitions: tuple[tuple[str, str, str, tuple[str, ...]], ...]
    policies: tuple[tuple[str, Policy], ...] = ()  # event -> policy, default "reject"

    @property
    def events(self) -> tuple[str, ...]:
        seen: dict[str, None] = {}
        for _, event, _, _ in self.transitions:
            seen.setdefault(event, None)
        return tuple(seen)

    @property
    def state_names(self) -> tuple[str, ...]:
        return tuple(s[0] for s in self.states)


@dataclass(frozen=True)
class ComponentSpec:
    name: str
    machine: MachineSpec
    keys: str
    size: int
    max_generations: int


@dataclass(frozen=True)
class GlobalSpec:
    name: str
    kind: Literal["counter", "fifo"]
    bound: int  # counter in 0..bound, FIFO of at most `bound` items


@dataclass(frozen=True)
class ActionSpec:
    """One action; `op` says what it does (see `_run`)."""

    name: str
    actor: str
    internal: bool
    op: Literal["spawn", "fire", "retire", "push", "pop", "count"]
    component: str = ""
    event: str = ""  # fire: the event; push: the event the pop will fire
    fresh: bool = True  # spawn: only when no live instance
    counted: bool = False  # spawn/count: require counter < bound and increment
    enqueue: bool = False  # spawn: then append (handle, event) to the FIFO, unread (`Tx.append`)
    front: bool = False  # pop: take with `Tx.popleft` (reads only the FIFO's front)
    emit: str = ""  # the action itself emits out(emit)
    only: int | None = None  # enabled for this id (index into the keys) only, in its code
    domain: int | None = None  # the parameter's domain holds this id only


@dataclass(frozen=True)
class PredSpec:
    """``measure op threshold``: the count of live instances of `component` in
    `state` (any state when empty), or the global's value (the FIFO's length)."""

    measure: Literal["count", "global", "key"]
    component: str
    state: str
    op: Literal["<=", ">="]
    threshold: int
    key: int = 0  # measure "key": 1 if this id's instance is live (in `state`), else 0

    def value(self, view: StateView) -> int:
        if self.measure == "global":
            value: Any = view.get("g")
            return len(value) if isinstance(value, tuple) else int(value)
        if self.measure == "key":
            keys = view.system.component(self.component).key_values
            snap = view.snapshot(self.component, keys[self.key])
            return int(snap is not None and (not self.state or snap.state == self.state))
        return sum(
            1 for _, snap in view.live(self.component) if not self.state or snap.state == self.state
        )

    def __call__(self, view: StateView) -> bool:
        value = self.value(view)
        return value <= self.threshold if self.op == "<=" else value >= self.threshold


@dataclass(frozen=True)
class PropertySpec:
    id: str
    kind: Literal["always", "eventually", "sometimes"]
    pred: PredSpec
    when: PredSpec | None = None


@dataclass(frozen=True)
class MonitorSpec:
    id: str
    machine: MachineSpec  # events are output names
    only: str = ""  # watch only the outputs of instances with this key (e.g. "k1")


@dataclass(frozen=True)
class SystemSpec:
    components: tuple[ComponentSpec, ...]
    global_: GlobalSpec | None
    actions: tuple[ActionSpec, ...]
    properties: tuple[PropertySpec, ...]
    monitors: tuple[MonitorSpec, ...]
    init_spawn: tuple[tuple[str, int], ...] = ()  # (component, id index) spawned by init


# -- building -------------------------------------------------------------------


def build_machine(spec: MachineSpec) -> Machine:
    policies = dict(spec.policies)
    return Machine(
        spec.name,
        states=[
            State(name, initial=i == 0, final=final, hot=hot)
            for i, (name, final, hot) in enumerate(spec.states)
        ],
        events=[Event(e, policy=policies.get(e, "reject")) for e in spec.events],
        transitions=[
            Transition(src, event, dst, emit=[out(o) for o in outputs], name=f"t{i}")
            for i, (src, event, dst, outputs) in enumerate(spec.transitions)
        ],
    )


def _run(spec: ActionSpec, glob: GlobalSpec | None, keys: Keys | None = None) -> Any:
    """The `Action.run` function of `spec`."""
    if spec.only is not None and keys is not None:
        plain = _run(replace(spec, only=None), glob)
        chosen = keys.values[spec.only % keys.size]

        def run_only(tx: Tx, k: Hashable) -> None:
            tx.require(k == chosen)
            plain(tx, k)

        return run_only
    comp, event = spec.component, spec.event

    def counted(tx: Tx) -> None:
        if spec.counted and glob is not None and glob.kind == "counter":
            value = tx.get(glob.name)
            tx.require(value < glob.bound)
            tx.set(glob.name, value + 1)

    def finish(tx: Tx) -> None:
        if spec.emit:
            tx.emit(out(spec.emit))

    if spec.op == "spawn":

        def run_spawn(tx: Tx, k: Hashable) -> None:
            if spec.fresh:
                tx.require(not tx.live((comp, k)))
            counted(tx)
            tx.spawn(comp, k)
            if spec.enqueue and glob is not None and glob.kind == "fifo":
                tx.append(glob.name, (tx.handle(comp, k), event))  # bounded by the generations
            finish(tx)

        return run_spawn
    if spec.op == "fire":

        def run_fire(tx: Tx, k: Hashable) -> None:
            tx.require(tx.fire((comp, k), event).accepted)
            finish(tx)

        return run_fire
    if spec.op == "retire":

        def run_retire(tx: Tx, k: Hashable) -> None:
            tx.require(tx.retire((comp, k)))
            finish(tx)

        return run_retire
    if spec.op == "push":
        assert glob is not None and glob.kind == "fifo"

        def run_push(tx: Tx, k: Hashable) -> None:
            handle = tx.handle(comp, k)
            tx.require(handle is not None)
            queue = tx.get(glob.name)
            tx.require(len(queue) < glob.bound)
            tx.set(glob.name, (*queue, (handle, event)))
            finish(tx)

        return run_push
    if spec.op == "pop":
        assert glob is not None and glob.kind == "fifo"

        def run_pop(tx: Tx) -> None:
            if spec.front:
                handle, queued_event = tx.popleft(glob.name)
            else:
                queue = tx.get(glob.name)
                tx.require(queue)
                tx.set(glob.name, queue[1:])
                handle, queued_event = queue[0]
            tx.fire(handle, queued_event)  # a stale handle is rejected, not an error
            finish(tx)

        return run_pop
    assert glob is not None and glob.kind == "counter"

    def run_count(tx: Tx) -> None:
        value = tx.get(glob.name)
        if spec.counted:
            tx.require(value < glob.bound)
            tx.set(glob.name, value + 1)
        else:
            tx.require(value > 0)
            tx.set(glob.name, value - 1)
        finish(tx)

    return run_count


def build_action(spec: ActionSpec, keys: Mapping[str, Keys], glob: GlobalSpec | None) -> Action:
    params: dict[str, Keys | tuple[Hashable, ...]] = {}
    own = keys.get(spec.component)
    if spec.op in ("spawn", "fire", "retire", "push"):
        assert own is not None
        params["k"] = own
        if spec.domain is not None:
            params["k"] = (own.values[spec.domain % own.size],)
    run = _run(spec, glob, own if "k" in params else None)
    return Action(spec.name, spec.actor, run, params, internal=spec.internal, doc=spec.op)


def monitor_route(events: tuple[str, ...], only: str = "") -> Any:
    def route(emitted: Emitted) -> tuple[Hashable, str, Mapping[str, Any]] | None:
        if emitted.output.name not in events:
            return None
        if only and (emitted.source is None or str(emitted.source.key) != only):
            return None
        key = SYSTEM_KEY if emitted.source is None else emitted.source
        return key, emitted.output.name, {}

    return route


def build_property(spec: PropertySpec) -> Property:
    statement = f"{spec.kind} {spec.pred}"
    if spec.kind == "always":
        return always(spec.id, statement, spec.pred, when=spec.when)
    if spec.kind == "eventually":
        return eventually(spec.id, statement, spec.pred)
    return sometimes(spec.id, statement, spec.pred)


def build_monitor(spec: MonitorSpec) -> Property:
    machine = build_machine(spec.machine)
    route = monitor_route(spec.machine.events, spec.only)
    return monitor(spec.id, "outputs follow the monitor", machine, route)


def build_system(spec: SystemSpec) -> System:
    """The `System` described by `spec`, with its properties and monitors."""
    keys = {c.name: Keys(c.keys, c.size) for c in spec.components}

    def init(tx: Tx) -> None:
        for component, index in spec.init_spawn:
            tx.spawn(component, keys[component].values[index % keys[component].size])

    return System(
        "random",
        init=init if spec.init_spawn else None,
        components=[
            Component(c.name, build_machine(c.machine), keys[c.name], c.max_generations)
            for c in spec.components
        ],
        globals=[]
        if spec.global_ is None
        else [Global(spec.global_.name, 0 if spec.global_.kind == "counter" else ())],
        actions=[build_action(a, keys, spec.global_) for a in spec.actions],
        properties=[*(build_property(p) for p in spec.properties)]
        + [build_monitor(m) for m in spec.monitors],
    )


# -- strategies -------------------------------------------------------------------


@st.composite
def machine_specs(
    draw: st.DrawFn,
    name: str,
    event_names: tuple[str, ...],
    max_states: int = 4,
    outputs: bool = True,
    policies: tuple[Policy, ...] = ("reject",),
) -> MachineSpec:
    """A valid machine: a spanning tree from the initial state plus extra edges."""
    n = draw(st.integers(2, max_states))
    names = [f"s{i}" for i in range(n)]
    finals = [False] + [draw(st.booleans()) for _ in range(n - 1)]
    hots = [not f and draw(st.integers(0, 3)) == 0 for f in finals]
    used: set[tuple[str, str]] = set()
    transitions: list[tuple[str, str, str, tuple[str, ...]]] = []

    def emitted() -> tuple[str, ...]:
        if not outputs:
            return ()
        return tuple(draw(st.lists(st.sampled_from(OUTPUT_NAMES), max_size=1)))

    for i in range(1, n):
        # The initial state never runs out of free events (it has at least as
        # many events as the tree has edges), so `sources` is never empty.
        sources = [
            j
            for j in range(i)
            if not finals[j] and any((names[j], e) not in used for e in event_names)
        ]
        src = names[draw(st.sampled_from(sources))]
        free = [e for e in event_names if (src, e) not in used]
        event = draw(st.sampled_from(free))
        used.add((src, event))
        transitions.append((src, event, names[i], emitted()))
    for _ in range(draw(st.integers(0, 2))):
        src = names[draw(st.sampled_from([j for j in range(n) if not finals[j]]))]
        free = [e for e in event_names if (src, e) not in used]
        if not free:
            continue
        event = draw(st.sampled_from(free))
        used.add((src, event))
        transitions.append((src, event, draw(st.sampled_from(names)), emitted()))
    spec_events = {e for _, e, _, _ in transitions}
    chosen = tuple((e, draw(st.sampled_from(policies))) for e in sorted(spec_events))
    return MachineSpec(name, tuple(zip(names, finals, hots)), tuple(transitions), chosen)


@st.composite
def pred_specs(
    draw: st.DrawFn, components: tuple[ComponentSpec, ...], glob: GlobalSpec | None
) -> PredSpec:
    if glob is not None and draw(st.integers(0, 3)) == 0:
        return PredSpec(
            "global", "", "", draw(st.sampled_from(("<=", ">="))), draw(st.integers(0, glob.bound))
        )
    comp = draw(st.sampled_from(components))
    state = draw(st.sampled_from(("", *comp.machine.state_names)))
    return PredSpec(
        "count",
        comp.name,
        state,
        draw(st.sampled_from(("<=", ">="))),
        draw(st.integers(0, comp.size)),
    )


@st.composite
def systems(draw: st.DrawFn, symmetric_pair: bool = False, naming: bool = False) -> SystemSpec:
    """A random small bounded system; with `symmetric_pair`, some `Keys` set has two ids.

    With `naming`, parts of the system may tell ids apart (see the module docstring).
    """
    n_components = draw(st.integers(1, 2))
    shared = n_components == 2 and draw(st.booleans())
    components: list[ComponentSpec] = []
    slots = 0
    for i in range(n_components):
        name = f"c{i}"
        keys = "k" if shared else f"k{i}"
        if shared and components:
            size = components[0].size
        else:
            room = 3 - slots - (n_components - 1 - i)
            low = 2 if symmetric_pair and i == 0 else 1
            size = draw(st.integers(low, max(low, min(2, room))))
        slots += size
        max_states = 4 if n_components == 1 else 3
        machine = draw(machine_specs(f"m{i}", ("a", "b", "c"), max_states))
        components.append(ComponentSpec(name, machine, keys, size, draw(st.integers(1, 2))))
    comps = tuple(components)

    glob: GlobalSpec | None = None
    kind = draw(st.sampled_from(("none", "counter", "fifo")))
    if kind == "counter":
        glob = GlobalSpec("g", "counter", draw(st.integers(1, 2)))
    elif kind == "fifo":
        glob = GlobalSpec("g", "fifo", draw(st.integers(1, 2)))

    ops: list[str] = ["spawn", "fire", "retire"]
    if glob is not None and glob.kind == "fifo":
        ops += ["push", "pop"]
    if glob is not None and glob.kind == "counter":
        ops += ["count"]
    n_actions = draw(st.integers(2, 5))
    actions: list[ActionSpec] = []
    for i in range(n_actions):
        # The first action spawns, so something happens.
        op = "spawn" if i == 0 else draw(st.sampled_from(ops))
        comp = draw(st.sampled_from(comps))
        event = draw(st.sampled_from(comp.machine.events))
        actions.append(
            ActionSpec(
                f"act{i}",
                draw(st.sampled_from(ACTORS)),
                draw(st.booleans()) if op != "pop" else draw(st.integers(0, 3)) > 0,
                op,  # type: ignore[arg-type]
                comp.name,
                event,
                fresh=draw(st.booleans()),
                counted=draw(st.booleans()),
                emit=draw(st.sampled_from(("", "", "", *OUTPUT_NAMES))),
                enqueue=op == "spawn" and "push" in ops and draw(st.booleans()),
                front=op == "pop" and draw(st.booleans()),
            )
        )

    properties: list[PropertySpec] = []
    for i in range(draw(st.integers(1, 4))):
        kind_ = draw(st.sampled_from(("always", "always", "eventually", "sometimes")))
        pred = draw(pred_specs(comps, glob))
        when = None
        if kind_ == "always" and draw(st.booleans()):
            when = draw(pred_specs(comps, glob))
        properties.append(PropertySpec(f"p{i}", kind_, pred, when))  # type: ignore[arg-type]

    monitors: list[MonitorSpec] = []
    if draw(st.booleans()):
        machine = draw(
            machine_specs(
                "mon", OUTPUT_NAMES, 3, outputs=False, policies=("reject", "ignore", "error")
            )
        )
        monitors.append(MonitorSpec("mon", machine))
    spec = SystemSpec(comps, glob, tuple(actions), tuple(properties), tuple(monitors))
    return draw(naming_ids(spec)) if naming else spec


@st.composite
def naming_ids(draw: st.DrawFn, spec: SystemSpec) -> SystemSpec:
    """`spec` with one or more of its parts made to tell ids apart."""
    comps = spec.components
    index = st.integers(0, 1)
    actions = list(spec.actions)
    for i, action in enumerate(actions):
        if action.op in ("spawn", "fire", "retire", "push") and draw(st.integers(0, 2)) == 0:
            if draw(st.booleans()):
                actions[i] = replace(action, only=draw(index))
            else:
                actions[i] = replace(action, domain=draw(index))
    properties = list(spec.properties)
    for i, prop in enumerate(properties):
        if draw(st.booleans()):
            comp = draw(st.sampled_from(comps))
            pred = PredSpec(
                "key",
                comp.name,
                draw(st.sampled_from(("", *comp.machine.state_names))),
                draw(st.sampled_from(("<=", ">="))),
                draw(st.integers(0, 1)),
                draw(index) % comp.size,
            )
            properties[i] = replace(prop, pred=pred)
    monitors = tuple(
        replace(m, only=f"{comps[0].keys}{draw(index) % comps[0].size}")
        if draw(st.booleans())
        else m
        for m in spec.monitors
    )
    init_spawn: tuple[tuple[str, int], ...] = ()
    if draw(st.integers(0, 2)) == 0:
        comp = draw(st.sampled_from(comps))
        init_spawn = ((comp.name, draw(index) % comp.size),)
    return replace(
        spec,
        actions=tuple(actions),
        properties=tuple(properties),
        monitors=monitors,
        init_spawn=init_spawn,
    )
