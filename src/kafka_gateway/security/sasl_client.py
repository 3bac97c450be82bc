"""The gateway's own login to the upstream cluster: its service credentials over SaslHandshake v1 and
SaslAuthenticate (PLAIN, SCRAM-SHA-256, SCRAM-SHA-512 through scramp), sans I/O, plus the small asyncio driver
that opens an upstream connection with TLS and SASL as configured.

The credentials come as Kafka clients take them, `sasl.jaas.config` (`...PlainLoginModule required
username="svc" password="...";` or `...scram.ScramLoginModule required ...`), from the `upstream.` keys, which the
environment may set (PROTOCOL.md section 11), so the service password need not be on disk.
"""

from __future__ import annotations

import asyncio
import re
import ssl
from dataclasses import dataclass, field
from typing import Any, Final

import scramp
from kafka.protocol.sasl import (
    SaslAuthenticateRequest,
    SaslAuthenticateResponse,
    SaslHandshakeRequest,
    SaslHandshakeResponse,
)

from ..codec import decode_response
from ..frames import FrameSplitter

_JAAS: Final = re.compile(r"^\s*(?P<module>[\w.$]+)\s+required\s*(?P<options>.*?)\s*;?\s*$", re.DOTALL)
_OPTION: Final = re.compile(r'(\w+)\s*=\s*"((?:[^"\\]|\\.)*)"')
_MODULES: Final = {"PLAIN": "PlainLoginModule", "SCRAM-SHA-256": "ScramLoginModule",
                   "SCRAM-SHA-512": "ScramLoginModule"}
CLIENT_ID: Final = "coordinator-gateway"


class UpstreamAuthenticationError(ConnectionError):
    """The upstream cluster refused the gateway's credentials (or its SASL answers made no sense)."""


@dataclass(frozen=True)
class ServiceCredentials:
    """The gateway's login to the upstream cluster."""

    mechanism: str
    username: str
    password: str = field(repr=False)

    @classmethod
    def from_jaas(cls, mechanism: str, jaas_config: str) -> ServiceCredentials:
        """Reads `sasl.jaas.config`; ValueError naming what is wrong (never the password)."""
        if mechanism not in _MODULES:
            raise ValueError(f"upstream.sasl.mechanism: expected one of {', '.join(_MODULES)}, got {mechanism!r}")
        match = _JAAS.match(jaas_config)
        if match is None or not match["module"].endswith(_MODULES[mechanism]):
            raise ValueError(f"upstream.sasl.jaas.config: expected '...{_MODULES[mechanism]} required "
                             f'username="..." password="...";\' for {mechanism}')
        options = {key: re.sub(r"\\(.)", r"\1", value) for key, value in _OPTION.findall(match["options"])}
        if not options.get("username") or not options.get("password"):
            raise ValueError("upstream.sasl.jaas.config: username and password are required")
        return cls(mechanism, options["username"], options["password"])


class SaslLogin:
    """The request frames of one login and the checks of their answers: `next_request()` gives the next framed
    request (None once logged in), `receive(payload)` takes the answer to it."""

    def __init__(self, credentials: ServiceCredentials) -> None:
        self.credentials = credentials
        self._step = 0
        self._scram = (None if credentials.mechanism == "PLAIN" else
                       scramp.ScramClient([credentials.mechanism], credentials.username, credentials.password))
        self._token: bytes | None = None
        self.done = False

    def next_request(self) -> bytes | None:
        if self.done:
            return None
        self._step += 1
        if self._step == 1:
            message: Any = SaslHandshakeRequest[1](mechanism=self.credentials.mechanism)
        else:
            message = SaslAuthenticateRequest[1](auth_bytes=self._next_token())
        message.with_header(correlation_id=self._step, client_id=CLIENT_ID)
        return bytes(message.encode(header=True, framed=True))

    def _next_token(self) -> bytes:
        credentials = self.credentials
        if self._scram is None:
            return f"\x00{credentials.username}\x00{credentials.password}".encode()
        if self._step == 2:
            return str(self._scram.get_client_first()).encode()
        return str(self._scram.get_client_final()).encode()

    def receive(self, payload: bytes) -> None:
        """Checks the answer to the last request; UpstreamAuthenticationError when it refuses the login."""
        mechanism = self.credentials.mechanism
        if self._step == 1:
            handshake = decode_response(SaslHandshakeResponse, payload, 1)
            if handshake.error_code != 0:
                raise UpstreamAuthenticationError(
                    f"the upstream does not accept SASL mechanism {mechanism} (error {handshake.error_code}; "
                    f"it offers {', '.join(handshake.mechanisms or [])})")
            return
        answer = decode_response(SaslAuthenticateResponse, payload, 1)
        if answer.error_code != 0:
            raise UpstreamAuthenticationError(f"the upstream refused the gateway's {mechanism} login as "
                                              f"{self.credentials.username!r}: {answer.error_message}")
        token = bytes(answer.auth_bytes).decode("utf-8", "replace")
        try:
            if self._scram is None:
                self.done = True
            elif self._step == 2:
                self._scram.set_server_first(token)
            else:
                self._scram.set_server_final(token)  # the upstream proves it knows the credential
                self.done = True
        except scramp.ScramException as exc:
            raise UpstreamAuthenticationError(f"the upstream's SCRAM answer does not check out: {exc}") from None


@dataclass(frozen=True)
class UpstreamSecurity:
    """How the gateway reaches the upstream cluster: `upstream.security.protocol` and what it needs."""

    protocol: str = "PLAINTEXT"
    tls: ssl.SSLContext | None = None
    credentials: ServiceCredentials | None = None


async def open_upstream(host: str, port: int, security: UpstreamSecurity, limit: int = 1 << 16,
                        timeout_s: float = 10.0) -> tuple[asyncio.StreamReader, asyncio.StreamWriter]:
    """A connection to an upstream broker, TLS-wrapped and logged in as configured, ready for proxied requests."""
    async with asyncio.timeout(timeout_s):
        reader, writer = await asyncio.open_connection(host, port, limit=limit, ssl=security.tls,
                                                       server_hostname=host if security.tls else None)
        if security.credentials is None:
            return reader, writer
        try:
            login = SaslLogin(security.credentials)
            splitter = FrameSplitter(1 << 20)
            while (request := login.next_request()) is not None:
                writer.write(request)
                frames: list[bytes] = []
                while not frames:
                    data = await reader.read(1 << 16)
                    if not data:
                        raise UpstreamAuthenticationError("the upstream closed the connection during SASL login")
                    frames = splitter.feed(data)
                login.receive(frames[0])
        except BaseException:
            writer.close()
            raise
    return reader, writer
