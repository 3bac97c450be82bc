"""A consumer-group member that speaks the classic group protocol, sans I/O.

Theory of operation: the member owns no socket, thread or clock. The caller gives it time with
`poll(now_ms)`, which returns the request envelopes (PROTOCOL.md section 2) to send now, and hands it
every response envelope with `on_response(envelope)`; `next_deadline()` says when `poll` next has work.
Times a response sets (a backoff, the next heartbeat) count from the clock of the last `poll`, so a
driver polls before it delivers. The same code runs in simulated time and in real time.

It does what Kafka's Java consumer (`AbstractCoordinator` / `ConsumerCoordinator`, eager protocols)
does: JoinGroup v9 (rejoin with the given id on MEMBER_ID_REQUIRED), SyncGroup v5 (the leader runs the
assignor named by the selected protocol; with `skip_assignment` a returning static leader keeps what it
has), Heartbeat v4 every `heartbeat_interval_ms` while syncing or stable, LeaveGroup v5 on `close()`.
Before rejoining it gives up its partitions (`on_revoked`, or `on_lost` when its generation was reset).
With `commit_interval_ms` set it also manages offsets as the Java consumer with enable.auto.commit does:
after each assignment it fetches its partitions' committed offsets (OffsetFetch v8; none committed means
the start of the partition, auto.offset.reset=earliest), the application reports what it processed with
`consumed`, and it commits its positions (OffsetCommit v9) every `commit_interval_ms`, before it gives
up its partitions to rejoin, and when it closes. A static member restarted within its session gets its
old assignment back without a rebalance, and so resumes from its predecessor's committed offsets.
How each error is answered is the `_REACTIONS` table; an error not in it is fatal (state FAILED, as
the Java consumer raises FENCED_INSTANCE_ID, GROUP_MAX_SIZE_REACHED, INCONSISTENT_GROUP_PROTOCOL... to
the application). A response is acted on only if its correlation id is in flight, so a late answer to
a timed-out request and a duplicate delivered by the at-least-once sink are both dropped (`dropped`).
"""

from __future__ import annotations

import secrets
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from enum import Enum
from typing import Any, Protocol, TypeVar

from coordinator_state.consumer_protocol import (
    PROTOCOL_TYPE,
    Assignment,
    Subscription,
    TopicPartition,
    decode_assignment,
    decode_subscription,
    encode_assignment,
    encode_subscription,
    from_base64,
    to_base64,
)
from coordinator_state.envelope import API, BODY, CORRELATION_ID, INT32_MAX, Api, request_envelope, response_key

from .assignors import ASSIGNORS, MemberSubscription

# The versions this client speaks (Kafka 3.x consumers' latest for the classic protocol).
API_VERSIONS = {Api.JOIN_GROUP: 9, Api.SYNC_GROUP: 5, Api.HEARTBEAT: 4, Api.LEAVE_GROUP: 5,
                Api.OFFSET_COMMIT: 9, Api.OFFSET_FETCH: 8}
NO_GENERATION = -1
# Kafka's JOIN_GROUP_TIMEOUT_LAPSE: a JoinGroup may be parked for the whole rebalance timeout.
JOIN_TIMEOUT_LAPSE_MS = 5000

Listener = Callable[[Assignment], None]


class MemberState(Enum):
    """Where the member is in the join/sync cycle."""

    UNJOINED = "unjoined"  # a JoinGroup is due at the join deadline
    JOINING = "joining"  # a JoinGroup is in flight
    SYNCING = "syncing"  # a SyncGroup is due or in flight; heartbeats run
    STABLE = "stable"  # the assignment is held; heartbeats run
    CLOSED = "closed"  # closed by the application (a LeaveGroup may still be due)
    FAILED = "failed"  # stopped by a fatal error, e.g. FENCED_INSTANCE_ID


_TRANSITIONS: dict[MemberState, frozenset[MemberState]] = {
    MemberState.UNJOINED: frozenset({MemberState.JOINING, MemberState.CLOSED}),
    MemberState.JOINING: frozenset({MemberState.UNJOINED, MemberState.SYNCING, MemberState.CLOSED,
                                    MemberState.FAILED}),
    MemberState.SYNCING: frozenset({MemberState.UNJOINED, MemberState.STABLE, MemberState.CLOSED,
                                    MemberState.FAILED}),
    MemberState.STABLE: frozenset({MemberState.UNJOINED, MemberState.CLOSED, MemberState.FAILED}),
    MemberState.CLOSED: frozenset(),
    MemberState.FAILED: frozenset(),
}


class Reaction(Enum):
    """What the member does with an error (or a timed-out request)."""

    ADOPT_MEMBER_ID = "adopt member id"  # KIP-394: rejoin at once with the id the coordinator gave
    REJOIN = "rejoin"  # revoke, rejoin at once with the same member id and generation
    REJOIN_LATER = "rejoin after backoff"
    RESET_GENERATION = "reset generation"  # partitions lost; rejoin at once keeping the member id
    RESET_MEMBER_ID = "reset member id"  # partitions lost; rejoin at once as a new member
    RETRY_HEARTBEAT = "heartbeat after backoff"
    RETRY_FETCH = "fetch the committed offsets again"
    COMMIT_AGAIN = "commit the positions again at the next interval"
    IGNORE = "ignore"


# (api, error) -> reaction. NONE is handled per api (`_SUCCESS`); any error not listed is fatal.
# "TIMEOUT" stands for no answer within the request timeout.
_REACTIONS: dict[tuple[str, str], Reaction] = {
    ("JoinGroup", "MEMBER_ID_REQUIRED"): Reaction.ADOPT_MEMBER_ID,
    ("JoinGroup", "UNKNOWN_MEMBER_ID"): Reaction.RESET_MEMBER_ID,
    ("JoinGroup", "ILLEGAL_GENERATION"): Reaction.RESET_GENERATION,
    ("JoinGroup", "REBALANCE_IN_PROGRESS"): Reaction.REJOIN_LATER,
    ("JoinGroup", "COORDINATOR_NOT_AVAILABLE"): Reaction.REJOIN_LATER,
    ("JoinGroup", "TIMEOUT"): Reaction.REJOIN_LATER,
    ("SyncGroup", "REBALANCE_IN_PROGRESS"): Reaction.REJOIN,
    ("SyncGroup", "ILLEGAL_GENERATION"): Reaction.RESET_GENERATION,
    ("SyncGroup", "UNKNOWN_MEMBER_ID"): Reaction.RESET_MEMBER_ID,
    ("SyncGroup", "COORDINATOR_NOT_AVAILABLE"): Reaction.REJOIN_LATER,
    ("SyncGroup", "TIMEOUT"): Reaction.REJOIN_LATER,
    ("Heartbeat", "REBALANCE_IN_PROGRESS"): Reaction.REJOIN,
    ("Heartbeat", "ILLEGAL_GENERATION"): Reaction.RESET_GENERATION,
    ("Heartbeat", "UNKNOWN_MEMBER_ID"): Reaction.RESET_MEMBER_ID,
    ("Heartbeat", "COORDINATOR_NOT_AVAILABLE"): Reaction.RETRY_HEARTBEAT,
    ("Heartbeat", "TIMEOUT"): Reaction.RETRY_HEARTBEAT,
    # A failed commit is committed again at the next interval, as the Java consumer's auto-commit does (it
    # commits all consumed positions every interval); the heartbeat, not the commit, tells the member it
    # must rejoin. A fenced commit (KIP-345 zombie) is fatal, as in Java.
    ("OffsetCommit", "ILLEGAL_GENERATION"): Reaction.COMMIT_AGAIN,
    ("OffsetCommit", "UNKNOWN_MEMBER_ID"): Reaction.COMMIT_AGAIN,
    ("OffsetCommit", "REBALANCE_IN_PROGRESS"): Reaction.COMMIT_AGAIN,
    ("OffsetCommit", "COORDINATOR_NOT_AVAILABLE"): Reaction.COMMIT_AGAIN,
    ("OffsetCommit", "GROUP_ID_NOT_FOUND"): Reaction.COMMIT_AGAIN,
    ("OffsetCommit", "TIMEOUT"): Reaction.COMMIT_AGAIN,
    ("OffsetFetch", "COORDINATOR_NOT_AVAILABLE"): Reaction.RETRY_FETCH,
    ("OffsetFetch", "TIMEOUT"): Reaction.RETRY_FETCH,
}
# Why the member rejoins, sent as JoinGroup v8+ `reason` (KIP-800).
_REJOIN_REASONS: dict[Reaction, str] = {
    Reaction.ADOPT_MEMBER_ID: "need to re-join with the given member-id",
    Reaction.REJOIN: "group is rebalancing",
    Reaction.REJOIN_LATER: "retrying the join",
    Reaction.RESET_GENERATION: "generation reset",
    Reaction.RESET_MEMBER_ID: "member id reset",
}


@dataclass(frozen=True, slots=True)
class MemberConfig:
    """A consumer's group settings (Kafka's consumer config, in milliseconds)."""

    group_id: str
    client_id: str
    topics: tuple[str, ...]
    topic_partitions: Mapping[str, int]  # the metadata the leader assigns from
    group_instance_id: str | None = None  # group.instance.id: None = dynamic member
    session_timeout_ms: int = 45000
    heartbeat_interval_ms: int = 3000
    rebalance_timeout_ms: int = 300000  # max.poll.interval.ms
    request_timeout_ms: int = 30000
    retry_backoff_ms: int = 100
    assignors: tuple[str, ...] = ("range",)  # partition.assignment.strategy, in preference order
    client_host: str = "/127.0.0.1"
    # auto.commit.interval.ms with enable.auto.commit; None: the member neither fetches nor commits offsets.
    commit_interval_ms: int | None = None

    def __post_init__(self) -> None:
        unknown = [name for name in self.assignors if name not in ASSIGNORS]
        if unknown or not self.assignors:
            raise ValueError(f"assignors must be among {sorted(ASSIGNORS)}, got {list(self.assignors)}")
        if not 0 < self.heartbeat_interval_ms < self.session_timeout_ms:
            raise ValueError("heartbeat_interval_ms must be positive and below session_timeout_ms")
        if self.commit_interval_ms is not None and self.commit_interval_ms <= 0:
            raise ValueError("commit_interval_ms must be positive (or None: no offsets)")


def new_reply_to(client_id: str, suffix: str | None = None) -> str:
    """A routing key unique to this process incarnation: the client id plus a random (or given) suffix."""
    return f"{client_id}-{suffix if suffix is not None else secrets.token_hex(6)}"


@dataclass(slots=True)
class _InFlight:
    api: str
    deadline_ms: int
    generation_id: int
    member_id: str
    offsets: dict[TopicPartition, int] | None = None  # an OffsetCommit's positions


@dataclass(slots=True)
class MemberStats:
    """Counters a harness reads: requests sent by api, responses by error name, drops and timeouts."""

    sent: dict[str, int] = field(default_factory=dict)
    errors: dict[str, int] = field(default_factory=dict)
    dropped: int = 0
    timeouts: int = 0


class _Sent(Protocol):
    api: str


_Entry = TypeVar("_Entry", bound=_Sent)


def take_answer(envelope: Mapping[str, Any], reply_to: str, in_flight: dict[int, _Entry],
                stats: MemberStats) -> tuple[_Entry, Mapping[str, Any], str] | None:
    """The request in flight that `envelope` answers (no longer in flight), the answer's body and error name
    (counted); None, counted as dropped, for anything else: a late answer to a request given up on, a
    duplicate delivered by the at-least-once sink, another process's answer."""
    key = response_key(envelope)
    entry = in_flight.get(key[1]) if key is not None and key[0] == reply_to else None
    if key is None or entry is None or envelope.get(API) != entry.api:
        stats.dropped += 1
        return None
    del in_flight[key[1]]
    body = envelope.get(BODY) or {}
    error = str(body.get("error", "UNKNOWN_SERVER_ERROR"))
    stats.errors[error] = stats.errors.get(error, 0) + 1
    return entry, body, error


class GroupMember:
    """One consumer process in a group (one incarnation: a restart is a new `GroupMember`)."""

    def __init__(
        self,
        config: MemberConfig,
        reply_to: str,
        *,
        on_assigned: Listener | None = None,
        on_revoked: Listener | None = None,
        on_lost: Listener | None = None,
    ) -> None:
        self.config = config
        self.reply_to = reply_to
        self._on_assigned = on_assigned
        self._on_revoked = on_revoked
        self._on_lost = on_lost
        self.state = MemberState.UNJOINED
        self.member_id = ""
        self.generation_id = NO_GENERATION
        self.protocol_name: str | None = None
        self.leader = ""
        self.assignment = Assignment(frozenset())
        self.fatal_error: str | None = None
        self.leave_result: str | None = None
        self.stats = MemberStats()
        self._now = 0
        self._correlation_id = 0
        self._in_flight: dict[int, _InFlight] = {}
        self._join_at: int | None = 0  # UNJOINED: when to send JoinGroup
        self._join_reason: str | None = None
        self._sync_assignments: list[dict[str, str]] | None = None  # SYNCING: the SyncGroup to send
        self._heartbeat_at: int | None = None
        self._leave_due = False
        # Offsets (with commit_interval_ms): where each owned partition's processing stands, and commits.
        self.positions: dict[TopicPartition, int] = {}  # next offset to process, once fetched
        self.committed: dict[TopicPartition, int] = {}  # what the coordinator acknowledged
        self._fetch_due = False
        self._commit_at: int | None = None
        self._uncommitted = False  # positions moved since the last commit sent
        # Commits decided by a reaction or by close: sent at the next poll, stamped then, before anything else.
        self._outbox: list[dict[str, Any]] = []

    # ------------------------------------------------------------------ driving

    @property
    def done(self) -> bool:
        """Closed or failed, with nothing left to send."""
        return self.state in (MemberState.CLOSED, MemberState.FAILED) and not self._leave_due and not self._outbox

    @property
    def is_leader(self) -> bool:
        """Whether the last completed join made this member the leader."""
        return bool(self.member_id) and self.leader == self.member_id

    def poll(self, now_ms: int) -> list[dict[str, Any]]:
        """Moves the member's clock to `now_ms` and returns the request envelopes to send now."""
        self._now = max(self._now, now_ms)
        for request in self._outbox:  # decided at an earlier poll's time (a reaction, close): stamped as sent
            self._in_flight[request["correlation_id"]].deadline_ms += self._now - request["timestamp_ms"]
            request["timestamp_ms"] = self._now
        self._expire_requests()
        out, self._outbox = self._outbox, []
        if self._leave_due:
            self._leave_due = False
            out.append(self._leave_request())
        if self.state is MemberState.UNJOINED and self._join_at is not None and self._join_at <= self._now:
            self._join_at = None
            self._transition(MemberState.JOINING)
            out.append(self._join_request())
        if self.state is MemberState.SYNCING and self._sync_assignments is not None:
            out.append(self._sync_request(self._sync_assignments))
            self._sync_assignments = None
        if (self.state in (MemberState.SYNCING, MemberState.STABLE)
                and self._heartbeat_at is not None and self._heartbeat_at <= self._now):
            self._heartbeat_at = self._now + self.config.heartbeat_interval_ms
            out.append(self._heartbeat_request())
        if self.state is MemberState.STABLE and self._fetch_due:
            self._fetch_due = False
            out.append(self._fetch_request())
        if self.state is MemberState.STABLE and self._commit_at is not None and self._commit_at <= self._now:
            self._commit_at = self._now + self._commit_interval()
            if self._uncommitted:
                out.append(self._commit_request())
        return out

    def consumed(self, partition: TopicPartition, next_offset: int) -> None:
        """The application processed `partition` up to `next_offset` (exclusive): the position to commit."""
        if partition in self.positions and next_offset != self.positions[partition]:
            self.positions[partition] = next_offset
            self._uncommitted = True

    def _commit_interval(self) -> int:
        interval = self.config.commit_interval_ms
        assert interval is not None
        return interval

    def next_deadline(self) -> int | None:
        """The earliest time at which `poll` has something to do, or None if nothing is pending."""
        deadlines = [entry.deadline_ms for entry in self._in_flight.values()]
        due_now = (self._leave_due or bool(self._outbox)
                   or (self.state is MemberState.SYNCING and self._sync_assignments is not None)
                   or (self.state is MemberState.STABLE and self._fetch_due))
        if due_now:
            deadlines.append(self._now)
        if self.state is MemberState.STABLE and self._commit_at is not None:
            deadlines.append(self._commit_at)
        if self.state is MemberState.UNJOINED and self._join_at is not None:
            deadlines.append(self._join_at)
        if self.state in (MemberState.SYNCING, MemberState.STABLE) and self._heartbeat_at is not None:
            deadlines.append(self._heartbeat_at)
        return min(deadlines, default=None)

    def on_response(self, envelope: Mapping[str, Any]) -> None:
        """Takes one response envelope; anything not answering a request in flight is dropped."""
        answer = take_answer(envelope, self.reply_to, self._in_flight, self.stats)
        if answer is None:
            return
        entry, body, error = answer
        if entry.api == "LeaveGroup":
            entries = body.get("members") or [{}]
            self.leave_result = str(entries[0].get("error", error)) if error == "NONE" else error
        elif error != "NONE":
            self._on_error(entry, error, body)
        elif entry.api == "OffsetCommit":
            self._on_commit_ok(entry, body)
        elif entry.api == "OffsetFetch":
            if self._sent_in_this_generation(entry):
                self._on_fetch_ok(body)
        elif entry.api in _SUCCESS:
            _SUCCESS[entry.api](self, body)

    def close(self, leave_group: bool | None = None) -> None:
        """Stops the member, giving up its partitions.

        A LeaveGroup goes out at the next `poll` for a dynamic member, and for a static member only
        with `leave_group=True` (it leaves for good; KIP-345 static members otherwise just stop and
        keep their place until the session times out). `leave_group=False` never sends one.
        """
        if self.state in (MemberState.CLOSED, MemberState.FAILED):
            return
        if leave_group is None:
            leave_group = self.config.group_instance_id is None
        self._commit_before_giving_up()
        self._give_up_partitions(lost=False)
        self._forget_in_flight("JoinGroup", "SyncGroup", "Heartbeat")
        self._leave_due = leave_group and bool(self.member_id)
        self._transition(MemberState.CLOSED)

    # ------------------------------------------------------------------ responses

    def _on_join_ok(self, body: Mapping[str, Any]) -> None:
        self.member_id = str(body["member_id"])
        self.generation_id = int(body["generation_id"])
        self.protocol_name = body.get("protocol_name")
        self.leader = str(body.get("leader", ""))
        assignments: list[dict[str, str]] = []
        if self.is_leader and not body.get("skip_assignment", False):
            assignments = self._assign(body.get("members") or [])
        self._sync_assignments = assignments
        if self._heartbeat_at is None:
            self._heartbeat_at = self._now + self.config.heartbeat_interval_ms
        self._transition(MemberState.SYNCING)

    def _on_sync_ok(self, body: Mapping[str, Any]) -> None:
        self.assignment = decode_assignment(from_base64(str(body.get("assignment", ""))))
        self._heartbeat_at = self._now + self.config.heartbeat_interval_ms
        self._transition(MemberState.STABLE)
        if self.config.commit_interval_ms is not None:
            self._fetch_due = bool(self.assignment.partitions)
            self._commit_at = self._now + self.config.commit_interval_ms
        if self._on_assigned is not None:
            self._on_assigned(self.assignment)

    def _on_error(self, entry: _InFlight, error: str, body: Mapping[str, Any]) -> None:
        reaction = _REACTIONS.get((entry.api, error))
        if entry.api == "Heartbeat" and not self._heartbeat_is_current(entry, error):
            reaction = Reaction.IGNORE
        if reaction is None:
            self._fail(error)
        else:
            self._react(reaction, entry, str(body.get("member_id", "")))

    def _heartbeat_is_current(self, entry: _InFlight, error: str) -> bool:
        """Kafka acts on a heartbeat error (or timeout) only for the generation it was sent in; a
        rebalance notice is moot while syncing (the SyncGroup answer will say)."""
        if self.state not in (MemberState.SYNCING, MemberState.STABLE):
            return False
        if not self._sent_in_this_generation(entry):
            return False
        return not (error == "REBALANCE_IN_PROGRESS" and self.state is MemberState.SYNCING)

    def _react(self, reaction: Reaction, entry: _InFlight, given_member_id: str = "") -> None:
        if reaction is Reaction.IGNORE:
            return
        if reaction is Reaction.COMMIT_AGAIN:
            self._commit_again(entry)
            return
        if reaction is Reaction.RETRY_HEARTBEAT:
            self._heartbeat_at = self._now + self.config.retry_backoff_ms
            return
        if reaction is Reaction.RETRY_FETCH:
            self._fetch_due = self.state is MemberState.STABLE and bool(self.assignment.partitions)
            return
        lost = reaction in (Reaction.RESET_GENERATION, Reaction.RESET_MEMBER_ID)
        if not lost:
            self._commit_before_giving_up()  # the Java consumer commits before it revokes (onJoinPrepare)
        self._give_up_partitions(lost=lost)
        if lost:
            self.generation_id = NO_GENERATION
        if reaction is Reaction.RESET_MEMBER_ID:
            self.member_id = ""
        elif reaction is Reaction.ADOPT_MEMBER_ID:
            self.member_id = given_member_id
        self._forget_in_flight("JoinGroup", "SyncGroup")
        self._join_reason = _REJOIN_REASONS[reaction]
        delay = self.config.retry_backoff_ms if reaction is Reaction.REJOIN_LATER else 0
        self._join_at = self._now + delay
        self._sync_assignments = None
        self._heartbeat_at = None
        self._transition(MemberState.UNJOINED)

    def _fail(self, error: str) -> None:
        if self.state in (MemberState.CLOSED, MemberState.FAILED):
            return  # e.g. a commit sent on close was fenced: nothing is left to stop
        self.fatal_error = error
        self._give_up_partitions(lost=True)
        self._forget_in_flight("JoinGroup", "SyncGroup", "Heartbeat")
        self._transition(MemberState.FAILED)

    def _forget_in_flight(self, *apis: str) -> None:
        """Stops waiting for these requests: their answers, if they come, are dropped."""
        for correlation_id in [c for c, entry in self._in_flight.items() if entry.api in apis]:
            del self._in_flight[correlation_id]

    def _commit_before_giving_up(self) -> None:
        if self.state is MemberState.STABLE and self._uncommitted:
            self._outbox.append(self._commit_request())

    def _give_up_partitions(self, *, lost: bool) -> None:
        self.positions = {}
        self._fetch_due = False
        self._commit_at = None
        self._uncommitted = False
        if self.state is not MemberState.STABLE:
            return
        held, self.assignment = self.assignment, Assignment(frozenset())
        listener = self._on_lost if lost else self._on_revoked
        if listener is not None:
            listener(held)

    def _expire_requests(self) -> None:
        for correlation_id, entry in sorted(self._in_flight.items()):
            if entry.deadline_ms > self._now:
                continue
            if correlation_id not in self._in_flight:
                continue  # forgotten by an earlier timeout's rejoin
            del self._in_flight[correlation_id]
            self.stats.timeouts += 1
            if entry.api == "LeaveGroup" or (
                    entry.api == "Heartbeat" and not self._heartbeat_is_current(entry, "TIMEOUT")):
                continue
            self._react(_REACTIONS[(entry.api, "TIMEOUT")], entry)

    def _assign(self, members: list[Mapping[str, Any]]) -> list[dict[str, str]]:
        """The leader's work: decode every subscription and run the selected assignor."""
        subscriptions = [
            MemberSubscription(str(m["member_id"]), m.get("group_instance_id"),
                               decode_subscription(from_base64(str(m["metadata"]))).topics)
            for m in members
        ]
        assignor = ASSIGNORS[self.protocol_name or self.config.assignors[0]]
        result = assignor(subscriptions, self.config.topic_partitions)
        return [{"member_id": member_id, "assignment": to_base64(encode_assignment(assignment))}
                for member_id, assignment in sorted(result.items())]

    def _transition(self, target: MemberState) -> None:
        if target not in _TRANSITIONS[self.state]:
            raise RuntimeError(f"{self.reply_to}: illegal transition {self.state.name} -> {target.name}")
        self.state = target

    # ------------------------------------------------------------------ requests

    def _envelope(self, api: Api, body: dict[str, Any]) -> dict[str, Any]:
        correlation_id = self._correlation_id
        self._correlation_id = (self._correlation_id + 1) % (INT32_MAX + 1)
        timeout = self.config.request_timeout_ms
        if api in ("JoinGroup", "SyncGroup"):
            timeout = max(timeout, self.config.rebalance_timeout_ms + JOIN_TIMEOUT_LAPSE_MS)
        self._in_flight[correlation_id] = _InFlight(api, self._now + timeout, self.generation_id,
                                                    self.member_id)
        self.stats.sent[api] = self.stats.sent.get(api, 0) + 1
        return request_envelope(api, {"group_id": self.config.group_id, **body}, version=API_VERSIONS[api],
                                correlation_id=correlation_id, client_id=self.config.client_id,
                                client_host=self.config.client_host, reply_to=self.reply_to,
                                timestamp_ms=self._now)

    def _join_request(self) -> dict[str, Any]:
        metadata = to_base64(encode_subscription(Subscription(self.config.topics)))
        return self._envelope(Api.JOIN_GROUP, {
            "session_timeout_ms": self.config.session_timeout_ms,
            "rebalance_timeout_ms": self.config.rebalance_timeout_ms,
            "member_id": self.member_id,
            "group_instance_id": self.config.group_instance_id,
            "protocol_type": PROTOCOL_TYPE,
            "protocols": [{"name": name, "metadata": metadata} for name in self.config.assignors],
            "reason": self._join_reason,
        })

    def _sync_request(self, assignments: list[dict[str, str]]) -> dict[str, Any]:
        return self._envelope(Api.SYNC_GROUP, {
            "generation_id": self.generation_id,
            "member_id": self.member_id,
            "group_instance_id": self.config.group_instance_id,
            "protocol_type": PROTOCOL_TYPE,
            "protocol_name": self.protocol_name,
            "assignments": assignments,
        })

    def _heartbeat_request(self) -> dict[str, Any]:
        return self._envelope(Api.HEARTBEAT, {
            "generation_id": self.generation_id,
            "member_id": self.member_id,
            "group_instance_id": self.config.group_instance_id,
        })

    def _fetch_request(self) -> dict[str, Any]:
        by_topic: dict[str, list[int]] = {}
        for topic, partition in sorted(self.assignment.partitions):
            by_topic.setdefault(topic, []).append(partition)
        return self._envelope(Api.OFFSET_FETCH, {
            "groups": [{"group_id": self.config.group_id,
                        "topics": [{"name": t, "partition_indexes": ps} for t, ps in by_topic.items()]}],
            "require_stable": True,
        })

    def _commit_request(self) -> dict[str, Any]:
        self._uncommitted = False
        positions = dict(sorted(self.positions.items()))
        by_topic: dict[str, list[dict[str, Any]]] = {}
        for (topic, partition), offset in positions.items():
            by_topic.setdefault(topic, []).append({"partition_index": partition, "committed_offset": offset,
                                                   "committed_leader_epoch": -1, "committed_metadata": ""})
        request = self._envelope(Api.OFFSET_COMMIT, {
            "generation_id_or_member_epoch": self.generation_id,
            "member_id": self.member_id,
            "group_instance_id": self.config.group_instance_id,
            "topics": [{"name": t, "partitions": ps} for t, ps in by_topic.items()],
        })
        self._in_flight[request[CORRELATION_ID]].offsets = positions
        return request

    def _on_fetch_ok(self, body: Mapping[str, Any]) -> None:
        """The committed offsets of the assignment: processing starts there (or at 0 if none)."""
        if self.state is not MemberState.STABLE:
            return
        for topic in body["groups"][0]["topics"]:
            for entry in topic["partitions"]:
                tp = (str(topic["name"]), int(entry["partition_index"]))
                if tp in self.assignment.partitions and tp not in self.positions:
                    offset = int(entry["committed_offset"])
                    self.positions[tp] = max(offset, 0)
                    if offset >= 0:
                        self.committed[tp] = offset

    def _on_commit_ok(self, entry: _InFlight, body: Mapping[str, Any]) -> None:
        """Records what the coordinator acknowledged, partition by partition."""
        sent = entry.offsets or {}
        for topic in body["topics"]:
            for answered in topic["partitions"]:
                tp = (str(topic["name"]), int(answered["partition_index"]))
                if answered["error"] == "NONE" and tp in sent:
                    self.committed[tp] = sent[tp]
                elif tp in sent:
                    self._commit_again(entry)

    def _commit_again(self, entry: _InFlight) -> None:
        """A commit failed: the positions go out again at the next interval, unless the assignment it was sent
        for is gone (its positions with it)."""
        if self.state is MemberState.STABLE and self._sent_in_this_generation(entry):
            self._uncommitted = True

    def _sent_in_this_generation(self, entry: _InFlight) -> bool:
        """Whether `entry` was sent by the member as it is now (same generation and member id)."""
        return (entry.generation_id, entry.member_id) == (self.generation_id, self.member_id)

    def _leave_request(self) -> dict[str, Any]:
        return self._envelope(Api.LEAVE_GROUP, {"members": [{
            "member_id": self.member_id,
            "group_instance_id": self.config.group_instance_id,
            "reason": "the consumer is being closed",
        }]})


# What a NONE answer does; a successful Heartbeat or LeaveGroup changes nothing on the member.
_SUCCESS: dict[str, Callable[[GroupMember, Mapping[str, Any]], None]] = {
    "JoinGroup": GroupMember._on_join_ok,
    "SyncGroup": GroupMember._on_sync_ok,
}
