"""Hypothesis: whatever bytes a client sends, the protocol layer answers with actions, never an exception,
and a connection's bad bytes never change what another connection gets."""

from __future__ import annotations

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from kafka.protocol.api_key import ApiKey

from kafka_gateway.gateway import CloseClient, Limits, ToClient, ToCoordinator, ToUpstream

from .wire import T0, answer, decode_responses, envelopes, make_gateway, request, to_client

HEARTBEAT = {"group_id": "g", "generation_id": 1, "member_id": "m", "group_instance_id": None}
VALID = [
    request(ApiKey.ApiVersions, 3, 1, {}),
    request(ApiKey.Heartbeat, 4, 2, HEARTBEAT),
    request(ApiKey.JoinGroup, 9, 3, {"group_id": "g", "session_timeout_ms": 6000, "member_id": "",
                                     "protocol_type": "consumer", "protocols": [{"name": "r", "metadata": "AA=="}]}),
    request(ApiKey.DescribeGroups, 5, 4, {"groups": ["a", "b"]}),
    request(ApiKey.OffsetFetch, 8, 5, {"groups": [{"group_id": "g", "topics": None}]}),
    request(ApiKey.FindCoordinator, 4, 6, {"key_type": 0, "coordinator_keys": ["g"]}),
    request(ApiKey.Metadata, 12, 7, {"topics": None}),
]


@st.composite
def hostile_streams(draw: st.DrawFn) -> bytes:
    """Valid requests mutated (bytes flipped, cut, extended, size prefix changed) and random bytes."""
    chunks = []
    for _ in range(draw(st.integers(1, 4))):
        kind = draw(st.sampled_from(["random", "mutated", "resized", "cut"]))
        if kind == "random":
            chunks.append(draw(st.binary(max_size=64)))
            continue
        base = bytearray(draw(st.sampled_from(VALID)))
        if kind == "mutated":
            for _ in range(draw(st.integers(1, 4))):
                base[draw(st.integers(4, len(base) - 1))] = draw(st.integers(0, 255))
        elif kind == "resized":
            base[0:4] = draw(st.integers(-(2**31), 2**31 - 1)).to_bytes(4, "big", signed=True)
        else:
            cut = draw(st.integers(5, len(base) - 1))
            inner = base[4:cut]
            base = bytearray(len(inner).to_bytes(4, "big") + inner)
        chunks.append(bytes(base))
    return b"".join(chunks)


@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(stream=hostile_streams(), split=st.integers(1, 64))
def test_hostile_bytes_become_actions_and_never_reach_another_connection(stream: bytes, split: int) -> None:
    gateway = make_gateway(Limits(max_frame_bytes=1 << 20))
    good, bad = gateway.open("10.0.0.1"), gateway.open("10.0.0.2")
    [heartbeat] = envelopes(gateway.receive(good, VALID[1], T0))
    for start in range(0, len(stream), split):
        actions = gateway.receive(bad, stream[start:start + split], T0)
        assert all(isinstance(a, ToClient | ToUpstream | ToCoordinator | CloseClient) for a in actions)
        assert all(a.connection == bad for a in actions if isinstance(a, ToClient | ToUpstream | CloseClient))
        for envelope in envelopes(actions):  # whatever got through is answered like any request
            gateway.receive_answers([answer(envelope, {"error_code": 42})], T0)
    out = gateway.receive_answers([answer(heartbeat, {"error_code": 0})], T0)
    assert decode_responses(to_client(out, good), [(ApiKey.Heartbeat, 4)]) == [
        (2, {"throttle_time_ms": 0, "error_code": 0})]
