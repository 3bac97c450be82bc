"""The streaming job end to end: a real broker, a real Spark session, checked against the local engine.

Every test compares what the job wrote with `replay_local` of the same traffic (`tests.replays.assert_same`).
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import Any

import pyspark
import pytest
from kafka import KafkaConsumer, KafkaProducer, TopicPartition
from pyspark.errors import StreamingQueryException
from pyspark.sql import SparkSession

from coordinator_cli import main
from coordinator_job.broker import Consumer, log_end_offsets
from coordinator_job.live_job import ensure_topics, start_query
from coordinator_job.replay import ReplayResult, offset_tombstone, replay_local, replay_spark, tombstone
from coordinator_job.settings import APPLY_IN_PANDAS_WITH_STATE, STATEFUL_OPERATORS, TRANSFORM_WITH_STATE, load_settings
from coordinator_lab.traffic_gen import join_request
from coordinator_state import SIMULATION_EPOCH_MS as EPOCH_MS
from coordinator_state import Api, Invalid, decode_record, parse_raw, request_envelope, tick_envelope, to_json
from tests.replays import assert_same, keyed
from tests.traffic import HOSTILE, build_traffic, write_traffic

pytestmark = [pytest.mark.spark]
SUBMIT = Path(__file__).resolve().parents[2] / "src" / "coordinator_cli" / "submit.py"


@pytest.fixture(scope="module")
def full_traffic() -> list[bytes]:
    return build_traffic("full")


# transformWithState in batches of 40 (9 batches, not 17): each costs several seconds of CI time. Each operator once
# with a state key per group, once with groups sharing keys (test_state_buckets: the same answers without Spark).
@pytest.mark.parametrize(("operator", "records_per_batch", "buckets"), [(APPLY_IN_PANDAS_WITH_STATE, 20, 0),
                                                                         (APPLY_IN_PANDAS_WITH_STATE, 40, 3),
                                                                         (TRANSFORM_WITH_STATE, 40, 2)])
def test_spark_replay_in_small_batches_equals_the_local_replay(spark: SparkSession, tmp_path: Path,
                                                               full_traffic: list[bytes], operator: str,
                                                               records_per_batch: int, buckets: int) -> None:
    """State, timers and watermark carried across micro-batches (the engine's own tests cut the same traffic at
    every boundary through `run_group`; here it is Spark's state store and event-time timeouts or timers)."""
    settings = load_settings(overrides=[f"coordinator.stateful.operator={operator}",
                                        f"coordinator.state.buckets={buckets}"])
    expected = replay_local(full_traffic, settings)
    assert len(expected.snapshots) >= 2 and expected.dead_letters
    assert expected.offsets  # the simulated consumers commit
    # The admin's commits to "ledger": one stays, one expires.
    ledger = [json.loads(line) for key, line in expected.offsets.items() if key.startswith("ledger/")]
    assert [line.get("tombstone", False) for line in ledger] == [False, True]
    # The admin's deletions: "archive" gone with both its offsets, "orders" refused (it has members).
    assert expected.snapshots["archive"] == tombstone("archive") and "orders" in expected.snapshots
    assert [expected.offsets[f"archive/ledger-topic/{p}"] for p in (0, 1)] == [
        offset_tombstone(f"archive/ledger-topic/{p}") for p in (0, 1)]
    deletes = [json.loads(r)["body"] for r in expected.responses if json.loads(r)["api"] == "DeleteGroups"]
    assert [d["results"][0]["error"] for d in deletes] == ["NONE", "NON_EMPTY_GROUP"]
    actual = replay_spark(write_traffic(tmp_path / "traffic.jsonl", full_traffic), settings, records_per_batch, None,
                          None)
    assert_same(actual, expected)


@pytest.mark.parametrize("operator", STATEFUL_OPERATORS)
def test_a_timer_fires_once_the_watermark_reaches_its_deadline(spark: SparkSession, tmp_path: Path,
                                                               operator: str) -> None:
    """The timeout rule at its edge. The initial rebalance delay ends at D; the watermark is D - 1 in one
    micro-batch, exactly D in the last. The local replay answers the join at D (a timer is due at or before the
    watermark), so each operator must call the group then and not lose its timer the batch before:
    EventTimeTimeout fires strictly past its timeout, PySpark 4.3's event-time timers at their expiry."""
    settings = load_settings(overrides=[f"coordinator.stateful.operator={operator}"])
    deadline = EPOCH_MS + int(settings["group.initial.rebalance.delay.ms"])
    lateness = int(settings["coordinator.lateness.ms"])
    join = to_json(join_request("edge", 0, "", EPOCH_MS, 1, dynamic=False)).encode()

    def ticks(*watermarks: int) -> list[bytes]:
        return [to_json(tick_envelope(w + lateness)).encode() for w in watermarks]

    assert replay_local([join, *ticks(deadline - 1)], settings).responses == []  # the edge is exactly there
    traffic = [join, *ticks(deadline - 1, deadline)]
    expected = replay_local(traffic, settings)
    assert [json.loads(r)["api"] for r in expected.responses] == ["JoinGroup"]
    # Two records a batch: the join and the first tick (watermark 0), the second tick (watermark D - 1), then
    # the file's end-of-input batch (watermark D).
    actual = replay_spark(write_traffic(tmp_path / "edge.jsonl", traffic), settings, 2, None, None)
    assert_same(actual, expected)


def test_coordinator_replay_spark_writes_what_replay_local_writes(spark: SparkSession, tmp_path: Path,
                                                                  full_traffic: list[bytes],
                                                                  capsys: pytest.CaptureFixture[str]) -> None:
    """The whole file in one micro-batch, through the command line, compared by `coordinator diff`."""
    traffic = write_traffic(tmp_path / "traffic.jsonl", full_traffic)
    outputs, summaries = {}, {}
    for engine in ("local", "spark"):
        outputs[engine] = [tmp_path / f"{engine}.{kind}.jsonl" for kind in ("responses", "snapshots", "dead-letters")]
        responses, snapshots, dead_letters = map(str, outputs[engine])
        # The test session's shuffle partitions, so that the session is reused as it is.
        assert main(["replay", "--engine", engine, "--input", str(traffic), "--output", responses, "--snapshots",
                     snapshots, "--dead-letters", dead_letters, "--set", "coordinator.shuffle.partitions=2"]) == 0
        summaries[engine] = json.loads(capsys.readouterr().out.splitlines()[-1])
    # The traffic's own figures, whichever engine replays it.
    figures = ("records", "bad_lines", "late_requests")
    assert [summaries["local"][f] for f in figures] == [summaries["spark"][f] for f in figures] == [
        len(full_traffic), len(HOSTILE), 0]
    for local, spark_side in zip(outputs["local"], outputs["spark"], strict=True):
        assert main(["diff", str(local), str(spark_side)]) == 0, capsys.readouterr().out
    assert len(outputs["spark"][2].read_text().splitlines()) == len(HOSTILE)


def test_late_requests_are_processed_not_lost_but_may_be_answered_differently(spark: SparkSession,
                                                                                 tmp_path: Path) -> None:
    """With a request older than the watermark, the guarantee of identical answers no longer holds."""
    lines = [json.loads(line) for line in build_traffic("short") if line.startswith(b"{\"api\"")]
    late = dict(next(r for r in lines[5:] if r["api"] == "Heartbeat"))
    late["correlation_id"] = 999_999
    late["timestamp_ms"] = lines[0]["timestamp_ms"] - 60_000  # a minute before everything else
    traffic = [to_json(r).encode() for r in lines] + [to_json(late).encode()]
    settings = load_settings()
    local = replay_local(traffic, settings)
    # Two micro-batches: the late request comes in the second, after the first has moved the watermark.
    spark_run = replay_spark(write_traffic(tmp_path / "late.jsonl", traffic), settings, len(traffic) // 2, None, None)
    key = (late["reply_to"], 999_999)
    assert key in keyed(local.responses) and key in keyed(spark_run.responses)  # answered by both, never lost
    assert local.counts["late_requests"] == 1 and spark_run.counts["late_requests"] == 1


def test_a_join_phase_postponed_at_the_same_instant_does_not_stop_the_query(spark: SparkSession,
                                                                           tmp_path: Path) -> None:
    """Issue 17, defect 3: a group left with one static member that has not rejoined, whose rebalance timeout is
    0, postpones its join phase to the same instant (SEMANTICS.md T3a). The query goes on answering another
    group, and answers as the local replay, in micro-batches of 3 records (the leave and the other group's join
    in one)."""
    settings = load_settings()

    def request(api: str, group: str, client: str, t: int, version: int, **body: Any) -> bytes:
        return to_json(request_envelope(api, {"group_id": group, **body}, version=version, correlation_id=t - EPOCH_MS,
                                        client_id=client, reply_to=client, timestamp_ms=t)).encode()

    def join(group: str, client: str, t: int, rebalance: int, version: int, instance: str | None = None) -> bytes:
        return request(Api.JOIN_GROUP, group, client, t, version, session_timeout_ms=10_000,
                       rebalance_timeout_ms=rebalance, member_id="", group_instance_id=instance,
                       protocol_type="consumer", protocols=[{"name": "range", "metadata": ""}])

    joined = [join("stuck", "d", EPOCH_MS, 5000, 3), join("stuck", "s", EPOCH_MS + 1, 0, 9, "i-s"),
              to_json(tick_envelope(EPOCH_MS + 8000)).encode()]  # the join phase ends at 5000 ms
    [answer] = [json.loads(r) for r in replay_local(joined, settings).responses if json.loads(r)["reply_to"] == "d"]
    traffic = [*joined,
               request(Api.LEAVE_GROUP, "stuck", "d", EPOCH_MS + 9000, 5,
                       members=[{"member_id": answer["body"]["member_id"], "group_instance_id": None}]),
               join("other", "o", EPOCH_MS + 9100, 5000, 3),
               to_json(tick_envelope(EPOCH_MS + 30_000)).encode()]
    expected = replay_local(traffic, settings)
    [other] = [json.loads(r) for r in expected.responses if json.loads(r)["reply_to"] == "o"]
    assert other["body"]["generation_id"] == 1  # another group, answered after the postponement
    stuck = json.loads(expected.snapshots["stuck"])
    assert (stuck["state"], stuck["generation_id"]) == ("Empty", 2)  # once the static member's session ended
    actual = replay_spark(write_traffic(tmp_path / "postponed.jsonl", traffic), settings, 3, None, None)
    assert_same(actual, expected)


Record = tuple[str | None, str | None]  # key, value


class TopicTail:
    """A topic read from its beginning, incrementally: each record is fetched once, `records` grows."""

    def __init__(self, bootstrap: str, topic: str) -> None:
        self.topic = topic
        self.records: list[Record] = []
        self._consumer = KafkaConsumer(bootstrap_servers=bootstrap, enable_auto_commit=False)
        self._probe = Consumer(bootstrap_servers=bootstrap, enable_auto_commit=False)  # for the end offsets
        partitions = [TopicPartition(topic, int(p)) for p in log_end_offsets(self._probe, topic)]
        self._consumer.assign(partitions)
        self._consumer.seek_to_beginning(*partitions)

    def fetch(self, timeout_ms: int) -> None:
        """Reads what has arrived, waiting on the broker up to `timeout_ms` for something."""
        for batch in self._consumer.poll(timeout_ms=timeout_ms).values():
            self.records += [(r.key and r.key.decode(), r.value and r.value.decode()) for r in batch]

    def read_to_end(self) -> list[Record]:
        """Every record up to the topic's end as it is now."""
        for partition, end in log_end_offsets(self._probe, self.topic).items():
            while self._consumer.position(TopicPartition(self.topic, int(partition))) < end:
                self.fetch(1000)
        return self.records

    def close(self) -> None:
        self._consumer.close()
        self._probe.close()


def wait_until(condition: Callable[[], bool], tails: Sequence[TopicTail], timeout_s: float, what: str) -> None:
    """Reads the tails as records arrive until `condition()` holds (AssertionError after `timeout_s`)."""
    deadline = time.monotonic() + timeout_s
    while not condition():
        remaining_ms = int((deadline - time.monotonic()) * 1000)
        if remaining_ms <= 0:
            raise AssertionError(f"timed out after {timeout_s} s waiting for {what}")
        for tail in tails:
            tail.fetch(min(remaining_ms, 1000) // len(tails))


class Cluster:
    """The coordinator's topics on the test broker, and what the job wrote to them."""

    def __init__(self, bootstrap: str, unique: Any) -> None:
        self.settings = load_settings(overrides=[
            f"bootstrap.servers={bootstrap}",
            f"coordinator.requests.topic={unique('requests')}",
            f"coordinator.responses.topic={unique('responses')}",
            f"coordinator.snapshots.topic={unique('snapshots')}",
            f"coordinator.dead.letters.topic={unique('dead-letters')}",
            f"coordinator.offsets.topic={unique('offsets')}",
            # Requests of different groups sit in different partitions and Spark's watermark is global, so
            # a backlog read unevenly across partitions would make some requests late. Each half of the
            # recorded traffic is read in one batch here; replays exercise small batches (one partition).
            "coordinator.max.records.per.batch=100000",
        ])
        ensure_topics(self.settings)
        self.producer = KafkaProducer(bootstrap_servers=bootstrap, acks="all")
        self.tails: dict[str, TopicTail] = {}

    def produce(self, lines: list[bytes], skew_ms: int = 0) -> None:
        """Each line keyed by its group id, stamped by the broker with its own event time (plus skew_ms)."""
        last = None
        for line in lines:
            parsed = parse_raw(line)
            envelope = decode_record(line)
            if isinstance(envelope, dict) and type(envelope.get("timestamp_ms")) is int:
                last = envelope["timestamp_ms"]
            key = getattr(parsed, "group_id", None)
            self.producer.send(self.settings["coordinator.requests.topic"], value=line,
                               key=None if key is None else key.encode(),
                               timestamp_ms=None if last is None else last + skew_ms)
        self.producer.flush()

    def end_of_input(self, lines: list[bytes]) -> None:
        """A last tick in a batch of its own, so that the final watermark fires its timers (as a replay does)."""
        high = max(p.timestamp_ms for p in map(parse_raw, lines) if not isinstance(p, Invalid))
        self.produce([to_json(tick_envelope(high)).encode()])

    def tail(self, topic_key: str) -> TopicTail:
        """The reader of one of the coordinator's topics (one per topic, kept for the test)."""
        if topic_key not in self.tails:
            self.tails[topic_key] = TopicTail(self.settings["bootstrap.servers"], self.settings[topic_key])
        return self.tails[topic_key]

    def read(self, topic_key: str) -> list[Record]:
        """Every record of the topic written so far."""
        return list(self.tail(topic_key).read_to_end())

    def result(self) -> ReplayResult:
        return as_result(self.read("coordinator.responses.topic"), self.read("coordinator.snapshots.topic"),
                         self.read("coordinator.dead.letters.topic"), self.read("coordinator.offsets.topic"))

    def close(self) -> None:
        self.producer.close()
        for tail in self.tails.values():
            tail.close()


def as_result(responses: list[Record], snapshots: list[Record], dead_letters: list[Record],
              offsets: list[Record]) -> ReplayResult:
    """What the job wrote to its topics, as a replay's result."""
    result = ReplayResult()
    result.responses = [value for _, value in responses if value]
    result.dead_letters = [value for _, value in dead_letters if value]
    for key, value in snapshots:
        assert key is not None
        # Per group, the snapshot topic is in order (one partition per key); keep the last.
        result.snapshots[key] = tombstone(key) if value is None else value
    for key, value in offsets:
        assert key is not None
        result.offsets[key] = offset_tombstone(key) if value is None else value  # likewise per offset
    result.offsets = dict(sorted(result.offsets.items()))
    return result


@pytest.fixture
def cluster(kafka_bootstrap: str, unique_topic: Any) -> Iterator[Cluster]:
    topics = Cluster(kafka_bootstrap, unique_topic)
    yield topics
    topics.close()


def run_until_processed(spark: SparkSession, cluster: Cluster, checkpoint: Path, produce: Any) -> None:
    query = start_query(spark, cluster.settings, checkpoint)
    try:
        produce()
        query.processAllAvailable()
        assert query.exception() is None
    finally:
        query.stop()


def dead_lettered(letters: list[str]) -> list[tuple[int, str]]:
    """The records behind dead letters. Dead letters name their Kafka position, the local replay its line; and
    a record without timestamp_ms gets the broker's timestamp live, so its reason differs."""
    return sorted((json.loads(d)["size"], json.loads(d)["sha256"]) for d in letters)


def assert_answered_like_the_engine_in_two_runs(spark: SparkSession, cluster: Cluster, checkpoint: Path,
                                                 full_traffic: list[bytes], between: Callable[[], None]) -> None:
    """Runs the query on half the traffic, calls `between`, runs it again on the same checkpoint on the rest: both
    runs together answer every request exactly once, as the local replay does."""
    half = len(full_traffic) // 2
    run_until_processed(spark, cluster, checkpoint, lambda: cluster.produce(full_traffic[:half]))
    assert cluster.read("coordinator.responses.topic")
    between()

    def second_half() -> None:
        cluster.produce(full_traffic[half:])
        cluster.end_of_input(full_traffic)

    run_until_processed(spark, cluster, checkpoint, second_half)
    expected = replay_local(full_traffic, cluster.settings)
    actual = cluster.result()
    assert len(actual.responses) == len(expected.responses)  # a clean stop writes nothing twice
    assert dead_lettered(actual.dead_letters) == dead_lettered(expected.dead_letters)
    actual.dead_letters = expected.dead_letters
    assert_same(actual, expected)


@pytest.mark.kafka
def test_transform_with_state_stopped_and_started_again_on_its_checkpoint_loses_and_repeats_nothing(
        spark: SparkSession, cluster: Cluster, tmp_path: Path, full_traffic: list[bytes]) -> None:
    """Stopped between micro-batches and started again on the same checkpoint, the query carries its groups'
    state, timers and source offsets over: both runs together answer every request exactly once, as the local
    replay does. The checkpoint then refuses the other operator, whose state it cannot read. (The default
    operator's restarts are the chaos restart's and the killed job's tests.)"""
    operator = cluster.settings["coordinator.stateful.operator"] = TRANSFORM_WITH_STATE
    checkpoint = tmp_path / "checkpoint"
    assert_answered_like_the_engine_in_two_runs(spark, cluster, checkpoint, full_traffic, between=lambda: None)

    other = next(o for o in STATEFUL_OPERATORS if o != operator)
    query = start_query(spark, {**cluster.settings, "coordinator.stateful.operator": other}, checkpoint)
    try:
        cluster.produce(full_traffic[:1])
        # Spark's own check names the operator in the checkpoint and the one started on it.
        with pytest.raises(StreamingQueryException, match="STREAMING_STATEFUL_OPERATOR_NOT_MATCH_IN_STATE_METADATA"):
            query.processAllAvailable()
    finally:
        query.stop()


@pytest.mark.kafka
def test_a_checkpoint_keeps_its_state_store_when_the_setting_changes(
        spark: SparkSession, cluster: Cluster, tmp_path: Path, full_traffic: list[bytes]) -> None:
    """The two stores cannot read each other's files: started again under the other `coordinator.state.store`,
    the query goes on in the store its checkpoint recorded, with every group's state (as the local replay)."""
    cluster.settings["coordinator.state.store"] = "rocksdb"
    assert_answered_like_the_engine_in_two_runs(
        spark, cluster, tmp_path / "checkpoint", full_traffic,
        between=lambda: cluster.settings.update({"coordinator.state.store": "hdfs"}))


@pytest.mark.kafka
def test_live_job_answers_like_the_engine_and_dead_letters_hostile_records(
        spark: SparkSession, cluster: Cluster, tmp_path: Path, full_traffic: list[bytes]) -> None:
    skewed = json.loads(full_traffic[1])
    skewed["correlation_id"] = 424242

    def produce() -> None:
        cluster.produce(full_traffic)
        cluster.produce([to_json(skewed).encode()], skew_ms=60_000)  # a client clock a minute off
        cluster.end_of_input(full_traffic)

    run_until_processed(spark, cluster, tmp_path / "checkpoint", produce)
    expected = replay_local(full_traffic, cluster.settings)
    actual = cluster.result()
    refused = keyed(actual.responses).pop((skewed["reply_to"], 424242))
    assert json.loads(refused)["body"]["error"] == "INVALID_REQUEST"
    skew_letters = [d for d in actual.dead_letters if "max.clock.skew" in json.loads(d)["reason"]]
    assert len(skew_letters) == 1
    actual.dead_letters.remove(skew_letters[0])
    actual.responses = [r for r in actual.responses if json.loads(r)["correlation_id"] != 424242]
    assert dead_lettered(actual.dead_letters) == dead_lettered(expected.dead_letters)
    assert len(actual.dead_letters) == len(HOSTILE) and all(json.loads(d)["reason"] for d in actual.dead_letters)
    actual.dead_letters = expected.dead_letters
    assert_same(actual, expected)
    quiet = json.loads(actual.snapshots["quiet"])
    assert quiet["members"] == [] and quiet["state"] == "Empty"  # expired on ticks alone: its client was silent


def spark_submit_env() -> dict[str, str]:
    """spark-submit from the pip-installed PySpark, running this interpreter everywhere."""
    return {**os.environ, "SPARK_HOME": str(Path(pyspark.__file__).parent), "PYSPARK_PYTHON": sys.executable,
            "PYSPARK_DRIVER_PYTHON": sys.executable}


@pytest.mark.kafka
def test_a_killed_job_restarted_on_its_checkpoint_answers_every_request(
        kafka_bootstrap: str, cluster: Cluster, tmp_path: Path, full_traffic: list[bytes]) -> None:
    """The job submitted by spark-submit to two executor processes (Kafka source, state and sink across
    processes), killed with SIGKILL (every JVM included) mid-run, then restarted: nothing accepted is lost."""
    overrides = [item for key in ("coordinator.requests.topic", "coordinator.responses.topic",
                                  "coordinator.snapshots.topic", "coordinator.dead.letters.topic",
                                  "coordinator.offsets.topic", "coordinator.max.records.per.batch")
                 for item in ("--set", f"{key}={cluster.settings[key]}")]
    # The recorded traffic carries its own clock: no wall-clock ticks from the job during this test.
    command = [str(Path(sys.executable).parent / "spark-submit"), "--master", "local-cluster[2,1,1024]", str(SUBMIT),
               "run", "--bootstrap-servers", kafka_bootstrap, "--checkpoint", str(tmp_path / "checkpoint"),
               "--set", "coordinator.tick.interval.ms=3600000", *overrides]
    local = replay_local(full_traffic, cluster.settings)
    expected = keyed(local.responses)
    half = len(full_traffic) // 2

    responses = cluster.tail("coordinator.responses.topic")
    snapshots = cluster.tail("coordinator.snapshots.topic")

    def answered() -> int:
        return len(keyed([v for _, v in responses.records if v]))

    def start() -> subprocess.Popen[bytes]:
        return subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                                start_new_session=True, cwd=tmp_path, env=spark_submit_env())

    cluster.produce(full_traffic[:half])
    job = start()
    try:
        wait_until(lambda: answered() > 0, [responses], 300, "the first answers")
        cluster.produce(full_traffic[half:])
        os.killpg(job.pid, signal.SIGKILL)
        job.wait(timeout=30)
        responses.read_to_end()
        before = answered()
        job = start()
        cluster.end_of_input(full_traffic)
        wait_until(lambda: answered() == len(expected)
                   and as_result(responses.records, snapshots.records, [], []).snapshots == local.snapshots,
                   [responses, snapshots], 300, "every request to be answered and every group's final snapshot")
    finally:
        os.killpg(job.pid, signal.SIGKILL)
        job.wait(timeout=30)
    assert before < len(expected)
    actual = cluster.result()
    assert keyed(actual.responses) == expected
    assert actual.offsets == local.offsets
