"""The protocol's vocabulary (PROTOCOL.md sections 2-4a), shared by the engine, the clients, the job and tests.

Everything that two sides of the contract must spell the same way is defined here once: API names and
the versions the coordinator supports, Kafka's error codes, the request envelope and the Tick record,
the key a response is matched to its request by, the tombstone line of a removed group, and the epoch
simulated clocks start at. Plain data and pure functions only: a client library can import this module
without the engine's state machine.
"""

from __future__ import annotations

from collections.abc import Mapping
from enum import StrEnum
from typing import Any

from .errors import Error

__all__ = [
    "INT32_MAX",
    "INT32_MIN",
    "SIMULATION_EPOCH_MS",
    "SUPPORTED_VERSIONS",
    "TICK",
    "Api",
    "Error",
    "ResponseKey",
    "is_tombstone",
    "is_utf8_encodable",
    "latest_version",
    "request_envelope",
    "response_key",
    "routing_group_id",
    "tick_envelope",
    "tombstone",
]

INT32_MIN, INT32_MAX = -(2**31), 2**31 - 1

# Simulated clocks (tests, benchmarks, the chaos simulation) start here: a realistic event time, never
# near 0, because Spark refuses timeouts <= 0 and a clock near 0 hides off-by-epoch bugs.
SIMULATION_EPOCH_MS = 1_700_000_000_000


class Api(StrEnum):
    """The group APIs the coordinator answers, by their Kafka names (the envelope's `api`)."""

    JOIN_GROUP = "JoinGroup"
    SYNC_GROUP = "SyncGroup"
    HEARTBEAT = "Heartbeat"
    LEAVE_GROUP = "LeaveGroup"
    OFFSET_COMMIT = "OffsetCommit"
    OFFSET_FETCH = "OffsetFetch"
    DESCRIBE_GROUPS = "DescribeGroups"
    LIST_GROUPS = "ListGroups"


# The clock record of PROTOCOL.md section 2: moves the watermark, belongs to no group, gets no answer.
TICK = "Tick"

# Supported versions per API, lowest and highest (PROTOCOL.md sections 2 and 8).
SUPPORTED_VERSIONS: dict[str, tuple[int, int]] = {
    Api.JOIN_GROUP: (0, 9),
    Api.SYNC_GROUP: (0, 5),
    Api.HEARTBEAT: (0, 4),
    Api.LEAVE_GROUP: (0, 5),
    Api.OFFSET_COMMIT: (0, 9),
    Api.OFFSET_FETCH: (0, 9),
    Api.DESCRIBE_GROUPS: (0, 5),
    Api.LIST_GROUPS: (0, 5),
}

# How a response finds its request: (reply_to, correlation_id).
ResponseKey = tuple[str, int]


def latest_version(api: str) -> int:
    """The version an envelope without `version` stands for (the latest supported)."""
    return SUPPORTED_VERSIONS[api][1]


def request_envelope(
    api: str,
    body: Mapping[str, Any],
    *,
    correlation_id: int,
    timestamp_ms: int | None,
    version: int | None = None,
    client_id: str | None = None,
    client_host: str | None = None,
    reply_to: str | None = None,
) -> dict[str, Any]:
    """A request envelope (PROTOCOL.md section 2); a field given as None is left out (absent = its default)."""
    envelope: dict[str, Any] = {"api": str(api)}
    if version is not None:
        envelope["version"] = version
    envelope["correlation_id"] = correlation_id
    for key, value in (("client_id", client_id), ("client_host", client_host), ("reply_to", reply_to),
                       ("timestamp_ms", timestamp_ms)):
        if value is not None:
            envelope[key] = value
    envelope["body"] = dict(body)
    return envelope


def tick_envelope(timestamp_ms: int) -> dict[str, Any]:
    """A Tick record at `timestamp_ms`."""
    return {"api": TICK, "timestamp_ms": timestamp_ms}


def response_key(envelope: Mapping[str, Any]) -> ResponseKey | None:
    """The (reply_to, correlation_id) of a request or response envelope, or None when it cannot be answered.

    `reply_to` defaults to `client_id` (PROTOCOL.md section 2), and that to "". An envelope without an
    int32 `correlation_id` or with a `reply_to` that is not a (UTF-8 encodable) string is never
    answered (section 3), so it has no key: there is no default correlation id.
    """
    correlation_id = envelope.get("correlation_id")
    if type(correlation_id) is not int or not INT32_MIN <= correlation_id <= INT32_MAX:
        return None
    reply_to = envelope.get("reply_to", envelope.get("client_id", ""))
    if type(reply_to) is not str or not is_utf8_encodable(reply_to):
        return None
    return (reply_to, correlation_id)


def routing_group_id(envelope: Mapping[str, Any]) -> str | None:
    """The group a request belongs to, by which it is keyed and routed: the body's `group_id`, or the id
    of its one `groups` entry (OffsetFetch v8+, DescribeGroups: one group per envelope, PROTOCOL.md 8).
    None when there is none to read (ListGroups, a Tick, a malformed record)."""
    body = envelope.get("body")
    if type(body) is not dict:
        return None
    group_id = body.get("group_id")
    groups = body.get("groups")
    if group_id is None and type(groups) is list and len(groups) == 1:
        group_id = groups[0].get("group_id") if type(groups[0]) is dict else groups[0]
    return group_id if type(group_id) is str and is_utf8_encodable(group_id) else None


def is_utf8_encodable(text: str) -> bool:
    """False for a string holding a lone surrogate, which JSON can carry and UTF-8 cannot."""
    if text.isascii():
        return True
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


def tombstone(group_id: str) -> dict[str, Any]:
    """A removed group's line in a snapshots file (PROTOCOL.md section 4a); on the topic it is a null value."""
    return {"group_id": group_id, "tombstone": True}


def is_tombstone(snapshot: Mapping[str, Any]) -> bool:
    return snapshot.get("tombstone") is True

