"""`coordinator bench --engine spark|both`: the streaming job's speed on generated traffic, printed, never asserted.

Two paths over the same kind of traffic (`coordinator_lab.traffic_gen`):
- replay: the traffic file through the local engine (record by record) and through the production
  query (file source -> parse -> watermark -> per-group step -> output), the same plan with an empty
  per-group function (the design's ceiling), and the plan cut after the source and after the parse
  stage (each stage's share is the difference between two cuts); with `--tws` (the default) the full plan
  and its ceiling also under `transformWithState`, each right after its `applyInPandasWithState` twin;
- live (`--live`: this path only): the job on the embedded broker under `coordinator_lab.live_load`'s steady load
  (as `coordinator soak`'s), under each operator of `--operator` in turn; first idle (ticks only: the time of an
  almost empty micro-batch), then members join and sync, then heartbeats at a fixed offered rate, each answer's
  latency measured from the request's send to the response's read; the per-batch breakdown idle and under load.
Memory: the peak RSS of the driver (Python and JVM) and of the largest Python worker, sampled.
"""

from __future__ import annotations

import argparse
import json
import os
import tempfile
import threading
import time
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from coordinator_job.settings import (
    APPLY_IN_PANDAS_WITH_STATE,
    STATEFUL_OPERATORS,
    TRANSFORM_WITH_STATE,
    stateful_operator,
)
from coordinator_state import encode_group

from .bench_restart import run_restart
from .live_load import LoadPlan, add_broker_argument, add_linger_argument, run_live_load
from .measuring import ProgressLog, breakdown, children, log, percentile, tree_cpu_seconds
from .traffic_gen import (
    generate,
)

# Heartbeats from this correlation id on are the measured ones (those sent during the set-up are not).
MEASURED_CORRELATION = 100_000
# Live members' session and rebalance timeouts: generous, so that a slow set-up on a loaded machine expires no one
# (a member that has not synced within the rebalance timeout after its join answer is removed).
LIVE_SESSION_TIMEOUT_MS = 120_000
WARM_UP_BATCHES = 3


def _rss_kb(pid: int, field: str) -> int:
    try:
        with open(f"/proc/{pid}/status") as fh:
            for line in fh:
                if line.startswith(field):
                    return int(line.split()[1])
    except OSError:
        pass
    return 0


def _cmdline(pid: int) -> str:
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as fh:
            return fh.read().replace(b"\0", b" ").decode(errors="replace")
    except OSError:
        return ""


class MemorySampler:
    """Samples the RSS of this process, its JVM child and the JVM's Python workers every 0.2 s."""

    def __init__(self) -> None:
        self.driver_peak_kb = 0  # this Python process + the JVM, at the same instant
        self.jvm_peak_kb = 0
        self.worker_peak_kb = 0  # the largest single Python worker
        self.workers_total_peak_kb = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="memory-sampler", daemon=True)

    def __enter__(self) -> MemorySampler:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join()

    def sample(self) -> None:
        me = os.getpid()
        jvms = [c for c in children(me) if "java" in _cmdline(c)]
        jvm_kb = sum(_rss_kb(j, "VmRSS:") for j in jvms)
        workers: list[int] = []
        frontier = list(jvms)
        while frontier:
            pid = frontier.pop()
            for child in children(pid):
                frontier.append(child)
                if " -m pyspark." in _cmdline(child):  # the daemon, its workers, the data source runners
                    workers.append(child)
        worker_kb = [_rss_kb(w, "VmRSS:") for w in workers]
        self.jvm_peak_kb = max(self.jvm_peak_kb, jvm_kb)
        self.driver_peak_kb = max(self.driver_peak_kb, jvm_kb + _rss_kb(me, "VmRSS:"))
        self.worker_peak_kb = max([self.worker_peak_kb, *worker_kb])
        self.workers_total_peak_kb = max(self.workers_total_peak_kb, sum(worker_kb))

    def _run(self) -> None:
        while not self._stop.wait(0.2):
            self.sample()

    def figures(self, prefix: str) -> dict[str, float]:
        return {f"{prefix}driver_peak_rss_mb": round(self.driver_peak_kb / 1024, 1),
                f"{prefix}jvm_peak_rss_mb": round(self.jvm_peak_kb / 1024, 1),
                f"{prefix}python_worker_peak_rss_mb": round(self.worker_peak_kb / 1024, 1),
                f"{prefix}python_workers_total_peak_rss_mb": round(self.workers_total_peak_kb / 1024, 1)}


def _batch_durations(reports: list[dict[str, Any]], *, min_rows: int = 0, max_rows: int | None = None) -> list[float]:
    return [float(r["durationMs"]["triggerExecution"]) for r in reports
            if "triggerExecution" in (r.get("durationMs") or {}) and int(r.get("numInputRows") or 0) >= min_rows
            and (max_rows is None or int(r.get("numInputRows") or 0) < max_rows)]


# ---------------------------------------------------------------- replay


def run_local(lines: list[bytes], settings: Mapping[str, Any]) -> tuple[float, float, int]:
    """The local replay of `lines`: wall seconds, CPU seconds, responses."""
    from coordinator_job.replay import replay_local

    started, cpu = time.perf_counter(), time.process_time()
    result = replay_local(lines, settings)
    return time.perf_counter() - started, time.process_time() - cpu, len(result.responses)


def run_spark_plan(spark: Any, path: Path, settings: Mapping[str, Any], records_per_batch: int, cut: str,
                   progress: ProgressLog) -> tuple[float, float, list[dict[str, Any]], int, dict[str, float]]:
    """One replay of the file through the plan cut at `cut` (source, parse, ceiling, full): wall seconds, CPU
    seconds (driver, JVM and workers), progress reports, output rows, the tasks' metrics (coordinator_job.task_metrics;
    the full plan's only).

    `full` is the replay path itself (`replay_spark_to_files`); the cuts end in Spark's no-op sink.
    """
    from coordinator_job.job import build_pipeline, make_parser, state_keys
    from coordinator_job.spark_session import use_checkpoint

    mark, ended = progress.mark(), progress.ended()
    started, cpu = time.perf_counter(), tree_cpu_seconds()
    if cut == "full":
        from coordinator_job.replay import replay_spark_to_files

        with tempfile.TemporaryFile() as responses:
            written = replay_spark_to_files(path, settings, records_per_batch, None, None, responses, None)
        rows, tasks = written.responses, written.task_metrics
    else:
        from pyspark.sql import functions as F

        from coordinator_job.job import PARSED_SCHEMA

        from .empty_operator import empty_operator

        records = (spark.readStream.format("coordinator_file").option("path", str(path))
                   .option("maxRecordsPerBatch", str(records_per_batch)).load())
        if cut == "source":
            output = records.select("value")
        elif cut == "parse":
            output = (records.select("value", "partition", "offset", F.unix_millis("timestamp").alias("record_ts"))
                      .mapInArrow(make_parser(None, "file", state_keys(settings)), PARSED_SCHEMA))
        else:
            output = build_pipeline(records, settings, live=False, source="file",
                                    operator=empty_operator(settings))
        with tempfile.TemporaryDirectory(prefix="bench-checkpoint-") as checkpoint:
            use_checkpoint(spark, checkpoint)
            query = (output.writeStream.format("noop").option("checkpointLocation", checkpoint)
                     .trigger(availableNow=True).start())
            query.awaitTermination()
        rows, tasks = 0, {}
    elapsed, cpu = time.perf_counter() - started, tree_cpu_seconds() - cpu
    progress.await_end(ended)  # the listener's last report arrives asynchronously
    return elapsed, cpu, progress.since(mark), rows, tasks


def state_bytes_per_member(lines: list[bytes], settings: Mapping[str, Any], members: int) -> float:
    """The encoded state of every group after the traffic, per member: what the state store holds."""
    from coordinator_job.settings import engine_config
    from coordinator_state import LocalCoordinator, parse_raw

    coordinator = LocalCoordinator(engine_config(settings))
    for raw in lines:
        coordinator.process(parse_raw(raw))
    total = sum(len(encode_group(group)) for group in coordinator.groups.values())
    return total / max(members, 1)


# ---------------------------------------------------------------- live
# ---------------------------------------------------------------- command


@contextmanager
def _stage(name: str) -> Iterator[None]:
    log(f"{name}...")
    started = time.perf_counter()
    yield
    log(f"{name}: {time.perf_counter() - started:.1f} s")


def add_spark_bench_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--rate", type=float, default=2000, help="live path: heartbeats offered per second")
    parser.add_argument("--duration", type=float, default=30, help="live path: seconds of heartbeats")
    parser.add_argument("--idle", type=float, default=8, help="live path: seconds of ticks only, before the load")
    parser.add_argument("--warm-up", type=float, default=0,
                        help="live path: seconds of ticks before anything is measured (the JVM's JIT compiler works "
                             "for a minute or two after a start; a long-running job's figures need ~90)")
    parser.add_argument("--drain", type=float, default=30,
                        help="live path: seconds the job gets after the load to answer the rest")
    add_linger_argument(parser)
    add_broker_argument(parser)
    parser.add_argument("--operator", choices=[*STATEFUL_OPERATORS, "both"], default=None,
                        help="live path: the stateful operator(s) to run it under, one after the other in one run "
                             "(default: both with --live, else coordinator.stateful.operator)")
    parser.add_argument("--records-per-batch", type=int, default=100_000, help="replay micro-batch size")
    parser.add_argument("--ceiling", action=argparse.BooleanOptionalAction, default=True,
                        help="also replay with an empty per-group function, and the plan cut after the source "
                             "and after the parse stage (the per-stage breakdown)")
    parser.add_argument("--tws", action=argparse.BooleanOptionalAction, default=True,
                        help="replay path: also run the plan under transformWithState (the spark_tws_* and "
                             "ceiling_tws_* keys) when the configured operator is applyInPandasWithState")
    paths = parser.add_mutually_exclusive_group()
    paths.add_argument("--replay", action="store_true", help="the replay path only (default: both paths)")
    paths.add_argument("--live", action="store_true",
                       help="the live path only, on Spark (whatever --engine says): the job on the embedded broker "
                            "under a steady load, latency from send to answer, the per-batch breakdown; under both "
                            "operators unless --operator says one")
    parser.add_argument("--master", default="local[2]", help="Spark master (default: local[2])")
    parser.add_argument("--restart-groups", type=int, default=0, metavar="N",
                        help="also build a live checkpoint of N groups and time the first micro-batch of a restart "
                             "on it (0: skip)")


def spark_bench_main(args: argparse.Namespace, settings: Mapping[str, Any],
                     show: Callable[[str], None]) -> dict[str, Any]:
    """All the figures of the module docstring for `args.engine` in spark, both."""
    figures: dict[str, Any] = {"engine": args.engine, "groups": args.groups, "members": args.members,
                               "records_per_batch": args.records_per_batch,
                               "shuffle_partitions": int(settings["coordinator.shuffle.partitions"]),
                               "stateful_operator": stateful_operator(settings)}
    progress = ProgressLog()
    if not args.live:
        figures.update(replay_figures(args, settings, progress))
        log(f"replay figures: {json.dumps(figures)}")
    if not args.replay:
        figures.update(live_figures(args, settings, show))
    if args.restart_groups > 0:
        figures.update(run_restart(settings, args.master, args.restart_groups))
    return figures


def live_figures(args: argparse.Namespace, settings: Mapping[str, Any], show: Callable[[str], None]) -> dict[str, Any]:
    """The live path under each operator asked for, one after the other, and their ratios (transformWithState's
    figure over applyInPandasWithState's) when both ran; `show` gets a status line once a second."""
    chosen = args.operator or ("both" if args.live else stateful_operator(settings))
    operators = STATEFUL_OPERATORS if chosen == "both" else (chosen,)
    plan = LoadPlan(rate=args.rate, duration_s=args.duration, members=args.members, drain_s=args.drain,
                    idle_s=args.idle, warm_up_s=args.warm_up, linger_ms=args.linger_ms, master=args.master,
                    broker=args.broker)
    figures: dict[str, Any] = {}
    for operator in operators:
        log(f"live path under {operator}")
        figures[f"live_{operator}"] = run_live_load({**settings, "coordinator.stateful.operator": operator}, plan,
                                                    show)
    if len(operators) == 2:
        pandas, tws = (figures[f"live_{operator}"] for operator in operators)
        figures["live_tws_to_pandas"] = {
            key: round(tws[key] / pandas[key], 3) for key in ("latency_ms_p50", "latency_ms_p99")
            if tws.get(key) and pandas.get(key)}
    return figures


def replay_figures(args: argparse.Namespace, settings: Mapping[str, Any], progress: ProgressLog) -> dict[str, Any]:
    from coordinator_job.spark_session import build_session
    from coordinator_job.task_metrics import Breakdown

    rounds = int(args.rounds)
    figures: dict[str, Any] = {}
    with _stage(f"generating {args.groups} groups x {args.members} members, {rounds} heartbeat rounds"):
        traffic = generate(args.groups, args.members, rounds, int(settings["coordinator.lateness.ms"]),
                           int(settings["group.initial.rebalance.delay.ms"]))
    figures.update(requests=traffic.requests, request_kinds=traffic.kinds)
    with tempfile.TemporaryDirectory(prefix="bench-traffic-") as scratch:
        path = Path(scratch) / "traffic.jsonl"
        path.write_bytes(b"\n".join(traffic.lines) + b"\n")
        figures["state_bytes_per_member"] = round(state_bytes_per_member(traffic.lines, settings, traffic.members), 1)
        if args.engine == "both":
            with _stage("local replay"):
                seconds, cpu, local_responses = run_local(traffic.lines, settings)
            figures["local_requests_per_s"] = round(traffic.requests / seconds)
            figures["local_cpu_requests_per_s"] = round(traffic.requests / cpu)
            figures["local_responses"] = local_responses
        lines_count = len(traffic.lines)
        warm_up_lines = traffic.lines[:2000]
        del traffic
        spark = build_session(settings, args.master, app_name="coordinator-bench")
        progress.attach(spark)
        tws = bool(args.tws) and stateful_operator(settings) == APPLY_IN_PANDAS_WITH_STATE
        tws_settings = {**settings, "coordinator.stateful.operator": TRANSFORM_WITH_STATE}
        warm_up = Path(scratch) / "warm-up.jsonl"
        warm_up.write_bytes(b"".join(line + b"\n" for line in warm_up_lines))
        with _stage("warm-up: the first query starts Python workers and compiles; a small one pays for that"):
            run_spark_plan(spark, warm_up, settings, 1000, "full", progress)
            if tws:
                run_spark_plan(spark, warm_up, tws_settings, 1000, "full", progress)
        # Each transformWithState cut right after its applyInPandasWithState twin: a change in the machine's
        # load between them skews their ratio least.
        cuts = ["source", "parse", "ceiling", "full"] if args.ceiling else ["full"]
        if tws:
            cuts = [c for cut in cuts for c in ([cut, f"tws_{cut}"] if cut in ("ceiling", "full") else [cut])]
        stage_seconds: dict[str, float] = {}
        stage_cpu: dict[str, float] = {}
        with MemorySampler() as memory:
            for cut in cuts:
                # A tws_ cut is the same plan under transformWithState; its figures' names carry "_tws".
                plan, infix = cut.removeprefix("tws_"), "_tws" if cut.startswith("tws_") else ""
                with _stage(f"spark replay, plan cut: {cut}"):
                    seconds, cpu, reports, rows, tasks = run_spark_plan(
                        spark, path, tws_settings if infix else settings, args.records_per_batch, plan, progress)
                stage_seconds[cut], stage_cpu[cut] = seconds, cpu
                if plan == "full":
                    figures[f"spark{infix}_requests_per_s"] = round(figures["requests"] / seconds)
                    figures[f"spark{infix}_cpu_requests_per_s"] = round(figures["requests"] / cpu)
                    figures[f"spark{infix}_responses"] = rows
                    figures[f"replay{infix}_batch_ms_p50"] = percentile(_batch_durations(reports, min_rows=1), 50)
                    figures[f"replay{infix}_breakdown"] = breakdown(reports)
                    per_batch = Breakdown()
                    per_batch.add_reports(reports)
                    per_batch.add_tasks({}, tasks)
                    figures[f"replay{infix}_breakdown_per_batch"] = per_batch.per_batch()
                elif plan == "ceiling":
                    figures[f"ceiling{infix}_requests_per_s"] = round(figures["requests"] / seconds)
                    figures[f"ceiling{infix}_cpu_requests_per_s"] = round(figures["requests"] / cpu)
                    figures[f"ceiling{infix}_breakdown"] = breakdown(reports)
        figures.update(memory.figures(""))
        figures["replay_records"] = lines_count
        if "local_requests_per_s" in figures:
            figures["spark_to_local_ratio"] = round(figures["spark_requests_per_s"] / figures["local_requests_per_s"],
                                                    3)
            # Spark uses both cores, the local engine one: the CPU ratio is the cost per request, the wall
            # ratio the throughput; on a shared machine the CPU figures are the steadier.
            figures["spark_to_local_cpu_ratio"] = round(
                figures["spark_cpu_requests_per_s"] / figures["local_cpu_requests_per_s"], 3)
            if tws:
                figures["tws_to_local_ratio"] = round(
                    figures["spark_tws_requests_per_s"] / figures["local_requests_per_s"], 3)
                figures["tws_to_local_cpu_ratio"] = round(
                    figures["spark_tws_cpu_requests_per_s"] / figures["local_cpu_requests_per_s"], 3)
        if tws:
            figures["tws_to_pandas_ratio"] = round(
                figures["spark_tws_requests_per_s"] / figures["spark_requests_per_s"], 3)
            if args.ceiling:
                figures["ceiling_tws_to_pandas_ratio"] = round(
                    figures["ceiling_tws_requests_per_s"] / figures["ceiling_requests_per_s"], 3)
        if args.ceiling:
            for name, taken in (("stage_seconds", stage_seconds), ("stage_cpu_seconds", stage_cpu)):
                figures[name] = {
                    "source": round(taken["source"], 2),
                    "parse": round(taken["parse"] - taken["source"], 2),
                    "shuffle_state_and_operator": round(taken["ceiling"] - taken["parse"], 2),
                    "group_step_and_sink": round(taken["full"] - taken["ceiling"], 2),
                }
                if tws:
                    figures[name]["tws_shuffle_state_and_operator"] = round(taken["tws_ceiling"] - taken["parse"], 2)
                    figures[name]["tws_group_step_and_sink"] = round(taken["tws_full"] - taken["tws_ceiling"], 2)
        spark.stop()
    return figures

