"""A streams group member (Kafka's StreamsGroupMember) and how a heartbeat updates it.

A member is immutable: a heartbeat builds the updated member and the group stores it only once the whole request
has succeeded, so a refused request leaves the member as it was.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from ..records import Endpoint, StreamsGroupHeartbeat, TaskOffset
from .reconciliation import MemberState, Reconciliation
from .tasks import NO_ASSIGNED_TASKS, AssignedTasks

__all__ = ["StreamsMember", "epoch_relevant_change", "new_member", "updated_member"]


@dataclass(frozen=True, slots=True)
class StreamsMember:
    member_id: str
    member_epoch: int = 0
    previous_member_epoch: int = -1
    state: MemberState = MemberState.STABLE
    instance_id: str | None = None
    rack_id: str | None = None
    client_id: str = ""
    client_host: str = ""
    rebalance_timeout_ms: int = -1
    topology_epoch: int = -1
    process_id: str = ""
    user_endpoint: Endpoint | None = None
    client_tags: tuple[tuple[str, str], ...] = ()  # by key
    assigned: AssignedTasks = NO_ASSIGNED_TASKS
    pending_revocation: AssignedTasks = NO_ASSIGNED_TASKS
    task_offsets: tuple[TaskOffset, ...] = ()  # state, not snapshot
    task_end_offsets: tuple[TaskOffset, ...] = ()

    def reconciliation(self) -> Reconciliation:
        return Reconciliation(self.member_epoch, self.previous_member_epoch, self.state, self.assigned,
                              self.pending_revocation)

    def reconciled(self, result: Reconciliation) -> StreamsMember:
        return replace(self, member_epoch=result.member_epoch, previous_member_epoch=result.previous_member_epoch,
                       state=result.state, assigned=result.assigned, pending_revocation=result.pending_revocation)

    def metadata(self) -> tuple[object, ...]:
        """What a dynamic member's change of bumps the group epoch (StreamsGroupMemberMetadataValue)."""
        return (self.instance_id, self.rack_id, self.client_id, self.client_host, self.rebalance_timeout_ms,
                self.topology_epoch, self.process_id, self.user_endpoint, self.client_tags)

    def epoch_relevant(self) -> tuple[object, ...]:
        """What a static member's change of bumps it (hasEpochRelevantMemberConfigChanged, KIP-1071)."""
        return (self.topology_epoch, self.rack_id, self.client_tags, self.process_id)


def new_member(member_id: str) -> StreamsMember:
    """A member as StreamsGroupMember.Builder(memberId) starts it: epoch 0, previous epoch -1."""
    return StreamsMember(member_id)


def updated_member(member: StreamsMember, req: StreamsGroupHeartbeat) -> StreamsMember:
    """The member with the heartbeat's fields: null ones unchanged, but a join sets `user_endpoint` as given
    (GroupMetadataManager.streamsGroupHeartbeat, step 1)."""
    unchanged_timeout = req.rebalance_timeout_ms == -1
    if (unchanged_timeout and req.member_epoch != 0 and req.reply.client_id == member.client_id
            and req.client_host == member.client_host and req.instance_id in (None, member.instance_id)
            and req.rack_id is None and req.process_id is None and req.user_endpoint is None
            and req.client_tags is None and req.task_offsets is None and req.task_end_offsets is None):
        return member  # the usual heartbeat: nothing to update
    return replace(
        member,
        instance_id=req.instance_id if req.instance_id is not None else member.instance_id,
        rack_id=req.rack_id if req.rack_id is not None else member.rack_id,
        client_id=req.reply.client_id,
        client_host=req.client_host,
        rebalance_timeout_ms=member.rebalance_timeout_ms if unchanged_timeout else req.rebalance_timeout_ms,
        topology_epoch=req.topology.epoch if req.topology is not None else member.topology_epoch,
        process_id=req.process_id if req.process_id is not None else member.process_id,
        user_endpoint=req.user_endpoint if req.member_epoch == 0 or req.user_endpoint is not None
        else member.user_endpoint,
        client_tags=tuple(sorted(dict(req.client_tags).items())) if req.client_tags is not None else member.client_tags,
        task_offsets=req.task_offsets if req.task_offsets is not None else member.task_offsets,
        task_end_offsets=req.task_end_offsets if req.task_end_offsets is not None else member.task_end_offsets,
    )


def epoch_relevant_change(before: StreamsMember, after: StreamsMember) -> bool:
    """Whether the update bumps the group epoch: any metadata for a dynamic member, the assignment's inputs only
    for a static one (PROTOCOL.md section 10, Epochs)."""
    if after.instance_id is None:
        return before.metadata() != after.metadata()
    return before.epoch_relevant() != after.epoch_relevant()
