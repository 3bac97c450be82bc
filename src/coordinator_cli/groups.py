"""`coordinator groups`: list, describe and administer groups, the way `kafka-consumer-groups.sh` does.

The views are Kafka's (ConsumerGroupCommand): `--list` prints the group ids (with `--state`, a STATE
column); `--describe` prints, per group, the offsets view (GROUP TOPIC PARTITION CURRENT-OFFSET
LOG-END-OFFSET LAG CONSUMER-ID HOST CLIENT-ID), the members view (`--members`: GROUP CONSUMER-ID
GROUP-INSTANCE-ID HOST CLIENT-ID #PARTITIONS, ASSIGNMENT with `--verbose`) or the state view
(`--state`); `--remove-members --instance-ids a,b` removes static members (KIP-345, one LeaveGroup v5
batch); `--delete` deletes an Empty group with its offsets (DeleteGroups) and `--delete-offsets --topic T[:P,...]`
some of its offsets (OffsetDelete), printing what kafka-consumer-groups.sh prints. A value that is not known is
printed `-`, as Kafka does; `--json` prints the same data as JSON.
A streams group (KIP-1071) is described as `kafka-streams-groups.sh` does (StreamsGroupCommand): the members
view (the default; GROUP MEMBER PROCESS CLIENT-ID ASSIGNMENTS, with `--verbose` the epochs and target
assignments too) and the state view (`--state`: GROUP COORDINATOR (ID) STATE #MEMBERS, with `--verbose` the
group and target assignment epochs). Kafka's members view has no instance id column; an INSTANCE-ID column
follows MEMBER when a member is static, as GROUP-INSTANCE-ID does in the consumer groups' view.

Where the answers come from:
- a running job (the default): StreamsGroupDescribe, DescribeGroups, OffsetFetch, LeaveGroup, DeleteGroups and
  OffsetDelete go to the request topic and are answered on the response topic; the list comes from the compacted
  snapshot topic (no single group's step can answer ListGroups); LOG-END-OFFSET and LAG from the broker;
- a replay's output (`--snapshots FILE [--offsets-file FILE]`): the same engine functions over the final
  snapshots and offsets (no log end offsets there, so LOG-END-OFFSET and LAG are `-`).
"""

from __future__ import annotations

import argparse
import json
import secrets
import sys
import time
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

from kafka.errors import for_code

from coordinator_state import ListGroups, Reply, described_group
from coordinator_state.consumer_protocol import from_base64
from coordinator_state.envelope import BODY, CORRELATION_ID, Api, answer_list_groups, is_tombstone, request_envelope
from group_client import ProtocolError, decode_assignment

CLI_CLIENT_ID = "coordinator-cli"  # the CLI's Kafka client id and its requests' client_id
MISSING = "-"  # what kafka-consumer-groups.sh prints for a value it does not know
EXIT_OK, EXIT_FAILED, EXIT_USAGE = 0, 1, 2


# ------------------------------------------------------------------------------------------- the data


@dataclass(frozen=True, slots=True)
class OffsetRow:
    """One line of the offsets view: a partition the group owns or has an offset for."""

    group: str
    topic: str
    partition: int
    current_offset: int | None
    log_end_offset: int | None
    consumer_id: str | None
    host: str | None
    client_id: str | None

    @property
    def lag(self) -> int | None:
        if self.current_offset is None or self.log_end_offset is None:
            return None
        return self.log_end_offset - self.current_offset


@dataclass(frozen=True, slots=True)
class MemberRow:
    """One line of the members view."""

    group: str
    consumer_id: str
    group_instance_id: str | None
    host: str
    client_id: str
    assignment: tuple[tuple[str, int], ...]


@dataclass(slots=True)
class DescribedView:
    """A group's describe entry (DescribeGroups, or StreamsGroupDescribe), whose id and state every view shows."""

    described: dict[str, Any]

    @property
    def group(self) -> str:
        return str(self.described["group_id"])

    @property
    def state(self) -> str:
        return str(self.described["group_state"])


@dataclass(slots=True)
class GroupView(DescribedView):
    """What `--describe` shows of one group: its DescribeGroups entry, its offsets and log end offsets."""

    committed: dict[tuple[str, int], int] = field(default_factory=dict)
    log_end: dict[tuple[str, int], int] = field(default_factory=dict)

    def members(self) -> list[MemberRow]:
        return [MemberRow(self.group, m["member_id"], m.get("group_instance_id"), m["client_host"], m["client_id"],
                          _partitions(m["member_assignment"]))
                for m in self.described["members"]]

    def offset_rows(self) -> list[OffsetRow]:
        """Kafka's order: members with the most partitions first, each's partitions by number; then the
        partitions with an offset that no member owns."""
        rows = []
        owned: set[tuple[str, int]] = set()
        for member in sorted(self.members(), key=lambda m: -len(m.assignment)):
            for topic, partition in sorted(member.assignment, key=lambda tp: (tp[1], tp[0])):
                owned.add((topic, partition))
                rows.append(self._row(topic, partition, member.consumer_id, member.host, member.client_id))
        rows += [self._row(topic, partition, None, None, None)
                 for topic, partition in sorted(self.committed) if (topic, partition) not in owned]
        return rows

    def _row(self, topic: str, partition: int, consumer: str | None, host: str | None,
             client: str | None) -> OffsetRow:
        key = (topic, partition)
        return OffsetRow(self.group, topic, partition, self.committed.get(key), self.log_end.get(key), consumer, host,
                         client)


@dataclass(slots=True)
class StreamsView(DescribedView):
    """What `--describe` shows of a streams group: its StreamsGroupDescribe entry (PROTOCOL.md section 10)."""

    @property
    def topology_epoch(self) -> int | None:
        topology = self.described["topology"]
        return None if topology is None else int(topology["epoch"])


def _tasks(assignment: Mapping[str, Any], role: str) -> list[tuple[str, int]]:
    return [(t["subtopology_id"], p) for t in assignment[f"{role}_tasks"] for p in t["partitions"]]


def _task_list(assignment: Mapping[str, Any], prefix: str) -> str:
    """Kafka's ASSIGNMENTS text of one assignment: `ACTIVE: 0:[0,1]; STANDBY: 1:[2]; ` (empty roles left out)."""
    text = ""
    for role in ("active", "standby", "warmup"):
        if assignment[f"{role}_tasks"]:
            text += f"{prefix}{role.upper()}: " + "".join(
                f"{t['subtopology_id']}:[{','.join(map(str, t['partitions']))}]; " for t in assignment[f"{role}_tasks"])
    return text


def _streams_entry(snapshot: Mapping[str, Any]) -> dict[str, Any]:
    """A streams group's snapshot as the StreamsGroupDescribe entry fields the views read."""
    return {"group_id": snapshot["group_id"], "group_state": snapshot["state"],
            "group_epoch": snapshot["group_epoch"], "assignment_epoch": snapshot["assignment_epoch"],
            "topology": snapshot["topology"],
            "members": [{**{key: m[key] for key in ("member_id", "member_epoch", "instance_id", "process_id",
                                                    "client_id", "client_host", "topology_epoch")},
                         "assignment": m["assigned_tasks"], "target_assignment": m["target_assignment"],
                         "is_classic": False} for m in snapshot["members"]]}


def _partitions(assignment_base64: str) -> tuple[tuple[str, int], ...]:
    """A member's partitions from its consumer-protocol assignment; none if it is not one (another protocol)."""
    try:
        return tuple(sorted(decode_assignment(from_base64(assignment_base64)).partitions))
    except ProtocolError:
        return ()


# ------------------------------------------------------------------------------------------- where from


class Source(Protocol):
    """Where the groups are read from: a running job, or a replay's output files."""

    description: str

    def list_groups(self, states: Sequence[str]) -> list[dict[str, Any]]:
        """ListGroups v5 entries."""

    def describe(self, group: str) -> GroupView:
        """The group's DescribeGroups v5 entry, its committed offsets and (if known) log end offsets."""

    def describe_streams(self, group: str) -> StreamsView | None:
        """The group's StreamsGroupDescribe v0 entry, or None if it is not a streams group."""

    def remove_members(self, group: str, instance_ids: Sequence[str]) -> dict[str, Any]:
        """Sends a LeaveGroup v5 batch removing those static members; returns its response body."""

    def delete_group(self, group: str) -> dict[str, Any]:
        """Sends a DeleteGroups v2 of the group; returns its response body."""

    def delete_offsets(self, group: str, topics: Mapping[str, Sequence[int]]) -> dict[str, Any]:
        """Sends an OffsetDelete v0 of these topics' partitions; returns its response body."""

    def partitions(self, topic: str) -> list[int]:
        """The topic's partitions, as the broker has them (UsageError if it has not)."""


class ReplayFiles:
    """A replay's output: the final snapshots (and offsets) files (PROTOCOL.md 4a, OFFSETS_AND_LISTING.md 10)."""

    def __init__(self, snapshots: Path, offsets: Path | None) -> None:
        self.description = f"replay output {snapshots}"
        self.snapshots = {s["group_id"]: s for s in _lines(snapshots) if not is_tombstone(s)}
        self.offsets: dict[str, dict[tuple[str, int], int]] = {}
        for line in _lines(offsets) if offsets is not None else []:
            if not line.get("tombstone"):
                self.offsets.setdefault(line["group_id"], {})[(line["topic"], line["partition"])] = int(
                    line["committed_offset"])

    def list_groups(self, states: Sequence[str]) -> list[dict[str, Any]]:
        return _listed(self.snapshots.values(), states)

    def describe(self, group: str) -> GroupView:
        return GroupView(described_group(group, self.snapshots.get(group), 5, False), self.offsets.get(group, {}))

    def describe_streams(self, group: str) -> StreamsView | None:
        snapshot = self.snapshots.get(group)
        if snapshot is None or snapshot.get("group_type") != "streams":
            return None
        return StreamsView(_streams_entry(snapshot))

    def remove_members(self, group: str, instance_ids: Sequence[str]) -> dict[str, Any]:
        raise UsageError("--remove-members needs a running job, not a replay's output")

    def delete_group(self, group: str) -> dict[str, Any]:
        raise UsageError("--delete needs a running job, not a replay's output")

    def delete_offsets(self, group: str, topics: Mapping[str, Sequence[int]]) -> dict[str, Any]:
        raise UsageError("--delete-offsets needs a running job, not a replay's output")

    def partitions(self, topic: str) -> list[int]:
        raise UsageError("--delete-offsets needs a running job, not a replay's output")


def _listed(snapshots: Iterable[Mapping[str, Any]], states: Sequence[str]) -> list[dict[str, Any]]:
    """The groups a ListGroups v5 with this states filter lists, answered as a gateway answers it."""
    request = ListGroups(Reply(Api.LIST_GROUPS, 5, 0, CLI_CLIENT_ID, ""), 0, tuple(states), ())
    return list(answer_list_groups(request, snapshots)[BODY]["groups"])


def _lines(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]


class Administration:
    """The reads and administrative requests, as envelopes a coordinator answers: `ask` sends one and returns its
    answer's body (a running job's topics; any coordinator that takes envelopes), the log end offsets and partitions
    from the Kafka cluster at `bootstrap`."""

    bootstrap: str

    def ask(self, api: str, version: int, body: dict[str, Any]) -> dict[str, Any]:
        raise NotImplementedError

    def remove_members(self, group: str, instance_ids: Sequence[str]) -> dict[str, Any]:
        members = [{"member_id": "", "group_instance_id": i, "reason": "removed by coordinator groups"}
                   for i in instance_ids]
        return self.ask(Api.LEAVE_GROUP, 5, {"group_id": group, "members": members})

    def delete_group(self, group: str) -> dict[str, Any]:
        return self.ask(Api.DELETE_GROUPS, 2, {"groups_names": [group]})

    def delete_offsets(self, group: str, topics: Mapping[str, Sequence[int]]) -> dict[str, Any]:
        return self.ask(Api.OFFSET_DELETE, 0, {"group_id": group, "topics": [
            {"name": topic, "partitions": [{"partition_index": p} for p in partitions]}
            for topic, partitions in topics.items()]})

    def describe(self, group: str) -> GroupView:
        described = self.ask(Api.DESCRIBE_GROUPS, 5, {"groups": [group], "include_authorized_operations": False})
        fetched = self.ask(Api.OFFSET_FETCH, 8, {"groups": [{"group_id": group, "topics": None}],
                                                 "require_stable": False})
        committed = {(t["name"], p["partition_index"]): int(p["committed_offset"])
                     for t in fetched["groups"][0]["topics"] for p in t["partitions"] if p["committed_offset"] >= 0}
        view = GroupView(described["groups"][0], committed)
        topics = {topic for topic, _ in committed} | {topic for m in view.members() for topic, _ in m.assignment}
        view.log_end = self._log_end_offsets(topics)
        return view

    def partitions(self, topic: str) -> list[int]:
        from kafka import KafkaConsumer

        consumer = KafkaConsumer(bootstrap_servers=self.bootstrap, client_id=CLI_CLIENT_ID,
                                 enable_auto_commit=False, group_id=None)
        try:
            partitions = consumer.partitions_for_topic(topic)
        finally:
            consumer.close()
        if not partitions:
            raise UsageError(f"topic {topic!r} does not exist on {self.bootstrap}; name its partitions as "
                             f"--topic {topic}:0,1 to delete offsets of a topic that is gone")
        return sorted(partitions)

    def describe_streams(self, group: str) -> StreamsView | None:
        body = self.ask(Api.STREAMS_GROUP_DESCRIBE, 0, {"group_ids": [group], "include_authorized_operations": False})
        entry = body["groups"][0]
        return None if entry["error"] == "GROUP_ID_NOT_FOUND" else StreamsView(entry)

    def _log_end_offsets(self, topics: Iterable[str]) -> dict[tuple[str, int], int]:
        from coordinator_job.broker import Consumer, log_end_offsets

        consumer = Consumer(bootstrap_servers=self.bootstrap, client_id=CLI_CLIENT_ID, enable_auto_commit=False,
                            group_id=None)
        try:
            existing = consumer.topics()  # a topic the broker does not have has no log end offset (-)
            ends = {}
            for topic in sorted(set(topics) & existing):
                ends.update({(topic, int(p)): int(end) for p, end in log_end_offsets(consumer, topic).items()})
            return ends
        finally:
            consumer.close()


class RunningJob(Administration):
    """The live job's topics: requests out, answers back on this process's reply_to."""

    def __init__(self, settings: Mapping[str, Any], timeout_ms: int) -> None:
        from group_client.kafka_transport import KafkaTransport

        self.settings = settings
        self.timeout_ms = timeout_ms
        self.bootstrap = str(settings["bootstrap.servers"])
        self.description = f"the job on {self.bootstrap}"
        self.reply_to = f"{CLI_CLIENT_ID}-{secrets.token_hex(6)}"
        self.transport = KafkaTransport(self.bootstrap, client_id=CLI_CLIENT_ID,
                                        request_topic=str(settings["coordinator.requests.topic"]),
                                        response_topic=str(settings["coordinator.responses.topic"]))
        self._correlation_id = 0

    def close(self) -> None:
        self.transport.close()

    def ask(self, api: str, version: int, body: dict[str, Any]) -> dict[str, Any]:
        """Sends one request and waits for its answer; the answer's body."""
        self._correlation_id += 1
        correlation_id = self._correlation_id
        self.transport.send(request_envelope(api, body, version=version, correlation_id=correlation_id,
                                             client_id=CLI_CLIENT_ID, reply_to=self.reply_to, timestamp_ms=None))
        deadline = time.monotonic() + self.timeout_ms / 1000
        while (left := deadline - time.monotonic()) > 0:
            for response in self.transport.receive(self.reply_to, timeout_ms=int(left * 1000)):
                if response.get(CORRELATION_ID) == correlation_id:
                    return dict(response[BODY])
        raise TimeoutError(f"no answer to {api} from the job within {self.timeout_ms} ms (is it running?)")

    def list_groups(self, states: Sequence[str]) -> list[dict[str, Any]]:
        snapshots = self._read_compacted(str(self.settings["coordinator.snapshots.topic"]))
        return _listed(snapshots.values(), states)

    def _read_compacted(self, topic: str) -> dict[str, dict[str, Any]]:
        """The latest value of every key of a compacted topic (a tombstone removes the key)."""
        from coordinator_job.broker import read_compacted

        return read_compacted(self.bootstrap, topic, CLI_CLIENT_ID, self.timeout_ms / 1000)


class UsageError(ValueError):
    """A combination of options that cannot work; the message says which."""


# ------------------------------------------------------------------------------------------- printing


def _value(value: object) -> str:
    return MISSING if value is None else str(value)


def _table(header: Sequence[str], rows: Sequence[Sequence[object]], minimum: Sequence[int]) -> str:
    """Left-aligned columns, each as wide as its widest value (at least `minimum`), as Kafka's printf does."""
    cells = [[_value(c) for c in row] for row in rows]
    widths = [max([minimum[i], len(header[i])] + [len(r[i]) for r in cells]) for i in range(len(header))]
    lines = [" ".join(h.ljust(w) for h, w in zip(header, widths, strict=True)).rstrip()]
    lines += [" ".join(c.ljust(w) for c, w in zip(r, widths, strict=True)).rstrip() for r in cells]
    return "\n".join(lines)


def _printf(values: Sequence[object], widths: Sequence[int | None]) -> str:
    """Java's printf of `%-Ns` columns separated by one space (None: a plain `%s`, no padding), as Kafka's tools
    print their tables (trailing spaces included)."""
    cells = [_value(v) for v in values]
    return " ".join(c if w is None else c.ljust(w) for c, w in zip(cells, widths, strict=True))


def _widest(minimum: int, values: Iterable[object]) -> int:
    return max([minimum, *(len(_value(v)) for v in values)])


def offsets_table(view: GroupView) -> str:
    """ConsumerGroupCommand.printOffsets (4.4): each line starts with a newline, the table ends with one."""
    header: list[object] = ["GROUP", "TOPIC", "PARTITION", "CURRENT-OFFSET", "LOG-END-OFFSET", "LAG", "CONSUMER-ID",
                            "HOST", "CLIENT-ID"]
    rows: list[list[object]] = [[r.group, r.topic, r.partition, r.current_offset, r.log_end_offset, r.lag,
                                 r.consumer_id, r.host, r.client_id] for r in view.offset_rows()]
    widths = [_widest(15, (r[0] for r in rows)), _widest(15, (r[1] for r in rows)), 10, 15, 15, 15,
              _widest(15, (r[6] for r in rows)), _widest(15, (r[7] for r in rows)), None]
    return "".join("\n" + _printf(line, widths) for line in [header, *rows]) + "\n"


def _assignment_string(partitions: Iterable[tuple[str, int]]) -> str:
    """ConsumerGroupCommand.getAssignmentString: `topic:0,1` per topic, partitions ascending, topics sorted, `;`."""
    by_topic: dict[str, list[int]] = {}
    for topic, partition in partitions:
        by_topic.setdefault(topic, []).append(partition)
    return ";".join(sorted(f"{t}:{','.join(map(str, sorted(ps)))}" for t, ps in by_topic.items())) or MISSING


def members_table(view: GroupView, verbose: bool) -> str:
    """ConsumerGroupCommand.printMembers (4.4): GROUP-INSTANCE-ID only when a member has one; with --verbose the
    epochs (none for a classic member) and the current and target assignments (a classic member has no target)."""
    members = view.members()
    static = any(m.group_instance_id for m in members)
    assignments = [_assignment_string(m.assignment) for m in members]
    widths: list[int | None] = [
        _widest(15, (m.group for m in members)), _widest(15, (m.consumer_id for m in members)),
        *([_widest(17, (m.group_instance_id or "" for m in members))] if static else []),
        _widest(15, (m.host for m in members)), _widest(15, (m.client_id for m in members)), 15]
    header: list[object] = ["GROUP", "CONSUMER-ID", *(["GROUP-INSTANCE-ID"] if static else []), "HOST", "CLIENT-ID",
                            "#PARTITIONS"]
    epochs: list[int | None] = [15, _widest(20, assignments), 15, 20]
    lines = ["\n" + _printf(header, widths) + " "
             + (_printf(["CURRENT-EPOCH", "CURRENT-ASSIGNMENT", "TARGET-EPOCH", "TARGET-ASSIGNMENT"], epochs)
                if verbose else "")]
    for m, assignment in zip(members, assignments, strict=True):
        row = [m.group, m.consumer_id, *([m.group_instance_id or ""] if static else []), m.host, m.client_id,
               len(m.assignment)]
        lines.append(_printf(row, widths) + " " + (_printf([None, assignment, None, None], epochs) if verbose else ""))
    return "\n".join(lines) + "\n"


def state_table(view: GroupView, coordinator: str, verbose: bool) -> str:
    """ConsumerGroupCommand.printStates (4.4); a classic group has no epochs (`-` with --verbose)."""
    described = view.described
    header: list[object] = ["GROUP", "COORDINATOR (ID)", "ASSIGNMENT-STRATEGY", "STATE",
                            *(["GROUP-EPOCH", "TARGET-ASSIGNMENT-EPOCH"] if verbose else []), "#MEMBERS"]
    row: list[object] = [view.group, coordinator, described["protocol_data"] or None, view.state,
                         *([None, None] if verbose else []), len(described["members"])]
    widths = [max(15, len(view.group)), max(25, len(coordinator)), 20, 20, *([15, 25] if verbose else []), None]
    return "".join("\n" + _printf(line, widths) for line in (header, row)) + "\n"


def list_table(listed: Sequence[Mapping[str, Any]]) -> str:
    """ConsumerGroupCommand.printGroupInfo of `--list --state`: GROUP 10 wider than the longest id (at least 15)."""
    width = _widest(15, (g["group_id"] for g in listed)) + 10
    return "\n".join(_printf(line, [width, 20]) for line in
                     [["GROUP", "STATE"], *([g["group_id"], g["group_state"]] for g in listed)])


def view_json(view: GroupView) -> dict[str, Any]:
    return {
        "group": view.group,
        "state": view.state,
        "protocol_type": view.described["protocol_type"],
        "assignment_strategy": view.described["protocol_data"],
        "members": [{"consumer_id": m.consumer_id, "group_instance_id": m.group_instance_id, "host": m.host,
                     "client_id": m.client_id, "partitions": [list(tp) for tp in m.assignment]}
                    for m in view.members()],
        "offsets": [{"topic": r.topic, "partition": r.partition, "current_offset": r.current_offset,
                     "log_end_offset": r.log_end_offset, "lag": r.lag, "consumer_id": r.consumer_id,
                     "host": r.host, "client_id": r.client_id} for r in view.offset_rows()],
    }


def streams_members_table(view: StreamsView, verbose: bool) -> str:
    """StreamsGroupCommand.printMembers, with INSTANCE-ID after MEMBER when a member is static."""
    members = view.described["members"]
    static = any(m["instance_id"] for m in members)
    instance = ["INSTANCE-ID"] if static else []
    if verbose:
        header = ["GROUP", "TARGET-ASSIGNMENT-EPOCH", "TOPOLOGY-EPOCH", "MEMBER", *instance, "MEMBER-PROTOCOL",
                  "MEMBER-EPOCH", "PROCESS", "CLIENT-ID", "ASSIGNMENTS"]
        minimum = [15, 25, 15, 15, *([15] if static else []), 15, 15, 15, 15, 0]
    else:
        header = ["GROUP", "MEMBER", *instance, "PROCESS", "CLIENT-ID", "ASSIGNMENTS"]
        minimum = [15, 15, *([15] if static else []), 15, 15, 0]
    rows = []
    for m in members:
        ids = [m["member_id"], *([m["instance_id"] or MISSING] if static else [])]
        assignments = _task_list(m["assignment"], "")
        if verbose:
            assignments += _task_list(m["target_assignment"], "TARGET-")
            rows.append([view.group, view.described["assignment_epoch"], view.topology_epoch, *ids,
                         "classic" if m["is_classic"] else "streams", m["member_epoch"], m["process_id"],
                         m["client_id"], assignments.rstrip()])
        else:
            rows.append([view.group, *ids, m["process_id"], m["client_id"], assignments.rstrip()])
    return _table(header, rows, minimum)


def streams_state_table(view: StreamsView, coordinator: str, verbose: bool) -> str:
    """StreamsGroupCommand.printStates."""
    described = view.described
    epochs = ["GROUP-EPOCH", "TARGET-ASSIGNMENT-EPOCH"] if verbose else []
    values = [described["group_epoch"], described["assignment_epoch"]] if verbose else []
    return _table(["GROUP", "COORDINATOR (ID)", "STATE", *epochs, "#MEMBERS"],
                  [[view.group, coordinator, view.state, *values, len(described["members"])]],
                  [15, 25, 25, *([15, 25] if verbose else []), 0])


def streams_view_json(view: StreamsView) -> dict[str, Any]:
    def tasks(assignment: Mapping[str, Any]) -> dict[str, list[list[Any]]]:
        return {f"{role}_tasks": [list(t) for t in _tasks(assignment, role)]
                for role in ("active", "standby", "warmup")}

    described = view.described
    return {
        "group": view.group, "type": "streams", "state": view.state, "group_epoch": described["group_epoch"],
        "target_assignment_epoch": described["assignment_epoch"], "topology_epoch": view.topology_epoch,
        "members": [{"member_id": m["member_id"], "instance_id": m["instance_id"], "member_epoch": m["member_epoch"],
                     "process_id": m["process_id"], "client_id": m["client_id"], "host": m["client_host"],
                     **tasks(m["assignment"]), "target": tasks(m["target_assignment"])}
                    for m in described["members"]],
    }


def describe_streams(args: argparse.Namespace, view: StreamsView, coordinator: str) -> int:
    """`--describe` of a streams group: the members view (the default) or the state view."""
    out = sys.stdout
    if args.offsets:
        raise UsageError(f"'{view.group}' is a streams group: describe it with --members or --state "
                         "(its offsets view is kafka-streams-groups.sh's, not supported here)")
    if args.json:
        print(json.dumps(streams_view_json(view)), file=out)
        return EXIT_OK
    if view.state == "Empty":
        print(f"\nStreams group '{view.group}' has no active members.", file=sys.stderr)
    sections = []
    if args.state is not None:
        sections.append(streams_state_table(view, coordinator, args.verbose))
    if (args.members or args.state is None) and view.described["members"]:
        sections.append(streams_members_table(view, args.verbose))
    print("\n\n".join(sections), file=out)
    return EXIT_OK


def _state_notice(view: GroupView) -> str | None:
    """Kafka's notices on stderr before a describe (ConsumerGroupCommand.shouldPrintMemberState)."""
    if view.state == "Dead":
        return f"Consumer group '{view.group}' does not exist."
    if view.state == "Empty":
        return f"Consumer group '{view.group}' has no active members."
    if view.state in ("PreparingRebalance", "CompletingRebalance"):
        return f"Warning: Consumer group '{view.group}' is rebalancing."
    return None


# Kafka's exception for each error the delete commands can meet, as kafka-consumer-groups.sh names it.
_EXCEPTIONS = {
    "NON_EMPTY_GROUP": "GroupNotEmptyException",
    "GROUP_ID_NOT_FOUND": "GroupIdNotFoundException",
    "GROUP_SUBSCRIBED_TO_TOPIC": "GroupSubscribedToTopicException",
    "GROUP_AUTHORIZATION_FAILED": "GroupAuthorizationException",
    "TOPIC_AUTHORIZATION_FAILED": "TopicAuthorizationException",
    "INVALID_GROUP_ID": "InvalidGroupIdException",
    "UNKNOWN_TOPIC_OR_PARTITION": "UnknownTopicOrPartitionException",
    "COORDINATOR_NOT_AVAILABLE": "CoordinatorNotAvailableException",
}


def _exception(error_code: int) -> str:
    """An error as Kafka's tools print a thrown exception: its class and its message."""
    error = for_code(error_code)
    name = _EXCEPTIONS.get(error.message, "UnknownServerException")
    return f"org.apache.kafka.common.errors.{name}: {error.description}"


def print_deletion(group: str, body: Mapping[str, Any]) -> bool:
    """ConsumerGroupCommand.deleteGroups' report of one group; whether it was deleted."""
    [result] = body["results"]
    if result["error_code"] == 0:
        print(f"Deletion of requested consumer groups ('{group}') was successful.")
        return True
    print("\nError: Deletion of some consumer groups failed:", file=sys.stderr)
    print(f"* Group '{group}' could not be deleted due to: {_exception(result['error_code'])}")
    return False


# ConsumerGroupCommand.deleteOffsets' line for each top-level error.
_OFFSET_DELETE_ERRORS = {
    "INVALID_GROUP_ID": "'{group}' is not valid.",
    "GROUP_ID_NOT_FOUND": "'{group}' does not exist.",
    "GROUP_AUTHORIZATION_FAILED": "Access to '{group}' is not authorized.",
    "NON_EMPTY_GROUP": "Deleting offsets of a consumer group '{group}' is forbidden if the group is not empty.",
}


def print_offset_deletion(group: str, topics: Mapping[str, Sequence[int]], body: Mapping[str, Any]) -> bool:
    """ConsumerGroupCommand.deleteOffsets' report: the top-level outcome, then each partition's status (those of the
    request, all failed with a top-level error); whether every partition's offset was deleted."""
    top = body["error"]
    answered = {(t["name"], p["partition_index"]): p["error_code"] for t in body["topics"] for p in t["partitions"]}
    codes = {(topic, p): answered.get((topic, p), body["error_code"]) for topic, ps in topics.items() for p in ps}
    if top == "NONE" and any(codes.values()):
        print("\nError: Encounter some partition level error, see the follow-up details:", file=sys.stderr)
    elif top == "NONE":
        print(f"Request succeed for deleting offsets from group {group}.")
    else:
        message = _OFFSET_DELETE_ERRORS.get(top, f"Encounter some unknown error: {top}")
        print(f"\nError: {message.format(group=group)}", file=sys.stderr)
    lines = [f"{'TOPIC':<30} {'PARTITION':<15} {'STATUS':<15}"]
    for (topic, partition), code in sorted(codes.items(), key=lambda item: item[0][0] + str(item[0][1])):
        status = "Successful" if code == 0 else f"Error: :{for_code(code).description}"
        lines.append(f"{topic:<30} {partition:<15} {status:<15}")
    print("\n" + "\n".join(lines))
    return top == "NONE" and not any(codes.values())


def topic_partitions(specs: Sequence[str], source: Source) -> dict[str, list[int]]:
    """`--topic T` (every partition the broker has) or `--topic T:0,2`, repeatable, as kafka-consumer-groups.sh."""
    topics: dict[str, list[int]] = {}
    for spec in specs:
        topic, _, listed = spec.partition(":")
        if not topic:
            raise UsageError(f"--topic {spec!r}: name a topic, as T or T:0,1")
        if not listed:
            partitions = source.partitions(topic)
        elif all(p.strip().isdigit() for p in listed.split(",")):
            partitions = [int(p) for p in listed.split(",")]
        else:
            raise UsageError(f"--topic {spec!r}: partitions are numbers, as T:0,1")
        topics.setdefault(topic, [])
        topics[topic] += [p for p in partitions if p not in topics[topic]]
    return topics


# ------------------------------------------------------------------------------------------- the command


def add_groups_arguments(parser: argparse.ArgumentParser) -> None:
    action = parser.add_mutually_exclusive_group(required=True)
    action.add_argument("--list", action="store_true", help="list every group")
    action.add_argument("--describe", action="store_true", help="describe --group G (offsets, members or state)")
    action.add_argument("--remove-members", action="store_true",
                        help="remove static members of --group G by --instance-ids (LeaveGroup v5, KIP-345)")
    action.add_argument("--delete", action="store_true",
                        help="delete --group G with its committed offsets; only a group without members can go "
                             "(DeleteGroups)")
    action.add_argument("--delete-offsets", action="store_true",
                        help="delete --group G's committed offsets of --topic T (OffsetDelete); refused for a topic "
                             "the group's members subscribe to")
    parser.add_argument("--group", metavar="G", help="the group (--describe, --remove-members, --delete, "
                                                     "--delete-offsets)")
    parser.add_argument("--topic", action="append", default=[], metavar="T[:P,...]",
                        help="--delete-offsets: a topic (every partition) or some of its partitions; repeatable")
    parser.add_argument("--offsets", action="store_true", help="--describe: the offsets view (the default)")
    parser.add_argument("--members", action="store_true", help="--describe: the members view")
    parser.add_argument("--verbose", action="store_true",
                        help="--members: also each member's partitions (a streams group: epochs and target tasks); "
                             "--state of a streams group: also its epochs")
    parser.add_argument("--state", nargs="?", const="", default=None, metavar="S1,S2",
                        help="--describe: the state view; --list: a STATE column, only groups in these states "
                             "if given")
    parser.add_argument("--instance-ids", metavar="A,B", help="--remove-members: the group.instance.ids to remove")
    parser.add_argument("--json", action="store_true", help="print JSON instead of tables")
    parser.add_argument("--snapshots", metavar="FILE.jsonl",
                        help="read a replay's final snapshots instead of a running job")
    parser.add_argument("--offsets-file", metavar="FILE.jsonl", help="with --snapshots: the replay's offsets file")
    parser.add_argument("--bootstrap-servers", metavar="HOST:PORT", help="the job's Kafka (else bootstrap.servers)")
    parser.add_argument("--timeout-ms", type=int, default=30000, metavar="N",
                        help="how long to wait for the job's answers (default 30000)")


def run_groups(args: argparse.Namespace, source: Source) -> int:
    """The command over a source; returns the exit status."""
    out, err = sys.stdout, sys.stderr
    if args.list:
        states = [s for s in (args.state or "").split(",") if s.strip()]
        listed = source.list_groups(states)
        if args.json:
            print(json.dumps([{"group": g["group_id"], "state": g["group_state"], "type": g["group_type"],
                               "protocol_type": g["protocol_type"]} for g in listed]), file=out)
        elif args.state is not None:
            print(list_table(listed), file=out)
        else:
            for g in listed:
                print(g["group_id"], file=out)
        return EXIT_OK
    if args.group is None:
        raise UsageError("--describe, --remove-members, --delete and --delete-offsets need --group")
    if args.delete:
        body = source.delete_group(args.group)
        if args.json:
            [result] = body["results"]
            print(json.dumps({"group": args.group, "error": result["error"]}), file=out)
            return EXIT_OK if result["error_code"] == 0 else EXIT_FAILED
        return EXIT_OK if print_deletion(args.group, body) else EXIT_FAILED
    if args.delete_offsets:
        if not args.topic:
            raise UsageError("--delete-offsets needs --topic T (every partition) or --topic T:0,1")
        topics = topic_partitions(args.topic, source)
        body = source.delete_offsets(args.group, topics)
        if args.json:
            print(json.dumps({"group": args.group, "error": body["error"], "topics": [
                {"topic": t["name"], "partition": p["partition_index"], "error": p["error"]}
                for t in body["topics"] for p in t["partitions"]]}), file=out)
            failed = body["error_code"] != 0 or any(p["error_code"] for t in body["topics"] for p in t["partitions"])
            return EXIT_FAILED if failed else EXIT_OK
        return EXIT_OK if print_offset_deletion(args.group, topics, body) else EXIT_FAILED
    if args.remove_members:
        if not args.instance_ids:
            raise UsageError("--remove-members needs --instance-ids a,b (static members' group.instance.id)")
        body = source.remove_members(args.group, [i for i in args.instance_ids.split(",") if i])
        results = [{"group_instance_id": m["group_instance_id"], "error": m["error"]} for m in body.get("members", [])]
        if args.json:
            print(json.dumps({"group": args.group, "error": body["error"], "members": results}), file=out)
        else:
            print(f"Removing members of group '{args.group}': {body['error']}", file=out)
            for result in results:
                print(f"  {result['group_instance_id']}: {result['error']}", file=out)
        failed = body["error"] != "NONE" or any(r["error"] != "NONE" for r in results)
        return EXIT_FAILED if failed else EXIT_OK
    streams = source.describe_streams(args.group)
    if streams is not None:
        return describe_streams(args, streams, source.description)
    view = source.describe(args.group)
    if args.json:
        print(json.dumps(view_json(view)), file=out)
        return EXIT_FAILED if view.state == "Dead" else EXIT_OK
    notice = _state_notice(view)
    if notice is not None:
        print(f"\n{notice}", file=err)  # after a blank line, as Kafka's tool prints it
    if view.state == "Dead":
        return EXIT_FAILED
    sections = []
    if args.state is not None:
        sections.append(state_table(view, source.description, args.verbose))
    if args.members:
        sections.append(members_table(view, args.verbose))
    if (args.offsets or not (args.members or args.state is not None)) and view.offset_rows():
        sections.append(offsets_table(view))  # Kafka prints no offsets table for a group with no rows
    print("".join(sections), file=out, end="")
    return EXIT_OK


def groups_main(args: argparse.Namespace, settings: Mapping[str, Any]) -> int:
    """`coordinator groups`: builds the source the options name, then runs the command over it."""
    try:
        if args.snapshots:
            return run_groups(args, ReplayFiles(Path(args.snapshots),
                                                Path(args.offsets_file) if args.offsets_file else None))
        if args.offsets_file:
            raise UsageError("--offsets-file goes with --snapshots (a replay's output)")
        job = RunningJob(settings, args.timeout_ms)
        try:
            return run_groups(args, job)
        finally:
            job.close()
    except UsageError as exc:
        print(f"coordinator groups: {exc}", file=sys.stderr)
        return EXIT_USAGE
    except OSError as exc:
        print(f"coordinator groups: cannot read {exc.filename}: {exc.strerror}", file=sys.stderr)
        return EXIT_FAILED
