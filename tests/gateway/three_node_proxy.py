"""TEST FAKE, not product code: a three-node Kafka cluster made of one real broker.

`ThreeNodeProxy` listens on one loopback port per node id and forwards every connection's bytes to the one
broker behind it (the embedded broker of the tests). It rewrites only Metadata answers: the cluster has
three brokers, one at each of its ports, and partition p of every topic is led by node `p % 3` (replicas
and ISR: the leader alone; controller: the first node). So a client that sends a partition's Produce,
Fetch, ListOffsets or OffsetForLeaderEpoch to a node that does not lead it is misrouted: the fake forwards
it anyway (the broker behind holds every partition) and records it, for the test to assert there is none.

It also counts, for the tests, the connections each node accepted, every request per node and API, and
every group request (which must never reach it from the gateway), and records every partition's fetch (offset and the
request's byte limit). With `refuse_fetches_past_the_end`, it answers a fetch from past a partition's high watermark as
Apache Kafka does (OFFSET_OUT_OF_RANGE, high watermark -1), where the embedded broker answers with the high watermark.
"""

from __future__ import annotations

import asyncio
import contextlib
import threading
from collections import Counter, deque
from collections.abc import Iterable
from types import TracebackType
from typing import Any, NamedTuple

from kafka.protocol.api_key import ApiKey
from kafka.protocol.consumer.fetch import FetchRequest, FetchResponse
from kafka.protocol.consumer.offsets import ListOffsetsRequest, OffsetForLeaderEpochRequest
from kafka.protocol.metadata.find_coordinator import FindCoordinatorRequest
from kafka.protocol.metadata.metadata import MetadataResponse
from kafka.protocol.producer.produce import ProduceRequest

from kafka_gateway.apis import GROUP_APIS
from kafka_gateway.codec import (
    body_to_message,
    decode_request,
    decode_response,
    encode_response,
    message_to_body,
    peek_header,
)
from kafka_gateway.frames import FrameSplitter, frame

# Per API whose requests name partitions: its request class, its topic list, partition list and index fields.
PARTITIONED: dict[ApiKey, tuple[Any, str, str, str]] = {
    ApiKey.Produce: (ProduceRequest, "topic_data", "partition_data", "index"),
    ApiKey.Fetch: (FetchRequest, "topics", "partitions", "partition"),
    ApiKey.ListOffsets: (ListOffsetsRequest, "topics", "partitions", "partition_index"),
    ApiKey.OffsetForLeaderEpoch: (OffsetForLeaderEpochRequest, "topics", "partitions", "partition"),
}


TopicPart = tuple[str, int]
Expected = tuple[ApiKey, int, dict[TopicPart, int]]
"""An answer to come: its API, version, and a fetch's offsets."""


class Fetched(NamedTuple):
    """One partition of a fetch request, as a node received it (the topic: its name, or its id from Fetch v13 on)."""

    node_id: int
    topic: str
    partition: int
    fetch_offset: int
    request_max_bytes: int


def _fetched_topic(topic: dict[str, Any]) -> str:
    """A fetch's topic: its name, or from Fetch v13 on (librdkafka) its id."""
    return str(topic.get("topic") or topic.get("topic_id"))


class ThreeNodeProxy:
    """`with ThreeNodeProxy("127.0.0.1:9092") as cluster: cluster.bootstrap_servers`."""

    def __init__(self, broker: str, node_ids: Iterable[int] = (0, 1, 2), host: str = "127.0.0.1", *,
                 refuse_fetches_past_the_end: bool = False) -> None:
        broker_host, broker_port = broker.rsplit(":", 1)
        self.broker = (broker_host, int(broker_port))
        self.node_ids = tuple(node_ids)
        self.host = host
        self.ports: dict[int, int] = {}
        self.accepted: Counter[int] = Counter()
        self.requests: Counter[tuple[int, str]] = Counter()
        self.misrouted: list[tuple[int, str, int]] = []  # (node, API, partition it does not lead)
        self.group_requests: list[tuple[int, str]] = []
        self.fetches: list[Fetched] = []
        self.refuse_fetches_past_the_end = refuse_fetches_past_the_end
        self._loop: asyncio.AbstractEventLoop | None = None
        self._stop: asyncio.Event | None = None
        self._ready = threading.Event()
        self._thread = threading.Thread(target=lambda: asyncio.run(self._main()), name="three-node-proxy",
                                        daemon=True)

    @property
    def bootstrap_servers(self) -> str:
        return ",".join(f"{self.host}:{port}" for port in self.ports.values())

    def leader(self, partition: int) -> int:
        return self.node_ids[partition % len(self.node_ids)]

    # ---- the cluster ----------------------------------------------------------------------------------

    async def _main(self) -> None:
        self._loop, self._stop = asyncio.get_running_loop(), asyncio.Event()
        servers = []
        for node_id in self.node_ids:
            server = await asyncio.start_server(
                lambda r, w, node_id=node_id: self._serve(node_id, r, w), self.host, 0)
            servers.append(server)
            self.ports[node_id] = server.sockets[0].getsockname()[1]
        self._ready.set()
        await self._stop.wait()
        for server in servers:
            server.close()

    async def _serve(self, node_id: int, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.accepted[node_id] += 1
        upstream_reader, upstream_writer = await asyncio.open_connection(*self.broker)
        expected: deque[Expected] = deque()
        try:
            await asyncio.gather(self._requests(node_id, reader, upstream_writer, expected),
                                 self._answers(upstream_reader, writer, expected))
        except (ConnectionError, OSError, asyncio.IncompleteReadError):
            pass
        finally:
            writer.close()
            upstream_writer.close()

    async def _requests(self, node_id: int, reader: asyncio.StreamReader, upstream: asyncio.StreamWriter,
                        expected: deque[Expected]) -> None:
        splitter = FrameSplitter()
        while data := await reader.read(65536):
            for payload in splitter.feed(data):
                header = peek_header(payload)
                api_key, version = ApiKey(header.api_key), header.api_version
                answered, fetch_offsets = self._note(node_id, api_key, version, payload)
                if answered:
                    expected.append((api_key, version, fetch_offsets))
                upstream.write(frame(payload))
        upstream.close()

    def _note(self, node_id: int, api_key: ApiKey, version: int, payload: bytes) -> tuple[bool, dict[TopicPart, int]]:
        """Records the request; whether an answer will come, and a fetch's offsets."""
        self.requests[(node_id, api_key.name)] += 1
        if api_key in GROUP_APIS or (api_key == ApiKey.FindCoordinator and message_to_body(decode_request(
                FindCoordinatorRequest, payload, version), version).get("key_type", 0) == 0):
            self.group_requests.append((node_id, api_key.name))
        if api_key not in PARTITIONED:
            return True, {}
        message_class, topics, partitions, index = PARTITIONED[api_key]
        body = message_to_body(decode_request(message_class, payload, version), version)
        fetch_offsets: dict[TopicPart, int] = {}
        for topic in body[topics]:
            for partition in topic[partitions]:
                if self.leader(partition[index]) != node_id:
                    self.misrouted.append((node_id, api_key.name, partition[index]))
                if api_key == ApiKey.Fetch:
                    fetch_offsets[(_fetched_topic(topic), partition["partition"])] = partition["fetch_offset"]
                    self.fetches.append(Fetched(node_id, _fetched_topic(topic), partition["partition"],
                                                partition["fetch_offset"], body["max_bytes"]))
        return api_key != ApiKey.Produce or body["acks"] != 0, fetch_offsets

    async def _answers(self, upstream: asyncio.StreamReader, writer: asyncio.StreamWriter,
                       expected: deque[Expected]) -> None:
        splitter = FrameSplitter(2**31 - 1)
        while data := await upstream.read(1 << 20):
            for payload in splitter.feed(data):
                api_key, version, fetch_offsets = expected.popleft()
                if api_key == ApiKey.Metadata:
                    writer.write(self._metadata(payload, version))
                elif api_key == ApiKey.Fetch and self.refuse_fetches_past_the_end:
                    writer.write(self._refuse_past_the_end(payload, version, fetch_offsets))
                else:
                    writer.write(frame(payload))
            await writer.drain()
        writer.close()

    def _metadata(self, payload: bytes, version: int) -> bytes:
        answer = decode_response(MetadataResponse, payload, version)
        body = message_to_body(answer, version)
        body["brokers"] = [{"node_id": n, "host": self.host, "port": p, "rack": None} for n, p in self.ports.items()]
        body["controller_id"] = self.node_ids[0]
        for topic in body["topics"]:
            for partition in topic["partitions"]:
                leader = self.leader(partition["partition_index"])
                partition.update(leader_id=leader, replica_nodes=[leader], isr_nodes=[leader])
        return encode_response(body_to_message(MetadataResponse, version, body), answer.header.correlation_id)

    @staticmethod
    def _refuse_past_the_end(payload: bytes, version: int, fetch_offsets: dict[TopicPart, int]) -> bytes:
        """Kafka's answer to a fetch from past the log end (ReplicaManager.readFromLog: OffsetOutOfRangeException)."""
        answer = decode_response(FetchResponse, payload, version)
        body = message_to_body(answer, version)
        for topic in body["responses"]:
            for partition in topic["partitions"]:
                if fetch_offsets[(_fetched_topic(topic), partition["partition_index"])] > partition["high_watermark"]:
                    partition.update(error_code=1, high_watermark=-1, last_stable_offset=-1, log_start_offset=-1,
                                     records=None)
        return encode_response(body_to_message(FetchResponse, version, body), answer.header.correlation_id)

    # ---- lifecycle ------------------------------------------------------------------------------------

    def __enter__(self) -> ThreeNodeProxy:
        self._thread.start()
        if not self._ready.wait(10):
            raise TimeoutError("the three-node proxy did not start")
        return self

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        if self._loop is not None and self._stop is not None:
            with contextlib.suppress(RuntimeError):
                self._loop.call_soon_threadsafe(self._stop.set)
        self._thread.join(10)
