"""The JSON text of everything the coordinator writes, and dead letters (PROTOCOL.md section 4a).

One serialiser for every output, so that a local replay and the Spark job write the same bytes.
"""

from __future__ import annotations

import base64
import hashlib
import json
from typing import Any

from .requests import Invalid
from .responses import Response, invalid_response

DEAD_LETTER_RAW_LIMIT = 65536


def to_json(obj: Any) -> str:
    """Compact JSON, UTF-8 text as is, keys in the order built: the one output format."""
    return json.dumps(obj, ensure_ascii=False, separators=(",", ":"))


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
