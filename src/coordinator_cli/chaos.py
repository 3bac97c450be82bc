"""`coordinator chaos`: a chaos scenario on the sim backend or against the streaming job, and its report."""

from __future__ import annotations

import argparse
import sys

from chaos_harness import (
    SCENARIOS,
    ChaosConfigError,
    HarnessError,
    config_overrides,
    run_chaos,
    summary,
    write_report,
)
from chaos_harness.scenarios import BACKENDS, GROUP_TYPES

from .status_line import StatusLine

EXIT_OK, EXIT_FAILED, EXIT_USAGE = 0, 1, 2
PLOT_EXTRA_HINT = ("--plot needs matplotlib, an optional dependency: pip install 'spark-group-coordinator[plot]' "
                   "(or pip install matplotlib)")


def add_chaos_arguments(parser: argparse.ArgumentParser) -> None:
    """The `coordinator chaos` flags."""
    parser.add_argument("--members", type=int, default=20,
                        help="number of consumer processes, or Kafka Streams instances (default 20)")
    parser.add_argument("--group-type", choices=GROUP_TYPES, default="classic",
                        help="classic: consumers (JoinGroup/SyncGroup); streams: Kafka Streams instances in a "
                             "streams group (StreamsGroupHeartbeat, one standby replica; the report adds "
                             "group_epoch_bumps and task_movements)")
    membership = parser.add_mutually_exclusive_group()
    for name, text in (("static", "every member has a group.instance.id (default)"),
                       ("dynamic", "no member has a group.instance.id"),
                       ("mixed", "half the members are static")):
        membership.add_argument(f"--{name}", dest="membership", action="store_const", const=name, help=text)
    parser.set_defaults(membership="static")
    parser.add_argument("--scenario", choices=SCENARIOS, default="rolling-bounce")
    parser.add_argument("--engine", choices=BACKENDS, default="sim",
                        help="sim: the engine in memory on a simulated clock; spark: the streaming job in real "
                             "time, on the embedded broker, a fresh checkpoint and a local Spark session (slow "
                             "micro-batches make 10 s sessions tight: e.g. --set session_timeout_ms=20000)")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--set", metavar="KEY=VALUE", action="append", default=[], dest="overrides",
                        help="a chaos config entry (repeatable), e.g. --set session_timeout_ms=15000, "
                             "--set params.interval_ms=2000, "
                             "--set coordinator_config.group.initial.rebalance.delay.ms=0")
    parser.add_argument("--bootstrap-servers", metavar="HOST:PORT",
                        help="spark: a broker to use instead of the embedded one")
    parser.add_argument("--report", metavar="FILE.json", help="write the report here (default: stdout)")
    parser.add_argument("--plot", metavar="FILE.png",
                        help="draw the rebalance timeline here (needs the `plot` extra: matplotlib)")
    parser.add_argument("--traffic", metavar="FILE.jsonl",
                        help="save the request log, ticks included, for replay (spark: the request topic as "
                             "the job read it)")


def chaos_main(args: argparse.Namespace) -> int:
    """Runs `coordinator chaos`: 0 when the run completed, whatever it found; 2 for a request that cannot run
    (a bad config, or --plot without matplotlib); 1 if the harness failed."""
    if args.plot:
        try:  # before the run, which may take minutes
            from chaos_harness.plot import plot_report
        except ImportError:
            print(f"coordinator chaos: {PLOT_EXTRA_HINT}", file=sys.stderr)
            return EXIT_USAGE
    try:
        config = {"scenario": args.scenario, "group_type": args.group_type, "members": args.members,
                  "membership": args.membership,
                  "seed": args.seed, "engine": args.engine, **config_overrides(args.overrides)}
        if args.engine == "spark":
            from chaos_harness.spark_backend import run_chaos_spark

            status = StatusLine()
            report = run_chaos_spark(config, traffic=args.traffic, bootstrap_servers=args.bootstrap_servers,
                                     status=status.show)
            status.end()
        else:
            report = run_chaos(config, traffic=args.traffic)
    except ChaosConfigError as exc:
        print(f"coordinator chaos: {exc}", file=sys.stderr)
        return EXIT_USAGE
    except HarnessError as exc:
        print(f"coordinator chaos: the harness failed: {exc}", file=sys.stderr)
        return EXIT_FAILED
    write_report(report, args.report)
    if args.plot:
        plot_report(report, args.plot)
    print(summary(report), file=sys.stderr)
    return EXIT_OK
