"""The four offset and listing APIs around the scenarios: versions, state format, offset changes.

Behaviour case by case is in the o* conformance scenarios (tests/engine/scenarios); here is what a
scenario cannot see: the state written by the release before offsets still loads, and the offset
changes the job writes to its offsets topic come out of both entry points in order.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from coordinator_state import (
    EngineConfig,
    Invalid,
    LocalCoordinator,
    ReplayDriver,
    StateFormatError,
    decode_group,
    encode_group,
    for_one_group,
    parse_request,
    run_group,
    snapshot_of,
    to_json,
    type_of,
)
from coordinator_state.codec import FORMAT
from coordinator_state.envelope import SIMULATION_EPOCH_MS, SUPPORTED_VERSIONS, Api, request_envelope
from coordinator_state.offsets import CommittedOffset, OffsetChange
from coordinator_state.records import OffsetCommit

T = SIMULATION_EPOCH_MS
FIXTURE = Path(__file__).resolve().parents[1] / "fixtures" / "state_format_1.json"
CONFIG = EngineConfig()


def commit(t: int, offsets: dict[int, int], version: int = 9, group: str = "g", correlation_id: int = 1,
           retention: int = -1) -> dict[str, Any]:
    body = {"group_id": group, "generation_id_or_member_epoch": -1, "member_id": "", "retention_time_ms": retention,
            "topics": [{"name": "t", "partitions": [{"partition_index": p, "committed_offset": o}
                                                    for p, o in offsets.items()]}]}
    return request_envelope(Api.OFFSET_COMMIT, body, version=version, correlation_id=correlation_id,
                            reply_to="a", timestamp_ms=t)


@pytest.mark.parametrize(("api", "body"), [
    (Api.OFFSET_COMMIT, {"group_id": "g", "member_id": "", "topics": []}),
    (Api.OFFSET_FETCH, {"group_id": "g", "topics": [], "groups": [{"group_id": "g", "topics": None}]}),
    (Api.DESCRIBE_GROUPS, {"groups": ["g"]}),
    (Api.LIST_GROUPS, {}),
])
def test_every_supported_version_is_answered_and_the_next_is_not(api: str, body: dict[str, Any]) -> None:
    low, high = SUPPORTED_VERSIONS[api]
    coordinator = LocalCoordinator()
    for version in range(low - 1, high + 2):
        [answer] = coordinator.handle(request_envelope(api, body, version=version, correlation_id=version + 10,
                                                       reply_to="r", timestamp_ms=T))
        expected = "NONE" if low <= version <= high else "UNSUPPORTED_VERSION"
        assert answer["body"]["error"] == expected, (api, version, answer)


def test_an_invalid_record_for_one_group_is_answered_with_that_group() -> None:
    """OffsetFetch v8+ and DescribeGroups name their group inside `groups`: an invalid answer still carries it."""
    [answer] = LocalCoordinator().handle(request_envelope(
        Api.OFFSET_FETCH, {"groups": [{"group_id": "orders", "topics": "bad"}]}, version=8, correlation_id=1,
        reply_to="r", timestamp_ms=T))
    assert answer["body"]["error"] == "INVALID_REQUEST" and answer["group_id"] == "orders"


def test_parsed_commit_defaults_per_version() -> None:
    parsed = parse_request(request_envelope(Api.OFFSET_COMMIT, {
        "group_id": "g", "member_id": "m", "topics": [{"name": "t", "partitions": [
            {"partition_index": 0, "committed_offset": 2**40, "committed_leader_epoch": 7,
             "commit_timestamp": 5}]}]}, version=1, correlation_id=1, reply_to="r", timestamp_ms=T))
    assert isinstance(parsed, OffsetCommit)
    assert (parsed.generation_id, parsed.group_instance_id, parsed.retention_time_ms) == (-1, None, -1)
    [partition] = parsed.topics[0].partitions
    # the leader epoch is a v6+ field, the commit timestamp v1 only
    assert (partition.committed_offset, partition.committed_leader_epoch, partition.commit_timestamp_ms,
            partition.committed_metadata) == (2**40, -1, 5, None)


# --------------------------------------------------------------------------------------------- state format

def format_1_groups() -> list[dict[str, Any]]:
    return list(json.loads(FIXTURE.read_text()))


@pytest.mark.parametrize("saved", format_1_groups(), ids=lambda g: g["group_id"])
def test_a_checkpoint_of_the_release_before_offsets_still_loads(saved: dict[str, Any]) -> None:
    """States encoded by the release before offsets (format 1, tests/fixtures/state_format_1.json) load
    with the same membership, timers and snapshot, no offsets, and are written back as format 2."""
    assert json.loads(saved["state"])["format"] == 1
    group = decode_group(saved["state"].encode(), CONFIG)
    assert snapshot_of(group) == saved["snapshot"]
    assert type_of(group).next_deadline(group) == saved["next_deadline"]
    assert len(group.offsets) == 0 and group.subscribed_topics is None
    assert group.state_since_ms == saved["snapshot"]["timestamp_ms"]
    again = encode_group(group)
    assert json.loads(again)["format"] == FORMAT
    assert snapshot_of(decode_group(again, CONFIG)) == saved["snapshot"]


def test_a_loaded_format_1_group_goes_on_and_takes_commits() -> None:
    stable = next(g for g in format_1_groups() if g["group_id"] == "stable")
    member = stable["snapshot"]["members"][0]
    heartbeat = request_envelope(Api.HEARTBEAT, {"group_id": "stable", "generation_id": 2,
                                                 "member_id": member["member_id"],
                                                 "group_instance_id": member["group_instance_id"]},
                                 version=4, correlation_id=1, reply_to="r", timestamp_ms=T + 100)
    member_commit = request_envelope(Api.OFFSET_COMMIT, {
        "group_id": "stable", "generation_id_or_member_epoch": 2, "member_id": member["member_id"],
        "group_instance_id": member["group_instance_id"],
        "topics": [{"name": "t", "partitions": [{"partition_index": 0, "committed_offset": 9}]}]},
        version=9, correlation_id=2, reply_to="r", timestamp_ms=T + 200)
    requests = [parse_request(heartbeat), parse_request(member_commit)]
    outcome = run_group(stable["state"].encode(), T, requests, CONFIG)
    assert [r["body"]["error"] for r in outcome.responses] == ["NONE", "NONE"]
    assert outcome.offset_changes == [OffsetChange("stable", "t", 0, CommittedOffset(9, -1, "", T + 200))]
    assert outcome.snapshot is None  # a commit is no change of the snapshot


def test_a_state_from_a_newer_format_is_refused() -> None:
    state = json.loads(format_1_groups()[0]["state"])
    state["format"] = FORMAT + 1
    with pytest.raises(StateFormatError, match=f"format {FORMAT + 1}"):
        decode_group(json.dumps(state).encode(), CONFIG)


# --------------------------------------------------------------------------------------------- offset changes

def test_offset_changes_come_out_of_run_group_in_order_with_the_tombstones() -> None:
    config = EngineConfig.from_mapping({"offsets.retention.minutes": 1})
    first = run_group(None, T, [parse_request(commit(T, {0: 5, 1: 6}))], config)
    assert first.snapshot is not None and first.snapshot["state"] == "Empty"
    assert [(c.key, c.value and c.value.offset) for c in first.offset_changes] == [("g/t/0", 5), ("g/t/1", 6)]
    assert first.next_deadline == T + 60000
    second = run_group(first.state, T + 30000, [parse_request(commit(T + 30000, {1: 7}, correlation_id=2))],
                       config)
    assert [(c.key, c.value and c.value.offset) for c in second.offset_changes] == [("g/t/1", 7)]
    expired = run_group(second.state, T + 60000, [], config)
    assert [(c.key, c.value) for c in expired.offset_changes] == [("g/t/0", None)]
    assert expired.state is not None and not expired.tombstone
    gone = run_group(expired.state, T + 90000, [], config)
    assert [(c.key, c.value) for c in gone.offset_changes] == [("g/t/1", None)]
    assert gone.state is None and gone.tombstone  # the group went with its last offset


def test_local_coordinator_keeps_every_offset_change_until_drained() -> None:
    coordinator = LocalCoordinator({"offsets.retention.minutes": 1})
    coordinator.handle(commit(T, {0: 5}))
    coordinator.handle(commit(T + 10, {0: 6}, correlation_id=2, version=3, retention=100))
    coordinator.advance_to(T + 110)
    changes = coordinator.drain_offset_changes()
    assert [(c.key, c.record()) for c in changes] == [
        ("g/t/0", {"group_id": "g", "topic": "t", "partition": 0, "committed_offset": 5, "committed_leader_epoch": -1,
                   "committed_metadata": "", "commit_timestamp_ms": T, "expire_timestamp_ms": None}),
        ("g/t/0", {"group_id": "g", "topic": "t", "partition": 0, "committed_offset": 6, "committed_leader_epoch": -1,
                   "committed_metadata": "", "commit_timestamp_ms": T + 10, "expire_timestamp_ms": T + 110}),
        ("g/t/0", None),
    ]
    assert coordinator.drain_offset_changes() == [] and coordinator.describe("g") is None


def test_list_groups_is_invalid_for_a_per_group_step() -> None:
    """On the request topic no single group holds a ListGroups answer (PROTOCOL.md 8)."""
    listing = parse_request(request_envelope(Api.LIST_GROUPS, {}, version=5, correlation_id=3, reply_to="r",
                                             timestamp_ms=T))
    routed = for_one_group(listing)
    assert isinstance(routed, Invalid) and routed.error.name == "INVALID_REQUEST" and "ListGroups" in routed.reason
    assert routed.reply is not None and routed.reply.correlation_id == 3
    fetch = parse_request(request_envelope(Api.OFFSET_FETCH, {"group_id": "g", "topics": None}, version=7,
                                           correlation_id=4, reply_to="r", timestamp_ms=T))
    assert for_one_group(fetch) is fetch
    # a replay treats recorded traffic as the request topic: a dead letter and an INVALID_REQUEST answer
    fed = ReplayDriver().feed(to_json(request_envelope(Api.LIST_GROUPS, {}, version=5, correlation_id=3,
                                                       reply_to="r", timestamp_ms=T)), "file:1")
    assert fed.kind == "invalid" and fed.dead_letter is not None
    assert [r["body"]["error"] for r in fed.responses] == ["INVALID_REQUEST"]


def test_the_replay_driver_reports_each_offsets_final_line() -> None:
    driver = ReplayDriver({"offsets.retention.minutes": 1, "coordinator.lateness.ms": 0})
    fed = driver.feed(to_json(commit(T, {0: 5, 1: 6})), "file:1")
    assert [c.key for c in fed.offset_changes] == ["g/t/0", "g/t/1"]
    driver.feed(to_json(commit(T + 30000, {1: 7}, correlation_id=2)), "file:2")
    driver.feed(to_json({"api": "Tick", "timestamp_ms": T + 60000}), "file:3")  # g/t/0 expires
    finished = driver.finish()
    assert finished.offsets == {
        "g/t/0": {"group_id": "g", "topic": "t", "partition": 0, "tombstone": True},
        "g/t/1": {"group_id": "g", "topic": "t", "partition": 1, "committed_offset": 7,
                  "committed_leader_epoch": -1, "committed_metadata": "", "commit_timestamp_ms": T + 30000,
                  "expire_timestamp_ms": None},
    }


def test_traffic_without_offset_apis_writes_no_offsets() -> None:
    """The golden replays (recorded before offsets existed) stay byte-identical (test_golden_replay.py),
    and their offsets file is empty."""
    golden = Path(__file__).resolve().parents[1] / "fixtures" / "golden"
    cases = [path for path in sorted(golden.iterdir()) if (path / "traffic.jsonl").is_file()
             and b'"OffsetCommit"' not in (path / "traffic.jsonl").read_bytes()]
    assert len(cases) >= 5
    for case in cases:
        driver = ReplayDriver(dict(item.split("=", 1) for item in (case / "settings.txt").read_text().split()))
        for number, line in enumerate((case / "traffic.jsonl").read_bytes().splitlines(), start=1):
            assert driver.feed(line, f"file:{number}").offset_changes == []
        assert driver.finish().offsets == {}


def test_a_commit_whose_handler_fails_stores_nothing(monkeypatch: pytest.MonkeyPatch) -> None:
    """The error boundary is atomic for offsets too: stored offsets, their changes and the expiry timer go back."""
    from coordinator_state.classic.handlers import HANDLERS

    handler = HANDLERS[Api.OFFSET_COMMIT]

    def fails_after(group: Any, request: Any, t: int) -> None:
        handler(group, request, t)
        if request.reply.reply_to == "faulty":
            raise RuntimeError("injected after the commit was stored")

    monkeypatch.setitem(HANDLERS, Api.OFFSET_COMMIT, fails_after)
    coordinator = LocalCoordinator({"offsets.retention.minutes": 1})
    coordinator.handle(commit(T, {0: 5}))
    group = coordinator.groups["g"]
    before = encode_group(group)
    assert coordinator.drain_offset_changes() != []
    faulty = {**commit(T + 10, {0: 6, 1: 7}, correlation_id=2, version=3, retention=5), "reply_to": "faulty"}
    [answer] = coordinator.handle(faulty)
    assert answer["body"]["error"] == "UNKNOWN_SERVER_ERROR"
    assert encode_group(group) == before and coordinator.drain_offset_changes() == []
    coordinator.handle(commit(T + 20, {0: 6}, correlation_id=3))  # not faulted: it does change the group
    assert encode_group(group) != before
