"""The classic group's events: a request (handled by its API's module in handlers/) or one of its timers (handled
by its kind's function in `TIMER_HANDLERS`), each at an event time `t` (SEMANTICS.md section 2).

An event changes the group and appends the responses it decides to `group.out`, in the order decided; the
caller drains them. Timers are data (timers.py), so the group can be serialised between any two events
(codec.py) and a Spark micro-batch boundary can fall anywhere without changing what is answered.

A request's event is atomic: it runs under the undo journal (journal.py), so one that raises leaves the group
as it was, the timers it fires (T3) included. A timer fires at max(deadline, the group's clock).
"""

from __future__ import annotations

from collections.abc import Callable

from ..requests import Request
from ..timers import HEARTBEAT_TIMER, JOIN_TIMER, OFFSETS_TIMER, RETENTION_TIMER, SYNC_TIMER, Timer, TimerKind
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


def handle(group: ClassicGroup, request: Request, t: int) -> None:
    """A request's event at `t` (>= the group's clock, its timers due by `t` fired): the request, then the timers
    it scheduled at or before `t` (T3). Atomic: if it raises, the group is as it was."""
    group.begin()
    try:
        group.clock = t
        HANDLERS[request.reply.api](group, request, t)
        end_event(group, t)
        fire_due(group, t)  # T3
    except Exception:
        group.undo()
        raise
    group.commit()


def fire_due(group: ClassicGroup, now: int) -> None:
    """Fires, in (deadline, scheduling) order, every timer due at or before `now`, each at max(deadline, clock)."""
    timers = group.timers
    heap = timers.heap
    if not heap or heap[0][0] > now:  # the common case: the heap's top is a lower bound of every deadline
        return
    while not group.removed:
        timer = timers.pop_due(now)
        if timer is None:
            return
        t = timer.deadline if timer.deadline > group.clock else group.clock
        group.clock = t
        TIMER_HANDLERS[timer.kind](group, timer, t)
        end_event(group, t)


def next_deadline(group: ClassicGroup) -> int | None:
    """When the group must be woken next if no request comes."""
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
