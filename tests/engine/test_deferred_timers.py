"""SEMANTICS.md T3a: a timer its own firing schedules again at the same instant waits for the group's next event,
and no timer rule can make an engine call unbounded (issue 17, defect 3)."""

from __future__ import annotations

import logging
import signal
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from coordinator_state import Api, decode_group, encode_group, type_of
from coordinator_state.classic import events
from coordinator_state.classic.data import ClassicGroup
from coordinator_state.classic.handlers import HANDLERS
from coordinator_state.records import Heartbeat
from coordinator_state.timers import JOIN_TIMER, SYNC_TIMER, Timer

from .harness import Env
from .test_properties import CLIENTS, CONFIG, STATIC, Timeouts, assert_micro_batches_answer_alike, play, walks


@contextmanager
def returns_within(seconds: int) -> Iterator[None]:
    """Fails, instead of hanging the suite, if the block does not return in time."""
    def expire(signum: int, frame: object) -> None:
        raise AssertionError(f"an engine call did not return within {seconds} s")
    previous = signal.signal(signal.SIGALRM, expire)
    signal.alarm(seconds)
    try:
        yield
    finally:
        signal.alarm(0)
        signal.signal(signal.SIGALRM, previous)


def left_with_a_static_member_that_did_not_rejoin(env: Env) -> dict[str, str]:
    """A dynamic member (rebalance 5 s) and a static one (rebalance 0) join; the dynamic one leaves: the group
    prepares a rebalance whose timeout is 0, and the only member left has not rejoined."""
    keys = {"d": env.join("d", version=3, rebalance=5000), "s": env.join("s", instance="i-s", rebalance=0)}
    env.sleep(6000)
    ids = {client: env.body(key)["member_id"] for client, key in keys.items()}
    with returns_within(10):
        assert env.error(env.leave("d", [(ids["d"], None)])) == "NONE"
    return ids


def test_a_join_phase_postponed_by_a_rebalance_timeout_of_0_waits_for_the_groups_next_event() -> None:
    env = Env()
    ids = left_with_a_static_member_that_did_not_rejoin(env)
    group = env.coord.groups["g"]
    assert env.describe()["state"] == "PreparingRebalance" and env.describe()["generation_id"] == 1
    left_at = env.now
    assert group.timers.deferred == {(JOIN_TIMER, ""): None}
    # No wake-up at the postponed join: the next deadline is the static member's session.
    session_end = left_at - 1000 + 10000  # its session was last counted at the join phase's end, at 5000 ms
    assert type_of(group).next_deadline(group) == session_end
    assert env.coord.advance_to(left_at + 50) == []

    # A new member joins: parked, the join phase still waits (the postponed join fired before the request).
    env.now = left_at + 100
    newcomer = env.join("n", version=3, rebalance=5000)
    assert env.pending(newcomer)
    # The group's next event: the postponed join fires first and completes with the newcomer as leader.
    env.now = left_at + 200
    heartbeat = env.heartbeat("s", ids["s"], 2, instance="i-s")
    assert env.answer(newcomer)["timestamp_ms"] == left_at + 200
    assert env.body(newcomer)["generation_id"] == 2 and env.body(newcomer)["leader"] == env.body(newcomer)["member_id"]
    assert env.error(heartbeat) == "NONE"  # the static member is in the new generation: it did not rejoin
    assert env.coord.groups["g"].timers.deferred == {}


def test_the_postponed_join_phase_ends_when_the_static_members_session_does() -> None:
    env = Env()
    left_with_a_static_member_that_did_not_rejoin(env)
    env.sleep(20000)
    snapshot = env.describe()
    assert (snapshot["state"], snapshot["generation_id"], snapshot["members"]) == ("Empty", 2, [])


def test_a_deferred_timer_survives_the_state_codec() -> None:
    env = Env()
    left_with_a_static_member_that_did_not_rejoin(env)
    group = env.coord.groups["g"]
    again = decode_group(encode_group(group), env.coord.config)
    assert isinstance(again, ClassicGroup)
    assert again.timers.deferred == group.timers.deferred and again.timers.entries == group.timers.entries
    assert type_of(again).next_deadline(again) == type_of(group).next_deadline(group)


def test_a_timer_rule_that_loops_is_stopped_and_logged(monkeypatch: pytest.MonkeyPatch,
                                                       caplog: pytest.LogCaptureFixture) -> None:
    """Two timers that schedule each other at the same instant (no rule does; the guard is for one that would):
    a request whose event runs them is refused, a timer's own event is dropped; both calls return."""
    env = Env()
    ids = env.stable_group(["a"])
    heartbeat = HANDLERS[Api.HEARTBEAT]

    def ping_pong(group: ClassicGroup, timer: Timer, t: int) -> None:
        group.timers.schedule(SYNC_TIMER if timer.kind is JOIN_TIMER else JOIN_TIMER, "", t, (0,))

    def heartbeat_then_join_timer(group: ClassicGroup, request: Heartbeat, t: int) -> None:
        heartbeat(group, request, t)
        group.timers.schedule(JOIN_TIMER, "", t)  # fires before the call returns (T3)

    monkeypatch.setitem(events.TIMER_HANDLERS, JOIN_TIMER, ping_pong)
    monkeypatch.setitem(events.TIMER_HANDLERS, SYNC_TIMER, ping_pong)
    monkeypatch.setitem(HANDLERS, Api.HEARTBEAT, heartbeat_then_join_timer)
    before = encode_group(env.coord.groups["g"])
    with caplog.at_level(logging.ERROR), returns_within(10):
        assert env.error(env.heartbeat("a", ids["a"], 1)) == "UNKNOWN_SERVER_ERROR"
        assert "TimerLoop" in caplog.text and encode_group(env.coord.groups["g"]) == before
        caplog.clear()
        monkeypatch.setitem(HANDLERS, Api.HEARTBEAT, heartbeat)
        env.coord.groups["g"].timers.schedule(JOIN_TIMER, "", env.now + 1)
        env.now += 1
        assert env.error(env.heartbeat("a", ids["a"], 1)) == "NONE"  # after the timer due at its time (T2)
        assert "the timer is dropped" in caplog.text
    group = env.coord.groups["g"]
    assert group.timers.get(JOIN_TIMER) is None and group.timers.get(SYNC_TIMER) is None
    assert env.describe()["state"] == "Stable"


class EngineErrors(logging.Handler):
    """Collects what the engine logs as errors (its error boundary's records)."""

    def __init__(self) -> None:
        super().__init__(logging.ERROR)
        self.records: list[logging.LogRecord] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.records.append(record)


TIMEOUT_CHOICES = st.tuples(st.sampled_from([0, 1, 2000, 10000]), st.sampled_from([0, 1, 2000, 20000]))
TIMEOUTS = st.fixed_dictionaries({client: TIMEOUT_CHOICES for client in CLIENTS})


@settings(max_examples=100)
@given(walks, STATIC, TIMEOUTS, st.lists(st.integers(1, 6), min_size=1, max_size=10))
def test_every_call_returns_whatever_the_timeouts_and_answers_alike_in_any_micro_batches(
        steps: list[tuple[Any, ...]], static: dict[str, bool], timeouts: Timeouts, batch_sizes: list[int]) -> None:
    """Random clients whose session and rebalance timeouts may be 0: every `handle` and `advance_to` returns,
    the error boundary never catches anything (no timer loops), and the Spark job's step over micro-batches
    answers as the record-by-record replay (deferred timers fire at the group's events, not at a watermark)."""
    config = {**CONFIG, "group.min.session.timeout.ms": 0, "coordinator.lateness.ms": 0}
    errors = EngineErrors()
    logging.getLogger("coordinator_state").addHandler(errors)
    try:
        with returns_within(60):
            requests, _, _ = play(steps, static, timeouts, config)
    finally:
        logging.getLogger("coordinator_state").removeHandler(errors)
    assert errors.records == []
    assert_micro_batches_answer_alike(requests, config, batch_sizes)
