"""`coordinator soak`: the live job under a steady load for a chosen time; figures printed, never asserted.

The load, the status line and the figures are `coordinator_lab.live_load`'s (as `coordinator bench --live`'s);
the figures are the last line of stdout.
"""

from __future__ import annotations

import argparse
from collections.abc import Callable, Mapping
from typing import Any

from .live_load import LoadPlan, add_broker_argument, add_linger_argument, run_live_load


def add_soak_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--rate", type=float, default=1000, help="requests offered per second (default: 1000)")
    parser.add_argument("--duration", type=float, default=600, help="seconds of load (default: 600)")
    parser.add_argument("--members", type=int, default=10, help="static members per group (default: 10)")
    parser.add_argument("--drain", type=float, default=60,
                        help="seconds the job gets after the load to answer the rest (default: 60)")
    parser.add_argument("--prefill-batches", type=int, default=0, metavar="N",
                        help="first fill each request partition with N one-record batches (default: 0)")
    add_linger_argument(parser)
    add_broker_argument(parser)
    parser.add_argument("--master", default="local[2]", help="Spark master (default: local[2])")


def run_soak(args: argparse.Namespace, settings: Mapping[str, Any], show: Callable[[str], None]) -> dict[str, Any]:
    """Runs the soak; `show` gets the status line once a second. Returns the figures."""
    return run_live_load(settings, LoadPlan(rate=args.rate, duration_s=args.duration, members=args.members,
                                            drain_s=args.drain, prefill_batches=args.prefill_batches,
                                            linger_ms=args.linger_ms, master=args.master, broker=args.broker,
                                            bootstrap_servers=getattr(args, "bootstrap_servers", None)), show)
