"""The gateway's own requests to the upstream cluster (asyncio): the start-up probe, and for streams groups the
Metadata of the topics their topologies name and the CreateTopics of the internal topics the coordinator asks for
(PROTOCOL.md section 10, as a Kafka broker reads its metadata and its `KafkaApis` creates the topics).

`UpstreamAdmin` keeps one connection of its own to the bootstrap server (TLS and SASL as configured), opened when
first needed and again after a failure; its calls run one at a time, each bounded by `timeout_s`, so that a slow
or absent upstream delays only the heartbeats that wait for it, never the event loop.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Iterable, Mapping, Sequence
from typing import Any, Final

from kafka.protocol.api_key import ApiKey

from coordinator_state.envelope import INT32_MAX

from .apis import request_class, response_class
from .codec import body_to_message, decode_response, message_to_body
from .frames import FrameSplitter
from .port_mapping import UpstreamDirectory
from .security.sasl_client import UpstreamSecurity, open_upstream
from .streams_topics import counts_from_metadata

ADMIN_CLIENT_ID: Final = "coordinator-gateway-admin"
# Metadata v4 is the first that can ask not to create the topics it names (allow_auto_topic_creation).
_NO_AUTO_CREATE_METADATA: Final = 4
CREATE_TOPICS_TIMEOUT_MS: Final = 5_000  # the broker's wait, within the call's own bound


async def exchange(reader: asyncio.StreamReader, writer: asyncio.StreamWriter, api_key: ApiKey, version: int,
                   correlation_id: int, body: Mapping[str, Any], client_id: str) -> Any:
    """Sends one request (its body in the envelopes' JSON naming) and reads its response message."""
    message = body_to_message(request_class(api_key), version, body)
    message.with_header(correlation_id=correlation_id, client_id=client_id)
    writer.write(bytes(message.encode(header=True, framed=True)))
    splitter = FrameSplitter(INT32_MAX)  # a frame's size is an int32
    while True:
        data = await reader.read(65536)
        if not data:
            raise ConnectionError("the upstream broker closed the connection")
        frames = splitter.feed(data)
        if frames:
            return decode_response(response_class(api_key), frames[0], version)


def usable_version(api_key: ApiKey, upstream_versions: Mapping[int, tuple[int, int]]) -> int:
    """The highest version of `api_key` both the upstream and the codec know; ConnectionError when none."""
    low, high = upstream_versions.get(int(api_key), (0, -1))
    high = min(high, int(request_class(api_key).max_version))
    if high < low:
        raise ConnectionError(f"the upstream does not serve {api_key.name}")
    return high


class UpstreamAdmin:
    """The gateway's own connection to the upstream, for its Metadata and CreateTopics requests."""

    def __init__(self, directory: UpstreamDirectory, security: UpstreamSecurity,
                 upstream_versions: Mapping[int, tuple[int, int]], timeout_s: float = 10.0) -> None:
        self.directory = directory
        self.security = security
        self.upstream_versions = dict(upstream_versions)
        self.timeout_s = timeout_s
        self._lock = asyncio.Lock()
        self._connection: tuple[asyncio.StreamReader, asyncio.StreamWriter] | None = None
        self._correlation_id = 0

    async def call(self, api_key: ApiKey, body: Mapping[str, Any]) -> dict[str, Any]:
        """One request at the highest usable version; its response body. Any failure closes the connection (the
        next call opens another) and raises (OSError, TimeoutError, ConnectionError, or the codec's errors)."""
        version = usable_version(api_key, self.upstream_versions)
        async with self._lock:
            try:
                async with asyncio.timeout(self.timeout_s):
                    if self._connection is None:
                        self._connection = await open_upstream(*self.directory.bootstrap, self.security,
                                                               timeout_s=self.timeout_s)
                    self._correlation_id = self._correlation_id % INT32_MAX + 1
                    answer = await exchange(*self._connection, api_key, version, self._correlation_id, body,
                                            ADMIN_CLIENT_ID)
            except BaseException:
                self.close()
                raise
        return message_to_body(answer, version)

    async def topic_counts(self, topics: Iterable[str]) -> dict[str, int]:
        """The partition counts of `topics` (-1: the upstream has no such topic), without creating any."""
        body = {"topics": [{"name": topic} for topic in topics], "allow_auto_topic_creation": False}
        if usable_version(ApiKey.Metadata, self.upstream_versions) < _NO_AUTO_CREATE_METADATA:
            raise ConnectionError("the upstream's Metadata cannot be asked not to create topics (below v4)")
        return counts_from_metadata(await self.call(ApiKey.Metadata, body))

    async def create_topics(self, topics: Sequence[Mapping[str, Any]]) -> dict[str, tuple[int, str | None]]:
        """Creates `topics` (CreateTopics' entries): topic -> (error code, message), for each of them."""
        body = {"topics": list(topics), "timeout_ms": CREATE_TOPICS_TIMEOUT_MS, "validate_only": False}
        answer = await self.call(ApiKey.CreateTopics, body)
        results = {topic["name"]: (topic.get("error_code", 0), topic.get("error_message"))
                   for topic in answer.get("topics") or []}
        for topic in topics:  # one the answer left out was not created
            results.setdefault(topic["name"], (-1, "the upstream's CreateTopics answer did not name it"))
        return results

    def close(self) -> None:
        if self._connection is not None:
            with contextlib.suppress(Exception):
                self._connection[1].close()
        self._connection = None
