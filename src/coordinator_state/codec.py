"""A group's state as bytes for Spark's state store: JSON, versioned by `format`, add-only, no pickle.

Each format only adds fields to the one before, and this reader takes every format up to its own,
defaulting what an older one lacks; a format it does not know (a newer release's) is refused loudly,
so an older release never silently drops what it cannot read.

- format 1: membership (SEMANTICS.md);
- format 2: + committed offsets, the time of the last state transition, the members' subscribed
  topics (docs/OFFSETS_AND_LISTING.md). A format-1 group loads with no offsets, its subscriptions
  unknown, and its last change time standing in for its last transition (never earlier than the real
  one, so no offset expires early).
"""

from __future__ import annotations

from typing import Any

from .config import EngineConfig
from .group import Group
from .model import ClassicGroupState, Member
from .offsets import OffsetStore
from .output import from_json, to_json
from .records import Protocol, Reply
from .timers import Timers

FORMAT = 2
READABLE_FORMATS = (1, 2)


class StateFormatError(ValueError):
    """Stored state this version cannot read (written by a newer, incompatible release)."""


def _reply_to_json(reply: Reply | None) -> list[Any] | None:
    if reply is None:
        return None
    return [reply.api, reply.version, reply.correlation_id, reply.client_id, reply.reply_to]


def _reply_from_json(data: list[Any] | None) -> Reply | None:
    return None if data is None else Reply(data[0], data[1], data[2], data[3], data[4])


def encode_group(group: Group) -> bytes:
    data = {
        "format": FORMAT,
        "group_id": group.group_id,
        "created_ms": group.created_ms,
        "state": group.state.value,
        "previous_state": None if group.previous_state is None else group.previous_state.value,
        "generation_id": group.generation_id,
        "protocol_type": group.protocol_type,
        "protocol_name": group.protocol_name,
        "leader": group.leader,
        "members": [
            {
                "id": m.member_id,
                "instance": m.group_instance_id,
                "client_id": m.client_id,
                "client_host": m.client_host,
                "session": m.session_timeout_ms,
                "rebalance": m.rebalance_timeout_ms,
                "protocol_type": m.protocol_type,
                "protocols": [[p.name, p.metadata] for p in m.protocols],
                "assignment": m.assignment,
                "join_waiter": _reply_to_json(m.join_waiter),
                "sync_waiter": _reply_to_json(m.sync_waiter),
                "is_new": m.is_new,
            }
            for m in group.members.values()
        ],
        "pending_members": list(group.pending_members),
        "pending_sync": list(group.pending_sync),
        "new_member_added": group.new_member_added,
        "timers": group.timers.to_json(),
        "clock": group.clock,
        "next_id_seq": group.next_id_seq,
        "version": group.version,
        "changed_at": group.changed_at,
        "offsets": group.offsets.to_json(),
        "state_since_ms": group.state_since_ms,
        "subscribed_topics": None if group.subscribed_topics is None else sorted(group.subscribed_topics),
    }
    return to_json(data).encode("utf-8")


def decode_group(raw: bytes, config: EngineConfig) -> Group:
    data = from_json(raw)
    if data.get("format") not in READABLE_FORMATS:
        raise StateFormatError(f"group state format {data.get('format')!r} is not readable by this release "
                               f"(reads formats {READABLE_FORMATS}); run the release that wrote the checkpoint")
    group = Group(data["group_id"], data["created_ms"], config)
    group.state = ClassicGroupState(data["state"])
    group.previous_state = None if data["previous_state"] is None else ClassicGroupState(data["previous_state"])
    group.generation_id = data["generation_id"]
    group.protocol_type = data["protocol_type"]
    group.protocol_name = data["protocol_name"]
    group.leader = data["leader"]
    for m in data["members"]:
        member = Member(
            m["id"], m["instance"], m["client_id"], m["client_host"], m["session"], m["rebalance"],
            m["protocol_type"], tuple(Protocol(name, meta) for name, meta in m["protocols"]), m["assignment"],
            _reply_from_json(m["join_waiter"]), _reply_from_json(m["sync_waiter"]), m["is_new"], group.take_rank(),
        )
        group.members[member.member_id] = member
        if member.group_instance_id is not None:
            group.static_members[member.group_instance_id] = member.member_id
        if member.join_waiter is not None:
            group.awaiting_join += 1
        group.count_protocols(member, +1)
    group.pending_members = {member_id: group.take_rank() for member_id in data["pending_members"]}
    group.pending_sync = {member_id: group.take_rank() for member_id in data["pending_sync"]}
    group.new_member_added = data["new_member_added"]
    group.timers = Timers.from_json(data["timers"])
    group.clock = data["clock"]
    group.next_id_seq = data["next_id_seq"]
    group.version = data["version"]
    group.changed_at = data["changed_at"]
    group.offsets = OffsetStore.from_json(data.get("offsets", []))
    group.state_since_ms = data.get("state_since_ms", group.changed_at)
    topics = data.get("subscribed_topics")
    group.subscribed_topics = None if topics is None else frozenset(topics)
    return group
