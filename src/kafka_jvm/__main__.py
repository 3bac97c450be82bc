"""`python -m kafka_jvm build`: fetch Apache Kafka 4.4 from Maven Central and build jvm/ (./dev runs it), or say what
is missing and that the embedded Tansu broker stands in. `python -m kafka_jvm broker [--nodes 3]`: run Apache Kafka
4.4 on loopback until Ctrl-C, printing its bootstrap servers."""

from __future__ import annotations

import argparse
import contextlib
import signal
import sys
import threading

from kafka_jvm.build import JvmUnavailable, ensure_built, missing_tools
from kafka_jvm.cluster import KafkaCluster


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m kafka_jvm", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    commands = parser.add_subparsers(dest="command", required=True)
    commands.add_parser("build", help="build jvm/ (Kafka 4.4's classpath and the project's JVM programs)")
    broker = commands.add_parser("broker", help="run Apache Kafka 4.4 on loopback until Ctrl-C")
    broker.add_argument("--nodes", type=int, choices=(1, 3), default=1, help="KRaft combined nodes (default 1)")
    args = parser.parse_args(argv)
    if args.command == "build":
        missing = missing_tools()
        if missing:
            print("Apache Kafka 4.4 cannot run here (missing: " + "; ".join(missing) + "); the embedded Tansu broker "
                  "stands in for it", file=sys.stderr)
            return 0
        print("building jvm/: Apache Kafka 4.4 from Maven Central (the first time: about a minute)", file=sys.stderr)
        try:
            print(ensure_built(quiet=True))
        except JvmUnavailable as exc:
            print(exc, file=sys.stderr)
            return 1
        return 0
    stop = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: stop.set())
    with KafkaCluster(args.nodes) as cluster:
        print(f"Apache Kafka 4.4 on {cluster.bootstrap_servers} (logs in {cluster.work_dir}); Ctrl-C stops it",
              flush=True)
        with contextlib.suppress(KeyboardInterrupt):
            stop.wait()
    return 0


if __name__ == "__main__":
    sys.exit(main())
