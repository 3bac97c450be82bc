"""PROTOCOL.md section 4: a snapshot's `version` grows exactly when the snapshot changed.

"Changed" means any field other than `timestamp_ms` and `version`. Checked at every event (each request
and each timer that fires) over random client scripts: the version moves by one when the snapshot's
content differs from the one after the previous event (or the group is removed: a tombstone), and stays
when it does not.
"""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given, settings

from coordinator_state import classic, snapshot_of
from coordinator_state.classic import ClassicGroup, events

from .harness import Env
from .test_properties import STATIC, play, walks


def content(group: ClassicGroup) -> dict[str, Any]:
    snapshot = snapshot_of(group)
    del snapshot["timestamp_ms"], snapshot["version"]
    return snapshot


@settings(max_examples=120, deadline=None)
@given(walks, STATIC)
def test_the_version_grows_exactly_when_the_snapshot_changed(steps: list[tuple[Any, ...]],
                                                            static: dict[str, bool]) -> None:
    # By id(group); the group itself is kept too, so that a group created after one was removed cannot reuse its id.
    seen: dict[int, tuple[ClassicGroup, tuple[dict[str, Any], int]]] = {}
    checked = []
    original = events.end_event

    def end_event(group: ClassicGroup, t: int) -> None:
        before = seen[id(group)][1] if id(group) in seen else None
        if before is None:  # the group as created (version 1), or as decoded
            before = (content(group), group.version) if group.version > 1 else (_created(group), 1)
        original(group, t)
        now = (content(group), group.version)
        changed = now[0] != before[0] or group.removed  # a removed group's snapshot is its tombstone
        assert now[1] == before[1] + changed, (before, now)
        seen[id(group)] = (group, now)
        checked.append(changed)

    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(events, "end_event", end_event)
        play(steps, static)
    assert checked  # the walk had events


def _created(group: ClassicGroup) -> dict[str, Any]:
    fresh = classic.create(group.group_id, group.created_ms, group.config)
    return content(fresh)


def test_a_rejoin_that_changes_only_protocols_the_snapshot_does_not_show_is_no_change() -> None:
    """PreparingRebalance keeps the selected protocol: another protocol added beside it is not in the snapshot."""
    env = Env()
    ids = env.stable_group(["a", "b", "c"])
    leader = next(c for c, m in ids.items() if m == env.describe()["leader"])
    follower = next(c for c in ids if c != leader)
    env.join(leader, ids[leader])
    before = env.describe()
    env.join(follower, ids[follower], protocols=[("range", f"{follower}-range"), ("roundrobin", "other")])
    after = env.describe()
    assert after["state"] == "PreparingRebalance" and after["version"] == before["version"]
    env.join(follower, ids[follower], protocols=[("range", "changed")])
    assert env.describe()["version"] == before["version"] + 1  # its subscription changed: a change
