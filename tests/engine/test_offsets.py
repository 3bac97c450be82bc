"""The offset store and the commit rules (coordinator_state.offsets, classic/offset_rules.py), case by case as in
Kafka's tests.

The cases follow ClassicGroup.validateOffsetCommit, OffsetMetadataManager.validateOffsetCommit,
OffsetExpirationConditionImpl and OffsetMetadataManagerTest's classic-group cases.
"""

from __future__ import annotations

import base64
import struct
from collections.abc import Callable

import pytest
from hypothesis import given
from hypothesis import strategies as st

from coordinator_state.classic.model import ClassicGroupState
from coordinator_state.classic.offset_rules import commit_error, commit_keeps_session, expiry_condition
from coordinator_state.consumer_protocol import decode_subscription
from coordinator_state.errors import Error
from coordinator_state.offsets import (
    CommittedOffset,
    ExpiryCondition,
    OffsetChange,
    OffsetStore,
    absent_group_commit_error,
    committed_value,
    java_length,
    metadata_too_large,
)
from coordinator_state.subscriptions import subscribed_topics

EMPTY, PREPARING, COMPLETING, STABLE, DEAD = (
    ClassicGroupState.EMPTY, ClassicGroupState.PREPARING_REBALANCE, ClassicGroupState.COMPLETING_REBALANCE,
    ClassicGroupState.STABLE, ClassicGroupState.DEAD)
HOUR = 3_600_000


def offset(committed_at: int, value: int = 100, expires: int | None = None) -> CommittedOffset:
    return CommittedOffset(value, -1, "", committed_at, expires)


Validate = Callable[[str, str | None], Error]


def members(mapping: dict[str, str | None]) -> Validate:
    """ValidateMember (SEMANTICS.md 4.1) over {member_id: instance_id}."""
    static = {instance: member for member, instance in mapping.items() if instance is not None}

    def validate(member_id: str, instance_id: str | None) -> Error:
        if instance_id is not None:
            if instance_id not in static:
                return Error.UNKNOWN_MEMBER_ID
            if static[instance_id] != member_id:
                return Error.FENCED_INSTANCE_ID
        return Error.NONE if member_id in mapping else Error.UNKNOWN_MEMBER_ID
    return validate


NO_MEMBERS = members({})
ONE_STATIC = members({"m1": "i1"})


# --------------------------------------------------------------------------------------------- commit checks

@pytest.mark.parametrize(("version", "generation", "expected"), [
    (9, 10, Error.GROUP_ID_NOT_FOUND),  # testOffsetCommitWithUnknownGroup, v9+
    (8, 10, Error.ILLEGAL_GENERATION),  # ... older versions
    (1, 0, Error.ILLEGAL_GENERATION),
    (9, -1, None),  # a simple commit creates the group
    (0, -1, None),
    (5, -7, None),
])
def test_commit_to_an_absent_group(version: int, generation: int, expected: Error | None) -> None:
    assert absent_group_commit_error(version, generation) is expected


@pytest.mark.parametrize(("state", "generation", "member", "instance", "validate", "expected"), [
    # testGenericGroupOffsetCommitWithDeadGroup
    (DEAD, 10, "member", None, NO_MEMBERS, Error.COORDINATOR_NOT_AVAILABLE),
    (DEAD, -1, "", None, NO_MEMBERS, Error.COORDINATOR_NOT_AVAILABLE),
    # testGenericGroupOffsetCommitWithUnknownMemberId: an Empty group has no members
    (EMPTY, 10, "member", None, NO_MEMBERS, Error.UNKNOWN_MEMBER_ID),
    # testSimpleGroupOffsetCommit(WithInstanceId): negative generation to an Empty group, nothing else looked at
    (EMPTY, -1, "", None, NO_MEMBERS, Error.NONE),
    (EMPTY, -1, "someone", "instance-id", NO_MEMBERS, Error.NONE),
    (EMPTY, -2, "", None, NO_MEMBERS, Error.NONE),
    # testGenericGroupOffsetCommitWithIllegalGeneration
    (STABLE, 10, "m1", None, ONE_STATIC, Error.ILLEGAL_GENERATION),
    (STABLE, -1, "m1", None, ONE_STATIC, Error.ILLEGAL_GENERATION),
    # testGenericGroupOffsetCommitWithUnknownInstanceId / WithFencedInstanceId
    (STABLE, 1, "m1", "other", ONE_STATIC, Error.UNKNOWN_MEMBER_ID),
    (STABLE, 1, "m0", "i1", ONE_STATIC, Error.FENCED_INSTANCE_ID),
    (STABLE, 1, "m0", None, ONE_STATIC, Error.UNKNOWN_MEMBER_ID),
    # instance id alone (no member id, no generation) is still validated
    (STABLE, -1, "", "i1", ONE_STATIC, Error.FENCED_INSTANCE_ID),
    # testGenericGroupOffsetCommitWithoutMemberIdAndGeneration: only an Empty group takes those
    (STABLE, -1, "", None, ONE_STATIC, Error.UNKNOWN_MEMBER_ID),
    (PREPARING, -1, "", None, ONE_STATIC, Error.UNKNOWN_MEMBER_ID),
    (COMPLETING, -1, "", None, ONE_STATIC, Error.UNKNOWN_MEMBER_ID),
    # testGenericGroupOffsetCommitWhileInCompletingRebalanceState
    (COMPLETING, 1, "m1", None, ONE_STATIC, Error.REBALANCE_IN_PROGRESS),
    (COMPLETING, 1, "m1", "i1", ONE_STATIC, Error.REBALANCE_IN_PROGRESS),
    # the member and generation are checked before the state
    (COMPLETING, 0, "m1", None, ONE_STATIC, Error.ILLEGAL_GENERATION),
    # accepted in PreparingRebalance and Stable
    (PREPARING, 1, "m1", None, ONE_STATIC, Error.NONE),
    (STABLE, 1, "m1", "i1", ONE_STATIC, Error.NONE),
])
def test_commit_checks(state: ClassicGroupState, generation: int, member: str, instance: str | None,
                       validate: Validate, expected: Error) -> None:
    assert commit_error(state, 1, generation, member, instance, validate) is expected


def test_only_stable_and_preparing_commits_keep_the_session() -> None:
    assert [s for s in ClassicGroupState if commit_keeps_session(s)] == [PREPARING, STABLE]


# --------------------------------------------------------------------------------------------- stored values

def test_committed_value_defaults_and_retention() -> None:
    # testSimpleGroupOffsetCommit: null metadata stored as "", commit time = now, no expiry
    assert committed_value(100, -1, None, -1, 5000, -1) == CommittedOffset(100, -1, "", 5000, None)
    # testGenericGroupOffsetCommitWithRetentionTime: expiry = now + retention
    assert committed_value(100, 3, "m", -1, 5000, 1234) == CommittedOffset(100, 3, "m", 5000, 6234)
    # v1: an explicit commit timestamp is the commit time, and gives no explicit expiry in 4.x
    assert committed_value(7, -1, "", 42, 5000, -1) == CommittedOffset(7, -1, "", 42, None)


@pytest.mark.parametrize(("text", "length"), [
    ("", 0), ("abc", 3), ("é", 1), ("€", 1), ("\U0001F600", 2), ("a\U0001F600b", 4)])
def test_metadata_is_measured_in_utf16_code_units(text: str, length: int) -> None:
    assert java_length(text) == length == len(text.encode("utf-16-le")) // 2


def test_metadata_limit_is_inclusive() -> None:
    assert not metadata_too_large(None, 0)
    assert not metadata_too_large("x" * 4096, 4096)
    assert metadata_too_large("x" * 4097, 4096)
    assert metadata_too_large("\U0001F600" * 2049, 4096)
    assert not metadata_too_large("\U0001F600" * 2048, 4096)


def test_offset_change_records() -> None:
    change = OffsetChange("g", "orders", 3, CommittedOffset(10, 2, "meta", 1000, None))
    assert change.key == "g/orders/3"
    assert change.record() == {"group_id": "g", "topic": "orders", "partition": 3, "committed_offset": 10,
                               "committed_leader_epoch": 2, "committed_metadata": "meta",
                               "commit_timestamp_ms": 1000, "expire_timestamp_ms": None}
    assert OffsetChange("g", "orders", 3, None).record() is None


# --------------------------------------------------------------------------------------------- expiry conditions

def test_expiry_condition_per_group() -> None:
    subscribed = frozenset({"a"})
    # a simple group (no protocol type): from each commit, in any state
    assert expiry_condition(EMPTY, None, 50, None, HOUR) == ExpiryCondition(HOUR)
    # an Empty group with a protocol: from the time it became Empty
    assert expiry_condition(EMPTY, "consumer", 50, None, HOUR) == ExpiryCondition(HOUR, since_ms=50)
    assert expiry_condition(EMPTY, "connect", 50, None, HOUR) == ExpiryCondition(HOUR, since_ms=50)
    # a Stable consumer group that knows its subscriptions: unsubscribed topics, from each commit
    assert expiry_condition(STABLE, "consumer", 50, subscribed, HOUR) == ExpiryCondition(HOUR, kept_topics=subscribed)
    # otherwise nothing expires
    assert expiry_condition(STABLE, "consumer", 50, None, HOUR) is None
    assert expiry_condition(STABLE, "connect", 50, subscribed, HOUR) is None
    assert expiry_condition(PREPARING, "consumer", 50, subscribed, HOUR) is None
    assert expiry_condition(COMPLETING, "consumer", 50, subscribed, HOUR) is None


def test_deadlines() -> None:
    condition = ExpiryCondition(HOUR)
    assert condition.deadline("t", offset(1000)) == 1000 + HOUR
    assert condition.deadline("t", offset(1000, expires=2000)) == 2000  # explicit expiry wins
    assert ExpiryCondition(HOUR, since_ms=5).deadline("t", offset(1000)) == 5 + HOUR
    assert ExpiryCondition(HOUR, kept_topics=frozenset({"t"})).deadline("t", offset(1000, expires=1)) is None


def expire(store: OffsetStore, condition: ExpiryCondition | None, now: int) -> list[tuple[str, int]]:
    """What the group does at an expiry: remove every expired offset."""
    expired = store.expired(condition, now)
    for key in expired:
        del store.entries[key]
    return expired


def test_cleanup_expired_offsets() -> None:
    """OffsetMetadataManagerTest.testCleanupExpiredOffsets, with one-minute retention."""
    minute = 60_000
    store = OffsetStore()
    store.entries[("firstTopic", 0)] = offset(0)
    store.entries[("secondTopic", 0)] = offset(0)
    store.entries[("secondTopic", 1)] = offset(500)
    subscribed_to_first = ExpiryCondition(minute, kept_topics=frozenset({"firstTopic"}))
    assert store.next_deadline(subscribed_to_first) == minute
    assert expire(store, subscribed_to_first, minute - 1) == []
    assert expire(store, subscribed_to_first, minute) == [("secondTopic", 0)]  # inclusive
    assert store.next_deadline(subscribed_to_first) == minute + 500
    assert expire(store, subscribed_to_first, minute + 500) == [("secondTopic", 1)]
    assert len(store) == 1
    store.entries[("firstTopic", 1)] = offset(500)
    store.entries[("secondTopic", 0)] = offset(500, value=101)
    assert expire(store, ExpiryCondition(minute), minute + 500) == [
        ("firstTopic", 0), ("firstTopic", 1), ("secondTopic", 0)]
    assert not store and len(store) == 0 and store.next_deadline(ExpiryCondition(minute)) is None


def test_no_condition_expires_nothing() -> None:
    store = OffsetStore()
    store.entries[("t", 0)] = offset(0, expires=1)
    assert store.next_deadline(None) is None
    assert expire(store, None, 10**12) == []
    assert len(store) == 1


def test_store_replaces_and_lists_sorted() -> None:
    store = OffsetStore()
    store.entries[("b", 2)] = offset(1)
    store.entries[("a", 10)] = offset(1)
    store.entries[("a", 9)] = offset(1)
    store.entries[("b", 2)] = offset(2, value=7)
    assert [(t, p, v.offset) for t, p, v in store.items()] == [("a", 9, 100), ("a", 10, 100), ("b", 2, 7)]
    assert store.get("b", 2) == offset(2, value=7)
    assert store.get("b", 3) is None and store.get("c", 0) is None
    assert len(store) == 3


offsets_strategy = st.builds(
    CommittedOffset, st.integers(-(2**63), 2**63 - 1), st.integers(-(2**31), 2**31 - 1), st.text(),
    st.integers(0, 2**45), st.none() | st.integers(0, 2**45))


@given(st.lists(st.tuples(st.sampled_from(["a", "b", "ü"]), st.integers(0, 5), offsets_strategy)))
def test_store_survives_json(entries: list[tuple[str, int, CommittedOffset]]) -> None:
    store = OffsetStore()
    for topic, partition, value in entries:
        store.entries[(topic, partition)] = value
    again = OffsetStore.from_json(store.to_json())
    assert list(again.items()) == list(store.items()) and len(again) == len(store)


@given(st.lists(st.tuples(st.sampled_from(["a", "b"]), st.integers(0, 3), st.integers(0, 100),
                          st.none() | st.integers(0, 200))),
       st.integers(0, 300), st.none() | st.integers(0, 50), st.sets(st.sampled_from(["a", "b"])))
def test_next_deadline_is_the_first_time_something_expires(
        entries: list[tuple[str, int, int, int | None]], now: int, since: int | None, kept: set[str]) -> None:
    store = OffsetStore()
    for topic, partition, committed, expires in entries:
        store.entries[(topic, partition)] = offset(committed, expires=expires)
    condition = ExpiryCondition(100, since_ms=since, kept_topics=frozenset(kept))
    deadline = store.next_deadline(condition)
    before = len(store)
    if deadline is None or deadline > now:
        assert expire(store, condition, now) == []
    else:
        assert expire(store, condition, now) != []
        assert len(store) < before


# --------------------------------------------------------------------------------------------- subscriptions

def subscription(*topics: str, version: int = 0, user_data: bytes | None = None, tail: bytes = b"") -> bytes:
    out = struct.pack(">hi", version, len(topics))
    for topic in topics:
        raw = topic.encode()
        out += struct.pack(">h", len(raw)) + raw
    out += struct.pack(">i", -1) if user_data is None else struct.pack(">i", len(user_data)) + user_data
    return out + tail


def b64(data: bytes) -> str:
    return base64.b64encode(data).decode()


def topics(data: bytes) -> tuple[str, ...]:
    return decode_subscription(data, any_version=True).topics


def test_subscription_topics_any_version_by_its_v0_prefix() -> None:
    assert topics(subscription("a", "b")) == ("a", "b")
    assert topics(subscription("ü", user_data=b"xyz")) == ("ü",)
    # v1-v3 append owned partitions, generation, rack: read as v0, the rest ignored
    assert topics(subscription("a", version=3, tail=b"\x00\x00\x00\x00\xff\xff\xff\xff")) == ("a",)
    # the coordinator reads even a negative version as v0 (ClassicGroup.computeSubscribedTopics)
    assert topics(subscription("a", version=-1)) == ("a",)


def test_subscribed_topics_union_or_unknown() -> None:
    assert subscribed_topics([]) == frozenset()
    assert subscribed_topics([b64(subscription("a", "b")), b64(subscription("b", "c"))]) == frozenset("abc")
    # one unreadable member makes the whole group's subscriptions unknown
    assert subscribed_topics([b64(subscription("a")), b64(b"junk")]) is None
    assert subscribed_topics([b64(subscription("a")), None]) is None
    assert subscribed_topics([b64(subscription("a")[:-1])]) is None  # user data length cut short
    assert subscribed_topics([b64(struct.pack(">hi", 0, -1))]) is None  # a null topic array
