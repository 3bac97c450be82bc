"""Starting and stopping a gateway: the upstream probe, the listening sockets, the coordinator, shutdown.

Each listener opens its bootstrap port and one port per upstream node id (`port_mapping.py`), all at
start; every connection of a port gets the listener's units, then the port-mapping unit (`chain.py`).

`serve` runs one gateway until its stop event is set; `BackgroundGateway` runs `serve` on its own event
loop in a thread, for tests and demos whose Kafka clients block.
"""

from __future__ import annotations

import asyncio
import contextlib
import errno
import functools
import logging
import socket
import ssl
import threading
import uuid
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from types import TracebackType
from typing import Any

from kafka.protocol.api_key import ApiKey

from coordinator_metrics import MetricsEndpoint
from coordinator_state import DEFAULTS, EngineConfig
from coordinator_state.envelope import INT32_MAX

from .apis import request_class, response_class
from .chain import ConnectionContext, Port, Unit, UnitFactory
from .codec import decode_response
from .coordinators import Coordinator, LocalEngine, TopicEngine
from .frames import FrameSplitter
from .gateway import AnswerObserver, Gateway, Limits
from .listeners import parse_host_port
from .metrics import GatewayMetrics
from .port_mapping import PortMapping, PortScheme, UpstreamDirectory
from .security.sasl_client import UpstreamSecurity, open_upstream
from .security.units import Security
from .server import GatewayServer, wall_clock_ms

log = logging.getLogger(__name__)
PROBE_CLIENT_ID = "coordinator-gateway-probe"


def host_port(text: str) -> tuple[str, int]:
    """`HOST:PORT` (the first of a comma-separated list) as a pair; ValueError when it is not one."""
    return host_ports(text)[0]


def host_ports(text: str) -> list[tuple[str, int]]:
    """A comma-separated list of `HOST:PORT` as pairs; ValueError when one is not."""
    return [parse_host_port(item) for item in text.split(",")]


@dataclass(frozen=True)
class ListenerOptions:
    """One listener: its name, its bootstrap address, the host its answers advertise, its first broker port
    (None: the bootstrap port + 1) and the units its connections get before port mapping (authentication,
    authorization: each a factory of one connection's unit). An `advertised_port` (the bootstrap port as
    clients reach it, behind a port mapping) shifts the advertised broker ports alike."""

    listen: tuple[str, int]
    name: str = "PLAINTEXT"
    advertised_host: str | None = None
    broker_port_start: int | None = None
    units: Sequence[UnitFactory] = ()
    advertised_port: int | None = None
    tls: ssl.SSLContext | None = None  # SSL and SASL_SSL listeners


@dataclass(frozen=True)
class GatewayOptions:
    """Everything a gateway needs to start. `listen`, `advertised_host` and `broker_port_start` describe a
    single PLAINTEXT listener unless `listeners` is given. `broker_id_lowest` and `broker_ports` (the node
    ids that get a port) default to the span of the node ids the upstream lists at start."""

    listen: tuple[str, int]
    upstream: tuple[str, int] | Sequence[tuple[str, int]]
    engine: str = "topics"
    advertised_host: str | None = None
    limits: Limits = field(default_factory=Limits)
    settings: Mapping[str, Any] = field(default_factory=dict)
    status_interval_s: float = 10.0
    on_answer: AnswerObserver | None = None  # called on the gateway's loop with every answered group request
    broker_port_start: int | None = None
    broker_id_lowest: int | None = None
    broker_ports: int | None = None
    listeners: Sequence[ListenerOptions] = ()
    upstream_security: UpstreamSecurity = field(default_factory=UpstreamSecurity)
    security: Security | None = None  # the users and ACL files, re-read while the gateway runs
    metrics_listen: tuple[str, int] | None = None  # where Prometheus scrapes (coordinator.metrics.listen); None: not

    @property
    def bootstrap_servers(self) -> list[tuple[str, int]]:
        if isinstance(self.upstream, tuple) and len(self.upstream) == 2 and isinstance(self.upstream[1], int):
            return [self.upstream]
        return list(self.upstream)

    def all_listeners(self) -> list[ListenerOptions]:
        return list(self.listeners) or [ListenerOptions(self.listen, advertised_host=self.advertised_host,
                                                        broker_port_start=self.broker_port_start)]


@dataclass(frozen=True)
class UpstreamInfo:
    """What the gateway learns from the upstream cluster before it serves anyone."""

    versions: dict[int, tuple[int, int]]
    bootstrap: tuple[str, int]  # the bootstrap server that answered
    nodes: dict[int, tuple[str, int]]  # every broker the upstream's Metadata lists


async def _call(reader: asyncio.StreamReader, writer: asyncio.StreamWriter, api_key: ApiKey, version: int,
                correlation_id: int, body: Mapping[str, Any]) -> Any:
    message = request_class(api_key)[version](**body)
    message.with_header(correlation_id=correlation_id, client_id=PROBE_CLIENT_ID)
    writer.write(bytes(message.encode(header=True, framed=True)))
    splitter = FrameSplitter(INT32_MAX)  # a frame's size is an int32
    while True:
        data = await reader.read(65536)
        if not data:
            raise ConnectionError("the upstream broker closed the connection")
        frames = splitter.feed(data)
        if frames:
            return decode_response(response_class(api_key), frames[0], version)


async def probe_upstream(bootstrap_servers: Sequence[tuple[str, int]], timeout_s: float = 10.0,
                         security: UpstreamSecurity | None = None) -> UpstreamInfo:
    """The API versions and brokers of the upstream, from the first bootstrap server that answers."""
    failures = []
    for address in bootstrap_servers:
        try:
            return await _probe(address, timeout_s, security or UpstreamSecurity())
        except (OSError, TimeoutError, ConnectionError) as exc:
            failures.append(f"{address[0]}:{address[1]}: {exc!r}")
    raise ConnectionError(f"no bootstrap server answered ({'; '.join(failures)})")


async def _probe(upstream: tuple[str, int], timeout_s: float, security: UpstreamSecurity) -> UpstreamInfo:
    async with asyncio.timeout(timeout_s):
        reader, writer = await open_upstream(*upstream, security, timeout_s=timeout_s)
        try:
            versions_answer = await _call(reader, writer, ApiKey.ApiVersions, 0, 1, {})
            if versions_answer.error_code != 0:
                raise ConnectionError(f"upstream ApiVersions failed with error {versions_answer.error_code}")
            versions = {k.api_key: (k.min_version, k.max_version) for k in versions_answer.api_keys}
            metadata = await _call(reader, writer, ApiKey.Metadata, 1, 2, {"topics": []})
        finally:
            writer.close()
    nodes = {b.node_id: (b.host, b.port) for b in metadata.brokers}
    if not nodes:
        raise ConnectionError("the upstream broker listed no broker in Metadata")
    return UpstreamInfo(versions, upstream, nodes)


def _coordinator(options: GatewayOptions, reply_to: str) -> Coordinator:
    if options.engine == "local":
        return LocalEngine(options.settings, wall_clock_ms)
    bootstrap = ",".join(f"{host}:{port}" for host, port in options.bootstrap_servers)
    return TopicEngine(str(options.settings.get("bootstrap.servers", bootstrap)), options.settings, reply_to)


@dataclass(frozen=True)
class Listening:
    """Where a started listener accepts clients."""

    name: str
    host: str  # where it listens (its answers advertise `scheme.host`)
    bootstrap_port: int
    scheme: PortScheme

    @property
    def address(self) -> str:
        return f"{self.host}:{self.bootstrap_port}"


BIND_ATTEMPTS = 20


def _bind_listener(listener: ListenerOptions, node_ids: range) -> tuple[list[socket.socket], int, int]:
    """The listener's bootstrap socket then one per node id; with port 0 and no first broker port, the
    kernel's free port and the ports after it, tried again elsewhere while one of them is taken."""
    any_port = listener.listen[1] == 0 and listener.broker_port_start is None
    for _ in range(BIND_ATTEMPTS if any_port else 1):
        bootstrap = socket.create_server(listener.listen)
        bootstrap_port = bootstrap.getsockname()[1]
        start = listener.broker_port_start or bootstrap_port + 1
        sockets = [bootstrap]
        try:
            for offset in range(len(node_ids)):
                sockets.append(socket.create_server((listener.listen[0], start + offset)))
            return sockets, bootstrap_port, start
        except OSError as exc:
            for sock in sockets:
                sock.close()
            if not any_port or exc.errno != errno.EADDRINUSE:
                raise OSError(exc.errno, f"listener {listener.name}: cannot listen on broker port "
                                         f"{start + len(sockets) - 1}: {exc.strerror}") from exc
    raise OSError(errno.EADDRINUSE, f"listener {listener.name}: found no {len(node_ids) + 1} free ports in a row")


def _port_mapping(scheme: PortScheme, upstream: UpstreamDirectory) -> UnitFactory:
    def make(context: ConnectionContext) -> Unit:
        return PortMapping(context, scheme, upstream)
    return make


async def serve(options: GatewayOptions, stop: asyncio.Event,
                on_ready: Any = None) -> GatewayServer:
    """Runs a gateway until `stop` is set; `on_ready(server, listening)` is called once it accepts clients,
    with the `Listening` of every listener."""
    upstream = await probe_upstream(options.bootstrap_servers, security=options.upstream_security)
    lowest = min(upstream.nodes) if options.broker_id_lowest is None else options.broker_id_lowest
    count = max(upstream.nodes) - lowest + 1 if options.broker_ports is None else options.broker_ports
    outside = sorted(n for n in upstream.nodes if not lowest <= n < lowest + count)
    if outside or count < 1:
        log.error("the upstream's node ids %s have no port on this gateway (broker ids %d..%d): clients that meet "
                  "them are disconnected; set coordinator.gateway.broker.id.lowest and "
                  "coordinator.gateway.broker.ports to cover %s", outside, lowest, lowest + count - 1,
                  sorted(upstream.nodes))
        count = max(count, 1)
    directory = UpstreamDirectory(upstream.bootstrap, dict(upstream.nodes))
    node_ids = range(lowest, lowest + count)
    reply_to = f"gateway-{socket.gethostname()}-{uuid.uuid4().hex[:12]}"
    ports: list[tuple[socket.socket, Port, ssl.SSLContext | None]] = []
    listening: list[Listening] = []
    try:
        for listener in options.all_listeners():
            sockets, bootstrap_port, start = _bind_listener(listener, node_ids)
            host = listener.advertised_host or listener.listen[0]
            shift = 0 if listener.advertised_port is None else listener.advertised_port - bootstrap_port
            scheme = PortScheme(host, bootstrap_port + shift, start + shift, lowest, count)
            units = [*listener.units, _port_mapping(scheme, directory)]
            ports += [(sock, Port(listener.name, node_id, units), listener.tls)
                      for sock, node_id in zip(sockets, (None, *node_ids), strict=True)]
            listening.append(Listening(listener.name, listener.listen[0], bootstrap_port, scheme))
    except OSError:
        for sock, _, _ in ports:
            sock.close()
        raise
    metrics = GatewayMetrics()
    for where in listening:
        metrics.listener(where.name)
    for listener in options.all_listeners():
        if listener.tls is not None:
            metrics.count_tls_failures(listener.name, listener.tls)
    gateway = Gateway(ports[0][1], upstream.versions, reply_to, options.limits, options.on_answer,
                      metrics.response_sent)
    server = GatewayServer(gateway, _coordinator(options, reply_to), directory,
                           status_interval_s=options.status_interval_s, upstream_security=options.upstream_security,
                           security=options.security, metrics=metrics)
    servers = [await asyncio.start_server(functools.partial(server.client_connected, port=port), sock=sock,
                                          ssl=tls)
               for sock, port, tls in ports]
    endpoint = None
    try:
        if options.metrics_listen is not None:
            endpoint = MetricsEndpoint(metrics.registry, options.metrics_listen)
            server.metrics_url = endpoint.url
            log.info("gateway metrics on %s", endpoint.url)
        await server.start(servers)
        for where in listening:
            log.info("gateway listener %s on %s (nodes %d..%d advertised at %s ports %d..%d) for upstream %s, "
                     "engine %s, reply_to %s", where.name, where.address, lowest, lowest + count - 1,
                     where.scheme.host, where.scheme.start, where.scheme.start + count - 1,
                     ",".join(f"{h}:{p}" for h, p in options.bootstrap_servers), options.engine, reply_to)
        if on_ready is not None:
            on_ready(server, listening)
        await stop.wait()
    finally:
        if endpoint is not None:
            endpoint.close()
        await server.stop()
        for listening_server in servers:
            listening_server.close()
        with contextlib.suppress(Exception):
            await asyncio.wait_for(asyncio.gather(*(s.wait_closed() for s in servers)), 2)
    return server


class BackgroundGateway:
    """A gateway on its own event loop in a daemon thread: `with BackgroundGateway(options) as g: g.address`."""

    def __init__(self, options: GatewayOptions, startup_timeout_s: float = 30.0) -> None:
        self.options = options
        self.startup_timeout_s = startup_timeout_s
        self.server: GatewayServer | None = None
        self.listening: list[Listening] = []
        self._loop: asyncio.AbstractEventLoop | None = None
        self._stop: asyncio.Event | None = None
        self._ready = threading.Event()
        self._error: BaseException | None = None
        self._thread = threading.Thread(target=self._run, name="kafka-gateway", daemon=True)

    @property
    def address(self) -> str:
        """`host:port` of the first listener's bootstrap port, for clients' bootstrap.servers."""
        if not self.listening:
            raise RuntimeError("the gateway is not running")
        return self.listening[0].address

    def _run(self) -> None:
        async def main() -> None:
            self._loop = asyncio.get_running_loop()
            self._stop = asyncio.Event()

            def ready(server: GatewayServer, listening: list[Listening]) -> None:
                self.server, self.listening = server, listening
                self._ready.set()

            await serve(self.options, self._stop, ready)

        try:
            asyncio.run(main())
        except BaseException as exc:
            self._error = exc
            self._ready.set()

    def start(self) -> BackgroundGateway:
        self._thread.start()
        if not self._ready.wait(self.startup_timeout_s):
            raise TimeoutError(f"the gateway did not start within {self.startup_timeout_s} s")
        if self._error is not None:
            raise RuntimeError(f"the gateway failed to start: {self._error!r}") from self._error
        return self

    def call(self, function: Any, *args: Any) -> Any:
        """Runs `function(*args)` on the gateway's loop and returns its result (to read state safely)."""
        if self._loop is None or self._loop.is_closed() or not self._thread.is_alive():
            raise RuntimeError("the gateway is not running")

        async def run() -> Any:
            return function(*args)

        return asyncio.run_coroutine_threadsafe(run(), self._loop).result(10)

    def stop(self) -> None:
        if self._loop is not None and self._stop is not None and self._thread.is_alive():
            self._loop.call_soon_threadsafe(self._stop.set)
        self._thread.join(30)

    def __enter__(self) -> BackgroundGateway:
        return self.start()

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        self.stop()


def coordinator_limits(engine: str, settings: Mapping[str, Any], **given: int) -> Limits:
    """The gateway's bounds for the coordinator `engine` and `settings` describe (`given` ones win): a JoinGroup
    may be parked as long as the coordinator's initial rebalance delay, and the job (`topics`) answers a timer
    only once its watermark, trailing the latest request by the lateness, has passed it: up to the lateness, a
    tick interval and a trigger interval more than the in-process engine (`local`)."""
    derived = {"initial_rebalance_delay_ms": EngineConfig.from_mapping(settings).initial_rebalance_delay_ms}
    if engine == "topics":
        watermark_lag_ms = sum(int(settings.get(key, DEFAULTS[key]))
                               for key in ("coordinator.lateness.ms", "coordinator.tick.interval.ms"))
        derived["join_grace_ms"] = (Limits().join_grace_ms + watermark_lag_ms
                                    + int(settings["coordinator.trigger.interval.ms"]))
    return Limits(**{**derived, **given})


def loopback_gateway(bootstrap_servers: str, engine: str, settings: Mapping[str, Any],
                     on_answer: AnswerObserver | None = None, metrics: bool = False) -> BackgroundGateway:
    """A gateway (not started yet) on free loopback ports in front of `bootstrap_servers` (a port for each of
    its node ids), without status lines: what tests, demos, chaos runs and benches put between their
    consumer processes and a coordinator. `engine` is "local" (an in-process engine configured by
    `settings`) or "topics" (the job `settings` describe); `on_answer` watches what the gateway answers; with
    `metrics`, its metrics are served on a free loopback port too (`server.metrics_url`)."""
    return BackgroundGateway(GatewayOptions(listen=("127.0.0.1", 0), upstream=host_ports(bootstrap_servers),
                                            engine=engine, settings=settings, status_interval_s=0,
                                            limits=coordinator_limits(engine, settings), on_answer=on_answer,
                                            metrics_listen=("127.0.0.1", 0) if metrics else None))
