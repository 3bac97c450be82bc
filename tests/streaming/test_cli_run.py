"""`coordinator run --embedded --demo`, as the README's first command runs it: a status line, the metrics
endpoint, Ctrl-C, a summary."""

from __future__ import annotations

import json
import queue
import re
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import IO

import pytest

from tests.scrape import scrape, total

pytestmark = [pytest.mark.spark, pytest.mark.kafka]

# The demo's part of the status line (chaos_harness.describe_progress).
DEMO_STATUS = re.compile(r"demo \S+: .*  rebalances (\d+)  restarts (\d+)  unanswered \d+")
METRICS_LINE = re.compile(r"the job's metrics: (http://\S+)")
# The job's series of PROTOCOL.md section 11 (name as exposed, type).
JOB_SERIES = {
    "coordinator_job_batch_duration_seconds": "histogram",
    "coordinator_job_batches": "counter",
    "coordinator_job_input_rows": "counter",
    "coordinator_job_input_rows_per_second": "gauge",
    "coordinator_job_processed_rows_per_second": "gauge",
    "coordinator_job_input_lag_records": "gauge",
    "coordinator_job_dead_letters": "counter",
    "coordinator_job_late_requests": "counter",
    "coordinator_groups": "gauge",
    "coordinator_rebalances": "counter",
}


def status_updates(stream: IO[str]) -> queue.Queue[str | None]:
    """The status line's successive texts (it is rewritten in place with \\r), then None at the end."""
    updates: queue.Queue[str | None] = queue.Queue()

    def read() -> None:
        pending = ""
        while chunk := stream.read(1):
            pending += chunk
            if chunk in "\r\n":
                updates.put(pending.strip())
                pending = ""
        updates.put(None)

    threading.Thread(target=read, daemon=True).start()
    return updates


def test_run_on_the_embedded_broker_with_the_demo_clients_and_its_metrics_until_ctrl_c(tmp_path: Path) -> None:
    command = [sys.executable, "-m", "coordinator_cli", "run", "--embedded", "--demo", "--demo-members", "3",
               "--checkpoint", str(tmp_path / "checkpoint"), "--set", "group.initial.rebalance.delay.ms=1000",
               "--metrics-listen", "127.0.0.1:0"]
    job = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=tmp_path)
    assert job.stderr is not None and job.stdout is not None
    updates, lines = status_updates(job.stderr), []
    metrics_url: str | None = None
    try:
        # Runs until the group was stable and a member has been bounced, however slow the machine is.
        deadline = time.monotonic() + 240
        while True:
            try:
                line = updates.get(timeout=max(0.0, deadline - time.monotonic()))
            except queue.Empty:
                raise AssertionError("no bounce within 240 s:\n" + "\n".join(lines[-10:])) from None
            assert line is not None, "the job ended:\n" + "\n".join(lines[-20:])
            lines.append(line)
            metrics_url = metrics_url or next(iter(METRICS_LINE.findall(line)), None)
            found = DEMO_STATUS.search(line)
            if found and int(found.group(2)) >= 1:
                break
        assert "batches" in line and found.group(1) == "0"
        # The per-batch breakdown: the tasks' own times reach the driver (the source's, the operator's).
        assert any(re.search(r"per batch: plan \d+  read [1-9]", seen) for seen in lines), lines[-3:]
        assert any(re.search(r"operator [1-9]\d*: input", seen) for seen in lines), lines[-3:]
        assert metrics_url is not None, "no metrics address printed"
        # The rate gauge follows the last micro-batch, which reads no row when only the watermark moved (Spark's
        # no-data batch, for the timeouts): while the demo heartbeats, some scrape soon shows a batch that read rows.
        scrape_until = time.monotonic() + 60
        families, samples = scrape(metrics_url)
        while total(samples, "coordinator_job_processed_rows_per_second") == 0 and time.monotonic() < scrape_until:
            time.sleep(0.2)
            families, samples = scrape(metrics_url)
        job.send_signal(signal.SIGINT)  # the status thread keeps draining stderr meanwhile
        job.wait(timeout=180)
        stdout = job.stdout.read()
    finally:
        job.kill()
    assert job.returncode == 0, "\n".join(lines[-20:])
    summary = json.loads(stdout.strip().splitlines()[-1])
    assert summary["batches"] > 0 and summary["ticks"] > 0 and summary["dead_letters"] == 0
    demo = summary["demo"]
    assert demo["stable_at_ms"] is not None and demo["restarts"] >= 1 and demo["requests"] > 0
    assert (demo["unanswered"], demo["rebalances"], demo["fenced"]) == (0, 0, 0), demo
    assert (tmp_path / "checkpoint" / "offsets").is_dir()
    # The scrape, taken once the demo group had been stable and a member bounced.
    assert {name: families.get(name) for name in JOB_SERIES} == JOB_SERIES
    assert total(samples, "coordinator_job_batches_total") >= 1
    assert total(samples, "coordinator_job_batch_duration_seconds_count") >= 1
    assert total(samples, "coordinator_job_input_rows_total") > 0
    assert total(samples, "coordinator_job_processed_rows_per_second") > 0
    assert ("coordinator_job_input_lag_records", frozenset({("topic", "coordinator.requests")})) in samples
    assert total(samples, "coordinator_job_dead_letters_total") == 0
    assert total(samples, "coordinator_groups") >= 1
    assert total(samples, "coordinator_rebalances_total") >= 1
