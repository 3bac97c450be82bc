"""The gateway's upstream login, against the gateway's own SASL server unit (byte for byte) and Kafka's JAAS syntax."""

from __future__ import annotations

import pytest
from kafka.protocol.sasl import (
    SaslAuthenticateRequest,
    SaslAuthenticateResponse,
    SaslHandshakeRequest,
    SaslHandshakeResponse,
)

from kafka_gateway.codec import body_to_message, encode_response, message_to_body, peek_header
from kafka_gateway.security.credentials import ScramMechanism, Users, make_credential
from kafka_gateway.security.sasl_client import SaslLogin, ServiceCredentials, UpstreamAuthenticationError
from kafka_gateway.security.sasl_server import Reply, SaslServerSession

USERS = (Users({})
         .with_credential("svc", ScramMechanism.SCRAM_SHA_256, make_credential(ScramMechanism.SCRAM_SHA_256, "pw"))
         .with_credential("svc", ScramMechanism.SCRAM_SHA_512, make_credential(ScramMechanism.SCRAM_SHA_512, "pw")))

request_classes = {17: SaslHandshakeRequest, 36: SaslAuthenticateRequest}
response_classes = {17: SaslHandshakeResponse, 36: SaslAuthenticateResponse}


def run_login(credentials: ServiceCredentials, enabled: list[str]) -> SaslServerSession:
    server = SaslServerSession(enabled, lambda: USERS)
    login = SaslLogin(credentials)
    while (request := login.next_request()) is not None:
        header = peek_header(request[4:])
        message = request_classes[header.api_key].decode(request[4:], version=header.api_version, header=True)
        step = server.receive(header.api_key, header.api_version, lambda m=message, v=header.api_version:
                              message_to_body(m, v))
        assert isinstance(step, Reply)
        response = response_classes[header.api_key]
        login.receive(encode_response(body_to_message(response, header.api_version, step.body),
                                      header.correlation_id)[4:])
    return server


@pytest.mark.parametrize("mechanism", ["PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512"])
def test_login_succeeds(mechanism: str) -> None:
    server = run_login(ServiceCredentials(mechanism, "svc", "pw"), ["PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512"])
    assert server.principal == "User:svc"


@pytest.mark.parametrize("mechanism", ["PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512"])
def test_a_refused_login_says_who_and_how_but_not_the_password(mechanism: str) -> None:
    with pytest.raises(UpstreamAuthenticationError, match=f"refused the gateway's {mechanism} login as 'svc'") as e:
        run_login(ServiceCredentials(mechanism, "svc", "not-the-pw"), [mechanism])
    assert "not-the-pw" not in str(e.value)


def test_a_mechanism_the_upstream_does_not_offer() -> None:
    with pytest.raises(UpstreamAuthenticationError, match=r"does not accept SASL mechanism PLAIN.*SCRAM-SHA-512"):
        run_login(ServiceCredentials("PLAIN", "svc", "pw"), ["SCRAM-SHA-512"])


@pytest.mark.parametrize("mechanism, jaas, user, password", [
    ("SCRAM-SHA-512", 'org.apache.kafka.common.security.scram.ScramLoginModule required username="svc" '
                      'password="p;w\\"x";', "svc", 'p;w"x'),
    ("PLAIN", 'org.apache.kafka.common.security.plain.PlainLoginModule required\n  username="a"\n  password="b";',
     "a", "b"),
])
def test_jaas_config(mechanism: str, jaas: str, user: str, password: str) -> None:
    assert ServiceCredentials.from_jaas(mechanism, jaas) == ServiceCredentials(mechanism, user, password)


@pytest.mark.parametrize("mechanism, jaas, message", [
    ("GSSAPI", "x required;", "upstream.sasl.mechanism"),
    ("PLAIN", 'org.apache.kafka.common.security.scram.ScramLoginModule required username="a" password="b";',
     "PlainLoginModule"),
    ("SCRAM-SHA-256", 'org.apache.kafka.common.security.scram.ScramLoginModule required username="a";',
     "username and password are required"),
])
def test_bad_jaas_config(mechanism: str, jaas: str, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        ServiceCredentials.from_jaas(mechanism, jaas)
