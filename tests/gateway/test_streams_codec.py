"""The Streams group APIs' wire codec (KIP-1071, v0): the classes built from Kafka's JSON specs against frames
written here field by field, in the order of Kafka's specs, and a round trip over random bodies."""

from __future__ import annotations

import struct
from typing import Any

from hypothesis import given
from hypothesis import strategies as st
from kafka.protocol.api_key import ApiKey

from kafka_gateway.api_versions import advertised_versions
from kafka_gateway.apis import request_class, response_class
from kafka_gateway.codec import body_to_message, decode_request, encode_response, message_to_body

from .wire import UPSTREAM_VERSIONS


class Frame:
    """Kafka's flexible-version primitives, written by hand: compact strings and arrays, tagged-field sections."""

    def __init__(self) -> None:
        self.data = bytearray()

    def fixed(self, fmt: str, *values: Any) -> Frame:
        self.data += struct.pack(">" + fmt, *values)
        return self

    def uvarint(self, value: int) -> Frame:
        while value >= 0x80:
            self.data.append(value & 0x7F | 0x80)
            value >>= 7
        self.data.append(value)
        return self

    def string(self, text: str | None) -> Frame:
        if text is None:
            return self.uvarint(0)
        raw = text.encode()
        self.uvarint(len(raw) + 1)
        self.data += raw
        return self

    def array(self, items: list[Any] | None, write: Any) -> Frame:
        if items is None:
            return self.uvarint(0)
        self.uvarint(len(items) + 1)
        for item in items:
            write(self, item)
        return self

    def tags(self) -> Frame:
        return self.uvarint(0)  # no tagged fields


def string_item(frame: Frame, text: str) -> None:
    frame.string(text)


def key_value(frame: Frame, pair: tuple[str, str]) -> None:
    frame.string(pair[0]).string(pair[1]).tags()


def topic_info(frame: Frame, info: tuple[str, int, int, list[tuple[str, str]]]) -> None:
    name, partitions, replication_factor, configs = info
    frame.string(name).fixed("i", partitions).fixed("h", replication_factor).array(configs, key_value).tags()


def task_ids(frame: Frame, tasks: tuple[str, list[int]]) -> None:
    frame.string(tasks[0]).array(tasks[1], lambda f, p: f.fixed("i", p)).tags()


def task_offset(frame: Frame, offset: tuple[str, int, int]) -> None:
    frame.string(offset[0]).fixed("i", offset[1]).fixed("q", offset[2]).tags()


def request_frame(api_key: int, correlation_id: int, client_id: str) -> Frame:
    """Request header v2 (flexible versions): key, version 0, correlation id, int16-length client id, tags."""
    return Frame().fixed("hhih", api_key, 0, correlation_id, len(client_id)).fixed(f"{len(client_id)}s",
                                                                                 client_id.encode()).tags()


def response_frame(correlation_id: int) -> Frame:
    """Response header v1: correlation id, tags."""
    return Frame().fixed("i", correlation_id).tags()


TOPIC_INFO = ("app-store-changelog", 0, 3, [("cleanup.policy", "compact")])
HEARTBEAT_REQUEST = {
    "group_id": "app", "member_id": "m-1", "member_epoch": 0, "endpoint_information_epoch": 4,
    "instance_id": "i-1", "rack_id": None, "rebalance_timeout_ms": 30_000,
    "topology": {"epoch": 2, "subtopologies": [{
        "subtopology_id": "0", "source_topics": ["in"], "source_topic_regex": [],
        "state_changelog_topics": [{"name": "app-store-changelog", "partitions": 0, "replication_factor": 3,
                                    "topic_configs": [{"key": "cleanup.policy", "value": "compact"}]}],
        "repartition_sink_topics": ["app-rep"], "repartition_source_topics": [],
        "copartition_groups": [{"source_topics": [0], "source_topic_regex": [], "repartition_source_topics": [1]}],
    }]},
    "active_tasks": [{"subtopology_id": "0", "partitions": [0, 2]}], "standby_tasks": [], "warmup_tasks": None,
    "process_id": "p-1", "user_endpoint": {"host": "h", "port": 65535},
    "client_tags": [{"key": "zone", "value": "a"}], "task_offsets": [{"subtopology_id": "0", "partition": 1,
                                                                       "offset": 2**40}],
    "task_end_offsets": None, "shutdown_application": True,
}


def heartbeat_request_bytes() -> bytes:
    frame = request_frame(88, 7, "streams-client")
    frame.string("app").string("m-1").fixed("i", 0).fixed("i", 4).string("i-1").string(None).fixed("i", 30_000)
    # Topology: a nullable struct (int8 1 = present), its epoch, its subtopologies.
    frame.fixed("b", 1).fixed("i", 2).array([None], lambda f, _: (
        f.string("0").array(["in"], string_item).array([], string_item).array([TOPIC_INFO], topic_info)
        .array(["app-rep"], string_item).array([], topic_info)
        .array([None], lambda g, _: g.array([0], lambda h, i: h.fixed("h", i)).array([], lambda h, i: h)
               .array([1], lambda h, i: h.fixed("h", i)).tags())
        .tags())).tags()
    frame.array([("0", [0, 2])], task_ids).array([], task_ids).array(None, task_ids)
    frame.string("p-1").fixed("b", 1).string("h").fixed("H", 65535).tags()
    frame.array([("zone", "a")], key_value).array([("0", 1, 2**40)], task_offset).array(None, task_offset)
    return bytes(frame.fixed("?", True).tags().data)


HEARTBEAT_RESPONSE = {
    "throttle_time_ms": 0, "error_code": 0, "error_message": None, "member_id": "m-1", "member_epoch": 3,
    "heartbeat_interval_ms": 5000, "acceptable_recovery_lag_legacy": 0, "task_offset_interval_ms": 60_000,
    "status": [{"status_code": 3, "status_detail": "missing app-store-changelog"}],
    "active_tasks": [{"subtopology_id": "0", "partitions": [0, 1]}], "standby_tasks": [], "warmup_tasks": None,
    "endpoint_information_epoch": 1,
    "partitions_by_user_endpoint": [{"user_endpoint": {"host": "h", "port": 8080},
                                     "active_partitions": [{"topic": "in", "partitions": [0, 1]}],
                                     "standby_partitions": []}],
}


def heartbeat_response_bytes() -> bytes:
    frame = response_frame(7)
    frame.fixed("ihB", 0, 0, 0).string("m-1").fixed("iiii", 3, 5000, 0, 60_000)
    frame.array([(3, "missing app-store-changelog")], lambda f, s: f.fixed("b", s[0]).string(s[1]).tags())
    frame.array([("0", [0, 1])], task_ids).array([], task_ids).array(None, task_ids).fixed("i", 1)
    frame.array([None], lambda f, _: f.string("h").fixed("H", 8080).tags()
                .array([("in", [0, 1])], task_ids).array([], task_ids).tags())
    return bytes(frame.tags().data)


DESCRIBE_REQUEST = {"group_ids": ["app", "other"], "include_authorized_operations": False}

ASSIGNMENT = {"active_tasks": [{"subtopology_id": "0", "partitions": [0]}], "standby_tasks": [], "warmup_tasks": []}
DESCRIBE_RESPONSE = {"throttle_time_ms": 0, "groups": [{
    "error_code": 0, "error_message": None, "group_id": "app", "group_state": "Stable", "group_epoch": 3,
    "assignment_epoch": 3,
    "topology": {"epoch": 2, "subtopologies": [{
        "subtopology_id": "0", "source_topics": ["in"], "repartition_sink_topics": [],
        "state_changelog_topics": [{"name": "app-store-changelog", "partitions": 0, "replication_factor": 3,
                                    "topic_configs": [{"key": "cleanup.policy", "value": "compact"}]}],
        "repartition_source_topics": []}]},
    "members": [{"member_id": "m-1", "member_epoch": 3, "instance_id": "i-1", "rack_id": None, "client_id": "c",
                 "client_host": "/10.0.0.1", "topology_epoch": 2, "process_id": "p-1", "user_endpoint": None,
                 "client_tags": [], "task_offsets": [], "task_end_offsets": [{"subtopology_id": "0",
                                                                              "partition": 0, "offset": 5}],
                 "assignment": ASSIGNMENT, "target_assignment": ASSIGNMENT, "is_classic": False}],
    "authorized_operations": -(2**31)}]}


def describe_request_bytes() -> bytes:
    frame = request_frame(89, 9, "admin")
    return bytes(frame.array(["app", "other"], string_item).fixed("?", False).tags().data)


def describe_response_bytes() -> bytes:
    def assignment(f: Frame) -> Frame:
        return f.array([("0", [0])], task_ids).array([], task_ids).array([], task_ids).tags()

    frame = response_frame(9).fixed("i", 0)
    frame.uvarint(2).fixed("h", 0).string(None).string("app").string("Stable").fixed("ii", 3, 3)
    frame.fixed("b", 1).fixed("i", 2).array([None], lambda f, _: (
        f.string("0").array(["in"], string_item).array([], string_item).array([TOPIC_INFO], topic_info)
        .array([], topic_info).tags())).tags()
    frame.uvarint(2).string("m-1").fixed("i", 3).string("i-1").string(None).string("c").string("/10.0.0.1")
    frame.fixed("i", 2).string("p-1").fixed("b", -1).array([], key_value).array([], task_offset)
    frame.array([("0", 0, 5)], task_offset)
    assignment(assignment(frame)).fixed("?", False).tags()
    return bytes(frame.fixed("i", -(2**31)).tags().tags().data)


def test_requests_decode_from_frames_written_in_the_specs_field_order() -> None:
    for api_key, payload, body in ((ApiKey.StreamsGroupHeartbeat, heartbeat_request_bytes(), HEARTBEAT_REQUEST),
                                   (ApiKey.StreamsGroupDescribe, describe_request_bytes(), DESCRIBE_REQUEST)):
        message = decode_request(request_class(api_key), payload, 0)
        assert message_to_body(message, 0) == body
        assert bytes(message.encode(header=True)) == payload


def test_responses_encode_to_frames_written_in_the_specs_field_order() -> None:
    for api_key, payload, body, correlation_id in (
            (ApiKey.StreamsGroupHeartbeat, heartbeat_response_bytes(), HEARTBEAT_RESPONSE, 7),
            (ApiKey.StreamsGroupDescribe, describe_response_bytes(), DESCRIBE_RESPONSE, 9)):
        framed = encode_response(body_to_message(response_class(api_key), 0, body), correlation_id)
        assert framed == struct.pack(">i", len(payload)) + payload
        decoded = response_class(api_key).decode(payload, version=0, header=True)
        assert message_to_body(decoded, 0) == body


def test_api_versions_offer_both_streams_apis_at_version_0_only() -> None:
    table = advertised_versions(UPSTREAM_VERSIONS, [])
    assert table[ApiKey.StreamsGroupHeartbeat] == (0, 0) and table[ApiKey.StreamsGroupDescribe] == (0, 0)


names = st.text(max_size=8)
int32s = st.integers(-(2**31), 2**31 - 1)
tasks = st.lists(st.fixed_dictionaries({"subtopology_id": names, "partitions": st.lists(int32s, max_size=3)}),
                 max_size=2)
key_values = st.lists(st.fixed_dictionaries({"key": names, "value": names}), max_size=2)
topic_infos = st.lists(st.fixed_dictionaries({
    "name": names, "partitions": int32s, "replication_factor": st.integers(-(2**15), 2**15 - 1),
    "topic_configs": key_values}), max_size=2)
indexes = st.lists(st.integers(-(2**15), 2**15 - 1), max_size=2)
heartbeat_requests = st.fixed_dictionaries({
    "group_id": names, "member_id": names, "member_epoch": int32s, "endpoint_information_epoch": int32s,
    "instance_id": st.none() | names, "rack_id": st.none() | names, "rebalance_timeout_ms": int32s,
    "topology": st.none() | st.fixed_dictionaries({"epoch": int32s, "subtopologies": st.lists(st.fixed_dictionaries({
        "subtopology_id": names, "source_topics": st.lists(names, max_size=2),
        "source_topic_regex": st.lists(names, max_size=1), "state_changelog_topics": topic_infos,
        "repartition_sink_topics": st.lists(names, max_size=2), "repartition_source_topics": topic_infos,
        "copartition_groups": st.lists(st.fixed_dictionaries({
            "source_topics": indexes, "source_topic_regex": indexes, "repartition_source_topics": indexes}),
            max_size=2)}), max_size=2)}),
    "active_tasks": st.none() | tasks, "standby_tasks": st.none() | tasks, "warmup_tasks": st.none() | tasks,
    "process_id": st.none() | names,
    "user_endpoint": st.none() | st.fixed_dictionaries({"host": names, "port": st.integers(0, 65535)}),
    "client_tags": st.none() | key_values,
    "task_offsets": st.none() | st.lists(st.fixed_dictionaries({
        "subtopology_id": names, "partition": int32s, "offset": st.integers(-(2**63), 2**63 - 1)}), max_size=2),
    "task_end_offsets": st.none(), "shutdown_application": st.booleans(),
})


@given(heartbeat_requests)
def test_any_heartbeat_request_round_trips_through_the_wire(body: dict[str, Any]) -> None:
    message = body_to_message(request_class(ApiKey.StreamsGroupHeartbeat), 0, body)
    message.with_header(correlation_id=1, client_id="c")
    decoded = decode_request(request_class(ApiKey.StreamsGroupHeartbeat), bytes(message.encode(header=True)), 0)
    assert message_to_body(decoded, 0) == body
