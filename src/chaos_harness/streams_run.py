"""Chaos with Kafka Streams instances (`group_type` "streams"): `ChaosRun` with `StreamsMember`s in one streams group.

The application: one stateful subtopology "0" reading the run's topics (one task per partition of the widest,
Kafka's partition grouping), with a changelog topic `<group>-store-changelog`; every member sends the topics'
partition counts as `topic_metadata` (the gateway's job on the wire). Each member slot is one Kafka Streams
instance: its process id is the slot's and survives restarts (Kafka Streams keeps it in its state directory),
each incarnation joins with a member id drawn from the run's RNG (a UUID, as Kafka's client draws it), static
slots with the slot's instance id.

What the ledger follows is the active tasks (standbys are not owners); an identity is the instance id of a
static member and the process id of a dynamic one. Besides the classic report's figures the report counts
`group_epoch_bumps` (group epoch at the end minus at first stability) and `task_movements` (active tasks that
an instance or process took over from another one); `rebalances` counts target assignments (assignment epoch
bumps), and `generations` follows the assignment epoch.
"""

from __future__ import annotations

import uuid
from collections.abc import Mapping
from typing import Any

from coordinator_state.consumer_protocol import TopicPartition
from group_client import StreamsMember, StreamsMemberConfig, StreamsMemberState, Subtopology, Tasks, new_reply_to

from .ledger import ProcessKey
from .run import ChaosRun
from .scenarios import slot_ids

SUBTOPOLOGY = "0"


def changelog_topic(group_id: str) -> str:
    """The application's one state store's changelog (Kafka Streams names it `<application.id>-<store>-changelog`)."""
    return f"{group_id}-store-changelog"


def process_id(slot: int) -> str:
    """A member slot's process id, the same for every incarnation."""
    return f"process-{slot:02d}"


class StreamsChaosRun(ChaosRun):
    """A chaos run whose members are Kafka Streams instances in one streams group."""

    def _task_count(self) -> int:
        return max(int(n) for n in self.config["topics"].values())

    def _units(self) -> tuple[TopicPartition, ...]:
        return tuple((SUBTOPOLOGY, p) for p in range(self._task_count()))

    def _new_member(self, slot: int, incarnation: int, key: ProcessKey) -> StreamsMember:
        config = self._streams_config(slot)
        reply_to = new_reply_to(config.client_id, f"{incarnation}-{self.rng.getrandbits(32):08x}")
        member_id = str(uuid.UUID(int=self.rng.getrandbits(128), version=4))

        def assigned(tasks: Tasks) -> None:
            member = self.processes[key].member
            assert isinstance(member, StreamsMember)
            if tasks.active:
                self.ledger.assigned(key, self._identity(member), member.owned.active, self.now)

        def released(tasks: Tasks) -> None:
            self.ledger.released(key, tasks.active)

        return StreamsMember(config, member_id, reply_to, on_assigned=assigned, on_revoked=released,
                             on_lost=released)

    def _streams_config(self, slot: int) -> StreamsMemberConfig:
        c = self.config
        client_id, instance_id = slot_ids(c, slot)
        changelog = changelog_topic(c["group_id"])
        return StreamsMemberConfig(
            group_id=c["group_id"],
            client_id=client_id,
            process_id=process_id(slot),
            subtopologies=(Subtopology(SUBTOPOLOGY, tuple(sorted(c["topics"])), (changelog,)),),
            topic_partitions={**c["topics"], changelog: self._task_count()},
            instance_id=instance_id,
            rebalance_timeout_ms=c["rebalance_timeout_ms"],
            request_timeout_ms=c["request_timeout_ms"],
            retry_backoff_ms=c["retry_backoff_ms"],
        )

    def _identity(self, member: Any) -> str:
        return str(member.config.instance_id or member.config.process_id)

    def _epochs(self, snapshot: Mapping[str, Any]) -> dict[str, int]:
        return {"group_epoch": int(snapshot.get("group_epoch", 0)),
                "assignment_epoch": int(snapshot.get("assignment_epoch", 0))}

    def _epoch_of(self, snapshot: Mapping[str, Any]) -> int:
        return int(snapshot["assignment_epoch"])

    def _settled(self, member: Any, snapshot: Mapping[str, Any]) -> bool:
        """Stable at the assignment epoch, owning what the coordinator says it owns."""
        if member.state is not StreamsMemberState.STABLE or member.member_epoch != snapshot["assignment_epoch"]:
            return False
        held = [m for m in snapshot["members"] if m["member_id"] == member.member_id]
        return bool(held) and Tasks.from_wire(held[0]["assigned_tasks"]) == member.owned

    def _report(self, final: dict[str, Any]) -> dict[str, Any]:
        report = super()._report(final)
        end = self.epochs_at["end"]
        stable = self.epochs_at.get("stable", end)
        report["group_epoch_bumps"] = end["group_epoch"] - stable["group_epoch"]
        report["task_movements"] = self.ledger.moves
        return report

