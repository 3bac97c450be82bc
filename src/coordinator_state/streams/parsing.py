"""Parsing of the streams APIs' bodies (PROTOCOL.md section 10) into the records of `records`.

The same rules and validators (`fields`) as the classic APIs' parsing: a required field (`group_id`, `member_id`,
`member_epoch`; `group_ids`) that is absent or mistyped, or any present field of the wrong type or range, makes
the record invalid (`Bad`, turned into an `Invalid` by the envelope parser); an absent optional field takes its
JSON spec default (null where nullable, `rebalance_timeout_ms` -1, 0, "", false, []). The heartbeat also reads
the envelope's `topic_metadata`; a malformed one makes the record invalid.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, TypeVar

from ..fields import Bad, array, boolean, int32, int64, integer, json_object, required, string, strings
from ..records import (
    CopartitionGroup,
    Endpoint,
    Reply,
    StreamsGroupDescribe,
    StreamsGroupHeartbeat,
    Subtopology,
    TaskIds,
    TaskOffset,
    TopicInfo,
    Topology,
    new_record,
)

__all__ = ["parse_streams_describe", "parse_streams_heartbeat", "parse_topic_metadata", "parse_topology"]

_T = TypeVar("_T")


def parse_streams_heartbeat(reply: Reply, timestamp: int, client_host: str, body: dict[str, Any],
                            topic_metadata: Any = None) -> StreamsGroupHeartbeat:
    """A StreamsGroupHeartbeat v0 body; `topic_metadata` is the envelope's field as read (None when absent).

    The record is built field by field from the defaults, each field present in the body parsed by its own
    parser: a heartbeat usually names four or five fields of nineteen."""
    values = list(_HEARTBEAT_DEFAULTS)
    values[0], values[1], values[2] = reply, timestamp, client_host
    for key in _HEARTBEAT_REQUIRED:
        if key not in body:
            raise Bad(f"body.{key}: missing")
    for key, value in body.items():
        field = _HEARTBEAT_FIELDS.get(key)
        if field is not None and (value is not None or not field[2]):
            values[field[0]] = field[1](value, "body." + key)
    if topic_metadata is not None:
        values[-1] = parse_topic_metadata(topic_metadata)
    return new_record(StreamsGroupHeartbeat, tuple(values))


def parse_streams_describe(reply: Reply, timestamp: int, client_host: str,
                           body: dict[str, Any]) -> StreamsGroupDescribe:
    """A StreamsGroupDescribe v0 body naming exactly one group (a gateway splits and merges)."""
    group_ids = array(required(body, "group_ids", "body"), "body.group_ids")
    if len(group_ids) != 1:
        raise Bad(f"body.group_ids: exactly one group per envelope, got {len(group_ids)} "
                   "(send one envelope per group)")
    return StreamsGroupDescribe(
        reply, timestamp, string(group_ids[0], "body.group_ids[0]"),
        boolean(body.get("include_authorized_operations", False), "body.include_authorized_operations"))


def parse_topic_metadata(value: Any) -> tuple[tuple[str, int], ...]:
    """The envelope's `{"topics": [{"name", "partitions"}]}`: partitions >= 1, or -1 for a topic that does not
    exist; absent or null names no topic."""
    if value is None:
        return ()
    where = "topic_metadata"
    topics = []
    for i, item in enumerate(array(required(json_object(value, where), "topics", where), f"{where}.topics")):
        at = f"{where}.topics[{i}]"
        entry = json_object(item, at)
        name = string(required(entry, "name", at), f"{at}.name")
        partitions = int32(required(entry, "partitions", at), f"{at}.partitions")
        if partitions < 1 and partitions != -1:
            raise Bad(f"{at}.partitions: {partitions} is neither a partition count (>= 1) nor -1 (no such topic)")
        topics.append((name, partitions))
    if len({name for name, _ in topics}) != len(topics):
        raise Bad(f"{where}.topics: a topic is named twice")
    return tuple(topics)


# ---------------------------------------------------------------------- the body's structures


def _int16(value: Any, where: str) -> int:
    return integer(value, where, -(2**15), 2**15 - 1, "int16")


def _items(obj: dict[str, Any], key: str, where: str, parse: Callable[[Any, str], _T]) -> tuple[_T, ...]:
    """A list field, [] when absent, each element parsed."""
    at = f"{where}.{key}"
    return tuple(parse(item, f"{at}[{i}]") for i, item in enumerate(array(obj.get(key, []), at)))


def parse_topology(value: Any, where: str) -> Topology:
    obj = json_object(value, where)
    return Topology(int32(obj.get("epoch", 0), f"{where}.epoch"),
                    _items(obj, "subtopologies", where, _subtopology))


def _subtopology(value: Any, where: str) -> Subtopology:
    obj = json_object(value, where)
    return Subtopology(
        subtopology_id=string(obj.get("subtopology_id", ""), f"{where}.subtopology_id"),
        source_topics=strings(obj.get("source_topics", []), f"{where}.source_topics"),
        source_topic_regex=strings(obj.get("source_topic_regex", []), f"{where}.source_topic_regex"),
        state_changelog_topics=_items(obj, "state_changelog_topics", where, _topic_info),
        repartition_sink_topics=strings(obj.get("repartition_sink_topics", []), f"{where}.repartition_sink_topics"),
        repartition_source_topics=_items(obj, "repartition_source_topics", where, _topic_info),
        copartition_groups=_items(obj, "copartition_groups", where, _copartition_group),
    )


def _topic_info(value: Any, where: str) -> TopicInfo:
    obj = json_object(value, where)
    return TopicInfo(string(obj.get("name", ""), f"{where}.name"),
                     int32(obj.get("partitions", 0), f"{where}.partitions"),
                     _int16(obj.get("replication_factor", 0), f"{where}.replication_factor"),
                     _items(obj, "topic_configs", where, _key_value))


def _copartition_group(value: Any, where: str) -> CopartitionGroup:
    obj = json_object(value, where)
    return CopartitionGroup(_items(obj, "source_topics", where, _int16),
                            _items(obj, "source_topic_regex", where, _int16),
                            _items(obj, "repartition_source_topics", where, _int16))


def _key_value(value: Any, where: str) -> tuple[str, str]:
    obj = json_object(value, where)
    return (string(obj.get("key", ""), f"{where}.key"), string(obj.get("value", ""), f"{where}.value"))


def _key_values(value: Any, where: str) -> tuple[tuple[str, str], ...]:
    return tuple(_key_value(item, f"{where}[{i}]") for i, item in enumerate(array(value, where)))


def _task_ids(value: Any, where: str) -> tuple[TaskIds, ...]:
    entries = []
    for i, item in enumerate(array(value, where)):
        at = f"{where}[{i}]"
        obj = json_object(item, at)
        entries.append((string(obj.get("subtopology_id", ""), f"{at}.subtopology_id"),
                        _items(obj, "partitions", at, int32)))
    return tuple(entries)


def _endpoint(value: Any, where: str) -> Endpoint:
    obj = json_object(value, where)
    return Endpoint(string(obj.get("host", ""), f"{where}.host"),
                    integer(obj.get("port", 0), f"{where}.port", 0, 2**16 - 1, "uint16"))


def _task_offsets(value: Any, where: str) -> tuple[TaskOffset, ...]:
    offsets = []
    for i, item in enumerate(array(value, where)):
        at = f"{where}[{i}]"
        obj = json_object(item, at)
        offsets.append(TaskOffset(string(obj.get("subtopology_id", ""), f"{at}.subtopology_id"),
                                  int32(obj.get("partition", 0), f"{at}.partition"),
                                  int64(obj.get("offset", 0), f"{at}.offset")))
    return tuple(offsets)


# StreamsGroupHeartbeat's body fields: key -> (index in the record, parser, nullable); absent ones keep their
# JSON spec default from `_HEARTBEAT_DEFAULTS` (PROTOCOL.md section 10).
_HEARTBEAT_FIELDS: dict[str, tuple[int, Any, bool]] = {
    key: (StreamsGroupHeartbeat._fields.index(key), parse, nullable) for key, parse, nullable in (
        ("group_id", string, False), ("member_id", string, False), ("member_epoch", int32, False),
        ("endpoint_information_epoch", int32, False), ("instance_id", string, True), ("rack_id", string, True),
        ("rebalance_timeout_ms", int32, False), ("topology", parse_topology, True),
        ("active_tasks", _task_ids, True), ("standby_tasks", _task_ids, True), ("warmup_tasks", _task_ids, True),
        ("process_id", string, True), ("user_endpoint", _endpoint, True), ("client_tags", _key_values, True),
        ("task_offsets", _task_offsets, True), ("task_end_offsets", _task_offsets, True),
        ("shutdown_application", boolean, False))}
_HEARTBEAT_REQUIRED = ("group_id", "member_id", "member_epoch")
_HEARTBEAT_DEFAULTS: tuple[Any, ...] = StreamsGroupHeartbeat(
    None, 0, "", "", "", 0, 0, None, None, -1, None, None, None, None, None, None, None, None, None, False, ())  # type: ignore[arg-type]
