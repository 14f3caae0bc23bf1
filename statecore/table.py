"""A finite machine's steps under a few prepared events, computed once: a fire is a lookup.

An `Instance` is one object, one lock and a walk of the shared memo per
fire. An owner that keeps many short-lived instances under a lock of its own
(the checked chunk-transfer adapter opens one request-state generation per
request, under its sender lock) pays for all three on every request. A
`Table` takes the machine and the `Prepared` events the owner fires, and
runs `step` on every snapshot they reach from the initial one, twice each.
The owner then keeps the `Row` it stands on (``table.initial`` to start), and
a fire is ``outcome, row = row.edges[prepared]``: one dict lookup, the
outcome `step` gives.

`Table.fire` is the same lookup with the error path: an event the table was
not built with raises `FireError`, and a step that raises (an event whose
policy is ``"error"`` fired where no transition takes it) raises it again.
The table holds no lock: its rows never change once built, and the owner
serialises its own fires. It takes no listeners, as `SerialInstance` takes none,
and `verify_memo` has nothing to re-check on it: each step was run twice when
the table was built, and is never run again.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Final

from .definition import Machine, Snapshot
from .errors import FireError, ImpureCallbackError, StatecoreError
from .runtime import Prepared, impurity
from .semantics import Outcome, check_fire, step

__all__ = ["ROW_LIMIT", "Row", "Table"]

ROW_LIMIT: Final = 4096
"""At most this many snapshots by default: a table is for machines with few."""


class Row:
    """One snapshot of the table and its edges: prepared event -> (outcome, next row).

    An event missing from `edges` is one whose step raised (see `Table.fire`).
    """

    __slots__ = ("edges", "snapshot")

    def __init__(self, snapshot: Snapshot) -> None:
        self.snapshot = snapshot
        self.edges: dict[Prepared, tuple[Outcome, Row]] = {}

    @property
    def state(self) -> str:
        """The name of the row's control state."""
        state: str = self.snapshot[0]
        return state

    def __repr__(self) -> str:
        return f"Row({self.snapshot!r})"


class Table:
    """`machine`'s steps under `events` from every snapshot they reach; see the module doc.

    Refused with a one-line error: a machine or event declared ``pure=False``
    (its steps may change between fires), an event prepared for another
    machine, and more than `limit` reachable snapshots.
    """

    __slots__ = ("events", "initial", "machine", "rows")

    def __init__(self, machine: Machine, events: Iterable[Prepared], *, limit: int = ROW_LIMIT):
        self.machine = machine
        self.events: tuple[Prepared, ...] = tuple(dict.fromkeys(events))
        for prepared in self.events:
            _check_tabulable(machine, prepared)
        self.rows: dict[tuple[Snapshot, tuple[type, ...]], Row] = {}
        """Every row, by its snapshot and the types of its values (`row_of`)."""
        self.initial = self._row(machine.initial_snap)
        frontier = [self.initial]
        while frontier:
            row = frontier.pop()
            for prepared in self.events:
                outcome = _twice(machine, row.snapshot, prepared)
                if outcome is None:
                    continue  # the step raised: `fire` runs it again, so it raises the same
                nxt = self.row_of(outcome.snapshot)
                if nxt is None:
                    nxt = self._row(outcome.snapshot)
                    frontier.append(nxt)
                    if len(self.rows) > limit:
                        raise ValueError(
                            f"Table({machine.name!r}): more than {limit} snapshots are "
                            f"reachable under {len(self.events)} event(s); a table is for "
                            f"machines with few, so use an Instance (or pass a larger limit)"
                        )
                row.edges[prepared] = (outcome, nxt)

    def row_of(self, snapshot: Snapshot) -> Row | None:
        """The row of `snapshot`, None if no event reaches it.

        Rows are told apart by their values' types too, as `step` tells 1 from True
        (a machine whose effects write outside its domains can make both).
        """
        return self.rows.get((snapshot, tuple(map(type, snapshot))))

    def _row(self, snapshot: Snapshot) -> Row:
        row = self.rows[snapshot, tuple(map(type, snapshot))] = Row(snapshot)
        return row

    def fire(self, row: Row, prepared: Prepared) -> tuple[Outcome, Row]:
        """``row.edges[prepared]``, raising what `step` raises where the table has no entry."""
        try:
            return row.edges[prepared]
        except KeyError:
            pass
        if prepared not in self.events:
            raise FireError(
                f"Table({self.machine.name!r}): {prepared!r} is not one of the events it was "
                f"built with; add it to the Table's events"
            )
        step(self.machine, row.snapshot, prepared.event, dict(prepared.payload))  # raises
        raise ImpureCallbackError(
            f"Table({self.machine.name!r}): {prepared!r} in {row.snapshot!r} raised when the "
            f"table was built and not now; make the machine's callbacks pure"
        )


def _check_tabulable(machine: Machine, prepared: Prepared) -> None:
    """Refuse what a table cannot hold: impure steps, another machine's events."""
    if not isinstance(prepared, Prepared):
        raise TypeError(
            f"Table({machine.name!r}): events must be Prepared (statecore.prepare), "
            f"got {prepared!r}"
        )
    check_fire(machine, prepared.event, prepared.payload)
    if not machine.pure or prepared.event not in machine.cacheable_events:
        raise ValueError(
            f"Table({machine.name!r}): event {prepared.event!r} is declared pure=False (or "
            f"has an unbounded field), so its steps cannot be computed once; use an Instance"
        )


def _twice(machine: Machine, snapshot: Snapshot, prepared: Prepared) -> Outcome | None:
    """`step`, run twice (None if it raised both times); two that differ are an impure callback."""
    runs: list[Outcome | StatecoreError] = []
    for _ in range(2):
        try:
            runs.append(step(machine, snapshot, prepared.event, dict(prepared.payload)))
        except StatecoreError as exc:
            runs.append(exc)
    first, second = runs
    if isinstance(first, StatecoreError):
        if isinstance(second, StatecoreError):
            return None
        first, second = second, first
    difference = impurity(machine, snapshot, prepared.event, dict(prepared.payload), first, second)
    if difference:
        raise ImpureCallbackError(difference)
    return first
