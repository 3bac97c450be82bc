"""The classic group's events: a request (handled by its API's module in handlers/) or one of its timers (handled
by its kind's function in `TIMER_HANDLERS`), each at an event time `t` (SEMANTICS.md section 2).

An event changes the group and appends the responses it decides to `group.out`, in the order decided; the
caller drains them. Timers are data (timers.py), so the group can be serialised between any two events
(codec.py) and a Spark micro-batch boundary can fall anywhere without changing what is answered.

Every event is atomic: it runs under the undo journal (journal.py), so one that raises leaves the group as it
was. A request's event takes in the timers it fires (T3): they fail with it. A timer's event on its own
(`fire_due`) that raises is undone and its timer dropped (`TimerFailed`, for the caller to log).

A timer fires at max(deadline, the group's clock). One that, firing at `t`, schedules its own key again at or
before `t` is deferred (T3a, timers.py): it fires at the group's next event at a later time, before that
event, and is no wake-up deadline, so its outcome does not depend on when the group is woken (a tick, a
watermark). No timer rule can make one call unbounded: a key firing more than `MAX_FIRES_PER_KEY_PER_INSTANT`
times at one instant in one call raises `TimerLoop`.
"""

from __future__ import annotations

from collections.abc import Callable

from ..records import Request
from ..timers import (
    HEARTBEAT_TIMER,
    JOIN_TIMER,
    OFFSETS_TIMER,
    RETENTION_TIMER,
    SYNC_TIMER,
    Timer,
    TimerFailed,
    TimerKey,
    TimerKind,
)
from .data import ClassicGroup
from .expiry import heartbeat_expired, offsets_expired, pending_sync_expired, retention_expired, settle_offset_expiry
from .handlers import HANDLERS
from .rebalance import join_timer_fired

TimerHandler = Callable[[ClassicGroup, Timer, int], None]

# What each timer does when it fires (SEMANTICS.md section 2's table). A new timer is one line here.
TIMER_HANDLERS: dict[TimerKind, TimerHandler] = {
    HEARTBEAT_TIMER: heartbeat_expired,
    JOIN_TIMER: join_timer_fired,
    SYNC_TIMER: pending_sync_expired,
    RETENTION_TIMER: retention_expired,
    OFFSETS_TIMER: offsets_expired,
}

# Far above what the rules need (a key fires at most a few times at one instant: a join phase completed, its
# pending-sync window of 0 expiring, the join phase again), far below what would make a call slow.
MAX_FIRES_PER_KEY_PER_INSTANT = 100


class TimerLoop(RuntimeError):
    """A timer fired again and again at one instant: an engine bug, stopped before it makes a call unbounded."""


def handle(group: ClassicGroup, request: Request, t: int) -> None:
    """A request's event at `t` (>= the group's clock, its timers due by `t` fired): the request, then the timers
    it scheduled at or before `t` (T3). Atomic: if it raises, the group is as it was."""
    group.begin()
    try:
        group.clock = t
        HANDLERS[request.reply.api](group, request, t)
        end_event(group, t)
        fire_due(group, t)  # T3 (`t` is the clock now: nothing deferred fires)
    except Exception:
        group.undo()
        raise
    group.commit()


def fire_due(group: ClassicGroup, now: int, before_request: bool = False) -> None:
    """Fires, in (deadline, scheduling) order, every timer due at or before `now`, each at max(deadline, clock);
    `before_request`: a request of the group at `now` follows (T2), so the timers deferred before `now` fire too."""
    timers = group.timers
    heap = timers.heap
    # The heap's top is a lower bound of every deadline: in the common case nothing is due.
    if (heap and heap[0][0] <= now) or (before_request and timers.deferred and now > group.clock):
        _fire(group, now, before_request)


def next_deadline(group: ClassicGroup) -> int | None:
    """When the group must be woken next (deferred timers wait for the group's next event, not for a time)."""
    return None if group.removed else group.timers.next_deadline()


def deadline_lower_bound(group: ClassicGroup) -> int | None:
    """A lower bound of `next_deadline`, at no cost (the lazy heap's top); None when no timer is pending."""
    heap = group.timers.heap
    return heap[0][0] if heap else None


def end_event(group: ClassicGroup, t: int) -> None:
    """Closes an event: the offsets' expiry timer follows what the event changed, and a change visible in the
    snapshot counts once, at `t` (PROTOCOL.md section 4)."""
    if group.expiry_moved or group.new_deadline is not None:
        settle_offset_expiry(group)
    if group.dirty:  # counted once per event however many changes it made (`touch`)
        group.dirty = False
        group.version += 1
        group.changed_at = t


def _fire(group: ClassicGroup, now: int, moves_clock: bool) -> None:
    """Fires the timers due by `now`; `moves_clock`: the group's clock moves to `now` (a request follows), so the
    timers deferred before `now` fire at `now` as well."""
    timers = group.timers
    fired: dict[TimerKey, int] = {}  # fires per key at `instant`
    instant = group.clock
    while not group.removed:
        clock = group.clock
        deadline = timers.next_deadline()
        if deadline is not None and deadline <= now:
            t = deadline if deadline > clock else clock
        elif moves_clock and now > clock:
            t = now
        else:
            return
        timer = timers.pop_deferred_before(t) if timers.deferred else None
        if timer is None:
            if deadline is None or deadline > now:
                return
            timer = timers.pop_due(now)
            assert timer is not None
        if t != instant:
            fired.clear()
            instant = t
        fires = fired[timer.key] = fired.get(timer.key, 0) + 1
        _timer_event(group, timer, t, fires)


def _timer_event(group: ClassicGroup, timer: Timer, t: int, fires: int) -> None:
    """One timer's event at `t`, atomic on its own unless it is part of a request's event."""
    own = group.journal is None
    if own:
        group.begin()
    try:
        if fires > MAX_FIRES_PER_KEY_PER_INSTANT:
            raise TimerLoop(f"group {group.group_id!r}: timer {timer.key} fired {fires} times at {t}")
        seq = group.timers.next_seq
        group.clock = t
        TIMER_HANDLERS[timer.kind](group, timer, t)
        end_event(group, t)
        again = group.timers.entries.get(timer.key)
        if again is not None and again.seq >= seq and again.deadline <= t:
            group.timers.defer(timer.key, t)  # scheduled again by its own firing at or before t: T3a
    except Exception as error:
        if not own:
            raise
        group.undo()
        raise TimerFailed(f"group {group.group_id!r}: timer {timer.key} at {t}; dropped") from error
    if own:
        group.commit()
