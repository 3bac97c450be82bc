"""Test helper: a Streams group member (KIP-1071) on the Kafka wire, built on the protocol classes (kafka-python's
and the gateway's Streams ones): it finds its coordinator, heartbeats with StreamsGroupHeartbeat v0, takes the tasks
it is given at once and reports them as owned, and leaves with epoch -1 or -2. Not the product's client."""

from __future__ import annotations

import time
from typing import Any

from kafka.protocol.api_key import ApiKey

from .wire import RawClient

LEAVE, TEMPORARY_LEAVE = -1, -2
COORDINATOR_NOT_AVAILABLE = 15
TASK_LISTS = ("active_tasks", "standby_tasks", "warmup_tasks")


def topology(source: str, changelog: str) -> dict[str, Any]:
    """One subtopology reading `source`, with one state store whose changelog is `changelog` (created by the
    coordinator's request, partitioned like the source)."""
    return {"epoch": 0, "subtopologies": [{
        "subtopology_id": "0", "source_topics": [source], "source_topic_regex": [],
        "state_changelog_topics": [{"name": changelog, "partitions": 0, "replication_factor": 0,
                                    "topic_configs": [{"key": "cleanup.policy", "value": "compact"}]}],
        "repartition_sink_topics": [], "repartition_source_topics": [], "copartition_groups": []}]}


class StreamsMember:
    """One member's connection to its coordinator (found through `bootstrap`, the gateway's address)."""

    def __init__(self, bootstrap: str, group_id: str, member_id: str, topology: dict[str, Any],
                 instance_id: str | None = None, process_id: str = "process-1", timeout_s: float = 10.0) -> None:
        lookup = RawClient(bootstrap, timeout_s)
        try:
            found = lookup.call(ApiKey.FindCoordinator, 3, {"key": group_id, "key_type": 0})
        finally:
            lookup.close()
        assert found["error_code"] == 0, found
        self.client = RawClient(f"{found['host']}:{found['port']}", timeout_s)
        self.group_id, self.member_id, self.instance_id = group_id, member_id, instance_id
        self.topology, self.process_id = topology, process_id
        self.epoch = 0
        self.owned: dict[str, list[dict[str, Any]]] = {kind: [] for kind in TASK_LISTS}
        self.last: dict[str, Any] = {}

    def heartbeat(self) -> dict[str, Any]:
        """One heartbeat (a join at epoch 0, with the topology); its answer. Tasks given are owned at once."""
        joining = self.epoch == 0
        body = {"group_id": self.group_id, "member_id": self.member_id, "member_epoch": self.epoch,
                "endpoint_information_epoch": 0, "instance_id": self.instance_id,
                "rebalance_timeout_ms": 30_000 if joining else -1, "topology": self.topology if joining else None,
                "process_id": self.process_id if joining else None,
                **({kind: [] for kind in TASK_LISTS} if joining else self.owned)}
        answer = self.client.call(ApiKey.StreamsGroupHeartbeat, 0, body)
        # The coordinator did not answer in time: sent again, as a client does (not a static member's join, which
        # may have gone through: its repetition would meet its own instance id, UNRELEASED_INSTANCE_ID).
        while answer["error_code"] == COORDINATOR_NOT_AVAILABLE and not (joining and self.instance_id):
            answer = self.client.call(ApiKey.StreamsGroupHeartbeat, 0, body)
        if answer["error_code"] == 0:
            self.epoch = answer["member_epoch"]
            for kind in TASK_LISTS:
                if answer[kind] is not None:
                    self.owned[kind] = answer[kind]
        self.last = answer
        return answer

    def leave(self, epoch: int = LEAVE) -> dict[str, Any]:
        answer = self.client.call(ApiKey.StreamsGroupHeartbeat, 0, {
            "group_id": self.group_id, "member_id": self.member_id, "member_epoch": epoch,
            "endpoint_information_epoch": 0, "instance_id": self.instance_id})
        self.client.close()
        return answer

    @property
    def active(self) -> list[int]:
        """The active tasks it owns, as partitions of the one subtopology."""
        return sorted(p for tasks in self.owned["active_tasks"] for p in tasks["partitions"])


def settle(members: list[StreamsMember], partitions: int, timeout_s: float = 60.0) -> None:
    """Heartbeats every member until the active tasks 0..partitions-1 are spread over them, each owned once, and
    the last answers report no status (topics ready) and the same member epoch."""
    deadline = time.monotonic() + timeout_s
    while True:
        for member in members:
            answer = member.heartbeat()
            assert answer["error_code"] == 0, answer
        owned = sorted(p for member in members for p in member.active)
        epochs = {member.epoch for member in members}
        if owned == list(range(partitions)) and len(epochs) == 1 and all(
                not member.last["status"] for member in members):
            return
        assert time.monotonic() < deadline, [(m.member_id, m.epoch, m.active, m.last) for m in members]
        time.sleep(0.2)
