"""A classic group's stored state, derived from its declaration (data.py); the format rules are ../codec.py's.

Only stored fields are written; what is derived from them (join order ranks, the static map, the parked-join
count, the per-protocol counts) is rebuilt when the state is read.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from ..config import EngineConfig
from .data import GROUP, ClassicGroup
from .membership import count_protocols


def encode(group: ClassicGroup) -> dict[str, Any]:
    return GROUP.encode(group)


def decode(data: Mapping[str, Any], config: EngineConfig) -> ClassicGroup:
    group: ClassicGroup = GROUP.load(data, config=config)
    for member in group.members.values():
        member.rank = group.take_rank()
        if member.group_instance_id is not None:
            group.static_members[member.group_instance_id] = member.member_id
        if member.join_waiter is not None:
            group.awaiting_join += 1
        count_protocols(group, member, +1)
    for ids in (group.pending_members, group.pending_sync):
        for member_id in ids:
            ids[member_id] = group.take_rank()
    return group
