"""Stored group state of earlier releases restores: a checkpoint survives an upgrade (codec.py's rule).

`tests/fixtures/state_format_2.json` holds groups in every state as the release before the group-type
registry wrote them (format 2, commit 4cc077a): encoded state, snapshot, next deadline, and what that release
answered when it went on from there (every member heartbeats and commits, a static member joins, an
OffsetFetch, then every timer fires, one Spark call per deadline). This release must load each state and
go on exactly alike.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from coordinator_state import EngineConfig, decode_group, encode_group, parse_request, run_group, snapshot_of, type_of

FIXTURE = Path(__file__).resolve().parents[1] / "fixtures" / "state_format_2.json"
CONFIG = EngineConfig.from_mapping({"group.initial.rebalance.delay.ms": 3000, "offsets.retention.minutes": 10})


def format_2_groups() -> list[dict[str, Any]]:
    return list(json.loads(FIXTURE.read_text()))


@pytest.mark.parametrize("saved", format_2_groups(), ids=lambda g: g["group_id"])
def test_a_format_2_state_loads_and_goes_on_as_its_release_did(saved: dict[str, Any]) -> None:
    state = saved["state"].encode()
    assert json.loads(state)["format"] == 2
    group = decode_group(state, CONFIG)
    assert snapshot_of(group) == saved["snapshot"]
    assert type_of(group).next_deadline(group) == saved["next_deadline"]
    assert snapshot_of(decode_group(encode_group(group), CONFIG)) == saved["snapshot"]

    expected = saved["continuation"]
    first = run_group(state, json.loads(state)["clock"], [parse_request(r) for r in expected["requests"]], CONFIG)
    responses, snapshots, deadlines = list(first.responses), [first.snapshot], [first.next_deadline]
    changes = [change.line() for change in first.offset_changes]
    stored = first.state
    while stored is not None and deadlines[-1] is not None:
        step = run_group(stored, deadlines[-1], [], CONFIG)
        responses += step.responses
        changes += [change.line() for change in step.offset_changes]
        snapshots.append(step.snapshot if step.state is not None else "tombstone")
        stored, deadlines = step.state, [*deadlines, step.next_deadline]
    assert responses == expected["responses"]
    assert changes == expected["offset_changes"]
    assert snapshots == expected["snapshots"]
    assert deadlines == expected["deadlines"]
