"""The security units of a listener's chain (`chain.py`), and what they share for the whole gateway.

A SASL listener's connections get `SaslAuthentication` first: until the client has logged in it answers the SASL
requests and closes the connection on anything else; afterwards it sets the connection's principal and lets every
request through. With an ACL file, `AclAuthorization` comes next: it checks each request as the connection's
principal from its peer address (`authorization.py`), answers what is denied, and merges the denied parts into
the answers of what it forwarded. `Security` holds the users and ACL files (re-read by `reload`, which the shell
calls every `coordinator.gateway.reload.interval.ms`) and the counts the metrics report.
"""

from __future__ import annotations

import ssl
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, ClassVar, Final

from kafka.protocol.api_key import ApiKey

from ..apis import MESSAGE_CLASSES, response_class
from ..chain import Answer, CloseConnection, ConnectionContext, Request, Unit, UnitFactory
from .acl import Authorizer, Operation, ResourceType, read_acls
from .authorization import VERSION_CAPS, Authorization
from .credentials import Users, read_users
from .reload import WatchedFile
from .sasl_client import UpstreamSecurity
from .sasl_server import SASL_VERSIONS, PassOn, Refuse, SaslServerSession
from .settings import AccessSettings, ListenerSecurity, Lookup, access_settings, listener_security, upstream_security

# A connection holds at most this many forwarded requests whose answers await a merge (Kafka's clients pipeline
# a handful; the gateway's own bound on queued requests is larger, so this never refuses a well-behaved client).
MAX_PENDING_MERGES: Final = 1000


@dataclass
class Security:
    """The gateway-wide part of security: the files as they are now, and what happened (for the metrics)."""

    access: AccessSettings
    users_file: WatchedFile[Users] | None = None
    acl_file: WatchedFile[Authorizer] | None = None
    authentication_successes: Counter[tuple[str, str]] = field(default_factory=Counter)  # (listener, mechanism)
    authentication_failures: Counter[tuple[str, str]] = field(default_factory=Counter)
    authorization_denials: Counter[tuple[str, str, str]] = field(default_factory=Counter)  # (api, type, operation)

    @classmethod
    def load(cls, access: AccessSettings) -> Security:
        """Reads the files (OSError or ValueError when one cannot be read: the gateway must not start)."""
        def authorizer(path: Any) -> Authorizer:
            return Authorizer(read_acls(path), access.super_users, access.allow_everyone_if_no_acl_found)

        return cls(access,
                   WatchedFile(access.users_file, read_users) if access.users_file else None,
                   WatchedFile(access.acl_file, authorizer) if access.acl_file else None)

    def reload(self) -> None:
        """Re-reads the files that changed (a bad file keeps the previous content and logs why)."""
        for watched in (self.users_file, self.acl_file):
            if watched is not None:
                watched.check()

    def users(self) -> Users:
        return self.users_file.value if self.users_file is not None else Users({})

    def authorizer(self) -> Authorizer:
        assert self.acl_file is not None
        return self.acl_file.value

    def units(self, listener: ListenerSecurity) -> list[UnitFactory]:
        """The units a connection of `listener` gets, in order, before the gateway's own."""
        factories: list[UnitFactory] = []
        if listener.sasl:
            def sasl(context: ConnectionContext) -> Unit:
                return SaslAuthentication(context, self, listener.sasl_mechanisms)
            factories.append(sasl)
        if self.acl_file is not None:
            def acls(context: ConnectionContext) -> Unit:
                return AclAuthorization(context, self)
            factories.append(acls)
        return factories


class SaslAuthentication(Unit):
    """One connection's SASL login (`sasl_server.py`) in the chain."""

    serves: ClassVar[Mapping[ApiKey, tuple[int, int]]] = {ApiKey(key): v for key, v in SASL_VERSIONS.items()}

    def __init__(self, context: ConnectionContext, security: Security, mechanisms: tuple[str, ...]) -> None:
        self.context = context
        self.security = security
        self.session = SaslServerSession(mechanisms, security.users)

    def on_request(self, request: Request) -> Request | Answer:
        step = self.session.receive(request.api_key, request.version, request.body)
        if isinstance(step, PassOn):
            return request
        if isinstance(step, Refuse):
            raise CloseConnection(f"SASL: {step.reason}")
        if step.login is not None:
            mechanism, succeeded = step.login
            counts = self.security.authentication_successes if succeeded else self.security.authentication_failures
            counts[(self.context.listener, mechanism)] += 1
        if self.session.principal is not None:
            self.context.principal = self.session.principal
        return Answer(step.body, close_after=step.close)


class AclAuthorization(Unit):
    """One connection's authorization (`authorization.py`) in the chain: answers what is denied, forwards the
    rest, and asks for the answers it must complete (denied parts merged in, hidden groups and topics left out).
    Fetch and Produce stay below the versions that name topics only by id."""

    caps: ClassVar[Mapping[ApiKey, int]] = VERSION_CAPS
    # Answers always read: ListGroups, Metadata and OffsetFetch may list what the client may not see.
    FILTERED: ClassVar[frozenset[ApiKey]] = frozenset({ApiKey.ListGroups, ApiKey.Metadata, ApiKey.OffsetFetch})

    def __init__(self, context: ConnectionContext, security: Security) -> None:
        self.context = context
        self.security = security
        self._pending: dict[int, Any] = {}  # correlation id -> what the answer's merge needs

    def _denied(self, api_key: ApiKey, resource_type: ResourceType, operation: Operation) -> None:
        self.security.authorization_denials[(api_key.name, resource_type.name, operation.name)] += 1

    def _authorization(self) -> Authorization:
        return Authorization(self.context.principal, self.context.client_host, self.security.authorizer,
                             self._denied)

    def on_request(self, request: Request) -> Request | Answer:
        if request.api_key in (ApiKey.SaslHandshake, ApiKey.SaslAuthenticate):
            return request
        if request.api_key not in MESSAGE_CLASSES:  # a proxied API the gateway does not decode: super users only
            if self._authorization().is_super_user():
                return request
            self._denied(request.api_key, ResourceType.CLUSTER, Operation.ALL)
            raise CloseConnection(f"{request.api_key.name} is for super users, and {self.context.principal} is not")
        decision = self._authorization().authorize_request(request.api_key, request.version, request.body())
        if decision.forward is None:
            assert decision.answer is not None
            if not set(decision.answer) <= set(response_class(request.api_key).fields):
                # An answer with no place for the denial (a top-level error the API does not have): Kafka closes.
                raise CloseConnection(f"{request.api_key.name} denied to {self.context.principal}")
            return Answer(decision.answer)
        if decision.pending is not None or request.api_key in self.FILTERED:
            if len(self._pending) >= MAX_PENDING_MERGES:
                raise CloseConnection(f"more than {MAX_PENDING_MERGES} answers awaiting authorization merges")
            self._pending[request.header.correlation_id] = decision.pending
        return request if decision.forward == request.body() else request.with_body(decision.forward)

    def wants_response(self, request: Request) -> bool:
        return request.header.correlation_id in self._pending

    def on_response(self, request: Request, body: dict[str, Any]) -> dict[str, Any]:
        pending = self._pending.pop(request.header.correlation_id, None)
        return self._authorization().complete_answer(request.api_key, request.version, body, pending)


@dataclass(frozen=True)
class GatewaySecurity:
    """Everything security adds to a configured gateway: each listener's TLS context and units, the upstream
    connection's TLS and login, and the files re-read while it runs (None when nothing reads them)."""

    listeners: Mapping[str, ListenerSecurity]
    upstream: UpstreamSecurity
    security: Security | None

    def units(self, listener: str) -> list[UnitFactory]:
        return [] if self.security is None else self.security.units(self.listeners[listener])

    def tls(self, listener: str) -> ssl.SSLContext | None:
        return self.listeners[listener].tls


def gateway_security(lookup: Lookup, listener_names: Sequence[str]) -> GatewaySecurity:
    """Reads the security keys for these listeners and loads the users and ACL files; ValueError naming the key
    (or the file) at fault."""
    listeners = {name: listener_security(name, lookup) for name in listener_names}
    access = access_settings(lookup, sasl_listeners=any(listener.sasl for listener in listeners.values()))
    try:
        security = Security.load(access) if access.users_file or access.acl_file else None
    except (OSError, ValueError) as exc:
        raise ValueError(f"coordinator.gateway.users.file / acl.file: {exc}") from None
    return GatewaySecurity(listeners, upstream_security(lookup), security)
