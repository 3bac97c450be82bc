"""The message classes of the two Streams group APIs (KIP-1071), which kafka-python 3.x's `kafka.protocol` lacks.

Built exactly as `kafka.protocol` builds its own: each class is an `ApiMessage` whose fields, versions and
defaults come from Kafka's JSON message spec of the same name, here beside this module (version 0 of Kafka
4.4's `clients/src/main/resources/common/message/StreamsGroup*.json`, under their Apache license headers).
Nothing is written per field.
"""

from __future__ import annotations

from kafka.protocol.api_message import ApiMessage


class StreamsGroupHeartbeatRequest(ApiMessage, load_json=__name__):
    pass


class StreamsGroupHeartbeatResponse(ApiMessage, load_json=__name__):
    pass


class StreamsGroupDescribeRequest(ApiMessage, load_json=__name__):
    pass


class StreamsGroupDescribeResponse(ApiMessage, load_json=__name__):
    pass


__all__ = [
    "StreamsGroupDescribeRequest",
    "StreamsGroupDescribeResponse",
    "StreamsGroupHeartbeatRequest",
    "StreamsGroupHeartbeatResponse",
]
