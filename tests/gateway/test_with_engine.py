"""The gateway's protocol layer in front of the real engine (LocalCoordinator), still without a network:
Kafka requests in, Kafka responses out, the envelopes in between answered by the coordinator itself."""

from __future__ import annotations

from typing import Any

import pytest
from kafka.protocol.api_key import ApiKey

from coordinator_state import LocalCoordinator
from kafka_gateway.apis import GROUP_APIS, request_class
from kafka_gateway.envelopes import is_split_by_group
from kafka_gateway.gateway import Action, Gateway

from .wire import T0, decode_responses, envelopes, make_gateway, request, to_client

META = "AAEAAAABAAF0AAAAAA=="  # consumer-protocol subscription bytes; opaque to the coordinator


class Client:
    """One client connection through the gateway, with the engine answering in-process."""

    def __init__(self, gateway: Gateway, engine: LocalCoordinator, host: str = "10.0.0.7") -> None:
        self.gateway, self.engine = gateway, engine
        self.connection = gateway.open(host)
        self.correlation_id = 0
        self.now = T0

    def call(self, api_key: ApiKey, version: int, body: dict[str, Any]) -> dict[str, Any]:
        self.correlation_id += 1
        actions = self.gateway.receive(self.connection, request(api_key, version, self.correlation_id, body),
                                       self.now)
        out = self._pump(actions)
        [(correlation_id, answer)] = decode_responses(out, [(api_key, version)])
        assert correlation_id == self.correlation_id
        return answer

    def _pump(self, actions: list[Action]) -> bytes:
        out = to_client(actions, self.connection)
        for envelope in envelopes(actions):
            answers = self.engine.handle(envelope)
            out += self._pump(self.gateway.receive_answers(answers, self.now))
        return out


@pytest.fixture
def client() -> Client:
    return Client(make_gateway(), LocalCoordinator({"group.initial.rebalance.delay.ms": 0}))


def join_body(version: int, member_id: str = "", instance: str | None = None) -> dict[str, Any]:
    return {"group_id": "orders", "session_timeout_ms": 10_000, "rebalance_timeout_ms": 20_000,
            "member_id": member_id, "group_instance_id": instance, "protocol_type": "consumer",
            "protocols": [{"name": "range", "metadata": META}], "reason": None}


@pytest.mark.parametrize("version", range(10))
def test_a_dynamic_member_joins_and_syncs_at_every_join_version(client: Client, version: int) -> None:
    joined = client.call(ApiKey.JoinGroup, version, join_body(version))
    if version >= 4:  # KIP-394: the member id first, then the join with it
        assert joined["error_code"] == 79 and joined["member_id"].startswith("test-client-")
        joined = client.call(ApiKey.JoinGroup, version, join_body(version, joined["member_id"]))
    assert joined["error_code"] == 0 and joined["generation_id"] == 1
    assert joined["leader"] == joined["member_id"]
    assert [m["metadata"] for m in joined["members"]] == [META]
    sync_version = min(version, 5)
    synced = client.call(ApiKey.SyncGroup, sync_version, {
        "group_id": "orders", "generation_id": 1, "member_id": joined["member_id"], "group_instance_id": None,
        "protocol_type": "consumer", "protocol_name": "range",
        "assignments": [{"member_id": joined["member_id"], "assignment": "AAEC"}]})
    assert synced["error_code"] == 0 and synced["assignment"] == "AAEC"


def test_a_static_member_restarting_within_its_session_keeps_its_generation(client: Client) -> None:
    first = client.call(ApiKey.JoinGroup, 7, join_body(7, instance="i-1"))
    assert first["error_code"] == 0 and first["member_id"].startswith("i-1-")
    client.call(ApiKey.SyncGroup, 5, {
        "group_id": "orders", "generation_id": 1, "member_id": first["member_id"], "group_instance_id": "i-1",
        "protocol_type": "consumer", "protocol_name": "range",
        "assignments": [{"member_id": first["member_id"], "assignment": "AAEC"}]})
    restarted = Client(client.gateway, client.engine, host="10.0.0.8")
    again = restarted.call(ApiKey.JoinGroup, 5, join_body(5, instance="i-1"))
    assert again["error_code"] == 0 and again["generation_id"] == 1
    assert again["member_id"] != first["member_id"]
    beat = restarted.call(ApiKey.Heartbeat, 3, {"group_id": "orders", "generation_id": 1,
                                                "member_id": again["member_id"], "group_instance_id": "i-1"})
    assert beat["error_code"] == 0
    fenced = client.call(ApiKey.Heartbeat, 4, {"group_id": "orders", "generation_id": 1,
                                               "member_id": first["member_id"], "group_instance_id": "i-1"})
    assert fenced["error_code"] == 82  # FENCED_INSTANCE_ID


def test_leave_group_by_instance_and_the_v0_member_id_form(client: Client) -> None:
    joined = client.call(ApiKey.JoinGroup, 5, join_body(5, instance="i-1"))
    left = client.call(ApiKey.LeaveGroup, 5, {"group_id": "orders", "members": [
        {"member_id": joined["member_id"], "group_instance_id": "i-1", "reason": "bye"}]})
    assert left["error_code"] == 0 and left["members"] == [
        {"member_id": joined["member_id"], "group_instance_id": "i-1", "error_code": 0}]
    unknown = client.call(ApiKey.LeaveGroup, 1, {"group_id": "orders", "member_id": "nobody"})
    assert unknown["error_code"] == 25  # UNKNOWN_MEMBER_ID


@pytest.mark.parametrize(("api_key", "version"),
                         [(k, v) for k, (low, high) in GROUP_APIS.items() for v in range(low, high + 1)])
def test_every_group_api_version_decodes_to_an_envelope_with_that_versions_fields(
        api_key: ApiKey, version: int) -> None:
    gateway = make_gateway()
    connection = gateway.open("10.0.0.7")
    defaults = request_class(api_key)[version]()
    expected = {name for name, field in request_class(api_key).fields.items() if field.for_version_q(version)}
    raw = defaults.encode(header=False)
    framed = request(api_key, version, 1, {})
    assert framed.endswith(bytes(raw))
    sent = envelopes(gateway.receive(connection, framed, T0))
    if is_split_by_group(api_key, version):
        assert sent == []  # no group named: answered at once, with no group
    else:
        [envelope] = sent
        assert envelope["api"] == api_key.name and envelope["version"] == version
        assert set(envelope["body"]) == expected
