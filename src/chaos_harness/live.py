"""The chaos harness's real-time backend: members talk to a running coordinator over its Kafka topics.

The members' requests go out through one `KafkaTransport`, which also brings their answers back. Apart
from them, the backend reads back what the coordinator wrote: every response to one of its requests (so
answers, unanswered requests and duplicates are counted whether or not a member still listens) and the
group's snapshots (PROTOCOL.md section 4; `describe` is the latest in log order, as a reader of the
compacted topic sees it). With `record_traffic` it also keeps the request topic from its beginning, ticks
included, for a traffic file. Time is the wall clock. Stopping and starting the coordinator is the
`CoordinatorControl`'s job (the streaming job, in `spark_backend`).
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any, Protocol

from kafka import KafkaConsumer, TopicPartition

from coordinator_job.record import Fetched, PartitionMerge, record_line
from coordinator_state import ResponseKey, response_key
from group_client.kafka_transport import KafkaTransport
from group_client.realtime import wall_clock_ms

from .latency import LatencyLog
from .run import HarnessError

# Longest wait between two instants when nothing arrives: how soon a stop request or a snapshot is seen.
IDLE_MS = 100


class CoordinatorControl(Protocol):
    """Stops and starts the coordinator (without blocking the caller for long)."""

    def stop(self) -> None:
        """Takes the coordinator down."""

    def start(self) -> None:
        """Brings it back on its checkpoint."""


def _canonical(envelope: Mapping[str, Any]) -> str:
    return json.dumps(envelope, sort_keys=True, separators=(",", ":"))


class LiveBackend:
    """A chaos `Backend` on the coordinator's topics, in real time."""

    realtime = True

    def __init__(
        self,
        bootstrap_servers: str,
        group_id: str,
        *,
        request_topic: str,
        response_topic: str,
        snapshot_topic: str,
        coordinator: CoordinatorControl | None = None,
        record_traffic: bool = False,
        clock: Callable[[], int] = wall_clock_ms,
    ) -> None:
        self.group_id = group_id
        self.coordinator = coordinator
        self.clock = clock
        self.duplicates_delivered = 0
        self.latency = LatencyLog()
        self.transport = KafkaTransport(bootstrap_servers, client_id=f"chaos-{group_id}",
                                        request_topic=request_topic, response_topic=response_topic)
        self._sent = 0
        self._outstanding: dict[ResponseKey, int] = {}  # request -> when it was sent
        self._answered: set[ResponseKey] = set()
        self._responses: list[dict[str, Any]] = []
        self._snapshot: dict[str, Any] | None = None
        self._record_traffic = record_traffic
        self._traffic: list[Fetched] = []
        self._topics = {"requests": request_topic, "responses": response_topic, "snapshots": snapshot_topic}
        self._reader = KafkaConsumer(bootstrap_servers=bootstrap_servers, client_id=f"chaos-{group_id}-reader",
                                     group_id=None, enable_auto_commit=False)
        read_back = [response_topic, snapshot_topic] + ([request_topic] if record_traffic else [])
        partitions = {topic: [TopicPartition(topic, p) for p in sorted(self._partitions_of(topic))]
                      for topic in read_back}
        self._reader.assign([tp for tps in partitions.values() for tp in tps])
        # Everything in the request log is traffic; of the rest only what follows is ours (and filtered).
        if record_traffic:
            self._reader.seek_to_beginning(*partitions[request_topic])
        for topic in (response_topic, snapshot_topic):
            self._reader.seek_to_end(*partitions[topic])
            for tp in partitions[topic]:
                self._reader.position(tp)  # resolve the end now, before any request goes out

    @classmethod
    def from_settings(cls, settings: Mapping[str, Any], group_id: str, **kwargs: Any) -> LiveBackend:
        """A backend on the topics of the coordinator's settings (`coordinator_job.settings`)."""
        return cls(str(settings["bootstrap.servers"]), group_id,
                   request_topic=str(settings["coordinator.requests.topic"]),
                   response_topic=str(settings["coordinator.responses.topic"]),
                   snapshot_topic=str(settings["coordinator.snapshots.topic"]), **kwargs)

    def _partitions_of(self, topic: str) -> set[int]:
        partitions: set[int] | None = self._reader.partitions_for_topic(topic)
        if not partitions:
            raise HarnessError(f"topic {topic!r} does not exist")
        return partitions

    # ------------------------------------------------------------------ Backend

    @property
    def responses(self) -> list[dict[str, Any]]:
        """The distinct responses to this backend's requests, sorted by their canonical JSON."""
        return sorted(self._responses, key=_canonical)

    def send(self, request: Mapping[str, Any]) -> None:
        """Counts the request as outstanding, then produces it."""
        self._sent += 1
        key = response_key(request)
        if key is not None:  # else it is never answered
            self._outstanding[key] = self.clock()
            self.latency.sent(request, self._outstanding[key])
        self.transport.send(request)

    def receive(self, reply_to: str, timeout_ms: int = 0) -> list[dict[str, Any]]:
        """The responses for `reply_to` read so far."""
        return self.transport.receive(reply_to, timeout_ms)

    def next_event_ms(self) -> int | None:
        """The coordinator keeps its own time: nothing to schedule for it."""
        return None

    def wait_until(self, target_ms: int) -> int:
        """Waits for responses until `target_ms` (at most `IDLE_MS`), reads back what the coordinator wrote,
        and returns the wall clock."""
        wait = max(0, min(target_ms - self.clock(), IDLE_MS))
        self.transport.fetch(wait)
        self._read_back()
        return self.clock()

    def describe(self, group_id: str) -> dict[str, Any] | None:
        """The group's latest snapshot read back (None before the first one, or after a tombstone)."""
        return self._snapshot if group_id == self.group_id else None

    def stop_coordinator(self) -> None:
        """Has the control take the coordinator down."""
        if self.coordinator is None:
            raise HarnessError("this run has no control over the coordinator")
        self.coordinator.stop()

    def start_coordinator(self, redeliver: int = 0) -> None:
        """Has the control start the coordinator again (`redeliver` is the sim's: the real sink decides)."""
        if self.coordinator is None:
            raise HarnessError("this run has no control over the coordinator")
        self.coordinator.start()

    def request_count(self) -> int:
        """Requests sent."""
        return self._sent

    def unanswered(self) -> int:
        """Requests sent with no response read back yet."""
        return len(self._outstanding)

    def caught_up(self, sent_before_ms: int) -> bool:
        """Whether every request sent before `sent_before_ms` has been answered (a parked JoinGroup too)."""
        return all(sent >= sent_before_ms for sent in self._outstanding.values())

    def write_traffic(self, path: str | Path) -> None:
        """Saves the request log as the job read it, as `coordinator record --from-beginning` writes it: each
        partition in offset order, partitions merged by record timestamp (a group's requests all lie in one
        partition, so their order is kept)."""
        if not self._record_traffic:
            raise HarnessError("traffic was not recorded (record_traffic=False)")
        merge = PartitionMerge(self._partitions_of(self._topics["requests"]))
        merge.add(self._traffic)
        with Path(path).open("wb") as out:
            for record in merge.drain():
                out.write(record_line(record)[0] + b"\n")

    def close(self) -> None:
        """Closes the transport and the read-back consumer."""
        self.transport.close()
        self._reader.close()

    # ------------------------------------------------------------------ reading back

    def _read_back(self) -> None:
        for tp, records in self._reader.poll(timeout_ms=0).items():
            for record in records:
                if record.topic == self._topics["responses"] and record.value is not None:
                    self._on_response(json.loads(record.value))
                elif record.topic == self._topics["snapshots"] and record.key == self.group_id.encode():
                    self._snapshot = None if record.value is None else json.loads(record.value)
                elif record.topic == self._topics["requests"]:
                    self._traffic.append(Fetched(record.timestamp, tp.partition, record.offset, record.key,
                                                 record.value))

    def _on_response(self, response: dict[str, Any]) -> None:
        key = response_key(response)
        if key is not None and self._outstanding.pop(key, None) is not None:
            self.latency.answered(response, self.clock())
            self._answered.add(key)
            self._responses.append(response)
        elif key in self._answered:
            self.duplicates_delivered += 1
