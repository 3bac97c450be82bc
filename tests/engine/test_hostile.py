"""Hostile input: `handle` never raises, answers what can be answered, and says why a record is invalid."""

from __future__ import annotations

import json
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from coordinator_state import LocalCoordinator, decode_record, parse_request
from coordinator_state.records import Invalid

from .harness import EPOCH_MS, b64

GOOD_HEARTBEAT = {"api": "Heartbeat", "version": 4, "correlation_id": 7, "client_id": "c", "reply_to": "r",
                  "timestamp_ms": EPOCH_MS, "body": {"group_id": "g", "generation_id": 1, "member_id": "m",
                                                     "group_instance_id": None}}


def with_(path: str, value: Any) -> dict[str, Any]:
    """A copy of the good heartbeat with one field replaced (`body.x` for the body); `...` removes it."""
    request = json.loads(json.dumps(GOOD_HEARTBEAT))
    target = request["body"] if path.startswith("body.") else request
    key = path.removeprefix("body.")
    if value is ...:
        target.pop(key)
    else:
        target[key] = value
    return request


@pytest.mark.parametrize(("request_", "error", "reason"), [
    (with_("version", 5), "UNSUPPORTED_VERSION", "not supported"),
    (with_("version", -1), "UNSUPPORTED_VERSION", "not supported"),
    (with_("version", "4"), "INVALID_REQUEST", "version"),
    (with_("version", True), "INVALID_REQUEST", "version"),
    (with_("api", "TxnOffsetCommit"), "INVALID_REQUEST", "unknown api"),
    (with_("timestamp_ms", ...), "INVALID_REQUEST", "timestamp_ms: missing"),
    (with_("timestamp_ms", 1.5e12), "INVALID_REQUEST", "timestamp_ms"),
    (with_("timestamp_ms", 10**30), "INVALID_REQUEST", "outside"),
    (with_("timestamp_ms", -1), "INVALID_REQUEST", "outside"),
    (with_("body", []), "INVALID_REQUEST", "body: expected an object"),
    (with_("body", ...), "INVALID_REQUEST", "body: missing"),
    (with_("body.generation_id", ...), "INVALID_REQUEST", "generation_id: missing"),
    (with_("body.generation_id", 2**31), "INVALID_REQUEST", "int32"),
    (with_("body.generation_id", None), "INVALID_REQUEST", "generation_id"),
    (with_("body.member_id", 12), "INVALID_REQUEST", "member_id"),
    (with_("body.group_id", None), "INVALID_REQUEST", "group_id"),
    (with_("body.group_id", "\ud800"), "INVALID_REQUEST", "surrogate"),
    (with_("body.group_instance_id", 3), "INVALID_REQUEST", "group_instance_id"),
    (with_("client_host", 3), "INVALID_REQUEST", "client_host"),
])
def test_invalid_records_are_answered_with_the_reason(request_: dict[str, Any], error: str, reason: str) -> None:
    parsed = parse_request(request_)
    assert isinstance(parsed, Invalid) and reason in parsed.reason
    responses = LocalCoordinator().handle(request_)
    assert [(r["reply_to"], r["correlation_id"], r["body"]["error"]) for r in responses] == [("r", 7, error)]


@pytest.mark.parametrize("request_", [
    with_("correlation_id", ...), with_("correlation_id", "7"), with_("correlation_id", 2**40),
    with_("reply_to", 5), [GOOD_HEARTBEAT], "Heartbeat", None, 42,
])
def test_records_that_name_no_reply_to_are_not_answered_but_still_invalid(request_: Any) -> None:
    coordinator = LocalCoordinator()
    assert coordinator.handle(request_) == []
    assert coordinator.counters["invalid_records"] == 1 and len(coordinator.invalid) == 1


def test_valid_requests_kafka_refuses_get_kafkas_error_not_invalid_request() -> None:
    coordinator = LocalCoordinator()
    join = {"api": "JoinGroup", "version": 9, "correlation_id": 1, "client_id": "c", "reply_to": "r",
            "timestamp_ms": EPOCH_MS, "body": {"group_id": "", "session_timeout_ms": 10, "rebalance_timeout_ms": 10,
                                               "member_id": "", "protocol_type": "consumer", "protocols": []}}
    assert coordinator.handle(join)[0]["body"]["error"] == "INVALID_GROUP_ID"
    assert coordinator.invalid == []


def test_unicode_group_and_instance_ids_are_valid() -> None:
    coordinator = LocalCoordinator({"group.initial.rebalance.delay.ms": 0})
    join = {"api": "JoinGroup", "version": 9, "correlation_id": 1, "client_id": "клиент", "reply_to": "r",
            "timestamp_ms": EPOCH_MS,
            "body": {"group_id": "заказы-🚀", "session_timeout_ms": 10000, "rebalance_timeout_ms": 10000,
                     "member_id": "", "group_instance_id": "实例-1", "protocol_type": "consumer",
                     "protocols": [{"name": "range", "metadata": b64("x")}]}}
    [response] = coordinator.handle(join)
    assert response["body"]["error"] == "NONE" and response["body"]["member_id"].startswith("实例-1-")
    assert coordinator.describe("заказы-🚀")["state"] == "CompletingRebalance"  # type: ignore[index]


@pytest.mark.parametrize("raw", [b"\xff\xfe", b"{", b"[" * 100000 + b"]" * 100000, b"", None, "{\"api\": NaN}"])
def test_undecodable_records_become_invalid(raw: bytes | str | None) -> None:
    decoded = decode_record(raw)
    parsed = parse_request(decoded)
    assert isinstance(parsed, Invalid) and parsed.reply is None


JSON = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats() | st.text(max_size=20),
    lambda children: st.lists(children, max_size=4) | st.dictionaries(st.text(max_size=12), children, max_size=5),
    max_leaves=20,
)
FIELDS = st.sampled_from(["api", "version", "correlation_id", "client_id", "reply_to", "timestamp_ms", "body"])
BODY_FIELDS = st.sampled_from(["group_id", "member_id", "generation_id", "group_instance_id", "session_timeout_ms",
                               "rebalance_timeout_ms", "protocol_type", "protocols", "assignments", "members"])


@settings(max_examples=300, deadline=None)
@given(st.sampled_from(["JoinGroup", "SyncGroup", "Heartbeat", "LeaveGroup", "Tick", "x"]),
       st.integers(-2, 10), st.dictionaries(FIELDS, JSON, max_size=3), st.dictionaries(BODY_FIELDS, JSON, max_size=6))
def test_handle_never_raises_and_answers_at_most_once(api: str, version: int, envelope: dict[str, Any],
                                                      body: dict[str, Any]) -> None:
    request = {"api": api, "version": version, "correlation_id": 1, "reply_to": "r", "timestamp_ms": EPOCH_MS,
               "body": {"group_id": "g", **body}, **envelope}
    coordinator = LocalCoordinator({"group.initial.rebalance.delay.ms": 0})
    responses = coordinator.handle(request)
    responses += coordinator.advance_to(EPOCH_MS + 10**9)
    keys = [(r["reply_to"], r["correlation_id"]) for r in responses]
    assert len(keys) == len(set(keys)) <= 1
    json.dumps(responses)  # every answer is serialisable


def test_an_unsupported_version_is_reported_before_any_other_problem() -> None:
    request = with_("version", 7)
    del request["timestamp_ms"]
    request["body"] = "not even an object"
    [response] = LocalCoordinator().handle(request)
    assert response["body"]["error"] == "UNSUPPORTED_VERSION" and response["timestamp_ms"] is None
