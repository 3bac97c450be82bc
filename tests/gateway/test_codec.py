"""The codec's piecewise encoding of a long array: byte for byte what encoding the whole message gives."""

from __future__ import annotations

from typing import Any

from hypothesis import given
from hypothesis import strategies as st
from kafka.protocol.api_key import ApiKey

from kafka_gateway.apis import response_class
from kafka_gateway.codec import body_to_message, encode_items, encode_response, encode_response_around

texts = st.text(max_size=12)
error_codes = st.sampled_from([0, 15, 16, 69, -1])
described_groups = st.fixed_dictionaries({
    "group_id": texts, "error_code": error_codes, "group_state": st.sampled_from(["Dead", "Stable", "Empty"]),
    "protocol_type": texts, "protocol_data": texts, "authorized_operations": st.integers(-(2**31), 2**31 - 1),
    "members": st.lists(st.fixed_dictionaries({
        "member_id": texts, "group_instance_id": st.none() | texts, "client_id": texts, "client_host": texts,
        "member_metadata": st.sampled_from(["", "AAE=", "AAEC"]), "member_assignment": st.sampled_from(["", "AQ=="]),
    }), max_size=3),
}, optional={"error_message": st.none() | texts})
fetched_groups = st.fixed_dictionaries({
    "group_id": texts, "error_code": error_codes, "topics": st.lists(st.fixed_dictionaries({
        "name": texts, "partitions": st.lists(st.fixed_dictionaries({
            "partition_index": st.integers(0, 100), "committed_offset": st.integers(-1, 2**40),
            "committed_leader_epoch": st.integers(-1, 10), "metadata": st.none() | texts,
            "error_code": error_codes}), max_size=3)}), max_size=2)})


@given(st.data())
def test_an_array_encoded_a_piece_at_a_time_is_the_array_encoded_whole(data: st.DataObject) -> None:
    api_key, version = data.draw(st.sampled_from(
        [(ApiKey.DescribeGroups, v) for v in range(6)] + [(ApiKey.OffsetFetch, v) for v in (8, 9)]))
    groups: list[dict[str, Any]] = data.draw(st.lists(
        described_groups if api_key == ApiKey.DescribeGroups else fetched_groups, max_size=5))
    cuts = sorted(data.draw(st.lists(st.integers(0, len(groups)), max_size=3)))
    chunks = [groups[start:end] for start, end in zip([0, *cuts], [*cuts, len(groups)], strict=True)]
    message_class = response_class(api_key)
    whole = encode_response(body_to_message(message_class, version, {"throttle_time_ms": 7, "groups": groups}), 42)
    encoded = [encode_items(message_class, version, "groups", chunk) for chunk in chunks]
    assert sum(count for count, _ in encoded) == len(groups)
    assert encode_response_around(message_class, version, {"throttle_time_ms": 7}, "groups", len(groups),
                                  b"".join(items for _, items in encoded), 42) == whole
