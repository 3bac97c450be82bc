"""The gateway's figures, measured with real consumer processes on a real broker.

    python -m coordinator_lab.gateway_bench --embedded            # or --bootstrap-servers HOST:PORT
    python -m coordinator_lab.gateway_bench --embedded --json     # the figures as one JSON line on stdout
    python -m coordinator_lab.gateway_bench --embedded --engines local --records 0   # group figures, no Spark

For each engine (`--engines`: the in-process engine and the streaming job, in one run, one after the
other on the same broker: `gateway_stack`), and for kafka-python and librdkafka each, with the clients'
session `--session-timeout-ms` (Kafka's default 45 s; heartbeats every 3 s):
- `form_s`: 3 static consumers started together until each has its partitions (measured from the last
  consumer's `started` event, so interpreter start-up is not counted); then checked through the gateway:
  Stable with the 3 members (DescribeGroups);
- `rejoin_s`: a member stopped and started again with its group.instance.id, from the new process's
  `started` event to its `assigned` event (checked: the same partitions, the same generation);
- the load average (1 min) when the engine's figures were taken: the machine may be shared; with the
  streaming job also its micro-batches' median and p95 duration, which every answer waits for.
Then, unless `--records 0`, `records_per_s` through the gateway (in a process of its own, in-process
engine: the data path does not reach the coordinator) and directly from the broker: one consumer reading
a topic of `--records` records of `--record-bytes` bytes, first record to last. Progress goes to stderr.
"""

from __future__ import annotations

import contextlib
import json
import os
import sys
import time
import uuid
from collections.abc import Iterator, Sequence
from typing import Any

from kafka import KafkaAdminClient, KafkaProducer
from kafka.admin import NewTopic

from chaos_harness.gateway_stack import ENGINES, GatewayStack, gateway_stack, generation, read_group
from chaos_harness.real_consumer import ConsumerProcess
from kafka_jvm.embedded import broker_or_embedded

from .gateway_fuzz import GatewayProcess
from .measuring import command_parser

LIBRARIES = ("kafka-python", "confluent")
PARTITIONS = 6
# The streaming job answers a micro-batch or more late, each join and sync: a generous bound to form.
FORM_LIMIT_S = 180.0


def _topic(bootstrap: str, partitions: int) -> str:
    name = f"gateway-bench-{uuid.uuid4().hex[:8]}"
    admin = KafkaAdminClient(bootstrap_servers=bootstrap, client_id="gateway-bench")
    try:
        admin.create_topics([NewTopic(name, partitions, 1)])
    finally:
        admin.close()
    return name


def _produce(bootstrap: str, topic: str, count: int, size: int) -> None:
    producer = KafkaProducer(bootstrap_servers=bootstrap, linger_ms=20, batch_size=262144)
    value = b"x" * size
    for _ in range(count):
        producer.send(topic, value)
    producer.flush(120)
    producer.close()


def _first(consumer: ConsumerProcess, event: str, timeout_s: float = 60) -> float:
    if not consumer.wait_for(lambda events: any(e["event"] == event for e in events), timeout_s):
        raise TimeoutError(f"{consumer.instance_id}: no {event!r} event within {timeout_s} s")
    return float(next(e["t"] for e in consumer.events if e["event"] == event))


def measure_group(stack: GatewayStack, bootstrap: str, library: str,
                  session_timeout_ms: int) -> dict[str, float]:
    """Seconds for 3 static consumers to form a group, and for a restarted one to get its partitions back."""
    topic, group = _topic(bootstrap, PARTITIONS), f"bench-{uuid.uuid4().hex[:8]}"

    def member(instance_id: str) -> ConsumerProcess:
        return ConsumerProcess(library, stack.gateway.address, group, topic, instance_id,
                               session_timeout_ms=session_timeout_ms,
                               rebalance_timeout_ms=max(session_timeout_ms, 20_000))

    members = [member(f"{library}-{i}") for i in range(3)]
    try:
        started = max(_first(m, "started") for m in members)
        deadline = time.monotonic() + FORM_LIMIT_S
        while not (sorted(p for m in members for p in m.assignment() or []) == list(range(PARTITIONS))
                   and generation(stack, group) is not None):
            if time.monotonic() > deadline:
                seen = {m.instance_id: [e["event"] for e in m.events if e["event"] != "records"][-6:] for m in members}
                raise TimeoutError(f"{library}: the group did not form; the members saw {seen}")
            time.sleep(0.01)
        formed = max(_first(m, "assigned") for m in members) - started
        stable = read_group(stack, group)
        if (stable["state"], stable["members"]) != ("Stable", 3):
            raise AssertionError(f"{library}: every member has its partitions, but the group is {stable}")
        before = members[0].assignment()
        members[0].stop()
        again = member(str(members[0].instance_id))
        members[0] = again
        rejoined = _first(again, "assigned", FORM_LIMIT_S) - _first(again, "started")
        if again.assignment() != before or generation(stack, group) != stable["generation_id"]:
            raise AssertionError(f"{library}: the restarted member was not given its partitions back as they were")
        return {"form_s": round(formed, 3), "rejoin_s": round(rejoined, 3)}
    finally:
        for m in members:
            m.kill()


@contextlib.contextmanager
def gateway_process(bootstrap: str) -> Iterator[str]:
    """A gateway in a process of its own (as in production), so the bench's own work does not slow it."""
    gateway = GatewayProcess(bootstrap, status_interval_s=0)
    try:
        gateway.wait_ready(timeout_s=30)
        yield gateway.address
    finally:
        gateway.stop()
        gateway.log_path.unlink(missing_ok=True)


def measure_data_path(address: str, topic: str, records: int, library: str) -> float:
    """Records per second one consumer reads from `address`, first record to last."""
    consumer = ConsumerProcess(library, address, f"bench-read-{uuid.uuid4().hex[:8]}", topic, None)
    try:
        if not consumer.wait_for(lambda events: len(consumer.records()) >= records, 300):
            raise TimeoutError(f"{library}: read {len(consumer.records())} of {records} records")
        times = [e["t"] for e in consumer.events if e["event"] == "records"]
        return float(round(records / max(times[-1] - times[0], 1e-6)))
    finally:
        consumer.kill()


def _load_average() -> float:
    return round(os.getloadavg()[0], 2)


def main(argv: Sequence[str] | None = None) -> int:
    parser = command_parser("coordinator_lab.gateway_bench", __doc__,
                            "start an embedded broker (Apache Kafka 4.4; Tansu without Maven)",
                            "a single-broker upstream")
    parser.add_argument("--engines", default=",".join(ENGINES),
                        help=f"comma-separated, from {', '.join(ENGINES)} (default: both)")
    parser.add_argument("--session-timeout-ms", type=int, default=45_000)
    parser.add_argument("--records", type=int, default=50_000, help="for the data path; 0 skips it")
    parser.add_argument("--record-bytes", type=int, default=200)
    parser.add_argument("--json", action="store_true", help="print the figures as one JSON line")
    args = parser.parse_args(argv)
    engines = [e.strip() for e in args.engines.split(",") if e.strip()]
    if not engines or set(engines) - set(ENGINES):
        parser.error(f"--engines {args.engines!r}: expected a comma-separated list from {', '.join(ENGINES)}")
    figures: dict[str, Any] = {"session_timeout_ms": args.session_timeout_ms}
    with broker_or_embedded(args.bootstrap_servers) as bootstrap:
        for engine in engines:
            print(f"engine {engine}: starting", file=sys.stderr)
            with gateway_stack(engine, {"group.initial.rebalance.delay.ms": 0}, bootstrap_servers=bootstrap) as stack:
                figures[engine] = {}
                for library in LIBRARIES:
                    print(f"engine {engine}, {library}: a static group of 3 and a restart", file=sys.stderr)
                    figures[engine][library] = {**measure_group(stack, bootstrap, library,
                                                                args.session_timeout_ms),
                                                "load_average": _load_average()}
                if stack.job is not None:
                    # Every answer of the job waits for a micro-batch: its duration explains the figures.
                    job = stack.job.summary()
                    figures[engine]["job"] = {k: job[k] for k in ("batches", "batch_ms_median", "batch_ms_p95")}
        if args.records > 0:
            topic = _topic(bootstrap, 1)
            print(f"producing {args.records} records of {args.record_bytes} bytes", file=sys.stderr)
            _produce(bootstrap, topic, args.records, args.record_bytes)
            figures["data_path"] = {"records": args.records, "record_bytes": args.record_bytes}
            with gateway_process(bootstrap) as address:
                for library in LIBRARIES:
                    print(f"{library}: the data path, through the gateway and direct", file=sys.stderr)
                    figures["data_path"][library] = {
                        "records_per_s_gateway": measure_data_path(address, topic, args.records, library),
                        "records_per_s_direct": measure_data_path(bootstrap, topic, args.records, library),
                        "load_average": _load_average()}
    if args.json:
        print(json.dumps(figures))
        return 0
    print(f"clients' session {args.session_timeout_ms} ms")
    for engine in engines:
        for library in LIBRARIES:
            f = figures[engine][library]
            print(f"{engine:6} {library:13} group of 3 formed in {f['form_s']:.2f} s, restarted member back in "
                  f"{f['rejoin_s']:.2f} s (load average {f['load_average']})")
        if "job" in figures[engine]:
            print(f"{engine:6} micro-batches meanwhile: {figures[engine]['job']}")
    for library in LIBRARIES if args.records > 0 else ():
        f = figures["data_path"][library]
        print(f"{library:13} {f['records_per_s_gateway']:,.0f} records/s through the gateway, "
              f"{f['records_per_s_direct']:,.0f} direct (load average {f['load_average']})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
