"""A short `coordinator soak` at 1,000 requests/s: the job answers every request and reads everything, no stall.

The request log starts as a long run leaves it (`--prefill-batches`): the embedded broker then lists ~2x10^4
batches per partition on every fetch, past where the reader's former 5 ms fetch wait froze the job for good. Speed
is printed by the command, not asserted here.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = [pytest.mark.spark, pytest.mark.kafka]

REPO_ROOT = Path(__file__).resolve().parents[2]


def test_a_short_soak_at_1000_requests_per_second_answers_everything() -> None:
    # Its own process: the soak starts and stops a Spark session of its own.
    result = subprocess.run(
        [sys.executable, "-m", "coordinator_cli", "soak", "--rate", "1000", "--duration", "30", "--drain", "60",
         "--prefill-batches", "20000"],
        cwd=REPO_ROOT, env={**os.environ, "PYTHONPATH": str(REPO_ROOT / "src")}, capture_output=True, text=True,
        timeout=600)
    assert result.returncode == 0, result.stderr[-3000:]
    figures = json.loads(result.stdout.splitlines()[-1])
    assert figures["heartbeats_sent"] >= 15_000, figures  # fewer than offered only on a very busy machine
    assert figures["unanswered"] == 0 and figures["heartbeats_answered"] == figures["heartbeats_sent"], figures
    assert figures["lag_unread_after_drain"] == 0, figures
    assert figures["job_failures"] == [], figures
    assert figures["heartbeat_errors"] == {}, figures  # no session lost, no rebalance
    assert "unanswered" in result.stderr and "lag" in result.stderr  # the status line
