"""The protocol layer's two hooks for the shell, sans I/O: a large frame handed out to be decoded off the event
loop (`Decode`), and every response reported as it leaves (`on_response`, the metrics')."""

from __future__ import annotations

from kafka.protocol.api_key import ApiKey

from kafka_gateway.frames import frame
from kafka_gateway.gateway import Decode, Limits, ResumeReading, decode_off_loop

from .wire import T0, answer, closes, decode_responses, envelopes, make_gateway, request, to_client, to_upstream

HEARTBEAT = {"group_id": "orders", "generation_id": 1, "member_id": "m-1", "group_instance_id": "i-1"}
# Small enough for a test, larger than the ApiVersions and Heartbeat frames around it.
OFF_LOOP = Limits(decode_off_loop_bytes=100)
LARGE_JOIN = {"group_id": "orders", "session_timeout_ms": 10_000, "rebalance_timeout_ms": 30_000, "member_id": "",
              "group_instance_id": "i-1", "protocol_type": "consumer",
              "protocols": [{"name": f"protocol-{i}", "metadata": "AAEC"} for i in range(20)]}


def test_a_large_frame_waits_for_its_decoding_off_the_loop_and_then_goes_on_in_order() -> None:
    gateway = make_gateway(OFF_LOOP)
    conn = gateway.open("10.0.0.7")
    actions = gateway.receive(conn, request(ApiKey.ApiVersions, 3, 1, {}) + request(ApiKey.JoinGroup, 7, 2, LARGE_JOIN)
                              + request(ApiKey.Heartbeat, 4, 3, HEARTBEAT), T0)
    [decode] = [a for a in actions if isinstance(a, Decode)]
    assert envelopes(actions) == [] and not gateway.reading(conn)  # nothing after it is handled meanwhile
    assert decode_responses(to_client(actions), [(ApiKey.ApiVersions, 3)])[0][0] == 1
    assert gateway.receive(conn, b"", T0) == []  # asked once
    [join] = envelopes(gateway.decoded(conn, decode_off_loop(decode.request), T0))
    assert join["body"] == LARGE_JOIN
    out = gateway.receive_answers([answer(join, {"error_code": 25})], T0)
    [heartbeat] = envelopes(out)
    out += gateway.receive_answers([answer(heartbeat, {"error_code": 0})], T0)
    assert [c for c, _ in decode_responses(to_client(out), [(ApiKey.JoinGroup, 7), (ApiKey.Heartbeat, 4)])] == [2, 3]
    assert any(isinstance(a, ResumeReading) for a in out)


def test_a_large_frame_that_does_not_decode_closes_its_connection_only() -> None:
    gateway = make_gateway(OFF_LOOP)
    bad, good = gateway.open("10.0.0.6"), gateway.open("10.0.0.7")
    whole = request(ApiKey.JoinGroup, 7, 1, LARGE_JOIN)
    [decode] = [a for a in gateway.receive(bad, frame(whole[4:-6]), T0) if isinstance(a, Decode)]
    [heartbeat] = envelopes(gateway.receive(good, request(ApiKey.Heartbeat, 4, 2, HEARTBEAT), T0))
    [closed] = closes(gateway.decoded(bad, decode_off_loop(decode.request), T0))
    assert closed.connection == bad and "JoinGroupRequest v7 does not decode" in closed.reason
    out = gateway.receive_answers([answer(heartbeat, {"error_code": 0})], T0)
    assert decode_responses(to_client(out, good), [(ApiKey.Heartbeat, 4)])[0][0] == 2


def test_a_large_produce_without_acks_decoded_off_the_loop_gets_no_slot() -> None:
    gateway = make_gateway(OFF_LOOP)
    conn = gateway.open("10.0.0.7")
    produce = request(ApiKey.Produce, 8, 1, {"transactional_id": "t" * 200, "acks": 0, "timeout_ms": 100,
                                             "topic_data": []})
    [decode] = [a for a in gateway.receive(conn, produce, T0) if isinstance(a, Decode)]
    actions = gateway.decoded(conn, decode_off_loop(decode.request), T0)
    assert to_upstream(actions) == produce
    [heartbeat] = envelopes(actions + gateway.receive(conn, request(ApiKey.Heartbeat, 4, 2, HEARTBEAT), T0))
    out = gateway.receive_answers([answer(heartbeat, {"error_code": 0})], T0)
    assert [c for c, _ in decode_responses(to_client(out), [(ApiKey.Heartbeat, 4)])] == [2]


def test_every_response_is_reported_as_it_leaves_with_its_error_code_and_read_time() -> None:
    sent: list[tuple[str, str, str, int]] = []
    gateway = make_gateway()
    gateway.on_response = lambda *response: sent.append(response)
    conn = gateway.open("10.0.0.7")
    produce = request(ApiKey.Produce, 8, 1, {"transactional_id": None, "acks": 1, "timeout_ms": 100,
                                             "topic_data": []})
    actions = gateway.receive(conn, produce + request(ApiKey.Heartbeat, 4, 2, HEARTBEAT), T0)
    actions += gateway.receive(conn, request(ApiKey.ApiVersions, 3, 3, {}), T0 + 1)
    [heartbeat] = envelopes(actions)
    assert sent == []  # the proxied answer comes first
    gateway.receive_upstream(conn, frame((1).to_bytes(4, "big") + bytes(20)), T0 + 2)  # passed on undecoded
    gateway.receive_answers([answer(heartbeat, {"error_code": 27})], T0 + 3)
    assert sent == [("PLAINTEXT", "Produce", "unknown", T0), ("PLAINTEXT", "Heartbeat", "27", T0),
                    ("PLAINTEXT", "ApiVersions", "0", T0 + 1)]
