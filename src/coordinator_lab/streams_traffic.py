"""Simulated Kafka Streams clients against the engine: traffic for replays, and a trace for the streams properties.

A population of streams members (static ones with an instance id, dynamic ones without) of a few streams groups
lives through a seeded schedule of actions, each at its own event time: join, heartbeat, commit (at the member's
epoch, OffsetCommit v9), leave for good (-1), leave temporarily (-2, static members), restart (a new member id; a
static one keeps its instance id) and crash (silence until its restart). A member behaves as Kafka Streams' client
does: it reports its owned tasks when they changed, takes an assignment at once (so its next heartbeat acknowledges
a revocation), and on FENCED_MEMBER_EPOCH or UNKNOWN_MEMBER_ID joins again with epoch 0. The requests go to a
`LocalCoordinator` as they are made (the members react to its answers), so the traffic is a function of the seed.

`Trace` keeps what the property tests check: every request's answers, and each group's snapshot after every
event. The product never imports this module (it is the lab's).
"""

from __future__ import annotations

import random
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from coordinator_state import LocalCoordinator, to_json
from coordinator_state.envelope import (
    BODY,
    CORRELATION_ID,
    REPLY_TO,
    SIMULATION_EPOCH_MS,
    TOPIC_METADATA,
    Api,
    Error,
    request_envelope,
    tick_envelope,
)

SOURCE_TOPIC = "clicks"
PARTITIONS = 6
# One stateless subtopology and one stateful one (its changelog makes standby replicas of its tasks).
TOPOLOGY = {"epoch": 0, "subtopologies": [
    {"subtopology_id": "0", "source_topics": [SOURCE_TOPIC], "source_topic_regex": [], "state_changelog_topics": [],
     "repartition_sink_topics": [], "repartition_source_topics": [], "copartition_groups": []},
    {"subtopology_id": "1", "source_topics": [SOURCE_TOPIC], "source_topic_regex": [],
     "state_changelog_topics": [{"name": "app-store-changelog", "partitions": 0, "replication_factor": 0,
                                 "topic_configs": []}],
     "repartition_sink_topics": [], "repartition_source_topics": [], "copartition_groups": []}]}
# Topics the members' client sees upstream: the source topic and, already created, the changelog.
TOPIC_METADATA_ENTRY = {"topics": [{"name": SOURCE_TOPIC, "partitions": PARTITIONS},
                                   {"name": "app-store-changelog", "partitions": PARTITIONS}]}
CONFIG = {"group.streams.session.timeout.ms": 6000, "group.streams.heartbeat.interval.ms": 1000,
          "group.streams.initial.rebalance.delay.ms": 1000, "group.streams.assignment.interval.ms": 500,
          "group.streams.num.standby.replicas": 1}
ACTIONS = ("heartbeat", "heartbeat", "heartbeat", "commit", "leave", "temporary_leave", "restart", "crash")
_REJOIN = {int(Error.FENCED_MEMBER_EPOCH), int(Error.UNKNOWN_MEMBER_ID)}
TaskLists = dict[str, list[dict[str, Any]]]
_NO_TASKS: TaskLists = {"active_tasks": [], "standby_tasks": [], "warmup_tasks": []}


@dataclass
class Member:
    """One simulated streams client: its identity and what it last heard from the coordinator."""

    group: str
    index: int
    static: bool
    incarnation: int = 0
    epoch: int = 0  # 0: joins next; -1: gone or crashed; -2: temporarily left
    owned: TaskLists = field(default_factory=lambda: dict(_NO_TASKS))
    reported: TaskLists | None = None  # the lists the coordinator last heard

    @property
    def member_id(self) -> str:
        return f"{self.group}-m{self.index}-{self.incarnation}"

    @property
    def instance_id(self) -> str | None:
        return f"{self.group}-i{self.index}" if self.static else None

    @property
    def client(self) -> str:
        return f"{self.group}-c{self.index}"


@dataclass
class Trace:
    """What a run did: the requests in order, every answer, the snapshots of each group after each event."""

    requests: list[dict[str, Any]] = field(default_factory=list)  # Tick records included
    answers: dict[tuple[str, int], list[dict[str, Any]]] = field(default_factory=dict)
    snapshots: list[tuple[int, dict[str, Any]]] = field(default_factory=list)  # (time, snapshot)

    def lines(self) -> list[bytes]:
        return [to_json(r).encode() for r in self.requests]


class Population:
    """The members of `groups` streams groups, driven one action at a time against a LocalCoordinator."""

    def __init__(self, groups: int, members: int, static_share: float = 0.5, seed: int = 0,
                 config: Mapping[str, Any] = CONFIG, start_ms: int = SIMULATION_EPOCH_MS) -> None:
        self.coordinator = LocalCoordinator(config)
        self.members = [Member(f"streams-{g}", m, static=(m < members * static_share))
                        for g in range(groups) for m in range(members)]
        self.trace = Trace()
        self.t = start_ms
        self._correlation = 0
        self._random = random.Random(seed)

    def run(self, steps: int, step_ms: int = 250) -> Trace:
        """An admin's commit to each group first (a classic group holding offsets, which the first streams join
        converts), `steps` seeded actions, `step_ms` apart, each by a member drawn at random; then every live member
        heartbeats until the groups settle."""
        for group in sorted({m.group for m in self.members}):
            self._admin_commit(group)
        for _ in range(steps):
            self.act(self._random.randrange(len(self.members)), self._random.choice(ACTIONS), step_ms)
        for _ in range(12):
            for index in range(len(self.members)):
                self.act(index, "heartbeat", 0)
            self.act(0, "tick", 1000)
        return self.trace

    def act(self, index: int, action: str, after_ms: int) -> None:
        """One action of member `index`, `after_ms` after the previous event (a crashed or departed member's
        heartbeat is its restart)."""
        self.t += after_ms
        member = self.members[index]
        if action == "tick":
            self.trace.requests.append(tick_envelope(self.t))
            self._record_answers(self.coordinator.advance_to(self.t))
        elif member.epoch == -1 or (member.epoch == -2 and action != "temporary_leave"):
            if action in ("restart", "heartbeat"):
                member.incarnation += 1
                self._join(member)
        elif action == "crash":
            member.epoch = -1  # silent from now on: its session expires
        elif action == "restart":
            member.incarnation += 1
            self._join(member)
        elif action == "leave" or (action == "temporary_leave" and member.static):
            self._leave(member, -1 if action == "leave" else -2)
        elif action == "commit" and member.epoch > 0:
            self._commit(member)
        elif member.epoch == 0:
            self._join(member)
        else:
            self._heartbeat(member)

    # ------------------------------------------------------------------ requests

    def _join(self, member: Member) -> None:
        member.epoch, member.owned, member.reported = 0, dict(_NO_TASKS), None
        body: dict[str, Any] = {"group_id": member.group, "member_id": member.member_id, "member_epoch": 0,
                                "rebalance_timeout_ms": 5000, "topology": TOPOLOGY, "process_id": member.client,
                                **_NO_TASKS}
        if member.static:
            body["instance_id"] = member.instance_id
        self._send(member, Api.STREAMS_GROUP_HEARTBEAT, 0, body, topic_metadata=True)

    def _heartbeat(self, member: Member) -> None:
        body: dict[str, Any] = {"group_id": member.group, "member_id": member.member_id,
                                "member_epoch": member.epoch}
        if member.static:
            body["instance_id"] = member.instance_id
        if member.reported != member.owned:
            body.update(member.owned)
        self._send(member, Api.STREAMS_GROUP_HEARTBEAT, 0, body)

    def _leave(self, member: Member, epoch: int) -> None:
        body: dict[str, Any] = {"group_id": member.group, "member_id": member.member_id, "member_epoch": epoch}
        if member.static:
            body["instance_id"] = member.instance_id
        self._send(member, Api.STREAMS_GROUP_HEARTBEAT, 0, body)
        member.epoch = epoch

    def _commit(self, member: Member) -> None:
        partitions = sorted({p for entry in member.owned["active_tasks"] for p in entry["partitions"]})
        body = {"group_id": member.group, "generation_id_or_member_epoch": member.epoch,
                "member_id": member.member_id, "topics": [{"name": SOURCE_TOPIC, "partitions": [
                    {"partition_index": p, "committed_offset": self.t % 1000, "committed_metadata": ""}
                    for p in partitions]}]}
        self._send(member, Api.OFFSET_COMMIT, 9, body)

    def _admin_commit(self, group: str) -> None:
        body = {"group_id": group, "generation_id_or_member_epoch": -1, "member_id": "", "topics": [
            {"name": SOURCE_TOPIC, "partitions": [{"partition_index": 0, "committed_offset": 0,
                                                    "committed_metadata": "admin"}]}]}
        self._send(Member(group, -1, static=False), Api.OFFSET_COMMIT, 9, body)

    def _send(self, member: Member, api: Api, version: int, body: dict[str, Any], topic_metadata: bool = False) -> None:
        self._correlation += 1
        envelope = request_envelope(api, body, version=version, correlation_id=self._correlation,
                                    client_id=member.client, client_host="/10.0.0.1", reply_to=member.client,
                                    timestamp_ms=self.t)
        if topic_metadata:
            envelope[TOPIC_METADATA] = TOPIC_METADATA_ENTRY
        self.trace.requests.append(envelope)
        if api == Api.STREAMS_GROUP_HEARTBEAT and body["member_epoch"] >= 0:
            member.reported = {key: body[key] for key in _NO_TASKS} if "active_tasks" in body else member.reported
        answers = self.coordinator.handle(envelope)
        self._record_answers(answers)
        for answer in answers:
            if answer[CORRELATION_ID] == self._correlation and answer[REPLY_TO] == member.client:
                self._take(member, api, body, answer[BODY])

    def _take(self, member: Member, api: Api, request: dict[str, Any], answer: dict[str, Any]) -> None:
        if api != Api.STREAMS_GROUP_HEARTBEAT or request["member_epoch"] < 0:
            return
        if answer["error_code"] in _REJOIN:
            member.epoch = 0
        elif answer["error_code"] != Error.NONE:
            member.epoch = -1  # refused (UNRELEASED_INSTANCE_ID, ...): tries again at its next turn
        else:
            member.epoch = answer["member_epoch"]
            if answer["active_tasks"] is not None:
                member.owned = {key: answer[key] for key in _NO_TASKS}

    def _record_answers(self, answers: list[dict[str, Any]]) -> None:
        for answer in answers:
            self.trace.answers.setdefault((answer[REPLY_TO], answer[CORRELATION_ID]), []).append(answer)
        for group in sorted({m.group for m in self.members}):
            snapshot = self.coordinator.describe(group)
            if snapshot is not None:
                self.trace.snapshots.append((self.t, snapshot))
