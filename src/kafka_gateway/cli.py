"""`coordinator gateway`: the command's arguments and its entry point.

The project's CLI attaches it with two calls, so the command can move with the CLI:

    gateway = commands.add_parser("gateway", ...)
    kafka_gateway.cli.add_arguments(gateway)
    gateway.set_defaults(handler=lambda args: kafka_gateway.cli.run(args, settings_for(args)))
"""

from __future__ import annotations

import argparse
import asyncio
import logging
import signal
import sys
from collections.abc import Mapping
from typing import Any

from .gateway import Limits
from .runner import GatewayOptions, host_port, serve

DEFAULT_LIMITS = Limits()

DESCRIPTION = (
    "Speaks the Kafka protocol so that unmodified Kafka clients use this coordinator: it listens on --listen "
    "and on one port per upstream node (the ports after it, for the node ids the upstream lists at start), "
    "answers as every group's coordinator, turns the eight group APIs into envelopes (the in-process engine "
    "with --engine local, else the coordinator's topics), and proxies every other API to the upstream node "
    "of the port it came in on, rewriting every answer that names a broker. Status on a log line every "
    "--status-interval seconds; Ctrl-C or SIGTERM stops it."
)


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """The gateway's own flags (the configuration flags, --conf and --set, come from the CLI)."""
    parser.add_argument("--listen", default="127.0.0.1:9092", metavar="HOST:PORT",
                        help="address to accept Kafka clients on (port 0: any free port); default 127.0.0.1:9092")
    parser.add_argument("--bootstrap-servers", required=True, metavar="HOST:PORT",
                        help="the upstream broker (one broker: the embedded Tansu or a single Kafka node)")
    parser.add_argument("--engine", choices=["local", "topics"], default="topics",
                        help="local: an in-process engine (tests, demos); topics (default): the coordinator's "
                             "request and response topics, answered by the streaming job")
    parser.add_argument("--advertise", metavar="HOST",
                        help="host name clients should connect to (default: the --listen host)")
    parser.add_argument("--coordinator-timeout-ms", type=int, default=DEFAULT_LIMITS.coordinator_timeout_ms,
                        metavar="MS",
                        help="answer COORDINATOR_NOT_AVAILABLE when the coordinator has not answered within this "
                             "(must stay below the clients' request timeouts: kafka-python 30 s); default %(default)s")
    parser.add_argument("--join-grace-ms", type=int, default=DEFAULT_LIMITS.join_grace_ms, metavar="MS",
                        help="a JoinGroup waits its rebalance timeout plus this; default %(default)s")
    parser.add_argument("--max-frame-bytes", type=int, default=DEFAULT_LIMITS.max_frame_bytes, metavar="N",
                        help="largest request accepted (Kafka's socket.request.max.bytes); default %(default)s")
    parser.add_argument("--status-interval", type=float, default=10.0, metavar="SECONDS",
                        help="seconds between status lines (0: none); default %(default)s")


def options_from(args: argparse.Namespace, settings: Mapping[str, Any]) -> GatewayOptions:
    """GatewayOptions from parsed arguments and the project's settings; ValueError on a bad value."""
    listen = host_port(args.listen)
    upstream = host_port(args.bootstrap_servers)
    limits = Limits(max_frame_bytes=args.max_frame_bytes, coordinator_timeout_ms=args.coordinator_timeout_ms,
                    join_grace_ms=args.join_grace_ms)
    return GatewayOptions(listen=listen, upstream=upstream, engine=args.engine, advertised_host=args.advertise,
                          limits=limits, settings={**settings, "bootstrap.servers": args.bootstrap_servers},
                          status_interval_s=args.status_interval)


def run(args: argparse.Namespace, settings: Mapping[str, Any] | None = None) -> int:
    """Runs the gateway until SIGINT or SIGTERM; 0 after a clean shutdown, 1 when it cannot start."""
    logging.basicConfig(level=logging.INFO, stream=sys.stderr, format="%(asctime)s %(levelname)s %(message)s")
    try:
        options = options_from(args, settings or {})
    except ValueError as exc:
        print(f"gateway: {exc}", file=sys.stderr)
        return 2

    async def main() -> None:
        stop = asyncio.Event()
        loop = asyncio.get_running_loop()
        for signum in (signal.SIGINT, signal.SIGTERM):
            loop.add_signal_handler(signum, stop.set)
        await serve(options, stop)

    try:
        asyncio.run(main())
    except (OSError, TimeoutError, ConnectionError) as exc:
        print(f"gateway: cannot start: {exc!r}. Is the upstream broker at {args.bootstrap_servers} running, "
              f"and is {args.listen} free?", file=sys.stderr)
        return 1
    return 0
