"""Request envelopes (PROTOCOL.md section 2): validation at the one boundary where records become requests.

Theory of operation: a record from the request topic or a traffic file is either a valid request
(one of the frozen dataclasses below), a Tick, or an `Invalid` carrying the reason and, when the
record names a `reply_to` and a `correlation_id`, enough to answer it. Nothing here raises on bad
input: `decode_record` and `parse_request` turn every failure into an `Invalid`. Fields a version
does not define are ignored; a required field that is absent or mistyped makes the record invalid.
"""

from __future__ import annotations

import binascii
import json
import re
from dataclasses import dataclass
from typing import Any

import orjson

from .errors import Error

# orjson reads integers outside 64 bits as floats, the standard library as integers: such records take the
# standard library's path (19 digits in a row also catch the rare long digit run inside a string: still correct).
_LONG_NUMBER = re.compile(rb"\d{19}")

SUPPORTED_VERSIONS: dict[str, tuple[int, int]] = {
    "JoinGroup": (0, 9),
    "SyncGroup": (0, 5),
    "Heartbeat": (0, 4),
    "LeaveGroup": (0, 5),
}
INT32_MIN, INT32_MAX = -(2**31), 2**31 - 1
# Event times must fit Spark's timestamps and Python's datetime: up to the end of year 9999.
MAX_TIMESTAMP_MS = 253402300799999


@dataclass(frozen=True, slots=True)
class Reply:
    """Where and how a response goes: the request's routing fields, echoed in its response."""

    api: str
    version: int
    correlation_id: int
    client_id: str
    reply_to: str


@dataclass(frozen=True, slots=True)
class Protocol:
    """One protocol a member offers: its name and its metadata (base64, canonical)."""

    name: str
    metadata: str


@dataclass(frozen=True, slots=True)
class JoinGroup:
    reply: Reply
    timestamp_ms: int
    client_host: str
    group_id: str
    session_timeout_ms: int
    rebalance_timeout_ms: int
    member_id: str
    group_instance_id: str | None
    protocol_type: str
    protocols: tuple[Protocol, ...]


@dataclass(frozen=True, slots=True)
class SyncGroup:
    reply: Reply
    timestamp_ms: int
    group_id: str
    generation_id: int
    member_id: str
    group_instance_id: str | None
    protocol_type: str | None
    protocol_name: str | None
    assignments: tuple[tuple[str, str], ...]


@dataclass(frozen=True, slots=True)
class Heartbeat:
    reply: Reply
    timestamp_ms: int
    group_id: str
    generation_id: int
    member_id: str
    group_instance_id: str | None


@dataclass(frozen=True, slots=True)
class LeaveEntry:
    member_id: str
    group_instance_id: str | None


@dataclass(frozen=True, slots=True)
class LeaveGroup:
    reply: Reply
    timestamp_ms: int
    group_id: str
    members: tuple[LeaveEntry, ...]


@dataclass(frozen=True, slots=True)
class Tick:
    """A clock record: moves the watermark, belongs to no group, gets no response."""

    timestamp_ms: int


@dataclass(frozen=True, slots=True)
class Invalid:
    """A record that is not a valid request: always a dead letter, answered when `reply` is known."""

    reason: str
    error: Error
    reply: Reply | None
    group_id: str | None
    timestamp_ms: int | None


Request = JoinGroup | SyncGroup | Heartbeat | LeaveGroup
Parsed = Request | Tick | Invalid


class _Bad(Exception):
    """A field that makes the record invalid; caught inside this module only."""


def _string(value: Any, where: str) -> str:
    if type(value) is not str:
        raise _Bad(f"{where}: expected a string, got {_type_name(value)}")
    if not value.isascii():
        try:
            value.encode("utf-8")
        except UnicodeEncodeError:
            raise _Bad(f"{where}: not valid Unicode (lone surrogate)") from None
    return value


def _nullable_string(value: Any, where: str) -> str | None:
    return None if value is None else _string(value, where)


def _int32(value: Any, where: str) -> int:
    if type(value) is not int:
        raise _Bad(f"{where}: expected an int32, got {_type_name(value)}")
    if not INT32_MIN <= value <= INT32_MAX:
        raise _Bad(f"{where}: {value} is outside the int32 range")
    return value


def _bytes_b64(value: Any, where: str) -> str:
    text = _string(value, where)
    try:
        raw = binascii.a2b_base64(text, strict_mode=True)
    except (binascii.Error, ValueError):
        raise _Bad(f"{where}: not valid base64") from None
    return binascii.b2a_base64(raw, newline=False).decode("ascii")


def _list(value: Any, where: str) -> list[Any]:
    if type(value) is not list:
        raise _Bad(f"{where}: expected a list, got {_type_name(value)}")
    return value


def _object(value: Any, where: str) -> dict[str, Any]:
    if type(value) is not dict:
        raise _Bad(f"{where}: expected an object, got {_type_name(value)}")
    return value


def _required(body: dict[str, Any], key: str, where: str) -> Any:
    if key not in body:
        raise _Bad(f"{where}.{key}: missing")
    return body[key]


def _type_name(value: Any) -> str:
    return "null" if value is None else type(value).__name__


def _timestamp(value: Any) -> int:
    if type(value) is not int:
        raise _Bad(f"timestamp_ms: expected an integer, got {_type_name(value)}")
    if not 0 <= value <= MAX_TIMESTAMP_MS:
        raise _Bad(f"timestamp_ms: {value} is outside 0..{MAX_TIMESTAMP_MS}")
    return value


def decode_record(raw: bytes | str | None) -> Any:
    """Decodes a record's value as JSON; undecodable input comes back as an `Invalid`."""
    if raw is None:
        return Invalid("record has no value", Error.INVALID_REQUEST, None, None, None)
    if isinstance(raw, bytes) and not _LONG_NUMBER.search(raw):
        try:
            return orjson.loads(raw)
        except orjson.JSONDecodeError:
            pass  # the standard library says why, in the words the dead letters have always used
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
    if isinstance(obj, Invalid):
        return obj
    if type(obj) is not dict:
        return Invalid(f"envelope: expected a JSON object, got {_type_name(obj)}",
                       Error.INVALID_REQUEST, None, None, None)
    reply = _readable_reply(obj)
    group_id = _readable_group_id(obj)
    timestamp = _readable_timestamp(obj, record_timestamp_ms)
    try:
        api = obj.get("api")
        if api == "Tick":
            return Tick(_envelope_timestamp(obj, record_timestamp_ms, max_clock_skew_ms))
        if type(api) is not str or api not in SUPPORTED_VERSIONS:
            raise _Bad(f"api: unknown api {api!r}")
        low, high = SUPPORTED_VERSIONS[api]
        version = obj.get("version", high)
        if type(version) is not int:
            raise _Bad(f"version: expected an integer, got {_type_name(version)}")
        if not low <= version <= high:
            return Invalid(f"{api} version {version} is not supported (supported: {low}-{high})",
                           Error.UNSUPPORTED_VERSION, reply, group_id, timestamp)
        timestamp = _envelope_timestamp(obj, record_timestamp_ms, max_clock_skew_ms)
        if reply is None:
            raise _Bad("envelope: needs an int32 correlation_id and a string reply_to (or client_id)")
        client_host = obj.get("client_host", "")
        client_host = "" if client_host is None else _string(client_host, "client_host")
        body = _object(_required(obj, "body", "envelope"), "body")
        parsed: Request = _PARSERS[api](Reply(api, version, reply.correlation_id, reply.client_id, reply.reply_to),
                                        timestamp, client_host, body)
        return parsed
    except _Bad as bad:
        return Invalid(str(bad), Error.INVALID_REQUEST, reply, group_id, timestamp)


def _readable_timestamp(obj: dict[str, Any], record_ts: int | None) -> int | None:
    """The time to stamp an answer to an invalid record with: its own if readable, else the broker's."""
    try:
        return _timestamp(obj["timestamp_ms"]) if "timestamp_ms" in obj else record_ts
    except _Bad:
        return record_ts


def parse_raw(raw: bytes | str | None, *, record_timestamp_ms: int | None = None,
              max_clock_skew_ms: int | None = None) -> Parsed:
    """A raw record (a Kafka value, a line of a traffic file) as the engine sees it."""
    return parse_request(decode_record(raw), record_timestamp_ms=record_timestamp_ms,
                         max_clock_skew_ms=max_clock_skew_ms)


def _envelope_timestamp(obj: dict[str, Any], record_ts: int | None, max_skew: int | None) -> int:
    if "timestamp_ms" not in obj:
        if record_ts is None:
            raise _Bad("timestamp_ms: missing (required outside the live job)")
        return _timestamp(record_ts)
    timestamp = _timestamp(obj["timestamp_ms"])
    if max_skew is not None and record_ts is not None and abs(timestamp - record_ts) > max_skew:
        raise _Bad(f"timestamp_ms: {timestamp} lies {timestamp - record_ts} ms from the record's broker "
                   f"timestamp {record_ts}, more than coordinator.max.clock.skew.ms = {max_skew}; "
                   "fix the client's clock")
    return timestamp


def _readable_reply(obj: dict[str, Any]) -> Reply | None:
    """The routing fields, if they can be read, so that even an invalid record can be answered."""
    correlation_id = obj.get("correlation_id")
    client_id = obj.get("client_id", "")
    reply_to = obj.get("reply_to", client_id)
    if type(correlation_id) is not int or not INT32_MIN <= correlation_id <= INT32_MAX:
        return None
    try:
        reply_to = _string(reply_to, "reply_to")
        client_id = "" if client_id is None else _string(client_id, "client_id")
    except _Bad:
        return None
    api = obj.get("api")
    version = obj.get("version")
    if type(api) is not str or (not api.isascii() and not _encodable(api)):
        api = ""
    if type(version) is not int or not INT32_MIN <= version <= INT32_MAX:
        version = SUPPORTED_VERSIONS.get(api, (0, 0))[1] if "version" not in obj else -1
    return Reply(api, version, correlation_id, client_id, reply_to)


def _encodable(text: str) -> bool:
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


def _readable_group_id(obj: dict[str, Any]) -> str | None:
    body = obj.get("body")
    if type(body) is dict:
        group_id = body.get("group_id")
        if type(group_id) is str and (group_id.isascii() or _encodable(group_id)):
            return group_id
    return None


def _parse_join(reply: Reply, timestamp: int, client_host: str, body: dict[str, Any]) -> JoinGroup:
    v = reply.version
    where = "body"
    session = _int32(_required(body, "session_timeout_ms", where), "body.session_timeout_ms")
    rebalance = (_int32(_required(body, "rebalance_timeout_ms", where), "body.rebalance_timeout_ms")
                 if v >= 1 else session)
    instance = _nullable_string(body.get("group_instance_id"), "body.group_instance_id") if v >= 5 else None
    if v >= 8:
        _nullable_string(body.get("reason"), "body.reason")
    protocols = []
    for i, item in enumerate(_list(_required(body, "protocols", where), "body.protocols")):
        entry = _object(item, f"body.protocols[{i}]")
        protocols.append(Protocol(
            _string(_required(entry, "name", f"body.protocols[{i}]"), f"body.protocols[{i}].name"),
            _bytes_b64(_required(entry, "metadata", f"body.protocols[{i}]"), f"body.protocols[{i}].metadata"),
        ))
    return JoinGroup(
        reply, timestamp, client_host,
        group_id=_string(_required(body, "group_id", where), "body.group_id"),
        session_timeout_ms=session,
        rebalance_timeout_ms=rebalance,
        member_id=_string(_required(body, "member_id", where), "body.member_id"),
        group_instance_id=instance,
        protocol_type=_string(_required(body, "protocol_type", where), "body.protocol_type"),
        protocols=tuple(protocols),
    )


def _parse_sync(reply: Reply, timestamp: int, client_host: str, body: dict[str, Any]) -> SyncGroup:
    v = reply.version
    where = "body"
    assignments = []
    for i, item in enumerate(_list(_required(body, "assignments", where), "body.assignments")):
        entry = _object(item, f"body.assignments[{i}]")
        assignments.append((
            _string(_required(entry, "member_id", f"body.assignments[{i}]"), f"body.assignments[{i}].member_id"),
            _bytes_b64(_required(entry, "assignment", f"body.assignments[{i}]"),
                       f"body.assignments[{i}].assignment"),
        ))
    return SyncGroup(
        reply, timestamp,
        group_id=_string(_required(body, "group_id", where), "body.group_id"),
        generation_id=_int32(_required(body, "generation_id", where), "body.generation_id"),
        member_id=_string(_required(body, "member_id", where), "body.member_id"),
        group_instance_id=(_nullable_string(body.get("group_instance_id"), "body.group_instance_id")
                           if v >= 3 else None),
        protocol_type=_nullable_string(body.get("protocol_type"), "body.protocol_type") if v >= 5 else None,
        protocol_name=_nullable_string(body.get("protocol_name"), "body.protocol_name") if v >= 5 else None,
        assignments=tuple(assignments),
    )


def _parse_heartbeat(reply: Reply, timestamp: int, client_host: str, body: dict[str, Any]) -> Heartbeat:
    group_id = body.get("group_id")
    generation_id = body.get("generation_id")
    member_id = body.get("member_id")
    instance = body.get("group_instance_id") if reply.version >= 3 else None
    # The hot path: plain strings and int32s pass these checks without calling the validators.
    if not (type(group_id) is str and group_id.isascii()):
        group_id = _string(_required(body, "group_id", "body"), "body.group_id")
    if not (type(generation_id) is int and INT32_MIN <= generation_id <= INT32_MAX):
        generation_id = _int32(_required(body, "generation_id", "body"), "body.generation_id")
    if not (type(member_id) is str and member_id.isascii()):
        member_id = _string(_required(body, "member_id", "body"), "body.member_id")
    if instance is not None and not (type(instance) is str and instance.isascii()):
        instance = _string(instance, "body.group_instance_id")
    return Heartbeat(reply, timestamp, group_id, generation_id, member_id, instance)


def _parse_leave(reply: Reply, timestamp: int, client_host: str, body: dict[str, Any]) -> LeaveGroup:
    group_id = _string(_required(body, "group_id", "body"), "body.group_id")
    entries: tuple[LeaveEntry, ...]
    if reply.version <= 2:
        entries = (LeaveEntry(_string(_required(body, "member_id", "body"), "body.member_id"), None),)
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


_PARSERS: dict[str, Any] = {
    "JoinGroup": _parse_join,
    "SyncGroup": _parse_sync,
    "Heartbeat": _parse_heartbeat,
    "LeaveGroup": _parse_leave,
}
