"""The shared conformance scenarios (../shared/conformance: the classic folder and the streams one), run by their own
runner."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

SHARED = Path(__file__).resolve().parents[2].parent / "shared" / "conformance"


@pytest.mark.skipif(not SHARED.is_dir(), reason="../shared/conformance is not beside the checkout")
@pytest.mark.parametrize("folder", ["scenarios", "streams"])
def test_every_conformance_scenario_passes(folder: str) -> None:
    src = str(Path(__file__).resolve().parents[2] / "src")
    env = {**os.environ, "PYTHONPATH": src + os.pathsep + os.environ.get("PYTHONPATH", "")}
    result = subprocess.run([sys.executable, str(SHARED / "run_conformance.py"), str(SHARED / folder)],
                            capture_output=True, text=True, env=env, timeout=600)
    last = result.stdout.strip().splitlines()[-1]
    assert result.returncode == 0 and last.endswith(" 0 failed"), result.stdout
