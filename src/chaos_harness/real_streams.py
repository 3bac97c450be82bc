"""`coordinator chaos --group-type streams --clients kafka-streams`: the chaos scenarios with Kafka Streams 4.4
instances (`streams_process`, the JVM program `StreamsCounter`) in a streams group, through the gateway or, for
comparison, straight at a plain Kafka 4.4 broker.

The application counts records by key through a repartition topic (two subtopologies: `0` reads the input and
re-keys, `1` counts into a store with a changelog and writes every new count out); the input has one partition per
instance, so each instance runs two tasks. A producer keeps writing records whose values are one of `KEYS` words
(the keys the application counts by) while the scenario runs:
- `rolling-bounce`: each instance in turn stopped (SIGTERM: `close()`) and started again, the next one once the
  group has settled. A static member's close is a temporary leave (-2) and it comes back at once, within its session;
  a dynamic one leaves (-1), so it comes back only once the group has settled without it (its tasks elsewhere).
- `crash` (or `crash-longer-than-session`): instance 0 killed (SIGKILL), started again once the group has settled
  without it (its session ran out and its tasks moved).

What is judged, the same way whether the coordinator is the gateway's or the broker's: the group as its coordinator
describes it (StreamsGroupDescribe, polled: `streams_group`): group epoch bumps from the first stable group to the
end, and task movements (active tasks that went to another instance: the instance id of a static member, the process
id, kept in the state directory across restarts, of a dynamic one); and the output, record by record: each input
record yields one output record carrying its key's new count, so without a crash a key's output counts are exactly
1, 2, ..., n (n: the records produced with that key). After a kill Kafka's at-least-once allows re-processing: the
records past the group's committed offsets on the killed instance's input and repartition partitions, up to their
ends at the kill, may count twice; so each final count must lie between n and n plus that key's re-processable
records, and equal n for a key with none. The run ends once the group has committed every input and repartition
record (the output is complete then), and reports the instances' client log warnings.
"""

from __future__ import annotations

import argparse
import contextlib
import secrets
import shutil
import sys
import tempfile
import threading
import time
from collections import Counter
from collections.abc import Callable, Iterator, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

from kafka import KafkaAdminClient, KafkaConsumer, KafkaProducer, TopicPartition
from kafka.admin import ConfigResource, ConfigResourceType, NewTopic, OffsetSpec

from kafka_gateway.errors import GatewayError
from kafka_jvm.build import JvmUnavailable, missing_tools
from kafka_jvm.cluster import KafkaCluster, KafkaStartError

from .gateway_stack import GatewayStack, gateway_stack
from .run import write_report
from .streams_group import Movements, describe, ownership, settled
from .streams_process import StreamsProcess, log_warnings

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

CLIENTS = ("kafka-streams",)
SCENARIOS = ("rolling-bounce", "crash", "crash-longer-than-session")
COORDINATORS = ("gateway", "broker")
KEYS = tuple(f"key-{n:02d}" for n in range(12))
RECORDS_PER_S = 100
STORE = "counts"  # StreamsCounter's store: its topics are <application id>-counts-repartition and -changelog
# Per engine: the streams group's session and heartbeat interval (the coordinator's settings, PROTOCOL.md section 10).
# A static instance's restart (a JVM start, then its join) must fit in its session: 5-10 s on a loaded 2-core machine.
TIMINGS: dict[str, dict[str, int]] = {
    "local": {"session_timeout_ms": 20_000, "heartbeat_interval_ms": 500},
    "spark": {"session_timeout_ms": 45_000, "heartbeat_interval_ms": 5_000},
}
SETTLE_LIMIT_S = 60.0  # beyond the session: how long a group may take to form or settle
POLL_S = 0.1  # how often the coordinator's description is read


def repartition_topic(application_id: str) -> str:
    return f"{application_id}-{STORE}-repartition"


class RealStreamsChaos:
    """One scenario with Kafka Streams instances; `run()` returns the report.

    `coordinator`: "gateway" (a gateway in front of the `engine`, the in-process one or the streaming job, on the
    broker `bootstrap_servers` or an embedded one) or "broker" (the instances and the describes go straight to
    `bootstrap_servers`, a Kafka 4.4 broker, whose group configs `streams.session.timeout.ms` and
    `streams.heartbeat.interval.ms` are set to the run's timings: the broker's lower bounds must allow them).
    """

    def __init__(self, bootstrap_servers: str | None, scenario: str, members: int = 3, *,
                 membership: str = "static", coordinator: str = "gateway", engine: str = "local",
                 timings: Mapping[str, int] | None = None, engine_config: Mapping[str, Any] | None = None,
                 spark: SparkSession | None = None, work_dir: Path | None = None) -> None:
        if scenario not in SCENARIOS or members < 2 or membership not in ("static", "dynamic") \
                or coordinator not in COORDINATORS or engine not in TIMINGS:
            raise ValueError(f"scenario {scenario!r}, {members} members, membership {membership!r}, coordinator "
                             f"{coordinator!r}, engine {engine!r}: not a run")
        if coordinator == "broker" and bootstrap_servers is None:
            raise ValueError("a run straight at a broker needs its bootstrap servers")
        unknown = set(timings or {}) - set(TIMINGS[engine])
        if unknown:
            raise ValueError(f"unknown timings {sorted(unknown)}: expected {sorted(TIMINGS[engine])}")
        chosen = {**TIMINGS[engine], **(timings or {})}
        self.bootstrap_servers, self.scenario, self.members = bootstrap_servers, scenario, members
        self.membership, self.coordinator_kind, self.engine, self.spark = membership, coordinator, engine, spark
        self.session_timeout_ms = chosen["session_timeout_ms"]
        self.heartbeat_interval_ms = chosen["heartbeat_interval_ms"]
        self.settle_limit_s = 2 * self.session_timeout_ms / 1000 + SETTLE_LIMIT_S
        self.engine_config = {"group.streams.session.timeout.ms": self.session_timeout_ms,
                              "group.streams.heartbeat.interval.ms": self.heartbeat_interval_ms,
                              "group.streams.initial.rebalance.delay.ms": 0, **(engine_config or {})}
        suffix = secrets.token_hex(4)
        self.application_id = f"chaos-streams-{suffix}"
        self.input, self.output = f"{self.application_id}.in", f"{self.application_id}.out"
        self.partitions = members
        self._own_work_dir = work_dir is None
        self.work_dir = work_dir or Path(tempfile.mkdtemp(prefix="chaos-streams-"))
        self.produced: list[tuple[int, int, str]] = []  # (partition, offset, key), once the producer stopped
        self.processes: list[StreamsProcess] = []
        self.current: list[StreamsProcess] = []
        self.timeline: list[dict[str, Any]] = []
        self._sent: list[tuple[Any, str]] = []  # (the send's future, the record's key)
        self.reprocessable: Counter[str] = Counter()  # key -> records that a kill left re-processable
        self.movements = Movements()
        self.epochs: list[tuple[int, int]] = []  # (group epoch, assignment epoch), as each description changed them
        self._t0 = time.time()
        self._stop_producing = threading.Event()
        self._stop_polling = threading.Event()
        self._broker = ""
        self._gateway: GatewayStack | None = None
        self._address = ""  # where the instances and the describes go: the gateway, or the broker

    # ---- the run ----------------------------------------------------------------------------------------------

    def run(self) -> dict[str, Any]:
        with contextlib.ExitStack() as stack:
            if self.coordinator_kind == "gateway":
                self._gateway = stack.enter_context(gateway_stack(
                    self.engine, self.engine_config, bootstrap_servers=self.bootstrap_servers, spark=self.spark))
                self._broker, self._address = self._gateway.bootstrap_servers, self._gateway.gateway.address
            else:
                assert self.bootstrap_servers is not None
                self._broker = self._address = self.bootstrap_servers
            stack.callback(self._clean_up)  # the instances go before the gateway they talk to
            self._prepare()
            self._t0 = time.time()
            producer = threading.Thread(target=self._produce, name="chaos-streams-producer", daemon=True)
            producer.start()
            self.current = [self._start(i) for i in range(self.members)]
            self._wait(lambda: self._settled(self.members), self.settle_limit_s, "the group to form")
            stable = describe(self._address, self.application_id)
            self._note("stable", None)
            self.movements.observe(stable)
            before = ownership(stable)
            poller = threading.Thread(target=self._poll, name="chaos-streams-describe", daemon=True)
            poller.start()
            self._scenario()
            self._stop_producing.set()
            producer.join()
            self.produced = self._acknowledged()
            settled_at_end = self._wait(lambda: self._settled(self.members) and self._all_committed(),
                                        self.settle_limit_s, None)
            self._stop_polling.set()
            poller.join()
            final = describe(self._address, self.application_id)
            self.movements.observe(final)
            self._note("settled" if settled_at_end else "not settled", None)
            return self._report(stable, before, final, settled_at_end)
        raise AssertionError("unreachable")  # the ExitStack does not swallow exceptions

    def _prepare(self) -> None:
        admin = KafkaAdminClient(bootstrap_servers=self._broker, client_id="chaos-streams-admin")
        try:
            admin.create_topics([NewTopic(self.input, self.partitions, 1), NewTopic(self.output, self.partitions, 1)])
            if self.coordinator_kind == "broker":  # the broker's group settings, as the engine's are configured
                admin.alter_configs([ConfigResource(ConfigResourceType.GROUP, self.application_id, configs={
                    "streams.session.timeout.ms": str(self.session_timeout_ms),
                    "streams.heartbeat.interval.ms": str(self.heartbeat_interval_ms)})], incremental=True)
        finally:
            admin.close()

    def _clean_up(self) -> None:
        self._stop_producing.set()
        self._stop_polling.set()
        for process in self.processes:
            process.kill()
        if self._own_work_dir:
            shutil.rmtree(self.work_dir, ignore_errors=True)

    # ---- scenarios --------------------------------------------------------------------------------------------

    def _scenario(self) -> None:
        if self.scenario == "rolling-bounce":
            for index in range(self.members):
                self._bounce(index)
        else:
            self._crash()

    def _bounce(self, index: int) -> None:
        self.current[index].stop()
        self._note("stop", index)
        if self.membership == "dynamic":
            self._wait(lambda: self._settled(self.members - 1), self.settle_limit_s, "the group to settle without it")
            self._note("settled without", index)
        self.current[index] = self._start(index)
        self._wait(lambda: self._settled(self.members), self.settle_limit_s, "the group to settle")
        self._note("settled", index)

    def _crash(self) -> None:
        held = self.current[0].tasks()  # as the instance runs them: the group has settled
        self.current[0].kill()
        self._note("crash", 0)
        self._count_reprocessable(held)
        self._wait(lambda: self._settled(self.members - 1), self.settle_limit_s, "the group to settle without it")
        self._note("settled without", 0)
        self.current[0] = self._start(0)
        self._wait(lambda: self._settled(self.members), self.settle_limit_s, "the group to settle")
        self._note("settled", 0)

    def _count_reprocessable(self, tasks: list[str]) -> None:
        """The records a new owner of the killed instance's `tasks` may process again: on each of their input
        (subtopology 0) and repartition (subtopology 1) partitions, those from the group's committed offset to the
        partition's end, read now that the instance is dead and before its session ends (nobody else commits
        there meanwhile, and nothing below the committed offset is re-read)."""
        repartition = repartition_topic(self.application_id)
        partitions = [TopicPartition(self.input if task.startswith("0_") else repartition, int(task.split("_")[1]))
                      for task in tasks]
        committed, ends = self._committed_and_ends(partitions)
        ranges = {tp: (committed[tp].offset if tp in committed and committed[tp].offset >= 0 else 0, ends[tp].offset)
                  for tp in partitions}
        acknowledged = self._acknowledged()  # every record below those ends was sent before they were read
        for tp, (start, end) in ranges.items():
            if tp.topic == self.input:
                self.reprocessable.update(key for p, offset, key in acknowledged if p == tp.partition
                                          and start <= offset < end)
            else:
                self.reprocessable.update(key for _, key in _read(self._broker, {tp: (start, end)}))
        self._note("re-processable", 0, ranges={f"{tp.topic}:{tp.partition}": r for tp, r in ranges.items()})

    # ---- instances and the producer ----------------------------------------------------------------------------

    def _identity(self, index: int) -> str | None:
        return f"{self.application_id}-{index}" if self.membership == "static" else None

    def _start(self, index: int) -> StreamsProcess:
        process = StreamsProcess(self._address, self.application_id, self.input, self.output,
                                 self.work_dir / f"instance-{index}", self._identity(index))
        self.processes.append(process)
        self._note("start", index)
        return process

    def _produce(self) -> None:
        producer = KafkaProducer(bootstrap_servers=self._broker, acks="all", linger_ms=5)
        try:
            while not self._stop_producing.wait(1 / RECORDS_PER_S):
                number = len(self._sent)
                key = KEYS[number % len(KEYS)]
                self._sent.append((producer.send(self.input, key=str(number).encode(), value=key.encode(),
                                                 partition=number % self.partitions), key))
            producer.flush(30)
        finally:
            producer.close()

    def _acknowledged(self) -> list[tuple[int, int, str]]:
        """(partition, offset, key) of every record sent so far, once the broker acknowledged it."""
        return [(metadata.partition, metadata.offset, key) for future, key in list(self._sent)
                if (metadata := future.get(timeout=30))]

    # ---- observing --------------------------------------------------------------------------------------------

    def _note(self, kind: str, instance: int | None, **details: Any) -> None:
        self.timeline.append({"at_ms": round((time.time() - self._t0) * 1000), "kind": kind, "instance": instance,
                              **details})

    def _settled(self, members: int) -> bool:
        """The group stable with `members` members, all tasks owned, and every running instance RUNNING."""
        running = [p for p in self.current if p.stop_requested is None]
        if not all(p.running() for p in running):
            return False
        entry = describe(self._address, self.application_id)
        return settled(entry, members) and len(ownership(entry)) == 2 * self.partitions

    def _committed_and_ends(self, partitions: list[TopicPartition]) -> tuple[dict[TopicPartition, Any],
                                                                              dict[TopicPartition, Any]]:
        """The group's committed offsets of `partitions` and their log ends, as the coordinator and the cluster say."""
        admin = KafkaAdminClient(bootstrap_servers=self._address, client_id="chaos-streams-admin")
        try:
            committed = admin.list_group_offsets({self.application_id: partitions})[self.application_id]
            ends = admin.list_partition_offsets({tp: OffsetSpec.LATEST for tp in partitions})
        finally:
            admin.close()
        return committed, ends

    def _all_committed(self) -> bool:
        """The group committed every record of the input and repartition topics (so the output is complete)."""
        topics = (self.input, repartition_topic(self.application_id))
        partitions = [TopicPartition(topic, p) for topic in topics for p in range(self.partitions)]
        committed, ends = self._committed_and_ends(partitions)
        return all(tp in committed and committed[tp].offset >= ends[tp].offset for tp in partitions)

    def _poll(self) -> None:
        while not self._stop_polling.wait(POLL_S):
            with contextlib.suppress(OSError, ValueError, GatewayError):
                entry = describe(self._address, self.application_id)
                self.movements.observe(entry)
                epochs = (entry["group_epoch"], entry["assignment_epoch"])
                if not self.epochs or self.epochs[-1] != epochs:
                    self.epochs.append(epochs)

    def _wait(self, condition: Callable[[], bool], limit_s: float, what: str | None) -> bool:
        deadline = time.monotonic() + limit_s
        while not condition():
            failed = [p for p in self.current if p.errors()]
            if failed:
                raise RuntimeError(f"a Kafka Streams instance failed: {failed[0].errors()}")
            if time.monotonic() > deadline:
                if what is not None:
                    raise TimeoutError(f"timed out after {limit_s:.0f} s waiting for {what}")
                return False
            time.sleep(POLL_S)
        return True

    # ---- the report -------------------------------------------------------------------------------------------

    def _report(self, stable: Mapping[str, Any], before: Mapping[str, str], final: Mapping[str, Any],
                settled_at_end: bool) -> dict[str, Any]:
        produced = Counter(key for _, _, key in self.produced)
        counts = _counts_by_key(self._broker, self.output, self.partitions)
        exact = sorted(key for key in produced if counts.get(key) == [str(n) for n in range(1, produced[key] + 1)])
        final_counts = {key: int(values[-1]) for key, values in counts.items()}
        lost = sorted(key for key, n in produced.items() if final_counts.get(key, 0) < n)
        over = {key: final_counts[key] - n for key, n in produced.items() if final_counts.get(key, 0) > n}
        beyond = sorted(key for key, extra in over.items() if extra > self.reprocessable[key])
        return {
            "scenario": self.scenario, "clients": "kafka-streams", "members": self.members,
            "membership": self.membership, "coordinator": self.coordinator_kind, "engine": self.engine,
            "session_timeout_ms": self.session_timeout_ms, "heartbeat_interval_ms": self.heartbeat_interval_ms,
            "group_epoch_bumps": final["group_epoch"] - stable["group_epoch"],
            "assignment_epoch_bumps": final["assignment_epoch"] - stable["assignment_epoch"],
            "epochs": self.epochs,
            "task_movements": len(self.movements.moves),
            "moves": [list(move) for move in self.movements.moves],
            "tasks_before": dict(before), "tasks_after": ownership(final),
            "records_produced": len(self.produced), "output_records": sum(len(v) for v in counts.values()),
            "keys": len(produced), "keys_exact": len(exact), "keys_not_exact": sorted(set(produced) - set(exact)),
            "keys_lost": lost, "keys_over_counted": over,
            "keys_over_counted_beyond_reprocessable": beyond,
            "reprocessable": dict(sorted(self.reprocessable.items())),
            "final": {"settled": settled_at_end, "group_state": final["group_state"],
                      "group_epoch": final["group_epoch"], "assignment_epoch": final["assignment_epoch"],
                      "members": len(final["members"] or [])},
            "gateway": self._gateway_figures(),
            "client_warnings": log_warnings(p.directory for p in self.current),
            "timeline": self.timeline,
        }

    def _gateway_figures(self) -> dict[str, Any]:
        """What the gateway saw of the clients (none for a run straight at a broker): the error codes it answered,
        per API; connections it closed, by reason (a request it does not serve, a frame it cannot read...); the
        internal topics it created and failed to; coordinator timeouts."""
        if self._gateway is None:
            return {}
        server = self._gateway.gateway.server
        assert server is not None
        counters: Counter[str] = self._gateway.gateway.call(lambda: Counter(server.gateway.counters))
        errors: dict[str, dict[str, int]] = {}
        for key, count in sorted(counters.items()):
            api, sep, code = key.partition("_error_")
            if sep:
                errors.setdefault(api, {})[code] = count
        return {"errors": errors,
                "connections_closed_for": {key.removeprefix("closed_"): count for key, count in sorted(counters.items())
                                           if key.startswith("closed_")},
                **{key: counters[key] for key in ("internal_topics_created", "internal_topic_errors",
                                                  "coordinator_timeouts")}}


def _read(bootstrap_servers: str, ranges: Mapping[TopicPartition, tuple[int, int]]) -> Iterator[tuple[int, str]]:
    """The records of each partition in [start, end), as (partition, key), in offset order per partition."""
    wanted = {tp: r for tp, r in ranges.items() if r[0] < r[1]}
    if not wanted:
        return
    consumer = KafkaConsumer(bootstrap_servers=bootstrap_servers, enable_auto_commit=False,
                             client_id="chaos-streams-reader")
    try:
        consumer.assign(list(wanted))
        for tp, (start, _) in wanted.items():
            consumer.seek(tp, start)
        positions = dict.fromkeys(wanted, -1)
        deadline = time.monotonic() + 30
        while any(positions[tp] < end - 1 for tp, (_, end) in wanted.items()) and time.monotonic() < deadline:
            for tp, records in consumer.poll(timeout_ms=500).items():
                for record in records:
                    if record.offset < wanted[tp][1]:
                        positions[tp] = record.offset
                        yield tp.partition, (record.key or b"").decode()
    finally:
        consumer.close()


def _counts_by_key(bootstrap_servers: str, topic: str, partitions: int) -> dict[str, list[str]]:
    """The output topic: each key's counts in the order written (a key's records share a partition)."""
    parts = [TopicPartition(topic, p) for p in range(partitions)]
    counts: dict[str, list[str]] = {}
    consumer = KafkaConsumer(bootstrap_servers=bootstrap_servers, enable_auto_commit=False,
                             client_id="chaos-streams-reader")
    try:
        ends = consumer.end_offsets(parts)
        consumer.assign(parts)
        consumer.seek_to_beginning(*parts)
        deadline = time.monotonic() + 30
        while any(consumer.position(tp) < ends[tp] for tp in parts) and time.monotonic() < deadline:
            for records in consumer.poll(timeout_ms=500).values():
                for record in records:
                    counts.setdefault((record.key or b"").decode(), []).append((record.value or b"").decode())
    finally:
        consumer.close()
    return counts


# The broker `coordinator chaos --clients kafka-streams` starts when given none: Kafka's defaults, but no initial delay
# (the engine's is set to 0 too) and group settings short enough for the run's timings (a run straight at it).
BROKER_PROPERTIES = {"group.initial.rebalance.delay.ms": "0", "group.streams.initial.rebalance.delay.ms": "0",
                     "group.streams.min.session.timeout.ms": "1000", "group.streams.min.heartbeat.interval.ms": "100"}


def main(args: argparse.Namespace) -> int:
    """`coordinator chaos --group-type streams --clients kafka-streams`: 0 when the run completed, 2 for a run that
    cannot be, 1 if it failed."""
    def refuse(reason: str) -> int:
        print(f"coordinator chaos --clients kafka-streams: {reason}", file=sys.stderr)
        return 2

    if args.group_type != "streams" or args.clients not in CLIENTS:
        return refuse("Kafka Streams instances form a streams group: --group-type streams --clients kafka-streams")
    if args.membership not in ("static", "dynamic") or args.scenario not in SCENARIOS or args.plot:
        return refuse(f"--static or --dynamic, scenarios {', '.join(SCENARIOS)}, no --plot")
    if missing := missing_tools():
        return refuse("Kafka Streams needs " + "; ".join(missing))
    engine = "spark" if args.engine == "spark" else "local"
    timings: dict[str, int] = {}
    for item in args.overrides:
        key, sep, value = item.partition("=")
        if not sep or key not in TIMINGS[engine] or not value.isdigit():
            return refuse(f"--set {item!r}: expected one of {sorted(TIMINGS[engine])}=N")
        timings[key] = int(value)
    try:
        with contextlib.ExitStack() as stack:
            bootstrap = args.bootstrap_servers or \
                stack.enter_context(KafkaCluster(1, BROKER_PROPERTIES)).bootstrap_servers
            report = RealStreamsChaos(bootstrap, args.scenario, args.members, membership=args.membership,
                                      engine=engine, timings=timings).run()
    except ValueError as exc:
        return refuse(str(exc))
    except (TimeoutError, OSError, RuntimeError, JvmUnavailable, KafkaStartError) as exc:
        print(f"coordinator chaos --clients kafka-streams: the run failed: {exc}", file=sys.stderr)
        return 1
    write_report(report, args.report)
    print(f"{report['scenario']} of {report['members']} {report['membership']} Kafka Streams instances: "
          f"{report['group_epoch_bumps']} group epoch bumps, {report['task_movements']} task movements, "
          f"{report['keys_exact']} of {report['keys']} counts exact, lost {report['keys_lost']}, "
          f"final {report['final']}", file=sys.stderr)
    return 0
