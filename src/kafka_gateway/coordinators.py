"""Where the gateway's envelopes go: an in-process engine, or the coordinator's Kafka topics.

Both take request envelopes with `submit` and hand every response envelope to the `deliver` callback on
the event loop, in the order decided.
- `LocalEngine` (`--engine local`): a `LocalCoordinator` in this process, its clock moved by the wall
  clock every `tick_ms`, so that sessions expire while every client is silent. Its calls run one at a time,
  in order, on a thread of their own, so a slow call never holds the event loop: other connections are
  served meanwhile, and the gateway answers COORDINATOR_NOT_AVAILABLE at each request's bound.
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
import queue
import threading
import time
from collections.abc import Callable, Mapping
from concurrent.futures import Future
from typing import Any, Protocol, TypeVar

from kafka import KafkaConsumer, KafkaProducer, TopicPartition
from kafka.errors import KafkaError
from kafka.partitioner.default import murmur2

from coordinator_metrics import census_entry
from coordinator_state import Invalid, ListGroups, LocalCoordinator, invalid_response, parse_request, to_json
from coordinator_state.envelope import API, Api, answer_list_groups, response_partition, routing_group_id
from coordinator_state.group_types import snapshot_of

log = logging.getLogger(__name__)

Deliver = Callable[[list[dict[str, Any]]], None]
Clock = Callable[[], int]


class Coordinator(Protocol):
    """What the gateway's shell needs from a coordinator."""

    async def start(self, deliver: Deliver) -> None: ...

    def submit(self, envelope: dict[str, Any]) -> None: ...

    async def stop(self) -> None: ...

    def status(self) -> str: ...

    def group_states(self) -> Mapping[str, tuple[str, int]]:
        """Every group's (state, generation), for the metrics (called from another thread)."""
        ...


T = TypeVar("T")


class _Worker:
    """One daemon thread running calls one at a time, in submission order. A daemon, so that a call that never
    returns cannot keep the process from exiting (a ThreadPoolExecutor's threads are joined at exit)."""

    def __init__(self, name: str) -> None:
        self._calls: queue.SimpleQueue[tuple[Future[Any], Callable[[], Any]] | None] = queue.SimpleQueue()
        self._thread = threading.Thread(target=self._run, name=name, daemon=True)
        self.running_since: float | None = None  # monotonic time the current call started
        self._thread.start()

    def call(self, function: Callable[[], T]) -> Future[T]:
        future: Future[T] = Future()
        self._calls.put((future, function))
        return future

    def _run(self) -> None:
        while (item := self._calls.get()) is not None:
            future, function = item
            if not future.set_running_or_notify_cancel():
                continue
            self.running_since = time.monotonic()
            try:
                future.set_result(function())
            except BaseException as exc:  # handed to whoever waits on the future
                future.set_exception(exc)
            finally:
                self.running_since = None

    def stop(self) -> None:
        self._calls.put(None)


class LocalEngine:
    """The engine in this process (tests, demos): its calls on a worker thread, timers on the wall clock.

    At most `max_queued_calls` requests wait for the engine; beyond that a request is dropped (logged), and the
    gateway answers COORDINATOR_NOT_AVAILABLE at its bound, as when the job's request topic cannot be written.
    A call running longer than `slow_call_s` is logged."""

    INSPECT_TIMEOUT_S = 10.0  # a look at the groups waits at most this for the engine's current call

    def __init__(self, config: Mapping[str, Any], clock_ms: Clock, tick_ms: int = 100,
                 max_queued_calls: int = 10_000, slow_call_s: float = 5.0) -> None:
        self.engine = LocalCoordinator(config)
        self._clock_ms = clock_ms
        self._tick_s = tick_ms / 1000
        self.max_queued_calls = max_queued_calls
        self.slow_call_s = slow_call_s
        self.queued = 0
        self.dropped = 0
        self.slow_calls = 0
        self._deliver: Deliver | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._worker: _Worker | None = None
        self._ticker: asyncio.Task[None] | None = None
        self._tick_queued = False
        self._slow_call_logged: float | None = None

    async def start(self, deliver: Deliver) -> None:
        self._deliver = deliver
        self._loop = asyncio.get_running_loop()
        self._worker = _Worker("local-engine")
        self.engine.advance_to(self._clock_ms())
        self._ticker = asyncio.create_task(self._tick(), name="local-engine-clock")

    def submit(self, envelope: dict[str, Any]) -> None:
        if self.queued >= self.max_queued_calls:
            self.dropped += 1
            if self.dropped % 1000 == 1:  # the first of every thousand: a flood says so without flooding the log
                log.warning("%d requests already wait for the engine: requests are dropped (%d so far; their "
                            "clients get COORDINATOR_NOT_AVAILABLE and retry)", self.queued, self.dropped)
            return
        self._call(lambda: self.engine.handle(envelope))

    def inspect(self, function: Callable[[LocalCoordinator], T]) -> Future[T]:
        """Runs `function(engine)` between the engine's calls (from any thread): a consistent look at its state."""
        assert self._worker is not None, "the engine is not started"
        return self._worker.call(lambda: function(self.engine))

    def group_states(self) -> Mapping[str, tuple[str, int]]:
        def states(engine: LocalCoordinator) -> dict[str, tuple[str, int]]:
            return {group_id: entry for group_id, group in engine.groups.items()
                    if (entry := census_entry(snapshot_of(group))) is not None}

        return self.inspect(states).result(self.INSPECT_TIMEOUT_S)

    def _call(self, function: Callable[[], list[dict[str, Any]]], on_done: Callable[[], None] | None = None) -> None:
        assert self._worker is not None and self._loop is not None, "the engine is not started"
        self.queued += 1
        loop = self._loop

        def run() -> list[dict[str, Any]]:
            responses = function()
            # The engine keeps every offset change and refused record for callers that replay; nobody here reads
            # them, and kept they would grow without bound.
            self.engine.drain_offset_changes()
            self.engine.invalid.clear()
            return responses

        def done(future: Future[list[dict[str, Any]]]) -> None:
            self.queued -= 1
            if on_done is not None:
                on_done()
            self._delivered(future)

        def hand_to_loop(future: Future[list[dict[str, Any]]]) -> None:
            with contextlib.suppress(RuntimeError):  # the loop closed (the gateway stopped): nobody to answer
                loop.call_soon_threadsafe(done, future)

        self._worker.call(run).add_done_callback(hand_to_loop)

    def _delivered(self, future: Future[list[dict[str, Any]]]) -> None:
        """On the loop: the answers of one engine call go to the gateway; a failure is logged, and the next call
        goes on."""
        try:
            responses = future.result()
            if responses and self._deliver is not None:
                self._deliver(responses)
        except Exception:
            log.exception("an engine call or the delivery of its answers failed; the engine goes on")

    async def _tick(self) -> None:
        while True:
            await asyncio.sleep(self._tick_s)
            try:
                self._watch()
                if not self._tick_queued:  # one clock call waits at most, however long the engine is busy
                    self._tick_queued = True
                    self._call(lambda: self.engine.advance_to(self._clock_ms()), self._tick_done)
            except Exception:
                log.exception("the engine's clock failed to tick; it ticks again in %.1f s", self._tick_s)

    def _tick_done(self) -> None:
        self._tick_queued = False

    def _watch(self) -> None:
        """Logs a call that has been running for `slow_call_s`, once per call."""
        since = self._worker.running_since if self._worker is not None else None
        if since is None or since == self._slow_call_logged or time.monotonic() - since < self.slow_call_s:
            return
        self._slow_call_logged = since
        self.slow_calls += 1
        log.warning("an engine call has been running for over %.0f s; meanwhile the gateway serves other "
                    "connections and answers group requests COORDINATOR_NOT_AVAILABLE at their bounds",
                    self.slow_call_s)

    async def stop(self) -> None:
        if self._ticker is not None:
            self._ticker.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._ticker
        if self._worker is not None:
            self._worker.stop()

    def status(self) -> str:
        busy = self._worker.running_since if self._worker is not None else None
        busy_s = 0.0 if busy is None else time.monotonic() - busy
        return (f"engine=local groups={len(self.engine.groups)} engine_requests={self.engine.counters['requests']} "
                f"engine_queued={self.queued} engine_dropped={self.dropped} engine_busy_s={busy_s:.1f} "
                f"engine_slow_calls={self.slow_calls}")


class _PollThread(threading.Thread):
    """Polls one kafka-python consumer until stopped, handing each batch of records to `on_records`; a failure
    (of the poll or of `on_records`) is logged, and polling goes on a second later."""

    RETRY_S = 1.0

    def __init__(self, name: str, consumer: Any, on_records: Callable[[list[Any]], None]) -> None:
        super().__init__(name=name, daemon=True)
        self.consumer = consumer
        self.on_records = on_records
        self.stopping = threading.Event()
        self.failures = 0

    def run(self) -> None:
        try:
            while not self.stopping.is_set():
                try:
                    batch = [r for records in self.consumer.poll(timeout_ms=200).values() for r in records]
                    if batch:
                        self.on_records(batch)
                except Exception:
                    self.failures += 1
                    log.exception("%s: polling failed; it goes on in %.0f s", self.name, self.RETRY_S)
                    self.stopping.wait(self.RETRY_S)
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
            log.warning("cannot produce a %s request: %r", envelope.get(API), exc)
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

    def group_states(self) -> Mapping[str, tuple[str, int]]:
        snapshots = list(self.snapshots.items())  # one step: the loop updates them meanwhile
        return {group_id: entry for group_id, snapshot in snapshots if (entry := census_entry(snapshot)) is not None}

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
