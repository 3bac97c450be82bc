"""`coordinator chaos --clients kafka-python|confluent|java|mixed`: the chaos scenarios with real client processes.

Real consumers (the `real_consumer` processes) read a topic a producer keeps filling, through a gateway
in front of the in-process engine (`--engine sim`, the default: the engine on the wall clock) or of the
streaming job (`--engine spark`), in real time (`gateway_stack`). Scenarios, as the simulated harness names
them:
- `rolling-bounce`: each member in turn stopped (SIGTERM: commit, close, no LeaveGroup) and started again
  `down_ms` later, `interval_ms` apart. Static members should cost no rebalance.
- `crash` (or `crash-longer-than-session`): member 0 killed (SIGKILL) and started again only after its
  session ran out: the group rebalances without it, then with it.
- `duplicate-instance`: a second process started with member 0's group.instance.id while the first runs:
  the newcomer takes the identity over and the first is fenced (FENCED_INSTANCE_ID).
The report has the simulated harness's headline fields, from what the clients and the gateway saw, the
same whichever engine: rebalances (generations completed after the group first stood, as the gateway
answered them), revocations (partitions revoked from a member that was not being stopped), assignment
changes (a member back with other partitions than before), unanswered (coordinator timeouts), errors and
latency per API (at the gateway), records read twice, the final group (ListGroups and DescribeGroups
through the gateway), and a timeline (`--plot` draws it); with the streaming job also its batches.
Sessions are Kafka's default 45 s with the streaming job (its answers come a micro-batch or more late),
6 s with the in-process engine.
"""

from __future__ import annotations

import argparse
import secrets
import sys
import threading
import time
from collections import Counter
from collections.abc import Callable, Iterator, Mapping
from typing import TYPE_CHECKING, Any

from kafka import KafkaAdminClient, KafkaProducer
from kafka.admin import NewTopic

from . import real_streams
from .gateway_stack import GatewayStack, gateway_stack, generation, read_group
from .real_consumer import LIBRARIES, ConsumerProcess, heartbeat_interval_ms, missing_library
from .run import write_report

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

SCENARIOS = ("rolling-bounce", "crash", "crash-longer-than-session", "duplicate-instance")
CLIENTS = (*LIBRARIES, "mixed")  # mixed: the libraries in turn
RECORDS_PER_S = 50
# Per engine: the clients' session (Kafka's default with the streaming job, whose timer-decided answers come
# lateness + a tick + micro-batches late), how long a bounced member stays down, the time between bounces.
TIMINGS: dict[str, dict[str, int]] = {
    "local": {"session_timeout_ms": 6_000, "down_ms": 1_000, "interval_ms": 2_000},
    "spark": {"session_timeout_ms": 45_000, "down_ms": 1_000, "interval_ms": 5_000},
}
# How long a group may take to form or settle, beyond twice the session (a rebalance may wait for one).
SETTLE_LIMIT_S = 60.0


class RealChaos:
    """One scenario with real clients; `run()` returns the report."""

    def __init__(self, bootstrap_servers: str | None, scenario: str, clients: str, members: int, *,
                 engine: str = "local", membership: str = "static", timings: Mapping[str, int] | None = None,
                 engine_config: Mapping[str, Any] | None = None, spark: SparkSession | None = None) -> None:
        if scenario not in SCENARIOS or clients not in CLIENTS or members < 2 or engine not in TIMINGS:
            raise ValueError(f"scenario {scenario!r}, clients {clients!r}, members {members}, engine {engine!r}: "
                             "not a run")
        if membership != "static" and scenario == "duplicate-instance":
            raise ValueError("duplicate-instance needs static members")
        for library in LIBRARIES if clients == "mixed" else (clients,):
            if missing := missing_library(library):
                raise ValueError(missing)
        unknown = set(timings or {}) - set(TIMINGS[engine])
        if unknown:
            raise ValueError(f"unknown timings {sorted(unknown)}: expected {sorted(TIMINGS[engine])}")
        chosen = {**TIMINGS[engine], **(timings or {})}
        self.bootstrap_servers, self.engine, self.spark = bootstrap_servers, engine, spark
        self.scenario, self.clients, self.members = scenario, clients, members
        self.membership, self.session_timeout_ms = membership, chosen["session_timeout_ms"]
        self.down_s, self.interval_s = chosen["down_ms"] / 1000, chosen["interval_ms"] / 1000
        self.settle_limit_s = 2 * self.session_timeout_ms / 1000 + SETTLE_LIMIT_S
        self._forming: tuple[int | None, float] = (None, 0.0)  # the generation the group stood at, and since when
        self.engine_config = {"group.initial.rebalance.delay.ms": 500, "group.min.session.timeout.ms": 1_000,
                              **(engine_config or {})}
        suffix = secrets.token_hex(4)
        self.group, self.topic, self.partitions = f"chaos-real-{suffix}", f"chaos-real-{suffix}.data", 2 * members
        self.processes: list[ConsumerProcess] = []
        self._member_of: dict[int, int] = {}  # id(process) -> member index
        self.current: list[ConsumerProcess] = []
        self.timeline: list[dict[str, Any]] = []
        self.produced = 0
        self._t0 = time.time()
        self._stop_producing = threading.Event()
        self.stack: GatewayStack  # while `run` runs

    def run(self) -> dict[str, Any]:
        with gateway_stack(self.engine, self.engine_config, bootstrap_servers=self.bootstrap_servers,
                           spark=self.spark) as stack:
            self.stack = stack
            admin = KafkaAdminClient(bootstrap_servers=stack.bootstrap_servers, client_id="chaos-admin")
            try:
                admin.create_topics([NewTopic(self.topic, self.partitions, 1)])
            finally:
                admin.close()
            self._t0 = time.time()
            producer = threading.Thread(target=self._produce, name="chaos-producer", daemon=True)
            producer.start()
            try:
                self.current = [self._start(i) for i in range(self.members)]
                self._wait(self._stood, self.settle_limit_s, "the group to form")
                self._note("stable", None)
                stable_at = time.time()
                before = {p.instance_id or str(i): p.assignment() for i, p in enumerate(self.current)}
                stable_generation = generation(stack, self.group)
                self._scenario()
                self._stop_producing.set()
                producer.join()
                settled = self._wait(lambda: self._settled() and self._all_read(), self.settle_limit_s, None)
                self._note("settled" if settled else "not settled", None)
                report = self._report(stable_at, stable_generation, before, settled)
            finally:
                self._stop_producing.set()
                for process in self.processes:
                    process.kill()
        return report

    # ---- scenarios -------------------------------------------------------------------------------------

    def _scenario(self) -> None:
        if self.scenario == "rolling-bounce":
            self._rolling_bounce()
        elif self.scenario == "duplicate-instance":
            self._duplicate_instance()
        else:
            self._crash()

    def _rolling_bounce(self) -> None:
        for index in range(self.members):
            self._stop(index)
            time.sleep(self.down_s)
            self.current[index] = self._start(index)
            time.sleep(self.interval_s)

    def _crash(self) -> None:
        self.current[0].kill()
        self._note("crash", 0)
        # Back only once the group has rebalanced without it (its session ran out): the survivors hold
        # every partition.
        if self._wait(self._survivors_hold_everything, self.settle_limit_s, None):
            self._note("rebalanced without", 0)
        self.current[0] = self._start(0)

    def _survivors_hold_everything(self) -> bool:
        assignments = [p.assignment() for p in self.current[1:]]
        return sorted(q for a in assignments for q in a or []) == list(range(self.partitions))

    def _duplicate_instance(self) -> None:
        duplicate = self._start(0)
        self._note("duplicate", 0)
        # The first process is fenced at its next commit or heartbeat after the newcomer took the identity.
        if self._wait(lambda: self._fenced() > 0, self.settle_limit_s, None):
            self._note("fenced", 0)
        original, self.current[0] = self.current[0], duplicate
        original.kill()  # a fenced consumer stops consuming, whatever it does after that

    def _fenced(self) -> int:
        return sum(count for key, count in self._counters().items() if key.endswith("_error_82"))

    # ---- members and the producer -------------------------------------------------------------------------

    def _library(self, index: int) -> str:
        if self.clients == "mixed":
            return LIBRARIES[index % len(LIBRARIES)]
        return self.clients

    def _instance(self, index: int) -> str | None:
        static = self.membership == "static" or (self.membership == "mixed" and index % 2 == 0)
        return f"{self.group}-{index}" if static else None

    def _start(self, index: int) -> ConsumerProcess:
        library = self._library(index)
        process = ConsumerProcess(library, self.stack.gateway.address, self.group, self.topic, self._instance(index),
                                  session_timeout_ms=self.session_timeout_ms,
                                  rebalance_timeout_ms=max(10_000, self.session_timeout_ms),
                                  client_id=f"chaos-{library}-{index}")
        self._member_of[id(process)] = index
        self.processes.append(process)
        self._note("start", index)
        return process

    def _stop(self, index: int) -> None:
        self.current[index].stop()
        self._note("stop", index)

    def _produce(self) -> None:
        producer = KafkaProducer(bootstrap_servers=self.stack.bootstrap_servers, linger_ms=10)
        try:
            while not self._stop_producing.wait(1 / RECORDS_PER_S):
                producer.send(self.topic, str(self.produced).encode(), partition=self.produced % self.partitions)
                self.produced += 1
            producer.flush(30)
        finally:
            producer.close()

    # ---- observing -------------------------------------------------------------------------------------

    def _note(self, kind: str, member: int | None) -> None:
        self.timeline.append({"at_ms": round((time.time() - self._t0) * 1000), "kind": kind, "member": member})

    def _stood(self) -> bool:
        """Settled, at one generation, for two heartbeat intervals: members that start a moment apart can form the
        group in two generations, the first holding every partition for a moment (its rebalance is the forming's,
        not the scenario's)."""
        current = generation(self.stack, self.group) if self._settled() else None
        now = time.monotonic()
        if current is None or current != self._forming[0]:
            self._forming = (current, now)
            return False
        return now - self._forming[1] >= 2 * heartbeat_interval_ms(self.session_timeout_ms) / 1000

    def _settled(self) -> bool:
        assignments = [p.assignment() for p in self.current]
        return all(a is not None for a in assignments) and \
            sorted(q for a in assignments for q in a or []) == list(range(self.partitions))

    def _all_read(self) -> bool:
        return len(self._read()) >= self.produced

    def _read(self) -> set[tuple[int, int]]:
        return {record for process in self.processes for record in process.records()}

    def _wait(self, condition: Callable[[], bool], limit_s: float, what: str | None) -> bool:
        deadline = time.monotonic() + limit_s
        while not condition():
            if time.monotonic() > deadline:
                if what is not None:
                    raise TimeoutError(f"timed out after {limit_s:.0f} s waiting for {what}")
                return False
            time.sleep(0.1)
        return True

    def _changes(self, stable_at: float) -> Iterator[tuple[ConsumerProcess, dict[str, Any]]]:
        for process in self.processes:
            until = process.stop_requested or float("inf")
            for event in list(process.events):
                if event["event"] in ("assigned", "revoked") and stable_at < event["t"] < until:
                    yield process, event

    def _counters(self) -> Counter[str]:
        server = self.stack.gateway.server
        assert server is not None
        counters: Counter[str] = self.stack.gateway.call(lambda: Counter(server.gateway.counters))
        return counters

    def _report(self, stable_at: float, stable_generation: int | None, before: Mapping[str, list[int] | None],
                settled: bool) -> dict[str, Any]:
        server = self.stack.gateway.server
        assert server is not None
        counters = self._counters()
        latencies: dict[str, list[int]] = self.stack.gateway.call(
            lambda: {api: sorted(samples) for api, samples in server.gateway.latencies_ms.items()})
        group = read_group(self.stack, self.group)
        revocations = [(p, e) for p, e in self._changes(stable_at) if e["event"] == "revoked" and e["partitions"]]
        after = {p.instance_id or str(i): p.assignment() for i, p in enumerate(self.current)}
        seen = [record for process in self.processes for record in process.records()]
        for process, event in self._changes(stable_at):
            self.timeline.append({"at_ms": round((event["t"] - self._t0) * 1000), "kind": event["event"],
                                  "member": self._member_of[id(process)],
                                  "partitions": event["partitions"]})
        self.timeline.sort(key=lambda e: e["at_ms"])
        errors: dict[str, dict[str, int]] = {}
        for key, count in counters.items():
            api, sep, code = key.partition("_error_")
            if sep:
                errors.setdefault(api, {})[code] = count
        rebalances = None if group["generation_id"] is None or stable_generation is None else \
            group["generation_id"] - stable_generation
        report = {
            "scenario": self.scenario, "clients": self.clients, "members": self.members,
            "membership": self.membership, "engine": self.engine, "session_timeout_ms": self.session_timeout_ms,
            "rebalances": rebalances,
            "revocations": len(revocations),
            "assignment_changes": sum(1 for key, partitions in before.items() if after.get(key) != partitions),
            "requests": counters["requests_coordinator"], "unanswered": counters["coordinator_timeouts"],
            "errors": errors,
            "latency_ms": {api: {"p50": s[len(s) // 2], "p99": s[min(len(s) - 1, len(s) * 99 // 100)], "max": s[-1]}
                           for api, s in sorted(latencies.items()) if s},
            "records_produced": self.produced, "records_read": len(set(seen)),
            "records_processed_twice": sum(n - 1 for n in Counter(seen).values() if n > 1),
            "final": {"settled": settled, **group},
            "timeline": self.timeline,
        }
        if self.stack.job is not None:
            report["job"] = self.stack.job.summary()
        return report


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """The flag that turns `coordinator chaos` to real clients."""
    local, spark = TIMINGS["local"], TIMINGS["spark"]
    parser.add_argument(
        "--clients", choices=(*CLIENTS, *real_streams.CLIENTS),
        help="run the scenario with real consumer processes (kafka-python, librdkafka, the Java client, or the "
             "three in turn) through "
             "`coordinator gateway`, in real time, in front of the in-process engine (--engine sim) or the "
             f"streaming job (--engine spark); scenarios {', '.join(SCENARIOS)}; --set session_timeout_ms / "
             f"down_ms / interval_ms (defaults: sim {local['session_timeout_ms']} / {local['down_ms']} / "
             f"{local['interval_ms']}, spark {spark['session_timeout_ms']} / {spark['down_ms']} / "
             f"{spark['interval_ms']}: Kafka's 45 s session, as the job answers a micro-batch or more late). "
             "Wall time: a rolling bounce takes the group's forming, members x (down + interval) and the "
             "settling; a crash longer than the session the session and two rebalances on top of the forming; "
             "a duplicate instance about as long as a rolling bounce. Measured on a loaded 2-core machine with 3 "
             "members: 16 s each with sim; with spark 3.5-4.5 min each, Spark's start and the job's first "
             "micro-batch (1-2 min) included. kafka-streams (with --group-type streams): Kafka Streams 4.4 "
             "instances (jvm/'s StreamsCounter, group.protocol=streams) counting by key through a repartition "
             "topic, one input partition each (e.g. --members 3); scenarios rolling-bounce, crash; --set "
             "session_timeout_ms / heartbeat_interval_ms of the streams group; on Apache Kafka 4.4 started for the "
             "run unless --bootstrap-servers; the report adds group epoch bumps, task movements and the counts "
             "checked record by record (chaos_harness.real_streams)")


def main(args: argparse.Namespace) -> int:
    """`coordinator chaos --clients ...`: 0 when the run completed, 2 for a run that cannot be, 1 if it failed."""
    if args.group_type == "streams" or args.clients in real_streams.CLIENTS:
        return real_streams.main(args)
    engine = "spark" if args.engine == "spark" else "local"
    timings: dict[str, int] = {}
    for item in args.overrides:
        key, sep, value = item.partition("=")
        if not sep or key not in TIMINGS[engine] or not value.isdigit():
            print(f"coordinator chaos --clients: --set {item!r}: expected one of {sorted(TIMINGS[engine])}=N",
                  file=sys.stderr)
            return 2
        timings[key] = int(value)
    try:
        chaos = RealChaos(args.bootstrap_servers, args.scenario, args.clients, args.members, engine=engine,
                          membership=args.membership, timings=timings)
    except ValueError as exc:
        print(f"coordinator chaos --clients: {exc}", file=sys.stderr)
        return 2
    try:
        report = chaos.run()
    except (TimeoutError, OSError, RuntimeError) as exc:
        print(f"coordinator chaos --clients: the run failed: {exc}", file=sys.stderr)
        return 1
    write_report(report, args.report)
    if args.plot:
        from .plot import plot_real_clients_report

        plot_real_clients_report(report, args.plot)
    print(f"{report['scenario']} with {report['clients']} clients: {report['rebalances']} rebalances, "
          f"{report['assignment_changes']} assignment changes, {report['unanswered']} unanswered, "
          f"{report['records_processed_twice']} records read twice, final {report['final']}", file=sys.stderr)
    return 0
