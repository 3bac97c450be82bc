"""The message classes of the two Streams group APIs (KIP-1071), which kafka-python 3.x's `kafka.protocol` lacks.

Built exactly as `kafka.protocol` builds its own (a class statement `class X(ApiMessage)`): each class is an
`ApiMessage` whose fields, versions and defaults come from Kafka's JSON message spec of the same name, here beside
this module (version 0 of Kafka 4.4's `clients/src/main/resources/common/message/StreamsGroup*.json`, under their
Apache license headers). Nothing is written per field.
"""

from __future__ import annotations

import types
from typing import Any

from kafka.protocol.api_message import ApiMessage


def _message_class(name: str) -> Any:
    """The ApiMessage subclass `name`, its schema read from `name`.json in this package (kafka.protocol's
    `load_json` class keyword, which its own classes leave at its bundled specs)."""
    def body(namespace: dict[str, Any]) -> None:
        namespace["__module__"] = __name__

    return types.new_class(name, (ApiMessage,), {"load_json": __name__}, body)


StreamsGroupHeartbeatRequest = _message_class("StreamsGroupHeartbeatRequest")
StreamsGroupHeartbeatResponse = _message_class("StreamsGroupHeartbeatResponse")
StreamsGroupDescribeRequest = _message_class("StreamsGroupDescribeRequest")
StreamsGroupDescribeResponse = _message_class("StreamsGroupDescribeResponse")

__all__ = [
    "StreamsGroupDescribeRequest",
    "StreamsGroupDescribeResponse",
    "StreamsGroupHeartbeatRequest",
    "StreamsGroupHeartbeatResponse",
]
