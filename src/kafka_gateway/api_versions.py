"""The ApiVersions table a connection is offered, and the answer that carries it.

The table follows from what the connection's chain does: the group APIs at the contract's versions (the
coordinator answers them), the APIs its units answer at the versions they serve, and the upstream's
proxied APIs at the upstream's versions, capped where the gateway decodes them (at what the codec
knows) and where a unit caps them (the port-mapping unit keeps Produce and Fetch below the versions whose
answers carry broker addresses). Nothing of KIP-848 or share groups, so consumers use the classic protocol;
the Streams group APIs at the contract's version 0.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any, Final

from kafka.protocol.api_key import ApiKey

from .apis import GROUP_APIS, MESSAGE_CLASSES, PROXIED_APIS, request_class
from .chain import Answer, Unit

UNSUPPORTED_VERSION: Final = 35

VersionTable = dict[int, tuple[int, int]]


def advertised_versions(upstream: Mapping[int, tuple[int, int]], units: Iterable[Unit]) -> VersionTable:
    """The table offered on a connection whose chain holds `units`, in front of an upstream offering
    `upstream`. An API the upstream does not offer is not offered, unless the gateway or a unit answers it."""
    units = list(units)
    table: VersionTable = {int(key): versions for key, versions in GROUP_APIS.items()}
    table[ApiKey.ApiVersions] = (0, request_class(ApiKey.ApiVersions).max_version)
    for unit in units:
        table.update({int(key): versions for key, versions in unit.serves.items()})
    for key, (low, high) in upstream.items():
        if key in table or key not in PROXIED_APIS:
            continue
        if key in MESSAGE_CLASSES:
            high = min(high, request_class(ApiKey(key)).max_version)
        for unit in units:
            high = min(high, unit.caps.get(ApiKey(key), high))
        if low <= high:
            table[key] = (low, high)
    return dict(sorted(table.items()))


def api_versions_answer(version: int, table: VersionTable) -> Answer:
    """The ApiVersions answer; a version the gateway does not know gets Kafka's v0 UNSUPPORTED_VERSION
    answer with the table, so the client retries with one it does."""
    known = table[ApiKey.ApiVersions]
    error = 0 if known[0] <= version <= known[1] else UNSUPPORTED_VERSION
    keys: list[dict[str, Any]] = [{"api_key": key, "min_version": low, "max_version": high}
                                  for key, (low, high) in table.items()]
    return Answer({"error_code": error, "api_keys": keys}, version=version if error == 0 else 0)
