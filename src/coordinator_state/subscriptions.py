"""The topics a "consumer" group subscribes to, read from its members' JoinGroup metadata.

Kafka's ClassicGroup.computeSubscribedTopics reads each member's metadata for the selected protocol as
a ConsumerProtocolSubscription v0 (an int16 version, then an int32-counted array of int16-length UTF-8
topic names, then nullable bytes of user data; later versions only append, so any version is read by
its v0 prefix). If any member's metadata cannot be read, the group's subscriptions are unknown and
no offset of a Stable group expires (offsets.py).
"""

from __future__ import annotations

import binascii
import struct
from collections.abc import Iterable

_INT16 = struct.Struct(">h")
_INT32 = struct.Struct(">i")


class _Unreadable(Exception):
    """Metadata that is not a consumer-protocol subscription."""


def subscription_topics(data: bytes) -> list[str]:
    """The topic names of one ConsumerProtocolSubscription (any version, read by its v0 fields)."""
    pos = 0

    def take(n: int) -> bytes:
        nonlocal pos
        if n < 0 or pos + n > len(data):
            raise _Unreadable
        chunk = data[pos:pos + n]
        pos += n
        return chunk

    take(2)  # the version: read as v0 whatever it says, as Kafka does here
    (count,) = _INT32.unpack(take(4))
    if count < 0:
        raise _Unreadable
    topics = []
    for _ in range(count):
        (length,) = _INT16.unpack(take(2))
        try:
            topics.append(take(length).decode("utf-8"))
        except UnicodeDecodeError:
            raise _Unreadable from None
    (user_data,) = _INT32.unpack(take(4))
    if user_data != -1:
        take(user_data)
    return topics


def subscribed_topics(metadata_base64: Iterable[str | None]) -> frozenset[str] | None:
    """The union of every member's subscribed topics, or None if any member's metadata is unreadable."""
    topics: set[str] = set()
    for text in metadata_base64:
        if text is None:
            return None
        try:
            topics.update(subscription_topics(binascii.a2b_base64(text)))
        except (_Unreadable, binascii.Error):
            return None
    return frozenset(topics)
