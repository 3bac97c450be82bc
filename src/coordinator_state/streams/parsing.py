"""Parsing of the streams APIs' bodies (PROTOCOL.md section 10) into the records of `records`.

The same rules and validators as the classic APIs' parsing: a required field (`group_id`, `member_id`,
`member_epoch`; `group_ids`) that is absent or mistyped, or any present field of the wrong type or range, makes
the record invalid (`_Bad`, turned into an `Invalid` by the envelope parser); an absent optional field takes its
JSON spec default (null where nullable, `rebalance_timeout_ms` -1, 0, "", false, []). The heartbeat also reads
the envelope's `topic_metadata`; a malformed one makes the record invalid.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, TypeVar

from ..parsing import (
    _Bad,
    _boolean,
    _int32,
    _int64,
    _list,
    _object,
    _required,
    _string,
    _strings,
)
from ..records import Reply, new_record
from .records import (
    CopartitionGroup,
    Endpoint,
    StreamsGroupDescribe,
    StreamsGroupHeartbeat,
    Subtopology,
    TaskIds,
    TaskOffset,
    TopicInfo,
    Topology,
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
            raise _Bad(f"body.{key}: missing")
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
    group_ids = _list(_required(body, "group_ids", "body"), "body.group_ids")
    if len(group_ids) != 1:
        raise _Bad(f"body.group_ids: exactly one group per envelope, got {len(group_ids)} "
                   "(send one envelope per group)")
    return StreamsGroupDescribe(
        reply, timestamp, _string(group_ids[0], "body.group_ids[0]"),
        _boolean(body.get("include_authorized_operations", False), "body.include_authorized_operations"))


def parse_topic_metadata(value: Any) -> tuple[tuple[str, int], ...]:
    """The envelope's `{"topics": [{"name", "partitions"}]}`: partitions >= 1, or -1 for a topic that does not
    exist; absent or null names no topic."""
    if value is None:
        return ()
    where = "topic_metadata"
    topics = []
    for i, item in enumerate(_list(_required(_object(value, where), "topics", where), f"{where}.topics")):
        at = f"{where}.topics[{i}]"
        entry = _object(item, at)
        name = _string(_required(entry, "name", at), f"{at}.name")
        partitions = _int32(_required(entry, "partitions", at), f"{at}.partitions")
        if partitions < 1 and partitions != -1:
            raise _Bad(f"{at}.partitions: {partitions} is neither a partition count (>= 1) nor -1 (no such topic)")
        topics.append((name, partitions))
    if len({name for name, _ in topics}) != len(topics):
        raise _Bad(f"{where}.topics: a topic is named twice")
    return tuple(topics)


# ---------------------------------------------------------------------- the body's structures


def _narrow(value: Any, where: str, low: int, high: int, kind: str) -> int:
    """An int32 that must also fit a narrower type (int16, uint16)."""
    number = _int32(value, where)
    if not low <= number <= high:
        raise _Bad(f"{where}: {number} is outside the {kind} range")
    return number


def _int16(value: Any, where: str) -> int:
    return _narrow(value, where, -(2**15), 2**15 - 1, "int16")


def _items(obj: dict[str, Any], key: str, where: str, parse: Callable[[Any, str], _T]) -> tuple[_T, ...]:
    """A list field, [] when absent, each element parsed."""
    at = f"{where}.{key}"
    return tuple(parse(item, f"{at}[{i}]") for i, item in enumerate(_list(obj.get(key, []), at)))


def parse_topology(value: Any, where: str) -> Topology:
    obj = _object(value, where)
    return Topology(_int32(obj.get("epoch", 0), f"{where}.epoch"),
                    _items(obj, "subtopologies", where, _subtopology))


def _subtopology(value: Any, where: str) -> Subtopology:
    obj = _object(value, where)
    return Subtopology(
        subtopology_id=_string(obj.get("subtopology_id", ""), f"{where}.subtopology_id"),
        source_topics=_strings(obj.get("source_topics", []), f"{where}.source_topics"),
        source_topic_regex=_strings(obj.get("source_topic_regex", []), f"{where}.source_topic_regex"),
        state_changelog_topics=_items(obj, "state_changelog_topics", where, _topic_info),
        repartition_sink_topics=_strings(obj.get("repartition_sink_topics", []), f"{where}.repartition_sink_topics"),
        repartition_source_topics=_items(obj, "repartition_source_topics", where, _topic_info),
        copartition_groups=_items(obj, "copartition_groups", where, _copartition_group),
    )


def _topic_info(value: Any, where: str) -> TopicInfo:
    obj = _object(value, where)
    return TopicInfo(_string(obj.get("name", ""), f"{where}.name"),
                     _int32(obj.get("partitions", 0), f"{where}.partitions"),
                     _int16(obj.get("replication_factor", 0), f"{where}.replication_factor"),
                     _items(obj, "topic_configs", where, _key_value))


def _copartition_group(value: Any, where: str) -> CopartitionGroup:
    obj = _object(value, where)
    return CopartitionGroup(_items(obj, "source_topics", where, _int16),
                            _items(obj, "source_topic_regex", where, _int16),
                            _items(obj, "repartition_source_topics", where, _int16))


def _key_value(value: Any, where: str) -> tuple[str, str]:
    obj = _object(value, where)
    return (_string(obj.get("key", ""), f"{where}.key"), _string(obj.get("value", ""), f"{where}.value"))


def _key_values(value: Any, where: str) -> tuple[tuple[str, str], ...]:
    return tuple(_key_value(item, f"{where}[{i}]") for i, item in enumerate(_list(value, where)))


def _task_ids(value: Any, where: str) -> tuple[TaskIds, ...]:
    entries = []
    for i, item in enumerate(_list(value, where)):
        at = f"{where}[{i}]"
        obj = _object(item, at)
        entries.append((_string(obj.get("subtopology_id", ""), f"{at}.subtopology_id"),
                        _items(obj, "partitions", at, _int32)))
    return tuple(entries)


def _endpoint(value: Any, where: str) -> Endpoint:
    obj = _object(value, where)
    return Endpoint(_string(obj.get("host", ""), f"{where}.host"),
                    _narrow(obj.get("port", 0), f"{where}.port", 0, 2**16 - 1, "uint16"))


def _task_offsets(value: Any, where: str) -> tuple[TaskOffset, ...]:
    offsets = []
    for i, item in enumerate(_list(value, where)):
        at = f"{where}[{i}]"
        obj = _object(item, at)
        offsets.append(TaskOffset(_string(obj.get("subtopology_id", ""), f"{at}.subtopology_id"),
                                  _int32(obj.get("partition", 0), f"{at}.partition"),
                                  _int64(obj.get("offset", 0), f"{at}.offset")))
    return tuple(offsets)


# StreamsGroupHeartbeat's body fields: key -> (index in the record, parser, nullable); absent ones keep their
# JSON spec default from `_HEARTBEAT_DEFAULTS` (PROTOCOL.md section 10).
_HEARTBEAT_FIELDS: dict[str, tuple[int, Any, bool]] = {
    key: (StreamsGroupHeartbeat._fields.index(key), parse, nullable) for key, parse, nullable in (
        ("group_id", _string, False), ("member_id", _string, False), ("member_epoch", _int32, False),
        ("endpoint_information_epoch", _int32, False), ("instance_id", _string, True), ("rack_id", _string, True),
        ("rebalance_timeout_ms", _int32, False), ("topology", parse_topology, True),
        ("active_tasks", _task_ids, True), ("standby_tasks", _task_ids, True), ("warmup_tasks", _task_ids, True),
        ("process_id", _string, True), ("user_endpoint", _endpoint, True), ("client_tags", _key_values, True),
        ("task_offsets", _task_offsets, True), ("task_end_offsets", _task_offsets, True),
        ("shutdown_application", _boolean, False))}
_HEARTBEAT_REQUIRED = ("group_id", "member_id", "member_epoch")
_HEARTBEAT_DEFAULTS: tuple[Any, ...] = StreamsGroupHeartbeat(
    None, 0, "", "", "", 0, 0, None, None, -1, None, None, None, None, None, None, None, None, None, False, ())  # type: ignore[arg-type]
