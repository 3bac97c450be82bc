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
import os
import signal
import sys
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from coordinator_metrics import LISTEN_KEY as METRICS_KEY
from coordinator_metrics import metrics_address

from . import listeners as listener_keys
from .gateway import Limits
from .properties import read_properties, setting
from .runner import GatewayOptions, ListenerOptions, coordinator_limits, host_port, serve
from .security import settings as security_keys
from .security.units import gateway_security

DEFAULT_LISTEN = "127.0.0.1:9092"
# Keys read here rather than by the listeners or security settings.
OTHER_KEYS = (METRICS_KEY,)

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
    parser.add_argument("--config", metavar="FILE",
                        help="the gateway's configuration: Kafka's keys in server.properties syntax (listeners, "
                             "TLS, SASL, ACLs, the upstream's security; PROTOCOL.md section 11); any key may come "
                             "from the environment as COORDINATOR_GATEWAY__<KEY, dots as _>; flags win over it")
    parser.add_argument("--listen", metavar="HOST:PORT",
                        help=f"address to accept Kafka clients on (port 0: any free port), as "
                             f"listeners=PLAINTEXT://HOST:PORT; default {DEFAULT_LISTEN}")
    parser.add_argument("--bootstrap-servers", metavar="HOST:PORT",
                        help="the upstream cluster (required, here or as bootstrap.servers in --config)")
    parser.add_argument("--engine", choices=["local", "topics"], default="topics",
                        help="local: an in-process engine (tests, demos); topics (default): the coordinator's "
                             "request and response topics, answered by the streaming job")
    parser.add_argument("--advertise", metavar="HOST",
                        help="host name clients should connect to (default: the --listen host)")
    parser.add_argument("--coordinator-timeout-ms", type=int, default=DEFAULT_LIMITS.coordinator_timeout_ms,
                        metavar="MS",
                        help="answer COORDINATOR_NOT_AVAILABLE when the coordinator has not answered within this "
                             "(must stay below the clients' request timeouts: kafka-python 30 s); default %(default)s")
    parser.add_argument("--join-grace-ms", type=int, metavar="MS",
                        help="a JoinGroup waits its rebalance timeout (or group.initial.rebalance.delay.ms if longer) "
                             f"plus this; default {DEFAULT_LIMITS.join_grace_ms}, with --engine topics plus the job's "
                             "coordinator.lateness.ms, coordinator.tick.interval.ms and "
                             "coordinator.trigger.interval.ms")
    parser.add_argument("--max-frame-bytes", type=int, default=DEFAULT_LIMITS.max_frame_bytes, metavar="N",
                        help="largest request accepted (Kafka's socket.request.max.bytes); default %(default)s")
    parser.add_argument("--metrics-listen", metavar="HOST:PORT",
                        help=f"serve Prometheus metrics at http://HOST:PORT/metrics (port 0: any free port), as "
                             f"{METRICS_KEY} in --config; default: none")
    parser.add_argument("--status-interval", type=float, default=10.0, metavar="SECONDS",
                        help="seconds between status lines (0: none); default %(default)s")


def options_from(args: argparse.Namespace, settings: Mapping[str, Any]) -> GatewayOptions:
    """GatewayOptions from parsed arguments and the project's settings; ValueError on a bad value."""
    given = {"max_frame_bytes": args.max_frame_bytes, "coordinator_timeout_ms": args.coordinator_timeout_ms}
    if args.join_grace_ms is not None:
        given["join_grace_ms"] = args.join_grace_ms
    limits = coordinator_limits(args.engine, settings, **given)
    if args.config:
        return _configured_options(args, settings, limits)
    if not args.bootstrap_servers:
        raise ValueError("--bootstrap-servers (or bootstrap.servers in --config) is required")
    return GatewayOptions(listen=host_port(args.listen or DEFAULT_LISTEN), upstream=host_port(args.bootstrap_servers),
                          engine=args.engine, advertised_host=args.advertise, limits=limits,
                          settings={**settings, "bootstrap.servers": args.bootstrap_servers},
                          status_interval_s=args.status_interval,
                          metrics_listen=None if args.metrics_listen is None else metrics_address(args.metrics_listen))


def _check_keys(properties: Mapping[str, str]) -> None:
    """Every key of the file is one the gateway reads (a listener's own keys with Kafka's prefix)."""
    known = {*listener_keys.KEYS, *security_keys.KEYS, *OTHER_KEYS}
    per_listener = {*listener_keys.LISTENER_KEYS, *security_keys.LISTENER_KEYS}
    for key in properties:
        prefix, _, rest = key.partition(".name.")
        own = key.startswith("listener.name.") and prefix == "listener" and rest.partition(".")[2] in per_listener
        if key not in known and not own:
            raise ValueError(f"{key}: not a key the gateway knows (PROTOCOL.md section 11)")


def _configured_options(args: argparse.Namespace, settings: Mapping[str, Any], limits: Limits) -> GatewayOptions:
    """GatewayOptions from --config, the environment and the flags (which win); ValueError naming the key."""
    try:
        properties = read_properties(Path(args.config))
    except OSError as exc:
        raise ValueError(f"--config: cannot read {args.config}: {exc.strerror}") from None
    _check_keys(properties)
    if args.listen:
        properties["listeners"] = f"PLAINTEXT://{args.listen}"
    if args.bootstrap_servers:
        properties["bootstrap.servers"] = args.bootstrap_servers

    def lookup(key: str) -> str | None:
        return setting(properties, os.environ, key)

    metrics_listen = args.metrics_listen or lookup(METRICS_KEY)
    ports = listener_keys.port_settings(lookup)
    security = gateway_security(lookup, [listener.name for listener in ports.listeners])
    listeners = [ListenerOptions((listener.host, listener.port), listener.name, listener.advertised_host,
                                 listener.broker_port_start, security.units(listener.name),
                                 None if listener.advertised_port == listener.port else listener.advertised_port,
                                 security.tls(listener.name))
                 for listener in ports.listeners]
    bootstrap = ",".join(f"{host}:{port}" for host, port in ports.bootstrap_servers)
    return GatewayOptions(listen=listeners[0].listen, upstream=ports.bootstrap_servers, engine=args.engine,
                          limits=limits, settings={**settings, "bootstrap.servers": bootstrap},
                          status_interval_s=args.status_interval, broker_id_lowest=ports.broker_id_lowest,
                          broker_ports=ports.broker_ports, listeners=listeners,
                          upstream_security=security.upstream, security=security.security,
                          metrics_listen=metrics_address(metrics_listen) if metrics_listen else None)


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
        print(f"gateway: cannot start: {exc!r}. Is the upstream cluster at "
              f"{','.join(f'{h}:{p}' for h, p in options.bootstrap_servers)} running, and are the gateway's ports "
              f"free?", file=sys.stderr)
        return 1
    return 0
