"""The benchmark's generated traffic is what it claims: every group becomes Stable, every heartbeat is answered OK."""

from __future__ import annotations

import json

from coordinator_job.replay import replay_local
from coordinator_job.settings import load_settings
from coordinator_lab.traffic_gen import generate


def test_generated_traffic_replays_to_stable_groups_and_accepted_heartbeats() -> None:
    settings = load_settings()
    traffic = generate(groups=7, members=6, rounds=2, lateness_ms=int(settings["coordinator.lateness.ms"]),
                       initial_delay_ms=int(settings["group.initial.rebalance.delay.ms"]))
    assert traffic.kinds["Heartbeat"] == 7 * 6 * 2
    assert traffic.kinds["JoinGroup"] == 7 * 6 + 7  # member 4 of each group is dynamic and joins twice
    result = replay_local(traffic.lines, settings)
    responses = [json.loads(line) for line in result.responses]
    heartbeats = [r for r in responses if r["api"] == "Heartbeat"]
    assert len(heartbeats) == 7 * 6 * 2
    assert {r["body"]["error_code"] for r in heartbeats} == {0}
    assert {json.loads(s)["state"] for s in result.snapshots.values()} == {"Stable"}
    assert result.counts["late_requests"] == 0
