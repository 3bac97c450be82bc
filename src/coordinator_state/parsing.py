"""Parsing (PROTOCOL.md section 2): validation at the one boundary where records become requests.

Theory of operation: a record from the request topic or a traffic file is either a valid request
(one of the immutable records of `records`), a Tick, or an `Invalid` carrying the reason and, when the
record names a `reply_to` and a `correlation_id`, enough to answer it. Nothing here raises on bad
input: `decode_record` and `parse_request` turn every failure into an `Invalid`. Fields a version
does not define are ignored; a required field that is absent or mistyped makes the record invalid.
The envelope's fields are read through `envelope`'s names; a body's fields are Kafka's, per API below.
"""

from __future__ import annotations

import binascii
import json
from collections.abc import Iterable
from typing import Any

try:  # a faster reader where installed; the engine runs on the standard library alone (the conformance runner's)
    import orjson
except ImportError:
    orjson = None  # type: ignore[assignment]

from .envelope import (
    API,
    BODY,
    CLIENT_HOST,
    CLIENT_ID,
    CORRELATION_ID,
    GROUP_ID,
    GROUPS,
    GROUPS_NAMES,
    INT32_MAX,
    INT32_MIN,
    INT64_MAX,
    INT64_MIN,
    MAX_TIMESTAMP_MS,
    REPLY_TO,
    SUPPORTED_VERSIONS,
    TICK,
    TIMESTAMP_MS,
    TOPIC_METADATA,
    VERSION,
    Api,
    answer_list_groups,
    is_utf8_encodable,
    response_key,
    routing_group_id,
)
from .errors import Error
from .fields import Bad as _Bad
from .fields import array as _list
from .fields import boolean as _boolean
from .fields import bytes_b64 as _bytes_b64
from .fields import int32 as _int32
from .fields import int64 as _int64
from .fields import json_object as _object
from .fields import nullable_string as _nullable_string
from .fields import required as _required
from .fields import string as _string
from .fields import strings as _strings
from .fields import type_name as _type_name
from .records import (
    CommitPartition,
    CommitTopic,
    DeleteGroups,
    DescribeGroups,
    FetchTopic,
    Heartbeat,
    Invalid,
    JoinGroup,
    LeaveEntry,
    LeaveGroup,
    ListGroups,
    OffsetCommit,
    OffsetDelete,
    OffsetFetch,
    Parsed,
    Protocol,
    Reply,
    Request,
    SyncGroup,
    Tick,
    new_record,
)
from .streams.parsing import parse_streams_describe, parse_streams_heartbeat


def _body_string(body: dict[str, Any], key: str) -> str:
    """`body[key]`, a required string: a plain ASCII one passes inline, any other goes through the validators."""
    value = body.get(key)
    if type(value) is str and value.isascii():
        return value
    return _string(_required(body, key, "body"), f"body.{key}")


def _body_nullable_string(body: dict[str, Any], key: str) -> str | None:
    value = body.get(key)
    if value is None or (type(value) is str and value.isascii()):
        return value
    return _string(value, f"body.{key}")


def _body_int32(body: dict[str, Any], key: str) -> int:
    value = body.get(key)
    if type(value) is int and INT32_MIN <= value <= INT32_MAX:
        return value
    return _int32(_required(body, key, "body"), f"body.{key}")


def _string_and_bytes_list(body: dict[str, Any], key: str, name: str, data: str) -> list[tuple[str, str]]:
    """`body[key]`: a list of {name: string, data: base64} (protocols, assignments), data made canonical.

    Well-formed entries take a fast path; any other goes through the validators, which say what is wrong.
    """
    pairs = []
    for i, item in enumerate(_list(_required(body, key, "body"), f"body.{key}")):
        if type(item) is dict:
            text, encoded = item.get(name), item.get(data)
            if type(text) is str and text.isascii() and type(encoded) is str:
                try:
                    raw = binascii.a2b_base64(encoded, strict_mode=True)
                except (binascii.Error, ValueError):
                    pass
                else:
                    pairs.append((text, binascii.b2a_base64(raw, newline=False).decode("ascii")))
                    continue
        where = f"body.{key}[{i}]"
        entry = _object(item, where)
        pairs.append((_string(_required(entry, name, where), f"{where}.{name}"),
                      _bytes_b64(_required(entry, data, where), f"{where}.{data}")))
    return pairs


def _timestamp(value: Any) -> int:
    if type(value) is not int:
        raise _Bad(f"timestamp_ms: expected an integer, got {_type_name(value)}")
    if not 0 <= value <= MAX_TIMESTAMP_MS:
        raise _Bad(f"timestamp_ms: {value} is outside 0..{MAX_TIMESTAMP_MS}")
    return value


def decode_record(raw: bytes | str | None) -> Any:
    """Decodes a record's value as the standard library does; undecodable input comes back as an `Invalid`.

    Integers of any size stay integers, and the error texts are the ones the dead letters have always used.
    """
    if raw is None:
        return Invalid("record has no value", Error.INVALID_REQUEST, None, None, None)
    try:
        text = raw.decode("utf-8") if isinstance(raw, bytes | bytearray) else raw
        return json.loads(text)
    except UnicodeDecodeError:
        return Invalid("record is not valid UTF-8", Error.INVALID_REQUEST, None, None, None)
    except RecursionError:
        return Invalid("JSON nested too deeply", Error.INVALID_REQUEST, None, None, None)
    except ValueError as exc:
        return Invalid(f"not valid JSON: {exc}", Error.INVALID_REQUEST, None, None, None)


def parse_request(
    obj: Any,
    *,
    record_timestamp_ms: int | None = None,
    max_clock_skew_ms: int | None = None,
) -> Parsed:
    """Validates one decoded envelope.

    `record_timestamp_ms` is the Kafka record's timestamp: it stands in for an absent
    `timestamp_ms`, and with `max_clock_skew_ms` (live job only) bounds a client's clock.
    """
    if type(obj) is not dict:
        if isinstance(obj, Invalid):  # decode_record's verdict
            return obj
        return Invalid(f"envelope: expected a JSON object, got {_type_name(obj)}",
                       Error.INVALID_REQUEST, None, None, None)
    try:
        return _parse_envelope(obj, record_timestamp_ms, max_clock_skew_ms)
    except _Bad as bad:
        # Only now, for an answer and a dead letter: what can still be read of the routing, group and time.
        return Invalid(str(bad), bad.error, _readable_reply(obj), routing_group_id(obj),
                       _readable_timestamp(obj, record_timestamp_ms))


def _parse_envelope(obj: dict[str, Any], record_ts: int | None, max_skew: int | None) -> Request | ListGroups | Tick:
    api: Any = obj.get(API)
    if api == TICK:
        return Tick(_envelope_timestamp(obj, record_ts, max_skew))
    versions = SUPPORTED_VERSIONS.get(api) if type(api) is str else None
    if versions is None:
        raise _Bad(f"api: unknown api {api!r}")
    low, high = versions
    version = obj.get(VERSION, high)
    if type(version) is not int:
        raise _Bad(f"version: expected an integer, got {_type_name(version)}")
    if not low <= version <= high:
        raise _Bad(f"{api} version {version} is not supported (supported: {low}-{high})", Error.UNSUPPORTED_VERSION)
    # The common case inline: an own timestamp in range, no skew bound (everywhere but the live job).
    timestamp = obj.get(TIMESTAMP_MS)
    if max_skew is not None or type(timestamp) is not int or not 0 <= timestamp <= MAX_TIMESTAMP_MS:
        timestamp = _envelope_timestamp(obj, record_ts, max_skew)
    # Likewise the routing fields: an int32 correlation id, ASCII reply_to and client_id; the rule
    # (envelope.response_key) decides every other case.
    correlation_id = obj.get(CORRELATION_ID)
    client_id = obj.get(CLIENT_ID, "")
    reply_to = obj.get(REPLY_TO, client_id)
    if not (type(correlation_id) is int and INT32_MIN <= correlation_id <= INT32_MAX and type(reply_to) is str
            and reply_to.isascii() and type(client_id) is str and client_id.isascii()):
        routing = _routing(obj)
        if routing is None:
            raise _Bad("envelope: needs an int32 correlation_id and a string reply_to (or client_id)")
        correlation_id, client_id, reply_to = routing
    client_host = obj.get(CLIENT_HOST, "")
    if type(client_host) is not str or not client_host.isascii():
        client_host = "" if client_host is None else _string(client_host, "client_host")
    body = obj.get(BODY)
    if type(body) is not dict:
        body = _object(_required(obj, BODY, "envelope"), "body")
    reply = new_record(Reply, (api, version, correlation_id, client_id, reply_to))
    if api == Api.STREAMS_GROUP_HEARTBEAT:  # the one body that reads an envelope field: its topic metadata
        return parse_streams_heartbeat(reply, timestamp, client_host, body, obj.get(TOPIC_METADATA))
    parsed: Request | ListGroups = _PARSERS[api](reply, timestamp, client_host, body)
    return parsed


def for_one_group(parsed: Parsed) -> Request | Tick | Invalid:
    """A record as a per-group step sees it: ListGroups belongs to no group, so there it is invalid (PROTOCOL.md 8)."""
    return answer_list_groups(parsed, every_group=None) if isinstance(parsed, ListGroups) else parsed


def group_requests(records: Iterable[tuple[bytes, int | None]], max_clock_skew_ms: int | None) -> list[Request]:
    """A per-group step's records (raw value, broker timestamp), each one already found to be a request of the group
    (the Spark job's parse stage routes ticks and invalid records elsewhere), parsed again as that stage parsed
    them; ValueError for a record that is not a request."""
    requests: list[Request] = []
    for raw, record_ts in records:
        parsed = for_one_group(parse_raw(raw, record_timestamp_ms=record_ts, max_clock_skew_ms=max_clock_skew_ms))
        if isinstance(parsed, Tick | Invalid):
            raise ValueError(f"a per-group step was given a record that is not a request: {raw[:200]!r}")
        requests.append(parsed)
    return requests


def _readable_timestamp(obj: dict[str, Any], record_ts: int | None) -> int | None:
    """The time to stamp an answer to an invalid record with: its own if readable, else the broker's."""
    try:
        return _timestamp(obj[TIMESTAMP_MS]) if TIMESTAMP_MS in obj else record_ts
    except _Bad:
        return record_ts


def parse_raw(raw: bytes | str | None, *, record_timestamp_ms: int | None = None,
              max_clock_skew_ms: int | None = None) -> Parsed:
    """A raw record (a Kafka value, a line of a traffic file) as the engine sees it: `decode_record`, then
    `parse_request`, with the same result for every input.

    The fast path reads the bytes with orjson, which agrees with the standard library on every document both
    accept, but for integers outside 64 bits: orjson reads those as floats. No request field takes a float
    (every one is checked as exactly an int, str, bool, list, object or null, and a field that is not read
    stays out of the request), so a float can only make a record invalid, never valid nor another request:
    a record orjson's reading leaves invalid, or that orjson refuses, is read again by the standard library,
    whose values and error texts decide.
    """
    if orjson is not None and isinstance(raw, bytes):
        try:
            obj = orjson.loads(raw)
        except orjson.JSONDecodeError:
            pass
        else:
            parsed = parse_request(obj, record_timestamp_ms=record_timestamp_ms, max_clock_skew_ms=max_clock_skew_ms)
            if not isinstance(parsed, Invalid):
                return parsed
    return parse_request(decode_record(raw), record_timestamp_ms=record_timestamp_ms,
                         max_clock_skew_ms=max_clock_skew_ms)


def _envelope_timestamp(obj: dict[str, Any], record_ts: int | None, max_skew: int | None) -> int:
    if TIMESTAMP_MS not in obj:
        if record_ts is None:
            raise _Bad("timestamp_ms: missing (required outside the live job)")
        return _timestamp(record_ts)
    timestamp = _timestamp(obj[TIMESTAMP_MS])
    if max_skew is not None and record_ts is not None and abs(timestamp - record_ts) > max_skew:
        raise _Bad(f"timestamp_ms: {timestamp} lies {timestamp - record_ts} ms from the record's broker "
                   f"timestamp {record_ts}, more than coordinator.max.clock.skew.ms = {max_skew}; "
                   "fix the client's clock")
    return timestamp


def _routing(obj: dict[str, Any]) -> tuple[int, str, str] | None:
    """(correlation_id, client_id, reply_to), if they can be read: envelope.response_key's rule, and a client_id."""
    key = response_key(obj)
    if key is None:
        return None
    client_id = obj.get(CLIENT_ID, "")
    if client_id is None:
        client_id = ""
    elif type(client_id) is not str or not is_utf8_encodable(client_id):
        return None
    return key[1], client_id, key[0]


def _readable_reply(obj: dict[str, Any]) -> Reply | None:
    """The routing fields, if they can be read, so that even an invalid record can be answered."""
    routing = _routing(obj)
    if routing is None:
        return None
    correlation_id, client_id, reply_to = routing
    api = obj.get(API)
    version = obj.get(VERSION)
    if type(api) is not str or not is_utf8_encodable(api):
        api = ""
    if type(version) is not int or not INT32_MIN <= version <= INT32_MAX:
        version = SUPPORTED_VERSIONS.get(api, (0, 0))[1] if VERSION not in obj else -1
    return Reply(api, version, correlation_id, client_id, reply_to)


def _parse_join(reply: Reply, timestamp: int, client_host: str, body: dict[str, Any]) -> JoinGroup:
    v = reply.version
    session = _body_int32(body, "session_timeout_ms")
    rebalance = _body_int32(body, "rebalance_timeout_ms") if v >= 1 else session
    instance = _body_nullable_string(body, "group_instance_id") if v >= 5 else None
    if v >= 8:
        _body_nullable_string(body, "reason")
    protocols = [new_record(Protocol, pair) for pair in _string_and_bytes_list(body, "protocols", "name", "metadata")]
    group_id = _body_string(body, GROUP_ID)
    member_id = _body_string(body, "member_id")
    protocol_type = _body_string(body, "protocol_type")
    return new_record(JoinGroup, (reply, timestamp, client_host, group_id, session, rebalance, member_id, instance,
                                  protocol_type, tuple(protocols)))


def _parse_sync(reply: Reply, timestamp: int, client_host: str, body: dict[str, Any]) -> SyncGroup:
    v = reply.version
    assignments = _string_and_bytes_list(body, "assignments", "member_id", "assignment")
    group_id = _body_string(body, GROUP_ID)
    generation_id = _body_int32(body, "generation_id")
    member_id = _body_string(body, "member_id")
    instance = _body_nullable_string(body, "group_instance_id") if v >= 3 else None
    protocol_type = _body_nullable_string(body, "protocol_type") if v >= 5 else None
    protocol_name = _body_nullable_string(body, "protocol_name") if v >= 5 else None
    return new_record(SyncGroup, (reply, timestamp, group_id, generation_id, member_id, instance, protocol_type,
                                  protocol_name, tuple(assignments)))


def _parse_heartbeat(reply: Reply, timestamp: int, client_host: str, body: dict[str, Any]) -> Heartbeat:
    group_id = body.get(GROUP_ID)
    generation_id = body.get("generation_id")
    member_id = body.get("member_id")
    instance = body.get("group_instance_id") if reply.version >= 3 else None
    # The hot path: plain strings and int32s pass these checks without calling the validators.
    if not (type(group_id) is str and group_id.isascii()):
        group_id = _body_string(body, GROUP_ID)
    if not (type(generation_id) is int and INT32_MIN <= generation_id <= INT32_MAX):
        generation_id = _body_int32(body, "generation_id")
    if not (type(member_id) is str and member_id.isascii()):
        member_id = _body_string(body, "member_id")
    if instance is not None and not (type(instance) is str and instance.isascii()):
        instance = _string(instance, "body.group_instance_id")
    return new_record(Heartbeat, (reply, timestamp, group_id, generation_id, member_id, instance))


def _parse_leave(reply: Reply, timestamp: int, client_host: str, body: dict[str, Any]) -> LeaveGroup:
    group_id = _body_string(body, GROUP_ID)
    entries: tuple[LeaveEntry, ...]
    if reply.version <= 2:
        entries = (LeaveEntry(_body_string(body, "member_id"), None),)
    else:
        parsed = []
        for i, item in enumerate(_list(_required(body, "members", "body"), "body.members")):
            entry = _object(item, f"body.members[{i}]")
            member_id = _string(_required(entry, "member_id", f"body.members[{i}]"), f"body.members[{i}].member_id")
            instance = _nullable_string(entry.get("group_instance_id"), f"body.members[{i}].group_instance_id")
            if reply.version >= 5:
                _nullable_string(entry.get("reason"), f"body.members[{i}].reason")
            parsed.append(LeaveEntry(member_id, instance))
        entries = tuple(parsed)
    return LeaveGroup(reply, timestamp, group_id, entries)


def _commit_partition(part: Any, v: int, at: str) -> CommitPartition:
    """One partition of an OffsetCommit, every field validated (the slow path, which names what is wrong)."""
    part = _object(part, at)
    return CommitPartition(
        partition_index=_int32(_required(part, "partition_index", at), f"{at}.partition_index"),
        committed_offset=_int64(_required(part, "committed_offset", at), f"{at}.committed_offset"),
        committed_leader_epoch=(_int32(part.get("committed_leader_epoch", -1), f"{at}.committed_leader_epoch")
                                if v >= 6 else -1),
        commit_timestamp_ms=_int64(part.get("commit_timestamp", -1), f"{at}.commit_timestamp") if v == 1 else -1,
        committed_metadata=_nullable_string(part.get("committed_metadata"), f"{at}.committed_metadata"),
    )


def _parse_offset_commit(reply: Reply, timestamp: int, client_host: str, body: dict[str, Any]) -> OffsetCommit:
    v = reply.version
    topics = []
    for i, item in enumerate(_list(_required(body, "topics", "body"), "body.topics")):
        where = f"body.topics[{i}]"
        topic = _object(item, where)
        partitions = []
        for j, part in enumerate(_list(_required(topic, "partitions", where), f"{where}.partitions")):
            # The hot path: well-formed partitions of v2+ pass these checks without calling the validators.
            if type(part) is dict and v >= 2:
                index, offset = part.get("partition_index"), part.get("committed_offset")
                epoch = part.get("committed_leader_epoch", -1) if v >= 6 else -1
                metadata = part.get("committed_metadata")
                if (type(index) is int and INT32_MIN <= index <= INT32_MAX
                        and type(offset) is int and INT64_MIN <= offset <= INT64_MAX
                        and type(epoch) is int and INT32_MIN <= epoch <= INT32_MAX
                        and (metadata is None or (type(metadata) is str and metadata.isascii()))):
                    partitions.append(new_record(CommitPartition, (index, offset, epoch, -1, metadata)))
                    continue
            partitions.append(_commit_partition(part, v, f"{where}.partitions[{j}]"))
        topics.append(CommitTopic(_string(_required(topic, "name", where), f"{where}.name"), tuple(partitions)))
    return OffsetCommit(
        reply, timestamp,
        group_id=_body_string(body, GROUP_ID),
        generation_id=(_int32(body.get("generation_id_or_member_epoch", -1), "body.generation_id_or_member_epoch")
                       if v >= 1 else -1),
        member_id=_body_string(body, "member_id") if v >= 1 else "",
        group_instance_id=(_body_nullable_string(body, "group_instance_id")
                           if v >= 7 else None),
        retention_time_ms=_int64(body.get("retention_time_ms", -1), "body.retention_time_ms") if 2 <= v <= 4 else -1,
        topics=tuple(topics),
    )


def _fetch_topics(value: Any, where: str, nullable: bool) -> tuple[FetchTopic, ...] | None:
    if value is None and nullable:
        return None
    topics = []
    for i, item in enumerate(_list(value, where)):
        topic = _object(item, f"{where}[{i}]")
        indexes = _list(_required(topic, "partition_indexes", f"{where}[{i}]"), f"{where}[{i}].partition_indexes")
        topics.append(FetchTopic(
            _string(_required(topic, "name", f"{where}[{i}]"), f"{where}[{i}].name"),
            tuple(_int32(p, f"{where}[{i}].partition_indexes[{k}]") for k, p in enumerate(indexes)),
        ))
    return tuple(topics)


def _one_group(body: dict[str, Any], key: str = GROUPS) -> Any:
    """The one entry of `groups` (`groups_names`): this coordinator routes by group, so an envelope names one
    (PROTOCOL.md 8 and 11)."""
    groups = _list(_required(body, key, "body"), f"body.{key}")
    if len(groups) != 1:
        raise _Bad(f"body.{key}: exactly one group per envelope, got {len(groups)} (send one envelope per group)")
    return groups[0]


def _parse_offset_fetch(reply: Reply, timestamp: int, client_host: str, body: dict[str, Any]) -> OffsetFetch:
    v = reply.version
    if v >= 7:
        _boolean(body.get("require_stable", False), "body.require_stable")
    if v <= 7:
        topics_value = _required(body, "topics", "body") if v <= 1 else body.get("topics")
        return OffsetFetch(reply, timestamp, _body_string(body, GROUP_ID),
                           _fetch_topics(topics_value, "body.topics", nullable=v >= 2))
    group = _object(_one_group(body), "body.groups[0]")
    member_id, member_epoch = None, -1
    if v >= 9:
        member_id = _nullable_string(group.get("member_id"), "body.groups[0].member_id")
        member_epoch = _int32(group.get("member_epoch", -1), "body.groups[0].member_epoch")
    return OffsetFetch(reply, timestamp,
                       _string(_required(group, GROUP_ID, "body.groups[0]"), "body.groups[0].group_id"),
                       _fetch_topics(group.get("topics"), "body.groups[0].topics", nullable=True),
                       member_id, member_epoch)


def _parse_describe(reply: Reply, timestamp: int, client_host: str, body: dict[str, Any]) -> DescribeGroups:
    include = (_boolean(body.get("include_authorized_operations", False), "body.include_authorized_operations")
               if reply.version >= 3 else False)
    return DescribeGroups(reply, timestamp, _string(_one_group(body), "body.groups[0]"), include)


def _parse_delete_groups(reply: Reply, timestamp: int, client_host: str, body: dict[str, Any]) -> DeleteGroups:
    return DeleteGroups(reply, timestamp, _string(_one_group(body, GROUPS_NAMES), f"body.{GROUPS_NAMES}[0]"))


def _parse_offset_delete(reply: Reply, timestamp: int, client_host: str, body: dict[str, Any]) -> OffsetDelete:
    topics = []
    for i, item in enumerate(_list(_required(body, "topics", "body"), "body.topics")):
        where = f"body.topics[{i}]"
        topic = _object(item, where)
        partitions = _list(_required(topic, "partitions", where), f"{where}.partitions")
        indexes = []
        for k, part in enumerate(partitions):
            at = f"{where}.partitions[{k}]"
            indexes.append(_int32(_required(_object(part, at), "partition_index", at), f"{at}.partition_index"))
        topics.append(FetchTopic(_string(_required(topic, "name", where), f"{where}.name"), tuple(indexes)))
    return OffsetDelete(reply, timestamp, _body_string(body, GROUP_ID), tuple(topics))


def _parse_list(reply: Reply, timestamp: int, client_host: str, body: dict[str, Any]) -> ListGroups:
    v = reply.version
    return ListGroups(
        reply, timestamp,
        states_filter=_strings(body.get("states_filter", []), "body.states_filter") if v >= 4 else (),
        types_filter=_strings(body.get("types_filter", []), "body.types_filter") if v >= 5 else (),
    )


_PARSERS: dict[str, Any] = {
    Api.JOIN_GROUP: _parse_join,
    Api.SYNC_GROUP: _parse_sync,
    Api.HEARTBEAT: _parse_heartbeat,
    Api.LEAVE_GROUP: _parse_leave,
    Api.OFFSET_COMMIT: _parse_offset_commit,
    Api.OFFSET_FETCH: _parse_offset_fetch,
    Api.DESCRIBE_GROUPS: _parse_describe,
    Api.LIST_GROUPS: _parse_list,
    Api.DELETE_GROUPS: _parse_delete_groups,
    Api.OFFSET_DELETE: _parse_offset_delete,
    Api.STREAMS_GROUP_DESCRIBE: parse_streams_describe,
}
