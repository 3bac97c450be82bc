"""The envelope (PROTOCOL.md sections 1-4a): the one owner of the format every side of the contract speaks.

Everything that two sides must spell the same way is defined here once, and the engine, the gateway, the
client library, the job, the CLI and the lab's tools import it: the APIs and the versions the coordinator
supports, the envelope's field names (requests are parsed and responses built through them), the integer
bounds of its fields, request, response and Tick envelopes, the key a response is matched to its request
by and the response-topic partition it is read from, the tombstone line of a removed group, the ListGroups
answer (wherever it is asked), and the epoch simulated clocks start at. Plain data and pure functions
only: a client library can import this module without the engine's state machine.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from enum import StrEnum
from typing import Any, Final, overload

from .errors import Error
from .listing import Snapshot, list_groups_body
from .records import Invalid, ListGroups, Reply

__all__ = [
    "API",
    "BODY",
    "CLIENT_HOST",
    "CLIENT_ID",
    "CORRELATION_ID",
    "CREATE_TOPICS",
    "GROUPS",
    "GROUPS_NAMES",
    "GROUP_ID",
    "GROUP_IDS",
    "INT32_MAX",
    "INT32_MIN",
    "INT64_MAX",
    "INT64_MIN",
    "MAX_TIMESTAMP_MS",
    "REPLY_TO",
    "SIMULATION_EPOCH_MS",
    "SUPPORTED_VERSIONS",
    "TICK",
    "TIMESTAMP_MS",
    "TOPIC_METADATA",
    "VERSION",
    "Api",
    "Error",
    "Response",
    "ResponseKey",
    "answer_list_groups",
    "is_tombstone",
    "is_utf8_encodable",
    "latest_version",
    "request_envelope",
    "response_envelope",
    "response_key",
    "response_partition",
    "routing_group_id",
    "tick_envelope",
    "tombstone",
]

INT32_MIN, INT32_MAX = -(2**31), 2**31 - 1
INT64_MIN, INT64_MAX = -(2**63), 2**63 - 1
# Event times must fit Spark's timestamps and Python's datetime: up to the end of year 9999.
MAX_TIMESTAMP_MS = 253402300799999

# Simulated clocks (tests, benchmarks, the chaos simulation) start here: a realistic event time, never
# near 0, because Spark refuses timeouts <= 0 and a clock near 0 hides off-by-epoch bugs.
SIMULATION_EPOCH_MS = 1_700_000_000_000

# The envelope's fields (PROTOCOL.md 2 and 3). Plain str constants, not an enum: they are read on the paths
# every request takes, and written as JSON object keys (which must be exactly str).
API: Final = "api"
VERSION: Final = "version"
CORRELATION_ID: Final = "correlation_id"
CLIENT_ID: Final = "client_id"
CLIENT_HOST: Final = "client_host"
REPLY_TO: Final = "reply_to"
TIMESTAMP_MS: Final = "timestamp_ms"
BODY: Final = "body"
GROUP_ID: Final = "group_id"  # a response's group, the request body's; and a snapshot's
GROUPS: Final = "groups"  # a body's groups (OffsetFetch v8+, DescribeGroups: one per envelope)
GROUPS_NAMES: Final = "groups_names"  # DeleteGroups' groups (one per envelope, PROTOCOL.md 11)
GROUP_IDS: Final = "group_ids"  # StreamsGroupDescribe's groups (one per envelope)
TOPIC_METADATA: Final = "topic_metadata"  # a StreamsGroupHeartbeat's topic partition counts (PROTOCOL.md 10)
CREATE_TOPICS: Final = "create_topics"  # a StreamsGroupHeartbeat answer's internal topics to create
_TOMBSTONE: Final = "tombstone"


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
    DELETE_GROUPS = "DeleteGroups"
    OFFSET_DELETE = "OffsetDelete"
    STREAMS_GROUP_HEARTBEAT = "StreamsGroupHeartbeat"
    STREAMS_GROUP_DESCRIBE = "StreamsGroupDescribe"


# The clock record of PROTOCOL.md section 2: moves the watermark, belongs to no group, gets no answer.
TICK = "Tick"

# Supported versions per API, lowest and highest (PROTOCOL.md sections 2, 8 and 11).
SUPPORTED_VERSIONS: dict[str, tuple[int, int]] = {
    Api.JOIN_GROUP: (0, 9),
    Api.SYNC_GROUP: (0, 5),
    Api.HEARTBEAT: (0, 4),
    Api.LEAVE_GROUP: (0, 5),
    Api.OFFSET_COMMIT: (0, 9),
    Api.OFFSET_FETCH: (0, 9),
    Api.DESCRIBE_GROUPS: (0, 6),
    Api.LIST_GROUPS: (0, 5),
    Api.DELETE_GROUPS: (0, 2),
    Api.OFFSET_DELETE: (0, 0),
    Api.STREAMS_GROUP_HEARTBEAT: (0, 0),
    Api.STREAMS_GROUP_DESCRIBE: (0, 0),
}

Response = dict[str, Any]
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
    envelope: dict[str, Any] = {API: str(api)}
    if version is not None:
        envelope[VERSION] = version
    envelope[CORRELATION_ID] = correlation_id
    for key, value in ((CLIENT_ID, client_id), (CLIENT_HOST, client_host), (REPLY_TO, reply_to),
                       (TIMESTAMP_MS, timestamp_ms)):
        if value is not None:
            envelope[key] = value
    envelope[BODY] = dict(body)
    return envelope


def tick_envelope(timestamp_ms: int) -> dict[str, Any]:
    """A Tick record at `timestamp_ms`."""
    return {API: TICK, TIMESTAMP_MS: timestamp_ms}


def response_envelope(reply: Reply, group_id: str | None, timestamp_ms: int | None, body: dict[str, Any]) -> Response:
    """A response (PROTOCOL.md section 3): `body` in the envelope that routes it back to the requester."""
    return {
        API: reply.api,
        VERSION: reply.version,
        CORRELATION_ID: reply.correlation_id,
        CLIENT_ID: reply.client_id,
        REPLY_TO: reply.reply_to,
        GROUP_ID: group_id,
        TIMESTAMP_MS: timestamp_ms,
        BODY: body,
    }


def response_key(envelope: Mapping[str, Any]) -> ResponseKey | None:
    """The (reply_to, correlation_id) of a request or response envelope, or None when it cannot be answered.

    `reply_to` defaults to `client_id` (PROTOCOL.md section 2), and that to "". An envelope without an
    int32 `correlation_id` or with a `reply_to` that is not a (UTF-8 encodable) string is never
    answered (section 3), so it has no key: there is no default correlation id.
    """
    correlation_id = envelope.get(CORRELATION_ID)
    if type(correlation_id) is not int or not INT32_MIN <= correlation_id <= INT32_MAX:
        return None
    reply_to = envelope.get(REPLY_TO, envelope.get(CLIENT_ID, ""))
    if type(reply_to) is not str or not is_utf8_encodable(reply_to):
        return None
    return (reply_to, correlation_id)


def response_partition(reply_to: str, partitions: int, murmur2: Callable[[bytes], int]) -> int:
    """The response-topic partition of `reply_to`, the responses' record key (PROTOCOL.md section 1), as Kafka's
    default partitioner places it: murmur2 of the UTF-8 key, made positive, modulo the partitions.

    `murmur2` is a Kafka client's (kafka-python's `kafka.partitioner.default.murmur2`): the engine imports none.
    """
    return (murmur2(reply_to.encode("utf-8")) & 0x7FFFFFFF) % partitions


def routing_group_id(envelope: Mapping[str, Any]) -> str | None:
    """The group a request belongs to, by which it is keyed and routed: the body's `group_id`, or the id
    of its one `groups` (or `group_ids`, `groups_names`) entry (OffsetFetch v8+, DescribeGroups,
    StreamsGroupDescribe, DeleteGroups: one group per envelope, PROTOCOL.md 8, 10 and 11). None when there is none
    to read (ListGroups, a Tick, a malformed record)."""
    body = envelope.get(BODY)
    if type(body) is not dict:
        return None
    group_id = body.get(GROUP_ID)
    groups = body.get(GROUPS, body.get(GROUP_IDS, body.get(GROUPS_NAMES)))
    if group_id is None and type(groups) is list and len(groups) == 1:
        group_id = groups[0].get(GROUP_ID) if type(groups[0]) is dict else groups[0]
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
    return {GROUP_ID: group_id, _TOMBSTONE: True}


def is_tombstone(snapshot: Mapping[str, Any]) -> bool:
    return snapshot.get(_TOMBSTONE) is True


@overload
def answer_list_groups(request: ListGroups, every_group: Iterable[Snapshot], at_ms: int | None = None) -> Response:
    ...


@overload
def answer_list_groups(request: ListGroups, every_group: None, at_ms: int | None = None) -> Invalid:
    ...


def answer_list_groups(request: ListGroups, every_group: Iterable[Snapshot] | None,
                       at_ms: int | None = None) -> Response | Invalid:
    """ListGroups answered wherever it is asked (PROTOCOL.md 8): from `every_group`'s snapshots (a
    LocalCoordinator's groups, the snapshot topic a gateway or the CLI reads), stamped `at_ms` (default: the
    request's time). Where no one view holds every group (None: the request topic's per-group step, routed
    by group id) it is an invalid record: a dead letter, answered INVALID_REQUEST."""
    if every_group is None:
        return Invalid("ListGroups: no single group holds the answer, and the request topic is routed by group; "
                       "ask a gateway (which answers it from the snapshot topic) or a LocalCoordinator",
                       Error.INVALID_REQUEST, request.reply, None, request.timestamp_ms)
    body = list_groups_body(request.reply.version, every_group, request.states_filter, request.types_filter)
    return response_envelope(request.reply, None, request.timestamp_ms if at_ms is None else at_ms, body)
