"""Fuzz findings kept in a Hypothesis example database, so every run replays them first.

A finding is stored as its trace in ITF (with the finding's kind in the
header) under one key per system and adapter, in any Hypothesis
``ExampleDatabase``: a ``DirectoryBasedExampleDatabase`` shared by the worker
processes of one machine (and by the next run), or a ``RedisExampleDatabase``
shared across machines. Traces hold model actions, not Hypothesis choice
sequences, so a stored finding replays the same way whatever the seed, the
swarm draw or the Hypothesis version. One trace is kept per kind and property:
the shortest.

`open_database` turns a ``--database`` argument (a directory or
``redis://host:port/db``) into a database; the Redis client is the optional
``statecore[redis]`` extra.
"""

from __future__ import annotations

import importlib
import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..errors import StatecoreError
from ..system import System
from ..traces.itf import trace_from_itf, trace_to_itf
from ..traces.trace import Trace

KEY_PREFIX = "statecore-fuzz"
DEFAULT_DIRECTORY = Path(".hypothesis") / "examples"
"""Where ``statecore fuzz --workers N`` keeps findings without ``--database``: Hypothesis'
own default directory, so the next run (and ``pytest`` with Hypothesis) finds them too."""


class DatabaseError(StatecoreError):
    """A ``--database`` argument that names no usable example database."""


@dataclass(frozen=True)
class StoredFinding:
    """One stored finding: its kind, its trace, and the exact bytes it is stored as."""

    kind: str
    trace: Trace
    raw: bytes

    @property
    def property_id(self) -> str:
        return self.trace.property_id


def open_database(spec: str | Path) -> Any:
    """The Hypothesis example database `spec` names: a directory, or ``redis://...``."""
    text = str(spec)
    if text.startswith(("redis://", "rediss://", "unix://")):
        return _redis_database(text)
    if "://" in text:
        raise DatabaseError(
            f"--database {text}: unknown scheme; give a directory or redis://host:port/db"
        )
    from hypothesis.database import DirectoryBasedExampleDatabase

    path = Path(text)
    if path.exists() and not path.is_dir():
        raise DatabaseError(f"--database {text}: is a file; give a directory (created if missing)")
    return DirectoryBasedExampleDatabase(path)


def _redis_database(url: str) -> Any:
    try:
        redis = importlib.import_module("redis")
        extra = importlib.import_module("hypothesis.extra.redis")
    except ImportError:
        raise DatabaseError(
            f"--database {url}: the Redis client is not installed; install it with: "
            "pip install 'statecore[redis]'"
        ) from None
    client = redis.Redis.from_url(url)
    try:
        client.ping()
    except redis.exceptions.RedisError as exc:
        raise DatabaseError(
            f"--database {url}: cannot reach Redis ({exc}); start redis-server or fix the URL"
        ) from None
    return extra.RedisExampleDatabase(client, key_prefix=b"statecore:")


def store_key(system: System, adapter: str) -> bytes:
    """The database key of `system`'s findings on `adapter`."""
    return f"{KEY_PREFIX}/{system.name}/{adapter}".encode()


class FindingStore:
    """The findings of one system and adapter in `database`; the shortest per property."""

    def __init__(self, database: Any, system: System, adapter: str) -> None:
        self.database = database
        self.system = system
        self.key = store_key(system, adapter)

    def fetch(self) -> list[StoredFinding]:
        """Every stored finding that still decodes against the system, shortest first.

        A trace the model no longer accepts (an action renamed, a variable
        gone) is skipped, not deleted: another version of the model may
        still share the database.
        """
        found = []
        for raw in self.database.fetch(self.key):
            decoded = self._decode(raw)
            if decoded is not None:
                found.append(decoded)
        return sorted(found, key=lambda f: (len(f.trace), f.kind, f.property_id, f.raw))

    def save(self, kind: str, trace: Trace) -> None:
        """Keep `trace` unless a trace of the same kind and property is as short; drop longer."""
        raw = self.encode(kind, trace)
        for old in self.fetch():
            if (old.kind, old.property_id) != (kind, trace.property_id):
                continue
            if len(old.trace) <= len(trace):
                return
            self.database.delete(self.key, old.raw)
        self.database.save(self.key, raw)

    def encode(self, kind: str, trace: Trace) -> bytes:
        obj = trace_to_itf(trace, self.system)
        header = obj["#meta"]
        assert isinstance(header, dict)
        header["kind"] = kind
        return json.dumps(obj, sort_keys=True, separators=(",", ":")).encode()

    def _decode(self, raw: bytes) -> StoredFinding | None:
        try:
            obj = json.loads(raw)
            kind = obj["#meta"]["kind"]
            trace = trace_from_itf(obj, self.system)
        except (ValueError, KeyError, TypeError, StatecoreError):
            return None
        return StoredFinding(str(kind), trace, raw) if trace.steps else None
