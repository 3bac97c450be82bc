"""TEST TOOL, not product code: a one-node proxy in front of a broker that records every partition of every fetch.

`FetchRecorder` listens on one loopback port and forwards every connection's bytes to the broker behind it. It
rewrites only Metadata answers, naming itself as the cluster's one broker and every partition's leader, so that
clients keep talking through it; and records each partition's fetch (offset and the request's byte limit), for the
source's reader tests to assert what their fetches asked for.
"""

from __future__ import annotations

import asyncio
import contextlib
import threading
from collections import deque
from types import TracebackType
from typing import Any, NamedTuple

from kafka.protocol.api_key import ApiKey
from kafka.protocol.consumer.fetch import FetchRequest
from kafka.protocol.metadata.metadata import MetadataResponse

from kafka_gateway.codec import (
    body_to_message,
    decode_request,
    decode_response,
    encode_response,
    message_to_body,
    peek_header,
)
from kafka_gateway.frames import FrameSplitter, frame

NODE_ID = 0


class Fetched(NamedTuple):
    """One partition of a fetch request (the topic: its name, or its id from Fetch v13 on)."""

    topic: str
    partition: int
    fetch_offset: int
    request_max_bytes: int


def _fetched_topic(topic: dict[str, Any]) -> str:
    """A fetch's topic: its name, or from Fetch v13 on (librdkafka) its id."""
    return str(topic.get("topic") or topic.get("topic_id"))


class FetchRecorder:
    """`with FetchRecorder("127.0.0.1:9092") as proxy: proxy.bootstrap_servers; proxy.fetches`."""

    def __init__(self, broker: str, host: str = "127.0.0.1") -> None:
        broker_host, broker_port = broker.split(",")[0].rsplit(":", 1)
        self.broker = (broker_host, int(broker_port))
        self.host = host
        self.port = 0
        self.fetches: list[Fetched] = []
        self._loop: asyncio.AbstractEventLoop | None = None
        self._stop: asyncio.Event | None = None
        self._ready = threading.Event()
        self._thread = threading.Thread(target=lambda: asyncio.run(self._main()), name="fetch-recorder", daemon=True)

    @property
    def bootstrap_servers(self) -> str:
        return f"{self.host}:{self.port}"

    async def _main(self) -> None:
        self._loop, self._stop = asyncio.get_running_loop(), asyncio.Event()
        server = await asyncio.start_server(self._serve, self.host, 0)
        self.port = server.sockets[0].getsockname()[1]
        self._ready.set()
        await self._stop.wait()
        server.close()

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        upstream_reader, upstream_writer = await asyncio.open_connection(*self.broker)
        expected: deque[tuple[ApiKey, int]] = deque()
        try:
            await asyncio.gather(self._requests(reader, upstream_writer, expected),
                                 self._answers(upstream_reader, writer, expected))
        except (ConnectionError, OSError, asyncio.IncompleteReadError):
            pass
        finally:
            writer.close()
            upstream_writer.close()

    async def _requests(self, reader: asyncio.StreamReader, upstream: asyncio.StreamWriter,
                        expected: deque[tuple[ApiKey, int]]) -> None:
        splitter = FrameSplitter()
        while data := await reader.read(65536):
            for payload in splitter.feed(data):
                header = peek_header(payload)
                api_key, version = ApiKey(header.api_key), header.api_version
                if api_key == ApiKey.Fetch:
                    self._note_fetch(payload, version)
                expected.append((api_key, version))  # the recorded readers never produce with acks 0
                upstream.write(frame(payload))
        upstream.close()

    def _note_fetch(self, payload: bytes, version: int) -> None:
        body = message_to_body(decode_request(FetchRequest, payload, version), version)
        for topic in body["topics"]:
            for partition in topic["partitions"]:
                self.fetches.append(Fetched(_fetched_topic(topic), partition["partition"],
                                            partition["fetch_offset"], body["max_bytes"]))

    async def _answers(self, upstream: asyncio.StreamReader, writer: asyncio.StreamWriter,
                       expected: deque[tuple[ApiKey, int]]) -> None:
        splitter = FrameSplitter(2**31 - 1)
        while data := await upstream.read(1 << 20):
            for payload in splitter.feed(data):
                api_key, version = expected.popleft()
                writer.write(self._metadata(payload, version) if api_key == ApiKey.Metadata else frame(payload))
            await writer.drain()
        writer.close()

    def _metadata(self, payload: bytes, version: int) -> bytes:
        answer = decode_response(MetadataResponse, payload, version)
        body = message_to_body(answer, version)
        body["brokers"] = [{"node_id": NODE_ID, "host": self.host, "port": self.port, "rack": None}]
        body["controller_id"] = NODE_ID
        for topic in body["topics"]:
            for partition in topic["partitions"]:
                partition.update(leader_id=NODE_ID, replica_nodes=[NODE_ID], isr_nodes=[NODE_ID])
        return encode_response(body_to_message(MetadataResponse, version, body), answer.header.correlation_id)

    def __enter__(self) -> FetchRecorder:
        self._thread.start()
        if not self._ready.wait(10):
            raise TimeoutError("the fetch recorder did not start")
        return self

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        if self._loop is not None and self._stop is not None:
            with contextlib.suppress(RuntimeError):
                self._loop.call_soon_threadsafe(self._stop.set)
        self._thread.join(10)
