"""`coordinator run --embedded --demo`, as the README's first command runs it: a status line and a summary."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = [pytest.mark.spark, pytest.mark.kafka]


def test_run_on_the_embedded_broker_with_the_demo_clients(tmp_path: Path) -> None:
    command = [sys.executable, "-m", "coordinator_cli", "run", "--embedded", "--demo", "--demo-members", "3",
               "--duration", "60", "--checkpoint", str(tmp_path / "checkpoint"),
               "--set", "group.initial.rebalance.delay.ms=1000"]
    result = subprocess.run(command, capture_output=True, text=True, timeout=300, cwd=tmp_path)
    assert result.returncode == 0, result.stderr[-3000:]
    summary = json.loads(result.stdout.strip().splitlines()[-1])
    assert summary["batches"] > 5 and summary["ticks"] > 0 and summary["dead_letters"] == 0
    demo = summary["demo"]
    assert demo["stable_at_ms"] is not None, demo  # the group became stable before the run ended
    assert demo["requests"] > 0 and demo["unanswered"] == 0 and demo["rebalances"] == 0
    status_lines = [line for line in result.stderr.replace("\r", "\n").splitlines() if line.startswith("[")]
    assert any("batches" in line and "demo" in line for line in status_lines)
    assert (tmp_path / "checkpoint" / "offsets").is_dir()
