"""The gateway's configuration file: Java-properties syntax as Kafka's `server.properties` (PROTOCOL.md section 11).

`key=value` per line; lines starting with `#` or `!` and blank lines are skipped; whitespace around key and value
is trimmed; no escapes or continuations. Any key may also come from the environment as `COORDINATOR_GATEWAY__`
followed by the key upper-cased with dots as `_` (so a password need not be on disk); the environment wins.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Final

ENVIRONMENT_PREFIX: Final = "COORDINATOR_GATEWAY__"


def parse_properties(text: str) -> dict[str, str]:
    """The keys and values of a properties file's text; ValueError naming a line that is not `key=value`."""
    properties: dict[str, str] = {}
    for number, raw in enumerate(text.splitlines(), 1):
        line = raw.strip()
        if not line or line[0] in "#!":
            continue
        key, sep, value = line.partition("=")
        if not sep or not key.strip():
            raise ValueError(f"line {number}: expected key=value, got {line!r}")
        properties[key.strip()] = value.strip()
    return properties


def read_properties(path: Path) -> dict[str, str]:
    """The properties file at `path`; OSError when it cannot be read, ValueError when a line is bad."""
    try:
        return parse_properties(path.read_text(encoding="utf-8"))
    except ValueError as exc:
        raise ValueError(f"{path}: {exc}") from None


def environment_name(key: str) -> str:
    """The environment variable that sets `key`: `upstream.sasl.jaas.config` is
    `COORDINATOR_GATEWAY__UPSTREAM_SASL_JAAS_CONFIG`."""
    return ENVIRONMENT_PREFIX + key.upper().replace(".", "_")


def setting(properties: Mapping[str, str], environment: Mapping[str, str], key: str) -> str | None:
    """`key`'s value: from the environment if set there, else from the file, else None."""
    return environment.get(environment_name(key), properties.get(key))
