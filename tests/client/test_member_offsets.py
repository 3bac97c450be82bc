"""GroupMember's offsets (commit_interval_ms set): fetch after each assignment, commit on a timer, before
rejoining and on close; and, against the engine, a static member that restarts resumes where its
predecessor committed."""

from __future__ import annotations

from typing import Any

import pytest

from coordinator_state import LocalCoordinator
from coordinator_state.consumer_protocol import Assignment, encode_assignment, to_base64
from group_client.member import GroupMember, MemberConfig, MemberState
from tests.client.test_member import BACKOFF, HEARTBEAT, REBALANCE, SESSION, T0, Recorder, answer, config, only

COMMIT = 5000


def stable(recorder: Recorder, instance: str | None = "i1") -> tuple[GroupMember, dict[str, Any]]:
    """A follower of generation 1 holding t-0 and t-1, committing every COMMIT ms; returns it and its fetch."""
    member = recorder.member(config(instance, commit_interval_ms=COMMIT))
    join = only(member.poll(T0), "JoinGroup")
    member.on_response(answer(join, generation_id=1, protocol_type="consumer", protocol_name="range",
                              leader="other", member_id="m1", members=[], skip_assignment=False))
    sync = only(member.poll(T0), "SyncGroup")
    given = to_base64(encode_assignment(Assignment.of({"t": (0, 1)})))
    member.on_response(answer(sync, protocol_type="consumer", protocol_name="range", assignment=given))
    fetch = only(member.poll(T0), "OffsetFetch")
    return member, fetch


def fetched(fetch: dict[str, Any], offsets: dict[int, int]) -> dict[str, Any]:
    partitions = [{"partition_index": p, "committed_offset": o, "committed_leader_epoch": -1, "metadata": "",
                   "error_code": 0, "error": "NONE"} for p, o in offsets.items()]
    return answer(fetch, groups=[{"group_id": "g", "topics": [{"name": "t", "partitions": partitions}],
                                  "error_code": 0, "error": "NONE"}])


def committed(commit: dict[str, Any], error: str = "NONE") -> dict[str, Any]:
    topics = [{"name": t["name"], "partitions": [{"partition_index": p["partition_index"], "error_code": 0,
                                                  "error": error} for p in t["partitions"]]}
              for t in commit["body"]["topics"]]
    return answer(commit, error, topics=topics)


def commit_body(request: dict[str, Any]) -> dict[tuple[str, int], int]:
    return {(t["name"], p["partition_index"]): p["committed_offset"]
            for t in request["body"]["topics"] for p in t["partitions"]}


def test_without_commit_interval_there_are_no_offset_requests() -> None:
    member = Recorder().member(config("i1"))
    assert member.config.commit_interval_ms is None
    join = only(member.poll(T0), "JoinGroup")
    member.on_response(answer(join, generation_id=1, protocol_type="consumer", protocol_name="range",
                              leader="other", member_id="m1", members=[], skip_assignment=False))
    sync = only(member.poll(T0), "SyncGroup")
    member.on_response(answer(sync, protocol_type="consumer", protocol_name="range",
                              assignment=to_base64(encode_assignment(Assignment.of({"t": (0,)})))))
    assert member.poll(T0 + COMMIT * 3)[0]["api"] == "Heartbeat"
    assert {r for r in member.stats.sent} == {"JoinGroup", "SyncGroup", "Heartbeat"}


def test_fetch_after_the_assignment_then_positions_from_the_committed_offsets() -> None:
    member, fetch = stable(Recorder())
    assert fetch["version"] == 8
    assert fetch["body"]["groups"] == [{"group_id": "g", "topics": [{"name": "t", "partition_indexes": [0, 1]}]}]
    assert member.positions == {}  # nothing to process until the positions are known
    member.on_response(fetched(fetch, {0: 42, 1: -1}))
    assert member.positions == {("t", 0): 42, ("t", 1): 0}  # none committed: from the start (earliest)
    assert member.committed == {("t", 0): 42}


def test_commits_on_the_timer_only_what_moved() -> None:
    member, fetch = stable(Recorder())
    member.on_response(fetched(fetch, {0: 42, 1: -1}))
    assert "OffsetCommit" not in [r["api"] for r in member.poll(T0 + COMMIT)]  # nothing processed: no commit
    member.consumed(("t", 0), 50)
    member.consumed(("t", 9), 7)  # not ours: ignored
    requests = member.poll(T0 + 2 * COMMIT)
    commit = next(r for r in requests if r["api"] == "OffsetCommit")
    assert commit["version"] == 9
    body = commit["body"]
    assert (body["generation_id_or_member_epoch"], body["member_id"], body["group_instance_id"]) == (1, "m1", "i1")
    assert commit_body(commit) == {("t", 0): 50, ("t", 1): 0}
    member.on_response(committed(commit))
    assert member.committed == {("t", 0): 50, ("t", 1): 0}


def test_a_rejoin_commits_before_it_revokes_and_rejoins() -> None:
    recorder = Recorder()
    member, fetch = stable(recorder)
    member.on_response(fetched(fetch, {0: 10, 1: 20}))
    member.consumed(("t", 1), 25)
    heartbeat = only(member.poll(T0 + HEARTBEAT), "Heartbeat")
    member.on_response(answer(heartbeat, "REBALANCE_IN_PROGRESS"))
    out = member.poll(T0 + HEARTBEAT)
    assert [r["api"] for r in out] == ["OffsetCommit", "JoinGroup"]  # the commit first, while still a member
    assert commit_body(out[0]) == {("t", 0): 10, ("t", 1): 25}
    assert recorder.calls[-1][0] == "revoked" and member.positions == {}


def test_lost_partitions_are_not_committed() -> None:
    member, fetch = stable(Recorder())
    member.on_response(fetched(fetch, {0: 10, 1: 20}))
    member.consumed(("t", 0), 11)
    heartbeat = only(member.poll(T0 + HEARTBEAT), "Heartbeat")
    member.on_response(answer(heartbeat, "ILLEGAL_GENERATION"))
    assert [r["api"] for r in member.poll(T0 + HEARTBEAT)] == ["JoinGroup"]


@pytest.mark.parametrize(("instance", "expected"), [(None, ["OffsetCommit", "LeaveGroup"]), ("i1", ["OffsetCommit"])])
def test_close_commits_then_leaves(instance: str | None, expected: list[str]) -> None:
    """The commit decided at close goes out with the next poll, stamped then: a request stamped with the previous
    poll's time would come after later records in the request log (late, PROTOCOL.md section 5)."""
    member, fetch = stable(Recorder(), instance)
    member.on_response(fetched(fetch, {0: 10, 1: 20}))
    member.consumed(("t", 0), 15)
    member.close()
    assert not member.done
    out = member.poll(T0 + 1000)
    assert [(r["api"], r["timestamp_ms"]) for r in out] == [(api, T0 + 1000) for api in expected]
    assert member.done


def test_a_fenced_commit_is_fatal_and_other_commit_errors_are_not() -> None:
    member, fetch = stable(Recorder())
    member.on_response(fetched(fetch, {0: 10, 1: 20}))
    member.consumed(("t", 0), 11)
    commit = next(r for r in member.poll(T0 + COMMIT) if r["api"] == "OffsetCommit")
    member.on_response(committed(commit, "REBALANCE_IN_PROGRESS"))
    assert member.state is MemberState.STABLE and member.committed == {("t", 0): 10, ("t", 1): 20}
    member.consumed(("t", 0), 12)
    commit = next(r for r in member.poll(T0 + 2 * COMMIT) if r["api"] == "OffsetCommit")
    member.on_response(committed(commit, "FENCED_INSTANCE_ID"))
    assert member.state is MemberState.FAILED and member.fatal_error == "FENCED_INSTANCE_ID"


@pytest.mark.parametrize("failure", ["REBALANCE_IN_PROGRESS", "COORDINATOR_NOT_AVAILABLE", "a partition's error",
                                     "no answer"])
def test_a_failed_commit_is_sent_again_at_the_next_interval(failure: str) -> None:
    """Nothing moved since: the Java consumer's auto-commit commits every interval anyway, so a lost commit
    never leaves the last positions uncommitted."""
    member, fetch = stable(Recorder())
    member.on_response(fetched(fetch, {0: 10, 1: 20}))
    member.consumed(("t", 0), 11)
    commit = next(r for r in member.poll(T0 + COMMIT) if r["api"] == "OffsetCommit")
    if failure == "a partition's error":
        answered = committed(commit)
        answered["body"]["topics"][0]["partitions"][1]["error"] = "UNKNOWN_TOPIC_OR_PARTITION"
        member.on_response(answered)
        assert member.committed == {("t", 0): 11, ("t", 1): 20}
    elif failure != "no answer":
        member.on_response(committed(commit, failure))
    later = T0 + COMMIT + member.config.request_timeout_ms
    again = [r for r in member.poll(later) if r["api"] == "OffsetCommit"]
    assert [commit_body(r) for r in again] == [{("t", 0): 11, ("t", 1): 20}]
    member.on_response(committed(again[0]))
    assert member.committed == {("t", 0): 11, ("t", 1): 20}
    assert "OffsetCommit" not in [r["api"] for r in member.poll(later + COMMIT)]  # acknowledged: not again


def test_an_answer_to_a_fetch_of_an_earlier_assignment_is_not_used() -> None:
    member, fetch = stable(Recorder())
    heartbeat = only(member.poll(T0 + HEARTBEAT), "Heartbeat")
    member.on_response(answer(heartbeat, "REBALANCE_IN_PROGRESS"))
    join = only(member.poll(T0 + HEARTBEAT), "JoinGroup")
    member.on_response(fetched(fetch, {0: 10, 1: 20}))  # arrives after the member let its partitions go
    assert member.positions == {}
    member.on_response(answer(join, generation_id=2, protocol_type="consumer", protocol_name="range",
                              leader="other", member_id="m1", members=[], skip_assignment=False))
    assert member.positions == {}


def test_a_fetch_that_times_out_is_sent_again() -> None:
    member, _ = stable(Recorder())
    later = T0 + member.config.request_timeout_ms
    assert "OffsetFetch" in [r["api"] for r in member.poll(later)]


# ------------------------------------------------------------------------------ against the engine


def drive(coordinator: LocalCoordinator, members: list[GroupMember], until: int, step: int = 100) -> int:
    """Polls the members and delivers the engine's answers every `step` ms up to `until`; returns `until`."""
    now = T0
    while now <= until:
        for member in members:
            for request in member.poll(now):
                for response in coordinator.handle(request):
                    target = next((m for m in members if m.reply_to == response["reply_to"]), None)
                    if target is not None:
                        target.on_response(response)
        coordinator.advance_to(now)
        for member in members:
            for position in list(member.positions):
                member.consumed(position, member.positions[position] + 1)  # one record per step
        now += step
    return until


def test_a_restarted_static_member_resumes_from_its_predecessors_commits() -> None:
    coordinator = LocalCoordinator({"group.initial.rebalance.delay.ms": 0})
    cfg = MemberConfig(group_id="g", client_id="c", topics=("t",), topic_partitions={"t": 2},
                       group_instance_id="i1", session_timeout_ms=SESSION, heartbeat_interval_ms=HEARTBEAT,
                       rebalance_timeout_ms=REBALANCE, retry_backoff_ms=BACKOFF, commit_interval_ms=1000)
    first = GroupMember(cfg, "c-r1")
    drive(coordinator, [first], T0 + 5050)
    assert first.state is MemberState.STABLE and len(first.positions) == 2
    last_commit = dict(first.committed)
    assert last_commit and all(offset > 0 for offset in last_commit.values())
    generation = first.generation_id
    # The process dies without a word; a new one with the same group.instance.id starts within the session.
    second = GroupMember(cfg, "c-r2")
    join = only(second.poll(T0 + 6000), "JoinGroup")
    for response in coordinator.handle(join):
        second.on_response(response)
    assert second.generation_id == generation  # no rebalance: KIP-345
    for _ in range(3):
        for request in second.poll(T0 + 6000):
            for response in coordinator.handle(request):
                second.on_response(response)
    assert second.state is MemberState.STABLE
    assert second.positions == last_commit  # it starts where the predecessor's last commit left off
    assert coordinator.describe("g")["generation_id"] == generation
