"""`coordinator gateway --config FILE`: Kafka's keys in a properties file (and the environment) make a SASL_SSL
gateway that a real client logs in to; an unknown key or a bad value stops it before it listens."""

from __future__ import annotations

import argparse
import asyncio
from pathlib import Path

import pytest
import trustme
from kafka import KafkaAdminClient

from coordinator_cli.main import main
from kafka_gateway.cli import add_arguments, options_from
from kafka_gateway.runner import BackgroundGateway, host_port, probe_upstream
from kafka_gateway.security.credentials import ScramMechanism, Users, make_credential, write_users


def gateway_args(*argv: str) -> argparse.Namespace:
    parser = argparse.ArgumentParser()
    add_arguments(parser)
    return parser.parse_args(["--engine", "local", "--status-interval", "0", *argv])


@pytest.mark.kafka
def test_a_sasl_ssl_gateway_from_a_config_file(kafka_bootstrap: str, tmp_path: Path,
                                               monkeypatch: pytest.MonkeyPatch) -> None:
    node_id = asyncio.run(probe_upstream([host_port(kafka_bootstrap)])).nodes.popitem()[0]  # the embedded broker's
    ca = trustme.CA()
    cert = ca.issue_cert("127.0.0.1")
    (tmp_path / "keystore.pem").write_bytes(cert.private_key_pem.bytes() + cert.cert_chain_pems[0].bytes())
    ca.cert_pem.write_to_path(str(tmp_path / "ca.pem"))
    write_users(tmp_path / "users", Users({}).with_credential(
        "alice", ScramMechanism.SCRAM_SHA_512, make_credential(ScramMechanism.SCRAM_SHA_512, "pw")))
    (tmp_path / "gateway.properties").write_text(
        "# a SASL_SSL gateway\n"
        "listeners = SASL_SSL://127.0.0.1:0\n"
        "listener.security.protocol.map = SASL_SSL:SASL_SSL\n"
        "sasl.enabled.mechanisms = SCRAM-SHA-512\n"
        f"coordinator.gateway.broker.id.lowest = {node_id}\ncoordinator.gateway.broker.ports = 1\n"
        f"coordinator.gateway.users.file = {tmp_path / 'users'}\n")
    # the keystore from the environment, as a deployment may give it
    monkeypatch.setenv("COORDINATOR_GATEWAY__LISTENER_NAME_SASL_SSL_SSL_KEYSTORE_LOCATION",
                       str(tmp_path / "keystore.pem"))
    options = options_from(gateway_args("--config", str(tmp_path / "gateway.properties"),
                                        "--bootstrap-servers", kafka_bootstrap), {})
    with BackgroundGateway(options) as running:
        admin = KafkaAdminClient(bootstrap_servers=running.address, security_protocol="SASL_SSL",
                                 sasl_mechanism="SCRAM-SHA-512", sasl_plain_username="alice",
                                 sasl_plain_password="pw", ssl_cafile=str(tmp_path / "ca.pem"))
        try:
            assert admin.list_groups() == []
        finally:
            admin.close()


@pytest.mark.parametrize("text, message", [
    ("listeners=PLAINTEXT://127.0.0.1:0\nsasl.mechanism.inter.broker.protocol=PLAIN\n",
     "sasl.mechanism.inter.broker.protocol: not a key the gateway knows"),
    ("listener.name.plaintext.ssl.keystore.locations=x\n", "listener.name.plaintext.ssl.keystore.locations"),
    ("listeners=SSL://127.0.0.1:0\n", "ssl.keystore.location: listener SSL uses SSL and needs a keystore"),
    ("listeners=SASL_PLAINTEXT://127.0.0.1:0\n", "coordinator.gateway.users.file: a listener uses SASL"),
    ("super.users=alice\n", "principalType:principalName"),
    ("coordinator.metrics.listen=9464\n", "coordinator.metrics.listen: expected HOST:PORT"),
])
def test_a_bad_config_exits_2_naming_the_key(tmp_path: Path, capsys: pytest.CaptureFixture[str], text: str,
                                            message: str) -> None:
    config = tmp_path / "gateway.properties"
    config.write_text(text)
    assert main(["gateway", "--config", str(config), "--bootstrap-servers", "127.0.0.1:1"]) == 2
    assert message in capsys.readouterr().err


def test_the_metrics_address_comes_from_the_config_key_unless_the_flag_gives_one(tmp_path: Path) -> None:
    config = tmp_path / "gateway.properties"
    config.write_text("listeners=PLAINTEXT://127.0.0.1:0\ncoordinator.metrics.listen=127.0.0.1:9464\n")
    given = ("--config", str(config), "--bootstrap-servers", "127.0.0.1:1")
    from_file = options_from(gateway_args(*given), {})
    from_flag = options_from(gateway_args(*given, "--metrics-listen", "[::1]:0"), {})
    assert (from_file.metrics_listen, from_flag.metrics_listen) == (("127.0.0.1", 9464), ("::1", 0))
