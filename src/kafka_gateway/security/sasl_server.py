"""SASL authentication of one client connection, sans I/O: requests (API, version, body) in, steps out.

Theory of operation (Kafka's `SaslServerAuthenticator` with SaslHandshake v1, PROTOCOL.md section 11). A
connection on a SASL listener starts unauthenticated; until it is authenticated only ApiVersions (passed on, so
the gateway answers it as usual), SaslHandshake v1 and SaslAuthenticate v0-2 are served, and any other request
closes the connection without an answer. SaslHandshake names a mechanism: one not enabled is answered
UNSUPPORTED_SASL_MECHANISM with the enabled list, then the connection closes. SaslAuthenticate then carries the
mechanism's tokens: PLAIN's single message, or SCRAM's client-first and client-final messages (RFC 5802, through
scramp). Whatever fails (unknown user, wrong password, a malformed token, a request out of turn) gets one answer,
SASL_AUTHENTICATION_FAILED with Kafka's message that names only the mechanism (no user enumeration), and the
connection closes after it. Once authenticated, the principal is `User:<name>`, the session lifetime is 0 (no
re-authentication, KIP-368), every request passes on, and a further SaslHandshake or SaslAuthenticate is answered
ILLEGAL_SASL_STATE as `KafkaApis` does.
"""

from __future__ import annotations

import base64
import binascii
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from enum import Enum
from typing import Any, Final, Protocol

import scramp
from kafka.protocol.api_key import ApiKey

from .credentials import ScramMechanism, Users, password_matches

PLAIN: Final = "PLAIN"
MECHANISMS: Final = (PLAIN, ScramMechanism.SCRAM_SHA_256.value, ScramMechanism.SCRAM_SHA_512.value)
# What a SASL listener adds to ApiVersions: SaslHandshake v1 only (v0's raw tokens are not served).
SASL_VERSIONS: Final[dict[int, tuple[int, int]]] = {ApiKey.SaslHandshake: (1, 1), ApiKey.SaslAuthenticate: (0, 2)}

SASL_AUTHENTICATION_FAILED: Final = 58
UNSUPPORTED_SASL_MECHANISM: Final = 33
ILLEGAL_SASL_STATE: Final = 34
ANONYMOUS: Final = "User:ANONYMOUS"


def failure_message(mechanism: str) -> str:
    """Kafka's answer to any failed login: it names the mechanism and nothing about the user."""
    return f"Authentication failed during authentication due to invalid credentials with SASL mechanism {mechanism}"


# ---- the steps a connection's request can lead to --------------------------------------------------------

@dataclass(frozen=True, slots=True)
class PassOn:
    """The request is not authentication's business: the rest of the gateway serves it."""


@dataclass(frozen=True, slots=True)
class Reply:
    """Answer the request with `body` (the response body at the request's version, byte fields base64 as in
    the codec's bodies); then close the connection if `close`. `login` tells a finished login attempt:
    (mechanism, succeeded)."""

    body: dict[str, Any]
    close: bool = False
    login: tuple[str, bool] | None = None


@dataclass(frozen=True, slots=True)
class Refuse:
    """Close the connection without an answer."""

    reason: str


SaslStep = PassOn | Reply | Refuse


class LoginFailed(Exception):
    """A token that does not authenticate; the client learns only that authentication failed."""


class _Exchange(Protocol):
    def step(self, token: bytes) -> bytes | None:
        """The server's next token, or None once the client is authenticated (no token to send)."""

    @property
    def complete(self) -> bool: ...

    @property
    def username(self) -> str: ...


class _PlainExchange:
    """RFC 4616: `[authzid] NUL authcid NUL password`, checked against the user's SCRAM credential."""

    def __init__(self, users: Users) -> None:
        self._users = users
        self.complete = False
        self.username = ""

    def step(self, token: bytes) -> bytes | None:
        try:
            authzid, username, password = token.decode("utf-8").split("\x00")
        except ValueError:
            raise LoginFailed("not a PLAIN message") from None
        stored = self._users.plain_credential(username)
        if not username or not password or stored is None or not password_matches(*stored, password):
            raise LoginFailed("invalid username or password")
        if authzid and authzid != username:
            raise LoginFailed("authorization id differs from the user name")
        self.username, self.complete = username, True
        return b""


class _ScramExchange:
    """RFC 5802 through scramp's server, with the user's stored credential."""

    def __init__(self, mechanism: ScramMechanism, users: Users) -> None:
        self._mechanism = mechanism
        self._users = users
        self._server = scramp.ScramMechanism(mechanism.value).make_server(self._credential)
        self._round = 0
        self.complete = False
        self.username = ""

    def _credential(self, username: str) -> tuple[bytes, bytes, bytes, int]:
        credential = self._users.credential(username, self._mechanism)
        if credential is None:
            raise LoginFailed("unknown user")
        self.username = username
        return credential.salt, credential.stored_key, credential.server_key, credential.iterations

    def step(self, token: bytes) -> bytes | None:
        try:
            message = token.decode("utf-8")
            self._round += 1
            if self._round == 1:
                self._server.set_client_first(message)
                return str(self._server.get_server_first()).encode("utf-8")
            if self._round == 2:
                self._server.set_client_final(message)
                final = str(self._server.get_server_final()).encode("utf-8")
                self.complete = True
                return final
        except (scramp.ScramException, UnicodeDecodeError) as exc:
            raise LoginFailed(str(exc)) from None
        raise LoginFailed("a token after the exchange finished")


def _exchange(mechanism: str, users: Users) -> _Exchange:
    if mechanism == PLAIN:
        return _PlainExchange(users)
    return _ScramExchange(ScramMechanism.named(mechanism), users)


class _State(Enum):
    HANDSHAKE = "awaiting SaslHandshake"
    AUTHENTICATE = "awaiting SaslAuthenticate"
    AUTHENTICATED = "authenticated"
    FAILED = "failed"


class SaslServerSession:
    """One client connection's authentication. `users` gives the users file as it is now (re-read when it changes)."""

    def __init__(self, enabled_mechanisms: Sequence[str], users: Callable[[], Users]) -> None:
        unknown = set(enabled_mechanisms) - set(MECHANISMS)
        if unknown or not enabled_mechanisms:
            raise ValueError(f"SASL mechanisms must be some of {', '.join(MECHANISMS)}, got {list(enabled_mechanisms)}")
        self.enabled = list(enabled_mechanisms)
        self._users = users
        self._state = _State.HANDSHAKE
        self._mechanism = ""
        self._exchange: _Exchange | None = None
        self.principal: str | None = None

    @property
    def authenticated(self) -> bool:
        return self._state is _State.AUTHENTICATED

    def receive(self, api_key: int, version: int, body: Callable[[], Mapping[str, Any]]) -> SaslStep:
        """What to do with one request; `body()` decodes its body (only SASL requests are decoded here)."""
        if self._state is _State.AUTHENTICATED:
            if api_key in SASL_VERSIONS:
                return self._illegal_state(api_key, version)
            return PassOn()
        if self._state is _State.FAILED:
            return Refuse("authentication already failed")
        if api_key == ApiKey.ApiVersions and self._state is _State.HANDSHAKE:
            return PassOn()
        if api_key == ApiKey.SaslHandshake and self._state is _State.HANDSHAKE and version == 1:
            return self._handshake(str(body()["mechanism"]))
        if api_key == ApiKey.SaslAuthenticate and self._state is _State.AUTHENTICATE and 0 <= version <= 2:
            return self._authenticate(_token(body()["auth_bytes"]))
        refusal = Refuse(f"API key {api_key} v{version} while {self._state.value}")
        self._state = _State.FAILED
        return refusal

    def _handshake(self, mechanism: str) -> SaslStep:
        enabled = mechanism in self.enabled
        body = {"error_code": 0 if enabled else UNSUPPORTED_SASL_MECHANISM, "mechanisms": list(self.enabled)}
        if not enabled:
            self._state = _State.FAILED
            return Reply(body, close=True)
        self._mechanism = mechanism
        self._exchange = _exchange(mechanism, self._users())
        self._state = _State.AUTHENTICATE
        return Reply(body)

    def _authenticate(self, token: bytes | None) -> SaslStep:
        assert self._exchange is not None
        try:
            if token is None:
                raise LoginFailed("auth_bytes is not base64")
            answer = self._exchange.step(token)
        except LoginFailed:
            self._state = _State.FAILED
            return Reply({"error_code": SASL_AUTHENTICATION_FAILED, "error_message": failure_message(self._mechanism),
                          "auth_bytes": "", "session_lifetime_ms": 0}, close=True, login=(self._mechanism, False))
        login = None
        if self._exchange.complete:
            self._state = _State.AUTHENTICATED
            self.principal = f"User:{self._exchange.username}"
            login = (self._mechanism, True)
        return Reply({"error_code": 0, "error_message": None, "auth_bytes": base64.b64encode(answer or b"").decode(),
                      "session_lifetime_ms": 0}, login=login)

    @staticmethod
    def _illegal_state(api_key: int, version: int) -> SaslStep:
        if not SASL_VERSIONS[api_key][0] <= version <= SASL_VERSIONS[api_key][1]:
            return Refuse(f"API key {api_key} v{version} is not served")
        if api_key == ApiKey.SaslHandshake:
            return Reply({"error_code": ILLEGAL_SASL_STATE, "mechanisms": []})
        return Reply({"error_code": ILLEGAL_SASL_STATE, "auth_bytes": "", "session_lifetime_ms": 0,
                      "error_message": "SaslAuthenticate request received after successful authentication"})


def _token(value: Any) -> bytes | None:
    """SaslAuthenticate's auth_bytes as the codec's bodies carry them (base64); None when they are not."""
    try:
        return base64.b64decode(value, validate=True) if isinstance(value, str) else None
    except binascii.Error:
        return None
