"""`coordinator groups` over a replay's output: kafka-consumer-groups.sh's views of real groups.

The traffic is scripted here (two static members and a dynamic one with consumer-protocol assignments,
commits, a simple group), replayed by `coordinator replay`, and read back by `coordinator groups`. The
running-job source is exercised end to end in tests/streaming/test_offsets_e2e.py.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any

import pytest

from coordinator_cli.groups import Administration, UsageError, add_groups_arguments, run_groups
from coordinator_cli.main import main
from coordinator_state import LocalCoordinator, request_envelope, to_json
from coordinator_state.consumer_protocol import to_base64
from coordinator_state.envelope import SIMULATION_EPOCH_MS as T
from group_client import Assignment, Subscription, encode_assignment, encode_subscription


def scripted_traffic() -> list[dict[str, Any]]:
    """Group "orders": static members a (i-a) and b (i-b) and dynamic c, Stable in generation 2, with offsets
    committed by a and b; group "ledger": a simple commit. Scripted against a LocalCoordinator (to learn the
    member ids); the replay then replays exactly these requests."""
    coordinator = LocalCoordinator({"group.initial.rebalance.delay.ms": 0})
    traffic: list[dict[str, Any]] = []
    metadata = to_base64(encode_subscription(Subscription(("events",))))

    def send(api: str, client: str, t: int, body: dict[str, Any], version: int) -> dict[str, dict[str, Any]]:
        """Sends one request; every answer the call decided, by reply_to."""
        request = request_envelope(api, body, version=version, correlation_id=len(traffic) + 1,
                                   client_id=f"client-{client}", client_host=f"/10.0.0.{ord(client) - 96}",
                                   reply_to=client, timestamp_ms=t)
        traffic.append(request)
        return {r["reply_to"]: r["body"] for r in coordinator.handle(request)}

    def join(client: str, t: int, member_id: str = "", instance: str | None = None) -> dict[str, dict[str, Any]]:
        return send("JoinGroup", client, t, {
            "group_id": "orders", "session_timeout_ms": 60000, "rebalance_timeout_ms": 60000, "member_id": member_id,
            "group_instance_id": instance, "protocol_type": "consumer",
            "protocols": [{"name": "range", "metadata": metadata}], "reason": None}, 9)

    a = join("a", T, instance="i-a")["a"]["member_id"]  # alone: generation 1 at once
    join("b", T + 1, instance="i-b")  # a new member: a rebalance, parked until a rejoins
    c = join("c", T + 2)["c"]["member_id"]  # MEMBER_ID_REQUIRED
    join("c", T + 3, member_id=c)
    joined = join("a", T + 4, member_id=a, instance="i-a")  # everyone has joined: generation 2
    ids = {client: body["member_id"] for client, body in joined.items()}
    assert set(ids) == {"a", "b", "c"} and all(body["generation_id"] == 2 for body in joined.values())
    partitions = {"a": [0, 1, 2], "b": [3, 4], "c": [5]}
    assignments = [{"member_id": ids[k], "assignment": to_base64(encode_assignment(Assignment.of({"events": ps})))}
                   for k, ps in partitions.items()]
    synced = send("SyncGroup", "a", T + 10, {"group_id": "orders", "generation_id": 2, "member_id": ids["a"],
                                             "group_instance_id": "i-a", "protocol_type": "consumer",
                                             "protocol_name": "range", "assignments": assignments}, 5)
    assert synced["a"]["error"] == "NONE"
    for client in ("a", "b"):
        committed = send("OffsetCommit", client, T + 20, {
            "group_id": "orders", "generation_id_or_member_epoch": 2, "member_id": ids[client],
            "group_instance_id": f"i-{client}", "topics": [{"name": "events", "partitions": [
                {"partition_index": p, "committed_offset": 100 * p + 7, "committed_metadata": ""}
                for p in partitions[client]]}]}, 9)
        assert committed[client]["error"] == "NONE"
    send("OffsetCommit", "z", T + 30, {"group_id": "ledger", "generation_id_or_member_epoch": -1, "member_id": "",
                                       "topics": [{"name": "audit", "partitions": [
                                           {"partition_index": 0, "committed_offset": 5}]}]}, 9)
    return traffic


@pytest.fixture(scope="module")
def replayed(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    folder = tmp_path_factory.mktemp("replay")
    traffic = folder / "traffic.jsonl"
    traffic.write_text("".join(to_json(r) + "\n" for r in scripted_traffic()))
    files = {name: folder / f"{name}.jsonl" for name in ("responses", "snapshots", "offsets")}
    assert main(["replay", "--input", str(traffic), "--output", str(files["responses"]),
                 "--snapshots", str(files["snapshots"]), "--offsets", str(files["offsets"]),
                 "--set", "group.initial.rebalance.delay.ms=0"]) == 0
    return files


def groups(replayed: dict[str, Path], capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str, str]:
    status = main(["groups", *args, "--snapshots", str(replayed["snapshots"]),
                   "--offsets-file", str(replayed["offsets"])])
    captured = capsys.readouterr()
    return status, captured.out, captured.err


def columns(table: str) -> list[list[str]]:
    return [line.split() for line in table.strip().splitlines()]


def test_list(replayed: dict[str, Path], capsys: pytest.CaptureFixture[str]) -> None:
    assert groups(replayed, capsys, "--list")[1].split() == ["ledger", "orders"]
    status, out, _ = groups(replayed, capsys, "--list", "--state")
    assert status == 0 and columns(out) == [["GROUP", "STATE"], ["ledger", "Empty"], ["orders", "Stable"]]
    assert columns(groups(replayed, capsys, "--list", "--state", "stable")[1]) == [["GROUP", "STATE"],
                                                                                  ["orders", "Stable"]]


def test_describe_offsets_view(replayed: dict[str, Path], capsys: pytest.CaptureFixture[str]) -> None:
    status, out, err = groups(replayed, capsys, "--describe", "--group", "orders")
    assert status == 0 and err == ""
    rows = columns(out)
    assert rows[0] == ["GROUP", "TOPIC", "PARTITION", "CURRENT-OFFSET", "LOG-END-OFFSET", "LAG", "CONSUMER-ID",
                       "HOST", "CLIENT-ID"]
    body = {(r[1], int(r[2])): r for r in rows[1:]}
    assert set(body) == {("events", p) for p in range(6)}
    assert body[("events", 4)][3:6] == ["407", "-", "-"]  # no log end offset in a replay's output
    assert body[("events", 4)][7:] == ["/10.0.0.2", "client-b"]
    assert body[("events", 5)][3] == "-"  # c owns partition 5 and never committed
    # Kafka's order: the member with the most partitions first, each one's partitions by number
    assert [r[2] for r in rows[1:]] == ["0", "1", "2", "3", "4", "5"]


def test_describe_members_view_shows_instance_ids(replayed: dict[str, Path],
                                                   capsys: pytest.CaptureFixture[str]) -> None:
    status, out, _ = groups(replayed, capsys, "--describe", "--group", "orders", "--members", "--verbose")
    rows = columns(out)
    assert status == 0
    assert rows[0] == ["GROUP", "CONSUMER-ID", "GROUP-INSTANCE-ID", "HOST", "CLIENT-ID", "#PARTITIONS",
                       "CURRENT-EPOCH", "CURRENT-ASSIGNMENT", "TARGET-EPOCH", "TARGET-ASSIGNMENT"]
    # Kafka 4.4's view: a dynamic member's instance id is blank; a classic member has no epochs and no target
    by_client = {r[-6]: r for r in rows[1:]}
    assert set(by_client) == {"client-a", "client-b", "client-c"}
    assert by_client["client-a"][1].startswith("i-a-") and by_client["client-a"][2:6] == ["i-a", "/10.0.0.1",
                                                                                          "client-a", "3"]
    assert by_client["client-a"][6:] == ["-", "events:0,1,2", "-", "-"]
    assert by_client["client-c"][2:] == ["/10.0.0.3", "client-c", "1", "-", "events:5", "-", "-"]


def test_describe_state_and_json(replayed: dict[str, Path], capsys: pytest.CaptureFixture[str]) -> None:
    status, out, _ = groups(replayed, capsys, "--describe", "--group", "orders", "--state")
    assert status == 0 and columns(out)[1][-3:] == ["range", "Stable", "3"]
    status, out, _ = groups(replayed, capsys, "--describe", "--group", "orders", "--json")
    described = json.loads(out)
    assert described["state"] == "Stable"
    assert sorted(m["group_instance_id"] or "" for m in described["members"]) == ["", "i-a", "i-b"]
    assert {(o["topic"], o["partition"]): o["current_offset"] for o in described["offsets"]} == {
        ("events", 0): 7, ("events", 1): 107, ("events", 2): 207, ("events", 3): 307, ("events", 4): 407,
        ("events", 5): None}


def test_a_group_without_members_and_an_absent_one(replayed: dict[str, Path],
                                                   capsys: pytest.CaptureFixture[str]) -> None:
    status, out, err = groups(replayed, capsys, "--describe", "--group", "ledger", "--offsets")
    assert status == 0 and "has no active members" in err
    assert columns(out)[1] == ["ledger", "audit", "0", "5", "-", "-", "-", "-", "-"]
    status, out, err = groups(replayed, capsys, "--describe", "--group", "nope")
    assert status == 1 and out == "" and "does not exist" in err


def test_remove_members_needs_a_running_job(replayed: dict[str, Path], capsys: pytest.CaptureFixture[str]) -> None:
    status, _, err = groups(replayed, capsys, "--remove-members", "--group", "orders", "--instance-ids", "i-a")
    assert status == 2 and "running job" in err


def test_delete_and_delete_offsets_need_a_running_job(replayed: dict[str, Path],
                                                      capsys: pytest.CaptureFixture[str]) -> None:
    assert groups(replayed, capsys, "--delete", "--group", "ledger")[0] == 2
    status, _, err = groups(replayed, capsys, "--delete-offsets", "--group", "ledger", "--topic", "audit")
    assert status == 2 and "running job" in err


class EngineAdministration(Administration):
    """The CLI's administrative envelopes answered by the real engine, as the running job answers them from its
    request topic (that path end to end: tests/streaming/test_offsets_e2e.py)."""

    description = "the local engine"

    def __init__(self, coordinator: LocalCoordinator) -> None:
        self.coordinator = coordinator
        self.sent = 0

    def ask(self, api: str, version: int, body: dict[str, Any]) -> dict[str, Any]:
        self.sent += 1
        [answer] = self.coordinator.handle(request_envelope(api, body, version=version, correlation_id=self.sent,
                                                            client_id="cli", reply_to="cli", timestamp_ms=T + 60_000))
        return dict(answer["body"])

    def partitions(self, topic: str) -> list[int]:
        return [0, 1]  # every topic of this test's broker has two partitions

    def list_groups(self, states: Any) -> list[dict[str, Any]]:
        raise AssertionError("not asked")

    def describe(self, group: str) -> Any:
        raise AssertionError("not asked")


@pytest.fixture
def administered() -> EngineAdministration:
    coordinator = LocalCoordinator({"group.initial.rebalance.delay.ms": 0})
    for request in scripted_traffic():
        coordinator.handle(request)
    return EngineAdministration(coordinator)


def administer(source: EngineAdministration, capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str, str]:
    parser = argparse.ArgumentParser()
    add_groups_arguments(parser)
    status = run_groups(parser.parse_args(args), source)
    captured = capsys.readouterr()
    return status, captured.out, captured.err


def test_delete_prints_what_kafka_consumer_groups_prints(administered: EngineAdministration,
                                                         capsys: pytest.CaptureFixture[str]) -> None:
    status, out, err = administer(administered, capsys, "--delete", "--group", "orders")
    assert (status, err.strip()) == (1, "Error: Deletion of some consumer groups failed:")
    assert out == ("* Group 'orders' could not be deleted due to: org.apache.kafka.common.errors."
                   "GroupNotEmptyException: The group is not empty.\n")
    assert administered.coordinator.describe("orders") is not None
    status, out, err = administer(administered, capsys, "--delete", "--group", "ledger")
    assert (status, out, err) == (0, "Deletion of requested consumer groups ('ledger') was successful.\n", "")
    assert administered.coordinator.describe("ledger") is None
    status, out, _ = administer(administered, capsys, "--delete", "--group", "ledger")
    assert status == 1 and out.endswith("GroupIdNotFoundException: The group id does not exist.\n")
    status, out, _ = administer(administered, capsys, "--delete", "--group", "orders", "--json")
    assert (status, json.loads(out)) == (1, {"group": "orders", "error": "NON_EMPTY_GROUP"})


def test_delete_offsets_prints_each_partitions_status(administered: EngineAdministration,
                                                      capsys: pytest.CaptureFixture[str]) -> None:
    status, out, err = administer(administered, capsys, "--delete-offsets", "--group", "orders", "--topic",
                                  "events:0", "--topic", "other")
    assert status == 1 and err.strip() == "Error: Encounter some partition level error, see the follow-up details:"
    assert columns(out) == [
        ["TOPIC", "PARTITION", "STATUS"],
        ["events", "0", "Error:", ":Deleting", "offsets", "of", "a", "topic", "is", "forbidden", "while", "the",
         "consumer", "group", "is", "actively", "subscribed", "to", "it."],
        ["other", "0", "Successful"], ["other", "1", "Successful"]]
    status, out, err = administer(administered, capsys, "--delete-offsets", "--group", "ledger", "--topic", "audit")
    assert (status, err) == (0, "") and out.startswith("Request succeed for deleting offsets from group ledger.\n\n")
    assert columns(out)[2:] == [["TOPIC", "PARTITION", "STATUS"], ["audit", "0", "Successful"],
                                ["audit", "1", "Successful"]]
    assert administered.coordinator.describe("ledger") is None  # an Empty group goes with its last offset
    status, out, err = administer(administered, capsys, "--delete-offsets", "--group", "ledger", "--topic", "audit:0")
    assert status == 1 and err.strip() == "Error: 'ledger' does not exist."
    assert columns(out)[1] == ["audit", "0", "Error:", ":The", "group", "id", "does", "not", "exist."]
    with pytest.raises(UsageError, match="--topic"):
        administer(administered, capsys, "--delete-offsets", "--group", "orders")
