"""The validators a request's fields go through (PROTOCOL.md section 2): each returns the value when it has the
type and range the field takes, and raises `Bad` naming the field and what is wrong otherwise. `parsing` reads the
classic APIs' bodies with them and `streams.parsing` the streams APIs'.
"""

from __future__ import annotations

import binascii
from typing import Any

from .envelope import INT32_MAX, INT32_MIN, INT64_MAX, INT64_MIN, is_utf8_encodable
from .errors import Error


class Bad(Exception):
    """What makes the record invalid (INVALID_REQUEST, or UNSUPPORTED_VERSION); `parsing` turns it into an `Invalid`."""

    def __init__(self, reason: str, error: Error = Error.INVALID_REQUEST) -> None:
        super().__init__(reason)
        self.error = error


def string(value: Any, where: str) -> str:
    if type(value) is str and value.isascii():
        return value
    if type(value) is not str:
        raise Bad(f"{where}: expected a string, got {type_name(value)}")
    if not is_utf8_encodable(value):
        raise Bad(f"{where}: not valid Unicode (lone surrogate)")
    return value


def nullable_string(value: Any, where: str) -> str | None:
    return None if value is None else string(value, where)


def integer(value: Any, where: str, low: int, high: int, kind: str) -> int:
    """An integer of Kafka's type `kind`, within [low, high]."""
    if type(value) is not int:
        raise Bad(f"{where}: expected an {kind}, got {type_name(value)}")
    if not low <= value <= high:
        raise Bad(f"{where}: {value} is outside the {kind} range")
    return value


def int32(value: Any, where: str) -> int:
    return integer(value, where, INT32_MIN, INT32_MAX, "int32")


def int64(value: Any, where: str) -> int:
    return integer(value, where, INT64_MIN, INT64_MAX, "int64")


def boolean(value: Any, where: str) -> bool:
    if type(value) is not bool:
        raise Bad(f"{where}: expected a boolean, got {type_name(value)}")
    return value


def bytes_b64(value: Any, where: str) -> str:
    text = string(value, where)
    try:
        raw = binascii.a2b_base64(text, strict_mode=True)
    except (binascii.Error, ValueError):
        raise Bad(f"{where}: not valid base64") from None
    return binascii.b2a_base64(raw, newline=False).decode("ascii")


def array(value: Any, where: str) -> list[Any]:
    if type(value) is not list:
        raise Bad(f"{where}: expected a list, got {type_name(value)}")
    return value


def json_object(value: Any, where: str) -> dict[str, Any]:
    if type(value) is not dict:
        raise Bad(f"{where}: expected an object, got {type_name(value)}")
    return value


def required(body: dict[str, Any], key: str, where: str) -> Any:
    try:
        return body[key]
    except KeyError:
        raise Bad(f"{where}.{key}: missing") from None


def strings(value: Any, where: str) -> tuple[str, ...]:
    return tuple(string(item, f"{where}[{i}]") for i, item in enumerate(array(value, where)))


def type_name(value: Any) -> str:
    return "null" if value is None else type(value).__name__
