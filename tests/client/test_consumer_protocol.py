"""ConsumerProtocol v0 encodings: Kafka's byte layout, round trips, and what a reader does with bad bytes."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from coordinator_state.consumer_protocol import (
    Assignment,
    ProtocolError,
    Subscription,
    decode_assignment,
    decode_subscription,
    encode_assignment,
    encode_subscription,
    from_base64,
    to_base64,
)

topics = st.text(min_size=1, max_size=20)
user_data = st.none() | st.binary(max_size=16)


def test_subscription_bytes_are_kafkas_layout() -> None:
    # int16 version 0, int32 array length, int16-length strings, int32 -1 for null user data.
    assert encode_subscription(Subscription(("orders", "t"))) == (
        b"\x00\x00" b"\x00\x00\x00\x02" b"\x00\x06orders" b"\x00\x01t" b"\xff\xff\xff\xff"
    )


def test_assignment_bytes_are_kafkas_layout_sorted() -> None:
    assignment = Assignment.of({"t": [1, 0], "a": [2]}, user_data=b"u")
    assert encode_assignment(assignment) == (
        b"\x00\x00" b"\x00\x00\x00\x02"
        b"\x00\x01a" b"\x00\x00\x00\x01" b"\x00\x00\x00\x02"
        b"\x00\x01t" b"\x00\x00\x00\x02" b"\x00\x00\x00\x00" b"\x00\x00\x00\x01"
        b"\x00\x00\x00\x01u"
    )


@given(st.lists(topics, max_size=5).map(tuple), user_data)
def test_subscription_round_trip(topic_list: tuple[str, ...], data: bytes | None) -> None:
    subscription = Subscription(topic_list, data)
    assert decode_subscription(from_base64(to_base64(encode_subscription(subscription)))) == subscription


partition_sets = st.sets(st.integers(0, 2**31 - 1), min_size=1, max_size=8)


@given(st.dictionaries(topics, partition_sets, max_size=4), user_data)
def test_assignment_round_trip(by_topic: dict[str, set[int]], data: bytes | None) -> None:
    assignment = Assignment.of(by_topic, data)
    assert decode_assignment(encode_assignment(assignment)) == assignment
    assert assignment.by_topic() == {t: sorted(p) for t, p in sorted(by_topic.items())}


def test_a_later_version_is_read_through_its_v0_prefix() -> None:
    # ConsumerProtocol v1 appends owned partitions after user_data; a v0 reader ignores them.
    v1 = b"\x00\x01" + encode_subscription(Subscription(("t",), b"x"))[2:] + b"\x00\x00\x00\x00"
    assert decode_subscription(v1) == Subscription(("t",), b"x")


def test_empty_assignment_bytes_mean_nothing_assigned() -> None:
    assert decode_assignment(b"") == Assignment(frozenset())


@pytest.mark.parametrize("data", [
    b"\x00",  # truncated version
    b"\xff\xff\x00\x00\x00\x00\xff\xff\xff\xff",  # negative version
    b"\x00\x00\x00\x00\x00\x01\x00\x05ab",  # string shorter than its length
    b"\x00\x00\xff\xff\xff\xff",  # null topic array
    b"\x00\x00\x00\x00\x00\x01\x00\x02\xff\xfe\xff\xff\xff\xff",  # topic not UTF-8
])
def test_malformed_subscriptions_raise_protocol_error(data: bytes) -> None:
    with pytest.raises(ProtocolError):
        decode_subscription(data)


def test_bad_base64_raises_protocol_error() -> None:
    with pytest.raises(ProtocolError):
        from_base64("not base64!")
