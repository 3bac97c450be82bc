"""The seam every unit of the gateway plugs into: what a unit gets, and what it returns.

A connection gets its own chain of units, built by its port when the client connects (Kroxylicious's
chain of filters). A request goes through the units in order; each unit returns the request (perhaps
rewritten) for the next unit, or an `Answer` that the gateway sends back in the request's place; or it
raises a `GatewayError` (such as `CloseConnection`), which closes this connection and nothing else. A
request that passes every unit is routed by the gateway: a group API to the coordinator, any other to the
upstream node of the connection's port. The answer, whoever gave it, goes back through the units that
came before, last first, each of them seeing it only for the APIs named in its `response_apis`; an
upstream answer no unit asked for is passed to the client as it arrives, without being decoded.

A unit answers at once (no unit waits on I/O: work that takes time, such as re-reading a file, happens
in the shell, which hands the unit its result); a unit that raises anything but a `GatewayError` has a
bug, and that too closes only its own connection, naming the unit.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, ClassVar, Final

from kafka.protocol.api_key import ApiKey

from .apis import request_class
from .codec import RequestHeader, body_to_message, decode_request, message_to_body
from .errors import GatewayError

ANONYMOUS: Final = "User:ANONYMOUS"


class CloseConnection(GatewayError):
    """A unit's decision to close its connection (the reason goes to the log)."""


class UnitFailed(GatewayError):
    """A unit raised something it should not have: a bug, confined to its connection."""


@dataclass(slots=True)
class ConnectionContext:
    """What the units of one connection know about it; `principal` is set by the unit that authenticates
    (TLS with a client certificate at connect time, SASL once the client has logged in)."""

    connection: int
    client_host: str
    listener: str
    # The upstream node the connection's port stands for; None on a listener's bootstrap port.
    node_id: int | None
    principal: str = ANONYMOUS


class Request:
    """A client's request: its header, its bytes as sent (header included, size prefix not), and its body
    as a JSON-like dict (the specs' field names in snake_case), decoded only when a unit asks for it."""

    __slots__ = ("_body", "header", "payload")

    def __init__(self, header: RequestHeader, payload: bytes, body: dict[str, Any] | None = None) -> None:
        self.header = header
        self.payload = payload
        self._body = body

    @property
    def api_key(self) -> ApiKey:
        return ApiKey(self.header.api_key)

    @property
    def version(self) -> int:
        return self.header.api_version

    @property
    def decoded(self) -> bool:
        """Whether the body is decoded already."""
        return self._body is not None

    def body(self) -> dict[str, Any]:
        """The decoded body (MalformedFrame when it does not decode); do not change it, use `with_body`."""
        if self._body is None:
            message = decode_request(request_class(self.api_key), self.payload, self.version)
            self._body = message_to_body(message, self.version)
        return self._body

    def with_body(self, body: Mapping[str, Any]) -> Request:
        """The same request (same header) carrying `body` instead, re-encoded."""
        message = body_to_message(request_class(self.api_key), self.version, body)
        message.with_header(correlation_id=self.header.correlation_id, client_id=self.header.client_id)
        return Request(self.header, bytes(message.encode(header=True)), dict(body))


@dataclass(frozen=True, slots=True)
class Answer:
    """A unit's answer in place of the request's: a response body at the request's version (or at
    `version`, as ApiVersions answers an unknown version at v0); `close_after`: the connection is closed
    once the answer is sent (a failed SASL login)."""

    body: Mapping[str, Any]
    version: int | None = None
    close_after: bool = False


class Unit:
    """One concern of the gateway, for one connection. Subclasses override what they need; the defaults
    pass every request on and leave every answer alone."""

    # APIs the unit answers itself, at these versions: they join the ApiVersions table of its listener.
    serves: ClassVar[Mapping[ApiKey, tuple[int, int]]] = {}
    # Forwarded APIs the unit cannot let through above these versions (they leave the ApiVersions table).
    caps: ClassVar[Mapping[ApiKey, int]] = {}
    # APIs whose answers the unit reads or rewrites in `on_response`.
    response_apis: ClassVar[frozenset[ApiKey]] = frozenset()

    def on_request(self, request: Request) -> Request | Answer:
        return request

    def wants_response(self, request: Request) -> bool:
        """Whether the unit must see the answer to `request` (as it passed it on): by default, the answers of
        the APIs in `response_apis`. A unit that rewrites only some answers says which, so that the others
        pass through undecoded."""
        return request.api_key in self.response_apis

    def on_response(self, request: Request, body: dict[str, Any]) -> dict[str, Any]:
        """`request` is the request as this unit passed it on."""
        return body


UnitFactory = Callable[[ConnectionContext], Unit]


@dataclass(frozen=True, slots=True)
class Port:
    """A listening port: its listener, the upstream node it stands for (None: the bootstrap port), and the
    units each of its connections gets, in order."""

    listener: str
    node_id: int | None
    units: Sequence[UnitFactory] = ()


@dataclass(slots=True)
class Trail:
    """The units that asked to see a request's answer, each with the request as it passed it on."""

    steps: list[tuple[Unit, Request]] = field(default_factory=list)

    def __bool__(self) -> bool:
        return bool(self.steps)


class Chain:
    """A connection's units, in order."""

    def __init__(self, units: Sequence[Unit]) -> None:
        self.units = tuple(units)

    def request(self, request: Request) -> tuple[Request | Answer, Trail]:
        """Runs `request` through the units: the request to route, or the answer a unit gave, and the trail
        its answer goes back along."""
        trail = Trail()
        for unit in self.units:
            outcome = _guarded(unit, unit.on_request, request)
            if isinstance(outcome, Answer):
                return outcome, trail
            if unit.wants_response(outcome):
                trail.steps.append((unit, outcome))
            request = outcome
        return request, trail

    @staticmethod
    def response(trail: Trail, body: dict[str, Any]) -> dict[str, Any]:
        """The answer after the units of `trail` have seen it, last first."""
        for unit, request in reversed(trail.steps):
            body = _guarded(unit, unit.on_response, request, body)
        return body


def _guarded(unit: Unit, method: Callable[..., Any], *args: Any) -> Any:
    try:
        return method(*args)
    except GatewayError:
        raise
    except Exception as exc:
        raise UnitFailed(f"{type(unit).__name__} failed: {exc!r}") from exc
