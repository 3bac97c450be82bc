"""The streams scenarios (tests/engine/scenarios_streams and ../shared/conformance/streams) through the Spark job.

tests/engine/test_scenarios.py checks every scenario's expectations through the local engine and through
`run_group` with the state stored between calls. Here the same requests go through the job's stateful operator:
the scenarios that share a configuration become one traffic file (each scenario's groups, clients and times moved
apart, its `advance_to` steps Tick records), replayed by Spark in small micro-batches and by the local engine, which
must agree bit for bit (so Spark meets every expectation the local engine meets). A configuration only one
scenario uses (a size limit, a delay, a retention) costs a Spark query of its own for a handful of requests: those
scenarios stay with the `run_group` path of test_scenarios.py, which is the operator's step without Spark.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from pyspark.sql import SparkSession

from coordinator_job.replay import replay_local, replay_spark
from coordinator_job.settings import load_settings
from coordinator_state import SIMULATION_EPOCH_MS, tick_envelope, to_json
from tests.replays import assert_same
from tests.traffic import write_traffic

pytestmark = [pytest.mark.spark]

ENGINE_TESTS = Path(__file__).resolve().parents[1] / "engine"
FOLDERS = (ENGINE_TESTS / "scenarios_streams", ENGINE_TESTS.parents[1].parent / "shared" / "conformance" / "streams")
SCENARIO_SPAN_MS = 10_000_000  # each scenario's events within 10,000 s of its start


def _scenarios() -> list[tuple[Path, dict[str, Any]]]:
    return [(path, json.loads(path.read_text())) for folder in FOLDERS for path in sorted(folder.glob("*.json"))]


def _renamed(value: Any, prefix: str) -> Any:
    """The request with its group ids and client names moved into the scenario's own namespace."""
    if isinstance(value, dict):
        out = {}
        for key, item in value.items():
            if key in ("group_id", "reply_to", "client_id") and isinstance(item, str):
                out[key] = prefix + item
            elif key in ("group_ids", "groups") and isinstance(item, list):
                out[key] = [prefix + g if isinstance(g, str) else _renamed(g, prefix) for g in item]
            else:
                out[key] = _renamed(item, prefix)
        return out
    if isinstance(value, list):
        return [_renamed(item, prefix) for item in value]
    return value


def _traffic(scenarios: list[tuple[Path, dict[str, Any]]]) -> list[bytes]:
    lines = []
    for number, (path, scenario) in enumerate(scenarios):
        shift = SIMULATION_EPOCH_MS + number * SCENARIO_SPAN_MS
        for step in scenario["steps"]:
            if "send" in step:
                request = _renamed(step["send"], f"{path.stem}/")
                request["timestamp_ms"] += shift
                lines.append(to_json(request).encode())
            elif "advance_to" in step:
                lines.append(to_json(tick_envelope(step["advance_to"] + shift)).encode())
    return lines


def _by_config() -> dict[str, list[tuple[Path, dict[str, Any]]]]:
    groups: dict[str, list[tuple[Path, dict[str, Any]]]] = {}
    for path, scenario in _scenarios():
        groups.setdefault(json.dumps(scenario.get("config", {}), sort_keys=True), []).append((path, scenario))
    return groups


CONFIGS = {config: scenarios for config, scenarios in _by_config().items() if len(scenarios) > 1}


def test_most_streams_scenarios_are_replayed() -> None:
    assert sum(len(group) for group in CONFIGS.values()) >= 34


@pytest.mark.parametrize("config", sorted(CONFIGS), ids=lambda c: f"{len(CONFIGS[c])}-scenarios")
def test_spark_replays_the_streams_scenarios_as_the_local_engine(spark: SparkSession, tmp_path: Path,
                                                                  config: str) -> None:
    scenarios = CONFIGS[config]
    settings = load_settings(overrides=[f"{key}={value}" for key, value in json.loads(config).items()], environ={})
    lines = _traffic(scenarios)
    expected = replay_local(lines, settings)
    assert len(expected.responses) >= len(scenarios)
    actual = replay_spark(write_traffic(tmp_path / "streams.jsonl", lines), settings, 25, None, None)
    assert_same(actual, expected)
