"""The gateway's protocol logic, sans I/O: bytes and answers in, actions out (the way h11 works).

Theory of operation. The shell owns sockets, the clock and the coordinator; it tells a `Gateway` what
happened (a client connected or sent bytes, the upstream broker sent bytes, the coordinator answered,
time passed) and carries out the actions it gets back: bytes to a client, bytes to the upstream
connection that belongs to a client connection, an envelope to the coordinator, a connection to close.

Per client connection, as a Kafka broker does:
- frames are size-checked as they arrive, then decoded one at a time: header, then body (a large body on a
  worker thread of the shell's, `Decode`, while the connection waits);
- each request goes through the connection's chain of units (`chain.py`: port mapping, and what a
  listener adds, such as authentication); what passes them is routed: a group API to the coordinator,
  any other to the upstream node of the connection's port;
- every request gets a slot in a queue and responses leave in request order, whatever order they are
  ready in (a proxied Fetch may finish before an earlier JoinGroup);
- while a group request is with the coordinator the channel is muted: later requests wait unread, so a
  client's group requests reach the coordinator one at a time and in order;
- what one connection costs is bounded whatever it sends: no more bytes are read from it (`reading` is
  False, until a `ResumeReading`) while it is muted, has requests unread, or has `max_in_flight_requests`
  requests unanswered, and a frame's size is checked before any of it is kept;
- a bad frame, an API the gateway does not serve, or a version outside the advertised range closes that
  connection (`CloseClient` with the reason) and nothing else, once the requests before it are answered (a
  broker reads a connection's next request only after answering the previous one); a unit's decision closes
  it as the unit says;
- an answer that does not fit its response (Kafka's writer would refuse it) is answered UNKNOWN_SERVER_ERROR
  in the API's error shape, and the connection goes on;
- whatever else goes wrong while serving one connection (a bug) closes that connection, logged, and nothing
  else: no failure while serving one connection escapes into another's.
Group requests become envelopes with the gateway's own correlation ids (unique in this incarnation, which
is `reply_to`); a request naming many groups becomes one envelope per group, at most
`max_envelopes_in_flight` of them with the coordinator at a time (the next sent as one is answered), each
group's answer encoded as it comes unless a unit rewrites the answer, so neither the coordinator's queue nor a
step of the event loop grows with the request, and what it holds is about the size of its answer on the wire.
A request not answered within its bound is answered COORDINATOR_NOT_AVAILABLE (for every group not answered
yet), and an answer that comes after that, or after its connection closed, is dropped and counted.
Every response is reported to `on_response` as it leaves (the metrics): its API, its answer's error code and
when its request's frame was read.
"""

from __future__ import annotations

import heapq
import itertools
import logging
import struct
from collections import Counter, deque
from collections.abc import Callable, Iterable, Iterator, Mapping
from contextlib import contextmanager
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
    encode_items,
    encode_response,
    encode_response_around,
    message_to_body,
    peek_header,
)
from .envelopes import API_NAMES, answer_list, group_entries, is_split_by_group, merge_answers, split_request
from .errors import GatewayError, MalformedFrame, UnencodableAnswer, UnsupportedRequest, UpstreamError
from .frames import DEFAULT_MAX_FRAME_BYTES, SIZE_BYTES, FrameSplitter, frame

log = logging.getLogger(__name__)
UNKNOWN_SERVER_ERROR = -1
# The client's own fault: its earlier requests are answered, then its connection closed. Other errors (the
# upstream broke, a unit's decision) close at once.
_REQUEST_ERRORS = (MalformedFrame, UnsupportedRequest)
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


@dataclass(frozen=True, slots=True)
class ResumeReading:
    """Read from this client connection again (it was not `reading`)."""

    connection: int


@dataclass(frozen=True, slots=True)
class Decode:
    """Decode this request's body off the event loop (`decode_off_loop`), then hand it back with `decoded`: a
    frame this large would hold every other connection up while it is decoded."""

    connection: int
    request: Request


def decode_off_loop(request: Request) -> Request | GatewayError:
    """What a worker thread does with a `Decode`: the request with its body decoded, or why it does not decode."""
    try:
        request.body()
    except GatewayError as exc:
        return exc
    return request


Action = ToClient | ToUpstream | ToCoordinator | CloseClient | ResumeReading | Decode


@dataclass(frozen=True, slots=True)
class Answered:
    """A client's group request the coordinator has answered (or that timed out), as the client gets it: the
    envelope bodies it became (`parts`) and the response body (for a request split by group whose answer no
    unit rewrites, its top-level fields: each group's entry was encoded as its answer came)."""

    api_key: ApiKey
    version: int
    parts: list[dict[str, Any]]
    body: dict[str, Any]


AnswerObserver = Callable[[Answered], None]
# Told of every response as it leaves for its client: the listener, the API, the answer's error code
# (`answer_error_code`; `unknown` for a proxied answer passed on undecoded) and when its request's frame was read (ms).
ResponseObserver = Callable[[str, str, str, int], None]
UNDECODED = "unknown"


def answer_error_code(body: Mapping[str, Any]) -> str:
    """An answer's error code as its metrics count it: the top-level code when not 0, else its first non-zero item
    code (a partition's, a group's, a member's...), else `0`."""
    top = body.get("error_code")
    if isinstance(top, int) and top != 0:
        return str(top)
    return str(next(_item_errors(body), 0))


def _item_errors(value: Any) -> Iterator[int]:
    if isinstance(value, Mapping):
        code = value.get("error_code")
        if isinstance(code, int) and code != 0:
            yield code
        for item in value.values():
            if isinstance(item, list | Mapping):
                yield from _item_errors(item)
    elif isinstance(value, list):
        for item in value:
            yield from _item_errors(item)


@dataclass(frozen=True, slots=True)
class Limits:
    """The bounds the gateway keeps, per connection and per coordinator request.

    `coordinator_timeout_ms` must stay below the clients' request timeouts (kafka-python 30 s, librdkafka
    60 s). A JoinGroup may legitimately be parked up to its rebalance timeout, or a new group's initial
    rebalance delay if that is longer (Kafka's InitialDelayedJoin: the delay, extended up to the rebalance
    timeout); it waits that plus `join_grace_ms`, the time the coordinator takes to answer once its timer is due.
    """

    max_frame_bytes: int = DEFAULT_MAX_FRAME_BYTES
    # Requests read from one connection and not answered yet. Kafka's broker holds one (it mutes a connection
    # until its answer is sent); proxied requests are pipelined to the upstream as clients pipeline them.
    max_in_flight_requests: int = 100
    # Envelopes of one connection's group request with the coordinator at a time (it names several groups).
    max_envelopes_in_flight: int = 100
    coordinator_timeout_ms: int = 25_000
    join_grace_ms: int = 2_000
    initial_rebalance_delay_ms: int = 3_000  # the coordinator's group.initial.rebalance.delay.ms
    # A request frame this large is decoded off the event loop: kafka.protocol reads a frame of many small fields
    # at 1-2 MB/s, so a 1 MiB one holds the loop for a good part of a second (coordinator_lab.large_frame).
    decode_off_loop_bytes: int = 1 << 20

    def __post_init__(self) -> None:
        if self.max_frame_bytes < 1 or self.max_in_flight_requests < 1 or self.max_envelopes_in_flight < 1:
            raise ValueError("frame and in-flight limits must be positive")
        if self.coordinator_timeout_ms < 1 or self.join_grace_ms < 0 or self.initial_rebalance_delay_ms < 0:
            raise ValueError("coordinator_timeout_ms must be positive, join_grace_ms and initial_rebalance_delay_ms "
                             "not negative")


@dataclass(slots=True)
class _Slot:
    """A request's place in its connection's response order; `response` once known."""

    correlation_id: int
    response: bytes | None = None
    close_after: bool = False  # the connection closes once this response is sent
    api: str = ""
    read_ms: int = 0  # when its frame was read
    error_code: str = UNDECODED  # the answer's (`answer_error_code`), once the gateway has decoded or built it


@dataclass(slots=True)
class _UpstreamSlot(_Slot):
    api_key: int = 0
    version: int = 0
    trail: Trail = field(default_factory=Trail)  # the units that read or rewrite the answer


@dataclass(slots=True)
class _CoordinatorSlot(_Slot):
    """A group request: its parts (one per envelope) go to the coordinator in order, a window at a time."""

    api_key: ApiKey = ApiKey.JoinGroup
    version: int = 0
    parts: list[dict[str, Any]] = field(default_factory=list)
    trail: Trail = field(default_factory=Trail)
    # Split by group with no unit to see the answer: each part's per-group entries (`groups`, `results`), encoded
    # as they come.
    # Otherwise each part's answer (None: none in time), merged once all are in.
    piecewise: bool = False
    answers: list[dict[str, Any] | None] = field(default_factory=list)
    entries: list[tuple[int, bytes]] = field(default_factory=list)
    unencodable: UnencodableAnswer | None = None  # an entry that did not fit: the whole request gets the error
    client_id: str | None = None
    received_ms: int = 0
    sent: int = 0  # parts sent so far
    answered: int = 0  # parts answered or given up
    in_flight: dict[int, int] = field(default_factory=dict)  # envelope id -> part index, awaiting its answer

    @property
    def done(self) -> bool:
        return self.answered == len(self.parts)


@dataclass(slots=True)
class _Frame:
    """A request frame read and not handled yet; `decoded` once decoded off the event loop (`Decode`)."""

    payload: bytes
    received_ms: int
    decoded: Request | GatewayError | None = None


@dataclass(slots=True)
class _Connection:
    id: int
    client_host: str
    listener: str
    splitter: FrameSplitter
    chain: Chain
    versions: VersionTable  # what ApiVersions offers on this connection, and what it may send
    closing: bool = False  # an answer that closes the connection is queued: nothing more is read
    failure: GatewayError | None = None  # a unit refused an answer that came from the coordinator
    refused: GatewayError | None = None  # a bad request: read nothing more, close once the slots are answered
    paused: bool = False  # not `reading` since the last time it was served
    decoding: bool = False  # its next frame is being decoded off the event loop
    unread: deque[_Frame] = field(default_factory=deque)
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
                 limits: Limits | None = None, on_answer: AnswerObserver | None = None,
                 on_response: ResponseObserver | None = None) -> None:
        """`port`: where a connection comes in unless the shell names another port (a listener's bootstrap
        port); `upstream_versions`: the upstream's ApiVersions table; `on_response`: the metrics' hook."""
        self.port = port
        self.upstream_versions = dict(upstream_versions)
        self.reply_to = reply_to
        self.limits = limits or Limits()
        self.on_answer = on_answer  # told of every answered group request (tools that watch the gateway)
        self.on_response = on_response
        self.counters: Counter[str] = Counter()
        # The latest coordinator round trips per API (ms), as the client sees them (a JoinGroup's includes
        # the time it was parked).
        self.latencies_ms: dict[str, deque[int]] = {}
        self._connections: dict[int, _Connection] = {}
        self._next_connection = 0
        self._next_envelope_id = 0
        # envelope id -> (connection id, slot), while its answer is awaited
        self._awaiting: dict[int, tuple[int, _CoordinatorSlot]] = {}
        # (deadline ms, sequence, connection id, slot) of every group request, pruned once it is done
        self._deadlines: list[tuple[int, int, int, _CoordinatorSlot]] = []
        self._deadline_sequence = 0
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
        connection = _Connection(context.connection, client_host, port.listener,
                                 FrameSplitter(self.limits.max_frame_bytes), chain, versions)
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
        if connection is None or connection.refused is not None:
            return []
        actions: list[Action] = []
        with self._confined(connection, actions):
            frames = connection.splitter.feed(data)
            self.counters["frames"] += len(frames)
            connection.unread.extend(_Frame(payload, now_ms) for payload in frames)
            self._serve(connection, now_ms, actions)
        return actions

    def receive_upstream(self, connection_id: int, data: bytes, now_ms: int) -> list[Action]:
        """Bytes from the upstream connection of a client connection (responses, in request order)."""
        connection = self._connections.get(connection_id)
        if connection is None:
            return []
        actions: list[Action] = []
        with self._confined(connection, actions):
            self._upstream_bytes(connection, memoryview(data), actions)
            self._serve(connection, now_ms, actions)
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

    def decoded(self, connection_id: int, outcome: Request | GatewayError, now_ms: int) -> list[Action]:
        """A `Decode`'s outcome (`decode_off_loop`): the connection goes on with that request."""
        connection = self._connections.get(connection_id)
        if connection is None:
            return []
        connection.decoding = False
        actions: list[Action] = []
        with self._confined(connection, actions):
            if connection.unread:
                connection.unread[0].decoded = outcome
            self._serve(connection, now_ms, actions)
        return actions

    def receive_answers(self, answers: Iterable[Mapping[str, Any]], now_ms: int) -> list[Action]:
        """Response envelopes from the coordinator; those for other gateways, already answered requests or
        closed connections are dropped."""
        received: dict[int, tuple[int, _CoordinatorSlot, list[tuple[int, dict[str, Any] | None]]]] = {}
        for answer in answers:
            key = response_key(answer)
            if key is None or key[0] != self.reply_to:
                continue
            awaited = self._awaiting.pop(key[1], None)
            if awaited is None:
                self.counters["late_answers_dropped"] += 1
                continue
            connection_id, slot = awaited
            index = slot.in_flight.pop(key[1])
            if connection_id not in self._connections:
                self.counters["answers_for_closed_connections"] += 1
                continue
            body = answer.get(BODY)
            received.setdefault(id(slot), (connection_id, slot, []))[2].append(
                (index, dict(body) if isinstance(body, Mapping) else {}))
        return self._progress(list(received.values()), now_ms)

    def expire(self, now_ms: int) -> list[Action]:
        """Answers COORDINATOR_NOT_AVAILABLE for every envelope whose bound has passed."""
        expired: list[tuple[int, _CoordinatorSlot, list[tuple[int, dict[str, Any] | None]]]] = []
        while self._deadlines and self._deadlines[0][0] <= now_ms:
            _, _, connection_id, slot = heapq.heappop(self._deadlines)
            if slot.done:
                continue
            for envelope_id in slot.in_flight:
                del self._awaiting[envelope_id]
            unanswered = [*slot.in_flight.values(), *range(slot.sent, len(slot.parts))]
            self.counters["coordinator_timeouts"] += len(unanswered)
            slot.in_flight.clear()
            slot.sent = len(slot.parts)
            if connection_id in self._connections:
                expired.append((connection_id, slot, [(index, None) for index in unanswered]))
            else:
                slot.answered = len(slot.parts)
        return self._progress(expired, now_ms)

    def next_deadline(self) -> int | None:
        """When `expire` next has something to do (ms), or None."""
        while self._deadlines and self._deadlines[0][3].done:
            heapq.heappop(self._deadlines)
        return self._deadlines[0][0] if self._deadlines else None

    def reading(self, connection_id: int) -> bool:
        """Whether to read more of this connection's bytes now; once False, until a ResumeReading for it."""
        connection = self._connections.get(connection_id)
        return connection is not None and not connection.paused

    @property
    def connections(self) -> int:
        """Open client connections."""
        return len(self._connections)

    @property
    def in_flight(self) -> int:
        """Envelopes sent to the coordinator and not yet answered."""
        return len(self._awaiting)

    # ---- per-connection logic --------------------------------------------------------------------------

    def _progress(self, progressed: list[tuple[int, _CoordinatorSlot, list[tuple[int, dict[str, Any] | None]]]],
                now_ms: int) -> list[Action]:
        """Group requests with parts newly answered (None: given up): the next parts go to the coordinator; those
        whose every part is answered get their responses, and their connections go on, each on its own."""
        actions: list[Action] = []
        touched: dict[int, _Connection] = {}
        for connection_id, slot, answered in progressed:
            connection = self._connections.get(connection_id)
            if connection is None:
                continue
            with self._confined(connection, actions):
                for index, answer in answered:
                    self._record(slot, index, answer)
                if not slot.done:
                    self._send_parts(connection, slot, actions)
                else:
                    self._complete(connection, slot, now_ms)
                    touched[connection_id] = connection
        for connection_id, connection in touched.items():
            if connection_id in self._connections:
                with self._confined(connection, actions):
                    self._serve(connection, now_ms, actions)
        return actions

    @contextmanager
    def _confined(self, connection: _Connection, actions: list[Action]) -> Iterator[None]:
        """Whatever goes wrong while serving `connection` closes that connection and nothing else."""
        try:
            yield
        except GatewayError as exc:
            self._fail(connection, exc, actions)
        except Exception as exc:  # a bug: logged with its traceback, confined to its connection
            self.counters["crashes"] += 1
            log.exception("serving connection %d from %s failed; closing it", connection.id, connection.client_host)
            self._close_now(connection, f"gateway error: {exc!r}", actions)

    def _serve(self, connection: _Connection, now_ms: int, actions: list[Action]) -> None:
        """Handles unread requests until the channel is muted, an answer that closes the connection is queued
        or the in-flight limit is reached, sending what is ready, in order; then says whether to read more. A
        connection that refused a bad request closes once nothing before it is left to answer."""
        limit = self.limits.max_in_flight_requests
        while True:
            while (connection.muted_by is None and connection.unread and len(connection.slots) < limit
                   and not connection.closing):
                if self._decodes_off_loop(connection, actions):
                    break
                unread = connection.unread.popleft()
                queued = len(connection.slots)
                self._dispatch(connection, unread, now_ms, actions)
                for slot in itertools.islice(connection.slots, queued, None):
                    slot.read_ms = unread.received_ms
            if (not self._flush(connection, actions) or connection.id not in self._connections
                    or connection.muted_by is not None or not connection.unread):
                break
        if connection.id not in self._connections:
            return
        if connection.refused is not None and not connection.slots:
            self._close_now(connection, f"{type(connection.refused).__name__}: {connection.refused}", actions)
            return
        paused = (connection.closing or connection.refused is not None or connection.muted_by is not None
                  or bool(connection.unread) or len(connection.slots) >= limit)
        if connection.paused and not paused:
            actions.append(ResumeReading(connection.id))
        connection.paused = paused

    def _flush(self, connection: _Connection, actions: list[Action]) -> bool:
        """Sends the responses that are ready and first in line, closing the connection after one that says so;
        whether there were any."""
        if connection.failure is not None:
            raise connection.failure
        ready: list[bytes] = []
        last: _Slot | None = None
        while connection.slots and connection.slots[0].response is not None:
            last = connection.slots.popleft()
            ready.append(last.response)  # type: ignore[arg-type]
            self._sent(connection, last)
            if last.close_after:
                break
        if ready:
            actions.append(ToClient(connection.id, b"".join(ready)))
        if last is not None and last.close_after:
            self.close(connection.id)
            actions.append(CloseClient(connection.id, "closed after its answer"))
        return bool(ready)

    def _sent(self, connection: _Connection, slot: _Slot) -> None:
        if self.on_response is not None:
            self.on_response(connection.listener, slot.api, slot.error_code, slot.read_ms)

    def _fail(self, connection: _Connection, error: GatewayError, actions: list[Action]) -> None:
        """A bad request: read nothing more, answer what came before it, then close; anything else: close now."""
        self.counters[f"closed_{type(error).__name__}"] += 1
        if isinstance(error, _REQUEST_ERRORS) and connection.failure is None:
            connection.refused = error
            connection.paused = True
            connection.unread.clear()
            self._flush(connection, actions)
            if connection.slots or connection.id not in self._connections:
                return
        if connection.id in self._connections:
            self._close_now(connection, f"{type(error).__name__}: {error}", actions)

    def _close_now(self, connection: _Connection, reason: str, actions: list[Action]) -> None:
        self.close(connection.id)
        actions.append(CloseClient(connection.id, reason))

    def _decodes_off_loop(self, connection: _Connection, actions: list[Action]) -> bool:
        """Whether the next frame waits to be decoded off the event loop: a large one of an API the connection
        may send (a bad one fails at once, as it would on the loop) is handed to the shell (`Decode`) once."""
        unread = connection.unread[0]
        if unread.decoded is not None or len(unread.payload) < self.limits.decode_off_loop_bytes:
            return False
        if not connection.decoding:
            try:
                header = peek_header(unread.payload)
                supported = connection.versions.get(ApiKey(header.api_key))
            except (GatewayError, ValueError):
                return False
            if supported is None or not supported[0] <= header.api_version <= supported[1]:
                return False
            connection.decoding = True
            actions.append(Decode(connection.id, Request(header, unread.payload)))
        return True

    def _dispatch(self, connection: _Connection, unread: _Frame, now_ms: int, actions: list[Action]) -> None:
        if isinstance(unread.decoded, GatewayError):
            raise unread.decoded
        payload = unread.payload
        header = peek_header(payload) if unread.decoded is None else unread.decoded.header
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
        request = unread.decoded or Request(header, payload)
        outcome, trail = connection.chain.request(request)
        if isinstance(outcome, Answer):
            self.counters["requests_local"] += 1
            self._answer(connection, request, outcome, trail)
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
        except (ValueError, TypeError, KeyError, UnencodableAnswer) as exc:
            raise UnitFailed(f"a unit's {request.api_key.name} answer does not encode: {exc!r}") from None
        connection.slots.append(_Slot(correlation_id, response, close_after=answer.close_after,
                                      api=request.api_key.name, error_code=answer_error_code(body)))
        connection.closing = connection.closing or answer.close_after

    def _to_upstream(self, connection: _Connection, request: Request, actions: list[Action], trail: Trail) -> None:
        self.counters["requests_proxied"] += 1
        api_key, version = request.api_key, request.version
        expects_answer = True
        if api_key == ApiKey.Produce:
            # acks=0: no answer. Read from the body when it was decoded already (off the loop, `Decode`).
            expects_answer = (request.body().get("acks") != 0 if request.decoded else
                              bool(decode_request(request_class(api_key), request.payload, version).expect_response()))
        actions.append(ToUpstream(connection.id, frame(request.payload)))
        if expects_answer:
            slot = _UpstreamSlot(request.header.correlation_id, api=api_key.name, api_key=api_key, version=version,
                                 trail=trail)
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
            self._sent(connection, connection.slots.popleft())  # already sent, byte by byte
        elif slot.trail:
            message_class = response_class(ApiKey(slot.api_key))
            try:
                answer = decode_response(message_class, bytes(current.kept[SIZE_BYTES:]), slot.version)
            except MalformedFrame as exc:
                raise UpstreamError(f"upstream {message_class.__name__}: {exc}") from None
            body = Chain.response(slot.trail, message_to_body(answer, slot.version))
            slot.error_code = answer_error_code(body)
            try:
                slot.response = encode_response(body_to_message(message_class, slot.version, body),
                                                slot.correlation_id)
            except (ValueError, TypeError, KeyError, UnencodableAnswer) as exc:
                raise UnitFailed(f"the rewritten {message_class.__name__} does not encode: {exc!r}") from None
        else:
            slot.response = bytes(current.kept)

    def _to_coordinator(self, connection: _Connection, request: Request, now_ms: int, actions: list[Action],
                        trail: Trail) -> None:
        self.counters["requests_coordinator"] += 1
        api_key, version, client_id = request.api_key, request.version, request.header.client_id
        parts = split_request(api_key, version, request.body())
        piecewise = is_split_by_group(api_key, version) and not trail
        slot = _CoordinatorSlot(request.header.correlation_id, api=api_key.name, error_code="0", api_key=api_key,
                                version=version, parts=parts, trail=trail, piecewise=piecewise, client_id=client_id,
                                received_ms=now_ms)
        if piecewise:
            slot.entries = [(0, b"")] * len(parts)
        else:
            slot.answers = [None] * len(parts)
        connection.slots.append(slot)
        if not parts:
            self._complete(connection, slot, now_ms)
            return
        self._deadline_sequence += 1
        heapq.heappush(self._deadlines, (now_ms + self._bound_ms(api_key, version, parts[0]),
                                         self._deadline_sequence, connection.id, slot))
        self._send_parts(connection, slot, actions)
        connection.muted_by = slot

    def _send_parts(self, connection: _Connection, slot: _CoordinatorSlot, actions: list[Action]) -> None:
        """Sends the request's next parts, up to the window; each is stamped with the request's receipt time."""
        while slot.sent < len(slot.parts) and len(slot.in_flight) < self.limits.max_envelopes_in_flight:
            envelope_id = self._envelope_id()
            slot.in_flight[envelope_id] = slot.sent
            self._awaiting[envelope_id] = (connection.id, slot)
            actions.append(ToCoordinator(request_envelope(
                API_NAMES[slot.api_key], slot.parts[slot.sent], version=slot.version, correlation_id=envelope_id,
                client_id=slot.client_id or "", client_host="/" + connection.client_host, reply_to=self.reply_to,
                timestamp_ms=slot.received_ms)))
            slot.sent += 1

    def _bound_ms(self, api_key: ApiKey, version: int, body: Mapping[str, Any]) -> int:
        """How long the coordinator may take: a JoinGroup is parked up to its rebalance timeout (v0: the
        session timeout) or the initial rebalance delay, whichever is longer, then answered within the grace;
        every other request gets the fixed bound."""
        if api_key != ApiKey.JoinGroup:
            return self.limits.coordinator_timeout_ms
        waits = body.get("rebalance_timeout_ms") if version >= 1 else body.get("session_timeout_ms")
        if not isinstance(waits, int):
            return self.limits.coordinator_timeout_ms
        return max(waits, self.limits.initial_rebalance_delay_ms) + self.limits.join_grace_ms

    def _envelope_id(self) -> int:
        self._next_envelope_id = self._next_envelope_id % INT32_MAX + 1
        return self._next_envelope_id

    def _record(self, slot: _CoordinatorSlot, index: int, answer: dict[str, Any] | None) -> None:
        """Part `index`'s answer (None: given up); a request answered piecewise has it encoded at once."""
        slot.answered += 1
        if not slot.piecewise:
            slot.answers[index] = answer
            return
        entries = group_entries(slot.api_key, slot.version, slot.parts[index], answer)
        if slot.error_code == "0":
            slot.error_code = answer_error_code({"groups": entries})
        try:
            slot.entries[index] = encode_items(response_class(slot.api_key), slot.version, answer_list(slot.api_key),
                                               entries)
        except UnencodableAnswer as exc:
            slot.unencodable = exc

    def _complete(self, connection: _Connection, slot: _CoordinatorSlot, now_ms: int) -> None:
        """Every part is answered (or timed out): the slot gets its response and the channel opens."""
        latencies = self.latencies_ms.setdefault(slot.api_key.name, deque(maxlen=LATENCY_SAMPLES))
        latencies.append(max(0, now_ms - slot.received_ms))
        body = {} if slot.piecewise else merge_answers(slot.api_key, slot.version, slot.parts, slot.answers)
        error_code = body.get("error_code")
        if isinstance(error_code, int) and error_code != 0:
            self.counters[f"{slot.api_key.name}_error_{error_code}"] += 1
        if self.on_answer is not None:
            self.on_answer(Answered(slot.api_key, slot.version, slot.parts, body))
        if connection.muted_by is slot:
            connection.muted_by = None
        try:
            body = Chain.response(slot.trail, body)
        except GatewayError as exc:
            connection.failure = exc
        try:
            if slot.unencodable is not None:
                raise slot.unencodable
            if not slot.piecewise:
                slot.error_code = answer_error_code(body)
            slot.response = self._encode_piecewise(slot) if slot.piecewise else self._encode(slot, body)
        except UnencodableAnswer as exc:
            slot.error_code = str(UNKNOWN_SERVER_ERROR)
            # As Kafka's broker answers a request whose handling failed: UNKNOWN_SERVER_ERROR, in the API's shape
            # (built from the request's own fields, which fit since they were read).
            self.counters["unencodable_answers"] += 1
            log.warning("the %s v%d answer on connection %d does not fit the wire (%s): answering "
                        "UNKNOWN_SERVER_ERROR", slot.api_key.name, slot.version, connection.id, exc)
            error = {"error_code": UNKNOWN_SERVER_ERROR}
            slot.response = self._encode(slot, merge_answers(slot.api_key, slot.version, slot.parts,
                                                             [error] * len(slot.parts)))

    @staticmethod
    def _encode(slot: _CoordinatorSlot, body: Mapping[str, Any]) -> bytes:
        try:
            message = body_to_message(response_class(slot.api_key), slot.version, body)
        except (ValueError, TypeError, KeyError) as exc:
            raise UnencodableAnswer(f"{exc!r}") from None
        return encode_response(message, slot.correlation_id)

    @staticmethod
    def _encode_piecewise(slot: _CoordinatorSlot) -> bytes:
        """The response of a request split by group, around its groups' entries encoded as they came."""
        return encode_response_around(response_class(slot.api_key), slot.version, {}, answer_list(slot.api_key),
                                      sum(count for count, _ in slot.entries),
                                      b"".join(items for _, items in slot.entries), slot.correlation_id)
