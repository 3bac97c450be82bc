"""The gateway's protocol logic, sans I/O: bytes and answers in, actions out (the way h11 works).

Theory of operation. The shell owns sockets, the clock and the coordinator; it tells a `Gateway` what
happened (a client connected or sent bytes, the upstream broker sent bytes, the coordinator answered,
time passed) and carries out the actions it gets back: bytes to a client, bytes to the upstream
connection that belongs to a client connection, an envelope to the coordinator, a connection to close.

Per client connection, as a Kafka broker does:
- frames are size-checked as they arrive, then decoded one at a time: header, then body;
- each request goes through the connection's chain of units (`chain.py`: port mapping, and what a
  listener adds, such as authentication); what passes them is routed: a group API to the coordinator,
  any other to the upstream node of the connection's port;
- every request gets a slot in a queue and responses leave in request order, whatever order they are
  ready in (a proxied Fetch may finish before an earlier JoinGroup);
- while a group request is with the coordinator the channel is muted: later requests wait unread, so a
  client's group requests reach the coordinator one at a time and in order;
- a bad frame, an API the gateway does not serve, a version outside the advertised range, or a unit's
  decision closes that connection (`CloseClient` with the reason) and nothing else.
Group requests become envelopes with the gateway's own correlation ids (unique in this incarnation, which
is `reply_to`); an envelope not answered within its bound is answered COORDINATOR_NOT_AVAILABLE, and an
answer that comes after that, or after its connection closed, is dropped and counted.
"""

from __future__ import annotations

import heapq
import struct
from collections import Counter, deque
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from kafka.protocol.api_key import ApiKey

from coordinator_state.envelope import BODY, INT32_MAX, request_envelope, response_key

from .api_versions import VersionTable, advertised_versions, api_versions_answer
from .apis import GROUP_APIS, request_class, response_class
from .chain import ANONYMOUS, Answer, Chain, ConnectionContext, Port, Request, Trail, UnitFailed
from .codec import (
    body_to_message,
    decode_request,
    decode_response,
    encode_response,
    message_to_body,
    peek_header,
)
from .envelopes import API_NAMES, merge_answers, split_request
from .errors import GatewayError, MalformedFrame, Overloaded, UnsupportedRequest, UpstreamError
from .frames import DEFAULT_MAX_FRAME_BYTES, SIZE_BYTES, FrameSplitter, frame

_RESPONSE_HEADER = struct.Struct(">ii")  # a response frame's size, then its correlation id
LATENCY_SAMPLES = 10_000


@dataclass(frozen=True, slots=True)
class ToClient:
    """Bytes (whole framed responses) for a client connection."""

    connection: int
    data: bytes


@dataclass(frozen=True, slots=True)
class ToUpstream:
    """Bytes (a framed request) for the upstream connection that belongs to this client connection."""

    connection: int
    data: bytes


@dataclass(frozen=True, slots=True)
class ToCoordinator:
    """A request envelope for the coordinator (PROTOCOL.md section 2)."""

    envelope: dict[str, Any]


@dataclass(frozen=True, slots=True)
class CloseClient:
    """Close this client connection (and its upstream connection); the gateway has forgotten it."""

    connection: int
    reason: str


Action = ToClient | ToUpstream | ToCoordinator | CloseClient


@dataclass(frozen=True, slots=True)
class Answered:
    """A client's group request the coordinator has answered (or that timed out), as the client gets it: the
    envelope bodies it became (`parts`) and the response body."""

    api_key: ApiKey
    version: int
    parts: list[dict[str, Any]]
    body: dict[str, Any]


AnswerObserver = Callable[[Answered], None]


@dataclass(frozen=True, slots=True)
class Limits:
    """The bounds the gateway keeps, per connection and per coordinator request.

    `coordinator_timeout_ms` must stay below the clients' request timeouts (kafka-python 30 s, librdkafka
    60 s); a JoinGroup waits up to its rebalance timeout plus `join_grace_ms`, below the clients' own
    grace (librdkafka 3 s, the Java client and kafka-python 5 s).
    """

    max_frame_bytes: int = DEFAULT_MAX_FRAME_BYTES
    max_queued_requests: int = 1000
    coordinator_timeout_ms: int = 25_000
    join_grace_ms: int = 2_000

    def __post_init__(self) -> None:
        if self.max_frame_bytes < 1 or self.max_queued_requests < 1:
            raise ValueError("frame and queue limits must be positive")
        if self.coordinator_timeout_ms < 1 or self.join_grace_ms < 0:
            raise ValueError("coordinator_timeout_ms must be positive and join_grace_ms not negative")


@dataclass(slots=True)
class _Slot:
    """A request's place in its connection's response order; `response` once known."""

    correlation_id: int
    response: bytes | None = None
    close_after: bool = False  # the connection closes once this response is sent


@dataclass(slots=True)
class _UpstreamSlot(_Slot):
    api_key: int = 0
    version: int = 0
    trail: Trail = field(default_factory=Trail)  # the units that read or rewrite the answer


@dataclass(slots=True)
class _CoordinatorSlot(_Slot):
    api_key: ApiKey = ApiKey.JoinGroup
    version: int = 0
    parts: list[dict[str, Any]] = field(default_factory=list)
    answers: list[dict[str, Any] | None] = field(default_factory=list)
    envelope_ids: list[int] = field(default_factory=list)
    unanswered: int = 0
    sent_ms: int = 0
    trail: Trail = field(default_factory=Trail)


@dataclass(slots=True)
class _Connection:
    id: int
    client_host: str
    splitter: FrameSplitter
    chain: Chain
    versions: VersionTable  # what ApiVersions offers on this connection, and what it may send
    closing: bool = False  # an answer that closes the connection is queued: nothing more is read
    failure: GatewayError | None = None  # a unit refused an answer that came from the coordinator
    unread: deque[bytes] = field(default_factory=deque)
    slots: deque[_Slot] = field(default_factory=deque)
    upstream: deque[_UpstreamSlot] = field(default_factory=deque)
    muted_by: _CoordinatorSlot | None = None
    upstream_frame: _UpstreamFrame | None = None  # the upstream response being received
    upstream_header: bytearray = field(default_factory=bytearray)  # its first bytes, until size and id are in


@dataclass(slots=True)
class _UpstreamFrame:
    """An upstream response on its way: passed through as it arrives when its slot is first in line (a
    large Fetch answer costs the client no store-and-forward delay), else kept until whole."""

    slot: _UpstreamSlot
    remaining: int
    passing_through: bool
    kept: bytearray


class Gateway:
    """Every client connection's protocol state, and the coordinator requests in flight."""

    def __init__(self, port: Port, upstream_versions: Mapping[int, tuple[int, int]], reply_to: str,
                 limits: Limits | None = None, on_answer: AnswerObserver | None = None) -> None:
        """`port`: where a connection comes in unless the shell names another port (a listener's bootstrap
        port); `upstream_versions`: the upstream's ApiVersions table."""
        self.port = port
        self.upstream_versions = dict(upstream_versions)
        self.reply_to = reply_to
        self.limits = limits or Limits()
        self.on_answer = on_answer  # told of every answered group request (tools that watch the gateway)
        self.counters: Counter[str] = Counter()
        # The latest coordinator round trips per API (ms), as the client sees them (a JoinGroup's includes
        # the time it was parked).
        self.latencies_ms: dict[str, deque[int]] = {}
        self._connections: dict[int, _Connection] = {}
        self._next_connection = 0
        self._next_envelope_id = 0
        # envelope id -> (connection id, slot, part index), while its answer is awaited
        self._awaiting: dict[int, tuple[int, _CoordinatorSlot, int]] = {}
        self._deadlines: list[tuple[int, int]] = []  # (deadline ms, envelope id), lazily pruned
        self._version_tables: dict[tuple[type, ...], VersionTable] = {}  # per kind of chain

    # ---- events from the shell -------------------------------------------------------------------------

    def open(self, client_host: str, port: Port | None = None, principal: str = ANONYMOUS) -> int:
        """A client connected from `client_host` (its address) to `port` (default: the gateway's), as
        `principal` (a TLS client certificate's; else anonymous until a unit authenticates it); returns the
        connection's id."""
        port = port or self.port
        self._next_connection += 1
        context = ConnectionContext(self._next_connection, client_host, port.listener, port.node_id, principal)
        chain = Chain([make(context) for make in port.units])
        kinds = tuple(type(unit) for unit in chain.units)
        versions = self._version_tables.get(kinds)
        if versions is None:
            versions = self._version_tables[kinds] = advertised_versions(self.upstream_versions, chain.units)
        connection = _Connection(context.connection, client_host, FrameSplitter(self.limits.max_frame_bytes), chain,
                                 versions)
        self._connections[connection.id] = connection
        self.counters["connections_opened"] += 1
        return connection.id

    def close(self, connection_id: int) -> None:
        """The client's connection is gone; its unanswered requests are forgotten (late answers dropped)."""
        if self._connections.pop(connection_id, None) is not None:
            self.counters["connections_closed"] += 1

    def receive(self, connection_id: int, data: bytes, now_ms: int) -> list[Action]:
        """Bytes from a client."""
        connection = self._connections.get(connection_id)
        if connection is None:
            return []
        actions: list[Action] = []
        try:
            frames = connection.splitter.feed(data)
            self.counters["frames"] += len(frames)
            connection.unread.extend(frames)
            if len(connection.unread) > self.limits.max_queued_requests:
                raise Overloaded(f"more than {self.limits.max_queued_requests} requests queued behind a muted channel")
            self._serve(connection, now_ms, actions)
        except GatewayError as exc:
            self._fail(connection, exc, actions)
        return actions

    def receive_upstream(self, connection_id: int, data: bytes, now_ms: int) -> list[Action]:
        """Bytes from the upstream connection of a client connection (responses, in request order)."""
        connection = self._connections.get(connection_id)
        if connection is None:
            return []
        actions: list[Action] = []
        try:
            self._upstream_bytes(connection, memoryview(data), actions)
            self._serve(connection, now_ms, actions)
        except GatewayError as exc:
            self._fail(connection, exc, actions)
        return actions

    def upstream_closed(self, connection_id: int, reason: str) -> list[Action]:
        """The upstream connection of a client connection broke: the client must reconnect, as it would if
        its broker went away."""
        connection = self._connections.get(connection_id)
        if connection is None:
            return []
        actions: list[Action] = []
        self._fail(connection, UpstreamError(f"upstream connection closed: {reason}"), actions)
        return actions

    def receive_answers(self, answers: Iterable[Mapping[str, Any]], now_ms: int) -> list[Action]:
        """Response envelopes from the coordinator; those for other gateways, already answered requests or
        closed connections are dropped."""
        actions: list[Action] = []
        touched: dict[int, _Connection] = {}
        for answer in answers:
            key = response_key(answer)
            if key is None or key[0] != self.reply_to:
                continue
            awaited = self._awaiting.pop(key[1], None)
            if awaited is None:
                self.counters["late_answers_dropped"] += 1
                continue
            connection_id, slot, index = awaited
            body = answer.get(BODY)
            slot.answers[index] = dict(body) if isinstance(body, Mapping) else {}
            slot.unanswered -= 1
            connection = self._connections.get(connection_id)
            if connection is None:
                self.counters["answers_for_closed_connections"] += 1
            elif slot.unanswered == 0:
                self._complete(connection, slot, now_ms)
                touched[connection.id] = connection
        for connection in touched.values():
            self._resume(connection, now_ms, actions)
        return actions

    def expire(self, now_ms: int) -> list[Action]:
        """Answers COORDINATOR_NOT_AVAILABLE for every envelope whose bound has passed."""
        actions: list[Action] = []
        touched: dict[int, _Connection] = {}
        while self._deadlines and self._deadlines[0][0] <= now_ms:
            _, envelope_id = heapq.heappop(self._deadlines)
            awaited = self._awaiting.pop(envelope_id, None)
            if awaited is None:
                continue
            connection_id, slot, _ = awaited
            self.counters["coordinator_timeouts"] += 1
            slot.unanswered -= 1
            connection = self._connections.get(connection_id)
            if connection is not None and slot.unanswered == 0:
                self._complete(connection, slot, now_ms)
                touched[connection.id] = connection
        for connection in touched.values():
            self._resume(connection, now_ms, actions)
        return actions

    def next_deadline(self) -> int | None:
        """When `expire` next has something to do (ms), or None."""
        while self._deadlines and self._deadlines[0][1] not in self._awaiting:
            heapq.heappop(self._deadlines)
        return self._deadlines[0][0] if self._deadlines else None

    @property
    def connections(self) -> int:
        """Open client connections."""
        return len(self._connections)

    @property
    def in_flight(self) -> int:
        """Envelopes sent to the coordinator and not yet answered."""
        return len(self._awaiting)

    # ---- per-connection logic --------------------------------------------------------------------------

    def _serve(self, connection: _Connection, now_ms: int, actions: list[Action]) -> None:
        """Handles unread requests until the channel is muted, then sends what is ready, in order."""
        while connection.muted_by is None and connection.unread and not connection.closing:
            self._dispatch(connection, connection.unread.popleft(), now_ms, actions)
        self._flush(connection, actions)

    def _resume(self, connection: _Connection, now_ms: int, actions: list[Action]) -> None:
        try:
            self._serve(connection, now_ms, actions)
        except GatewayError as exc:
            self._fail(connection, exc, actions)

    def _flush(self, connection: _Connection, actions: list[Action]) -> None:
        if connection.failure is not None:
            raise connection.failure
        ready: list[bytes] = []
        last: _Slot | None = None
        while connection.slots and connection.slots[0].response is not None:
            last = connection.slots.popleft()
            ready.append(last.response)  # type: ignore[arg-type]
            if last.close_after:
                break
        if ready:
            actions.append(ToClient(connection.id, b"".join(ready)))
        if last is not None and last.close_after:
            self.close(connection.id)
            actions.append(CloseClient(connection.id, "closed after its answer"))

    def _fail(self, connection: _Connection, error: GatewayError, actions: list[Action]) -> None:
        self.counters[f"closed_{type(error).__name__}"] += 1
        self.close(connection.id)
        actions.append(CloseClient(connection.id, f"{type(error).__name__}: {error}"))

    def _dispatch(self, connection: _Connection, payload: bytes, now_ms: int, actions: list[Action]) -> None:
        header = peek_header(payload)
        try:
            api_key = ApiKey(header.api_key)
        except ValueError:
            raise UnsupportedRequest(f"unknown API key {header.api_key}") from None
        version = header.api_version
        if api_key == ApiKey.ApiVersions:
            # Answered at any version, before any unit: a client learns the supported ones from the error answer.
            self.counters["requests_local"] += 1
            self._answer(connection, Request(header, payload), api_versions_answer(version, connection.versions),
                         Trail())
            return
        supported = connection.versions.get(api_key)
        if supported is None:
            raise UnsupportedRequest(f"{api_key.name} is not served by this gateway")
        if not supported[0] <= version <= supported[1]:
            raise UnsupportedRequest(f"{api_key.name} v{version} is outside v{supported[0]}-{supported[1]}")
        outcome, trail = connection.chain.request(Request(header, payload))
        if isinstance(outcome, Answer):
            self.counters["requests_local"] += 1
            self._answer(connection, Request(header, payload), outcome, trail)
        elif api_key in GROUP_APIS:
            self._to_coordinator(connection, outcome, now_ms, actions, trail)
        else:
            self._to_upstream(connection, outcome, actions, trail)

    def _answer(self, connection: _Connection, request: Request, answer: Answer, trail: Trail) -> None:
        """A unit's answer (or the gateway's ApiVersions), through the units before it, queued in order."""
        body = Chain.response(trail, dict(answer.body))
        version = request.version if answer.version is None else answer.version
        correlation_id = request.header.correlation_id
        try:
            response = encode_response(body_to_message(response_class(request.api_key), version, body), correlation_id)
        except (ValueError, TypeError, KeyError, struct.error) as exc:
            raise UnitFailed(f"a unit's {request.api_key.name} answer does not encode: {exc!r}") from None
        connection.slots.append(_Slot(correlation_id, response, close_after=answer.close_after))
        connection.closing = connection.closing or answer.close_after

    def _to_upstream(self, connection: _Connection, request: Request, actions: list[Action], trail: Trail) -> None:
        self.counters["requests_proxied"] += 1
        api_key, version = request.api_key, request.version
        expects_answer = True
        if api_key == ApiKey.Produce:
            expects_answer = bool(decode_request(request_class(api_key), request.payload, version).expect_response())
        actions.append(ToUpstream(connection.id, frame(request.payload)))
        if expects_answer:
            slot = _UpstreamSlot(request.header.correlation_id, api_key=api_key, version=version, trail=trail)
            connection.slots.append(slot)
            connection.upstream.append(slot)

    def _upstream_bytes(self, connection: _Connection, data: memoryview, actions: list[Action]) -> None:
        """Upstream responses as they arrive: each frame's size and correlation id are checked against the
        next slot; its bytes go straight to the client when that slot is first in line and needs no rewrite."""
        position = 0
        while position < len(data):
            current = connection.upstream_frame
            if current is None:
                header = connection.upstream_header
                taken = min(_RESPONSE_HEADER.size - len(header), len(data) - position)
                header += data[position:position + taken]
                position += taken
                if len(header) < _RESPONSE_HEADER.size:
                    return
                current = connection.upstream_frame = self._upstream_frame_starts(connection, bytes(header), actions)
                header.clear()
            else:
                taken = min(current.remaining, len(data) - position)
                chunk = data[position:position + taken]
                position += taken
                current.remaining -= taken
                if current.passing_through:
                    actions.append(ToClient(connection.id, bytes(chunk)))
                else:
                    current.kept += chunk
            if current.remaining == 0:
                connection.upstream_frame = None
                self._upstream_frame_ends(connection, current)
                self._flush(connection, actions)  # so that the next answer can be first in line

    def _upstream_frame_starts(self, connection: _Connection, header: bytes,
                               actions: list[Action]) -> _UpstreamFrame:
        size, correlation_id = _RESPONSE_HEADER.unpack(header)
        if size < SIZE_BYTES:
            raise UpstreamError(f"upstream response of {size} bytes has no correlation id")
        if not connection.upstream:
            raise UpstreamError("the upstream broker answered a request that was not sent")
        slot = connection.upstream.popleft()
        if correlation_id != slot.correlation_id:
            raise UpstreamError(f"upstream answered correlation id {correlation_id}, expected {slot.correlation_id}")
        passing_through = not slot.trail and connection.slots[0] is slot
        if passing_through:
            actions.append(ToClient(connection.id, header))
        return _UpstreamFrame(slot, size - SIZE_BYTES, passing_through, bytearray(b"" if passing_through else header))

    def _upstream_frame_ends(self, connection: _Connection, current: _UpstreamFrame) -> None:
        slot = current.slot
        if current.passing_through:
            connection.slots.popleft()  # already sent, byte by byte
        elif slot.trail:
            message_class = response_class(ApiKey(slot.api_key))
            try:
                answer = decode_response(message_class, bytes(current.kept[SIZE_BYTES:]), slot.version)
            except MalformedFrame as exc:
                raise UpstreamError(f"upstream {message_class.__name__}: {exc}") from None
            body = Chain.response(slot.trail, message_to_body(answer, slot.version))
            try:
                slot.response = encode_response(body_to_message(message_class, slot.version, body),
                                                slot.correlation_id)
            except (ValueError, TypeError, KeyError, struct.error) as exc:
                raise UnitFailed(f"the rewritten {message_class.__name__} does not encode: {exc!r}") from None
        else:
            slot.response = bytes(current.kept)

    def _to_coordinator(self, connection: _Connection, request: Request, now_ms: int, actions: list[Action],
                        trail: Trail) -> None:
        self.counters["requests_coordinator"] += 1
        api_key, version, client_id = request.api_key, request.version, request.header.client_id
        parts = split_request(api_key, version, request.body())
        slot = _CoordinatorSlot(request.header.correlation_id, api_key=api_key, version=version, parts=parts,
                                answers=[None] * len(parts), unanswered=len(parts), sent_ms=now_ms, trail=trail)
        connection.slots.append(slot)
        if not parts:
            self._complete(connection, slot, now_ms)
            return
        deadline = now_ms + self._bound_ms(api_key, version, parts[0])
        for index, part in enumerate(parts):
            envelope_id = self._envelope_id()
            slot.envelope_ids.append(envelope_id)
            self._awaiting[envelope_id] = (connection.id, slot, index)
            heapq.heappush(self._deadlines, (deadline, envelope_id))
            actions.append(ToCoordinator(request_envelope(
                API_NAMES[api_key], part, version=version, correlation_id=envelope_id, client_id=client_id or "",
                client_host="/" + connection.client_host, reply_to=self.reply_to, timestamp_ms=now_ms)))
        connection.muted_by = slot

    def _bound_ms(self, api_key: ApiKey, version: int, body: Mapping[str, Any]) -> int:
        """How long the coordinator may take: a JoinGroup is parked up to its rebalance timeout (v0: the
        session timeout), every other request gets the fixed bound."""
        if api_key != ApiKey.JoinGroup:
            return self.limits.coordinator_timeout_ms
        waits = body.get("rebalance_timeout_ms") if version >= 1 else body.get("session_timeout_ms")
        return max(int(waits), 0) + self.limits.join_grace_ms if isinstance(waits, int) else \
            self.limits.coordinator_timeout_ms

    def _envelope_id(self) -> int:
        self._next_envelope_id = self._next_envelope_id % INT32_MAX + 1
        return self._next_envelope_id

    def _complete(self, connection: _Connection, slot: _CoordinatorSlot, now_ms: int) -> None:
        """Every part is answered (or timed out): the slot gets its response and the channel opens."""
        latencies = self.latencies_ms.setdefault(slot.api_key.name, deque(maxlen=LATENCY_SAMPLES))
        latencies.append(max(0, now_ms - slot.sent_ms))
        body = merge_answers(slot.api_key, slot.version, slot.parts, slot.answers)
        error_code = body.get("error_code")
        if isinstance(error_code, int) and error_code != 0:
            self.counters[f"{slot.api_key.name}_error_{error_code}"] += 1
        if self.on_answer is not None:
            self.on_answer(Answered(slot.api_key, slot.version, slot.parts, body))
        try:
            body = Chain.response(slot.trail, body)
        except GatewayError as exc:
            connection.failure = exc
        try:
            message = body_to_message(response_class(slot.api_key), slot.version, body)
            slot.response = encode_response(message, slot.correlation_id)
        except (ValueError, TypeError, KeyError) as exc:
            # A coordinator answer that does not fit the wire struct: the client gets an error, not silence.
            self.counters["unencodable_answers"] += 1
            error = {"error_code": -1, "error_message": f"coordinator answer does not encode: {exc}"}
            message = body_to_message(response_class(slot.api_key), slot.version,
                                      merge_answers(slot.api_key, slot.version, slot.parts,
                                                    [error] * len(slot.parts)))
            slot.response = encode_response(message, slot.correlation_id)
        if connection.muted_by is slot:
            connection.muted_by = None
