"""The group's data model (SEMANTICS.md section 1): states with their allowed transitions, and members."""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum

from .requests import Protocol, Reply


class GroupState(StrEnum):
    """The classic group states. What each answers is in SEMANTICS.md section 3 and in group.py."""

    EMPTY = "Empty"
    PREPARING_REBALANCE = "PreparingRebalance"
    COMPLETING_REBALANCE = "CompletingRebalance"
    STABLE = "Stable"
    DEAD = "Dead"


# Allowed previous states of each state, as in Kafka's ClassicGroupState. Nothing here enters Dead.
VALID_PREVIOUS_STATES: dict[GroupState, frozenset[GroupState]] = {
    GroupState.EMPTY: frozenset({GroupState.PREPARING_REBALANCE}),
    GroupState.PREPARING_REBALANCE: frozenset(
        {GroupState.EMPTY, GroupState.STABLE, GroupState.COMPLETING_REBALANCE}),
    GroupState.COMPLETING_REBALANCE: frozenset({GroupState.PREPARING_REBALANCE}),
    GroupState.STABLE: frozenset({GroupState.COMPLETING_REBALANCE}),
    GroupState.DEAD: frozenset(),
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

    def metadata_for(self, protocol_name: str | None) -> str | None:
        for protocol in self.protocols:
            if protocol.name == protocol_name:
                return protocol.metadata
        return None

    def matches(self, protocols: tuple[Protocol, ...]) -> bool:
        return self.protocols == protocols
