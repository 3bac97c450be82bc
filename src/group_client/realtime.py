"""Driving a `GroupMember` or a `StreamsMember` in real time over a `Transport`: the loop an application thread runs."""

from __future__ import annotations

import time
from collections.abc import Callable

from .member import GroupMember
from .streams_member import StreamsMember
from .transport import Transport


def wall_clock_ms() -> int:
    """Milliseconds since the epoch."""
    return time.time_ns() // 1_000_000


def run_member(
    member: GroupMember | StreamsMember,
    transport: Transport,
    *,
    clock: Callable[[], int] = wall_clock_ms,
    should_stop: Callable[[], bool] = lambda: False,
    idle_ms: int = 100,
) -> None:
    """Runs `member` until it fails, or until `should_stop()` turns true and it has been closed.

    Each turn sends what the member has to say, then waits on the transport for its responses until the
    member's next deadline (at most `idle_ms`, so `should_stop` is checked that often). The member is
    polled again just before responses are delivered, so times they set count from their arrival.
    """
    while not member.done:
        if should_stop():
            member.close()
        now = clock()
        for request in member.poll(now):
            transport.send(request)
        if member.done:
            return
        deadline = member.next_deadline()
        wait = idle_ms if deadline is None else max(0, min(deadline - now, idle_ms))
        responses = transport.receive(member.reply_to, timeout_ms=wait)
        if responses:
            for request in member.poll(clock()):
                transport.send(request)
            for response in responses:
                member.on_response(response)
