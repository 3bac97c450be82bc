"""OffsetCommit and OffsetFetch validation against a streams group (StreamsGroup.validateOffsetCommit,
validateOffsetFetch, createAssignmentEpochValidator; after StreamsGroupTest's validation cases)."""

from __future__ import annotations

from dataclasses import replace

import pytest

from coordinator_state.config import EngineConfig
from coordinator_state.errors import Error
from coordinator_state.records import Subtopology, TopicInfo, Topology
from coordinator_state.streams.group import StreamsGroup
from coordinator_state.streams.member import StreamsMember
from coordinator_state.streams.offsets import validate_offset_commit, validate_offset_fetch
from coordinator_state.streams.tasks import AssignedTasks


def _group() -> StreamsGroup:
    """Member m1 at epoch 5: tasks s:0 (epoch 3) and s:1 (epoch 5) assigned, s:2 (epoch 4) pending revocation;
    subtopology s reads `in` and the repartition topic `rep`, subtopology t reads `other`."""
    group = StreamsGroup("g", 0, EngineConfig())
    group.topology = Topology(0, (Subtopology("s", ("in",), repartition_source_topics=(TopicInfo("rep"),)),
                                  Subtopology("t", ("other",))))
    group.members["m1"] = StreamsMember(
        "m1", member_epoch=5, previous_member_epoch=4, assigned=AssignedTasks({("s", 0): 3, ("s", 1): 5}),
        pending_revocation=AssignedTasks({("s", 2): 4}))
    return group


@pytest.mark.parametrize(("member", "epoch", "version", "partitions", "expected"), [
    ("m1", 5, 9, [("in", 0), ("other", 7)], None),  # its own epoch commits everything
    ("m1", 6, 9, [("in", 0)], Error.STALE_MEMBER_EPOCH),  # newer
    ("m1", 5, 8, [("in", 0)], Error.UNSUPPORTED_VERSION),  # a streams member commits with v9+
    ("zz", 5, 9, [("in", 0)], Error.UNKNOWN_MEMBER_ID),
    ("", -1, 9, [("in", 0)], Error.UNKNOWN_MEMBER_ID),  # no member id while the group has members
    ("m1", 4, 9, [("in", 0), ("rep", 0)], None),  # older: s:0 was assigned at 3 <= 4
    ("m1", 4, 9, [("in", 2)], None),  # pending revocation, assigned at 4
    ("m1", 4, 9, [("in", 1)], Error.STALE_MEMBER_EPOCH),  # assigned at 5 > 4
    ("m1", 4, 9, [("in", 3)], Error.STALE_MEMBER_EPOCH),  # not its task
    ("m1", 4, 9, [("other", 0)], Error.STALE_MEMBER_EPOCH),  # a subtopology it holds nothing of
    ("m1", 4, 9, [("unknown", 0)], Error.STALE_MEMBER_EPOCH),  # not a topic of the topology
    ("m1", 4, 9, [("in", 0), ("in", 1)], Error.STALE_MEMBER_EPOCH),  # one refused partition refuses all
])
def test_offset_commit(member: str, epoch: int, version: int, partitions: list[tuple[str, int]],
                       expected: Error | None) -> None:
    assert validate_offset_commit(_group(), member, epoch, version, partitions) == expected


def test_a_commit_without_a_member_needs_an_empty_group() -> None:
    group = _group()
    group.members.clear()
    assert validate_offset_commit(group, "", -1, 2, [("in", 0)]) is None


@pytest.mark.parametrize(("member", "epoch", "expected"), [
    (None, -1, None), ("m1", 5, None), ("m1", 4, Error.STALE_MEMBER_EPOCH), ("m1", 6, Error.STALE_MEMBER_EPOCH),
    ("zz", 5, Error.UNKNOWN_MEMBER_ID), (None, 5, Error.UNKNOWN_MEMBER_ID),
])
def test_offset_fetch(member: str | None, epoch: int, expected: Error | None) -> None:
    assert validate_offset_fetch(_group(), member, epoch) == expected


def test_a_minus_two_member_commits_nothing_at_its_old_epoch() -> None:
    group = _group()
    member = group.members["m1"]
    group.members["m1"] = replace(member, member_epoch=-2, assigned=member.assigned.with_active_epochs_reset())
    assert validate_offset_commit(group, "m1", 5, 9, [("in", 0)]) is Error.STALE_MEMBER_EPOCH
