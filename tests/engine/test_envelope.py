"""The protocol vocabulary: one rule for the response key, envelopes the engine accepts, the tombstone line."""

from __future__ import annotations

from typing import Any

import pytest

from coordinator_state import (
    SIMULATION_EPOCH_MS,
    SUPPORTED_VERSIONS,
    Api,
    LocalCoordinator,
    is_tombstone,
    latest_version,
    request_envelope,
    response_key,
    tick_envelope,
    to_json,
    tombstone,
)


@pytest.mark.parametrize(("envelope", "key"), [
    ({"reply_to": "r", "client_id": "c", "correlation_id": 7}, ("r", 7)),
    ({"client_id": "c", "correlation_id": 7}, ("c", 7)),  # reply_to defaults to client_id
    ({"correlation_id": 7}, ("", 7)),  # and client_id to ""
    ({"reply_to": "r"}, None),  # no correlation id: never answered, so no key
    ({"reply_to": "r", "correlation_id": "7"}, None),
    ({"reply_to": "r", "correlation_id": 2**31}, None),
    ({"reply_to": None, "correlation_id": 1}, None),
    ({"reply_to": "\ud800", "correlation_id": 1}, None),
])
def test_response_key(envelope: dict[str, Any], key: tuple[str, int] | None) -> None:
    assert response_key(envelope) == key


def test_the_key_of_a_request_is_the_key_of_its_answer_even_for_an_invalid_request() -> None:
    coordinator = LocalCoordinator()
    for request in (
        {"api": "Heartbeat", "client_id": "c", "correlation_id": 3, "timestamp_ms": SIMULATION_EPOCH_MS, "body": {}},
        request_envelope(Api.HEARTBEAT, {"group_id": "g", "generation_id": 1, "member_id": "m"}, correlation_id=4,
                         client_id="c", reply_to="r", timestamp_ms=SIMULATION_EPOCH_MS),
        request_envelope("Metadata", {}, correlation_id=5, reply_to="r", timestamp_ms=SIMULATION_EPOCH_MS),
    ):
        [answer] = coordinator.handle(request)
        assert response_key(answer) == response_key(request)
    assert coordinator.handle({"api": "Heartbeat", "reply_to": "r", "timestamp_ms": 1, "body": {}}) == []


def test_request_envelope_leaves_out_what_is_not_given() -> None:
    envelope = request_envelope(Api.JOIN_GROUP, {"group_id": "g"}, correlation_id=1, timestamp_ms=None)
    assert envelope == {"api": "JoinGroup", "correlation_id": 1, "body": {"group_id": "g"}}
    assert type(envelope["api"]) is str
    full = request_envelope("SyncGroup", {}, version=5, correlation_id=2, client_id="c", client_host="/h",
                            reply_to="r", timestamp_ms=9)
    assert list(full) == ["api", "version", "correlation_id", "client_id", "client_host", "reply_to", "timestamp_ms",
                          "body"]


def test_every_supported_version_is_accepted_and_the_next_one_is_not() -> None:
    coordinator = LocalCoordinator()
    membership = (Api.JOIN_GROUP, Api.SYNC_GROUP, Api.HEARTBEAT, Api.LEAVE_GROUP)  # offsets: test_offsets_api
    for api, (low, high) in ((a, SUPPORTED_VERSIONS[a]) for a in membership):
        assert latest_version(api) == high
        for version, expected in ((low, "UNKNOWN_MEMBER_ID"), (high, "UNKNOWN_MEMBER_ID"),
                                  (high + 1, "UNSUPPORTED_VERSION"), (low - 1, "UNSUPPORTED_VERSION")):
            body = {"group_id": "absent", "generation_id": 1, "member_id": "m", "members": [],
                    "assignments": [], "session_timeout_ms": 10000, "rebalance_timeout_ms": 10000,
                    "protocol_type": "consumer", "protocol_name": "range", "protocols": []}
            [answer] = coordinator.handle(request_envelope(api, body, version=version, correlation_id=1,
                                                           reply_to="r", timestamp_ms=SIMULATION_EPOCH_MS))
            if api == Api.LEAVE_GROUP and version >= 3 and expected != "UNSUPPORTED_VERSION":
                expected = "NONE"  # v3+ answers an absent group per member; this one names none
            assert answer["body"]["error"] == expected, (api, version)


def test_tick_and_tombstone_lines() -> None:
    assert to_json(tick_envelope(5)) == '{"api":"Tick","timestamp_ms":5}'
    assert to_json(tombstone("g")) == '{"group_id":"g","tombstone":true}'
    assert is_tombstone(tombstone("g")) and not is_tombstone({"group_id": "g", "state": "Empty"})
    assert LocalCoordinator().handle(tick_envelope(5)) == []
