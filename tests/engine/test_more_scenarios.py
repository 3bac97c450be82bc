"""Extra conformance scenarios (tests/engine/scenarios), run by the shared runner (../shared/conformance)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
SHARED = REPO.parent / "shared" / "conformance"
SCENARIOS = Path(__file__).resolve().parent / "scenarios"


@pytest.mark.skipif(not (SHARED / "run_conformance.py").is_file(),
                    reason="../shared/conformance is not beside the checkout")
def test_every_extra_scenario_passes() -> None:
    env = {**os.environ, "PYTHONPATH": str(REPO / "src") + os.pathsep + os.environ.get("PYTHONPATH", "")}
    result = subprocess.run([sys.executable, str(SHARED / "run_conformance.py"), str(SCENARIOS)],
                            capture_output=True, text=True, env=env, timeout=600)
    lines = result.stdout.strip().splitlines()
    assert lines, result.stdout + result.stderr
    last = lines[-1]
    assert result.returncode == 0 and last.endswith(" 0 failed") and not last.startswith("0 passed"), result.stdout
