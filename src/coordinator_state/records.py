"""The JSON text of everything the coordinator writes, and dead letters (PROTOCOL.md section 4a).

One serialiser for every output, so that a local replay and the Spark job write the same bytes.
"""

from __future__ import annotations

import base64
import hashlib
import json
from typing import Any

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
