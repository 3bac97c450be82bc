"""DescribeGroups and ListGroups answers, computed from group snapshots (docs/OFFSETS_AND_LISTING.md 4-5).

Both answers need only what a group's snapshot (PROTOCOL.md section 4) carries, so the same rules serve
a group's DescribeGroups handler and ListGroups wherever it is asked (`envelope.answer_list_groups`: a
LocalCoordinator's groups, the snapshot topic a gateway or the CLI reads).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from .errors import Error

GROUP_TYPE = "classic"
STREAMS = "streams"  # a streams group's snapshot says so (PROTOCOL.md section 10); a classic one has no group_type
DEAD = "Dead"
# The operations Kafka 4.x supports on a group (AclEntry.supportedOperations(GROUP)) by their AclOperation codes:
# DescribeGroups' `authorized_operations` has one bit per allowed operation's code (Utils.to32BitField).
GROUP_OPERATION_CODES = {"READ": 3, "DELETE": 6, "DESCRIBE": 8, "DESCRIBE_CONFIGS": 10, "ALTER_CONFIGS": 11}


def authorized_operations(allowed: Iterable[str]) -> int:
    """The `authorized_operations` bit field of the group operations named in `allowed`."""
    return sum(1 << GROUP_OPERATION_CODES[operation] for operation in set(allowed))


# No authorizer: every operation is allowed, as KafkaApis reports it (the gateway's authorization unit puts in what
# the asking principal may do).
ALL_GROUP_OPERATIONS = authorized_operations(GROUP_OPERATION_CODES)
# DescribeGroupsResponse's default: "authorized operations not requested".
OPERATIONS_NOT_REQUESTED = -(2**31)

Snapshot = Mapping[str, Any]


def _top(version: int, throttle_from: int) -> dict[str, Any]:
    body: dict[str, Any] = {"error_code": int(Error.NONE), "error": Error.NONE.name}
    if version >= throttle_from:
        body["throttle_time_ms"] = 0
    return body


def _not_found(group_id: str, snapshot: Snapshot | None) -> str:
    """The message of the GroupIdNotFoundException GroupMetadataManager.classicGroup throws for this group."""
    if snapshot is None:
        return f"Group {group_id} not found."
    return f"Group {group_id} is not a classic group."


def described_group(group_id: str, snapshot: Snapshot | None, version: int,
                    include_authorized_operations: bool) -> dict[str, Any]:
    """One DescribeGroups entry (GroupMetadataManager.describeGroups): a missing group, or one that is not a classic
    group (a streams group), reads as Dead; with no error up to v5, with GROUP_ID_NOT_FOUND and its message from v6
    (KIP-1043), and then without authorized operations (KafkaApis sets them only on a group described without error)."""
    entry: dict[str, Any] = {"error_code": int(Error.NONE), "error": Error.NONE.name}
    if version >= 6:
        entry["error_message"] = None
    entry["group_id"] = group_id
    if snapshot is None or group_type(snapshot) != GROUP_TYPE:
        entry.update(group_state=DEAD, protocol_type="", protocol_data="", members=[])
        if version >= 6:
            entry.update(error_code=int(Error.GROUP_ID_NOT_FOUND), error=Error.GROUP_ID_NOT_FOUND.name,
                         error_message=_not_found(group_id, snapshot))
    else:
        stable = snapshot["state"] == "Stable"
        entry.update(
            group_state=snapshot["state"],
            protocol_type=snapshot["protocol_type"] or "",
            protocol_data=(snapshot["protocol_name"] or "") if stable else "",
            members=[_member(m, version, stable) for m in snapshot["members"]],
        )
    if version >= 3:
        entry["authorized_operations"] = (ALL_GROUP_OPERATIONS if include_authorized_operations
                                          and entry["error_code"] == Error.NONE else OPERATIONS_NOT_REQUESTED)
    return entry


def _member(member: Mapping[str, Any], version: int, stable: bool) -> dict[str, Any]:
    """ClassicGroupMember.describe in Stable; describeNoMetadata (assignment, no metadata) otherwise."""
    out: dict[str, Any] = {"member_id": member["member_id"]}
    if version >= 4:
        out["group_instance_id"] = member["group_instance_id"]
    out["client_id"] = member["client_id"]
    out["client_host"] = member["client_host"]
    out["member_metadata"] = (member["subscription"] or "") if stable else ""
    out["member_assignment"] = member["assignment"]
    return out


def describe_groups_body(version: int, described: Sequence[dict[str, Any]]) -> dict[str, Any]:
    """A DescribeGroups response body holding the given entries."""
    return {**_top(version, throttle_from=1), "groups": list(described)}


def group_type(snapshot: Snapshot) -> str:
    return str(snapshot.get("group_type", GROUP_TYPE))


def _filtered_state(snapshot: Snapshot) -> str:
    """The state as a states filter matches it: a classic group's in lower case (ClassicGroup.isInStates), a
    streams group's as StreamsGroupState.toLowerCaseString writes it (NotReady: "not_ready")."""
    state = str(snapshot["state"])
    if group_type(snapshot) == STREAMS:
        return "".join(f"_{c.lower()}" if c.isupper() and i else c.lower() for i, c in enumerate(state))
    return state.lower()


def list_groups_body(version: int, snapshots: Iterable[Snapshot], states_filter: Sequence[str] = (),
                     types_filter: Sequence[str] = ()) -> dict[str, Any]:
    """A ListGroups response body (GroupMetadataManager.listGroups): every group passing both filters, by id.

    States match case-insensitively after trimming (ClassicGroup.isInStates, StreamsGroup.isInStates); types
    case-insensitively without trimming (Group.GroupType.parse). A streams group lists with protocol type and
    group type "streams" (PROTOCOL.md section 10).
    """
    states = {s.strip().lower() for s in states_filter} if states_filter else None
    types = {t.lower() for t in types_filter} if types_filter else None
    listed = [s for s in snapshots if (states is None or _filtered_state(s) in states)
              and (types is None or group_type(s) in types)]
    groups = []
    for snapshot in sorted(listed, key=lambda s: str(s["group_id"])):
        kind = group_type(snapshot)
        entry: dict[str, Any] = {"group_id": snapshot["group_id"],
                                 "protocol_type": STREAMS if kind == STREAMS else snapshot["protocol_type"] or ""}
        if version >= 4:
            entry["group_state"] = snapshot["state"]
        if version >= 5:
            entry["group_type"] = kind
        groups.append(entry)
    return {**_top(version, throttle_from=1), "groups": groups}
