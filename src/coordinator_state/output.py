"""The JSON text of everything the coordinator writes, and dead letters (PROTOCOL.md section 4a).

One serialiser for every output, so that a local replay and the Spark job write the same bytes.
"""

from __future__ import annotations

import base64
import hashlib
import json
from enum import Enum
from typing import Any

try:  # a faster writer where installed; the engine runs on the standard library alone (the conformance runner's)
    import orjson
except ImportError:
    orjson = None  # type: ignore[assignment]

from .envelope import Response
from .records import Invalid
from .responses import invalid_response

DEAD_LETTER_RAW_LIMIT = 65536


def to_json(obj: Any) -> str:
    """Compact JSON, UTF-8 text as is, keys in the order built: the one output format.

    The text is json.dumps's (ensure_ascii=False, compact separators), written by orjson in a quarter of the time
    where the two agree: objects and arrays (lists, tuples) of str, int, bool, null and str/int enum members.
    orjson refuses the rest of the cases the two disagree on (integers outside 64 bits, lone surrogates, keys that
    are not str, nesting past 254), and a float (formatted otherwise by each) or any other type is not given to
    it: those take json.dumps.
    """
    if orjson is not None and (type(obj) is dict or type(obj) is list):
        try:
            if orjson_writes_alike(obj):
                return orjson.dumps(obj).decode()
        except (orjson.JSONEncodeError, RecursionError):
            pass
    return json.dumps(obj, ensure_ascii=False, separators=(",", ":"))


def declared_to_json(value: dict[str, Any]) -> str:
    """`to_json`'s text of a value whose leaves are, by the engine's declared types, only str, int, bool, null and
    str/int enum members (a group's stored state: its fields are typed, and requests bring in only values
    `fields` took as exactly int, str or bool), without `to_json`'s look at every leaf, which costs several times
    orjson's writing. The property tests check `orjson_writes_alike` of the states they reach. What orjson refuses
    (an integer outside 64 bits, a lone surrogate) `to_json` writes."""
    if orjson is not None:
        try:
            return orjson.dumps(value).decode()
        except orjson.JSONEncodeError:
            pass
    return to_json(value)


def from_json(raw: bytes) -> Any:
    """JSON text's value exactly as json.loads reads it; fast for the text `to_json` writes.

    orjson reads alike but for integers outside 64 bits, which it reads as floats and so writes back otherwise
    (a float's text has a '.' or an 'e', an integer's neither): a value orjson writes back as the very bytes
    it read is json.loads's value; other text, or text orjson refuses, is read by json.loads.
    """
    if orjson is not None:
        try:
            value = orjson.loads(raw)
            if orjson.dumps(value) == raw:
                return value
        except (orjson.JSONDecodeError, orjson.JSONEncodeError):
            pass
    return json.loads(raw)


def orjson_writes_alike(container: dict[Any, Any] | list[Any] | tuple[Any, ...]) -> bool:
    """Whether every value inside is an object, array (a list or tuple), str, int, bool, null or str/int enum member
    (of the enum's own value, as json.dumps writes it): no float, nor any other type."""
    for value in container.values() if type(container) is dict else container:
        kind = type(value)
        if kind is str or kind is int or value is None or kind is bool:
            continue
        if kind is dict or kind is list or kind is tuple:  # a tuple: an array, in both
            if orjson_writes_alike(value):
                continue
            return False
        # orjson writes an enum member as its value, json.dumps a str or int subclass as its str or int
        if not (isinstance(value, Enum) and type(value.value) in (str, int) and value.value == value):
            return False
    return True


def dead_letter(source: str, raw: bytes | None, reason: str) -> dict[str, Any]:
    """A dead letter: the reason, the record's full size and hash, and its first 64 KiB."""
    data = raw or b""
    head = data[:DEAD_LETTER_RAW_LIMIT]
    letter: dict[str, Any] = {"source": source, "reason": reason, "size": len(data),
                              "sha256": hashlib.sha256(data).hexdigest()}
    try:
        data.decode("utf-8")
    except UnicodeDecodeError:
        letter["raw_base64"] = base64.b64encode(head).decode("ascii")
    else:
        # The record is text; a cut at 64 KiB inside a character drops only that partial character.
        letter["raw"] = head.decode("utf-8", errors="ignore")
    return letter


def reject(invalid: Invalid, source: str, raw: bytes | None) -> tuple[dict[str, Any], Response | None]:
    """What becomes of a record that is not a valid request: its dead letter, and its answer when it can have one."""
    return dead_letter(source, raw, invalid.reason), invalid_response(invalid)
