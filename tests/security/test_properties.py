"""The gateway's properties file and its environment overrides."""

from __future__ import annotations

from pathlib import Path

import pytest

from kafka_gateway.properties import environment_name, parse_properties, read_properties, setting


def test_server_properties_syntax() -> None:
    text = "# comment\n! also a comment\n\n  listeners = SASL_SSL://127.0.0.1:9093  \nsuper.users=User:a;User:b\nk=\n"
    assert parse_properties(text) == {"listeners": "SASL_SSL://127.0.0.1:9093", "super.users": "User:a;User:b",
                                      "k": ""}


@pytest.mark.parametrize("line", ["no equals sign", "=value"])
def test_a_line_without_key_and_value_is_named(tmp_path: Path, line: str) -> None:
    path = tmp_path / "gateway.properties"
    path.write_text("a=1\n" + line + "\n")
    with pytest.raises(ValueError, match=r"gateway.properties: line 2: expected key=value"):
        read_properties(path)


def test_the_environment_wins_over_the_file() -> None:
    key = "upstream.sasl.jaas.config"
    assert environment_name(key) == "COORDINATOR_GATEWAY__UPSTREAM_SASL_JAAS_CONFIG"
    assert setting({key: "from file"}, {}, key) == "from file"
    assert setting({key: "from file"}, {environment_name(key): "from env"}, key) == "from env"
    assert setting({}, {}, key) is None
