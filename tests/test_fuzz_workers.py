"""Fuzzing in worker processes that share findings through a Hypothesis example database."""

from __future__ import annotations

import json
import shutil
import socket
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from hypothesis.database import InMemoryExampleDatabase
from statecore.models.chunk_transfer import CHUNK_TRANSFER, variant_4855, variant_6670

from statecore.adapter import Baton, SystemAdapter
from statecore.cli import main
from statecore.fuzzing.finding_store import DatabaseError, FindingStore, open_database
from statecore.fuzzing.fuzz import fuzz
from statecore.traces.trace import Trace, TraceStep

ADAPTER = "model:chunk_transfer_6670"
FUZZ_6670 = ["fuzz", "chunk_transfer", "--adapter", ADAPTER]


def trace_6670(extra: int = 0) -> Trace:
    """The shrunk #6670 finding (a terminal queued, then the request aborted), `extra`
    steps longer."""
    state = CHUNK_TRANSFER.init_states()[0]
    steps = [TraceStep(None, "", state)]
    for name in ["new_request", "save_terminal", "abort", *[""] * extra]:
        step_ = next(
            s for s in CHUNK_TRANSFER.successors(state) if s.action.name == name or not name
        )
        steps.append(TraceStep.of(step_))
        state = step_.state
    return Trace(CHUNK_TRANSFER.name, tuple(steps), "conformance", "violated", "differ")


def run_json(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, dict[str, Any]]:
    code = main([*argv, "--json"])
    return code, json.loads(capsys.readouterr().out)


# -- the store ----------------------------------------------------------------------


def test_the_store_keeps_the_shortest_trace_per_kind_and_property() -> None:
    db = InMemoryExampleDatabase()
    store = FindingStore(db, CHUNK_TRANSFER, ADAPTER)
    short = trace_6670()
    longer = trace_6670(extra=1)
    store.save("conformance", longer)
    store.save("conformance", short)
    store.save("conformance", longer)  # not kept: a shorter one is stored
    store.save("property", longer)  # another kind: kept beside it
    kept = store.fetch()
    assert [(f.kind, len(f.trace)) for f in kept] == [("conformance", 3), ("property", 4)]
    assert kept[0].trace.actions == short.actions
    # Another adapter's findings live under another key.
    assert FindingStore(db, CHUNK_TRANSFER, "other").fetch() == []


def test_a_stored_trace_the_model_no_longer_accepts_is_skipped() -> None:
    db = InMemoryExampleDatabase()
    store = FindingStore(db, CHUNK_TRANSFER, ADAPTER)
    db.save(store.key, b"not json")
    db.save(store.key, json.dumps({"#meta": {"kind": "conformance"}, "states": []}).encode())
    assert store.fetch() == []


def test_open_database_refuses_what_names_no_database(tmp_path: Path) -> None:
    (tmp_path / "file").write_text("x")
    with pytest.raises(DatabaseError, match="is a file"):
        open_database(tmp_path / "file")
    with pytest.raises(DatabaseError, match="unknown scheme"):
        open_database("http://example.invalid/db")


# -- one process ---------------------------------------------------------------------


def test_a_stored_finding_replays_before_the_guided_phase() -> None:
    db = InMemoryExampleDatabase()
    FindingStore(db, CHUNK_TRANSFER, ADAPTER).save("conformance", trace_6670())
    report = fuzz(
        CHUNK_TRANSFER, lambda: SystemAdapter(variant_6670(), ADAPTER), seed=0, database=db
    )
    assert report.finding is not None and report.finding.kind == "conformance"
    assert report.found_in == "replay" and report.replayed == 1
    assert report.guided is None and report.examples == 0


class _AppearsLater(InMemoryExampleDatabase):
    """What another worker stores while this one runs: hidden from the first fetch."""

    def __init__(self) -> None:
        super().__init__()
        self.fetches = 0

    def fetch(self, key: bytes) -> Any:
        self.fetches += 1
        return iter(()) if self.fetches == 1 else super().fetch(key)


def test_a_finding_stored_during_the_search_replays_after_the_batch() -> None:
    # #4855's variant, whose bug the first example of the search misses (#6670's
    # shows in the first example, whose choices are all the least taken).
    adapter = "model:chunk_transfer_4855"

    def implementation() -> SystemAdapter:
        return SystemAdapter(variant_4855(), adapter)

    options: dict[str, Any] = {"seed": 0, "max_examples": 1, "guided": False}
    # The premise: this one example does not find the bug by itself.
    assert fuzz(CHUNK_TRANSFER, implementation, **options).ok
    elsewhere = fuzz(CHUNK_TRANSFER, implementation, seed=0).finding  # another worker's
    assert elsewhere is not None
    db = _AppearsLater()
    FindingStore(db, CHUNK_TRANSFER, adapter).save(elsewhere.kind, elsewhere.trace)
    db.fetches = 0
    report = fuzz(CHUNK_TRANSFER, implementation, database=db, **options)
    assert report.finding is not None and report.found_in == "replay"
    assert report.examples == 1 and report.replayed == 1


def test_a_run_stores_its_shrunk_finding() -> None:
    db = InMemoryExampleDatabase()
    report = fuzz(CHUNK_TRANSFER, lambda: SystemAdapter(variant_6670(), ADAPTER), database=db)
    assert report.finding is not None and report.found_in == "guided"
    stored = FindingStore(db, CHUNK_TRANSFER, ADAPTER).fetch()
    assert [f.trace.actions for f in stored] == [report.finding.trace.actions]


# -- worker processes ------------------------------------------------------------------


def test_two_workers_split_the_examples_and_the_guided_paths(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    target = ["fuzz", "request_state_system", "--adapter", "request-state-accessor"]
    code, single = run_json(capsys, *target, "--max-examples", "4")
    assert code == 0 and single["ok"]
    db = ["--database", str(tmp_path / "db")]
    code, report = run_json(capsys, *target, "--workers", "2", "--max-examples", "4", *db)
    assert code == 0 and report["ok"] and report["findings"] == []
    workers = report["workers"]
    assert [w["seed"] for w in workers] == [0, 1]
    assert [w["examples"] for w in workers] == [2, 2]
    # Each worker runs every other guided path: together, the paths of one run.
    assert sum(w["guided_paths"] for w in workers) == single["guided"]["paths"]
    assert all(w["guided_paths"] > 0 for w in workers)
    assert report["steps"] == sum(w["steps"] for w in workers) > 0


def test_a_finding_of_one_run_replays_first_in_the_next_on_every_worker(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    db = tmp_path / "db"
    out = ["--trace-out", str(tmp_path / "traces"), "--database", str(db)]
    code, first = run_json(capsys, *FUZZ_6670, "--workers", "2", *out)
    assert code == 1
    # Both workers may find it; the merged report holds it once, shortest trace.
    assert [f["property"] for f in first["findings"]] == ["conformance"]
    assert first["findings"][0]["actions"] == [
        "new_request(ext=ext0)",
        "save_terminal(ext=ext0)",
        "abort(ext=ext0)",
    ]
    code, second = run_json(capsys, *FUZZ_6670, "--workers", "2", *out)
    assert code == 1
    for worker in second["workers"]:
        assert worker["found_in"] == "replay" and worker["replayed"] == 1
        assert worker["guided_paths"] == 0 and worker["examples"] == 0
    assert second["findings"][0]["actions"] == first["findings"][0]["actions"]
    # A single run with the same database replays it first too.
    code, single = run_json(capsys, *FUZZ_6670, *out)
    assert code == 1 and single["found_in"] == "replay"


class _ThreadedSelf(SystemAdapter):
    """The model as its own implementation, each step run on a `Baton` worker that parks once."""

    def setup(self, system: Any) -> None:
        super().setup(system)
        self.baton = Baton(timeout=5)

    def apply(self, step: Any, before: Any) -> None:
        def call() -> None:
            self.baton.park("midway")
            SystemAdapter.apply(self, step, before)

        assert self.baton.start(call) == "midway"
        assert self.baton.resume() is None
        self.baton.result()


def test_a_threaded_adapter_runs_in_forked_workers(tmp_path: Path) -> None:
    from statecore.fuzzing.workers import fuzz_workers

    warm = Baton()  # the parent has run a call: its threads do not come along a fork
    assert warm.start(lambda: None) is None
    report = fuzz_workers(
        CHUNK_TRANSFER,
        lambda: _ThreadedSelf(CHUNK_TRANSFER),
        workers=2,
        database=str(tmp_path / "db"),
        max_examples=4,
        guided=False,
    )
    assert report.ok, [f.detail for f in report.findings]
    assert all(w.steps > 0 for w in report.workers)


@pytest.mark.parametrize("on_spare", [False, True], ids=["at-once", "on-the-spare"])
def test_each_baton_call_runs_on_a_fresh_thread(on_spare: bool) -> None:
    """Per-thread state an implementation keeps (threading.local) never leaks into the next call.

    Also when the call runs on the spare thread the call before started for it.
    """
    import threading
    import time

    from statecore.adapter import _Spare

    local = threading.local()
    baton = Baton(timeout=5)
    seen: list[object] = []
    spares: list[object] = []

    def call() -> None:
        seen.append(getattr(local, "mark", None))
        local.mark = "left by an earlier call"
        baton.park("midway")

    for _ in range(3):
        deadline = time.monotonic() + 5
        while on_spare and _Spare._waiting is None and time.monotonic() < deadline:
            time.sleep(0.001)  # the call before starts the spare once it has ended
        spares.append(_Spare._waiting)
        assert baton.start(call) == "midway"
        assert baton.resume() is None
    assert seen == [None, None, None]
    if on_spare:  # each call took a spare of its own
        assert all(spares[1:]) and len({id(s) for s in spares[1:]}) == 2


def test_an_adapter_that_cannot_run_in_a_worker_is_one_line(tmp_path: Path) -> None:
    from statecore.errors import StatecoreError
    from statecore.fuzzing.workers import fuzz_workers

    def broken() -> SystemAdapter:
        raise ValueError("no such service")

    with pytest.raises(StatecoreError, match=r"fuzz worker \d: building the adapter raised"):
        fuzz_workers(CHUNK_TRANSFER, broken, workers=2, database=str(tmp_path / "db"))


def test_workers_refuse_bad_flags(capsys: pytest.CaptureFixture[str]) -> None:
    assert main([*FUZZ_6670, "--workers", "0"]) == 2
    assert "--workers 0: must be a positive number of processes" in capsys.readouterr().err
    bad = ["--workers", "2", "--database", "ftp://x"]
    assert main([*FUZZ_6670, *bad]) == 2
    assert "unknown scheme" in capsys.readouterr().err


# -- Redis, across machines -------------------------------------------------------------


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
        return port


@pytest.fixture
def redis_url(tmp_path: Path) -> Iterator[str]:
    """A real redis-server on a free loopback port, for this test only."""
    server = shutil.which("redis-server")
    if server is None:
        pytest.skip("redis-server is not installed (apt-get install redis-server; .ci/run does)")
    pytest.importorskip("redis", reason="the Redis client is the statecore[redis] extra")
    import redis

    port = _free_port()
    process = subprocess.Popen(
        [server, "--port", str(port), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no"],
        cwd=tmp_path,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        client = redis.Redis(host="127.0.0.1", port=port)
        for _ in range(100):
            try:
                client.ping()
                break
            except redis.exceptions.ConnectionError:
                time.sleep(0.05)
        else:
            pytest.fail("redis-server did not answer within 5 s")
        yield f"redis://127.0.0.1:{port}/0"
    finally:
        process.terminate()
        process.wait(timeout=10)


def test_workers_share_findings_through_redis(
    redis_url: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = ["--trace-out", str(tmp_path / "traces"), "--database", redis_url]
    code, first = run_json(capsys, *FUZZ_6670, "--workers", "2", *out)
    assert code == 1 and first["database"] == redis_url
    assert all(w["found_in"] != "replay" for w in first["workers"] if w["replayed"] == 0)
    code, second = run_json(capsys, *FUZZ_6670, "--workers", "2", *out)
    assert code == 1
    assert [w["found_in"] for w in second["workers"]] == ["replay", "replay"]
    assert second["findings"][0]["actions"] == first["findings"][0]["actions"]


def test_an_unreachable_redis_is_one_line(capsys: pytest.CaptureFixture[str]) -> None:
    pytest.importorskip("redis", reason="the Redis client is the statecore[redis] extra")
    url = f"redis://127.0.0.1:{_free_port()}/0"  # nothing listens there
    assert main([*FUZZ_6670, "--database", url]) == 2
    assert "cannot reach Redis" in capsys.readouterr().err


# -- the pytest plugin ---------------------------------------------------------------------


def test_the_pytest_plugin_stores_and_replays_through_a_shared_database(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from statecore.fuzzing import fuzz as fuzz_module
    from statecore.fuzzing.pytest_plugin import fuzz_test

    reports: list[Any] = []
    real = fuzz_module.fuzz

    def spy(*args: Any, **kwargs: Any) -> Any:
        reports.append(real(*args, **kwargs))
        return reports[-1]

    monkeypatch.setattr(fuzz_module, "fuzz", spy)
    db = str(tmp_path / "db")

    class Config:
        def getoption(self, name: str, default: object = None) -> object:
            return db if name == "--statecore-database" else default

    class Request:
        config = Config()
        module = None

    test = fuzz_test(CHUNK_TRANSFER, lambda: SystemAdapter(variant_6670(), ADAPTER))
    for run in range(2):  # as two pytest runs, or two pytest-xdist workers one after the other
        (tmp_path / str(run)).mkdir()
        with pytest.raises(pytest.fail.Exception, match="conformance"):
            test(Request(), tmp_path / str(run))
    assert [r.found_in for r in reports] == ["guided", "replay"]
    assert len(FindingStore(open_database(db), CHUNK_TRANSFER, ADAPTER).fetch()) == 1
