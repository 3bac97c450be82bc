"""Chaos against the streaming job (`coordinator chaos --engine spark`): the same scenarios in real time.

A run owns everything it needs: the embedded broker (unless given bootstrap servers), the coordinator's
four topics named for this run, a fresh checkpoint, a Spark session (unless given one), and the live job
(`coordinator_job.live_job.LiveJob`: the production query and its tick writer). The members are `ChaosRun`'s, on
a `LiveBackend`. Coordinator restart stops the job mid-run and starts it again on the same checkpoint, on
a worker thread (`JobControl`), so that the members keep running (and their requests pile up in the
request topic) meanwhile. The report is the sim's plus `job`: the query's batches and their durations,
starts and failures.
"""

from __future__ import annotations

import contextlib
import random
import secrets
import tempfile
from collections.abc import Callable, Iterator, Mapping
from concurrent.futures import Future, ThreadPoolExecutor
from pathlib import Path
from typing import Any

from pyspark.sql import SparkSession

from coordinator_job.live_job import LiveJob
from coordinator_job.settings import SettingsError, load_settings
from coordinator_job.spark_session import build_session
from group_client.realtime import wall_clock_ms
from kafka_jvm.embedded import broker_or_embedded

from .live import LiveBackend
from .run import HarnessError, describe_progress, new_chaos_run
from .scenarios import ChaosConfigError, normalize_config


def job_settings(config: Mapping[str, Any], bootstrap_servers: str) -> dict[str, Any]:
    """The job's settings for a run: its own topics and query name, and the run's `coordinator_config` (and its
    `lateness_ms` and `tick_interval_ms` when `config` has them) on top of conf/coordinator.toml."""
    run = f"chaos-{secrets.token_hex(4)}"
    overrides = [f"coordinator.{name}.topic={run}.{name}" for name in ("requests", "responses", "snapshots")]
    overrides += [f"coordinator.dead.letters.topic={run}.dead-letters", f"coordinator.query.name={run}"]
    for key, setting in (("lateness_ms", "lateness.ms"), ("tick_interval_ms", "tick.interval.ms")):
        if key in config:
            overrides.append(f"coordinator.{setting}={config[key]}")
    overrides += [f"{key}={value}" for key, value in config["coordinator_config"].items()]
    try:
        settings = load_settings(overrides=overrides)
    except SettingsError as exc:
        raise ChaosConfigError(f"coordinator_config: {exc}") from None
    settings["bootstrap.servers"] = bootstrap_servers
    return settings


@contextlib.contextmanager
def fresh_live_job(settings: Mapping[str, Any], spark: SparkSession | None = None) -> Iterator[LiveJob]:
    """A `LiveJob` (not started) on a fresh checkpoint, in `spark` or in a session built for it; after the
    block the job is closed, the checkpoint removed and a session built here stopped."""
    with contextlib.ExitStack() as stack:
        checkpoint = Path(stack.enter_context(tempfile.TemporaryDirectory(prefix="chaos-checkpoint-")))
        if spark is None:
            spark = build_session(settings)
            stack.callback(spark.stop)
        job = LiveJob(spark, settings, checkpoint)
        stack.callback(job.close)
        yield job


class JobControl:
    """Stops and starts a `LiveJob` without blocking the run: each call is queued, in order, on a worker
    thread, so that the members keep talking while the query stops or starts."""

    def __init__(self, job: LiveJob) -> None:
        self.job = job
        self._worker = ThreadPoolExecutor(max_workers=1, thread_name_prefix="live-job")
        self._pending: list[Future[None]] = []

    def start(self) -> None:
        """Queues a start of the tick writer and the query."""
        self._pending.append(self._worker.submit(self.job.start))

    def stop(self) -> None:
        """Queues a stop of the tick writer and the query (interrupting a micro-batch in progress)."""
        self._pending.append(self._worker.submit(self.job.stop))

    def wait_ready(self, timeout_s: float) -> None:
        """Waits for the queued calls, then for the query's first micro-batch; HarnessError if either fails or
        takes longer than `timeout_s`."""
        try:
            for future in self._pending:
                future.result(timeout=timeout_s)
            self.job.wait_ready(timeout_s)
        except (RuntimeError, TimeoutError) as exc:
            raise HarnessError(str(exc)) from exc

    def close(self) -> list[str]:
        """Stops the job, waits for the worker; returns what failed (queued calls and queries)."""
        self._worker.shutdown(wait=True)
        self.job.close()
        failures = [f"{type(error).__name__}: {error}" for error in (f.exception() for f in self._pending)
                    if error is not None]
        return failures + self.job.failures()


def run_chaos_spark(
    config: Mapping[str, Any],
    *,
    traffic: str | Path | None = None,
    bootstrap_servers: str | None = None,
    spark: SparkSession | None = None,
    ready_timeout_s: float = 180.0,
    status: Callable[[str], None] | None = None,
) -> dict[str, Any]:
    """Runs one chaos scenario against the streaming job in real time and reports as `run_chaos` does.

    `bootstrap_servers`: a broker to use (default: start the embedded one); `spark`: a session built like
    `coordinator_job.spark_session.build_session` to run the query in (default: build one, and stop it after).
    `traffic`: where to save the request topic as the job read it, ticks included, as JSON lines.
    `status` is called after every instant with the job's status line and the run's progress.
    """
    full = normalize_config({**config, "engine": "spark"})
    with contextlib.ExitStack() as stack:
        bootstrap_servers = stack.enter_context(broker_or_embedded(bootstrap_servers))
        settings = job_settings(full, bootstrap_servers)
        job = stack.enter_context(fresh_live_job(settings, spark))
        control = JobControl(job)
        stack.callback(control.close)
        control.start()
        control.wait_ready(ready_timeout_s)
        backend = LiveBackend.from_settings(settings, full["group_id"], coordinator=control,
                                            record_traffic=traffic is not None)
        stack.callback(backend.close)
        full["start_ms"] = wall_clock_ms()
        chaos_run = new_chaos_run(full, backend, random.Random(full["seed"]))

        def show() -> None:
            assert status is not None
            status(f"{job.status_line()}  |  {describe_progress(chaos_run.progress())}")

        report = chaos_run.run(on_instant=None if status is None else show)
        failures = control.close()
        if traffic is not None:
            backend.write_traffic(traffic)
        report["job"] = {**job.summary(), "failures": failures}
    return report
