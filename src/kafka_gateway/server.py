"""The asyncio shell around `Gateway`: sockets, the wall clock, the upstream broker and the coordinator.

It only moves bytes and answers: a client's bytes go to `Gateway.receive`, the upstream's to
`receive_upstream`, the coordinator's answers to `receive_answers`, and a timer calls `expire`; the
actions that come back are carried out here. Each client connection has its own upstream connection,
opened on its first proxied request to the upstream node its port stands for (the bootstrap port's: a
bootstrap server), so the upstream answers it in order. A connection's bytes are read only while the gateway
is `reading` it (the socket's buffers then hold the rest, and TCP slows the client down). Any failure while
serving one connection closes that connection, with a log line, and nothing else. A request frame too large to
decode without holding up the others is decoded on a worker thread, `max_decodes` at a time (`Decode`). The
metrics (`metrics.py`) are told of connections as they open and close.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections import Counter
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any

from .chain import Port
from .coordinators import Coordinator
from .gateway import (
    Action,
    CloseClient,
    Decode,
    Gateway,
    ResumeReading,
    ToClient,
    ToCoordinator,
    ToUpstream,
    decode_off_loop,
)
from .metrics import GatewayMetrics
from .port_mapping import UpstreamDirectory
from .security.sasl_client import UpstreamSecurity, open_upstream
from .security.tls import certificate_principal
from .security.units import Security

log = logging.getLogger(__name__)
READ_BYTES = 65536
UPSTREAM_READ_BYTES = 1 << 20  # Fetch answers are large: fewer, larger reads


def wall_clock_ms() -> int:
    return time.time_ns() // 1_000_000


@dataclass(eq=False)
class _Session:
    """One client connection and, once needed, its upstream connection."""

    id: int
    peer: str
    writer: asyncio.StreamWriter
    node_id: int | None  # the upstream node of the connection's port; None: the bootstrap port
    listener: str
    upstream_writer: asyncio.StreamWriter | None = None
    upstream_pending: list[bytes] = field(default_factory=list)
    upstream_task: asyncio.Task[None] | None = None
    resume: asyncio.Event = field(default_factory=asyncio.Event)  # set when the gateway reads it again
    closed: bool = False


class GatewayServer:
    """Serves one `Gateway` on a listening socket until `stop`."""

    def __init__(self, gateway: Gateway, coordinator: Coordinator, upstream: UpstreamDirectory,
                 clock_ms: Callable[[], int] = wall_clock_ms, status_interval_s: float = 10.0,
                 idle_timeout_s: float = 600.0, upstream_security: UpstreamSecurity | None = None,
                 security: Security | None = None, metrics: GatewayMetrics | None = None, max_decodes: int = 2) -> None:
        self.gateway = gateway
        self.coordinator = coordinator
        self.upstream = upstream
        self.upstream_security = upstream_security or UpstreamSecurity()
        self.security = security
        self.clock_ms = clock_ms
        self.status_interval_s = status_interval_s
        self.idle_timeout_s = idle_timeout_s
        self._sessions: dict[int, _Session] = {}
        self._tasks: set[asyncio.Task[Any]] = set()
        self._timer_wakeup = asyncio.Event()
        self._servers: list[asyncio.Server] = []
        self.crashes = 0
        self.metrics = metrics or GatewayMetrics()
        self.metrics_url: str | None = None  # where Prometheus scrapes them, when served
        self.metrics.watch(gateway.counters, security, coordinator)
        self._decodes = asyncio.Semaphore(max_decodes)
        self.upstream_opened: Counter[tuple[str, int]] = Counter()  # upstream connections, per address

    async def start(self, servers: list[asyncio.Server] | None = None) -> None:
        """Starts the coordinator, the timer and the status line; serves the connections of `servers`
        (created with `client_connected` as their callback)."""
        await self.coordinator.start(self._on_answers)
        self._servers = list(servers or [])
        self._spawn(self._timer(), "gateway-timer")
        if self.status_interval_s > 0:
            self._spawn(self._status(), "gateway-status")
        if self.security is not None:
            self._spawn(self._reload(self.security), "gateway-reload")

    async def stop(self) -> None:
        """Stops accepting, closes every connection, stops the coordinator."""
        for server in self._servers:
            server.close()
        for session in list(self._sessions.values()):
            self._close(session, "gateway shutting down")
        for task in list(self._tasks):
            task.cancel()
        await asyncio.gather(*self._tasks, return_exceptions=True)
        await self.coordinator.stop()
        log.info("gateway stopped: %s", self.status_line())

    def status_line(self) -> str:
        counters = self.gateway.counters
        closes = sum(v for k, v in counters.items() if k.startswith("closed_"))
        return (f"connections={self.gateway.connections} opened={counters['connections_opened']} "
                f"frames={counters['frames']} proxied={counters['requests_proxied']} "
                f"local={counters['requests_local']} group={counters['requests_coordinator']} "
                f"in_flight={self.gateway.in_flight} timeouts={counters['coordinator_timeouts']} "
                f"late_dropped={counters['late_answers_dropped']} bad_connections_closed={closes} "
                f"unmapped_nodes={counters['closed_UnmappedNode']} "
                f"crashes={self.crashes} {self.coordinator.status()}")

    # ---- client connections ----------------------------------------------------------------------------

    async def client_connected(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter,
                               port: Port | None = None) -> None:
        """Serves one client connection that came in on `port` (default: the gateway's bootstrap port)."""
        peer = writer.get_extra_info("peername")
        host = str(peer[0]) if isinstance(peer, tuple) else str(peer)
        port = port or self.gateway.port
        # A verified client certificate (an SSL listener with ssl.client.auth) names the principal.
        principal = certificate_principal(writer.get_extra_info("peercert"))
        session = _Session(self.gateway.open(host, port, principal), host, writer, port.node_id, port.listener)
        self._sessions[session.id] = session
        self.metrics.connections.labels(port.listener).inc()
        try:
            while not session.closed:
                if not self.gateway.reading(session.id):
                    session.resume.clear()
                    await session.resume.wait()
                    continue
                data = await asyncio.wait_for(reader.read(READ_BYTES), self.idle_timeout_s)
                if not data:
                    break
                self._perform(self.gateway.receive(session.id, data, self.clock_ms()))
                await writer.drain()
                if session.upstream_writer is not None:
                    await session.upstream_writer.drain()
        except (ConnectionError, TimeoutError, OSError) as exc:
            log.debug("connection %d from %s: %r", session.id, host, exc)
        except Exception:
            # The last barrier: a bug met by one connection's bytes closes that connection only.
            self.crashes += 1
            log.exception("connection %d from %s failed; closing it", session.id, host)
        finally:
            self._close(session, None)

    def _close(self, session: _Session, reason: str | None) -> None:
        if session.closed:
            return
        session.closed = True
        session.resume.set()
        self.metrics.connections.labels(session.listener).dec()
        if reason is not None:
            log.warning("closing connection %d from %s: %s", session.id, session.peer, reason)
        self.gateway.close(session.id)
        self._sessions.pop(session.id, None)
        session.writer.close()
        if session.upstream_writer is not None:
            session.upstream_writer.close()
        if session.upstream_task is not None:
            session.upstream_task.cancel()

    def _perform(self, actions: Iterable[Action]) -> None:
        for action in actions:
            if isinstance(action, ToClient):
                session = self._sessions.get(action.connection)
                if session is not None and not session.closed:
                    session.writer.write(action.data)
            elif isinstance(action, ToUpstream):
                session = self._sessions.get(action.connection)
                if session is not None and not session.closed:
                    self._send_upstream(session, action.data)
            elif isinstance(action, ToCoordinator):
                self.coordinator.submit(action.envelope)
                self._timer_wakeup.set()  # a new deadline
            elif isinstance(action, CloseClient):
                session = self._sessions.get(action.connection)
                if session is not None:
                    self._close(session, action.reason)
            elif isinstance(action, ResumeReading):
                session = self._sessions.get(action.connection)
                if session is not None:
                    session.resume.set()
            elif isinstance(action, Decode):
                self._spawn(self._decode(action), f"decode-{action.connection}")

    async def _decode(self, action: Decode) -> None:
        async with self._decodes:
            outcome = await asyncio.to_thread(decode_off_loop, action.request)
        self._perform(self.gateway.decoded(action.connection, outcome, self.clock_ms()))

    # ---- upstream connections --------------------------------------------------------------------------

    def _send_upstream(self, session: _Session, data: bytes) -> None:
        if session.upstream_writer is not None:
            session.upstream_writer.write(data)
            return
        session.upstream_pending.append(data)
        if session.upstream_task is None:
            session.upstream_task = self._spawn(self._upstream(session), f"upstream-{session.id}")

    async def _upstream(self, session: _Session) -> None:
        reason = "closed by the upstream broker"
        address = self.upstream.address(session.node_id)
        if address is None:
            self._perform(self.gateway.upstream_closed(
                session.id, f"node {session.node_id} is not in the upstream's latest metadata"))
            return
        # The bootstrap port's upstream is a bootstrap server: its node id when the metadata lists its address.
        node = str(session.node_id if session.node_id is not None else next(
            (node_id for node_id, known in self.upstream.nodes.items() if known == address), "bootstrap"))
        opened = False
        try:
            reader, writer = await open_upstream(*address, self.upstream_security, limit=UPSTREAM_READ_BYTES)
            self.upstream_opened[address] += 1
            self.metrics.upstream_connections.labels(node).inc()
            opened = True
            session.upstream_writer = writer
            writer.write(b"".join(session.upstream_pending))
            session.upstream_pending.clear()
            while not session.closed:
                data = await reader.read(UPSTREAM_READ_BYTES)
                if not data:
                    break
                self._perform(self.gateway.receive_upstream(session.id, data, self.clock_ms()))
                await session.writer.drain()  # a slow client holds back its upstream, no one else
        except (ConnectionError, TimeoutError, OSError) as exc:
            reason = repr(exc)
        except Exception:
            self.crashes += 1
            log.exception("upstream of connection %d failed; closing the connection", session.id)
            reason = "gateway error"
        finally:
            if opened:
                self.metrics.upstream_connections.labels(node).dec()
        if not session.closed:
            self._perform(self.gateway.upstream_closed(session.id, reason))

    # ---- the coordinator, the timer, the status line -----------------------------------------------------

    def _on_answers(self, answers: list[dict[str, Any]]) -> None:
        self._perform(self.gateway.receive_answers(answers, self.clock_ms()))

    async def _timer(self) -> None:
        while True:
            deadline = self.gateway.next_deadline()
            wait_s = 1.0 if deadline is None else max(0.0, (deadline - self.clock_ms()) / 1000)
            self._timer_wakeup.clear()
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._timer_wakeup.wait(), min(wait_s, 1.0))
            try:
                self._perform(self.gateway.expire(self.clock_ms()))
            except Exception:  # a bug: logged, and the timer goes on (no request may wait forever)
                self.crashes += 1
                log.exception("the gateway's timer failed; it goes on")

    async def _reload(self, security: Security) -> None:
        """Re-reads the users and ACL files when they change, off the event loop (a file read may block)."""
        while True:
            await asyncio.sleep(security.access.reload_interval_ms / 1000)
            try:
                await asyncio.to_thread(security.reload)
            except Exception:
                log.exception("re-reading the users and ACL files failed; keeping the previous ones")

    async def _status(self) -> None:
        while True:
            await asyncio.sleep(self.status_interval_s)
            try:
                log.info("gateway: %s", self.status_line())
            except Exception:
                log.exception("the status line failed; it goes on")

    def _spawn(self, coroutine: Any, name: str) -> asyncio.Task[Any]:
        task = asyncio.create_task(coroutine, name=name)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)
        return task
