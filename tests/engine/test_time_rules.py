"""PROTOCOL.md sections 5 and 6 at the engine's level: the clock-skew refusal and late requests.

The skew rule is the engine's (`parse_request` with the record's broker timestamp and
`coordinator.max.clock.skew.ms`); the live job only passes both in. Late requests are processed at their
group's clock and counted, the same way by `LocalCoordinator`, `run_group` and the replay driver.
"""

from __future__ import annotations

from typing import Any

import pytest

from coordinator_state import (
    SIMULATION_EPOCH_MS,
    EngineConfig,
    Invalid,
    LocalCoordinator,
    ReplayDriver,
    Tick,
    parse_request,
    request_envelope,
    run_group,
    tick_envelope,
)

T = SIMULATION_EPOCH_MS
SKEW = 5000


def heartbeat(t: int | None, correlation_id: int = 1, group: str = "g") -> dict[str, Any]:
    body = {"group_id": group, "generation_id": 1, "member_id": "m", "group_instance_id": None}
    return request_envelope("Heartbeat", body, version=4, correlation_id=correlation_id, client_id="c",
                            reply_to="r", timestamp_ms=t)


def join(t: int, correlation_id: int) -> dict[str, Any]:
    body = {"group_id": "g", "session_timeout_ms": 10000, "rebalance_timeout_ms": 10000, "member_id": "",
            "protocol_type": "consumer", "protocols": [{"name": "range", "metadata": ""}]}
    return request_envelope("JoinGroup", body, version=3, correlation_id=correlation_id, client_id="c",
                            reply_to="r", timestamp_ms=t)


@pytest.mark.parametrize("offset", [-SKEW, 0, SKEW])
def test_a_timestamp_within_the_skew_bound_is_accepted(offset: int) -> None:
    parsed = parse_request(heartbeat(T + offset), record_timestamp_ms=T, max_clock_skew_ms=SKEW)
    assert not isinstance(parsed, Invalid) and parsed.timestamp_ms == T + offset


@pytest.mark.parametrize("offset", [-SKEW - 1, SKEW + 1, 10**9])
def test_a_timestamp_beyond_the_skew_bound_is_refused_and_answered(offset: int) -> None:
    parsed = parse_request(heartbeat(T + offset), record_timestamp_ms=T, max_clock_skew_ms=SKEW)
    assert isinstance(parsed, Invalid)
    assert "coordinator.max.clock.skew.ms" in parsed.reason and "fix the client's clock" in parsed.reason
    assert parsed.reply is not None and parsed.reply.correlation_id == 1
    assert parsed.timestamp_ms == T + offset  # the answer carries the request's own (readable) time


def test_a_tick_beyond_the_skew_bound_is_refused_too() -> None:
    assert isinstance(parse_request(tick_envelope(T + SKEW + 1), record_timestamp_ms=T, max_clock_skew_ms=SKEW),
                      Invalid)
    assert parse_request(tick_envelope(T + SKEW), record_timestamp_ms=T, max_clock_skew_ms=SKEW) == Tick(T + SKEW)


def test_without_a_skew_bound_or_a_broker_time_nothing_is_refused_for_skew() -> None:
    assert not isinstance(parse_request(heartbeat(T + 10**9), record_timestamp_ms=T), Invalid)  # a replay
    assert not isinstance(parse_request(heartbeat(T + 10**9), max_clock_skew_ms=SKEW), Invalid)


def test_the_broker_time_stands_in_for_an_absent_timestamp_and_is_required_without_it() -> None:
    parsed = parse_request(heartbeat(None), record_timestamp_ms=T, max_clock_skew_ms=SKEW)
    assert not isinstance(parsed, Invalid) and parsed.timestamp_ms == T
    missing = parse_request(heartbeat(None))
    assert isinstance(missing, Invalid) and missing.reason == "timestamp_ms: missing (required outside the live job)"


def test_a_late_request_is_processed_at_its_group_clock_and_counted_by_local_coordinator() -> None:
    coordinator = LocalCoordinator({"group.initial.rebalance.delay.ms": 3000})
    coordinator.handle(join(T, 1))
    coordinator.advance_to(T + 60_000)
    [answer] = coordinator.handle(heartbeat(T + 1000, correlation_id=2))
    assert answer["timestamp_ms"] == T + 60_000  # processed at the clock, not at its own time
    assert coordinator.counters["late_requests"] == 1
    coordinator.handle(heartbeat(T + 60_000, correlation_id=3))
    assert coordinator.counters["late_requests"] == 1  # at the clock is not late


def test_run_group_counts_requests_older_than_the_watermark_and_processes_them_at_it() -> None:
    config = EngineConfig.from_mapping({"group.initial.rebalance.delay.ms": 3000})
    first = run_group(None, 0, [parse_request(join(T, 1))], config)  # type: ignore[list-item]
    assert first.late_requests == 0 and first.state is not None
    requests = [parse_request(heartbeat(T + 1000, correlation_id=2)), parse_request(heartbeat(T + 70_000, 3))]
    outcome = run_group(first.state, T + 60_000, requests, config)  # type: ignore[arg-type]
    assert outcome.late_requests == 1
    answers = {r["correlation_id"]: r["timestamp_ms"] for r in outcome.responses if r["reply_to"] == "r"}
    assert answers[2] == T + 60_000 and answers[3] == T + 70_000


def test_the_replay_driver_counts_a_request_that_arrives_behind_the_watermark() -> None:
    driver = ReplayDriver({"coordinator.lateness.ms": 2000, "group.initial.rebalance.delay.ms": 3000})
    driver.feed(join(T, 1), "file:1")
    driver.feed(tick_envelope(T + 10_000), "file:2")  # watermark T + 8000
    in_time = driver.feed(heartbeat(T + 8000, correlation_id=2), "file:3")
    late = driver.feed(heartbeat(T + 7999, correlation_id=3), "file:4")
    assert driver.late_requests == 1
    assert [r["timestamp_ms"] for r in in_time.responses if r["correlation_id"] == 2] == [T + 8000]
    assert [r["timestamp_ms"] for r in late.responses if r["correlation_id"] == 3] == [T + 8000]
