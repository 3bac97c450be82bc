"""One connection's SASL login, byte for byte, against an independent SCRAM client (scramp) and PLAIN tokens."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
import scramp
from hypothesis import given, settings
from hypothesis import strategies as st
from kafka.protocol.metadata import api_versions, metadata
from kafka.protocol.sasl import (
    SaslAuthenticateRequest,
    SaslAuthenticateResponse,
    SaslHandshakeRequest,
    SaslHandshakeResponse,
)

from kafka_gateway.codec import body_to_message, encode_response, message_to_body
from kafka_gateway.security.credentials import ScramMechanism, Users, make_credential
from kafka_gateway.security.sasl_server import PassOn, Refuse, Reply, SaslServerSession, failure_message

ALL = ["PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512"]
USERS = (Users({})
         .with_credential("alice", ScramMechanism.SCRAM_SHA_256, make_credential(ScramMechanism.SCRAM_SHA_256, "a-pw"))
         .with_credential("alice", ScramMechanism.SCRAM_SHA_512, make_credential(ScramMechanism.SCRAM_SHA_512, "a-pw"))
         .with_credential("bob", ScramMechanism.SCRAM_SHA_256, make_credential(ScramMechanism.SCRAM_SHA_256, "b-pw")))


def payload(message_class: Any, version: int, **fields: Any) -> tuple[int, int, Callable[[], dict[str, Any]]]:
    """A request as the gateway hands it over: API key, version, and its body as the codec decodes it."""
    message = message_class[version](**fields)
    message.with_header(correlation_id=7, client_id="test")
    decoded = message_class.decode(bytes(message.encode(header=True)), version=version, header=True)
    return message_class.API_KEY, version, lambda: message_to_body(decoded, version)


def answer(step: Any, message_class: Any, version: int) -> Any:
    """The reply as the client reads it: the body encoded as a response at the request's version and decoded."""
    assert isinstance(step, Reply)
    encoded = encode_response(body_to_message(message_class, version, step.body), 7)
    return message_class.decode(encoded[4:], version=version, header=True)


def session(enabled: list[str] = ALL) -> SaslServerSession:
    return SaslServerSession(enabled, lambda: USERS)


def handshake(server: SaslServerSession, mechanism: str) -> Reply:
    step = server.receive(*payload(SaslHandshakeRequest, 1, mechanism=mechanism))
    assert isinstance(step, Reply)
    return step


def authenticate(server: SaslServerSession, token: bytes, version: int = 2) -> Any:
    return server.receive(*payload(SaslAuthenticateRequest, version, auth_bytes=token))


@pytest.mark.parametrize("mechanism", ["SCRAM-SHA-256", "SCRAM-SHA-512"])
def test_scram_login_succeeds_and_the_server_proves_it_knows_the_key(mechanism: str) -> None:
    server = session()
    assert isinstance(server.receive(*payload(api_versions.ApiVersionsRequest, 3, client_software_name="t",
                                             client_software_version="1")), PassOn)
    assert answer(handshake(server, mechanism), SaslHandshakeResponse, 1).error_code == 0
    client = scramp.ScramClient([mechanism], "alice", "a-pw")
    first = authenticate(server, client.get_client_first().encode())
    server_first = answer(first, SaslAuthenticateResponse, 2)
    assert server_first.error_code == 0 and first.login is None and not server.authenticated
    client.set_server_first(bytes(server_first.auth_bytes).decode())
    final = authenticate(server, client.get_client_final().encode())
    server_final = answer(final, SaslAuthenticateResponse, 2)
    assert (server_final.error_code, server_final.session_lifetime_ms, final.close) == (0, 0, False)
    client.set_server_final(bytes(server_final.auth_bytes).decode())  # raises unless the signature is right
    assert final.login == (mechanism, True)
    assert server.authenticated and server.principal == "User:alice"
    assert isinstance(server.receive(*payload(metadata.MetadataRequest, 1, topics=[])), PassOn)


@pytest.mark.parametrize("user, password", [("alice", "wrong"), ("nobody", "a-pw"), ("bob", "a-pw")])
def test_scram_bad_credentials_get_kafkas_one_answer_and_close(user: str, password: str) -> None:
    server = session()
    handshake(server, "SCRAM-SHA-256")
    client = scramp.ScramClient(["SCRAM-SHA-256"], user, password)
    step = authenticate(server, client.get_client_first().encode(), 1)
    if user == "nobody":  # refused at once, as Kafka's ScramSaslServer does for an unknown user
        failed = step
    else:
        client.set_server_first(bytes(answer(step, SaslAuthenticateResponse, 1).auth_bytes).decode())
        failed = authenticate(server, client.get_client_final().encode(), 1)
    decoded = answer(failed, SaslAuthenticateResponse, 1)
    assert (decoded.error_code, decoded.error_message) == (58, failure_message("SCRAM-SHA-256"))
    assert failed.close and failed.login == ("SCRAM-SHA-256", False)
    assert not server.authenticated and server.principal is None
    assert isinstance(server.receive(*payload(metadata.MetadataRequest, 1, topics=[])), Refuse)


def test_scram_sha_512_login_needs_a_sha_512_credential() -> None:
    server = session()
    handshake(server, "SCRAM-SHA-512")
    client = scramp.ScramClient(["SCRAM-SHA-512"], "bob", "b-pw")  # bob has SHA-256 only
    failed = answer(authenticate(server, client.get_client_first().encode()), SaslAuthenticateResponse, 2)
    assert failed.error_code == 58


@pytest.mark.parametrize("token, principal", [
    (b"\x00alice\x00a-pw", "User:alice"),
    (b"alice\x00alice\x00a-pw", "User:alice"),
    (b"\x00bob\x00b-pw", "User:bob"),  # checked against SCRAM-SHA-256, bob's only credential
])
def test_plain_login_is_checked_against_the_scram_credential(token: bytes, principal: str) -> None:
    server = session()
    handshake(server, "PLAIN")
    step = authenticate(server, token, 0)
    assert answer(step, SaslAuthenticateResponse, 0).error_code == 0
    assert server.principal == principal and step.login == ("PLAIN", True)


@pytest.mark.parametrize("token", [b"\x00alice\x00wrong", b"\x00nobody\x00a-pw", b"bob\x00alice\x00a-pw",
                                   b"\x00alice\x00", b"\x00\x00a-pw", b"alice", b"\xff\x00\xfe\x00x"])
def test_plain_bad_tokens_fail(token: bytes) -> None:
    server = session()
    handshake(server, "PLAIN")
    step = authenticate(server, token)
    decoded = answer(step, SaslAuthenticateResponse, 2)
    assert (decoded.error_code, decoded.error_message, step.close) == (58, failure_message("PLAIN"), True)


def test_a_mechanism_not_enabled_is_refused_with_the_enabled_list_then_close() -> None:
    server = session(["SCRAM-SHA-512"])
    step = handshake(server, "PLAIN")
    decoded = answer(step, SaslHandshakeResponse, 1)
    assert (decoded.error_code, list(decoded.mechanisms), step.close) == (33, ["SCRAM-SHA-512"], True)


@pytest.mark.parametrize("first", [
    payload(metadata.MetadataRequest, 1, topics=[]),          # any other API before authentication
    payload(SaslAuthenticateRequest, 1, auth_bytes=b"x"),    # tokens before the handshake
    payload(SaslHandshakeRequest, 0, mechanism="PLAIN"),     # v0's raw tokens are not served
])
def test_requests_out_of_turn_close_without_an_answer(first: bytes) -> None:
    assert isinstance(session().receive(*first), Refuse)


def test_after_login_sasl_requests_are_illegal_state_and_nothing_closes() -> None:
    server = session()
    handshake(server, "PLAIN")
    authenticate(server, b"\x00alice\x00a-pw")
    again = handshake(server, "PLAIN")
    assert answer(again, SaslHandshakeResponse, 1).error_code == 34 and not again.close
    assert answer(authenticate(server, b"x"), SaslAuthenticateResponse, 2).error_code == 34


def test_the_users_file_is_read_at_login_time() -> None:
    current = [Users({})]
    server = SaslServerSession(ALL, lambda: current[0])
    current[0] = USERS
    handshake(server, "PLAIN")
    assert answer(authenticate(server, b"\x00alice\x00a-pw"), SaslAuthenticateResponse, 2).error_code == 0


def test_unknown_mechanisms_cannot_be_enabled() -> None:
    with pytest.raises(ValueError, match="GSSAPI"):
        SaslServerSession(["GSSAPI"], lambda: USERS)


@settings(max_examples=200, deadline=None)
@given(st.sampled_from(["SCRAM-SHA-256", "SCRAM-SHA-512"]), st.lists(st.binary(max_size=80), min_size=1, max_size=3))
def test_any_scram_tokens_fail_cleanly(mechanism: str, tokens: list[bytes]) -> None:
    server = session()
    handshake(server, mechanism)
    for token in tokens:
        step = authenticate(server, token)
        if isinstance(step, Reply) and step.close:
            assert answer(step, SaslAuthenticateResponse, 2).error_code == 58
            return
        assert isinstance(step, Reply)
    assert not server.authenticated
