"""Generated coordinator traffic for the benchmark: G groups x M members through a whole life cycle.

Every group: its members join (static ones with an instance id; every fifth member is dynamic and
joins twice, the second time with the member id the first answer required), the initial rebalance
delay ends, the leader syncs with the assignments and the followers sync, then `rounds` rounds of
heartbeats, a round every 3 s. Each phase is stamped with one event time, so the file is in
event-time order and nothing in it is late. The member ids come from running the local engine on the
traffic as it is generated (they are functions of the input), so every sync and heartbeat is valid.
"""

from __future__ import annotations

import base64
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

from coordinator_state import LocalCoordinator, to_json
from coordinator_state.envelope import (
    API,
    BODY,
    GROUP_ID,
    REPLY_TO,
    SIMULATION_EPOCH_MS,
    TICK,
    Api,
    Error,
    request_envelope,
    tick_envelope,
)

HEARTBEAT_INTERVAL_MS = 3000
SESSION_TIMEOUT_MS = 30_000
METADATA = base64.b64encode(b"consumer-metadata").decode()


def is_dynamic(member: int) -> bool:
    """In generated traffic, every fifth member is dynamic."""
    return member % 5 == 4


def instance_id(group: str, member: int, dynamic: bool) -> str | None:
    return None if dynamic else f"{group}-i{member}"


def client_name(group: str, member: int) -> str:
    return f"{group}-c{member}"


def _request(api: Api, version: int, body: dict[str, Any], group: str, member: int, t: int | None,
             correlation_id: int) -> dict[str, Any]:
    """A request of member `member` of `group`, whose client id and reply_to are its client's name."""
    client = client_name(group, member)
    return request_envelope(api, body, version=version, correlation_id=correlation_id, client_id=client,
                            reply_to=client, timestamp_ms=t)


def join_request(group: str, member: int, member_id: str, t: int | None, correlation_id: int, *, dynamic: bool,
                 session_timeout_ms: int = SESSION_TIMEOUT_MS, rebalance_timeout_ms: int = 60_000) -> dict[str, Any]:
    body = {"group_id": group, "session_timeout_ms": session_timeout_ms, "rebalance_timeout_ms": rebalance_timeout_ms,
            "member_id": member_id, "group_instance_id": instance_id(group, member, dynamic),
            "protocol_type": "consumer", "protocols": [{"name": "range", "metadata": METADATA}], "reason": None}
    return _request(Api.JOIN_GROUP, 9, body, group, member, t, correlation_id)


def sync_request(group: str, member: int, member_id: str, generation: int, assignments: list[str], t: int | None,
                 correlation_id: int, *, dynamic: bool) -> dict[str, Any]:
    body = {"group_id": group, "generation_id": generation, "member_id": member_id,
            "group_instance_id": instance_id(group, member, dynamic), "protocol_type": "consumer",
            "protocol_name": "range", "assignments": [{"member_id": m, "assignment": METADATA} for m in assignments]}
    return _request(Api.SYNC_GROUP, 5, body, group, member, t, correlation_id)


def heartbeat_request(group: str, member: int, member_id: str, generation: int, t: int | None,
                      correlation_id: int, *, dynamic: bool) -> dict[str, Any]:
    body = {"group_id": group, "generation_id": generation, "member_id": member_id,
            "group_instance_id": instance_id(group, member, dynamic)}
    return _request(Api.HEARTBEAT, 4, body, group, member, t, correlation_id)


@dataclass
class Traffic:
    """The lines of a traffic file and what they hold."""

    lines: list[bytes] = field(default_factory=list)
    requests: int = 0
    ticks: int = 0
    members: int = 0
    kinds: dict[str, int] = field(default_factory=dict)

    def add(self, envelope: dict[str, Any]) -> None:
        self.lines.append(to_json(envelope).encode())
        api = str(envelope[API])
        if api == TICK:
            self.ticks += 1
        else:
            self.requests += 1
        self.kinds[api] = self.kinds.get(api, 0) + 1


def generate(groups: int, members: int, rounds: int, lateness_ms: int, initial_delay_ms: int) -> Traffic:
    """The traffic described in the module docstring; RuntimeError if any group fails to become Stable."""
    coordinator = LocalCoordinator({"group.initial.rebalance.delay.ms": initial_delay_ms})
    traffic = Traffic(members=groups * members)
    names = [f"group-{g}" for g in range(groups)]
    t_join = SIMULATION_EPOCH_MS
    for group in names:
        for member in range(members):
            request = join_request(group, member, "", t_join, 1, dynamic=is_dynamic(member))
            traffic.add(request)
            for response in coordinator.handle(request):
                if response[BODY]["error_code"] == Error.MEMBER_ID_REQUIRED:
                    rejoin = join_request(group, member, response[BODY]["member_id"], t_join, 2, dynamic=True)
                    traffic.add(rejoin)
                    coordinator.handle(rejoin)
    # KIP-134: the initial delay is extended while members keep arriving; step the clock until it ends.
    answers: list[dict[str, Any]] = []
    t_joined = t_join
    while len(answers) < groups * members:
        t_joined += initial_delay_ms
        answers += coordinator.advance_to(t_joined)
        if t_joined > t_join + 10 * initial_delay_ms + 60_000:
            raise RuntimeError("the initial rebalances do not complete: the generator is broken")
    traffic.add(tick_envelope(t_joined + lateness_ms))
    joined: dict[str, dict[int, dict[str, Any]]] = {}
    for response in answers:
        client = str(response[REPLY_TO])
        group = str(response[GROUP_ID])
        joined.setdefault(group, {})[int(client.rsplit("-c", 1)[1])] = response[BODY]
    t_sync = t_joined + lateness_ms + 100
    for group in names:
        bodies = joined.get(group, {})
        if len(bodies) != members:
            raise RuntimeError(f"{group}: {len(bodies)} of {members} members joined: the generator is broken")
        leader = next(m for m, b in bodies.items() if b["leader"] == b["member_id"])
        order = [leader, *[m for m in range(members) if m != leader]]
        for member in order:
            body = bodies[member]
            assignments = [b["member_id"] for b in bodies.values()] if member == leader else []
            request = sync_request(group, member, body["member_id"], body["generation_id"], assignments, t_sync, 3,
                                   dynamic=is_dynamic(member))
            traffic.add(request)
            for response in coordinator.handle(request):
                if response[BODY]["error_code"] != Error.NONE:
                    raise RuntimeError(f"{group}: sync refused: {response[BODY]}")
    for r in range(rounds):
        t = t_sync + (r + 1) * HEARTBEAT_INTERVAL_MS
        for group in names:
            for member, body in joined[group].items():
                traffic.add(heartbeat_request(group, member, body["member_id"], body["generation_id"], t, 10 + r,
                                              dynamic=is_dynamic(member)))
    return traffic


def members_of(groups: int, members: int) -> Iterator[tuple[str, int]]:
    for g in range(groups):
        for m in range(members):
            yield f"group-{g}", m
