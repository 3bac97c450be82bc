"""GroupMember as a state machine: requests out for responses in, table by table, no coordinator involved."""

from __future__ import annotations

from typing import Any

import pytest

from coordinator_state import SIMULATION_EPOCH_MS
from coordinator_state.consumer_protocol import (
    Assignment,
    Subscription,
    decode_assignment,
    decode_subscription,
    encode_assignment,
    encode_subscription,
    from_base64,
    to_base64,
)
from group_client.member import GroupMember, MemberConfig, MemberState

T0 = SIMULATION_EPOCH_MS
SESSION, HEARTBEAT, REBALANCE, BACKOFF = 10000, 3000, 30000, 100


def config(instance: str | None = None, **overrides: Any) -> MemberConfig:
    return MemberConfig(group_id="g", client_id="c", topics=("t",), topic_partitions={"t": 4},
                        group_instance_id=instance, session_timeout_ms=SESSION,
                        heartbeat_interval_ms=HEARTBEAT, rebalance_timeout_ms=REBALANCE,
                        retry_backoff_ms=BACKOFF, **overrides)


def answer(request: dict[str, Any], error: str = "NONE", **body: Any) -> dict[str, Any]:
    """The response envelope a coordinator would send for `request`."""
    return {"api": request["api"], "version": request["version"], "correlation_id": request["correlation_id"],
            "client_id": request["client_id"], "reply_to": request["reply_to"], "group_id": "g",
            "timestamp_ms": request["timestamp_ms"], "body": {"error_code": 0, "error": error, **body}}


def metadata(*topics: str) -> str:
    return to_base64(encode_subscription(Subscription(topics)))


class Recorder:
    """Collects the rebalance callbacks."""

    def __init__(self) -> None:
        self.calls: list[tuple[str, frozenset[tuple[str, int]]]] = []

    def member(self, cfg: MemberConfig) -> GroupMember:
        return GroupMember(cfg, "c-r1",
                           on_assigned=lambda a: self.calls.append(("assigned", a.partitions)),
                           on_revoked=lambda a: self.calls.append(("revoked", a.partitions)),
                           on_lost=lambda a: self.calls.append(("lost", a.partitions)))


def only(requests: list[dict[str, Any]], api: str) -> dict[str, Any]:
    assert [r["api"] for r in requests] == [api], requests
    return requests[0]


def stable_member(recorder: Recorder, instance: str | None = "i1", partitions: tuple[int, ...] = (0, 1)
                  ) -> GroupMember:
    """A follower that joined generation 1 as member 'm1' and holds t-partitions."""
    member = recorder.member(config(instance))
    join = only(member.poll(T0), "JoinGroup")
    member.on_response(answer(join, generation_id=1, protocol_type="consumer", protocol_name="range",
                              leader="other", member_id="m1", members=[], skip_assignment=False))
    sync = only(member.poll(T0), "SyncGroup")
    given = to_base64(encode_assignment(Assignment.of({"t": partitions})))
    member.on_response(answer(sync, protocol_type="consumer", protocol_name="range", assignment=given))
    assert member.state is MemberState.STABLE
    return member


def test_first_join_is_a_joingroup_v9_stamped_with_the_members_clock() -> None:
    member = GroupMember(config("i1", assignors=("roundrobin", "range")), "c-r1")
    join = only(member.poll(T0), "JoinGroup")
    assert (join["version"], join["timestamp_ms"], join["reply_to"]) == (9, T0, "c-r1")
    body = join["body"]
    assert (body["group_id"], body["member_id"], body["group_instance_id"]) == ("g", "", "i1")
    assert (body["session_timeout_ms"], body["rebalance_timeout_ms"], body["protocol_type"]) == (
        SESSION, REBALANCE, "consumer")
    assert [p["name"] for p in body["protocols"]] == ["roundrobin", "range"]
    assert decode_subscription(from_base64(body["protocols"][0]["metadata"])).topics == ("t",)
    assert member.poll(T0 + 1000) == []  # one JoinGroup at a time
    assert member.state is MemberState.JOINING


def test_member_id_required_rejoins_at_once_with_the_given_id() -> None:
    member = GroupMember(config(), "c-r1")
    join = only(member.poll(T0), "JoinGroup")
    member.on_response(answer(join, "MEMBER_ID_REQUIRED", generation_id=-1, member_id="c-123", leader="",
                              members=[]))
    rejoin = only(member.poll(T0), "JoinGroup")
    assert rejoin["body"]["member_id"] == "c-123"
    assert rejoin["correlation_id"] != join["correlation_id"]
    assert rejoin["body"]["reason"]


def test_the_leader_assigns_with_the_selected_protocol_and_static_ordering() -> None:
    member = GroupMember(config("i2"), "c-r1")
    join = only(member.poll(T0), "JoinGroup")
    members = [{"member_id": "m-self", "group_instance_id": "i2", "metadata": metadata("t")},
               {"member_id": "a-other", "group_instance_id": "i1", "metadata": metadata("t")}]
    member.on_response(answer(join, generation_id=3, protocol_type="consumer", protocol_name="range",
                              leader="m-self", member_id="m-self", members=members, skip_assignment=False))
    sync = only(member.poll(T0 + 5), "SyncGroup")
    body = sync["body"]
    assert (body["generation_id"], body["member_id"], body["protocol_name"], body["protocol_type"]) == (
        3, "m-self", "range", "consumer")
    given = {a["member_id"]: decode_assignment(from_base64(a["assignment"])).by_topic()
             for a in body["assignments"]}
    assert given == {"a-other": {"t": [0, 1]}, "m-self": {"t": [2, 3]}}  # i1 before i2


@pytest.mark.parametrize("leader, skip", [("other", False), ("m1", True)])
def test_followers_and_a_returning_static_leader_send_no_assignments(leader: str, skip: bool) -> None:
    member = GroupMember(config("i1"), "c-r1")
    join = only(member.poll(T0), "JoinGroup")
    members = [{"member_id": "m1", "group_instance_id": "i1", "metadata": metadata("t")}] if skip else []
    member.on_response(answer(join, generation_id=1, protocol_type="consumer", protocol_name="range",
                              leader=leader, member_id="m1", members=members, skip_assignment=skip))
    assert only(member.poll(T0), "SyncGroup")["body"]["assignments"] == []


def test_sync_delivers_the_assignment_then_heartbeats_every_interval() -> None:
    recorder = Recorder()
    member = stable_member(recorder)
    assert recorder.calls == [("assigned", frozenset({("t", 0), ("t", 1)}))]
    assert member.poll(T0 + HEARTBEAT - 1) == []
    beat = only(member.poll(T0 + HEARTBEAT), "Heartbeat")
    assert beat["body"] == {"group_id": "g", "generation_id": 1, "member_id": "m1", "group_instance_id": "i1"}
    assert member.next_deadline() == T0 + 2 * HEARTBEAT


# error on a current heartbeat -> (state after, callback, member id of the next JoinGroup or None)
HEARTBEAT_ERRORS = [
    ("REBALANCE_IN_PROGRESS", MemberState.UNJOINED, "revoked", "m1"),
    ("ILLEGAL_GENERATION", MemberState.UNJOINED, "lost", "m1"),
    ("UNKNOWN_MEMBER_ID", MemberState.UNJOINED, "lost", ""),
    ("FENCED_INSTANCE_ID", MemberState.FAILED, "lost", None),
    ("GROUP_MAX_SIZE_REACHED", MemberState.FAILED, "lost", None),
]


@pytest.mark.parametrize("error, state, callback, rejoin_id", HEARTBEAT_ERRORS)
def test_heartbeat_errors(error: str, state: MemberState, callback: str, rejoin_id: str | None) -> None:
    recorder = Recorder()
    member = stable_member(recorder)
    beat = only(member.poll(T0 + HEARTBEAT), "Heartbeat")
    member.on_response(answer(beat, error))
    assert member.state is state
    assert recorder.calls[-1] == (callback, frozenset({("t", 0), ("t", 1)}))
    assert member.assignment.partitions == frozenset()
    following = member.poll(T0 + HEARTBEAT)
    if rejoin_id is None:
        assert following == [] and member.fatal_error == error and member.done
        assert member.poll(T0 + 10 * SESSION) == []
    else:
        assert only(following, "JoinGroup")["body"]["member_id"] == rejoin_id


def test_coordinator_not_available_on_a_heartbeat_retries_after_the_backoff() -> None:
    member = stable_member(Recorder())
    beat = only(member.poll(T0 + HEARTBEAT), "Heartbeat")
    member.on_response(answer(beat, "COORDINATOR_NOT_AVAILABLE"))
    assert member.state is MemberState.STABLE
    assert member.poll(T0 + HEARTBEAT + BACKOFF - 1) == []
    only(member.poll(T0 + HEARTBEAT + BACKOFF), "Heartbeat")


@pytest.mark.parametrize("error, state, delay", [
    ("REBALANCE_IN_PROGRESS", MemberState.UNJOINED, BACKOFF),
    ("UNKNOWN_MEMBER_ID", MemberState.UNJOINED, 0),
    ("INCONSISTENT_GROUP_PROTOCOL", MemberState.FAILED, None),
    ("GROUP_MAX_SIZE_REACHED", MemberState.FAILED, None),
    ("FENCED_INSTANCE_ID", MemberState.FAILED, None),
])
def test_join_errors(error: str, state: MemberState, delay: int | None) -> None:
    member = GroupMember(config("i1"), "c-r1")
    join = only(member.poll(T0), "JoinGroup")
    member.on_response(answer(join, error, generation_id=-1, member_id="", leader="", members=[]))
    assert member.state is state
    if delay is None:
        assert member.poll(T0 + REBALANCE) == [] and member.fatal_error == error
        return
    if delay:
        assert member.poll(T0 + delay - 1) == []
    assert only(member.poll(T0 + delay), "JoinGroup")["body"]["member_id"] == ""


def test_sync_rebalance_in_progress_rejoins_at_once_with_the_same_id() -> None:
    member = GroupMember(config("i1"), "c-r1")
    join = only(member.poll(T0), "JoinGroup")
    member.on_response(answer(join, generation_id=1, protocol_type="consumer", protocol_name="range",
                              leader="x", member_id="m1", members=[], skip_assignment=False))
    sync = only(member.poll(T0), "SyncGroup")
    member.on_response(answer(sync, "REBALANCE_IN_PROGRESS", assignment=""))
    assert only(member.poll(T0), "JoinGroup")["body"]["member_id"] == "m1"


def test_a_duplicate_or_foreign_response_is_dropped() -> None:
    recorder = Recorder()
    member = recorder.member(config("i1"))
    join = only(member.poll(T0), "JoinGroup")
    member.on_response(answer(join, generation_id=1, protocol_type="consumer", protocol_name="range",
                              leader="x", member_id="m1", members=[], skip_assignment=False))
    sync = only(member.poll(T0), "SyncGroup")
    response = answer(sync, protocol_type="consumer", protocol_name="range",
                      assignment=to_base64(encode_assignment(Assignment.of({"t": [3]}))))
    member.on_response(response)
    member.on_response(response)
    member.on_response({**response, "reply_to": "c-r0"})
    assert [kind for kind, _ in recorder.calls] == ["assigned"]
    assert member.stats.dropped == 2


def test_a_stale_heartbeat_error_from_an_older_generation_is_ignored() -> None:
    member = stable_member(Recorder())
    old_beat = only(member.poll(T0 + HEARTBEAT), "Heartbeat")
    new_beat = only(member.poll(T0 + 2 * HEARTBEAT), "Heartbeat")
    member.on_response(answer(new_beat, "REBALANCE_IN_PROGRESS"))
    join = only(member.poll(T0 + 2 * HEARTBEAT), "JoinGroup")
    member.on_response(answer(join, generation_id=2, protocol_type="consumer", protocol_name="range",
                              leader="x", member_id="m1", members=[], skip_assignment=False))
    sync = only(member.poll(T0 + 2 * HEARTBEAT), "SyncGroup")
    member.on_response(answer(sync, protocol_type="consumer", protocol_name="range", assignment=""))
    member.on_response(answer(old_beat, "ILLEGAL_GENERATION"))
    assert (member.state, member.generation_id, member.member_id) == (MemberState.STABLE, 2, "m1")


def test_a_heartbeat_timing_out_during_a_rejoin_does_not_hurry_the_next_generations_heartbeat() -> None:
    member = stable_member(Recorder())
    only(member.poll(T0 + HEARTBEAT), "Heartbeat")  # never answered
    notice = only(member.poll(T0 + 2 * HEARTBEAT), "Heartbeat")
    member.on_response(answer(notice, "REBALANCE_IN_PROGRESS"))
    join = only(member.poll(T0 + 2 * HEARTBEAT), "JoinGroup")
    timed_out = T0 + HEARTBEAT + 30000  # the first heartbeat's request timeout, while the join is parked
    assert member.poll(timed_out) == [] and member.stats.timeouts == 1
    member.on_response(answer(join, generation_id=2, protocol_type="consumer", protocol_name="range",
                              leader="x", member_id="m1", members=[], skip_assignment=False))
    only(member.poll(timed_out + 1), "SyncGroup")
    assert member.next_deadline() == timed_out + HEARTBEAT  # counted from the join answer, not 100 ms


def test_an_unanswered_join_times_out_and_is_retried_and_its_late_answer_dropped() -> None:
    member = GroupMember(config("i1"), "c-r1")
    join = only(member.poll(T0), "JoinGroup")
    timeout = REBALANCE + 5000  # Kafka: rebalance timeout plus JOIN_GROUP_TIMEOUT_LAPSE
    assert member.poll(T0 + timeout - 1) == []
    assert member.poll(T0 + timeout) == []
    retry = only(member.poll(T0 + timeout + BACKOFF), "JoinGroup")
    assert retry["correlation_id"] != join["correlation_id"] and member.stats.timeouts == 1
    member.on_response(answer(join, generation_id=1, protocol_type="consumer", protocol_name="range",
                              leader="x", member_id="m1", members=[], skip_assignment=False))
    assert member.state is MemberState.JOINING and member.stats.dropped == 1


@pytest.mark.parametrize("instance, leave_group, leaves", [
    (None, None, True),  # dynamic: close() leaves
    ("i1", None, False),  # static: close() keeps the place until the session times out
    ("i1", True, True),  # static leaving for good
    (None, False, False),
])
def test_close(instance: str | None, leave_group: bool | None, leaves: bool) -> None:
    recorder = Recorder()
    member = stable_member(recorder, instance)
    member.close(leave_group=leave_group)
    assert recorder.calls[-1] == ("revoked", frozenset({("t", 0), ("t", 1)}))
    assert member.state is MemberState.CLOSED
    requests = member.poll(T0 + 1)
    if leaves:
        leave = only(requests, "LeaveGroup")
        assert (leave["version"], leave["body"]["members"][0]["member_id"],
                leave["body"]["members"][0]["group_instance_id"]) == (5, "m1", instance)
        member.on_response(answer(leave, members=[{"member_id": "m1", "group_instance_id": instance,
                                                   "error_code": 0, "error": "NONE"}]))
        assert member.leave_result == "NONE"
    else:
        assert requests == []
    assert member.done and member.poll(T0 + HEARTBEAT) == []
