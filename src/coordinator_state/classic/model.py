"""The classic group's vocabulary (SEMANTICS.md sections 1 and 3): its states with their allowed transitions,
and its members, declared once (declared.py) for the journal, the state codec and the snapshot."""

from __future__ import annotations

from enum import StrEnum
from typing import TYPE_CHECKING, Any

from ..declared import Declaration, attached, declared, identity, stored
from ..records import Protocol, Reply

if TYPE_CHECKING:
    from .data import ClassicGroup


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

# Allowed previous states of each state, as in Kafka's ClassicGroupState; `rebalance.transition_to` checks it.
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


def _reply_to_json(reply: Reply | None) -> list[Any] | None:
    if reply is None:
        return None
    return [reply.api, reply.version, reply.correlation_id, reply.client_id, reply.reply_to]


def _reply_from_json(data: list[Any] | None) -> Reply | None:
    return None if data is None else Reply._make(data)


# Read and written at every call of the Spark job's step: map()s of builtins, no Python frame per protocol.

def _protocols_to_json(protocols: tuple[Protocol, ...]) -> list[list[str]]:
    return list(map(list, protocols))


def _protocols_from_json(data: list[list[str]]) -> tuple[Protocol, ...]:
    return tuple(map(Protocol._make, data))


def _subscription(protocols: tuple[Protocol, ...], group: ClassicGroup) -> str | None:
    """What the snapshot shows of a member's protocols: its metadata for the group's selected protocol."""
    return metadata_for(protocols, group.protocol_name)


def metadata_for(protocols: tuple[Protocol, ...], protocol_name: str | None) -> str | None:
    """A member's metadata for a protocol (None if it does not offer it)."""
    for protocol in protocols:
        if protocol.name == protocol_name:
            return protocol.metadata
    return None


@declared()
class Member:
    """A member (SEMANTICS.md 1.2). A static replacement makes a new Member: the identity fields never change."""

    member_id: str = identity("id", shown="member_id")
    group_instance_id: str | None = identity("instance", shown="group_instance_id")
    client_id: str = identity("client_id", shown="client_id")
    client_host: str = identity("client_host", shown="client_host")
    session_timeout_ms: int = stored("session", shown="session_timeout_ms")
    rebalance_timeout_ms: int = stored("rebalance", shown="rebalance_timeout_ms")
    protocol_type: str = identity("protocol_type")
    protocols: tuple[Protocol, ...] = stored("protocols", encode=_protocols_to_json, decode=_protocols_from_json,
                                             shown="subscription", view=_subscription)
    assignment: str = stored("assignment", default="", shown="assignment")
    join_waiter: Reply | None = stored("join_waiter", default=None, encode=_reply_to_json, decode=_reply_from_json)
    sync_waiter: Reply | None = stored("sync_waiter", default=None, encode=_reply_to_json, decode=_reply_from_json)
    is_new: bool = stored("is_new", default=True)
    rank: int = attached(default=0)  # join order, for restoring it after an undo (journal.py)

    def matches(self, protocols: tuple[Protocol, ...]) -> bool:
        return self.protocols == protocols


MEMBER = Declaration(Member)
