"""A streams group as its coordinator describes it (StreamsGroupDescribe v0, KIP-1071), read the same way from the
gateway (whichever engine is behind it) and from a plain Kafka 4.4 broker, so that both are judged alike.

`describe` asks; `ownership` reads who runs each active task, by identity (the instance id of a static member, the
process id of a dynamic one: both outlive a restart, the member id does not); `Movements` follows ownership over
successive descriptions and counts the active tasks that went to another identity.
"""

from __future__ import annotations

import socket
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from kafka.protocol.api_key import ApiKey

from kafka_gateway.apis import request_class, response_class
from kafka_gateway.codec import body_to_message, decode_response, message_to_body
from kafka_gateway.frames import FrameSplitter

DESCRIBE_VERSION = 0
_CLIENT_ID = "chaos-streams-describe"


def describe(address: str, group: str, timeout_s: float = 10.0) -> dict[str, Any]:
    """The group's StreamsGroupDescribe v0 entry from the coordinator at `address` (`host:port` of a gateway, or of
    a broker: a Kafka 4.4 broker is every group's coordinator on a single node)."""
    host, port = address.split(",")[0].rsplit(":", 1)
    message = body_to_message(request_class(ApiKey.StreamsGroupDescribe), DESCRIBE_VERSION,
                              {"group_ids": [group], "include_authorized_operations": False})
    message.with_header(correlation_id=1, client_id=_CLIENT_ID)
    splitter = FrameSplitter()
    with socket.create_connection((host, int(port)), timeout=timeout_s) as sock:
        sock.sendall(bytes(message.encode(header=True, framed=True)))
        frames: list[bytes] = []
        while not frames:
            data = sock.recv(65536)
            if not data:
                raise ConnectionError(f"{address} closed the connection before answering StreamsGroupDescribe")
            frames = splitter.feed(data)
    answer = decode_response(response_class(ApiKey.StreamsGroupDescribe), frames[0], DESCRIBE_VERSION)
    [entry] = message_to_body(answer, DESCRIBE_VERSION)["groups"]
    return dict(entry)


def identity(member: Mapping[str, Any]) -> str:
    """What a member stands for across restarts: its instance id if static, else its process id."""
    return str(member.get("instance_id") or member["process_id"])


def task_ids(tasks: Any) -> list[str]:
    """A describe entry's task list ([{subtopology_id, partitions}]) as Kafka Streams names tasks: `0_1`."""
    return sorted(f"{t['subtopology_id']}_{p}" for t in tasks or [] for p in t["partitions"])


def ownership(entry: Mapping[str, Any]) -> dict[str, str]:
    """Active task -> the identity of the member whose current assignment holds it."""
    return {task: identity(member) for member in entry.get("members") or []
            for task in task_ids((member.get("assignment") or {}).get("active_tasks"))}


def settled(entry: Mapping[str, Any], members: int) -> bool:
    """Stable with `members` members, each holding its target assignment, and every member's epoch the group's."""
    described = entry.get("members") or []
    return (entry.get("error_code") == 0 and entry.get("group_state") == "Stable" and len(described) == members
            and all(m["member_epoch"] == entry["assignment_epoch"]
                    and task_ids(m["assignment"]["active_tasks"]) == task_ids(m["target_assignment"]["active_tasks"])
                    for m in described))


@dataclass
class Movements:
    """Active task ownership over successive descriptions: how many times a task went to another identity than
    the one that last held it (a task left unowned for a while and taken back by the same identity did not move)."""

    last_owner: dict[str, str] = field(default_factory=dict)
    moves: list[tuple[str, str, str]] = field(default_factory=list)  # (task, from, to)

    def observe(self, entry: Mapping[str, Any]) -> None:
        for task, owner in sorted(ownership(entry).items()):
            previous = self.last_owner.get(task)
            if previous is not None and previous != owner:
                self.moves.append((task, previous, owner))
            self.last_owner[task] = owner
