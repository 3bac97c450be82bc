"""A group's timers: keyed, replaceable, fired in (deadline, scheduling order).

Keys are stable (`heartbeat` + member id, `join`, `sync`, `retention`), so scheduling under a key
that has a timer replaces it and cancelling a missing key is a no-op (SEMANTICS.md T4). `entries` is
the truth and is what gets serialised, with each timer's sequence number, so the tie order survives a
trip through the state store.

The heap is lazy: each live timer has at least one heap entry at or before its own (deadline, seq), so
the heap's top is a lower bound of the next deadline. Rescheduling a timer later (a heartbeat moving
a session deadline, the most frequent event there is) changes the timer in place and pushes nothing:
its old entry, when it comes to the top, is pushed again at the timer's current place. Entries of
removed timers are dropped when they reach the top, or when the heap is rebuilt from `entries`. A
heartbeat thus allocates nothing that outlives it, which also spares the garbage collector.

A deferred timer (SEMANTICS.md T3a) is one that its own firing at `t` scheduled again with a deadline <= `t`:
it keeps its key and payload, its deadline becomes `t`, and it leaves the heap, so it is no wake-up
deadline. It fires at the group's next event at a later time (`pop_deferred_before`); scheduling its key
again makes it an ordinary timer, cancelling it removes it.
"""

from __future__ import annotations

import heapq
from dataclasses import dataclass, field
from enum import StrEnum
from operator import attrgetter
from typing import Any

from .journal import MISSING, RESCHEDULED, Journal


class TimerKind(StrEnum):
    HEARTBEAT = "heartbeat"  # session expiry of a member, or expiry of a pending member id
    JOIN = "join"  # initial rebalance delay, or rebalance timeout
    SYNC = "sync"  # pending-sync timeout
    RETENTION = "retention"  # removal of a group left Empty
    OFFSETS = "offsets"  # expiry of committed offsets (docs/OFFSETS_AND_LISTING.md section 9)


# The kinds as module constants, for the paths every request takes (see errors.NO_ERROR).
HEARTBEAT_TIMER = TimerKind.HEARTBEAT
JOIN_TIMER = TimerKind.JOIN
SYNC_TIMER = TimerKind.SYNC
RETENTION_TIMER = TimerKind.RETENTION
OFFSETS_TIMER = TimerKind.OFFSETS

TimerKey = tuple[TimerKind, str]


class TimerFailed(RuntimeError):
    """A timer's event raised (an engine bug): the event was undone and the timer dropped."""


@dataclass(slots=True)
class Timer:  # changed in place only by Timers.schedule, which journals it
    kind: TimerKind
    target: str  # member id for HEARTBEAT, "" otherwise
    deadline: int
    seq: int
    # JOIN: (delay, remaining) of an initial delay, () for a rebalance timeout; SYNC: (generation,)
    payload: tuple[int, ...] = ()

    @property
    def key(self) -> TimerKey:
        return (self.kind, self.target)


@dataclass(slots=True)
class Timers:
    entries: dict[TimerKey, Timer] = field(default_factory=dict)
    heap: list[tuple[int, int, TimerKey]] = field(default_factory=list)
    next_seq: int = 0
    deferred: dict[TimerKey, None] = field(default_factory=dict)  # keys of deferred entries, no heap entry
    journal: Journal | None = field(default=None, compare=False, repr=False)  # the group's, during a request

    def schedule(self, kind: TimerKind, target: str, deadline: int, payload: tuple[int, ...] = ()) -> None:
        key = (kind, target)
        seq = self.next_seq
        self.next_seq = seq + 1
        entries = self.entries
        timer = entries.get(key)
        if timer is None:
            if self.journal is not None:
                self.journal.entries.append((entries, key, MISSING))
            entries[key] = Timer(kind, target, deadline, seq, payload)
            heapq.heappush(self.heap, (deadline, seq, key))
        else:
            if self.journal is not None:
                self.journal.entries.append((timer, RESCHEDULED, (timer.deadline, timer.seq, timer.payload)))
            # Later: its current heap entry stays a lower bound. Earlier, or deferred (no heap entry): a new one.
            if (self.deferred and self._undefer(key)) or deadline < timer.deadline:
                heapq.heappush(self.heap, (deadline, seq, key))
            timer.deadline = deadline
            timer.seq = seq
            timer.payload = payload
        if len(self.heap) > 2 * len(entries) + 32:
            self.rebuild_heap()

    def cancel(self, kind: TimerKind, target: str = "") -> None:
        self._remove((kind, target))

    def get(self, kind: TimerKind, target: str = "") -> Timer | None:
        return self.entries.get((kind, target))

    def next_deadline(self) -> int | None:
        """The next deadline of a timer that is not deferred; on the way, brings the heap's top to the live
        timer it belongs to."""
        heap = self.heap
        entries = self.entries
        while heap:
            deadline, seq, key = heap[0]
            timer = entries.get(key)
            if timer is not None:
                if timer.seq == seq:
                    return deadline
                if key not in self.deferred and (
                        timer.deadline > deadline or (timer.deadline == deadline and timer.seq > seq)):
                    heapq.heapreplace(heap, (timer.deadline, timer.seq, key))  # moved later: its place now
                    continue
            heapq.heappop(heap)  # removed, deferred, or a timer moved earlier, whose own entry comes first
        return None

    def pop_due(self, now: int) -> Timer | None:
        """Removes and returns the first timer with deadline <= now, if any."""
        deadline = self.next_deadline()
        if deadline is None or deadline > now:
            return None
        _, _, key = heapq.heappop(self.heap)
        return self._remove(key)

    def defer(self, key: TimerKey, t: int) -> None:
        """Makes the timer under `key`, scheduled again at or before `t` by its own firing at `t`, fire at the
        group's next event after `t` instead (SEMANTICS.md T3a): out of the heap, so no wake-up deadline."""
        timer = self.entries[key]
        if self.journal is not None:
            self.journal.entries.append((timer, RESCHEDULED, (timer.deadline, timer.seq, timer.payload)))
            self.journal.entries.append((self.deferred, key, MISSING))
        timer.deadline = t
        timer.seq = self.next_seq  # a new place in the tie order, which no heap entry has
        self.next_seq += 1
        self.deferred[key] = None

    def pop_deferred_before(self, t: int) -> Timer | None:
        """Removes and returns the first (in scheduling order) deferred timer deferred before `t`, if any."""
        due = [self.entries[key] for key in self.deferred if self.entries[key].deadline < t]
        if not due:
            return None
        return self._remove(min(due, key=lambda timer: timer.seq).key)

    def _undefer(self, key: TimerKey) -> bool:
        if key not in self.deferred:
            return False
        if self.journal is not None:
            self.journal.entries.append((self.deferred, key, None))
        del self.deferred[key]
        return True

    def _remove(self, key: TimerKey) -> Timer | None:
        timer = self.entries.pop(key, None)
        if timer is not None:
            if self.journal is not None:
                self.journal.entries.append((self.entries, key, timer))
            if self.deferred:
                self._undefer(key)
        return timer

    def rebuild_heap(self) -> None:
        """The heap again from the entries, which are the truth: drops stale entries, and follows an undo."""
        self.heap = [(t.deadline, t.seq, key) for key, t in self.entries.items() if key not in self.deferred]
        heapq.heapify(self.heap)

    def to_json(self) -> list[Any]:
        """[next seq, timers in scheduling order, deferred keys in scheduling order (format 3)]; a kind is written
        as its name, a payload as an array (a str enum member and a tuple are the JSON writer's to write)."""
        ordered = sorted(self.entries.values(), key=_SCHEDULING_ORDER)
        deferred = self.deferred
        return [self.next_seq, [[t.kind, t.target, t.deadline, t.seq, t.payload] for t in ordered],
                [[t.kind, t.target] for t in ordered if (t.kind, t.target) in deferred] if deferred else []]

    @classmethod
    def from_json(cls, data: list[Any]) -> Timers:
        """What `to_json` wrote, whose numbers are ints (the state codec reads JSON integers as ints)."""
        timers = cls(next_seq=data[0])
        entries = timers.entries
        for kind, target, deadline, seq, payload in data[1]:
            timer_kind = _TIMER_KINDS[kind]
            entries[(timer_kind, target)] = Timer(timer_kind, target, deadline, seq, tuple(payload))
        for kind, target in data[2] if len(data) > 2 else ():  # formats 1 and 2 had no deferred timers
            timers.deferred[(_TIMER_KINDS[kind], target)] = None
        timers.rebuild_heap()
        return timers


# Each kind by its stored name: a dict lookup, where calling the enum class costs several times more (a group's
# timers are read at every call of the Spark job's step).
_TIMER_KINDS: dict[str, TimerKind] = {kind.value: kind for kind in TimerKind}
_SCHEDULING_ORDER = attrgetter("seq")
