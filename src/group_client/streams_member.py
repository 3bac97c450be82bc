"""A Kafka Streams application instance in a streams group (KIP-1071, PROTOCOL.md section 10), sans I/O.

Theory of operation: as `GroupMember`, the member owns no socket, thread or clock: `poll(now_ms)` returns the
request envelopes to send now, `on_response(envelope)` takes every answer, `next_deadline()` says when `poll`
next has work. It does what Kafka 4.4's Streams client does (`StreamsGroupHeartbeatRequestManager`,
`StreamsMembershipManager`) with StreamsGroupHeartbeat v0:

- it joins with epoch 0, its topology, process id, endpoint and empty task lists; the member id is the
  caller's (Kafka's client draws a random UUID; here the caller decides, so a seeded run is reproducible);
  a restart is a new `StreamsMember` with a new member id (and, when static, the same `instance_id`);
- it heartbeats every `heartbeat_interval_ms` the last answer gave, one heartbeat in flight at a time;
- an answer with task lists is its assignment: it revokes what is no longer in it, then takes the rest
  (`on_revoked`, `on_assigned`), and acknowledges at once with a heartbeat listing the tasks it now owns.
  The coordinator withholds a task until its previous owner has acknowledged giving it up, so no task is
  ever owned twice. Owned tasks go out on every full heartbeat (a join, the first heartbeat after an error
  or a timeout) and whenever they changed since the last one sent; otherwise the lists are null ("unchanged");
- `close()` leaves: epoch -2 (a temporary leave: the coordinator keeps its tasks until its session expires)
  for a static member, -1 for a dynamic one;
- FENCED_MEMBER_EPOCH and UNKNOWN_MEMBER_ID lose every task and rejoin at once with epoch 0 and the same
  member id (`transitionToFenced`); coordinator errors and timeouts retry after the backoff; any other error
  is fatal (state FAILED), as the Java client raises it to the application (FENCED_INSTANCE_ID,
  UNRELEASED_INSTANCE_ID, GROUP_MAX_SIZE_REACHED, INVALID_REQUEST, STREAMS_INVALID_TOPOLOGY...).

The envelope's `topic_metadata` (the partition counts of the topics the topology names) is the gateway's to
fill on the wire (it asks the broker); a member talking to the coordinator's topics directly sends the
counts it was configured with (`topic_partitions`), on every heartbeat.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from enum import Enum
from typing import Any

from coordinator_state.envelope import INT32_MAX, TOPIC_METADATA, Api, request_envelope

from .member import MemberStats, take_answer

API_VERSION = 0  # StreamsGroupHeartbeat v0, the version this coordinator speaks (PROTOCOL.md section 10)
JOIN_EPOCH = 0
LEAVE_EPOCH = -1  # a dynamic member leaves for good
STATIC_LEAVE_EPOCH = -2  # a static member's temporary leave (KAFKA-20169)

TaskId = tuple[str, int]  # (subtopology id, partition)


@dataclass(frozen=True, slots=True)
class Tasks:
    """The tasks a member owns or is given, by role."""

    active: frozenset[TaskId] = frozenset()
    standby: frozenset[TaskId] = frozenset()
    warmup: frozenset[TaskId] = frozenset()

    def all(self) -> frozenset[TaskId]:
        return self.active | self.standby | self.warmup

    def to_wire(self) -> dict[str, list[dict[str, Any]]]:
        return {"active_tasks": _wire(self.active), "standby_tasks": _wire(self.standby),
                "warmup_tasks": _wire(self.warmup)}

    @classmethod
    def from_wire(cls, body: Mapping[str, Any]) -> Tasks:
        return cls(*(frozenset((str(e["subtopology_id"]), int(p)) for e in body[key] for p in e["partitions"])
                     for key in ("active_tasks", "standby_tasks", "warmup_tasks")))


NO_TASKS = Tasks()


def _wire(tasks: frozenset[TaskId]) -> list[dict[str, Any]]:
    by_subtopology: dict[str, list[int]] = {}
    for subtopology, partition in sorted(tasks):
        by_subtopology.setdefault(subtopology, []).append(partition)
    return [{"subtopology_id": s, "partitions": ps} for s, ps in by_subtopology.items()]


@dataclass(frozen=True, slots=True)
class Subtopology:
    """One subtopology: its tasks are its source topics' partitions; a stateful one has changelog topics
    (created by the application's coordinator, as many partitions as its tasks)."""

    subtopology_id: str
    source_topics: tuple[str, ...]
    changelog_topics: tuple[str, ...] = ()

    def to_wire(self) -> dict[str, Any]:
        return {"subtopology_id": self.subtopology_id, "source_topics": list(self.source_topics),
                "source_topic_regex": [],
                "state_changelog_topics": [{"name": t, "partitions": 0, "replication_factor": 0, "topic_configs": []}
                                           for t in self.changelog_topics],
                "repartition_sink_topics": [], "repartition_source_topics": [], "copartition_groups": []}


@dataclass(frozen=True, slots=True)
class StreamsMemberConfig:
    """A Streams application instance's group settings. The session timeout, heartbeat interval and number of
    standby replicas are the group's (`group.streams.*`, the coordinator's configuration), not the member's."""

    group_id: str  # application.id
    client_id: str
    process_id: str  # the instance's process (Kafka Streams keeps it in its state directory across restarts)
    subtopologies: tuple[Subtopology, ...]
    topic_partitions: Mapping[str, int]  # what the member sends as the envelope's topic_metadata
    instance_id: str | None = None  # group.instance.id: None = dynamic member
    topology_epoch: int = 0
    rack_id: str | None = None
    user_endpoint: tuple[str, int] | None = None  # application.server
    rebalance_timeout_ms: int = 300000  # max.poll.interval.ms
    request_timeout_ms: int = 30000
    retry_backoff_ms: int = 100
    client_host: str = "/127.0.0.1"

    def __post_init__(self) -> None:
        if not self.subtopologies:
            raise ValueError("a topology needs at least one subtopology")
        if self.instance_id is not None and not self.instance_id.strip():
            raise ValueError("instance_id must not be empty (None for a dynamic member)")

    def topology(self) -> dict[str, Any]:
        return {"epoch": self.topology_epoch, "subtopologies": [s.to_wire() for s in self.subtopologies]}

    def topic_metadata(self) -> dict[str, Any]:
        return {"topics": [{"name": name, "partitions": n} for name, n in sorted(self.topic_partitions.items())]}


class StreamsMemberState(Enum):
    """Where the member stands (Kafka's MemberState, reduced to what a sans-I/O member can be in)."""

    JOINING = "joining"  # a join (epoch 0) is due or in flight
    ACKNOWLEDGING = "acknowledging"  # it reconciled a new assignment; a heartbeat saying so is due or in flight
    STABLE = "stable"  # in the group, heartbeating
    CLOSED = "closed"  # closed by the application (a leave may still be due)
    FAILED = "failed"  # stopped by a fatal error


# Errors the member recovers from; any other is fatal.
_FENCED = frozenset({"FENCED_MEMBER_EPOCH", "UNKNOWN_MEMBER_ID"})
_RETRIABLE = frozenset({"COORDINATOR_NOT_AVAILABLE", "NOT_COORDINATOR", "COORDINATOR_LOAD_IN_PROGRESS"})

Listener = Callable[[Tasks], None]


@dataclass(slots=True)
class _InFlight:
    deadline_ms: int
    member_epoch: int
    api: str = Api.STREAMS_GROUP_HEARTBEAT


class StreamsMember:
    """One incarnation of a Streams application instance in its group (a restart is a new `StreamsMember`)."""

    def __init__(
        self,
        config: StreamsMemberConfig,
        member_id: str,
        reply_to: str,
        *,
        on_assigned: Listener | None = None,
        on_revoked: Listener | None = None,
        on_lost: Listener | None = None,
    ) -> None:
        if not member_id.strip():
            raise ValueError("member_id must not be empty")
        self.config = config
        self.member_id = member_id
        self.reply_to = reply_to
        self._on_assigned = on_assigned
        self._on_revoked = on_revoked
        self._on_lost = on_lost
        self.state = StreamsMemberState.JOINING
        self.member_epoch = JOIN_EPOCH
        self.owned = NO_TASKS
        self.heartbeat_interval_ms: int | None = None  # the group's, from the last answer
        self.endpoint_information_epoch = 0
        self.statuses: list[dict[str, Any]] = []  # the last answer's status entries
        self.fatal_error: str | None = None
        self.leave_result: str | None = None
        self.stats = MemberStats()
        self._now = 0
        self._correlation_id = 0
        self._in_flight: dict[int, _InFlight] = {}
        self._heartbeat_at: int | None = 0  # when the next heartbeat (or the join) is due
        self._full = True  # the next heartbeat reports every field the protocol lets it (a join, a retry)
        self._reported: Tasks | None = None  # the owned tasks the last heartbeat sent listed
        self._joined = False  # a join went out: a close has someone to take out of the group
        self._leave_due = False

    # ------------------------------------------------------------------ driving

    @property
    def group_instance_id(self) -> str | None:
        return self.config.instance_id

    @property
    def done(self) -> bool:
        """Closed or failed, with nothing left to send."""
        return self.state in (StreamsMemberState.CLOSED, StreamsMemberState.FAILED) and not self._leave_due

    @property
    def joined(self) -> bool:
        """Whether the member is in the group with an epoch (stable or acknowledging an assignment)."""
        return self.state in (StreamsMemberState.ACKNOWLEDGING, StreamsMemberState.STABLE)

    def poll(self, now_ms: int) -> list[dict[str, Any]]:
        """Moves the member's clock to `now_ms` and returns the request envelopes to send now."""
        self._now = max(self._now, now_ms)
        self._expire_requests()
        if self._leave_due:
            self._leave_due = False
            return [self._leave_request()]
        if (self.state not in (StreamsMemberState.CLOSED, StreamsMemberState.FAILED) and not self._in_flight
                and self._heartbeat_at is not None and self._heartbeat_at <= self._now):
            self._heartbeat_at = None  # set again by the answer
            return [self._heartbeat_request()]
        return []

    def next_deadline(self) -> int | None:
        """The earliest time at which `poll` has something to do, or None if nothing is pending."""
        deadlines = [entry.deadline_ms for entry in self._in_flight.values()]
        if self._leave_due:
            deadlines.append(self._now)
        elif self._heartbeat_at is not None and not self._in_flight and not self.done:
            deadlines.append(self._heartbeat_at)
        return min(deadlines, default=None)

    def on_response(self, envelope: Mapping[str, Any]) -> None:
        """Takes one response envelope; anything not answering a request in flight is dropped."""
        answer = take_answer(envelope, self.reply_to, self._in_flight, self.stats)
        if answer is None:
            return
        entry, body, error = answer
        if entry.member_epoch < 0:
            self.leave_result = error
        elif self.state in (StreamsMemberState.CLOSED, StreamsMemberState.FAILED):
            return
        elif error == "NONE":
            self._on_heartbeat_ok(body)
        elif error in _FENCED:
            self._fenced()
        elif error in _RETRIABLE:
            self._retry_later()
        else:
            self._fail(error)

    def close(self, leave_group: bool | None = None) -> None:
        """Stops the member, giving up its tasks; a leave (-2 when static, -1 when dynamic) goes out at the next
        `poll` unless `leave_group` is False (a process stopped without a word)."""
        if self.state in (StreamsMemberState.CLOSED, StreamsMemberState.FAILED):
            return
        self._give_up(lost=False)
        self._in_flight.clear()  # answers to earlier heartbeats change nothing any more
        self._leave_due = leave_group is not False and self._joined
        self.state = StreamsMemberState.CLOSED

    # ------------------------------------------------------------------ answers

    def _on_heartbeat_ok(self, body: Mapping[str, Any]) -> None:
        self.member_epoch = int(body["member_epoch"])
        self.heartbeat_interval_ms = int(body["heartbeat_interval_ms"])
        self.endpoint_information_epoch = int(body.get("endpoint_information_epoch", 0))
        self.statuses = list(body.get("status") or [])
        self._full = False
        self.state = StreamsMemberState.STABLE
        if body.get("active_tasks") is not None:
            self._reconcile(Tasks.from_wire(body))
        if self.owned != self._reported:
            self.state = StreamsMemberState.ACKNOWLEDGING
            self._heartbeat_at = self._now
        else:
            self._heartbeat_at = self._now + self.heartbeat_interval_ms

    def _reconcile(self, assigned: Tasks) -> None:
        """Revokes what is no longer assigned, then takes what is new (a role change is a revoke and an assign)."""
        kept = Tasks(self.owned.active & assigned.active, self.owned.standby & assigned.standby,
                     self.owned.warmup & assigned.warmup)
        revoked = Tasks(self.owned.active - kept.active, self.owned.standby - kept.standby,
                        self.owned.warmup - kept.warmup)
        added = Tasks(assigned.active - kept.active, assigned.standby - kept.standby,
                      assigned.warmup - kept.warmup)
        self.owned = assigned
        if revoked.all() and self._on_revoked is not None:
            self._on_revoked(revoked)
        if added.all() and self._on_assigned is not None:
            self._on_assigned(added)

    def _fenced(self) -> None:
        """Out of the group: every task is lost; rejoin at once with the same member id."""
        self._give_up(lost=True)
        self.member_epoch = JOIN_EPOCH
        self._rejoin(self._now)

    def _retry_later(self) -> None:
        self._full = True
        self._heartbeat_at = self._now + self.config.retry_backoff_ms

    def _fail(self, error: str) -> None:
        self.fatal_error = error
        self._give_up(lost=True)
        self._in_flight.clear()
        self.state = StreamsMemberState.FAILED

    def _rejoin(self, at: int) -> None:
        self.state = StreamsMemberState.JOINING
        self._full = True
        self._heartbeat_at = at

    def _give_up(self, *, lost: bool) -> None:
        held, self.owned = self.owned, NO_TASKS
        listener = self._on_lost if lost else self._on_revoked
        if held.all() and listener is not None:
            listener(held)

    def _expire_requests(self) -> None:
        for correlation_id, entry in sorted(self._in_flight.items()):
            if entry.deadline_ms <= self._now:
                del self._in_flight[correlation_id]
                self.stats.timeouts += 1
                if entry.member_epoch >= 0 and self.state not in (StreamsMemberState.CLOSED,
                                                                  StreamsMemberState.FAILED):
                    self._retry_later()

    # ------------------------------------------------------------------ requests

    def _envelope(self, body: dict[str, Any]) -> dict[str, Any]:
        correlation_id = self._correlation_id
        self._correlation_id = (self._correlation_id + 1) % (INT32_MAX + 1)
        self._in_flight[correlation_id] = _InFlight(self._now + self.config.request_timeout_ms,
                                                    int(body["member_epoch"]))
        api = Api.STREAMS_GROUP_HEARTBEAT
        self.stats.sent[api] = self.stats.sent.get(api, 0) + 1
        envelope = request_envelope(api, {"group_id": self.config.group_id, "member_id": self.member_id, **body},
                                    version=API_VERSION, correlation_id=correlation_id,
                                    client_id=self.config.client_id, client_host=self.config.client_host,
                                    reply_to=self.reply_to, timestamp_ms=self._now)
        envelope[TOPIC_METADATA] = self.config.topic_metadata()
        return envelope

    def _heartbeat_request(self) -> dict[str, Any]:
        c = self.config
        body: dict[str, Any] = {"member_epoch": self.member_epoch,
                                "endpoint_information_epoch": self.endpoint_information_epoch,
                                "instance_id": c.instance_id}
        if self._full:  # Kafka resends it after a failure (its sent fields are reset)
            body["rebalance_timeout_ms"] = c.rebalance_timeout_ms
        if self.state is StreamsMemberState.JOINING:
            self._joined = True
            body.update(rack_id=c.rack_id, topology=c.topology(), process_id=c.process_id, client_tags=[],
                        user_endpoint=None if c.user_endpoint is None else {"host": c.user_endpoint[0],
                                                                            "port": c.user_endpoint[1]})
        if self._full or self.owned != self._reported:
            body.update(self.owned.to_wire())
            self._reported = self.owned
        return self._envelope(body)

    def _leave_request(self) -> dict[str, Any]:
        epoch = LEAVE_EPOCH if self.config.instance_id is None else STATIC_LEAVE_EPOCH
        return self._envelope({"member_epoch": epoch, "instance_id": self.config.instance_id})

