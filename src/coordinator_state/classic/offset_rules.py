"""Kafka's rules for a classic group's committed offsets (docs/OFFSETS_AND_LISTING.md 2, 9), as functions of the
few facts they read: `ClassicGroup.validateOffsetCommit`, the commit that keeps a session
(`OffsetMetadataManager.commitOffset`), and `ClassicGroup.offsetExpirationCondition`. The caller passes its own
member validation (SEMANTICS.md 4.1) in, so that rule lives once.
"""

from __future__ import annotations

from collections.abc import Callable

from ..errors import NO_ERROR, Error
from ..offsets import CONSUMER_PROTOCOL_TYPE, ExpiryCondition
from .model import COMPLETING, DEAD, EMPTY, PREPARING, STABLE, ClassicGroupState


def commit_error(
    state: ClassicGroupState,
    group_generation_id: int,
    generation_id: int,
    member_id: str,
    group_instance_id: str | None,
    validate_member: Callable[[str, str | None], Error],
) -> Error:
    """ClassicGroup.validateOffsetCommit for a (non-transactional) OffsetCommit; Error.NONE to accept."""
    if state is DEAD:
        return Error.COORDINATOR_NOT_AVAILABLE
    if generation_id < 0 and state is EMPTY:
        return NO_ERROR  # a simple commit: member id and instance id are not looked at
    if generation_id >= 0 or member_id != "" or group_instance_id is not None:
        error = validate_member(member_id, group_instance_id)
        if error is not NO_ERROR:
            return error
        if generation_id != group_generation_id:
            return Error.ILLEGAL_GENERATION
    elif state is not EMPTY:
        return Error.UNKNOWN_MEMBER_ID  # no member id and no generation: only an Empty group takes it
    if state is COMPLETING:
        return Error.REBALANCE_IN_PROGRESS
    return NO_ERROR


def commit_keeps_session(state: ClassicGroupState) -> bool:
    """An accepted commit is a heartbeat in Stable and PreparingRebalance (OffsetMetadataManager.commitOffset)."""
    return state is STABLE or state is PREPARING


def expiry_condition(
    state: ClassicGroupState,
    protocol_type: str | None,
    state_since_ms: int,
    subscribed_topics: frozenset[str] | None,
    retention_ms: int,
) -> ExpiryCondition | None:
    """Kafka's ClassicGroup.offsetExpirationCondition with isSubscribedToTopic folded in.

    - no protocol type (a "simple" group that only ever held commits): every offset, from its commit time;
    - Empty: every offset, from the time the group became Empty;
    - Stable "consumer" group whose members' subscriptions could be read: offsets of topics nobody
      subscribes to, from their commit time;
    - otherwise nothing expires.
    """
    if protocol_type is None:
        return ExpiryCondition(retention_ms)
    if state is EMPTY:
        return ExpiryCondition(retention_ms, since_ms=state_since_ms)
    if state is STABLE and protocol_type == CONSUMER_PROTOCOL_TYPE and subscribed_topics is not None:
        return ExpiryCondition(retention_ms, kept_topics=subscribed_topics)
    return None
