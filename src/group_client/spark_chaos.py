"""Chaos against the streaming job (`coordinator chaos --engine spark`): the same scenarios in real time.

A run owns everything it needs: the embedded broker (unless given bootstrap servers), the coordinator's
four topics named for this run, a fresh checkpoint, a Spark session (unless given one), and the job
itself, the production query and its tick writer (`streaming.runner`). The members are `ChaosRun`'s, on a
`LiveEngine`. Coordinator restart stops the query and its tick writer mid-run and starts them again on the
same checkpoint, on a worker thread, so that the members keep running (and their requests pile up in the
request topic) meanwhile. The report is the sim's plus `job`: the query's batches and their durations,
starts and failures.
"""

from __future__ import annotations

import contextlib
import importlib
import random
import secrets
import tempfile
import threading
import time
from collections.abc import Callable, Mapping
from concurrent.futures import Future, ThreadPoolExecutor
from pathlib import Path
from typing import Any

from .chaos import ChaosRun, HarnessError, Progress
from .live import LiveEngine
from .runner import wall_clock_ms
from .scenarios import ChaosConfigError, normalize_config

# How often the job's progress is totalled (Spark keeps only its last 100 progress reports).
MONITOR_INTERVAL_S = 1.0


def _streaming(module: str) -> Any:
    """A module of the job (`streaming.*`), imported when a run needs it. By name: the job is the untyped
    application layer above this package, and mypy checks the packages under src/ only."""
    return importlib.import_module(f"streaming.{module}")


def job_settings(config: Mapping[str, Any], bootstrap_servers: str) -> dict[str, Any]:
    """The job's settings for a run: its own topics and query name, the run's lateness, tick interval and
    coordinator config on top of conf/coordinator.toml."""
    settings_module = _streaming("settings")
    run = f"chaos-{secrets.token_hex(4)}"
    overrides = [f"coordinator.{name}.topic={run}.{name}" for name in ("requests", "responses", "snapshots")]
    overrides += [f"coordinator.dead.letters.topic={run}.dead-letters", f"coordinator.query.name={run}",
                  f"coordinator.lateness.ms={config['lateness_ms']}",
                  f"coordinator.tick.interval.ms={config['tick_interval_ms']}"]
    overrides += [f"{key}={value}" for key, value in config["coordinator_config"].items()]
    try:
        settings: dict[str, Any] = settings_module.load_settings(overrides=overrides)
    except settings_module.SettingsError as exc:
        raise ChaosConfigError(f"coordinator_config: {exc}") from None
    settings["bootstrap.servers"] = bootstrap_servers
    return settings


class StreamingJob:
    """The coordinator's query and tick writer on one checkpoint; `stop` and `start` return at once and run
    in order on a worker thread. A monitor thread totals the query's progress."""

    def __init__(self, spark: Any, settings: Mapping[str, Any], checkpoint: Path) -> None:
        self.spark = spark
        self.settings = settings
        self.checkpoint = checkpoint
        self.status = _streaming("runner").LiveStatus()
        self.starts = 0
        self.failures: list[str] = []
        self._queries: list[Any] = []
        self._ticks: Any = None
        self._worker = ThreadPoolExecutor(max_workers=1, thread_name_prefix="streaming-job")
        self._pending: list[Future[None]] = []
        self._closed = threading.Event()
        self._monitor = threading.Thread(target=self._watch, name="streaming-job-monitor", daemon=True)
        self._monitor.start()

    def start(self) -> None:
        """Starts the tick writer and the query (on the worker thread)."""
        self._pending.append(self._worker.submit(self._start))

    def stop(self) -> None:
        """Stops the tick writer and the query (on the worker thread)."""
        self._pending.append(self._worker.submit(self._stop))

    def wait_ready(self, timeout_s: float) -> None:
        """Blocks until the query has finished a micro-batch; HarnessError if it fails or takes too long."""
        deadline = time.monotonic() + timeout_s
        for future in self._pending:
            future.result(timeout=max(0.0, deadline - time.monotonic()))
        query = self._queries[-1]
        while query.lastProgress is None:
            if query.exception() is not None:
                raise HarnessError(f"the query failed at start: {query.exception()}")
            if time.monotonic() > deadline:
                raise HarnessError(f"the query finished no micro-batch within {timeout_s:.0f} s")
            time.sleep(0.2)

    def close(self) -> None:
        """Stops the job if it runs, waits for the worker and totals the progress; idempotent."""
        if self._closed.is_set():
            return
        self.stop()
        self._worker.shutdown(wait=True)
        self._closed.set()
        self._monitor.join()
        for future in self._pending:
            if future.exception() is not None:
                self.failures.append(f"{type(future.exception()).__name__}: {future.exception()}")
        self._totals()

    def summary(self) -> dict[str, Any]:
        """The query's figures: batches, records, durations (all of them, in ms), starts, failures."""
        return {**self.status.summary(), "batch_ms_max": max(self.status.batch_ms, default=None),
                "batch_ms": list(self.status.batch_ms), "starts": self.starts, "failures": self.failures}

    def _start(self) -> None:
        runner = _streaming("runner")
        self._ticks = runner.TickWriter(self.settings).start()
        self._queries.append(runner.start_query(self.spark, self.settings, self.checkpoint))
        self.starts += 1

    def _stop(self) -> None:
        ticks, self._ticks = self._ticks, None
        if ticks is not None:
            ticks.stop()
        if self._queries and self._queries[-1].isActive:
            self._queries[-1].stop()

    def _watch(self) -> None:
        while not self._closed.wait(MONITOR_INTERVAL_S):
            self._totals()

    def _totals(self) -> None:
        for query in list(self._queries):
            self.status.update(query)
            failure = query.exception()
            message = f"query {query.runId} failed: {str(failure).splitlines()[0]}" if failure else None
            if message is not None and message not in self.failures:
                self.failures.append(message)


def run_chaos_spark(
    config: Mapping[str, Any],
    *,
    traffic: str | Path | None = None,
    bootstrap_servers: str | None = None,
    spark: Any = None,
    ready_timeout_s: float = 180.0,
    progress: Callable[[Progress], None] | None = None,
) -> dict[str, Any]:
    """Runs one chaos scenario against the streaming job in real time and reports as `run_chaos` does.

    `bootstrap_servers`: a broker to use (default: start the embedded one); `spark`: a session built like
    `streaming.spark_session.build_session` to run the query in (default: build one, and stop it after).
    `traffic`: where to save the request topic as the job read it, ticks included, as JSON lines.
    `progress` is called with the run's `Progress` after every instant.
    """
    full = normalize_config({**config, "engine": "spark"})
    with contextlib.ExitStack() as stack:
        if bootstrap_servers is None:
            bootstrap_servers = stack.enter_context(_streaming("broker").EmbeddedBroker()).bootstrap_servers
        settings = job_settings(full, bootstrap_servers)
        _streaming("runner").ensure_topics(settings)
        checkpoint = Path(stack.enter_context(tempfile.TemporaryDirectory(prefix="chaos-checkpoint-")))
        if spark is None:
            spark = _streaming("spark_session").build_session(settings)
            stack.callback(spark.stop)
        job = StreamingJob(spark, settings, checkpoint)
        stack.callback(job.close)
        job.start()
        job.wait_ready(ready_timeout_s)
        engine = LiveEngine.from_settings(settings, full["group_id"], coordinator=job,
                                          record_traffic=traffic is not None)
        stack.callback(engine.close)
        full["start_ms"] = wall_clock_ms()
        chaos_run = ChaosRun(full, engine, random.Random(full["seed"]))
        report = chaos_run.run(on_instant=None if progress is None else lambda: progress(chaos_run.progress()))
        job.close()
        if traffic is not None:
            engine.write_traffic(traffic)
        report["job"] = job.summary()
    return report
