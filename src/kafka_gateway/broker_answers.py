"""What the gateway answers as a broker: ApiVersions, FindCoordinator, and the Metadata it rewrites.

Clients send FindCoordinator to any broker they know and connect to the node it names, so the gateway
must be the only broker they know (Metadata lists it alone, at the upstream's node id) and every group's
coordinator. ApiVersions advertises the coordinator's APIs at the contract's versions, the proxied APIs
at the upstream's, and nothing of KIP-848, share or streams groups, so clients use the classic protocol.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Final

from kafka.protocol.api_key import ApiKey

from .apis import GROUP_APIS, PROXIED_APIS, request_class, response_class
from .codec import body_to_message, decode_response, encode_response

UNSUPPORTED_VERSION: Final = 35
INVALID_REQUEST: Final = 42
# FindCoordinator key types: a group's coordinator, or a transactional id's (the upstream broker's,
# which the gateway stands for). Share-group coordinators are not served.
KEY_TYPE_GROUP: Final = 0
KEY_TYPE_TRANSACTION: Final = 1

VersionTable = dict[int, tuple[int, int]]


@dataclass(frozen=True, slots=True)
class Node:
    """The broker the gateway poses as: the upstream's node id at the gateway's address."""

    node_id: int
    host: str
    port: int


def _codec_range(api_key: ApiKey, upstream: tuple[int, int]) -> tuple[int, int] | None:
    """The upstream's versions of an API whose bodies the gateway decodes, capped at what the codec knows."""
    low, high = upstream[0], min(upstream[1], request_class(api_key).max_version)
    return (low, high) if low <= high else None


def advertised_versions(upstream: Mapping[int, tuple[int, int]]) -> VersionTable:
    """The ApiVersions table: the group APIs at the contract's versions, ApiVersions and FindCoordinator at
    the codec's, Metadata and Produce (decoded) at the upstream's capped by the codec, the other proxied
    APIs at the upstream's. An API the upstream does not offer is not offered (except the gateway's own)."""
    table: VersionTable = {int(key): versions for key, versions in GROUP_APIS.items()}
    table[ApiKey.ApiVersions] = (0, request_class(ApiKey.ApiVersions).max_version)
    table[ApiKey.FindCoordinator] = (0, request_class(ApiKey.FindCoordinator).max_version)
    for key, versions in upstream.items():
        if key in (ApiKey.Metadata, ApiKey.Produce):
            capped = _codec_range(ApiKey(key), versions)
            if capped is not None:
                table[key] = capped
        elif key in PROXIED_APIS:
            table[key] = versions
    return dict(sorted(table.items()))


def api_versions_answer(version: int, correlation_id: int, table: VersionTable) -> bytes:
    """The ApiVersions response; a version the gateway does not know gets Kafka's v0 UNSUPPORTED_VERSION
    answer with the table, so the client retries with one it does."""
    known = table[ApiKey.ApiVersions]
    error = 0 if known[0] <= version <= known[1] else UNSUPPORTED_VERSION
    answer_version = version if error == 0 else 0
    keys = [{"api_key": key, "min_version": low, "max_version": high} for key, (low, high) in table.items()]
    answer = body_to_message(response_class(ApiKey.ApiVersions), answer_version,
                             {"error_code": error, "api_keys": keys})
    return encode_response(answer, correlation_id)


def find_coordinator_answer(request: Any, version: int, correlation_id: int, node: Node) -> bytes:
    """FindCoordinator: the gateway for groups and transactional ids, INVALID_REQUEST for other key types."""
    key_type = request.key_type if version >= 1 else KEY_TYPE_GROUP
    served = key_type in (KEY_TYPE_GROUP, KEY_TYPE_TRANSACTION)
    error = 0 if served else INVALID_REQUEST
    message = None if served else f"coordinator key type {key_type} is not served by this gateway"
    where = {"node_id": node.node_id, "host": node.host, "port": node.port} if served else \
        {"node_id": -1, "host": "", "port": -1}
    outcome = {"error_code": error, "error_message": message, **where}
    body = outcome if version < 4 else {"coordinators": [{"key": key, **outcome} for key in request.coordinator_keys]}
    return encode_response(body_to_message(response_class(ApiKey.FindCoordinator), version, body), correlation_id)


def rewrite_metadata(payload: bytes, version: int, correlation_id: int, node: Node) -> bytes:
    """The upstream's Metadata response with every broker at the gateway's address."""
    answer = decode_response(response_class(ApiKey.Metadata), payload, version)
    for broker in answer.brokers:
        broker.host = node.host
        broker.port = node.port
    return encode_response(answer, correlation_id)
