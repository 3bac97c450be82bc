"""Kafka's rules for deleting a classic group or some of its committed offsets (PROTOCOL.md 11), as functions of the
few facts they read: `ClassicGroup.validateDeleteGroup`, `ClassicGroup.validateOffsetDelete` and
`ClassicGroup.isSubscribedToTopic` (with the subscriptions `initNextGeneration` computed).
"""

from __future__ import annotations

from ..errors import NO_ERROR, Error
from ..offsets import CONSUMER_PROTOCOL_TYPE
from .model import DEAD, EMPTY, ClassicGroupState


def delete_group_error(state: ClassicGroupState) -> Error:
    """ClassicGroup.validateDeleteGroup: only an Empty group may be deleted; Error.NONE to delete it."""
    if state is DEAD:
        return Error.GROUP_ID_NOT_FOUND
    return NO_ERROR if state is EMPTY else Error.NON_EMPTY_GROUP


def offset_delete_error(state: ClassicGroupState, protocol_type: str | None) -> Error:
    """ClassicGroup.validateOffsetDelete: a group with members must use the consumer protocol (whose subscriptions
    say which offsets are in use); Error.NONE to go on, partition by partition."""
    if state is DEAD:
        return Error.GROUP_ID_NOT_FOUND
    if state is EMPTY or protocol_type == CONSUMER_PROTOCOL_TYPE:
        return NO_ERROR
    return Error.NON_EMPTY_GROUP


def is_subscribed_to_topic(state: ClassicGroupState, protocol_type: str | None,
                           subscribed_topics: frozenset[str] | None, topic: str) -> bool:
    """ClassicGroup.isSubscribedToTopic: the current generation's subscriptions; when they are unknown (not read
    yet, or unreadable), a consumer-protocol group counts as subscribed to every topic, any other to none. An
    Empty group subscribes to nothing (Kafka computes no member's subscription as the empty set)."""
    if state is EMPTY:
        return False
    if subscribed_topics is None:
        return protocol_type == CONSUMER_PROTOCOL_TYPE
    return topic in subscribed_topics
