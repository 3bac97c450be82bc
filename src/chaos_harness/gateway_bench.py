"""The gateway's figures, measured with real consumer processes on a real broker (in-process engine).

    python -m chaos_harness.gateway_bench --embedded            # or --bootstrap-servers HOST:PORT
    python -m chaos_harness.gateway_bench --embedded --json     # the figures as one JSON line on stdout

For kafka-python and librdkafka each:
- `form_s`: 3 static consumers started together until each has its partitions and the engine has the
  group Stable (measured from the last consumer's `started` event, so interpreter start-up is not counted);
- `rejoin_s`: a member stopped and started again with its group.instance.id, from the new process's
  `started` event to its `assigned` event (the same partitions, no rebalance);
- `records_per_s` through the gateway (in a process of its own) and directly from the broker: one consumer
  reading a topic of `--records` records of `--record-bytes` bytes, first record to last.
Progress goes to stderr.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import socket
import subprocess
import sys
import time
import uuid
from collections.abc import Iterator, Sequence
from typing import Any

from kafka import KafkaAdminClient, KafkaProducer
from kafka.admin import NewTopic

from kafka_gateway.runner import BackgroundGateway, GatewayOptions, host_port
from streaming.broker import EmbeddedBroker

from .real_consumer import ConsumerProcess

LIBRARIES = ("kafka-python", "confluent")
PARTITIONS = 6


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


def _described(gateway: BackgroundGateway, group: str) -> Any:
    server = gateway.server
    assert server is not None
    return gateway.call(lambda: server.coordinator.engine.describe(group))  # type: ignore[attr-defined]


def measure_group(gateway: BackgroundGateway, bootstrap: str, library: str) -> dict[str, float]:
    """Seconds for 3 static consumers to form a group, and for a restarted one to get its partitions back."""
    topic, group = _topic(bootstrap, PARTITIONS), f"bench-{uuid.uuid4().hex[:8]}"
    members = [ConsumerProcess(library, gateway.address, group, topic, f"{library}-{i}") for i in range(3)]
    try:
        started = max(_first(m, "started") for m in members)
        deadline = time.monotonic() + 60
        while True:
            snapshot = _described(gateway, group)
            if (snapshot is not None and snapshot["state"] == "Stable" and len(snapshot["members"]) == 3
                    and all(m.assignment() is not None for m in members)):
                break
            if time.monotonic() > deadline:
                seen = {m.instance_id: [e["event"] for e in m.events if e["event"] != "records"][-6:] for m in members}
                raise TimeoutError(f"{library}: the group did not form: {snapshot}; the members saw {seen}")
            time.sleep(0.01)
        formed = max(_first(m, "assigned") for m in members) - started
        generation = snapshot["generation_id"]
        before = members[0].assignment()
        members[0].stop()
        again = ConsumerProcess(library, gateway.address, group, topic, members[0].instance_id)
        members[0] = again
        rejoined = _first(again, "assigned") - _first(again, "started")
        if again.assignment() != before or _described(gateway, group)["generation_id"] != generation:
            raise AssertionError(f"{library}: the restarted member was not given its partitions back as they were")
        return {"form_s": round(formed, 3), "rejoin_s": round(rejoined, 3)}
    finally:
        for member in members:
            member.kill()


@contextlib.contextmanager
def gateway_process(bootstrap: str) -> Iterator[str]:
    """A gateway in a process of its own (as in production), so the bench's own work does not slow it."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    process = subprocess.Popen([sys.executable, "-m", "kafka_gateway", "--listen", f"127.0.0.1:{port}",
                                "--bootstrap-servers", bootstrap, "--engine", "local", "--status-interval", "0"],
                               stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                               env={**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)})
    try:
        deadline = time.monotonic() + 30
        while True:
            try:
                socket.create_connection(("127.0.0.1", port), timeout=1).close()
                break
            except OSError:
                if process.poll() is not None or time.monotonic() > deadline:
                    raise RuntimeError("the gateway process did not start") from None
                time.sleep(0.1)
        yield f"127.0.0.1:{port}"
    finally:
        process.terminate()
        process.wait(30)


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


@contextlib.contextmanager
def _upstream(args: argparse.Namespace) -> Iterator[str]:
    if args.bootstrap_servers:
        yield args.bootstrap_servers
        return
    with EmbeddedBroker() as broker:
        yield broker.bootstrap_servers


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m chaos_harness.gateway_bench", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    where = parser.add_mutually_exclusive_group(required=True)
    where.add_argument("--embedded", action="store_true", help="start the embedded Tansu broker")
    where.add_argument("--bootstrap-servers", metavar="HOST:PORT", help="a single-broker upstream")
    parser.add_argument("--records", type=int, default=50_000)
    parser.add_argument("--record-bytes", type=int, default=200)
    parser.add_argument("--json", action="store_true", help="print the figures as one JSON line")
    args = parser.parse_args(argv)
    figures: dict[str, Any] = {}
    with _upstream(args) as bootstrap:
        options = GatewayOptions(listen=("127.0.0.1", 0), upstream=host_port(bootstrap), engine="local",
                                 settings={"group.initial.rebalance.delay.ms": 0}, status_interval_s=0)
        topic = _topic(bootstrap, 1)
        print(f"producing {args.records} records of {args.record_bytes} bytes", file=sys.stderr)
        _produce(bootstrap, topic, args.records, args.record_bytes)
        with BackgroundGateway(options) as gateway:
            for library in LIBRARIES:
                print(f"{library}: a static group of 3 and a restart", file=sys.stderr)
                figures[library] = measure_group(gateway, bootstrap, library)
        with gateway_process(bootstrap) as address:
            for library in LIBRARIES:
                print(f"{library}: the data path, through the gateway and direct", file=sys.stderr)
                figures[library]["records_per_s_gateway"] = measure_data_path(address, topic, args.records, library)
                figures[library]["records_per_s_direct"] = measure_data_path(bootstrap, topic, args.records, library)
    figures["records"], figures["record_bytes"] = args.records, args.record_bytes
    if args.json:
        print(json.dumps(figures))
    else:
        for library in LIBRARIES:
            f = figures[library]
            print(f"{library:13} group of 3 formed in {f['form_s']:.2f} s, restarted member back in "
                  f"{f['rejoin_s']:.2f} s; {f['records_per_s_gateway']:,.0f} records/s through the gateway, "
                  f"{f['records_per_s_direct']:,.0f} direct")
    return 0


if __name__ == "__main__":
    sys.exit(main())
