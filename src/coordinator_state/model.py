"""The group's data model (SEMANTICS.md section 1): states with their allowed transitions, and members."""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum
from typing import Any

from .records import Protocol, Reply


class ClassicGroupState(StrEnum):
    """The classic group states, named and documented as Kafka's ClassicGroupState (SEMANTICS.md section 3).

    Per state: what each request gets (the tables live in handlers/), and the states it may go to.
    """

    EMPTY = "Empty"
    """No members (pending member ids aside). It may hold a protocol type and a generation.

    JoinGroup: a new member is added and a rebalance starts (initial delay); a known id is UNKNOWN_MEMBER_ID.
    SyncGroup, Heartbeat: UNKNOWN_MEMBER_ID. LeaveGroup: UNKNOWN_MEMBER_ID per member (a pending id leaves).
    Retention timer: the group is removed. Goes to: PreparingRebalance (a member is added).
    """

    PREPARING_REBALANCE = "PreparingRebalance"
    """Members are (re)joining; their JoinGroups are parked until the join phase completes.

    JoinGroup: parked (the phase completes at once when everyone has joined, except after Empty).
    SyncGroup, Heartbeat: REBALANCE_IN_PROGRESS (a heartbeat still keeps the session).
    LeaveGroup: removes the members; the phase may complete. Join timer: the phase completes.
    Goes to: CompletingRebalance (completed with members), Empty (completed with none).
    """

    COMPLETING_REBALANCE = "CompletingRebalance"
    """The generation is chosen; the members' SyncGroups are parked until the leader's brings the assignment.

    JoinGroup: unchanged metadata gets the current generation at once; anything else rebalances.
    SyncGroup: a follower's is parked; the leader's answers everyone and the group becomes Stable.
    Heartbeat: NONE. LeaveGroup, session or pending-sync expiry: rebalance.
    Goes to: Stable (the leader's SyncGroup), PreparingRebalance.
    """

    STABLE = "Stable"
    """The generation is running with its assignment.

    JoinGroup: a follower with unchanged metadata gets the current generation; the leader, changed metadata
    or a new member rebalances; a static member's replacement keeps the generation if the selected protocol
    stays. SyncGroup: the stored assignment. Heartbeat: NONE. LeaveGroup, expiries: rebalance.
    Goes to: PreparingRebalance.
    """

    DEAD = "Dead"
    """Kafka's state for a group being unloaded or deleted. Nothing here enters it (SEMANTICS.md 13): a
    removed group is gone at once, with a tombstone. Goes to: nothing."""


# The states as module constants, for the paths every request takes (see errors.NO_ERROR).
EMPTY = ClassicGroupState.EMPTY
PREPARING = ClassicGroupState.PREPARING_REBALANCE
COMPLETING = ClassicGroupState.COMPLETING_REBALANCE
STABLE = ClassicGroupState.STABLE
DEAD = ClassicGroupState.DEAD

# The name this enum had before: kept for code that imports it (not PySpark's GroupState of job.py).
GroupState = ClassicGroupState

# Allowed previous states of each state, as in Kafka's ClassicGroupState; `Group.transition_to` checks it.
VALID_PREVIOUS_STATES: dict[ClassicGroupState, frozenset[ClassicGroupState]] = {
    ClassicGroupState.EMPTY: frozenset({ClassicGroupState.PREPARING_REBALANCE}),
    ClassicGroupState.PREPARING_REBALANCE: frozenset(
        {ClassicGroupState.EMPTY, ClassicGroupState.STABLE, ClassicGroupState.COMPLETING_REBALANCE}),
    ClassicGroupState.COMPLETING_REBALANCE: frozenset({ClassicGroupState.PREPARING_REBALANCE}),
    ClassicGroupState.STABLE: frozenset({ClassicGroupState.COMPLETING_REBALANCE}),
    ClassicGroupState.DEAD: frozenset(),
}


class IllegalTransition(RuntimeError):
    """A transition the state table forbids: a bug in the engine, never the client's fault."""


@dataclass(slots=True)
class Member:
    member_id: str
    group_instance_id: str | None
    client_id: str
    client_host: str
    session_timeout_ms: int
    rebalance_timeout_ms: int
    protocol_type: str
    protocols: tuple[Protocol, ...]
    assignment: str = ""
    join_waiter: Reply | None = None
    sync_waiter: Reply | None = None
    is_new: bool = True
    rank: int = 0  # join order, for restoring it after an undo (journal.py); not part of the state

    def mutable_fields(self) -> tuple[Any, ...]:
        """The fields a request may change: a member's before-image in the undo journal."""
        return (self.protocols, self.session_timeout_ms, self.rebalance_timeout_ms, self.assignment,
                self.join_waiter, self.sync_waiter, self.is_new)

    def restore(self, fields: tuple[Any, ...]) -> None:
        (self.protocols, self.session_timeout_ms, self.rebalance_timeout_ms, self.assignment,
         self.join_waiter, self.sync_waiter, self.is_new) = fields

    def metadata_for(self, protocol_name: str | None) -> str | None:
        for protocol in self.protocols:
            if protocol.name == protocol_name:
                return protocol.metadata
        return None

    def matches(self, protocols: tuple[Protocol, ...]) -> bool:
        return self.protocols == protocols
