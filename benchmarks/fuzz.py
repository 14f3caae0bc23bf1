"""Fuzzing speed and bug finding: statecore against a hand-written Hypothesis state
machine, side by side in one process, on the real vLLM-Omni 0.30.0 chunk-transfer adapter.

1. Steps per second: statecore's fuzzer driving the real ``OmniChunkTransferAdapter``
   through the ``vllm-omni`` binding (model `fuzz_system_0_30_0`, the known 0.30.0
   findings allowed), statecore driving the reference implementations
   (``request-state-accessor``, ``stream-edge-recorder``), and the baseline: the plain
   Hypothesis ``RuleBasedStateMachine`` a careful vLLM-Omni developer would write today
   (`baseline_machine`). It builds a real adapter per example with the helpers of
   ``statecore.models.bindings.vllm_omni`` and runs every send to completion, so it
   cannot interleave an action while a put is in flight.
2. Time to the first failure, the median over several seeds, for each bug vLLM-Omni
   had or regression of its fix (`MUTANTS`, patched into the real class for both tools;
   the last two need a segment boundary, which the baseline does not drive) and, for statecore
   only, each seed-finding variant run as the implementation (``SystemAdapter``) against
   the reference ``chunk_transfer`` model; the baseline drives real code only, so the
   variants are n/a for it. Both tools search generate-only (no shrinking), as the
   mutation tests do; a run that finds nothing within the cap is a miss. Before the
   first mutant each tool runs one untimed search of the unmutated adapter (first-use
   costs, statecore's model memo among them, stay outside the timing as in part 1).

Both tools run in one process, under the garbage collector's pacing that ``statecore fuzz``
sets for a run (`statecore.fuzzing.collector.spaced_full_collections`): full collections
walk statecore's successor memo, so without it the baseline would pay for them too.

The two tools count steps differently: a statecore step is one model action, so one
send is ``begin``, ``process``, ``put`` and ``finish`` (and the consumer's ``receive``), while one
baseline ``pump`` step runs a whole send.

Run with the vLLM stack installed: ``python benchmarks/fuzz.py [--quick]``. The last
two lines keep the two kinds of target apart, each over its own denominator (the
medians are over the targets' per-seed medians, a miss counting as infinite):

``RESULT real_adapter_steps_per_s=<x> mutants_found=<k>/<n> mutants_median_seconds=<x>
baseline_mutants_found=<k>/<n> baseline_mutants_median_seconds=<x>``

``RESULT model_variants_found=<k>/<m> model_variants_median_seconds=<x>`` (statecore only)
"""

from __future__ import annotations

import argparse
import math
import os
import statistics
import sys
import time
from collections import Counter, deque
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager, nullcontext
from dataclasses import dataclass
from typing import Any, TypeVar

from hypothesis import HealthCheck, Phase, settings
from hypothesis import seed as hypothesis_seed
from hypothesis import strategies as st
from hypothesis.errors import HypothesisException
from hypothesis.stateful import (
    RuleBasedStateMachine,
    precondition,
    rule,
    run_state_machine_as_test,
)

from statecore.adapter import Adapter, AdapterError
from statecore.errors import StatecoreError
from statecore.fuzzing.collector import spaced_full_collections
from statecore.fuzzing.fuzz import PROFILES, Finding, fuzz, state_machine
from statecore.registry import resolve_adapter
from statecore.system import System

STEP_COUNT: int = PROFILES["ci"]["stateful_step_count"]
EXTS = ("ext0", "ext1")  # two external ids, as in fuzz_system_0_30_0
PROCESSOR_OUTCOMES = ("payload", "none", "raise")
PUT_OUTCOMES = ("ok", "false", "raise")
REFERENCE_ADAPTERS = (
    ("request_state_system", "request-state-accessor"),
    ("stream_edge", "stream-edge-recorder"),
)
VARIANTS = (  # (the chunk_transfer.py builder, its registered name)
    ("variant_6670", "chunk_transfer_6670"),
    ("variant_4855", "chunk_transfer_4855"),
    ("variant_seed000_p1", "chunk_transfer_seed000_p1"),
    ("variant_reuse_joins", "chunk_transfer_reuse_joins"),
    ("released_0_30_0", "chunk_transfer_0_30_0"),
    ("variant_segment_clears", "chunk_transfer_segment_clears"),
)
WARM_UP_SEED = 1_000  # outside every mode's seeds
WARM_UP_EXAMPLES = 20
M = TypeVar("M", bound=RuleBasedStateMachine)
TERMINAL_LOST = "terminal lost"  # the baseline's two checks
SENDER_LEFT = "sender state left"


@dataclass(frozen=True)
class Mode:
    """How much to run: seeds per target, the per-run cap, examples for throughput.

    A tool runs at least `seeds` seeds on a target, and more, up to
    `max_seeds`, while its runs there took under `seed_budget` seconds in all:
    the median of three 50 ms runs is mostly noise, and a target found that
    fast costs little to run again.
    """

    seeds: int
    max_seeds: int
    seed_budget: float
    cap: float
    max_examples: int
    throughput_examples: int
    workers_budget: float


QUICK = Mode(
    seeds=3,
    max_seeds=15,
    seed_budget=3.0,
    cap=30.0,
    max_examples=100_000,
    throughput_examples=300,
    workers_budget=8,
)
FULL = Mode(
    seeds=5,
    max_seeds=25,
    seed_budget=10.0,
    cap=60.0,
    max_examples=100_000,
    throughput_examples=1_000,
    workers_budget=30,
)


# -- the baseline: a hand-written Hypothesis state machine over the real adapter ----------


class BaselineFailure(AssertionError):
    """One of the baseline's own checks failed: `check` names it."""

    def __init__(self, check: str, detail: str) -> None:
        self.check = check
        super().__init__(f"{check}: {detail}")


@dataclass
class Tally:
    """Steps the baseline ran: every rule and every teardown pump, over all examples."""

    steps: int = 0


def baseline_machine(tally: Tally | None = None) -> type[RuleBasedStateMachine]:
    """The test a careful vLLM-Omni developer would write by hand today.

    One real ``OmniChunkTransferAdapter`` per example (its threads stopped), a
    connector whose ``put`` answers with the outcome the rule chose, and rules for
    what the scheduler does (new request, possibly re-using an external id; chunk
    and terminal ``save_async``; ``finish_requests``; ``cleanup_sender``) and for the
    save thread (``pump``: pop the queue head and run ``save_loop``'s body on it, to
    completion, with the chosen processor and put outcomes, on one worker thread per
    example as the adapter has one save thread). Checks: right after a delivered terminal
    no sender state is left for its external id; at teardown, the queue drained,
    every accepted terminal was delivered (a ``finished=True`` put) or its failure
    recorded.

    Like statecore it allows 0.30.0's known behaviour: a request that re-uses an
    external id while the old sender generation is still live joins it
    (``variant_reuse_joins``) and its terminal may be discarded once the old
    terminal reclaims the generation, so such a request's terminal is not checked.
    A request "joined" when ``has_active_sender`` was true before its first
    accepted save.
    """
    from statecore.models.bindings.vllm_omni import (
        STAGE_ID,
        describe_payload,
        make_adapter,
        real_classes,
        run_save_task,
    )

    classes = real_classes()
    counted = tally if tally is not None else Tally()

    class Unparked:
        """The binding the harness connector asks where to park: here, nowhere (the
        baseline runs every call to completion)."""

    class ScriptedConnector(classes.connector):  # type: ignore[misc, name-defined]
        """The harness connector; ``put`` returns (or raises) what the rule chose."""

        def __init__(self) -> None:
            self.binding = Unparked()
            self.stage_id = STAGE_ID
            # (key, internal id, finished, segment finished, empty)
            self.sent: list[tuple[str, str, bool, bool, bool]] = []
            self.store: dict[str, Any] = {}
            self.unread: deque[tuple[str, str, bool, bool, bool]] = deque()
            self.closed = False
            self.outcome = "ok"
            self.request_id = ""

        def put(
            self, from_stage: str, to_stage: str, put_key: str, data: Any
        ) -> tuple[bool, int, dict[str, Any] | None]:
            if self.outcome == "raise":
                raise ConnectionError(f"baseline: connector put of {put_key} raised")
            if self.outcome == "false":
                return False, 0, None
            self.sent.append((put_key, self.request_id, *describe_payload(data)))
            self.store[put_key] = data
            return True, 1, None

    class ProcessorRaised(RuntimeError):
        pass

    class Baseline(RuleBasedStateMachine):
        def __init__(self) -> None:
            super().__init__()
            self.connector = ScriptedConnector()
            self.adapter: Any = make_adapter(self.connector)
            self.adapter.custom_process_next_stage_input_func = self.processor
            # The adapter's own save thread is stopped; tasks run one at a time on
            # this example's stand-in for it, each to completion.
            self.save_thread = ThreadPoolExecutor(1, thread_name_prefix="baseline-save")
            self.processor_outcome = "payload"
            self.current: dict[str, Any] = {}  # external id -> its latest request
            self.generation: Counter[str] = Counter()
            self.tokens: Counter[str] = Counter()  # grow per external id (the watermark)
            self.saved: set[str] = set()  # internal ids with an accepted save
            self.joined: set[str] = set()  # internal ids that joined an older generation
            self.terminals: dict[str, str] = {}  # accepted terminal: internal -> external id
            self.delivered: set[str] = set()
            self.failed: dict[str, str] = {}
            self.broken = False

        def processor(
            self,
            transfer_manager: Any,
            multimodal_output: Any,
            request: Any,
            is_finished: bool,
            new_token_ids: tuple[int, ...] = (),
        ) -> Any:
            if self.processor_outcome == "raise":
                raise ProcessorRaised(f"baseline: processor raised for {request.request_id}")
            if self.processor_outcome == "none":
                return None
            return classes.payload(request_id=request.request_id, generated_len=1)

        # -- helpers ---------------------------------------------------------------

        def running(self) -> list[str]:
            return [e for e, r in self.current.items() if r.status == classes.status.RUNNING]

        def may_start(self) -> list[str]:
            return [e for e in EXTS if e not in self.current or self.current[e].is_finished()]

        def abortable(self) -> list[str]:
            aborted = classes.status.FINISHED_ABORTED
            return [e for e, r in self.current.items() if r.status != aborted]

        def collect(self) -> None:
            self.failed.update(self.adapter.collect_failed_send_request_ids())

        def fail(self, check: str, detail: str) -> None:
            self.broken = True
            raise BaselineFailure(check, detail)

        @contextmanager
        def step(self) -> Iterator[None]:
            counted.steps += 1
            try:
                yield
                self.collect()
            except BaseException:
                self.broken = True
                raise

        def save(self, ext: str, *, terminal: bool) -> None:
            request = self.current[ext]
            rid = request.request_id
            joins = rid not in self.saved and self.adapter.has_active_sender(ext)
            self.tokens[ext] += 1
            request.num_computed_tokens = self.tokens[ext]
            if terminal:
                request.status = classes.status.FINISHED_STOPPED
            queue = self.adapter._pending_save_reqs
            before = len(queue)
            self.adapter.save_async(None, request)
            if len(queue) > before and queue[-1]["request"].request_id == rid:
                self.saved.add(rid)
                if joins:
                    self.joined.add(rid)
                if terminal:
                    self.terminals[rid] = ext

        def run_one(self, processor: str, put: str) -> None:
            task = self.adapter._pending_save_reqs.popleft()
            rid = task["request"].request_id
            self.processor_outcome = processor
            self.connector.outcome = put
            self.connector.request_id = rid
            sent = len(self.connector.sent)
            # save_loop's body, run to completion before the next rule
            self.save_thread.submit(run_save_task, self.adapter, task).result()
            for _, put_rid, finished, _, _ in self.connector.sent[sent:]:
                if not finished:
                    continue
                self.delivered.add(put_rid)
                ext = task["request"].external_req_id
                leaks = [
                    name
                    for name in ("_sender_tokens", "put_req_chunk", "requests_num_chunks_sent")
                    if ext in getattr(self.adapter, name)
                ]
                if leaks:
                    self.fail(SENDER_LEFT, f"{leaks} hold {ext} after {put_rid}'s terminal")

        # -- rules -----------------------------------------------------------------

        @precondition(lambda self: bool(self.may_start()))
        @rule(data=st.data())
        def new_request(self, data: st.DataObject) -> None:
            ext = data.draw(st.sampled_from(self.may_start()), label="ext")
            with self.step():
                self.generation[ext] += 1
                request = classes.request(
                    f"{ext}-r{self.generation[ext]}",
                    prompt_token_ids=[1, 2, 3],
                    sampling_params=classes.sampling_params(max_tokens=16),
                    pooling_params=None,
                    external_req_id=ext,
                )
                request.status = classes.status.RUNNING
                self.current[ext] = request

        @precondition(lambda self: bool(self.running()))
        @rule(data=st.data(), terminal=st.booleans())
        def save_async(self, data: st.DataObject, terminal: bool) -> None:
            ext = data.draw(st.sampled_from(self.running()), label="ext")
            with self.step():
                self.save(ext, terminal=terminal)

        @precondition(lambda self: bool(self.abortable()))
        @rule(data=st.data())
        def abort(self, data: st.DataObject) -> None:
            ext = data.draw(st.sampled_from(self.abortable()), label="ext")
            with self.step():
                request = self.current[ext]
                status = classes.status.FINISHED_ABORTED
                rid = request.request_id
                self.adapter.finish_requests([rid], status, {rid: request})
                request.status = status

        @rule(ext=st.sampled_from(EXTS))
        def cleanup_sender(self, ext: str) -> None:
            with self.step():
                self.adapter.cleanup_sender(ext)

        @precondition(lambda self: bool(self.adapter._pending_save_reqs))
        @rule(processor=st.sampled_from(PROCESSOR_OUTCOMES), put=st.sampled_from(PUT_OUTCOMES))
        def pump(self, processor: str, put: str) -> None:
            with self.step():
                self.run_one(processor, put)

        def teardown(self) -> None:
            try:
                if not self.broken:
                    while self.adapter._pending_save_reqs:
                        with self.step():
                            self.run_one("payload", "ok")
                    lost = sorted(
                        rid
                        for rid in self.terminals
                        if rid not in self.joined
                        and rid not in self.delivered
                        and rid not in self.failed
                    )
                    if lost:
                        self.fail(TERMINAL_LOST, f"neither delivered nor failed: {lost}")
            finally:
                self.save_thread.shutdown()
                self.adapter.shutdown()

    return Baseline


# -- running a state machine until its first failure ---------------------------------


class OutOfTime(Exception):
    """The per-run cap ran out before a failure (raised when an example starts)."""


@dataclass(frozen=True)
class Attempt:
    """One seeded search: found or not, how long it took, after how many examples."""

    found: bool
    seconds: float
    examples: int
    what: str


@dataclass
class Clock:
    """One search's cap, its example count and when its first failing example ended."""

    deadline: float
    examples: int = 0
    failed_at: float | None = None

    def failed(self) -> None:
        if self.failed_at is None:
            self.failed_at = time.perf_counter()


def _failing(exc: BaseException | None) -> bool:
    # Hypothesis ends examples with its own exceptions (StopTest when the choice
    # buffer overruns is a BaseException); those are not failures.
    return isinstance(exc, Exception) and not isinstance(exc, HypothesisException)


def timed(machine: type[M], clock: Clock) -> type[M]:
    """`machine`, refusing to start an example after the cap; notes the first failure.

    The cap stops applying once an example failed, so Hypothesis' final replay of
    that example still runs; the failure's time is when the failing example ended,
    not when the replay did.
    """

    class Timed(machine):  # type: ignore[valid-type, misc]
        def __init__(self) -> None:
            if clock.failed_at is None and time.perf_counter() > clock.deadline:
                raise OutOfTime
            clock.examples += 1
            self._handled_before = sys.exc_info()[1]
            try:
                super().__init__()
            except Exception:
                clock.failed()
                raise

        def teardown(self) -> None:
            raised = sys.exc_info()[1]  # teardown runs in Hypothesis' ``finally``
            if raised is not self._handled_before and _failing(raised):
                clock.failed()
            try:
                super().teardown()
            except Exception:
                clock.failed()
                raise

    Timed.__name__ = Timed.__qualname__ = machine.__name__
    # Hypothesis keys a run by its class's source: `inspect.getsource` would parse
    # this whole module at every run (tens of milliseconds, counted against both
    # tools); a module it cannot open makes it fall back to the class name.
    Timed.__module__ = f"{__name__}.timed"
    return Timed


def search_settings(max_examples: int) -> settings:
    """The mutation tests' fast-finding search: generate only, no shrinking."""
    return settings(
        max_examples=max_examples,
        stateful_step_count=STEP_COUNT,
        deadline=None,
        database=None,
        derandomize=False,
        phases=[Phase.generate],
        report_multiple_bugs=False,
        suppress_health_check=list(HealthCheck),
    )


def describe(exc: BaseException) -> str:
    """A short name for what a failing search raised."""
    if isinstance(exc, Finding):
        if exc.kind == "conformance":  # name the observations that differ
            parts = exc.detail.partition(" - ")[2].split("; ")
            return f"conformance ({', '.join(p.split(':')[0] for p in parts)})"
        return exc.property_id
    if isinstance(exc, BaselineFailure):
        return exc.check
    return type(exc).__name__  # a crash of the real code a baseline rule called


def first_failure(
    machine: type[RuleBasedStateMachine], seed: int, cap: float, max_examples: int
) -> Attempt:
    """Search `machine` with `seed` until its first failure, `cap` seconds or the examples."""
    started = time.perf_counter()
    clock = Clock(started + cap)
    seeded = hypothesis_seed(seed)(timed(machine, clock))
    try:
        run_state_machine_as_test(seeded, settings=search_settings(max_examples))  # type: ignore[no-untyped-call,unused-ignore]
    except OutOfTime:
        return Attempt(False, cap, clock.examples, "")
    except Exception as exc:
        if clock.failed_at is None and _out_of_time(exc):
            return Attempt(False, cap, clock.examples, "")
        ended = clock.failed_at if clock.failed_at is not None else time.perf_counter()
        return Attempt(True, ended - started, clock.examples, describe(exc))
    return Attempt(False, time.perf_counter() - started, clock.examples, "")


def require_clean(tool: str, attempt: Attempt) -> None:
    """Stop unless `tool` passed its search of the unmutated adapter.

    A tool that fails there (a harness out of date, say) would "find" every
    mutant at once, and its figures would say so; better no figures.
    """
    if attempt.found:
        raise SystemExit(
            f"benchmarks/fuzz.py: {tool} fails on the unmutated 0.30.0 adapter "
            f"({attempt.what}), so its time to each mutant would be false; fix its harness "
            f"(benchmarks/fuzz.py, statecore.models.bindings.vllm_omni_harness) first"
        )


def _out_of_time(exc: BaseException) -> bool:
    """Whether `exc` is the cap, possibly wrapped by Hypothesis.

    Hypothesis reports an exception from a state machine's constructor that
    earlier examples did not raise as ``FlakyStrategyDefinition``, with the
    ``OutOfTime`` as its cause or context (or inside an exception group).
    """
    seen: set[int] = set()
    pending: list[BaseException] = [exc]
    while pending:
        current = pending.pop()
        if id(current) in seen:
            continue
        seen.add(id(current))
        if isinstance(current, OutOfTime):
            return True
        pending.extend(e for e in (current.__cause__, current.__context__) if e is not None)
        pending.extend(getattr(current, "exceptions", ()))
    return False


@contextmanager
def mutated(mutant: Any) -> Iterator[None]:
    """The real adapter class with `mutant`'s patches (restored on exit)."""
    from statecore.models.bindings.vllm_omni import real_classes

    cls = real_classes().adapter
    patches = mutant.patches(cls)
    missing = object()
    saved = {name: cls.__dict__.get(name, missing) for name in patches}
    for name, value in patches.items():
        setattr(cls, name, value)
    try:
        yield
    finally:
        for name, old in saved.items():
            if old is missing:
                delattr(cls, name)
            else:
                setattr(cls, name, old)


# -- part 1: steps per second --------------------------------------------------------


@dataclass(frozen=True)
class Speed:
    """One throughput row."""

    label: str
    examples: int
    steps: int
    seconds: float
    note: str

    @property
    def steps_per_second(self) -> float:
        return self.steps / self.seconds if self.seconds > 0 else 0.0

    @property
    def examples_per_second(self) -> float:
        return self.examples / self.seconds if self.seconds > 0 else 0.0


def statecore_speed(
    label: str, system: System, factory: Callable[[], Adapter], examples: int
) -> Speed:
    report = fuzz(system, factory, max_examples=examples, seed=0)
    if report.finding is not None:
        note = f"FINDING {report.finding.property_id} (run stopped, shrunk)"
    elif report.known:
        note = f"known: {', '.join(sorted(report.known))}"
    else:
        note = "no finding"
    # Every phase is timed (guided paths, search, shrinking), so every phase's
    # runs and steps are counted: a guided path is one run, like an example.
    paths = report.guided.paths if report.guided is not None else 0
    note += f"; {paths} guided paths + {report.examples} examples"
    return Speed(label, paths + report.examples, report.all_steps, report.seconds, note)


def baseline_speed(examples: int) -> Speed:
    tally = Tally()
    machine = baseline_machine(tally)
    warm = machine()  # first-use costs stay outside the timing, as in fuzz()
    warm.teardown()
    tally.steps = 0
    clock = Clock(math.inf)
    started = time.perf_counter()
    seeded = hypothesis_seed(0)(timed(machine, clock))
    note = "no failure"
    try:
        run_state_machine_as_test(seeded, settings=search_settings(examples))  # type: ignore[no-untyped-call,unused-ignore]
    except Exception as exc:  # the unmutated 0.30.0 adapter must pass its own checks
        what = f"{type(exc).__name__}: {str(exc)[:60]}"
        require_clean("the baseline", Attempt(True, 0.0, clock.examples, what))
    seconds = time.perf_counter() - started
    return Speed("baseline: Hypothesis, real adapter", clock.examples, tally.steps, seconds, note)


def measure_speeds(mode: Mode) -> tuple[list[Speed], list[str]]:
    from statecore.models.bindings.vllm_omni import (
        OmniChunkTransferAdapterBinding,
        fuzz_system_0_30_0,
    )

    n = mode.throughput_examples
    rows = [
        statecore_speed(
            "statecore: vllm-omni (real adapter)",
            fuzz_system_0_30_0(),
            OmniChunkTransferAdapterBinding,
            n,
        )
    ]
    notes: list[str] = []
    for target, adapter in REFERENCE_ADAPTERS:
        try:
            system, factory, _ = resolve_adapter(target, adapter)
        except (StatecoreError, ImportError) as exc:
            notes.append(f"skipped statecore: {adapter}: {exc}")
            continue
        rows.append(statecore_speed(f"statecore: {adapter} (reference)", system, factory, n))
    rows.append(baseline_speed(n))
    return rows, notes


# -- part 3: every core ------------------------------------------------------------------


@dataclass(frozen=True)
class WorkersRow:
    """`statecore fuzz --workers N` on the real adapter for a fixed budget."""

    workers: int
    steps: int
    seconds: float
    per_worker: tuple[float, ...]  # steps/s of each worker

    @property
    def steps_per_second(self) -> float:
        return self.steps / self.seconds if self.seconds > 0 else 0.0


def measure_workers(mode: Mode) -> list[WorkersRow]:
    """1 and 2 worker processes, each for `mode.workers_budget` seconds, a fresh database."""
    import tempfile

    from statecore.models.bindings.vllm_omni import (
        OmniChunkTransferAdapterBinding,
        fuzz_system_0_30_0,
    )

    from statecore.fuzzing.workers import fuzz_workers

    rows = []
    for workers in (1, 2):
        with tempfile.TemporaryDirectory() as database:
            report = fuzz_workers(
                fuzz_system_0_30_0(),
                OmniChunkTransferAdapterBinding,
                workers=workers,
                database=database,
                budget=mode.workers_budget,
            )
        per = tuple(w.steps_per_second for w in report.workers)
        rows.append(WorkersRow(workers, report.steps, report.seconds, per))
    return rows


# -- part 2: time to the first failure -------------------------------------------------


@dataclass(frozen=True)
class Outcome:
    """One tool on one target: its attempts over the seeds (None: cannot attempt)."""

    attempts: tuple[Attempt, ...] | None

    @property
    def median(self) -> float:
        """Median seconds to the first failure; a miss counts as infinite."""
        if not self.attempts:
            return math.nan
        return statistics.median(a.seconds if a.found else math.inf for a in self.attempts)

    @property
    def median_examples(self) -> float:
        """Median examples run to the first failure (load-independent); a miss is infinite."""
        if not self.attempts:
            return math.nan
        return statistics.median(a.examples if a.found else math.inf for a in self.attempts)

    @property
    def found(self) -> bool:
        """Found within the cap in more than half of the seeds (the median is finite)."""
        return self.attempts is not None and math.isfinite(self.median)

    @property
    def hits(self) -> str:
        if self.attempts is None:
            return "n/a"
        return f"{sum(a.found for a in self.attempts)}/{len(self.attempts)}"

    @property
    def what(self) -> str:
        if self.attempts is None:
            return "n/a"
        seen = Counter(a.what for a in self.attempts if a.found)
        return ", ".join(w for w, _ in seen.most_common(2)) or "-"


@dataclass(frozen=True)
class Target:
    name: str
    kind: str  # "mutant" or "variant"
    statecore: Outcome
    baseline: Outcome


def run_seeds(
    make: Callable[[], type[RuleBasedStateMachine]],
    mode: Mode,
    around: Callable[[], Any] | None = None,
) -> Outcome:
    """`make`'s machine searched with seeds 0, 1, ... as `mode` says (see `Mode`)."""
    attempts: list[Attempt] = []
    spent = 0.0
    for seed in range(mode.max_seeds):
        if seed >= mode.seeds and spent >= mode.seed_budget:
            break
        context = around() if around is not None else nullcontext()
        with context:  # a fresh mutant per run: its patches may hold per-run state
            attempt = first_failure(make(), seed, mode.cap, mode.max_examples)
        attempts.append(attempt)
        spent += attempt.seconds
    return Outcome(tuple(attempts))


def measure_targets(mode: Mode, progress: Callable[[str], None]) -> list[Target]:
    from statecore.models.bindings.vllm_omni import (
        MUTANTS,
        OmniChunkTransferAdapterBinding,
        fuzz_system_0_30_0,
    )

    model = fuzz_system_0_30_0()

    def statecore_machine() -> type[RuleBasedStateMachine]:
        return state_machine(model, OmniChunkTransferAdapterBinding)

    # First-use costs stay outside the timing, as in part 1: each tool searches the
    # unmutated adapter once, so the first mutant does not pay for them alone.
    for tool, machine in (("statecore", statecore_machine), ("the baseline", baseline_machine)):
        require_clean(tool, first_failure(machine(), WARM_UP_SEED, mode.cap, WARM_UP_EXAMPLES))
    targets: list[Target] = []
    for mutant in MUTANTS:

        def apply(mutant: Any = mutant) -> Any:
            return mutated(mutant)

        ours = run_seeds(statecore_machine, mode, apply)
        theirs = run_seeds(baseline_machine, mode, apply)
        targets.append(Target(mutant.name, "mutant", ours, theirs))
        progress(f"  {mutant.name}: statecore {ours.hits}, baseline {theirs.hits}")
    for variant, registered in VARIANTS:
        system, factory, _ = resolve_adapter("chunk_transfer", f"model:{registered}")

        def variant_machine(
            system: System = system, factory: Callable[[], Adapter] = factory
        ) -> type[RuleBasedStateMachine]:
            return state_machine(system, factory)

        ours = run_seeds(variant_machine, mode)
        targets.append(Target(variant, "variant", ours, Outcome(None)))
        progress(f"  {variant}: statecore {ours.hits}")
    return targets


# -- report -----------------------------------------------------------------------------


def seconds(value: float, cap: float) -> str:
    if math.isnan(value):
        return "n/a"
    return f">{cap:g}" if math.isinf(value) else f"{value:.2f}"


def count(value: float) -> str:
    if math.isnan(value):
        return "n/a"
    return "-" if math.isinf(value) else f"{value:.0f}"


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    parser.add_argument(
        "--quick", action="store_true", help="3-15 seeds, a 30 s cap, fewer examples (~5 min)"
    )
    args = parser.parse_args()
    mode = QUICK if args.quick else FULL

    def progress(line: str) -> None:
        print(line, file=sys.stderr, flush=True)

    started = time.perf_counter()
    try:
        from statecore.models.bindings.vllm_omni import MUTANTS, real_classes

        real_classes()  # the 15-50 s import, once, outside every timing
    except (ImportError, AdapterError) as exc:
        raise SystemExit(f"benchmarks/fuzz.py needs the vLLM stack: {exc}") from exc
    progress(f"vllm-omni imported in {time.perf_counter() - started:.0f}s")
    load = ", ".join(f"{x:.1f}" for x in os.getloadavg())
    print(f"{'quick' if args.quick else 'full'} mode; load average {load} on {os.cpu_count()} CPUs")

    with spaced_full_collections():  # `fuzz`'s pacing, for both tools alike
        speeds, notes = measure_speeds(mode)
    print(f"1. fuzz throughput (max_examples={mode.throughput_examples} each, seed 0)")
    print(f"{'fuzzer / implementation':<48}{'examples/s':>11}{'steps/s':>10}{'steps/ex':>10}  note")
    for row in speeds:
        per = row.steps / row.examples if row.examples else 0.0
        print(
            f"{row.label:<48}{row.examples_per_second:>11.1f}{row.steps_per_second:>10.0f}"
            f"{per:>10.1f}  {row.note}"
        )
    for note in notes:
        print(f"  {note}")
    print(
        "  examples: state machines Hypothesis built (discarded ones included); a statecore "
        "step is one model action\n  (a send = begin, process, put, finish), a baseline pump step "
        "runs a whole send"
    )

    progress("workers ...")
    workers = measure_workers(mode)
    print()
    print(
        f"3. fuzz on every core: statecore fuzz --workers N on the real adapter, "
        f"--budget {mode.workers_budget:g} each (fresh model memo per worker process)"
    )
    print(f"{'workers':>8}{'steps':>10}{'wall s':>9}{'steps/s':>10}  per worker steps/s")
    for wrow in workers:
        each = ", ".join(f"{x:,.0f}" for x in wrow.per_worker)
        print(
            f"{wrow.workers:>8}{wrow.steps:>10,}{wrow.seconds:>9.1f}"
            f"{wrow.steps_per_second:>10,.0f}  {each}"
        )
    one = workers[0].steps_per_second
    print(
        f"   speed-up from 1 to 2 processes: {workers[1].steps_per_second / one:.2f}x "
        f"(load average then {', '.join(f'{x:.1f}' for x in os.getloadavg())} on "
        f"{os.cpu_count()} CPUs)"
        if one
        else "   speed-up: n/a"
    )

    progress("time to first failure ...")
    with spaced_full_collections():
        targets = measure_targets(mode, progress)
    print()
    print(
        f"2. time to the first failure: median over {mode.seeds} to {mode.max_seeds} seeds "
        f"(seconds, and examples run), cap {mode.cap:g}s per run, a miss counts as infinite;\n"
        f"   a tool runs more seeds on a target while its runs there took under "
        f"{mode.seed_budget:g} s in all (hits: found / seeds run)"
    )
    print(
        "   both tools: generate-only search (no shrinking); statecore with the known 0.30.0 "
        f"findings allowed;\n   each warmed up by one untimed {WARM_UP_EXAMPLES}-example search "
        "of the unmutated adapter"
    )
    width = max(len(t.name) for t in targets) + 2
    print(
        f"{'':<{width + 9}}{'statecore':-^25}  {'baseline':-^25}\n"
        f"{'target':<{width}}{'kind':<9}{'seconds':>9}{'examples':>10}{'hits':>6}  "
        f"{'seconds':>9}{'examples':>10}{'hits':>6}  statecore finds / baseline finds"
    )
    for t in targets:
        ours, theirs = t.statecore, t.baseline
        print(
            f"{t.name:<{width}}{t.kind:<9}{seconds(ours.median, mode.cap):>9}"
            f"{count(ours.median_examples):>10}{ours.hits:>6}  "
            f"{seconds(theirs.median, mode.cap):>9}{count(theirs.median_examples):>10}"
            f"{theirs.hits:>6}  {ours.what} / {theirs.what}"
        )
    attemptable = [t for t in targets if t.baseline.attempts is not None]
    print(
        f"   mutants: patched into the real class for both tools; the baseline attempts these "
        f"{len(attemptable)}"
    )
    print(
        "   variants: statecore runs each as the implementation (SystemAdapter) against the "
        "reference chunk_transfer\n   model; they are models, not code the baseline can "
        "drive (n/a)"
    )
    print("   a target counts as found when found within the cap in more than half the seeds")

    assert len(attemptable) == len(MUTANTS)
    progress(f"total {time.perf_counter() - started:.0f}s")
    for line in result_lines(speeds[0].steps_per_second, targets):
        print(line)


def result_lines(real_steps_per_second: float, targets: list[Target]) -> list[str]:
    """The RESULT lines: real-adapter mutants and model variants, each over its own count.

    A mutant is the real adapter class with a bug patched in, which both tools
    attempt; a variant is a model run as the implementation, which only
    statecore can drive. Summing them would mix two denominators.
    """
    mutants = [t for t in targets if t.kind == "mutant"]
    variants = [t for t in targets if t.kind == "variant"]
    baseline = [t.baseline for t in mutants]
    return [
        f"RESULT real_adapter_steps_per_s={real_steps_per_second:.0f} "
        f"mutants_found={_found([t.statecore for t in mutants])} "
        f"mutants_median_seconds={_median([t.statecore for t in mutants]):.2f} "
        f"baseline_mutants_found={_found(baseline)} "
        f"baseline_mutants_median_seconds={_median(baseline):.2f}",
        f"RESULT model_variants_found={_found([t.statecore for t in variants])} "
        f"model_variants_median_seconds={_median([t.statecore for t in variants]):.2f}",
    ]


def _found(outcomes: list[Outcome]) -> str:
    return f"{sum(o.found for o in outcomes)}/{len(outcomes)}"


def _median(outcomes: list[Outcome]) -> float:
    return statistics.median(o.median for o in outcomes) if outcomes else math.nan


if __name__ == "__main__":
    main()
