"""The Kafka Streams member against the real engine (a LocalCoordinator): what it sends and how it reacts.

Whole-group behaviour (static bounces keep tasks, dynamic ones move them, no task owned twice) is tested by the
chaos harness on the simulator (tests/chaos/test_chaos_streams.py); here, one member's requests.
"""

from __future__ import annotations

from typing import Any

from coordinator_state import LocalCoordinator
from coordinator_state.envelope import SIMULATION_EPOCH_MS as T
from coordinator_state.envelope import tick_envelope
from group_client import StreamsMember, StreamsMemberConfig, StreamsMemberState, Subtopology, Tasks

SETTINGS = {"group.streams.initial.rebalance.delay.ms": 0, "group.streams.heartbeat.interval.ms": 2000,
            "group.streams.session.timeout.ms": 10000}


def config(instance_id: str | None = "i-1") -> StreamsMemberConfig:
    return StreamsMemberConfig("app", "client-1", "process-1", (Subtopology("0", ("events",)),), {"events": 4},
                               instance_id=instance_id, request_timeout_ms=5000, retry_backoff_ms=100)


def exchange(coordinator: LocalCoordinator, member: StreamsMember, now: int) -> list[dict[str, Any]]:
    """Polls the member at `now`, hands its requests to the coordinator and the answers back; the requests."""
    sent = member.poll(now)
    for request in sent:
        for response in coordinator.handle(request):
            member.on_response(response)
    return sent


def test_join_acknowledge_then_heartbeat_at_the_groups_interval() -> None:
    coordinator = LocalCoordinator(SETTINGS)
    events: list[tuple[str, Tasks]] = []
    member = StreamsMember(config(), "m-1", "r-1", on_assigned=lambda t: events.append(("assigned", t)))
    [join] = exchange(coordinator, member, T)
    assert join["topic_metadata"] == {"topics": [{"name": "events", "partitions": 4}]}
    body = join["body"]
    assert (body["member_id"], body["member_epoch"], body["instance_id"], body["process_id"]) == (
        "m-1", 0, "i-1", "process-1")
    assert body["topology"]["subtopologies"][0]["source_topics"] == ["events"]
    assert (body["active_tasks"], body["standby_tasks"], body["warmup_tasks"]) == ([], [], [])
    all_tasks = frozenset(("0", p) for p in range(4))
    assert member.owned.active == all_tasks and events == [("assigned", Tasks(active=all_tasks))]
    # It acknowledges at once, listing what it now owns...
    assert member.state is StreamsMemberState.ACKNOWLEDGING and member.next_deadline() == T
    [ack] = exchange(coordinator, member, T)
    assert ack["body"]["active_tasks"] == [{"subtopology_id": "0", "partitions": [0, 1, 2, 3]}]
    assert "topology" not in ack["body"] and member.state is StreamsMemberState.STABLE
    # ...then heartbeats at the interval the answers give, without task lists (null: unchanged).
    assert member.heartbeat_interval_ms == 2000 and member.next_deadline() == T + 2000
    assert exchange(coordinator, member, T + 1999) == []
    [heartbeat] = exchange(coordinator, member, T + 2000)
    assert "active_tasks" not in heartbeat["body"] and heartbeat["body"]["member_epoch"] == member.member_epoch


def test_a_static_member_leaves_with_minus_2_and_a_dynamic_one_with_minus_1() -> None:
    for instance_id, epoch in (("i-1", -2), (None, -1)):
        coordinator = LocalCoordinator(SETTINGS)
        revoked: list[Tasks] = []
        member = StreamsMember(config(instance_id), "m-1", "r-1", on_revoked=revoked.append)
        exchange(coordinator, member, T)
        member.close()
        assert len(revoked) == 1 and len(revoked[0].active) == 4 and member.owned == Tasks()
        [leave] = exchange(coordinator, member, T + 10)
        assert (leave["body"]["member_epoch"], leave["body"]["instance_id"]) == (epoch, instance_id)
        assert member.leave_result == "NONE" and member.done


def test_a_fenced_member_loses_its_tasks_and_rejoins_with_its_member_id() -> None:
    coordinator = LocalCoordinator(SETTINGS)
    lost: list[Tasks] = []
    member = StreamsMember(config(None), "m-1", "r-1", on_lost=lost.append)
    exchange(coordinator, member, T)
    exchange(coordinator, member, T)
    coordinator.handle(tick_envelope(T + 20000))  # its session (10 s) expires: the member is fenced
    [heartbeat] = exchange(coordinator, member, T + 20000)
    assert heartbeat["body"]["member_epoch"] > 0 and member.stats.errors["UNKNOWN_MEMBER_ID"] == 1
    assert len(lost) == 1 and len(lost[0].active) == 4
    [rejoin] = exchange(coordinator, member, T + 20000)
    assert (rejoin["body"]["member_id"], rejoin["body"]["member_epoch"]) == ("m-1", 0)
    assert rejoin["body"]["active_tasks"] == [] and len(member.owned.active) == 4


def test_an_unanswered_heartbeat_is_retried_after_the_backoff_with_every_task_listed() -> None:
    coordinator = LocalCoordinator(SETTINGS)
    member = StreamsMember(config(), "m-1", "r-1")
    exchange(coordinator, member, T)
    exchange(coordinator, member, T)
    assert member.poll(T + 2000) != []  # sent, never answered
    assert member.next_deadline() == T + 2000 + 5000  # the request timeout
    assert member.poll(T + 7000) == [] and member.stats.timeouts == 1
    [retry] = exchange(coordinator, member, T + 7100)
    assert retry["body"]["active_tasks"] == [{"subtopology_id": "0", "partitions": [0, 1, 2, 3]}]
    assert member.state is StreamsMemberState.STABLE
