"""Behaviour unchanged: recorded traffic replays (locally) to byte-identical responses, snapshots and dead letters.

The fixtures in tests/fixtures/golden were recorded before the engine was restructured (issue 8); see the
README there. A difference here means the engine answers differently than it did: a regression, or a
deliberate change of behaviour that must say so and re-record the fixture.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from coordinator_job.replay import read_traffic, replay_local, write_result
from coordinator_job.settings import load_settings

GOLDEN = Path(__file__).resolve().parents[1] / "fixtures" / "golden"
CASES = sorted(path.name for path in GOLDEN.iterdir() if (path / "traffic.jsonl").is_file())
OUTPUTS = ("responses.jsonl", "snapshots.jsonl", "dead-letters.jsonl")


def test_there_are_golden_fixtures() -> None:
    assert len(CASES) >= 5, CASES


@pytest.mark.parametrize("case", CASES)
def test_local_replay_gives_the_recorded_output_byte_for_byte(case: str, tmp_path: Path) -> None:
    folder = GOLDEN / case
    overrides = (folder / "settings.txt").read_text().split()
    settings = load_settings(overrides=overrides, environ={})
    result = replay_local(read_traffic(folder / "traffic.jsonl"), settings)
    write_result(result, tmp_path / OUTPUTS[0], tmp_path / OUTPUTS[1], tmp_path / OUTPUTS[2])
    for name in OUTPUTS:
        assert (tmp_path / name).read_bytes() == (folder / name).read_bytes(), f"{case}/{name} differs"
    assert dict(result.counts) == json.loads((folder / "counts.json").read_text())
