"""Port per broker (PROTOCOL.md section 11, Kroxylicious's port-per-broker scheme): the unit that keeps
every upstream address away from clients, and the upstream directory it keeps current.

Each listener has a bootstrap port and one port per upstream node id in `lowest .. lowest + count - 1`:
node N's port is `start + (N - lowest)`. A connection to node N's port is forwarded to node N's address
as the upstream's latest Metadata gives it; the bootstrap port forwards to a bootstrap server. A client
learns the ports from answers on one connection and uses them on others, so the rewriting is a pure
function of the node id: no connection needs to know what another was told.

The unit rewrites every answer that names a broker (Metadata and DescribeCluster: every broker at the
advertised host and its port, node ids, leaders, replicas and controller unchanged; a transactional
FindCoordinator: its node's port), answers a group's FindCoordinator itself (the node of the port it
came in on, the lowest live node on a bootstrap port: every node is the coordinator of every group),
and keeps Produce below v10 and Fetch below v16, whose answers may carry new leaders' addresses
(KIP-951). A node id outside the range closes the client's connection with `UnmappedNode`.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, ClassVar, Final

from kafka.protocol.api_key import ApiKey

from .apis import request_class
from .chain import Answer, CloseConnection, ConnectionContext, Request, Unit
from .errors import MalformedFrame

INVALID_REQUEST: Final = 42
# FindCoordinator key types: a group's coordinator (this gateway), a transactional id's (the upstream's,
# asked upstream). Share-group coordinators are not served.
KEY_TYPE_GROUP: Final = 0
KEY_TYPE_TRANSACTION: Final = 1


class UnmappedNode(CloseConnection):
    """The upstream named a node id that has no port on this gateway."""


@dataclass(frozen=True, slots=True)
class PortScheme:
    """One listener's ports: `host` is what answers advertise, `bootstrap_port` the listener's own port,
    node N at `start + (N - lowest)` for `lowest <= N < lowest + count`."""

    host: str
    bootstrap_port: int
    start: int
    lowest: int = 0
    count: int = 3

    def __post_init__(self) -> None:
        if self.count < 1:
            raise ValueError(f"the number of broker ports must be positive, got {self.count}")
        if self.lowest < 0:
            raise ValueError(f"the lowest broker id must not be negative, got {self.lowest}")
        if not 0 < self.start <= 65536 - self.count:
            raise ValueError(f"broker ports {self.start}..{self.start + self.count - 1} are not all valid ports")
        if self.start <= self.bootstrap_port < self.start + self.count:
            raise ValueError(f"the bootstrap port {self.bootstrap_port} is also a broker port")

    @property
    def node_ids(self) -> range:
        return range(self.lowest, self.lowest + self.count)

    def port_of(self, node_id: int) -> int:
        """Node `node_id`'s port; UnmappedNode when it has none."""
        if node_id not in self.node_ids:
            raise UnmappedNode(
                f"the upstream names node {node_id}, outside this gateway's broker ids {self.lowest}.."
                f"{self.lowest + self.count - 1}: set coordinator.gateway.broker.id.lowest and "
                "coordinator.gateway.broker.ports to cover every node id of the upstream cluster")
        return self.start + node_id - self.lowest


@dataclass
class UpstreamDirectory:
    """Where the upstream's nodes are: learned at start and from every Metadata and DescribeCluster answer
    (shared by the connections of every listener; only this module writes it)."""

    bootstrap: tuple[str, int]
    nodes: dict[int, tuple[str, int]] = field(default_factory=dict)

    def learn(self, nodes: Mapping[int, tuple[str, int]]) -> None:
        """The brokers of the latest answer that lists them all."""
        if nodes:
            self.nodes = dict(nodes)

    def address(self, node_id: int | None) -> tuple[str, int] | None:
        """Where a connection to `node_id`'s port goes (None: the bootstrap port), None when unknown."""
        return self.bootstrap if node_id is None else self.nodes.get(node_id)

    def lowest_node(self) -> int | None:
        return min(self.nodes) if self.nodes else None


class PortMapping(Unit):
    """The port-per-broker unit of one connection."""

    serves: ClassVar[Mapping[ApiKey, tuple[int, int]]] = {
        ApiKey.FindCoordinator: (0, request_class(ApiKey.FindCoordinator).max_version)}
    caps: ClassVar[Mapping[ApiKey, int]] = {ApiKey.Produce: 9, ApiKey.Fetch: 15}
    response_apis: ClassVar[frozenset[ApiKey]] = frozenset(
        {ApiKey.Metadata, ApiKey.DescribeCluster, ApiKey.FindCoordinator})

    def __init__(self, context: ConnectionContext, scheme: PortScheme, upstream: UpstreamDirectory) -> None:
        self.context = context
        self.scheme = scheme
        self.upstream = upstream

    def on_request(self, request: Request) -> Request | Answer:
        if request.api_key != ApiKey.FindCoordinator:
            return request
        body = request.body()
        key_type = body.get("key_type", KEY_TYPE_GROUP)
        if key_type == KEY_TYPE_TRANSACTION:
            return request
        if request.version >= 4 and body.get("coordinator_keys") is None:
            raise MalformedFrame("FindCoordinator coordinator_keys is null")
        if key_type == KEY_TYPE_GROUP:
            node_id = self._coordinator_node()
            # Kafka's message with error 0: Errors.NONE.message() ("NONE") up to v3, the field's default ("") after.
            where = {"error_code": 0, "error_message": "NONE" if request.version < 4 else "", "node_id": node_id,
                     "host": self.scheme.host, "port": self.scheme.port_of(node_id)}
        else:
            where = {"error_code": INVALID_REQUEST, "node_id": -1, "host": "", "port": -1,
                     "error_message": f"coordinator key type {key_type} is not served by this gateway"}
        if request.version < 4:
            return Answer(where)
        return Answer({"coordinators": [{"key": key, **where} for key in body["coordinator_keys"]]})

    def _coordinator_node(self) -> int:
        if self.context.node_id is not None:
            return self.context.node_id
        lowest = self.upstream.lowest_node()
        return self.scheme.lowest if lowest is None else lowest

    def on_response(self, request: Request, body: dict[str, Any]) -> dict[str, Any]:
        if request.api_key == ApiKey.Metadata:
            self.upstream.learn({b["node_id"]: (b["host"], b["port"]) for b in body.get("brokers") or []})
            body["brokers"] = [self._advertised(b, "node_id") for b in body.get("brokers") or []]
        elif request.api_key == ApiKey.DescribeCluster:
            if body.get("error_code") == 0:
                self.upstream.learn({b["broker_id"]: (b["host"], b["port"]) for b in body.get("brokers") or []})
            body["brokers"] = [self._advertised(b, "broker_id") for b in body.get("brokers") or []]
        elif request.version < 4:  # a transactional FindCoordinator
            body.update(self._advertised_coordinator(body))
        else:
            body["coordinators"] = [self._advertised_coordinator(c) for c in body.get("coordinators") or []]
        return body

    def _advertised(self, broker: dict[str, Any], id_field: str) -> dict[str, Any]:
        return {**broker, "host": self.scheme.host, "port": self.scheme.port_of(broker[id_field])}

    def _advertised_coordinator(self, coordinator: dict[str, Any]) -> dict[str, Any]:
        if coordinator.get("error_code") or coordinator.get("node_id", -1) < 0:
            return {**coordinator, "host": "", "port": -1}
        return self._advertised(coordinator, "node_id")
