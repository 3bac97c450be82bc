"""A small builder for engine tests: clients that send envelopes to a LocalCoordinator at a clock.

Like the context builder of Kafka's GroupMetadataManagerTest: `sleep(ms)` moves the clock and fires
due timers; every response is collected and looked up by (reply_to, correlation_id).
"""

from __future__ import annotations

import base64
import itertools
from dataclasses import dataclass, field
from typing import Any

from coordinator_state import SIMULATION_EPOCH_MS as EPOCH_MS
from coordinator_state import LocalCoordinator, request_envelope, response_key


def b64(text: str) -> str:
    return base64.b64encode(text.encode()).decode()


@dataclass
class Env:
    config: dict[str, Any] = field(default_factory=lambda: {"group.initial.rebalance.delay.ms": 3000})
    now: int = EPOCH_MS
    group: str = "g"

    def __post_init__(self) -> None:
        self.coord = LocalCoordinator(self.config)
        self.responses: list[dict[str, Any]] = []
        self._correlation = itertools.count(1)

    def send(self, api: str, client: str, body: dict[str, Any], version: int | None = None,
             reply_to: str | None = None) -> tuple[str, int]:
        correlation_id = next(self._correlation)
        request = request_envelope(api, {"group_id": self.group, **body}, version=version,
                                   correlation_id=correlation_id, client_id=f"client-{client}",
                                   client_host=f"/10.0.0.{len(client)}", reply_to=reply_to or client,
                                   timestamp_ms=self.now)
        self.responses += self.coord.handle(request)
        return (reply_to or client, correlation_id)

    def join(self, client: str, member_id: str = "", instance: str | None = None, version: int = 9,
             protocols: list[tuple[str, str]] | None = None, session: int = 10000, rebalance: int = 30000,
             protocol_type: str = "consumer", reply_to: str | None = None) -> tuple[str, int]:
        offered = protocols or [("range", f"{client}-range")]
        body: dict[str, Any] = {"session_timeout_ms": session, "rebalance_timeout_ms": rebalance,
                                "member_id": member_id, "group_instance_id": instance,
                                "protocol_type": protocol_type,
                                "protocols": [{"name": n, "metadata": b64(m)} for n, m in offered]}
        return self.send("JoinGroup", client, body, version, reply_to)

    def sync(self, client: str, member_id: str, generation: int, instance: str | None = None,
             assignments: dict[str, str] | None = None, version: int = 5,
             reply_to: str | None = None) -> tuple[str, int]:
        body = {"generation_id": generation, "member_id": member_id, "group_instance_id": instance,
                "protocol_type": "consumer", "protocol_name": "range",
                "assignments": [{"member_id": m, "assignment": b64(a)} for m, a in (assignments or {}).items()]}
        return self.send("SyncGroup", client, body, version, reply_to)

    def heartbeat(self, client: str, member_id: str, generation: int, instance: str | None = None,
                  version: int = 4, reply_to: str | None = None) -> tuple[str, int]:
        body = {"generation_id": generation, "member_id": member_id, "group_instance_id": instance}
        return self.send("Heartbeat", client, body, version, reply_to)

    def leave(self, client: str, members: list[tuple[str, str | None]], version: int = 5,
              reply_to: str | None = None) -> tuple[str, int]:
        body = {"members": [{"member_id": m, "group_instance_id": i, "reason": None} for m, i in members]}
        return self.send("LeaveGroup", client, body, version, reply_to)

    def sleep(self, ms: int) -> None:
        self.now += ms
        self.responses += self.coord.advance_to(self.now)

    def answer(self, key: tuple[str, int]) -> dict[str, Any]:
        """The one response to a request; fails if there is none or more than one."""
        found = [r for r in self.responses if response_key(r) == key]
        assert len(found) == 1, f"expected one response to {key}, got {found}"
        return found[0]

    def body(self, key: tuple[str, int]) -> dict[str, Any]:
        return self.answer(key)["body"]

    def error(self, key: tuple[str, int]) -> str:
        return str(self.body(key)["error"])

    def pending(self, key: tuple[str, int]) -> bool:
        return not any(response_key(r) == key for r in self.responses)

    def describe(self) -> dict[str, Any]:
        snapshot = self.coord.describe(self.group)
        assert snapshot is not None
        return snapshot

    def stable_group(self, clients: list[str], static: bool = False) -> dict[str, str]:
        """Joins `clients` (v9) and syncs them to a Stable generation; returns client -> member id."""
        ids: dict[str, str] = {}
        keys = {}
        for c in clients:
            instance = f"i-{c}" if static else None
            key = self.join(c, instance=instance)
            if not static:
                ids[c] = self.body(key)["member_id"]
                key = self.join(c, ids[c])
            keys[c] = key
        self.sleep(self.config.get("group.initial.rebalance.delay.ms", 3000) * 3 + 1)
        for c in clients:
            ids[c] = self.body(keys[c])["member_id"]
        leader = self.describe()["leader"]
        generation = self.describe()["generation_id"]
        for c in sorted(clients, key=lambda c: ids[c] != leader):
            instance = f"i-{c}" if static else None
            assignments = {m: f"assignment-{c2}" for c2, m in ids.items()} if ids[c] == leader else {}
            self.sync(c, ids[c], generation, instance, assignments)
        assert self.describe()["state"] == "Stable"
        return ids
