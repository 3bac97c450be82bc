"""A `Transport` over the coordinator's Kafka topics (PROTOCOL.md section 1), with kafka-python.

Requests go to the request topic keyed by group id. Responses come back on the response topic keyed by
`reply_to`, in the partition the Java client's default partitioner picks (murmur2 of the key): the
transport reads only the partitions its reply_tos hash to and keeps the records whose key is one of them.
A reply_to is registered (its partition assigned and positioned at the end) before its first request is
produced, so no answer to it can be missed; older records in that partition belong to other reply_tos.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from kafka import KafkaConsumer, KafkaProducer, TopicPartition
from kafka.partitioner.default import murmur2

from coordinator_state.envelope import response_key, response_partition, routing_group_id

REQUEST_TOPIC = "coordinator.requests"
RESPONSE_TOPIC = "coordinator.responses"


class KafkaTransport:
    """Requests produced to the request topic, responses read from this process's response partitions."""

    def __init__(
        self,
        bootstrap_servers: str,
        *,
        client_id: str = "group-client",
        request_topic: str = REQUEST_TOPIC,
        response_topic: str = RESPONSE_TOPIC,
    ) -> None:
        self.request_topic = request_topic
        self.response_topic = response_topic
        self._producer = KafkaProducer(bootstrap_servers=bootstrap_servers, client_id=client_id, linger_ms=0)
        self._consumer = KafkaConsumer(bootstrap_servers=bootstrap_servers, client_id=client_id,
                                       enable_auto_commit=False, group_id=None)
        self._partitions: dict[str, TopicPartition] = {}
        self._inbox: dict[str, list[dict[str, Any]]] = {}

    def send(self, request: Mapping[str, Any]) -> None:
        """Produces one request, keyed by its group id (PROTOCOL.md 1, 8), after registering its reply_to (if it
        can be answered)."""
        key = response_key(request)
        if key is not None:
            self._register(key[0])
        group_id = routing_group_id(request) or ""
        self._producer.send(self.request_topic, key=group_id.encode("utf-8"),
                            value=json.dumps(request, separators=(",", ":")).encode("utf-8"))
        self._producer.flush()

    def receive(self, reply_to: str, timeout_ms: int = 0) -> list[dict[str, Any]]:
        """The responses for `reply_to` read so far, fetching for up to `timeout_ms` if there are none."""
        self._register(reply_to)
        if not self._inbox[reply_to]:
            self.fetch(timeout_ms)
        delivered, self._inbox[reply_to] = self._inbox[reply_to], []
        return delivered

    def close(self) -> None:
        """Closes the producer and the consumer."""
        self._producer.close()
        self._consumer.close()

    def _register(self, reply_to: str) -> None:
        if reply_to in self._partitions:
            return
        partitions = self._consumer.partitions_for_topic(self.response_topic)
        if not partitions:
            raise RuntimeError(f"response topic {self.response_topic!r} does not exist")
        tp = TopicPartition(self.response_topic, response_partition(reply_to, len(partitions), murmur2))
        self._partitions[reply_to] = tp
        self._inbox[reply_to] = []
        assigned = set(self._consumer.assignment())
        if tp not in assigned:
            self._consumer.assign([*assigned, tp])
            self._consumer.seek_to_end(tp)
            self._consumer.position(tp)  # resolve the end offset now, before the request is produced

    def fetch(self, timeout_ms: int) -> int:
        """Reads what has arrived, waiting up to `timeout_ms` for something; returns how many responses to
        registered reply_tos it read (`receive` hands them out)."""
        kept = 0
        for records in self._consumer.poll(timeout_ms=timeout_ms).values():
            for record in records:
                key = record.key.decode("utf-8", "replace") if record.key is not None else None
                if key in self._inbox and record.value is not None:
                    self._inbox[key].append(json.loads(record.value))
                    kept += 1
        return kept
