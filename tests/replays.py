"""Comparing two replays of the same traffic (PROTOCOL.md section 5): the responses keyed by (reply_to,
correlation_id) with exact duplicates dropped (the job's sink is at-least-once), the last snapshot of every group,
the last value of every committed offset, and the dead letters in any order."""

from __future__ import annotations

import json

from coordinator_job.replay import ReplayResult
from coordinator_state import ResponseKey, response_key


def keyed(responses: list[str]) -> dict[ResponseKey, str]:
    """Responses by (reply_to, correlation_id); an exact duplicate is dropped, a different one fails."""
    out: dict[ResponseKey, str] = {}
    for line in responses:
        key = response_key(json.loads(line))
        assert key is not None, line
        assert out.get(key, line) == line, f"two different answers to {key}"
        out[key] = line
    return out


def assert_same(actual: ReplayResult, expected: ReplayResult) -> None:
    assert keyed(actual.responses) == keyed(expected.responses)
    assert actual.snapshots == expected.snapshots
    assert actual.offsets == expected.offsets
    assert sorted(actual.dead_letters) == sorted(expected.dead_letters)
