"""The seam units plug into (chain.py), through the gateway's core, sans I/O: what a unit sees, what its
answers, rewrites and failures do, and what ApiVersions offers for it. The units here are toys; the real
ones (port mapping, authentication, authorization) have their own tests."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, ClassVar

from kafka.protocol.api_key import ApiKey

from kafka_gateway.chain import Answer, CloseConnection, ConnectionContext, Port, Request, Unit, UnitFactory
from kafka_gateway.gateway import Gateway

from .wire import (
    REPLY_TO,
    T0,
    UPSTREAM_VERSIONS,
    answer,
    closes,
    decode_responses,
    envelopes,
    port,
    request,
    response,
    to_client,
    to_upstream,
)


class Journal(Unit):
    """Writes down what it sees, and tags the ListGroups answers it sees."""

    response_apis: ClassVar[frozenset[ApiKey]] = frozenset({ApiKey.ListGroups, ApiKey.Metadata})

    def __init__(self, context: ConnectionContext, name: str, seen: list[str]) -> None:
        self.name, self.seen = name, seen

    def on_request(self, request: Request) -> Request | Answer:
        self.seen.append(f"{self.name} <- {request.api_key.name}")
        return request

    def on_response(self, request: Request, body: dict[str, Any]) -> dict[str, Any]:
        self.seen.append(f"{self.name} -> {request.api_key.name}")
        if request.api_key == ApiKey.ListGroups:
            body["groups"] = [*body["groups"], {"group_id": self.name, "protocol_type": "consumer"}]
        return body


class Doorkeeper(Unit):
    """Answers ListGroups itself (serving it up to v2); refuses Heartbeat with an answer that closes the
    connection; rewrites every Metadata request to name topic `t`; caps Fetch at v4; breaks on SyncGroup;
    closes the connection on a DescribeGroups answer."""

    serves: ClassVar[Mapping[ApiKey, tuple[int, int]]] = {ApiKey.ListGroups: (0, 2)}
    caps: ClassVar[Mapping[ApiKey, int]] = {ApiKey.Fetch: 4}
    response_apis: ClassVar[frozenset[ApiKey]] = frozenset({ApiKey.DescribeGroups})

    def __init__(self, context: ConnectionContext) -> None:
        self.context = context

    def on_request(self, request: Request) -> Request | Answer:
        if request.api_key == ApiKey.ListGroups:
            return Answer({"error_code": 0, "groups": []})
        if request.api_key == ApiKey.Heartbeat:
            return Answer({"error_code": 58}, close_after=True)
        if request.api_key == ApiKey.Metadata:
            return request.with_body({**request.body(), "topics": [{"name": "t"}]})
        if request.api_key == ApiKey.SyncGroup:
            raise RuntimeError("a bug")
        return request

    def on_response(self, request: Request, body: dict[str, Any]) -> dict[str, Any]:
        raise CloseConnection("this client may not see groups")


def gateway_with(seen: list[str]) -> Gateway:
    def journal(name: str) -> UnitFactory:
        return lambda context: Journal(context, name, seen)

    units = [journal("first"), Doorkeeper, journal("last")]
    return Gateway(Port("PLAINTEXT", None, units), UPSTREAM_VERSIONS, REPLY_TO)


def test_a_units_answer_goes_back_through_the_units_before_it_and_the_units_after_never_see_the_request() -> None:
    seen: list[str] = []
    gateway = gateway_with(seen)
    connection = gateway.open("10.0.0.7")
    actions = gateway.receive(connection, request(ApiKey.ListGroups, 2, 1, {}), T0)
    assert envelopes(actions) == [] and to_upstream(actions) == b""
    [(_, body)] = decode_responses(to_client(actions), [(ApiKey.ListGroups, 2)])
    assert [g["group_id"] for g in body["groups"]] == ["first"]
    assert seen == ["first <- ListGroups", "first -> ListGroups"]


def test_a_rewritten_request_is_what_goes_upstream_and_what_the_units_before_see_with_its_answer() -> None:
    seen: list[str] = []
    gateway = gateway_with(seen)
    connection = gateway.open("10.0.0.7")
    sent = gateway.receive(connection, request(ApiKey.Metadata, 12, 3, {"topics": None}), T0)
    assert to_upstream(sent) == request(ApiKey.Metadata, 12, 3, {"topics": [{"name": "t"}]})
    upstream = response(ApiKey.Metadata, 12, 3, {"brokers": [], "cluster_id": "c", "controller_id": 1, "topics": []})
    decode_responses(to_client(gateway.receive_upstream(connection, upstream, T0)), [(ApiKey.Metadata, 12)])
    assert seen == ["first <- Metadata", "last <- Metadata", "last -> Metadata", "first -> Metadata"]


def test_an_answer_that_closes_is_sent_then_the_connection_closes_before_reading_on() -> None:
    gateway = gateway_with([])
    connection = gateway.open("10.0.0.7")
    heartbeat = {"group_id": "g", "generation_id": 1, "member_id": "m"}
    actions = gateway.receive(connection, request(ApiKey.Heartbeat, 4, 1, heartbeat)
                              + request(ApiKey.JoinGroup, 5, 2, {"group_id": "g"}), T0)
    [(_, body)] = decode_responses(to_client(actions), [(ApiKey.Heartbeat, 4)])
    assert body["error_code"] == 58
    assert [c.connection for c in closes(actions)] == [connection] and envelopes(actions) == []


def test_a_unit_that_breaks_or_refuses_closes_its_own_connection_only() -> None:
    gateway = gateway_with([])
    broken, refused, bystander = (gateway.open(f"10.0.0.{i}") for i in (1, 2, 3))
    [close] = closes(gateway.receive(broken, request(ApiKey.SyncGroup, 3, 1, {"group_id": "g"}), T0))
    assert close.connection == broken and "Doorkeeper failed: RuntimeError('a bug')" in close.reason
    [describe] = envelopes(gateway.receive(refused, request(ApiKey.DescribeGroups, 5, 1, {"groups": ["g"]}), T0))
    [close] = closes(gateway.receive_answers([answer(describe, {"groups": [{"error_code": 0, "group_id": "g"}]})],
                                             T0))
    assert close.connection == refused and "may not see groups" in close.reason
    assert envelopes(gateway.receive(bystander, request(ApiKey.JoinGroup, 5, 1, {"group_id": "g"}), T0))
    assert gateway.counters["closed_UnitFailed"] == 1 and gateway.counters["closed_CloseConnection"] == 1


def test_api_versions_offers_what_the_units_serve_and_no_more_than_they_let_through() -> None:
    def table(gateway: Gateway) -> dict[int, tuple[int, int]]:
        connection = gateway.open("10.0.0.7")
        [(_, body)] = decode_responses(to_client(gateway.receive(connection, request(ApiKey.ApiVersions, 3, 1, {}),
                                                                 T0)), [(ApiKey.ApiVersions, 3)])
        return {k["api_key"]: (k["min_version"], k["max_version"]) for k in body["api_keys"]}

    plain = table(Gateway(port(None), UPSTREAM_VERSIONS, REPLY_TO))
    guarded = table(gateway_with([]))
    assert plain[ApiKey.ListGroups] == (0, 5) and guarded[ApiKey.ListGroups] == (0, 2)
    assert plain[ApiKey.Fetch] == (0, 15) and guarded[ApiKey.Fetch] == (0, 4)
    assert ApiKey.FindCoordinator in plain and ApiKey.FindCoordinator not in guarded  # port mapping serves it
