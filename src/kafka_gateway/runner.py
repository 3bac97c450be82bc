"""Starting and stopping a gateway: the upstream probe, the listening socket, the coordinator, shutdown.

`serve` runs one gateway until its stop event is set; `BackgroundGateway` runs `serve` on its own event
loop in a thread, for tests and demos whose Kafka clients block.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import socket
import threading
import uuid
from collections.abc import Mapping
from dataclasses import dataclass, field
from types import TracebackType
from typing import Any

from kafka.protocol.api_key import ApiKey

from coordinator_state.envelope import INT32_MAX

from .apis import request_class, response_class
from .broker_answers import Node, advertised_versions
from .codec import decode_response
from .coordinators import Coordinator, LocalEngine, TopicEngine
from .frames import FrameSplitter
from .gateway import AnswerObserver, Gateway, Limits
from .server import GatewayServer, wall_clock_ms

log = logging.getLogger(__name__)
PROBE_CLIENT_ID = "coordinator-gateway-probe"


def host_port(text: str) -> tuple[str, int]:
    """`HOST:PORT` (the first of a comma-separated list) as a pair; ValueError when it is not one."""
    first = text.split(",")[0].strip()
    host, sep, port = first.rpartition(":")
    if not sep or not host or not port.isdigit() or not 0 <= int(port) <= 65535:
        raise ValueError(f"expected HOST:PORT, got {text!r}")
    return host.strip("[]"), int(port)


@dataclass(frozen=True)
class GatewayOptions:
    """Everything a gateway needs to start."""

    listen: tuple[str, int]
    upstream: tuple[str, int]
    engine: str = "topics"
    advertised_host: str | None = None
    limits: Limits = field(default_factory=Limits)
    settings: Mapping[str, Any] = field(default_factory=dict)
    status_interval_s: float = 10.0
    on_answer: AnswerObserver | None = None  # called on the gateway's loop with every answered group request


@dataclass(frozen=True)
class UpstreamInfo:
    """What the gateway learns from the upstream broker before it serves anyone."""

    versions: dict[int, tuple[int, int]]
    node_id: int
    brokers: int


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


async def probe_upstream(upstream: tuple[str, int], timeout_s: float = 10.0) -> UpstreamInfo:
    """The upstream's API versions and its node id (the broker at the bootstrap address, or the first)."""
    async with asyncio.timeout(timeout_s):
        reader, writer = await asyncio.open_connection(*upstream)
        try:
            versions_answer = await _call(reader, writer, ApiKey.ApiVersions, 0, 1, {})
            if versions_answer.error_code != 0:
                raise ConnectionError(f"upstream ApiVersions failed with error {versions_answer.error_code}")
            versions = {k.api_key: (k.min_version, k.max_version) for k in versions_answer.api_keys}
            metadata = await _call(reader, writer, ApiKey.Metadata, 1, 2, {"topics": []})
        finally:
            writer.close()
    brokers = list(metadata.brokers)
    if not brokers:
        raise ConnectionError("the upstream broker listed no broker in Metadata")
    at_bootstrap = [b for b in brokers if (b.host, b.port) == upstream]
    return UpstreamInfo(versions, (at_bootstrap or brokers)[0].node_id, len(brokers))


def _coordinator(options: GatewayOptions, reply_to: str) -> Coordinator:
    if options.engine == "local":
        return LocalEngine(options.settings, wall_clock_ms)
    bootstrap = f"{options.upstream[0]}:{options.upstream[1]}"
    return TopicEngine(str(options.settings.get("bootstrap.servers", bootstrap)), options.settings, reply_to)


async def serve(options: GatewayOptions, stop: asyncio.Event,
                on_ready: Any = None) -> GatewayServer:
    """Runs a gateway until `stop` is set; `on_ready(server, node)` is called once it accepts clients."""
    upstream = await probe_upstream(options.upstream)
    if upstream.brokers > 1:
        log.warning("the upstream lists %d brokers; the gateway forwards everything to %s:%d only "
                    "(see the README on multi-broker clusters)", upstream.brokers, *options.upstream)
    listener = socket.create_server(options.listen, reuse_port=False)
    port = listener.getsockname()[1]
    advertised = options.advertised_host or options.listen[0]
    node = Node(upstream.node_id, advertised, port)
    reply_to = f"gateway-{socket.gethostname()}-{uuid.uuid4().hex[:12]}"
    gateway = Gateway(node, advertised_versions(upstream.versions), reply_to, options.limits, options.on_answer)
    server = GatewayServer(gateway, _coordinator(options, reply_to), options.upstream,
                           status_interval_s=options.status_interval_s)
    listening = await asyncio.start_server(server.client_connected, sock=listener)
    try:
        await server.start(listening)
        log.info("gateway on %s:%d (node %d) for upstream %s:%d, engine %s, reply_to %s",
                 advertised, port, node.node_id, *options.upstream, options.engine, reply_to)
        if on_ready is not None:
            on_ready(server, node)
        await stop.wait()
    finally:
        await server.stop()
        listening.close()
        with contextlib.suppress(Exception):
            await asyncio.wait_for(listening.wait_closed(), 2)
    return server


class BackgroundGateway:
    """A gateway on its own event loop in a daemon thread: `with BackgroundGateway(options) as g: g.address`."""

    def __init__(self, options: GatewayOptions, startup_timeout_s: float = 30.0) -> None:
        self.options = options
        self.startup_timeout_s = startup_timeout_s
        self.server: GatewayServer | None = None
        self.node: Node | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._stop: asyncio.Event | None = None
        self._ready = threading.Event()
        self._error: BaseException | None = None
        self._thread = threading.Thread(target=self._run, name="kafka-gateway", daemon=True)

    @property
    def address(self) -> str:
        """`host:port` for clients' bootstrap.servers."""
        if self.node is None:
            raise RuntimeError("the gateway is not running")
        return f"{self.node.host}:{self.node.port}"

    def _run(self) -> None:
        async def main() -> None:
            self._loop = asyncio.get_running_loop()
            self._stop = asyncio.Event()

            def ready(server: GatewayServer, node: Node) -> None:
                self.server, self.node = server, node
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


def loopback_gateway(bootstrap_servers: str, engine: str, settings: Mapping[str, Any],
                     on_answer: AnswerObserver | None = None) -> BackgroundGateway:
    """A gateway (not started yet) on a free loopback port in front of `bootstrap_servers`, without status
    lines: what tests, demos, chaos runs and benches put between their consumer processes and a coordinator.
    `engine` is "local" (an in-process engine configured by `settings`) or "topics" (the job `settings`
    describe); `on_answer` watches what the gateway answers."""
    return BackgroundGateway(GatewayOptions(listen=("127.0.0.1", 0), upstream=host_port(bootstrap_servers),
                                            engine=engine, settings=settings, status_interval_s=0,
                                            on_answer=on_answer))
