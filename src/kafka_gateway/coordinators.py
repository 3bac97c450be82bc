"""Where the gateway's envelopes go: an in-process engine, or the coordinator's Kafka topics.

Both take request envelopes with `submit` and hand every response envelope to the `deliver` callback on
the event loop, in the order decided.
- `LocalEngine` (`--engine local`): a `LocalCoordinator` in this process, its clock moved by the wall
  clock every `tick_ms`, so that sessions expire while every client is silent.
- `TopicEngine` (the default): requests produced to the request topic keyed by group id; responses read
  from the one response-topic partition this gateway's `reply_to` hashes to (`envelope.response_partition`,
  as the project's KafkaTransport reads), keeping those keyed by that `reply_to`; ListGroups
  answered from the snapshot topic, which is read from its start and kept current (no single group holds
  the answer, so it cannot go through the request topic). Kafka clients block,
  so each consumer polls in its own thread and hands records to the loop.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import threading
from collections.abc import Callable, Mapping
from typing import Any, Protocol

from kafka import KafkaConsumer, KafkaProducer, TopicPartition
from kafka.errors import KafkaError
from kafka.partitioner.default import murmur2

from coordinator_state import Invalid, ListGroups, LocalCoordinator, invalid_response, parse_request, to_json
from coordinator_state.envelope import API, Api, answer_list_groups, response_partition, routing_group_id

log = logging.getLogger(__name__)

Deliver = Callable[[list[dict[str, Any]]], None]
Clock = Callable[[], int]


class Coordinator(Protocol):
    """What the gateway's shell needs from a coordinator."""

    async def start(self, deliver: Deliver) -> None: ...

    def submit(self, envelope: dict[str, Any]) -> None: ...

    async def stop(self) -> None: ...

    def status(self) -> str: ...


class LocalEngine:
    """The engine in this process (tests, demos): answers at once, timers on the wall clock."""

    def __init__(self, config: Mapping[str, Any], clock_ms: Clock, tick_ms: int = 100) -> None:
        self.engine = LocalCoordinator(config)
        self._clock_ms = clock_ms
        self._tick_s = tick_ms / 1000
        self._deliver: Deliver | None = None
        self._ticker: asyncio.Task[None] | None = None

    async def start(self, deliver: Deliver) -> None:
        self._deliver = deliver
        self.engine.advance_to(self._clock_ms())
        self._ticker = asyncio.create_task(self._tick(), name="local-engine-clock")

    def submit(self, envelope: dict[str, Any]) -> None:
        responses = self.engine.handle(envelope)
        if responses and self._deliver is not None:
            # Delivered from the loop, not from inside the gateway call that submitted the request.
            asyncio.get_running_loop().call_soon(self._deliver, responses)

    async def _tick(self) -> None:
        while True:
            await asyncio.sleep(self._tick_s)
            responses = self.engine.advance_to(self._clock_ms())
            if responses and self._deliver is not None:
                self._deliver(responses)

    async def stop(self) -> None:
        if self._ticker is not None:
            self._ticker.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._ticker

    def status(self) -> str:
        return f"engine=local groups={len(self.engine.groups)} engine_requests={self.engine.counters['requests']}"


class _PollThread(threading.Thread):
    """Polls one kafka-python consumer until stopped, handing each batch of records to `on_records`."""

    def __init__(self, name: str, consumer: Any, on_records: Callable[[list[Any]], None]) -> None:
        super().__init__(name=name, daemon=True)
        self.consumer = consumer
        self.on_records = on_records
        self.stopping = threading.Event()

    def run(self) -> None:
        try:
            while not self.stopping.is_set():
                batch = [r for records in self.consumer.poll(timeout_ms=200).values() for r in records]
                if batch:
                    self.on_records(batch)
        finally:
            self.consumer.close()


class TopicEngine:
    """The coordinator behind its Kafka topics (the streaming job)."""

    def __init__(self, bootstrap_servers: str, settings: Mapping[str, Any], reply_to: str) -> None:
        self.bootstrap_servers = bootstrap_servers
        self.request_topic = str(settings.get("coordinator.requests.topic", "coordinator.requests"))
        self.response_topic = str(settings.get("coordinator.responses.topic", "coordinator.responses"))
        self.snapshot_topic = str(settings.get("coordinator.snapshots.topic", "coordinator.snapshots"))
        self.reply_to = reply_to
        self.snapshots: dict[str, dict[str, Any]] = {}
        self.produced = 0
        self.answered = 0
        self.send_failures = 0
        self._producer: Any = None
        self._threads: list[_PollThread] = []
        self._loop: asyncio.AbstractEventLoop | None = None
        self._deliver: Deliver | None = None

    async def start(self, deliver: Deliver) -> None:
        self._loop = asyncio.get_running_loop()
        self._deliver = deliver
        # kafka-python blocks while it connects and positions: done off the loop.
        await asyncio.to_thread(self._connect)
        for thread in self._threads:
            thread.start()

    def _connect(self) -> None:
        client_id = f"coordinator-gateway-{self.reply_to}"
        self._producer = KafkaProducer(bootstrap_servers=self.bootstrap_servers, client_id=client_id, linger_ms=0)
        responses = KafkaConsumer(bootstrap_servers=self.bootstrap_servers, client_id=client_id,
                                  enable_auto_commit=False, group_id=None)
        partitions = responses.partitions_for_topic(self.response_topic)
        if not partitions:
            raise RuntimeError(f"response topic {self.response_topic!r} does not exist")
        mine = TopicPartition(self.response_topic, response_partition(self.reply_to, len(partitions), murmur2))
        responses.assign([mine])
        responses.seek_to_end(mine)
        responses.position(mine)  # resolved before any request is produced, so no answer is missed
        snapshots = KafkaConsumer(bootstrap_servers=self.bootstrap_servers, client_id=client_id,
                                  enable_auto_commit=False, group_id=None)
        snapshot_partitions = snapshots.partitions_for_topic(self.snapshot_topic) or set()
        assigned = [TopicPartition(self.snapshot_topic, p) for p in sorted(snapshot_partitions)]
        snapshots.assign(assigned)
        snapshots.seek_to_beginning(*assigned)
        self._threads = [_PollThread("gateway-responses", responses, self._on_responses),
                         _PollThread("gateway-snapshots", snapshots, self._on_snapshots)]

    def submit(self, envelope: dict[str, Any]) -> None:
        if envelope.get(API) == Api.LIST_GROUPS:
            asyncio.get_running_loop().call_soon(self._deliver_answers, self._list_groups(envelope))
            return
        key = (routing_group_id(envelope) or "").encode("utf-8")
        try:
            self._producer.send(self.request_topic, key=key, value=to_json(envelope).encode("utf-8"))
        except KafkaError as exc:
            # Not sent: the gateway answers COORDINATOR_NOT_AVAILABLE at the request's bound, the client retries.
            self.send_failures += 1
            log.warning("cannot produce a %s request: %r", envelope.get("api"), exc)
            return
        self.produced += 1

    def _list_groups(self, envelope: dict[str, Any]) -> list[dict[str, Any]]:
        """ListGroups from the snapshot topic: no single group holds the answer, so it cannot go through the
        request topic (PROTOCOL.md 8). An invalid one is answered as the engine answers it."""
        request = parse_request(envelope)
        if isinstance(request, ListGroups):
            return [answer_list_groups(request, self.snapshots.values())]
        answer = invalid_response(request) if isinstance(request, Invalid) else None
        return [] if answer is None else [answer]

    def _deliver_answers(self, answers: list[dict[str, Any]]) -> None:
        self.answered += len(answers)
        if self._deliver is not None:
            self._deliver(answers)

    def _on_responses(self, records: list[Any]) -> None:
        mine = self.reply_to.encode("utf-8")
        answers = []
        for record in records:
            if record.key != mine or record.value is None:
                continue
            try:
                answers.append(json.loads(record.value))
            except ValueError:
                log.warning("unreadable response at %s:%s:%s", record.topic, record.partition, record.offset)
        if answers and self._loop is not None:
            self._loop.call_soon_threadsafe(self._deliver_answers, answers)

    def _on_snapshots(self, records: list[Any]) -> None:
        updates: dict[str, dict[str, Any] | None] = {}
        for record in records:
            if record.key is None:
                continue
            group_id = record.key.decode("utf-8", "replace")
            try:
                updates[group_id] = None if record.value is None else json.loads(record.value)
            except ValueError:
                log.warning("unreadable snapshot at %s:%s:%s", record.topic, record.partition, record.offset)
        if updates and self._loop is not None:
            self._loop.call_soon_threadsafe(self._apply_snapshots, updates)

    def _apply_snapshots(self, updates: dict[str, dict[str, Any] | None]) -> None:
        for group_id, snapshot in updates.items():
            if snapshot is None:
                self.snapshots.pop(group_id, None)
            else:
                self.snapshots[group_id] = snapshot

    async def stop(self) -> None:
        for thread in self._threads:
            thread.stopping.set()
        for thread in self._threads:
            await asyncio.to_thread(thread.join, 5)
        if self._producer is not None:
            await asyncio.to_thread(self._producer.close, 5)

    def status(self) -> str:
        return (f"engine=topics produced={self.produced} answered={self.answered} "
                f"send_failures={self.send_failures} groups={len(self.snapshots)}")
