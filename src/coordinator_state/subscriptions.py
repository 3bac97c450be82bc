"""The topics a "consumer" group subscribes to, read from its members' JoinGroup metadata.

Kafka's ClassicGroup.computeSubscribedTopics reads each member's metadata for the selected protocol as a
ConsumerProtocolSubscription by its v0 fields, whatever version it says it is (consumer_protocol.py). If
any member's metadata cannot be read, the group's subscriptions are unknown and no offset of a Stable
group expires (offsets.py).
"""

from __future__ import annotations

from collections.abc import Iterable

from .consumer_protocol import ProtocolError, decode_subscription, from_base64


def subscribed_topics(metadata_base64: Iterable[str | None]) -> frozenset[str] | None:
    """The union of every member's subscribed topics, or None if any member's metadata is unreadable."""
    topics: set[str] = set()
    for text in metadata_base64:
        if text is None:
            return None
        try:
            topics.update(decode_subscription(from_base64(text), any_version=True).topics)
        except ProtocolError:
            return None
    return frozenset(topics)
