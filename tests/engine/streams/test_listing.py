"""ListGroups and DescribeGroups over a streams group's snapshot (PROTOCOL.md section 10, Group types;
GroupMetadataManager.listGroups, StreamsGroup.isInStates, describeGroups)."""

from __future__ import annotations

from typing import Any

import pytest

from coordinator_state.config import EngineConfig
from coordinator_state.listing import described_group, list_groups_body
from coordinator_state.streams.group import StreamsGroup
from coordinator_state.streams.member import StreamsMember
from coordinator_state.streams.views import snapshot


def _streams(group_id: str, empty: bool) -> dict[str, Any]:
    """An Empty streams group's snapshot, or a NotReady one's (a member, no topology)."""
    group = StreamsGroup(group_id, 0, EngineConfig())
    if not empty:
        group.members["m"] = StreamsMember("m")
    return snapshot(group)


CLASSIC = {"group_id": "c", "state": "Stable", "protocol_type": "consumer", "protocol_name": "range", "members": []}


def test_a_streams_group_lists_with_protocol_and_group_type_streams() -> None:
    body = list_groups_body(5, [CLASSIC, _streams("s", empty=False)])
    assert body["groups"] == [
        {"group_id": "c", "protocol_type": "consumer", "group_state": "Stable", "group_type": "classic"},
        {"group_id": "s", "protocol_type": "streams", "group_state": "NotReady", "group_type": "streams"}]


@pytest.mark.parametrize(("states", "types", "listed"), [
    (["not_ready"], [], ["s"]), ([" NOT_READY "], [], ["s"]), (["NotReady"], [], []),
    (["stable"], [], ["c"]), ([], ["Streams"], ["e", "s"]), ([], ["classic"], ["c"]), ([], ["consumer"], []),
    (["empty", "not_ready"], ["streams"], ["e", "s"]),
])
def test_filters(states: list[str], types: list[str], listed: list[str]) -> None:
    body = list_groups_body(5, [CLASSIC, _streams("s", empty=False), _streams("e", empty=True)], states, types)
    assert [g["group_id"] for g in body["groups"]] == listed


def test_describe_groups_of_a_streams_group_reads_dead_with_no_error() -> None:
    entry = described_group("s", _streams("s", empty=False), 5, False)
    assert (entry["error_code"], entry["group_state"], entry["members"], entry["protocol_type"]) == (0, "Dead", [], "")
