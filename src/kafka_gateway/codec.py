"""The Kafka wire codec: request headers, request bodies and response encoding, via `kafka.protocol`.

kafka-python 3.x builds every request and response version from Kafka's JSON message specs. This module
adds only what the gateway needs around it:
- `peek_header` reads the fixed part of a request header (API key, version, correlation id, client id),
  enough to route a request and to forward it untouched;
- `message_to_body` / `body_to_message` convert between message objects and the envelopes' JSON bodies
  (PROTOCOL.md sections 2, 3, 8: the specs' field names in snake_case, which are kafka.protocol's attribute
  names; byte fields as base64; ACL bit sets as the int32 Kafka puts on the wire);
- the checks of Kafka's generated readers and writers that kafka.protocol leaves out: a null where the spec
  allows none, a string longer than 32,767 UTF-8 bytes (refused at every version, compact ones included).
Every decoding failure surfaces as `MalformedFrame`, the one error a bad frame can cause; every encoding
failure as `UnencodableAnswer`.
"""

from __future__ import annotations

import base64
import binascii
import enum
import struct
import uuid
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from kafka.protocol.schemas.fields.codecs import Int32, UnsignedVarInt32

from coordinator_state.envelope import INT32_MIN

from .errors import MalformedFrame, UnencodableAnswer
from .frames import SIZE_BYTES, frame

_FIXED_HEADER = struct.Struct(">hhih")
# What kafka.protocol raises on bytes that do not decode: short buffers (struct.error, IndexError), bad
# lengths and bad UTF-8 (ValueError and its UnicodeDecodeError).
_DECODE_ERRORS = (struct.error, IndexError, ValueError, TypeError, OverflowError)
# ... and what it raises on values that do not fit the wire (an int16 string length, an int32 out of range).
_ENCODE_ERRORS = (struct.error, ValueError, TypeError, OverflowError, AttributeError)
_BYTE_TYPES = frozenset({"bytes", "records"})
MAX_STRING_BYTES = 0x7FFF
# A string this short fits whatever its characters (at most 4 UTF-8 bytes each): no need to encode it to know.
_SURELY_SHORT = MAX_STRING_BYTES // 4


@dataclass(frozen=True, slots=True)
class RequestHeader:
    """The part of a request header that every version shares."""

    api_key: int
    api_version: int
    correlation_id: int
    client_id: str | None


def peek_header(payload: bytes) -> RequestHeader:
    """Reads a request's API key, version, correlation id and client id (never compact, in every header
    version), without decoding the body."""
    if len(payload) < _FIXED_HEADER.size:
        raise MalformedFrame(f"request of {len(payload)} bytes is shorter than a request header")
    api_key, api_version, correlation_id, client_id_length = _FIXED_HEADER.unpack_from(payload)
    if client_id_length < -1 or _FIXED_HEADER.size + client_id_length > len(payload):
        raise MalformedFrame(f"client id length {client_id_length} does not fit the request")
    client_id = None
    if client_id_length >= 0:
        raw = payload[_FIXED_HEADER.size:_FIXED_HEADER.size + client_id_length]
        try:
            client_id = raw.decode("utf-8")
        except UnicodeDecodeError:
            raise MalformedFrame("client id is not valid UTF-8") from None
    return RequestHeader(api_key, api_version, correlation_id, client_id)


def decode_request(message_class: Any, payload: bytes, version: int) -> Any:
    """The request message (header included) that `payload` holds, refused where Kafka's reader refuses it."""
    try:
        message = message_class.decode(payload, version=version, header=True)
    except _DECODE_ERRORS as exc:
        raise MalformedFrame(f"{message_class.__name__} v{version} does not decode: {exc}") from None
    violation = wire_violation(message_class.fields, message, version)
    if violation is not None:
        raise MalformedFrame(f"{message_class.__name__} v{version}: {violation}")
    return message


def decode_response(message_class: Any, payload: bytes, version: int) -> Any:
    """The response message (header included) that `payload` holds."""
    try:
        return message_class.decode(payload, version=version, header=True)
    except _DECODE_ERRORS as exc:
        raise MalformedFrame(f"{message_class.__name__} v{version} does not decode: {exc}") from None


def encode_response(message: Any, correlation_id: int) -> bytes:
    """The framed response, header included, for the client's correlation id; UnencodableAnswer where Kafka's
    writer would refuse it."""
    violation = wire_violation(type(message).fields, message, message.version)
    if violation is not None:
        raise UnencodableAnswer(f"{type(message).__name__} v{message.version}: {violation}")
    message.with_header(correlation_id=correlation_id)
    try:
        return bytes(message.encode(header=True, framed=True))
    except _ENCODE_ERRORS as exc:
        raise UnencodableAnswer(f"{type(message).__name__} v{message.version} does not encode: {exc!r}") from None


def encode_items(message_class: Any, version: int, array: str, items: Any) -> tuple[int, bytes]:
    """Entries of a response's `array` field (the envelopes' JSON naming), encoded as they sit in the array
    (without its count): their number and bytes; UnencodableAnswer where Kafka's writer would refuse them."""
    field = message_class.fields[array]
    try:
        elements = [field.data_class(version=version, **_body_to_fields(field.fields, version, item))
                    for item in _list(items, array)]
    except (ValueError, TypeError, KeyError) as exc:
        raise UnencodableAnswer(f"{message_class.__name__} v{version} {array}: {exc!r}") from None
    violation = next(filter(None, (wire_violation(field.fields, element, version) for element in elements)), None)
    if violation is not None:
        raise UnencodableAnswer(f"{message_class.__name__} v{version} {array}: {violation}")
    flexible = message_class.flexible_version_q(version)
    try:
        encoded = b"".join(field.array_of.encode(element, version=version, compact=flexible, tagged=flexible)
                           for element in elements)
    except _ENCODE_ERRORS as exc:
        raise UnencodableAnswer(f"{message_class.__name__} v{version} {array} does not encode: {exc!r}") from None
    return len(elements), encoded


def encode_response_around(message_class: Any, version: int, body: Mapping[str, Any], array: str, count: int,
                           items: bytes, correlation_id: int) -> bytes:
    """The framed response of `body` whose `array`, its last field, holds `count` entries encoded already by
    `encode_items` (so that a long array is encoded a piece at a time, as its entries come)."""
    framed = encode_response(body_to_message(message_class, version, {**body, array: []}), correlation_id)
    flexible = message_class.flexible_version_q(version)
    # An empty array, then the message's tagged fields (none) in flexible versions.
    empty, tags = (UnsignedVarInt32.encode(1), b"\x00") if flexible else (Int32.encode(0), b"")
    if not framed.endswith(empty + tags) or array != next(reversed(
            [name for name, spec in message_class.fields.items() if spec.for_version_q(version)])):
        raise ValueError(f"{array} is not the last field of {message_class.__name__} v{version}")
    head = framed[SIZE_BYTES:len(framed) - len(empty) - len(tags)]
    length = UnsignedVarInt32.encode(count + 1) if flexible else Int32.encode(count)
    return frame(b"".join((head, length, items, tags)))


def wire_violation(fields: Mapping[str, Any], item: Any, version: int) -> str | None:
    """What Kafka's generated code refuses in `item` at `version`, in either direction: a null in a string, bytes,
    array or struct field whose spec does not allow it there (a tagged field may be left out), a string longer
    than 32,767 UTF-8 bytes; None."""
    for name, kind, nullable, nested in _checks(fields, version):
        value = getattr(item, name)
        if value is None:
            if nullable:
                continue
            return f"non-nullable field {name} is null"
        if kind is _Check.STRUCTS:
            violation = next(filter(None, (wire_violation(nested, element, version) for element in value)), None)
        elif kind is _Check.STRUCT:
            violation = wire_violation(nested, value, version)
        elif kind is _Check.STRINGS:
            if any(element is None for element in value):
                return f"non-nullable field {name} has a null element"
            violation = next(filter(None, (_long_string(name, element) for element in value)), None)
        elif kind is _Check.STRING:
            violation = _long_string(name, value)
        else:
            continue
        if violation is not None:
            return violation
    return None


class _Check(enum.Enum):
    STRUCTS = enum.auto()
    STRUCT = enum.auto()
    STRINGS = enum.auto()
    STRING = enum.auto()
    NULL_ONLY = enum.auto()  # bytes, records, arrays of numbers: only a null can be wrong


# (id of a struct's field mapping, version) -> what to check in it. The mappings are kafka.protocol's, built once
# per message class and kept for the process's life, so their ids stay theirs.
_CHECKS: dict[tuple[int, int], tuple[tuple[str, _Check, bool, Any], ...]] = {}


def _checks(fields: Mapping[str, Any], version: int) -> tuple[tuple[str, _Check, bool, Any], ...]:
    """The fields of a struct at `version` that can break a rule (numbers, booleans, uuids and bit sets cannot):
    (name, what to check, whether null is allowed, the nested struct's fields)."""
    key = (id(fields), version)
    found = _CHECKS.get(key)
    if found is None:
        checks = []
        for name, field in fields.items():
            if not field.for_version_q(version):
                continue
            # A tagged field left out (None) is simply not on the wire.
            nullable = field.nullable_for_version_q(version) or field.tagged_field_q(version)
            if field.is_struct_array():
                checks.append((name, _Check.STRUCTS, nullable, field.fields))
            elif field.is_struct():
                checks.append((name, _Check.STRUCT, nullable, field.fields))
            elif field.is_array():
                kind = _Check.STRINGS if field.array_of.type_str == "string" else _Check.NULL_ONLY
                checks.append((name, kind, nullable, None))
            elif field.type_str == "string":
                checks.append((name, _Check.STRING, nullable, None))
            elif field.type_str in _BYTE_TYPES:
                checks.append((name, _Check.NULL_ONLY, nullable, None))
        found = _CHECKS[key] = tuple(checks)
    return found


def _long_string(name: str, value: str) -> str | None:
    if len(value) <= _SURELY_SHORT:
        return None
    size = len(value.encode("utf-8", "surrogatepass"))
    return None if size <= MAX_STRING_BYTES else f"string field {name} of {size} bytes is over {MAX_STRING_BYTES}"


def message_to_body(message: Any, version: int) -> dict[str, Any]:
    """A message as a JSON body: the fields its version defines, byte fields base64."""
    return _struct_to_body(type(message).fields, message, version)


def body_to_message(message_class: Any, version: int, body: Mapping[str, Any]) -> Any:
    """A message of `message_class` at `version` from a JSON body; fields the body lacks get the spec's
    default, keys the version does not define (such as an envelope's `error` name) are ignored.
    Raises ValueError on a value of the wrong shape."""
    return message_class[version](**_body_to_fields(message_class.fields, version, body))


def _struct_to_body(fields: Mapping[str, Any], item: Any, version: int) -> dict[str, Any]:
    body: dict[str, Any] = {}
    for name, field in fields.items():
        if not field.for_version_q(version):
            continue
        value = getattr(item, name)
        if value is None:
            body[name] = None if field.type_str != "bitfield" else INT32_MIN
        elif field.is_struct_array():
            body[name] = [_struct_to_body(field.fields, element, version) for element in value]
        elif field.is_struct():
            body[name] = _struct_to_body(field.fields, value, version)
        elif field.is_array():
            body[name] = [_simple_to_json(field.array_of.type_str, element) for element in value]
        else:
            body[name] = _simple_to_json(field.type_str, value)
    return body


def _simple_to_json(type_str: str, value: Any) -> Any:
    if type_str in _BYTE_TYPES:
        return base64.b64encode(bytes(value)).decode("ascii")
    if type_str == "uuid":
        return str(value)
    if type_str == "bitfield":
        return _bits_to_int32(value)
    return value


def _body_to_fields(fields: Mapping[str, Any], version: int, body: Mapping[str, Any]) -> dict[str, Any]:
    if not isinstance(body, Mapping):
        raise ValueError(f"expected an object, got {type(body).__name__}")
    values: dict[str, Any] = {}
    for name, field in fields.items():
        if not field.for_version_q(version) or name not in body:
            continue
        value = body[name]
        if value is None:
            values[name] = None
        elif field.is_struct_array():
            values[name] = [field.data_class(version=version, **_body_to_fields(field.fields, version, element))
                            for element in _list(value, name)]
        elif field.is_struct():
            values[name] = field.data_class(version=version, **_body_to_fields(field.fields, version, value))
        elif field.is_array():
            values[name] = [_simple_from_json(field.array_of.type_str, element) for element in _list(value, name)]
        else:
            values[name] = _simple_from_json(field.type_str, value)
    return values


def _list(value: Any, name: str) -> list[Any]:
    if not isinstance(value, list):
        raise ValueError(f"{name}: expected a list, got {type(value).__name__}")
    return value


def _simple_from_json(type_str: str, value: Any) -> Any:
    if type_str in _BYTE_TYPES:
        try:
            return binascii.a2b_base64(value, strict_mode=True)
        except (binascii.Error, TypeError):
            raise ValueError(f"not base64: {value!r:.40}") from None
    if type_str == "uuid":
        return uuid.UUID(value)
    if type_str == "bitfield":
        return _int32_to_bits(value)
    return value


def _bits_to_int32(bits: set[int]) -> int:
    """kafka.protocol's set of bit positions as the signed int32 on the wire."""
    word = 0
    for bit in bits:
        word |= 1 << bit
    return word - (1 << 32) if word >= 1 << 31 else word


def _int32_to_bits(word: int) -> set[int] | None:
    """A signed int32 bit set as kafka.protocol's set of bit positions; INT32_MIN ("not provided") is None."""
    if type(word) is not int:
        raise ValueError(f"expected an int32 bit set, got {word!r:.40}")
    if word == INT32_MIN:
        return None
    unsigned = word & 0xFFFFFFFF
    return {bit for bit in range(32) if unsigned >> bit & 1}


__all__ = [
    "RequestHeader",
    "body_to_message",
    "decode_request",
    "decode_response",
    "encode_response",
    "frame",
    "message_to_body",
    "peek_header",
]
