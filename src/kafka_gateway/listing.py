"""ListGroups answered from group snapshots (PROTOCOL.md sections 4 and 8).

On the request topic no single group holds the answer, so the gateway answers ListGroups itself from the
latest snapshot of every group (the compacted snapshot topic), the way Kafka's broker lists the groups it
coordinates: every group here is a classic group.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

CLASSIC = "classic"


def list_groups_body(snapshots: Iterable[Mapping[str, Any]], version: int,
                     request: Mapping[str, Any]) -> dict[str, Any]:
    """The ListGroups response body: every group, filtered by state (v4+) and type (v5+), case-insensitively
    as Kafka does; `protocol_type` empty when the group has none."""
    states = {state.lower() for state in request.get("states_filter") or [] if isinstance(state, str)}
    types = {kind.lower() for kind in request.get("types_filter") or [] if isinstance(kind, str)}
    groups = []
    for snapshot in snapshots:
        state = str(snapshot.get("state", ""))
        if version >= 4 and states and state.lower() not in states:
            continue
        if version >= 5 and types and CLASSIC not in types:
            continue
        entry: dict[str, Any] = {"group_id": snapshot.get("group_id"),
                                 "protocol_type": snapshot.get("protocol_type") or ""}
        if version >= 4:
            entry["group_state"] = state
        if version >= 5:
            entry["group_type"] = CLASSIC
        groups.append(entry)
    groups.sort(key=lambda entry: str(entry["group_id"]))
    return {"error_code": 0, "error": "NONE", "groups": groups}
